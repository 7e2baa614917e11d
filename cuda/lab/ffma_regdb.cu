/*
+++
name = "ffma_regdb"
title = "FP32 SIMT with register double buffering (fragments of k+1 read while the FFMAs of k run), A transposed in shared memory so both fragments are LDS.128, 8×TN per thread in strided 4×4 pieces, BM×128 tiles, cp.async pipeline with one barrier per k-tile, optional parallel split-K (partials in a workspace, the last CTA of a tile sums them in slice order; where the tiles make more than a wave, only the last partial wave's tiles are split)."
source = "register double buffering of hand-tuned SGEMMs (YHs_Sample sgemm, CUTLASS SIMT fragment prefetch); CUTLASS multistage mainloop; parallel split-K with an in-kernel fix-up by the last CTA to arrive (CUDA threadFenceReduction sample, CUTLASS split-K parallel / stream-K fix-up)"
role = "rung"
order = 18

[params]
bm = [128, 96, 80, 64]
tn = [8]             # tn = 16, bk = 16: see the v4 notes
bk = [8]
splitk = [1, 2, 3, 4, 6, 8]   # small grids: M ≤ 128 with long K, 1000^3 (12 was never the fastest)
hybrid = [0, 1]      # split-K for every tile (0) or the last partial wave's tiles only (1): by the grid

[derived]
threads = "(bm // 8) * (128 // tn)"
stages = "4 if bk == 8 else 3"                # this file's STAGES default
tiles = "cdiv(M, bm) * cdiv(N, 128)"
per_sm = "3 if bm == 64 else 2"                # CTAs per SM (registers)
wave = "SMS * per_sm"
# the tiles split: with hybrid those of the last partial wave, else all (a grid short of a wave)
rem = "0 if splitk == 1 else (tiles % wave if hybrid else tiles)"
# workspace (parallel split-K): per-tile arrival counters (256-byte aligned), then each
# slice's partial tile, bm × 128 floats, per split tile and slice
workspace = "0 if splitk == 1 else roundup(4 * rem, 256) + splitk * rem * bm * 128 * 4"

[chosen]             # the value a run that leaves it to the shape (auto) gets; the constraints say why
hybrid = "1 if splitk > 1 and tiles > wave else 0"

[[constraints]]
check = "(bm == 64 or bm == 80 or bm == 96 or bm == 128) and (tn == 8 or tn == 16) and (bk == 8 or bk == 16) and splitk >= 1"
reason = "bm must be 64, 80, 96 or 128, tn 8 or 16, bk 8 or 16, splitk ≥ 1"

[[constraints]]
check = "bm == 64 or bm == 128 or (M <= bm and M > bm - 16)"
reason = "{bm}-row tiles are for M = {bm - 15}..{bm}, one tile where 64-row ones take two; elsewhere 64-row tiles (3 blocks per SM) ran faster (M = 200: 70% of cuBLAS against 90%)"

[[constraints]]
check = "threads >= 128"
reason = "bm=64 with tn=16 is 64 threads per block: too few warps per SM"

[[constraints]]
check = "not (bm == 128 and tn == 8 and splitk > 1)"
reason = "split-K with the 256-thread 128×128 tile needs more than 128 registers (spills at 2 blocks/SM)"

[[constraints]]
check = "hybrid == (1 if splitk > 1 and tiles > wave else 0)"
reason = "{tiles} tiles for {wave} CTAs a wave at split-K {splitk} take hybrid = {1 if splitk > 1 and tiles > wave else 0} (chosen by the shape: split-K for a last partial wave's tiles only where the tiles make more than a wave, every tile split where they make less)"

[[constraints]]
check = "splitk == 1 or rem > 0"
reason = "the {tiles} tiles fill whole waves of {wave} CTAs: no tile of a partial wave to split"

[[constraints]]
check = "workspace <= 2**28"
reason = "split-K {splitk} would need {workspace // 2**20} MiB of partial tiles (at most 256): split-K is for grids too small to fill the GPU"

[[constraints]]
check = "not (bm == 128 and tn == 8 and bk == 16)"
reason = "bk=16 with the 256-thread 128×128 tile spills at 128 registers (2 blocks/SM)"

[launch]
grid = ["tiles + rem * (splitk - 1) if hybrid else cdiv(N, 128)", "1 if hybrid else cdiv(M, bm) * splitk"]
block = ["threads", 1]
shared = "stages * bk * (bm + 4 + 128) * 4"
workspace = "workspace"
+++
*/
/*
 * ffma_regdb.cu -- FP32 (and int32) SIMT GEMM with register double buffering: while
 * the FFMAs of k-step k run, the A and B fragments of step k+1 are already being read
 * from shared memory into the second register buffer, so the LDS latency hides behind
 * 64-128 independent FFMAs of the same warp (the 4-8 warps per SM sub-partition alone
 * are too few to hide it). One barrier per k-tile, placed in the tile's last k-step:
 * after it the next tile's first fragments are read and the freed stage is refilled.
 *
 * Layout: BM x BN block tile (BN = 128 here; 16-64 in ffma_narrow.cu), each thread
 * TM x TN (TM = 8) made of 4x4 pieces strided by BM/(TM/4) rows and BN/(TN/4) columns;
 * A is stored transposed (As[k][m], padded by 4: conflict-free 4-byte cp.async stores)
 * so that both fragments are LDS.128:
 * per k a thread issues TM/4 + TN/4 LDS.128 for TM*TN FFMA. Within a warp the A reads
 * hit 2 (TN=8) or 4 (TN=16) consecutive 16-byte words (broadcast) and the B reads 16 or
 * 8 consecutive 16-byte words: no bank conflicts. TN = 16 with 128 threads is the
 * cuBLAS-like "few threads, 128 accumulators each" shape (2 blocks/SM at <= 255 registers).
 * STAGES-deep cp.async pipeline (A 4-byte transposing copies, B 16-byte copies).
 *
 * Parallel split-K (SPLITK > 1): the k-range is cut into S slices, each a CTA of its own
 * (grid.y = ceil(M/BM) * S), and all of them run at once. Each writes its partial tile to
 * the workspace (thread-major float4s: coalesced, no bounds, as the workspace holds whole
 * tiles), then counts itself in the tile's arrival counter (threadfence, then atomicAdd);
 * the CTA that arrives last sums the S partials in slice order 0, 1, .., S-1 and stores C,
 * and resets the counter to 0 for the next launch. The sum's order does not depend on
 * which CTA arrives last: the result is deterministic, and bitwise the same from launch to
 * launch. Against 17_ffma_tuned's serial split-K (slice z waits for z-1 to have added its
 * part into C) no slice waits: the hand-offs there grow with S (64x4096x4096, S = 8: the
 * chain of eight load-add-stores cost more than the grid won), here the fix-up is one
 * CTA's S loads per element. cuBLAS's 64x128 SIMT kernel at that shape runs split-K 8 with
 * a separate reduction kernel.
 *
 * Technique and source: register double buffering and the strided 4x4 thread tile of
 * the well-known hand-tuned SGEMMs (e.g. Yinghan Li's "YHs_Sample" sgemm, the
 * "how to optimize GEMM" write-ups, CUTLASS SIMT warp-level fragment prefetch);
 * multistage cp.async mainloop and serial split-K as in CUTLASS. Written anew here.
 *
 * Tails: out-of-bounds elements are zero-filled by cp.async's src-size 0; B goes 4 bytes
 * at a time when N % 4 != 0; stores guarded: any M, N, K. Full k-tiles of tiles wholly in
 * bounds (with EDGE_CLAMP: of every tile) take a copy path without bounds logic where
 * N % 4 == 0. (The same for 4-byte B copies won 1-2% at N % 4 != 0 and cost 3-4% at
 * N % 4 == 0, the test on N then sitting in the copy path: not kept; see ffma_regdb_padb.
 * The narrow tiles of ffma_narrow.cu (BN < 128) do take it: there B is at most one copy
 * per thread per k-tile against 8-16 of A.)
 *
 * Tile heights 80 and 96 (160 and 192 threads) are for M in (64, 96]: 80 x 4096 x 4096 ran
 * 87% of cuBLAS as two 64-row tiles and 103% as one 80-row tile. 112 (224 threads) is not
 * offered: 2 blocks of 7 warps cap ptxas at 128 registers (4 warps per SM sub-partition),
 * and one block per SM leaves too few warps; both ran slower than two 64-row tiles.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types                     (default float)
 *   BM         block rows (64, 80, 96 or 128; 256 in 28)          (default 128)
 *   BN         block columns (128; 16-64 in 28_ffma_narrow)       (default 128)
 *   TN         columns per thread (8 or 16); TM = 8               (default 8)
 *   BK         k-tile depth                                       (default 8)
 *   STAGES     k-tiles in flight, >= 2                 (default 4 at BK=8, else 3)
 *   SPLITK     k-slices (grid.y = ceil(M/BM) * SPLITK)            (default 1)
 * Workspace (SPLITK > 1, the last kernel argument): roundup(4 * tiles, 256) bytes of
 * counters, zero between launches, then SPLITK * tiles * BM * BN floats of partial tiles.
 *   MINB       __launch_bounds__ minimum blocks per SM            (default 2)
 * Shared memory is dynamic: STAGES * (BK*(BM+4) + BK*BN) * sizeof(ELEM) bytes.
 * Launch geometry: block ((BM/TM)*(BN/TN), 1), grid (ceil(N/BN), ceil(M/BM)*SPLITK).
 * Needs sm_80 or newer.
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128          /* 16-64: ffma_narrow.cu */
#endif
#define TM 8
#ifndef TN
#define TN 8
#endif
#ifndef BK
#define BK 8
#endif
#ifndef STAGES
#if BK == 8
#define STAGES 4
#else
#define STAGES 3
#endif
#endif
#ifndef SPLITK
#define SPLITK 1
#endif
#ifndef MINB
#define MINB 2
#endif
#define APAD 4
/* EDGE_CLAMP: edge tiles (partial in M or N, N % 4 == 0) copy like interior ones, their
 * rows and columns clamped into the matrix (values past M or N reach only accumulators
 * that are never stored): at BM < 128 (64, 80, 96). In a one-wave grid (1000^3: 128 CTAs) the edge CTAs'
 * predicated copies set the kernel's time. The 256-thread 128x128 tile keeps
 * interior-only fast copies: it has no register to spare at 128 (2 blocks/SM). */
#ifndef EDGE_CLAMP
#define EDGE_CLAMP (BM < 128)
#endif
/* B4 (ffma_regdb_b4.cu): where N % 4 != 0, B's fast path is 4-byte copies laid out as
 * the warps' rows, a warp copying 32 consecutive columns of one B row per instruction
 * (coalesced, conflict-free stores), the columns past N predicated off; each B row's source
 * is one pointer per CTA, its 4 copies immediate offsets from it. No pre-pass pads B. Needs
 * the 128-column tile and EDGE_CLAMP (every full k-tile of every tile takes the fast path). */
#ifndef B4
#define B4 0
#endif
/* HYBRID (the header's hybrid, by the shape; 27 and 30 too): split-K only for the tiles of the
 * last partial wave, where the tiles make more than a wave. The grid
 * is 1-D: tiles - rem whole tiles first (data-parallel, full waves), then SPLITK slices of
 * rem tiles, rem = tiles % (SMs x CTAs per SM) (all tiles where they make less than one
 * wave, as plain split-K), worked out by the header; the kernel reads rem back from the grid
 * size. Where a last wave holds few tiles (2047 x 2049 x 1023: 544 tiles of 64 x 128 for 396
 * slots, 148 left over) plain split-K splits every tile, its fix-up traffic on all of them,
 * and still leaves a partial last wave (S = 3: 1632 CTAs, 4.1 waves). H100, % of cuBLAS
 * FP32: 2500^3 97.3 -> 102.3, 2000^3 92.7 -> 94.0, 2047x2049x1023 (rung 30) 82.2 -> 84.7. Where
 * the tiles make less than a wave the 2-D grid (HYBRID 0) stays: the same CTAs ran 1-1.7%
 * faster in that build (benchmarks/NOTES.md, issue 11 round 14). */
#ifndef HYBRID
#define HYBRID 0
#endif
#ifndef CROWS          /* B4: C stored by rows through shared memory (1) or from the fragments (0) */
#define CROWS 1
#endif
#ifndef FASTCOPY               /* bounds-free copies of interior tiles; on sm_80 ptxas spills with it */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define FASTCOPY 1
#else
#define FASTCOPY 0
#endif
#endif
#define TX (BN / TN)
#define TY (BM / TM)
#define NT (TX * TY)
#define PM (TM / 4)
#define PN (TN / 4)
#define SM_ (BM / PM)
#define SN_ (BN / PN)
#if TN % 4 || BK % 4 || BM % TM || BN % TN || STAGES < 2 || SPLITK < 1 || NT < 32
#error "inconsistent parameters"
#endif
#if B4 && (BN != 128 || !EDGE_CLAMP || PAD_B)
#error "B4 is for the 128-column tiles with EDGE_CLAMP (BM < 128), unpadded B"
#endif
/* B4: rows of B's k-tile per warp (the warps take rows w, w + NT/32, ..; BM = 80, 96: 5 and
 * 6 warps, some copy one row fewer) */
#define B4_ROWS ((BK + NT / 32 - 1) / (NT / 32))
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VEC CAT(ELEM, 4)
#define AS_WORDS (BK * (BM + APAD))
#define BS_WORDS (BK * BN)
#define STAGE_WORDS (AS_WORDS + BS_WORDS)

/* Per-thread copy state: A copies rows ar + i*(NT/BK) at k column ac (transposing 4-byte
 * copies, consecutive threads along k), B copies rows br + i*(NT/(BN/4)) at columns bc..bc+3. */
#define A_COPIES ((BM * BK + NT - 1) / NT)
#define B_COPIES ((BS_WORDS / 4 + NT - 1) / NT)
/* BM = 80, 96, 112: 160, 192, 224 threads do not split B's BK rows of 32 16-byte copies
 * evenly: the last round copies the rows left (a warp-uniform test, a warp per row) */
#define B_EVEN ((BS_WORDS / 4) % NT == 0)
#if (BM * BK) % NT || (NT % (BN / 4) && B_COPIES > 1)
#error "the tile copies must split evenly over the threads (A) and whole warps (B rows; or one round)"
#endif
/* Copies of the k-tile starting at k0 into one stage (As[k][m] transposed, Bs[k][n]). */
__device__ __forceinline__ void load_tile(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* st, int N, int K, int k0, int kend, int tid,
                                          unsigned arows_ok, bool bcol_ok, bool vec_b,
                                          int arow, int bcol, bool full,
                                          const ELEM* const (&a_src)[A_COPIES],
                                          const ELEM* const (&b_src)[B_COPIES],
                                          const ELEM* const (&b4_src)[B4_ROWS], unsigned b4_ok)
{
    ELEM* As = st;
    ELEM* Bs = st + AS_WORDS;
    const int ac = tid % BK, ar = tid / BK;
    const int bc = (tid % (BN / 4)) * 4, br = tid / (BN / 4);
#if FASTCOPY
    if (full) {                                    /* whole k-tile in bounds, N % 4 == 0 */
#if EDGE_CLAMP
        /* a_src, b_src: each copy's source at k = 0, worked out once per CTA (rows and
           columns clamped into the matrix); a k-tile adds k0 (A) or k0 rows (B), one
           IMAD.WIDE a copy. Rebuilt from row, column and k0 each k-tile, the 64-bit
           offsets took ~45 integer ops a k-tile beside 6 copies (ncu: "wait" stalls on
           them, 9% of the samples at 1000^3 with one CTA per SM). */
        const int kb = k0 * LDB_OF(N);
#define A_SRC(it) (a_src[it] + k0)
#define B_SRC(it, r) (b_src[it] + kb)
#else                                              /* the 256-thread tile has no register */
#define A_SRC(it) (A + (arow + (it) * (NT / BK)) * K + k0 + ac) /* for 5 pointers: rebuilt */
#define B_SRC(it, r) (B + (k0 + (r)) * LDB_OF(N) + bcol)
#endif
#pragma unroll
        for (int it = 0; it < A_COPIES; ++it)
            cp_async4_full(&As[ac * (BM + APAD) + ar + it * (NT / BK)], A_SRC(it));
#if B4
        /* warp w copies rows w + i * (NT/32), lane l columns l + 32j: 32 consecutive 4-byte
           copies per instruction; b4_ok bit j: column col0 + l + 32j < N (past N: zero-fill,
           no read) */
        const int w = tid / 32, l = tid % 32;
#pragma unroll
        for (int i = 0; i < B4_ROWS; ++i) {
            const int r = w + i * (NT / 32);
            if (BK % (NT / 32) && r >= BK)
                break;
            const ELEM* src = b4_src[i] + kb;
#pragma unroll
            for (int j = 0; j < BN / 32; ++j)
                cp_async4(&Bs[r * BN + l + 32 * j], src + 32 * j, (b4_ok >> j) & 1u);
        }
        (void)b_src;
#else
#pragma unroll
        for (int it = 0; it < B_COPIES; ++it) {
            const int r = br + it * (NT / (BN / 4));
            if (!B_EVEN && r >= BK)
                break;
#if BN < 128
            if (!vec_b) {                          /* narrow B, N % 4 != 0: 4-byte copies, */
#pragma unroll                                     /* columns clamped (never stored)       */
                for (int j = 0; j < 4; ++j)
                    cp_async4_full(&Bs[r * BN + bc + j], B + (k0 + r) * LDB_OF(N) + min(bcol + j, N - 1));
                continue;
            }
#endif
            cp_async16_full(&Bs[r * BN + bc], B_SRC(it, r));
        }
#endif
#undef A_SRC
#undef B_SRC
        return;
    }
#endif
    const bool ak = k0 + ac < kend;
#pragma unroll
    for (int it = 0; it < A_COPIES; ++it) {
        const bool in = ak && ((arows_ok >> it) & 1u);
        const ELEM* src = A + (arow + it * (NT / BK)) * K + k0 + ac;
        cp_async4(&As[ac * (BM + APAD) + ar + it * (NT / BK)], in ? src : A, in);
    }
#pragma unroll
    for (int it = 0; it < B_COPIES; ++it) {
        const int r = br + it * (NT / (BN / 4));
        if (!B_EVEN && r >= BK)
            break;
        const int gk = k0 + r;
        const ELEM* src = B + gk * LDB_OF(N) + bcol;
        if (vec_b) {
            const bool in = gk < kend && bcol_ok;     /* PAD_B: columns N..LDB-1 are zeros */
            cp_async16(&Bs[r * BN + bc], in ? src : B, in);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool in = gk < kend && bcol + j < N;
                cp_async4(&Bs[r * BN + bc + j], in ? src + j : B, in);
            }
        }
    }
}

/* Fragments of k-step k from one stage: fa[TM] (A column k), fb[TN] (B row k). */
__device__ __forceinline__ void load_frag(const ELEM* st, int k, int ty, int tx, ELEM* fa, ELEM* fb)
{
#pragma unroll
    for (int p = 0; p < PM; ++p) {
        const VEC x = *reinterpret_cast<const VEC*>(&st[k * (BM + APAD) + p * SM_ + ty * 4]);
        fa[4 * p + 0] = x.x; fa[4 * p + 1] = x.y; fa[4 * p + 2] = x.z; fa[4 * p + 3] = x.w;
    }
#pragma unroll
    for (int p = 0; p < PN; ++p) {
        const VEC x = *reinterpret_cast<const VEC*>(&st[AS_WORDS + k * BN + p * SN_ + tx * 4]);
        fb[4 * p + 0] = x.x; fb[4 * p + 1] = x.y; fb[4 * p + 2] = x.z; fb[4 * p + 3] = x.w;
    }
}

#if HYBRID
/* HYBRID's tile of this CTA: tiles in row-band order, column tiles fastest (as the 2-D grid
 * runs); the first dp = tiles - rem whole, then the rem tiles of the last partial wave slice
 * by slice (slice z of tile dp + i at dp + z * rem + i: the 2-D grid's order where all tiles
 * are split; slices of one tile side by side ran 1025^3 at split-K 4 15% slower), rem read
 * back from the grid size. The CTA index is read with a volatile
 * mov so that the epilogue works it out again instead of holding it through the main loop
 * (held, ptxas kept the origin live: 193 registers against 165, 2 CTAs per SM, not 3). */
struct HybridTile {
    int row0, col0;       /* the tile's origin */
    int tile, dp, rem, z; /* its index; whole tiles; split tiles; its slice (0 if whole) */
    bool part;            /* one of the split tiles */
};

__device__ __forceinline__ HybridTile hybrid_tile(int M, int N)
{
    unsigned b, g;
    asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(b));
    asm volatile("mov.u32 %0, %%nctaid.x;\n" : "=r"(g));
    const int ntx = (N + BN - 1) / BN, tiles = ((M + BM - 1) / BM) * ntx;
    HybridTile h;
    h.rem = SPLITK > 1 ? ((int)g - tiles) / (SPLITK - 1) : 0;
    h.dp = tiles - h.rem;
    h.part = (int)b >= h.dp;
    h.tile = h.part ? h.dp + ((int)b - h.dp) % h.rem : (int)b;
    h.z = h.part ? ((int)b - h.dp) / h.rem : 0;
    h.row0 = (h.tile / ntx) * BM;
    h.col0 = (h.tile % ntx) * BN;
    return h;
}
#endif

extern "C" __global__ __launch_bounds__(NT, MINB)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    ELEM* const smem = reinterpret_cast<ELEM*>(smem_raw);

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
#if !HYBRID
    const int mtiles = (M + BM - 1) / BM;
#endif
#if HYBRID
    const HybridTile ht = hybrid_tile(M, N);
    const int splits_ = ht.part ? SPLITK : 1, z_ = ht.z;
    const int row0 = ht.row0, col0 = ht.col0;
#else
    const int splits_ = SPLITK, z_ = SPLITK > 1 ? blockIdx.y / mtiles : 0;
    const int row0 = (blockIdx.y % mtiles) * BM;
    const int col0 = blockIdx.x * BN;
#endif

    const int ktiles_all = (K + BK - 1) / BK;
    const int per = (ktiles_all + splits_ - 1) / splits_;
    const int kt0 = z_ * per;
    const int ktiles = max(0, min(ktiles_all, kt0 + per) - kt0);
    const int kbeg = kt0 * BK;
    const int kend = min(K, kbeg + ktiles * BK);
    const int ldb = LDB_OF(N);                        /* row stride of B (PAD_B: padded) */
    const bool vec_b = (ldb & 3) == 0;                /* 16-byte B rows */
    const bool vec_c = (N & 3) == 0;                  /* 16-byte C rows */
    const int arow = row0 + tid / BK;                 /* first A row this thread copies */
    unsigned arows_ok = 0;
#pragma unroll
    for (int it = 0; it < A_COPIES; ++it)
        arows_ok |= (arow + it * (NT / BK) < M ? 1u : 0u) << it;
    const int bcol = col0 + (tid % (BN / 4)) * 4;     /* first B column this thread copies */
    const bool bcol_ok = bcol < N;
#if EDGE_CLAMP                                        /* clamped copies are valid on edge tiles; */
    const bool interior = vec_b || BN < 128 || B4;    /* narrow B, B4: 4-byte copies where N % 4 */
#else
    const bool interior = vec_b && row0 + BM <= M && col0 + BN <= ldb; /* whole block tile in bounds */
#endif
    /* the fast path's sources at k = 0: A rows (clamped with EDGE_CLAMP) at column ac,
       B rows br + it * (NT / (BN / 4)) at column bcol (clamped) */
    const ELEM* a_src[A_COPIES];
#pragma unroll
    for (int it = 0; it < A_COPIES; ++it)
        a_src[it] = A + (EDGE_CLAMP ? min(arow + it * (NT / BK), M - 1) : arow + it * (NT / BK)) * K
                      + tid % BK;
    const ELEM* b_src[B_COPIES];
#pragma unroll
    for (int it = 0; it < B_COPIES; ++it)
        b_src[it] = B + (tid / (BN / 4) + it * (NT / (BN / 4))) * ldb
                      + (EDGE_CLAMP ? min(bcol, max(ldb - 4, 0)) : bcol);
#if B4
    /* B4's sources at k = 0: row w + i * (NT/32), column col0 + lane */
    const ELEM* b4_src[B4_ROWS];
    unsigned b4_ok = 0;
#pragma unroll
    for (int i = 0; i < B4_ROWS; ++i)
        b4_src[i] = B + (tid / 32 + i * (NT / 32)) * ldb + col0 + tid % 32;
#pragma unroll
    for (int j = 0; j < BN / 32; ++j)
        b4_ok |= (col0 + tid % 32 + 32 * j < N ? 1u : 0u) << j;
#else
    const ELEM* const b4_src[B4_ROWS] = {};
    const unsigned b4_ok = 0;
#endif

    ACC acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = (ACC)0;

    /* prologue: tiles 0 .. STAGES-1 into every stage */
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        if (s < ktiles)
            load_tile(A, B, smem + s * STAGE_WORDS, N, K, kbeg + s * BK, kend, tid, arows_ok, bcol_ok,
                      vec_b, arow, bcol, interior && kbeg + (s + 1) * BK <= kend, a_src, b_src, b4_src, b4_ok);
        cp_async_commit();
    }
    ELEM fa[2][TM], fb[2][TN];
    cp_async_wait<STAGES - 1>();
    __syncthreads();
    load_frag(smem, 0, ty, tx, fa[0], fb[0]);

    int rd = 0;                                        /* stage of tile t */
    for (int t = 0; t < ktiles; ++t) {
        const ELEM* st = smem + rd * STAGE_WORDS;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k < BK - 1) {
                load_frag(st, k + 1, ty, tx, fa[(k + 1) & 1], fb[(k + 1) & 1]);
            } else {
                /* tile t + 1 landed for everyone, and everyone is done reading stage rd */
                cp_async_wait<STAGES - 2>();
                __syncthreads();
                const int nx = rd + 1 == STAGES ? 0 : rd + 1;
                load_frag(smem + nx * STAGE_WORDS, 0, ty, tx, fa[(k + 1) & 1], fb[(k + 1) & 1]);
                const int tn = t + STAGES;
                if (tn < ktiles)
                    load_tile(A, B, smem + rd * STAGE_WORDS, N, K, kbeg + tn * BK, kend, tid, arows_ok,
                              bcol_ok, vec_b, arow, bcol, interior && kbeg + (tn + 1) * BK <= kend,
                              a_src, b_src, b4_src, b4_ok);
                cp_async_commit();
                rd = nx;
            }
            /* Row by row, every other row right to left (a snake): the last FFMA of a row
               and the first of the next share their B value, and ptxas keeps this order
               and allocates registers after it. Against plain rows, best combination per
               shape, H100: ffma_regdb 1000^3 +2.1%, 4096^3 +2.4%, 80x4096^2 +3.1%;
               ffma_wide 4096^3 95.0 -> 97.5%, 8192^3 95.7 -> 98.1% of cuBLAS FP32
               (fewer dispatch stalls on FFMA, benchmarks/NOTES.md, issue 11 round 13). */
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int jj = 0; jj < TN; ++jj) {
                    const int j = (i & 1) ? TN - 1 - jj : jj;
                    acc[i][j] += (ACC)fa[k & 1][i] * (ACC)fb[k & 1][j];
                }
        }
    }
    cp_async_wait<0>();

#if HYBRID
    {                                                  /* the epilogue's origin, worked out again */
    const HybridTile he = hybrid_tile(M, N);          /* (see hybrid_tile) */
    const int row0 = he.row0, col0 = he.col0;
#if SPLITK > 1
    /* a split tile of the last wave: counters and partials for the rem split tiles only */
    if (he.part && !splitk_fixup<TM * TN, NT>(reinterpret_cast<ACC(&)[TM * TN]>(acc), workspace, he.rem,
                                              he.tile - he.dp, SPLITK, he.z, tid))
        return;
#endif
#elif SPLITK > 1
    /* parallel split-K (see the top): all but the tile's last CTA to arrive are done */
    if (!splitk_fixup<TM * TN, NT>(reinterpret_cast<ACC(&)[TM * TN]>(acc), workspace, mtiles * gridDim.x,
                                   (blockIdx.y % mtiles) * gridDim.x + blockIdx.x, SPLITK, z_, tid))
        return;
#endif
#if B4 && CROWS
    /* CROWS: C's rows are not 16-byte aligned either (N % 4 != 0): the tile goes through
       shared memory, half the rows (one 4-row piece per thread) at a time, and warps store
       whole rows, 32 consecutive columns per instruction, as B4 copies B; stored from the
       fragments, each 4-byte store instruction writes 32 values 16 bytes apart. A parameter
       (ffma_regdb_b4.cu takes it where K <= 2560): the extra code moves ptxas's
       allocation of the main loop (157 -> 167 registers at BM = 64, split-K 3), H100:
       1025^3 91.8 -> 93.9% of cuBLAS FP32, 127x4099x999 94.9 -> 96.9%, but 97x4099x4096
       103.7 -> 99.9%, 3000x3001x3000 102.0 -> 100.0% (benchmarks/NOTES.md, issue 11
       round 14). */
    static_assert(SM_ * (BN + 4) <= STAGES * STAGE_WORDS, "half a C tile must fit the pipeline's shared memory");
#pragma unroll
    for (int q = 0; q < PM; ++q) {
        __syncthreads();                               /* the stages (or the last half) are read */
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int p = 0; p < PN; ++p) {
                const ACC* a = &acc[4 * q + i][4 * p];
                VEC x;
                x.x = (ELEM)a[0]; x.y = (ELEM)a[1]; x.z = (ELEM)a[2]; x.w = (ELEM)a[3];
                *reinterpret_cast<VEC*>(&smem[(ty * 4 + i) * (BN + 4) + p * SN_ + tx * 4]) = x;
            }
        __syncthreads();
        const int w = tid / 32, l = tid % 32;
#pragma unroll
        for (int r = w; r < SM_; r += NT / 32) {
            const int row = row0 + q * SM_ + r;
            if (row >= M)
                break;
#pragma unroll
            for (int j = 0; j < BN / 32; ++j)
                if ((b4_ok >> j) & 1u)
                    __stcg(&C[row * N + col0 + l + 32 * j], smem[r * (BN + 4) + l + 32 * j]);
        }
    }
    (void)vec_c;
#else
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + (i / 4) * SM_ + ty * 4 + i % 4;
        if (row >= M)
            continue;
#pragma unroll
        for (int p = 0; p < PN; ++p) {
            const int col = col0 + p * SN_ + tx * 4;
            ACC* a = &acc[i][4 * p];
            if (vec_c && col + 3 < N) {
                VEC x;
                x.x = (ELEM)a[0]; x.y = (ELEM)a[1]; x.z = (ELEM)a[2]; x.w = (ELEM)a[3];
                __stcg(reinterpret_cast<VEC*>(&C[row * N + col]), x);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N)
                        __stcg(&C[row * N + col + j], (ELEM)a[j]);
            }
        }
    }
#endif
#if HYBRID
    }
#endif
}
