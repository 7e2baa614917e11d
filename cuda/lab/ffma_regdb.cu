/*
+++
name = "ffma_regdb"
title = "FP32 SIMT, register double buffering, parallel split-K; tile and B's copy picked by the shape"
summary = "Each thread keeps an 8×TN piece of the block tile of C in registers, made of 4×4 pieces strided across the tile. A is transposed into shared memory so that both operands' fragments are 16-byte loads, and the fragments of the next k-step load while this step's FFMAs run (register double buffering); a cp.async pipeline with one barrier per k-tile feeds shared memory. Tiles hold 64 to 128 rows of 128 columns, or, for N up to 64, 16 to 64 columns of 64 to 256 rows, so that a narrow B fills its tile and A is read once. Edge tiles copy clamped into the matrix like interior ones, without bounds checks. Grids too small for the GPU cut K into slices that run at once; each writes its partial tile to a workspace and the last CTA of a tile to arrive adds them in slice order, so the sum does not depend on who arrives last. Where the tiles make more than a wave, only the tiles of the partial last wave are split (hybrid). Where N % 4 != 0 no 16-byte copy of B's rows is aligned, and bcopy picks how B's k-tiles arrive: as they lie, 4 bytes at a time with bounds checks (0); from a copy padded to roundup(N, 4) with zeros by a pre-pass, so that every copy is 16 bytes (1); or as 4-byte copies laid along warp rows, coalesced and bounds-free, with no pre-pass (2). With the warp-row copies C's rows are misaligned too, and crows stores them by whole rows through shared memory where K is short enough for the stores to matter."
source = "register double buffering of hand-tuned SGEMMs (YHs_Sample sgemm, CUTLASS SIMT fragment prefetch); CUTLASS multistage mainloop and tall-and-narrow SIMT threadblock shapes; parallel split-K with an in-kernel fix-up by the last CTA to arrive (CUDA threadFenceReduction sample, CUTLASS split-K parallel / stream-K fix-up); operand padding and alignment-1 (4-byte) copies of misaligned operands as cuBLAS and CUTLASS do"
role = "rung"
order = 18

[params]
tile = [128128, 96128, 80128, 64128, 128064, 64064, 256048, 256032, 128032, 256016]
splitk = [1, 2, 3, 4, 6, 8, 12, 16]
hybrid = [0, 1]
bcopy = [0, 1, 2]
crows = [0, 1]

[descriptions]
tile = "block tile, rows × 1000 + columns: 64128 is 64 rows × 128 columns (128-column tiles; 16–64 columns for N ≤ 64)"
splitk = "k-slices per tile, run at once and added in slice order by the tile's last CTA (parallel split-K)"
hybrid = "split only the tiles of a partial last wave (1) or every tile (0): by the shape, 1 where the tiles make more than a wave"
bcopy = "B's k-tile copies where N % 4 != 0: 0 as B lies (4-byte, checked), 1 from a padded copy (pre-pass), 2 along warp rows"
crows = "C stored by whole rows through shared memory (1; with bcopy = 2 where K ≤ 2560) or from the registers (0)"

[derived]
bm = "tile // 1000"                                  # block rows (the file's BM)
bn = "tile % 1000"                                   # block columns (BN)
tn = "8 if bn == 128 else bm * bn // 1024"           # columns per thread (TN): 128 threads for the narrow tiles
threads = "(bm // 8) * (bn // tn)"
smem = "4 * 8 * (bm + 4 + bn) * 4"                   # 4 stages of 8-deep k-tiles of A (transposed, padded) and B
ldb = "roundup(N, 4)"                                # the row length of B's padded copy (bcopy = 1)
tiles = "cdiv(M, bm) * cdiv(N, bn)"
per_sm = "3 if bm == 64 else 2"                      # CTAs per SM (registers)
wave = "SMS * per_sm"
# hybrid split-K, by the shape: the last partial wave's tiles only, where the tiles make more
# than a wave (every tile is split where they make less)
split_wave = "1 if bn == 128 and splitk > 1 and tiles > wave else 0"
# the tiles split: with hybrid those of the last partial wave, else all
rem = "0 if splitk == 1 else (tiles % wave if hybrid else tiles)"
# workspace (parallel split-K): per-tile arrival counters (256-byte aligned), then each
# slice's partial tile, bm × bn floats, per split tile and slice
workspace = "0 if splitk == 1 else roundup(4 * rem, 256) + splitk * rem * bm * bn * 4"

[chosen]             # the value a run that leaves it to the shape (auto) gets; the constraints say why
hybrid = "split_wave"
bcopy = "0 if N % 4 == 0 else (1 if M >= 4096 and N > 32 else 0) if bn < 128 else 1 if split_wave or bm == 128 else 2"
crows = "1 if bcopy == 2 and K <= 2560 else 0"

[[constraints]]
check = "bcopy == 0 or N % 4 != 0"
reason = "bcopy={bcopy} is for N % 4 != 0: at N = {N} B's rows are 16-byte aligned and bcopy=0 copies them 16 bytes at a time"

[[constraints]]
check = "bcopy != 2 or (bn == 128 and bm < 128)"
reason = "the warp-row copies (bcopy=2) are for the 128-column tiles of 64, 80 or 96 rows, whose edges copy clamped (the 256-thread 128-row tile has no register for their pointers)"

[[constraints]]
check = "bn < 128 or bm == 64 or bm == 128 or (M <= bm and M > bm - 16)"
reason = "{bm}-row tiles are for M = {bm - 15}..{bm}, one tile where 64-row ones take two; elsewhere 64-row tiles (3 blocks per SM) ran faster"

[[constraints]]
check = "bn == 128 or N <= 64"
reason = "the {bn}-column tiles are for narrow N (≤ 64); N = {N} fills 128-column tiles"

[[constraints]]
check = "bn == 128 or (bn >= N and (bn - N < 16 or (bn == 64 and N > 32)))"
reason = "N = {N} takes a tile that holds it with under 16 empty columns, or 64 columns past N = 32 (not {bn}: {'two column tiles would read A twice' if bn < N else 'too many empty columns'})"

[[constraints]]
check = "not (tile == 128128 and splitk > 1)"
reason = "split-K with the 256-thread 128×128 tile needs more than 128 registers (spills at 2 blocks per SM)"

[[constraints]]
check = "bn < 128 or splitk <= 8"
reason = "12 and 16 k-slices are for the narrow tiles' few row tiles; the 128-column tiles split at most 8 ways"

[[constraints]]
check = "hybrid == 0 or (bn == 128 and splitk > 1)"
reason = "hybrid=1 splits the 128-column tiles of a partial last wave: it needs split-K and a 128-column tile (chosen by the shape)"

[[constraints]]
check = "hybrid == split_wave"
reason = "{tiles} tiles for {wave} CTAs a wave at split-K {splitk} take hybrid = {split_wave} (chosen by the shape: split-K for a last partial wave's tiles only where 128-column tiles make more than a wave, every tile split where they make less)"

[[constraints]]
check = "splitk == 1 or rem > 0"
reason = "the {tiles} tiles fill whole waves of {wave} CTAs: no tile of a partial wave to split"

[[constraints]]
check = "bn == 128 or splitk == 1 or tiles * splitk <= 4 * SMS"
reason = "split-K {splitk} is for grids short of the GPU: {tiles} tiles × {splitk} slices is over 4 CTAs per SM"

[[constraints]]
check = "workspace <= 2**28"
reason = "split-K {splitk} would need {workspace // 2**20} MiB of partial tiles (at most 256): split-K is for grids too small to fill the GPU"

[[constraints]]
check = "crows == 0 or bcopy == 2"
reason = "crows=1 with bcopy={bcopy}: C goes by rows through shared memory only with the warp-row copies (bcopy=2), whose C rows are misaligned too; the other copies keep their epilogue (chosen by the shape)"

[[constraints]]
check = "crows == (1 if bcopy == 2 and K <= 2560 else 0)"
reason = "crows={crows} with bcopy={bcopy} at K = {K}: the warp-row copies store C by rows through shared memory where K ≤ 2560 (chosen by the shape); at longer K the staging code costs the main loop more than it saves"

[launch]
grid = ["tiles + rem * (splitk - 1) if hybrid else cdiv(N, bn)", "1 if hybrid else cdiv(M, bm) * splitk"]
block = ["threads", 1]
shared = "smem"
workspace = "workspace"

[prepass]            # bcopy = 1: B (K × N) -> its copy (K × ldb), zero columns N..ldb-1
entry = "pad_b"
when = "bcopy == 1"
grid = ["cdiv(ldb, 4 * 128) if bn == 128 else cdiv(K * (ldb // 4), 128)", "min(K, 65535) if bn == 128 else 1"]
block = [128, 1]
scratch = "4 * K * ldb"
+++
*/
/*
 * ffma_regdb.cu -- FP32 (and int32) SIMT GEMM with register double buffering: while the
 * FFMAs of k-step k run, the A and B fragments of step k+1 are already being read from
 * shared memory into the second register buffer, so the shared-memory latency hides behind
 * the FFMAs of the same warp (the few warps per scheduler alone are too few to hide it).
 * One barrier per k-tile, in the tile's last k-step: after it the next tile's first
 * fragments are read and the freed stage is refilled.
 *
 * Layout: BM x BN block tile, each thread TM x TN (TM = 8) made of 4x4 pieces strided by
 * BM/(TM/4) rows and BN/(TN/4) columns. A is stored transposed (As[k][m], padded by 4:
 * conflict-free 4-byte cp.async stores) so that both fragments are LDS.128; within a warp
 * the A reads are broadcasts and the B reads consecutive 16-byte words: no bank conflicts.
 *
 * Technique and source: register double buffering and the strided 4x4 thread tile of the
 * well-known hand-tuned SGEMMs (e.g. Yinghan Li's "YHs_Sample" sgemm, CUTLASS SIMT
 * warp-level fragment prefetch); the multistage cp.async mainloop and tall-and-narrow
 * threadblock shapes of CUTLASS; operand padding and 4-byte copies of a misaligned operand
 * as the libraries do. Written anew here.
 *
 * Tiles (the header's tile = BM * 1000 + BN): 128 columns of 64, 80, 96 or 128 rows; 80
 * and 96 rows make one tile of an M a little past 64 (a 112-row tile would leave too few
 * warps or too few registers). For N <= 64 the narrow tiles (BN 16-64, BM 64-256, always
 * 128 threads, TN = BM * BN / 1024) hold N with few empty columns, so A is read once; their
 * few row tiles make split-K the way to fill the GPU.
 *
 * Parallel split-K (SPLITK > 1): the k-range is cut into S slices, each a CTA of its own,
 * all running at once. Each writes its partial tile to the workspace and counts itself in
 * the tile's arrival counter; the CTA that arrives last sums the S partials in slice order
 * 0, 1, .., S-1, stores C and resets the counter (splitk_fixup, lab_ptx.cuh). The result
 * does not depend on which CTA arrives last. Unlike a serial split-K (17_ffma_tuned), no
 * slice waits for another.
 *
 * Tails: out-of-bounds elements are zero-filled by cp.async's src-size 0; stores guarded:
 * any M, N, K. Full k-tiles of tiles wholly in bounds (with EDGE_CLAMP: of every tile) take
 * a copy path without bounds logic where B's rows are 16-byte aligned (or, BCOPY 2, along
 * warp rows; narrow tiles: four clamped 4-byte copies, one vector of B per thread).
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types                     (default float)
 *   TILE       BM * 1000 + BN (the header's tile), or BM and BN   (default 128 x 128)
 *   TN         columns per thread; TM = 8        (default 8 at BN = 128, else BM * BN / 1024)
 *   BK         k-tile depth                                       (default 8)
 *   STAGES     k-tiles in flight, >= 2                 (default 4 at BK=8, else 3)
 *   SPLITK     k-slices                                           (default 1)
 *   HYBRID     split only the last partial wave's tiles (1-D grid) (default 0)
 *   BCOPY      B's copies: 0 as B lies, 1 padded copy (PAD_B), 2 warp rows (B4) (default 0)
 *   CROWS      BCOPY 2: C by rows through shared memory           (default 1)
 *   MINB       __launch_bounds__ minimum blocks per SM            (default 2)
 * Workspace (SPLITK > 1, the last kernel argument): roundup(4 * tiles, 256) bytes of
 * counters, zero between launches, then SPLITK * tiles * BM * BN floats of partial tiles
 * (with HYBRID: for the split tiles only).
 * Shared memory is dynamic: STAGES * (BK*(BM+4) + BK*BN) * sizeof(ELEM) bytes.
 * Launch geometry: block ((BM/TM)*(BN/TN), 1), grid (ceil(N/BN), ceil(M/BM)*SPLITK), or with
 * HYBRID (tiles + rem * (SPLITK - 1), 1). Entries: matmul(A, B, C, M, N, K, workspace), and
 * pad_b(A, B, S, M, N, K), the pre-pass of BCOPY 1 (then matmul reads S for B).
 * Needs sm_80 or newer.
 */
#ifndef BCOPY
#define BCOPY 0
#endif
#define PAD_B (BCOPY == 1)            /* before lab_ptx.cuh: LDB_OF pads */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifdef TILE
#define BM (TILE / 1000)
#define BN (TILE % 1000)
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#define TM 8
#ifndef TN
#if BN == 128
#define TN 8
#else
#define TN (BM * BN / 1024)   /* the narrow tiles: 128 threads */
#endif
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
 * that are never stored): at BM < 128 and on the narrow tiles. In a grid of one wave the
 * edge CTAs' predicated copies would set the kernel's time. The 256-thread 128x128 tile
 * keeps interior-only fast copies: it has no register to spare (2 blocks per SM). */
#ifndef EDGE_CLAMP
#define EDGE_CLAMP (BM < 128 || BN < 128)
#endif
/* B4 (BCOPY 2): where N % 4 != 0, B's fast path is 4-byte copies laid out as the warps'
 * rows, a warp copying 32 consecutive columns of one B row per instruction (coalesced,
 * conflict-free stores), the columns past N predicated off; each B row's source is one
 * pointer per CTA, its 4 copies immediate offsets from it. No pre-pass pads B. Needs the
 * 128-column tile and EDGE_CLAMP (every full k-tile of every tile takes the fast path). */
#define B4 (BCOPY == 2)
/* HYBRID (the header's hybrid, by the shape): split-K only for the tiles of the last
 * partial wave, where the tiles make more than a wave. The grid is 1-D: tiles - rem whole
 * tiles first (full waves), then SPLITK slices of the rem = tiles % (SMs x CTAs per SM)
 * tiles, worked out by the header; the kernel reads rem back from the grid size. Plain
 * split-K would split every tile, pay the fix-up on all of them and still leave a partial
 * last wave. Where the tiles make less than a wave the 2-D grid (HYBRID 0) stays: it was
 * the faster build there. */
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
           IMAD.WIDE a copy (rebuilt each k-tile, the 64-bit offsets cost several integer
           instructions per copy). */
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
 * by slice (slice z of tile dp + i at dp + z * rem + i: the 2-D grid's order; slices of one
 * tile side by side ran slower), rem read back from the grid size. The CTA index is read
 * with a volatile mov so that the epilogue works it out again instead of holding it through
 * the main loop (held, the origin's registers cost a CTA per SM). */
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
               and allocates registers after it: fewer dispatch stalls on FFMA than plain
               rows. */
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
       (the header takes it where K is short, where the stores are a larger part of the
       time): the extra code moves ptxas's allocation of the main loop. */
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

/* The pre-pass of BCOPY 1 (the header runs it only then): B (K x N) copied into S (K x ldb,
 * ldb = roundup(N, 4)), columns N .. ldb - 1 zero. A wide B: a block per row (pad_b_rows,
 * lab_ptx.cuh); a narrow B is small (K x 64 at most), so one thread per 16-byte vector of S
 * over the whole of it. */
extern "C" __global__ __launch_bounds__(128)
void pad_b(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
           int M, int N, int K)
{
    (void)A; (void)M;
#if BN == 128
    pad_b_rows(B, S, N, K);
#else
    const int vecs = ((N + 3) & ~3) / 4;               /* 16-byte vectors per row of S */
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= K * vecs)
        return;
    const int k = g / vecs, c = (g % vecs) * 4;
    const ELEM* src = B + (size_t)k * N + c;
    VEC v;
    v.x = c + 0 < N ? src[0] : (ELEM)0;
    v.y = c + 1 < N ? src[1] : (ELEM)0;
    v.z = c + 2 < N ? src[2] : (ELEM)0;
    v.w = c + 3 < N ? src[3] : (ELEM)0;
    *reinterpret_cast<VEC*>(S + (size_t)k * ((N + 3) & ~3) + c) = v;
#endif
}
