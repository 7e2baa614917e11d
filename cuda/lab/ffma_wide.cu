/*
+++
name = "ffma_wide"
title = "FP32 SIMT on cuBLAS's 256×128 tile, one block per SM; any N, with B's copy picked by the shape"
summary = "256 threads each keep an 8×16 piece of a 256×128 tile of C in registers (one block per SM, as cuBLAS's FFMA kernel). A is transposed into shared memory so that both operands' fragments are 16-byte loads, and the next k-step's fragments load while this one's FFMAs run (register double buffering). Interior tiles copy from running pointers with no bounds checks, and edge tiles are shifted inside the matrix so that they do too, storing only what they own. Three choices follow the shape. The tiles of a partial last wave are split along K so that the SMs it would leave idle share them (tailk), or every tile is (splitk). Up to 16 rows past a multiple of 256 are computed by strip CTAs, a GEMV-like pass over B, instead of a row of mostly empty tiles. And where N % 4 != 0, no 16-byte copy of B's rows is aligned: bcopy picks how B's k-tiles arrive, 4 bytes at a time with bounds checks (0), from a copy padded to roundup(N, 4) with zeros by a pre-pass, so that every copy is 16 bytes (1), or as 4-byte copies laid along warp rows, coalesced and with no bounds checks (2). The warp-row copies have no pre-pass to pay and, with crows, store C by whole rows through shared memory, but that store adds split slices through C one value at a time: the shape gives them a single row of tiles (which reads B only once, so a copy of B costs as much as the GEMM's own pass over it), and K up to 1024 where no slices add through C (C's stores then a large part of the time); the padded copy's 16-byte loads and folded split-K epilogue win elsewhere."
source = "cuBLAS sm80 256x128x8 FFMA kernel shape (seen in ncu); register double buffering of hand-tuned SGEMMs; Triton grouped block order; CUTLASS multistage mainloop, serial split-K and alignment-1 (4-byte) copies of misaligned operands; operand padding for misaligned leading dimensions; stream-K's data-parallel + split-K hybrid for the last wave (Osama et al., 2023)"
role = "rung"
order = 19

[params]
bm = [256]
bk = [8, 16]
stages = [4]
sw = [1, 8]
splitk = [1, 4]
tailk = [8, 1]
bcopy = [0, 1, 2]
crows = [0, 1]

[descriptions]
bm = "rows of a block tile (256 only: 128 spills on sm_90; ffma_regdb has 128-row tiles)"
bk = "k-tile depth: k rows of A's and B's tiles per pipeline stage"
stages = "k-tiles in flight in the cp.async pipeline"
sw = "block rows per group of the launch order (1: row-major; 8: a group's tiles share B's columns in L2)"
splitk = "k-slices of every tile, added in order through C (serial split-K; for few, long tiles)"
tailk = "k-slices of each tile of a partial last wave, run on the SMs it leaves idle (1: none)"
bcopy = "B's k-tile copies where N % 4 != 0: 0 as B lies (4-byte, checked), 1 from a padded copy (pre-pass), 2 along warp rows"
crows = "C stored by whole rows through shared memory (1; with bcopy = 2 where K <= 3072) or from the registers (0)"

[defaults.sm_90]     # H100, H200: the deeper k-tile is faster at 4096³ and 8192³ (benchmarks/NOTES.md, ladder v5)
bk = 16

[derived]
smem = "stages * bk * (bm + 4 + 128) * 4"
ldb = "roundup(N, 4)"                # the row length of B's padded copy (bcopy = 1)
# the strip: where M is at most 16 rows past a multiple of bm, those rows are computed by
# cdiv(N, 128) strip CTAs instead of a row of tiles (see the kernel)
srows = "M % bm if M > bm and M % bm <= 16 else 0"
strip = "cdiv(N, 128) if srows else 0"
mtiles = "cdiv(M - srows, bm)"
tiles = "mtiles * cdiv(N, 128)"
# split-K slices: splitk while the per-tile counters suffice (MAX_TILES = 65536), else 1
splits = "splitk if tiles <= 65536 else 1"
# tail split: the r = tiles % SMS tiles of the partial last wave (1 CTA per SM) in tailk
# k-slices, when their r * tailk CTAs take at most half a tile's time (cdiv(r * tailk, SMS)
# rounds of 1 / tailk each); a nearly full last wave stays whole
last = "tiles % SMS"
tail = "last if tailk > 1 and tiles <= 65536 and 2 * cdiv(last * tailk, SMS) <= tailk else 0"

[chosen]             # the value a run that leaves it to the shape (auto) gets; the constraints say why
# B's copies, from the lab bests at N % 4 != 0 (benchmarks/NOTES.md, issue 36: ffma_wide)
bcopy = "0 if N % 4 == 0 else 2 if mtiles == 1 or (K <= 1024 and splits == 1 and tail == 0) else 1"
crows = "1 if bcopy == 2 and K <= 3072 else 0"

[[constraints]]
check = "bm == 256"
reason = "bm must be 256 (bm=128 spills at 128 registers on sm_90; use ffma_regdb)"

[[constraints]]
check = "(bk == 8 or bk == 16) and stages >= 2 and sw >= 1 and splitk >= 1"
reason = "bk must be 8 or 16, stages ≥ 2, sw ≥ 1, splitk ≥ 1"

[[constraints]]
check = "tailk >= 1 and (splitk == 1 or tailk == 1)"
reason = "tailk must be ≥ 1, and split-K of every tile (splitk={splitk}) excludes the last wave's (tailk={tailk})"

[[constraints]]
check = "bcopy == 0 or bcopy == 1 or bcopy == 2"
reason = "bcopy must be 0 (B as it lies), 1 (a padded copy) or 2 (warp-row copies)"

[[constraints]]
check = "bcopy == 0 or N % 4 != 0"
reason = "bcopy={bcopy} is for N % 4 != 0: at N = {N} B's rows are 16-byte aligned and bcopy=0 copies them 16 bytes at a time"

[[constraints]]
check = "crows == (1 if bcopy == 2 and K <= 3072 else 0)"
reason = "crows={crows} with bcopy={bcopy} at K = {K}: C goes by rows through shared memory only with the warp-row copies (bcopy=2) where K ≤ 3072 (chosen by the shape); at longer K its staging code costs the main loop more than it saves, and the other copies keep their epilogue"

[[constraints]]
check = "smem <= 227 * 1024"
reason = "{smem} B of shared memory (> 227 KB)"

[launch]
grid = ["tiles + tail * (tailk - 1) + strip if tailk > 1 else cdiv(N, 128)",
        "1 if tailk > 1 else mtiles * splits + (1 if srows else 0)"]
block = [256, 1]
shared = "smem"

[prepass]            # bcopy=1: B (K × N) copied to K rows of ldb floats, columns N .. ldb-1 zero
entry = "pad_b"
when = "bcopy == 1"
grid = ["cdiv(ldb, 4 * 128)", "min(K, 65535)"]
block = [128, 1]
scratch = "4 * K * ldb"
+++
*/
/*
 * ffma_wide.cu -- FP32 (and int32) SIMT GEMM, 256 threads on 256x128 tiles of C.
 *
 * Layout: each thread computes 8 x 16 of the tile in strided 4x4 pieces (128 accumulators, one
 * block per SM at <= 255 registers), so that per k-step it issues 6 LDS.128 per 128 FFMAs.
 * A is transposed in shared memory (As[k][m], padded by 4: conflict-free 4-byte cp.async
 * stores); both fragments are LDS.128, broadcast or consecutive within a warp. A STAGES-deep
 * cp.async pipeline with one barrier per k-tile; the next k-step's fragments load while this
 * one's FFMAs run (register double buffering). Interior tiles copy from running pointers: the
 * sources advance by BK (A) and BK rows (B) per k-tile, the shared destinations are a stage
 * base plus per-thread constants. Optional grouped ("swizzled") block order: SW block rows
 * share the columns of B while they run, for L2 reuse.
 *
 * Technique and sources: register double buffering and the strided 4x4 thread tile of the
 * well-known hand-tuned SGEMMs (YHs_Sample sgemm, CUTLASS SIMT warp-level fragment
 * prefetch); the 256x128x8 one-block-per-SM shape of cuBLAS's sm80 FFMA kernel; grouped block
 * order as in Triton's matmul tutorial; multistage cp.async mainloop and serial split-K as in
 * CUTLASS. Written anew here.
 *
 * Bounds: out-of-bounds elements are zero-filled by cp.async's src-size 0 and stores are
 * guarded: any M, N, K. Edge tiles are shifted inside the matrix (below) so that they take the
 * bounds-free copies too; only K's last partial k-tile and matrices under one tile do not.
 *
 * B's copies (BCOPY). With N % 4 != 0 B's rows start at N * 4-byte strides and no 16-byte
 * copy of them is aligned:
 *   0  B as it lies: 16-byte copies where N % 4 == 0, else 4-byte copies with a bounds check
 *      per element on every tile.
 *   1  a padded copy: a pre-pass (pad_b) copies B into K rows of LDB = roundup(N, 4) floats,
 *      the last LDB - N zero (PAD_B = 1 in lab_ptx.cuh), and the kernel reads that copy: every
 *      B copy is 16 bytes and the zero columns make edge copies that straddle N exact. Operand
 *      padding, as libraries do for a misaligned leading dimension; C keeps its N columns.
 *   2  warp rows: warp w copies B rows w, w + 8 of the k-tile, lane l columns l, l + 32, ..,
 *      so that one 4-byte cp.async instruction moves 32 consecutive floats into 32 consecutive
 *      shared words (coalesced, no bank conflict). The shifted edge tiles keep every copy of a
 *      full k-tile inside B, so none is predicated. CROWS = 1 then stores C by rows through
 *      shared memory: from the fragments each 4-byte store instruction writes 32 values 16
 *      bytes apart, so every 32-byte sector of a misaligned C row is written in four pieces.
 *
 * The partial last wave (TAILK; stream-K's "data-parallel + split-K" hybrid): at one CTA per
 * SM, T tiles run in ceil(T / SMS) waves, and the last one's r = T % SMS tiles leave the
 * other SMs idle for a whole tile's time. Split those r tiles TAILK ways along K and the last
 * wave takes about 1 / TAILK of a tile's time; the slices of a tile add up in order through
 * the serial split-K counters (deterministic). The host computes r from SMS; the kernel
 * recovers it from the grid size, so one build serves every shape and GPU.
 *
 * The strip (M = q * BM + s with 0 < s <= STRIP_ROWS = 16, q >= 1): the last s rows would
 * cost a whole row of tiles, each doing a full tile's FFMAs for s useful rows. Instead the
 * tiles cover the first q * BM rows, and cdiv(N, 128) strip CTAs (after the tiles: the last
 * grid row, or the end of the 1-D grid) compute the s rows: each takes 128 columns, its 8
 * warps the k rows in groups (loads first, then the FMAs), each lane a float4 of B per k row
 * (B is read once, as in skinny) times the s elements of A's column k, then the 8 warps'
 * partial sums are added in warp order through shared memory (deterministic). A strip CTA
 * reads B's 128 columns once, a small part of a tile's time, so the strip runs in the idle
 * SMs of the tiles' last wave.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types                      (default float)
 *   BM         block rows, 128 or 256 (TN = BM / 16; 256 threads)   (default 256)
 *   BK         k-tile depth, 8 or 16                                (default 8)
 *   STAGES     k-tiles in flight, >= 2                              (default 4)
 *   SW         block rows per group of the block order, >= 1        (default 1)
 *   SPLITK     k-slices (grid.y = ceil(M/BM) * SPLITK)              (default 1)
 *   TAILK      k-slices of the partial last wave's tiles (1: none; excludes SPLITK > 1)
 *   BCOPY      B's copies: 0 as it lies, 1 a padded copy, 2 warp rows   (default 0)
 *   CROWS      BCOPY 2: C stored by rows through shared memory (1)      (default 0)
 *   MINB       __launch_bounds__ minimum blocks per SM   (default 1 at BM=256, else 2)
 * Shared memory is dynamic: STAGES * (BK*(BM+4) + BK*128) * sizeof(ELEM) bytes.
 * Launch geometry: block (256, 1), grid (ceil(N/128), ceil(M/BM)*S), S = SPLITK (1 when
 * the tile count exceeds MAX_TILES), plus a grid row of strip CTAs. Needs sm_80 or newer.
 * With TAILK > 1 the grid is 1-D: T + r*(TAILK-1) CTAs for T tiles, r = T % SMS when the
 * r*TAILK slices take at most half a tile's time (2*ceil(r*TAILK/SMS) <= TAILK), else r = 0.
 * Pre-pass (BCOPY 1): block (128, 1), grid (ceil(LDB / 512), min(K, 65535)); arguments
 * pad_b(A, B, S, M, N, K), then matmul(A, S, C, M, N, K).
 */
#ifndef BCOPY
#define BCOPY 0
#endif
#if BCOPY == 1
#define PAD_B 1                       /* before lab_ptx.cuh: LDB_OF pads */
#endif
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BM
#define BM 256
#endif
#define BN 128
#define TM 8
#define TN (BM / 16)
#ifndef BK
#define BK 8
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef SW
#define SW 1
#endif
#ifndef SPLITK
#define SPLITK 1
#endif
#ifndef TAILK
#define TAILK 1
#endif
#ifndef MINB
#if BM >= 256
#define MINB 1
#else
#define MINB 2
#endif
#endif
#define APAD 4
#define WARPROWS (BCOPY == 2)        /* B's k-tiles copied along warp rows, 4 bytes a copy */
#ifndef CROWS                        /* WARPROWS: C stored by rows through shared memory (1) */
#define CROWS 0
#endif
#ifndef STRIP_ROWS
#define STRIP_ROWS 16                /* rows past a multiple of BM that strip CTAs compute */
#endif
#define STRIP_U 8                    /* k rows per warp and trip of the strip */
#define STRIP_KC 256                 /* k per chunk of the strip's A rows in shared memory */
/* PAD_B, LDB_OF: lab_ptx.cuh (BCOPY = 1 sets PAD_B = 1 before including it) */
#ifndef FASTCOPY               /* bounds-free copies of interior tiles (sm_90; see ffma_regdb.cu) */
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
#ifndef FOLD_ROWS
#define FOLD_ROWS 2                   /* rows of C a split-K slice loads at once (4 spilled at bk = 8) */
#endif
#define PN (TN / 4)
#define SM_ (BM / PM)
#define SN_ (BN / PN)
#define MAX_TILES 65536
#if (BM != 128 && BM != 256) || BK % 4 || STAGES < 2 || SPLITK < 1 || SW < 1 || NT != 256 \
    || TAILK < 1 || (TAILK > 1 && SPLITK > 1) || BCOPY < 0 || BCOPY > 2 || (WARPROWS && BK % 8) \
    || (CROWS && !WARPROWS)
#error "inconsistent parameters"
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VEC CAT(ELEM, 4)
#define AS_WORDS (BK * (BM + APAD))
#define BS_WORDS (BK * BN)
#define STAGE_WORDS (AS_WORDS + BS_WORDS)
/* CROWS: rows of each thread's 4-row pieces staged per pass (all 4 if the stages hold them) */
#define C_IPS ((TY * 4 * (BN + 4) <= STAGES * STAGE_WORDS) ? 4 : 2)
#if (STRIP_ROWS * STRIP_KC + (NT / 32) * BN) * 4 > STAGES * STAGE_WORDS * 4 || STRIP_KC % ((NT / 32) * STRIP_U)
#error "the strip's shared memory must fit in the pipeline's"
#endif

__device__ unsigned tile_counter[MAX_TILES];     /* split-K order; 0 between launches */

/* Per-thread copy assignment: A rows ar + i*(NT/BK) at k column ac (transposing 4-byte
 * copies, consecutive threads along k); B rows br + i*(NT/(BN/4)) at columns bc..bc+3. */
#define A_COPIES ((BM * BK) / NT)
#define A_RSTEP (NT / BK)
#define B_COPIES ((BS_WORDS / 4) / NT)
#define B_RSTEP (NT / (BN / 4))
#if (BM * BK) % NT || (BS_WORDS / 4) % NT || B_COPIES < 1
#error "the tile copies must split evenly over the threads"
#endif

/* General copy of the k-tile at k0 into the stage at shared address sst (bounds checked). */
__device__ __forceinline__ void load_tile_edge(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                               unsigned sst, int M, int N, int K, int k0, int kend,
                                               int tid, int arow, int bcol, bool vec_b, int ldb)
{
    const int ac = tid % BK, ar = tid / BK;
    const int bc = (tid % (BN / 4)) * 4, br = tid / (BN / 4);
    const bool ak = k0 + ac < kend;
#pragma unroll
    for (int it = 0; it < A_COPIES; ++it) {
        const bool in = ak && arow + it * A_RSTEP < M;
        const ELEM* src = A + (size_t)(arow + it * A_RSTEP) * K + k0 + ac;
        cp_async4(sst + 4u * (ac * (BM + APAD) + ar + it * A_RSTEP), in ? src : A, in);
    }
#pragma unroll
    for (int it = 0; it < B_COPIES; ++it) {
        const int r = br + it * B_RSTEP;
        const int gk = k0 + r;
        const ELEM* src = B + (size_t)gk * ldb + bcol;
        const unsigned d = sst + 4u * (AS_WORDS + r * BN + bc);
        if (vec_b) {
            const bool in = gk < kend && bcol < N;     /* PAD_B: columns N..LDB-1 are zeros */
            cp_async16(d, in ? src : B, in);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool in = gk < kend && bcol + j < N;
                cp_async4(d + 4u * j, in ? src + j : B, in);
            }
        }
    }
}

/* Fragments of k-step k from the stage at st: fa[TM] (A column k), fb[TN] (B row k). */
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

/* Block order: groups of SW block rows, column-major inside a group (SW = 1: row-major). */
__device__ __forceinline__ void tile_of(int lin, int mtiles, int ntiles_n, int& tm, int& tcol)
{
    tm = lin / ntiles_n;
    tcol = lin % ntiles_n;
#if SW > 1
    const int group = lin / (SW * ntiles_n);
    const int first = group * SW;
    const int gsz = min(mtiles - first, SW);
    const int in_g = lin - group * (SW * ntiles_n);
    tm = first + in_g % gsz;
    tcol = in_g / gsz;
#endif
}

/* One CTA's work: k-slice z of `splits` of the tile (tm, tcol) of C, added in order to the
 * slices before it when splits > 1. Inlined where called with constants (0, 1), so whole
 * tiles compile to the plain kernel: no split-K code, the same registers and schedule. */
__device__ __forceinline__ void gemm_tile(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* __restrict__ C, int M, int N, int K, int tm,
                                          int tcol, int ntiles_n, int z, int splits)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    ELEM* const smem = reinterpret_cast<ELEM*>(smem_raw);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem_raw);
    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;

    /* the rows and columns of C this CTA owns start at (own_row0, own_col0) */
    const int own_row0 = tm * BM, own_col0 = tcol * BN;

    const int ktiles_all = (K + BK - 1) / BK;
    const int per = (ktiles_all + splits - 1) / splits;
    const int kt0 = z * per;
    const int ktiles = max(0, min(ktiles_all, kt0 + per) - kt0);
    const int kbeg = kt0 * BK;
    const int kend = min(K, kbeg + ktiles * BK);
    const int ldb = LDB_OF(N);                         /* row stride of B */
    const bool vec_b = (ldb & 3) == 0;                 /* 16-byte B rows */
    const bool vec_c = (N & 3) == 0;                   /* 16-byte C rows */
    const int ac = tid % BK, ar = tid / BK;
    const int bc = (tid % (BN / 4)) * 4, br = tid / (BN / 4);
    /* Shifted edge tiles: a tile past the last row (column) computes the BM x BN block that
     * ends at row M (column ldb) instead, every copy in bounds, and stores only the rows and
     * columns it owns (the overlap is its neighbour's). So edge tiles take the bounds-free
     * copy path too. */
    int row0 = own_row0, col0 = own_col0;
#if FASTCOPY
    if ((vec_b || WARPROWS) && M >= BM && ldb >= BN) {
        row0 = min(row0, M - BM);
        col0 = min(col0, ldb - BN);
    }
#endif
    const int arow = row0 + ar;                        /* first A row this thread copies */
    const int bcol = col0 + bc;                        /* first B column this thread copies */
    /* whole block tile in bounds (PAD_B: Bp's columns N .. ldb-1 are zeros, never stored) */
    const bool interior = (vec_b || WARPROWS) && row0 + BM <= M && col0 + BN <= ldb;

    /* running copy state of the interior path: sources of the next k-tile to copy */
    const ELEM* ga = A + (size_t)min(arow, M - 1) * K + kbeg + ac;
    /* (both branches declare the copy state in the same order, so that the other copies
       compile to the same PTX as they did before the warp-row copies existed) */
#if WARPROWS
    /* warp w copies B rows w, w + NT/32, .. of the k-tile, lane l columns col0 + l + 32j
       (j < 4): each copy instruction 32 consecutive floats into 32 consecutive shared words;
       the shifted edge tiles keep every column inside N, so no copy of an interior tile is
       predicated */
    const ELEM* gb = B + (size_t)(kbeg + tid / 32) * ldb + col0 + tid % 32;
    const size_t a_rstride = (size_t)A_RSTEP * K;
    const size_t b_rstride = (size_t)(NT / 32) * ldb;
    const size_t b_tstride = (size_t)BK * ldb;
    const unsigned sa_off = 4u * (ac * (BM + APAD) + ar);
    const unsigned sb_off = 4u * (AS_WORDS + (tid / 32) * BN + tid % 32);
    (void)br;
#else
    const ELEM* gb = B + (size_t)(kbeg + br) * ldb + min(bcol, max(ldb - 4, 0));
    const size_t a_rstride = (size_t)A_RSTEP * K;
    const size_t b_rstride = (size_t)B_RSTEP * ldb;
    const size_t b_tstride = (size_t)BK * ldb;
    const unsigned sa_off = 4u * (ac * (BM + APAD) + ar);
    const unsigned sb_off = 4u * (AS_WORDS + br * BN + bc);
#endif

    ACC acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = (ACC)0;

    /* copy of the next k-tile (index tn) into the stage at sst; advances ga, gb */
    auto copy_tile = [&](int tn, unsigned sst) {
        const int k0 = kbeg + tn * BK;
#if FASTCOPY
        if (interior && k0 + BK <= kend) {
#pragma unroll
            for (int it = 0; it < A_COPIES; ++it)
                cp_async4_full(sst + sa_off + 4u * it * A_RSTEP, ga + it * a_rstride);
#if WARPROWS
#pragma unroll
            for (int it = 0; it < BK / (NT / 32); ++it)
#pragma unroll
                for (int j = 0; j < BN / 32; ++j)
                    cp_async4_full(sst + sb_off + 4u * (it * (NT / 32) * BN + 32 * j), gb + it * b_rstride + 32 * j);
#else
#pragma unroll
            for (int it = 0; it < B_COPIES; ++it)
                cp_async16_full(sst + sb_off + 4u * it * B_RSTEP * BN, gb + it * b_rstride);
#endif
        } else
#endif
            load_tile_edge(A, B, sst, M, N, K, k0, kend, tid, arow, bcol, vec_b, ldb);
        ga += BK;
        gb += b_tstride;
    };

    /* prologue: tiles 0 .. STAGES-1 into every stage */
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        if (s < ktiles)
            copy_tile(s, sbase + 4u * s * STAGE_WORDS);
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
                    copy_tile(tn, sbase + 4u * rd * STAGE_WORDS);
                cp_async_commit();
                rd = nx;
            }
            /* Row by row, every other row right to left (a snake): the last FFMA of a row
               and the first of the next share their B value, and ptxas keeps this order
               and allocates registers after it: fewer dispatch stalls on FFMA than plain
               rows (benchmarks/NOTES.md: "The FFMAs of a k-step in a row snake"). */
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

    const int tile = tm * ntiles_n + tcol;
    if (splits > 1 && z > 0) {
        if (tid == 0) {
            while (*reinterpret_cast<volatile unsigned*>(&tile_counter[tile]) != (unsigned)z) {
                __nanosleep(64);
            }
            __threadfence();
        }
        __syncthreads();
    }
    const bool add = splits > 1 && z > 0;
#if WARPROWS && CROWS
    /* CROWS: C's rows are not 16-byte aligned (N % 4 != 0), so from the fragments each
       4-byte store instruction writes 32 values 16 bytes apart, and every 32-byte sector of C
       is written in four pieces by four instructions. Instead the tile goes through shared
       memory, a thread's 4-row piece (or half of it where the stages hold less: bk = 8) at a
       time, and warps store whole rows, 32 consecutive columns per instruction (as
       ffma_regdb's CROWS); split-K slices after the first add what is there. Columns are
       owned one by one: the shift of the last tile column is N - 128, not a multiple of 4. */
    static_assert(TY * C_IPS * (BN + 4) <= STAGES * STAGE_WORDS, "C's staged rows must fit the pipeline's shared memory");
    (void)vec_c;
    /* The thread index read again (volatile) and the row loop kept rolled: so written, the
       staging code leaves ptxas's allocation of the main loop closer to crows = 0's (the
       ways measured: benchmarks/NOTES.md, rung 31 ffma_wide_b4, "The main loop's allocation"). */
    unsigned t_;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t_));
    const int w = t_ / 32, l = t_ % 32;
    const int etx = t_ % TX, ety = t_ / TX;
#pragma unroll
    for (int q = 0; q < PM; ++q)
#pragma unroll
    for (int sub = 0; sub < 4 / C_IPS; ++sub) {
        __syncthreads();                               /* the stages (or the last rows) are read */
#pragma unroll
        for (int ii = 0; ii < C_IPS; ++ii)
#pragma unroll
            for (int p = 0; p < PN; ++p) {
                const ACC* a = &acc[4 * q + sub * C_IPS + ii][4 * p];
                VEC x;
                x.x = (ELEM)a[0]; x.y = (ELEM)a[1]; x.z = (ELEM)a[2]; x.w = (ELEM)a[3];
                *reinterpret_cast<VEC*>(&smem[(ety * C_IPS + ii) * (BN + 4) + p * SN_ + etx * 4]) = x;
            }
        __syncthreads();
#pragma unroll 1
        for (int r = w; r < TY * C_IPS; r += NT / 32) {
            /* (C_IPS == 4: the pass holds the 4-row pieces whole, staged row r is row r) */
            const int row = row0 + q * SM_ + (C_IPS == 4 ? r : (r / C_IPS) * 4 + sub * C_IPS + r % C_IPS);
            if (row >= M)
                break;                                 /* rows grow with r */
            if (row < own_row0)
                continue;
#pragma unroll
            for (int j = 0; j < BN / 32; ++j) {
                const int col = col0 + l + 32 * j;
                if (col >= own_col0 && col < N) {
                    ELEM* c = C + (size_t)row * N + col;
                    const ACC o = add ? (ACC)__ldcg(c) : (ACC)0;
                    __stcg(c, (ELEM)(o + (ACC)smem[r * (BN + 4) + l + 32 * j]));
                }
            }
        }
    }
#else
    if (add) {
        /* Split-K slices after the first: what the slices before them left in C is folded
           into acc first, the loads of FOLD_ROWS rows in flight together, and the tile then leaves
           as a whole one does. Loaded just before each store, every value was an L2 round trip
           of its own (the compiler cannot move a load of another row above a store to C),
           and the slices' epilogues run one after another (benchmarks/NOTES.md: "the split-K
           epilogues of ffma_wide and ffma_small"). */
#pragma unroll
        for (int h = 0; h < TM; h += FOLD_ROWS) {
            const int row = row0 + (h / 4) * SM_ + ty * 4 + h % 4;
            ACC o[FOLD_ROWS][TN];
#pragma unroll
            for (int ii = 0; ii < FOLD_ROWS; ++ii)
#pragma unroll
                for (int p = 0; p < PN; ++p) {
                    const int col = col0 + p * SN_ + tx * 4;
                    const ELEM* c = C + (size_t)(row + ii) * N + col;
                    if (vec_c && row + ii < M && col + 3 < N) {
                        const VEC v = __ldcg(reinterpret_cast<const VEC*>(c));
                        o[ii][4 * p] = (ACC)v.x; o[ii][4 * p + 1] = (ACC)v.y;
                        o[ii][4 * p + 2] = (ACC)v.z; o[ii][4 * p + 3] = (ACC)v.w;
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; ++j)
                            o[ii][4 * p + j] = row + ii < M && col + j < N ? (ACC)__ldcg(c + j) : (ACC)0;
                    }
                }
#pragma unroll
            for (int ii = 0; ii < FOLD_ROWS; ++ii)
#pragma unroll
                for (int jj = 0; jj < TN; ++jj)
                    acc[h + ii][jj] += o[ii][jj];
        }
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + (i / 4) * SM_ + ty * 4 + i % 4;
        if (row >= M || row < own_row0)
            continue;
#pragma unroll
        for (int p = 0; p < PN; ++p) {
            const int col = col0 + p * SN_ + tx * 4;
#if WARPROWS
            if (col + 3 < own_col0)                    /* shifted by N % 4 too: a group may straddle */
                continue;
#else
            if (col < own_col0)                        /* groups of 4: all owned or none */
                continue;
#endif
            ACC* a = &acc[i][4 * p];
            ELEM* c = C + (size_t)row * N + col;
            if (vec_c && col + 3 < N) {
                VEC x;
                x.x = (ELEM)a[0]; x.y = (ELEM)a[1]; x.z = (ELEM)a[2]; x.w = (ELEM)a[3];
                __stcg(reinterpret_cast<VEC*>(c), x);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
#if WARPROWS
                    if (col + j < N && col + j >= own_col0) {
#else
                    if (col + j < N) {
#endif
                        __stcg(c + j, (ELEM)a[j]);
                    }
            }
        }
    }
#endif
    if (splits > 1) {
        __threadfence();
        __syncthreads();
        if (tid == 0)
            atomicExch(&tile_counter[tile], z + 1 == splits ? 0u : (unsigned)(z + 1));
    }
}

/* The strip's row count at this M (0: none); the header's srows. */
__device__ __forceinline__ int strip_rows(int M)
{
    return (STRIP_ROWS > 0 && M > BM && M % BM <= STRIP_ROWS) ? M % BM : 0;
}

/* Strip CTA `chunk`: the srows rows of C from row_first (where the tiles end), columns
 * chunk * BN .. + BN - 1 (see the header). The srows rows of A come through shared memory,
 * STRIP_KC k at a time (16 KB at most; ffma_wide's pipeline has at least 48 KB), so that the
 * loop over k issues only B's loads: STRIP_U float4s per lane in flight before their
 * FMAs. A strip CTA has the SM to itself (one CTA per SM); loading A per k from global
 * memory made it latency-bound, longer than the idle SMs of the last wave had
 * (benchmarks/NOTES.md: the strip of ffma_wide, "A first strip loaded A"). */
__device__ __forceinline__ void strip_chunk(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                            ELEM* __restrict__ C, int row_first, int srows, int N,
                                            int K, int chunk)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    ELEM* const as = reinterpret_cast<ELEM*>(smem_raw);              /* [STRIP_ROWS][STRIP_KC] */
    ELEM* const red = as + STRIP_ROWS * STRIP_KC;                    /* [NT / 32 warps][BN] */
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int ldb = LDB_OF(N);
    const int col = chunk * BN + 4 * lane;
    const bool vec = (ldb & 3) == 0 && col + 4 <= ldb;    /* PAD_B: zeros past N */
    ACC acc[STRIP_ROWS][4];
#pragma unroll
    for (int r = 0; r < STRIP_ROWS; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            acc[r][j] = (ACC)0;
    for (int kc = 0; kc < K; kc += STRIP_KC) {
        __syncthreads();                               /* the previous chunk's A is read */
        for (int i = tid; i < STRIP_ROWS * STRIP_KC; i += NT) {
            const int r = i / STRIP_KC, kk = i % STRIP_KC;
            as[i] = r < srows && kc + kk < K ? A[(size_t)(row_first + r) * K + kc + kk] : (ELEM)0;
        }
        __syncthreads();
        for (int kk = warp * STRIP_U; kk < STRIP_KC && kc + kk < K; kk += (NT / 32) * STRIP_U) {
            ACC b[STRIP_U][4];
#pragma unroll
            for (int u = 0; u < STRIP_U; ++u) {
                const int k = kc + kk + u;
                const ELEM* const src = B + (size_t)min(k, K - 1) * ldb + col;
                if (vec) {
                    const VEC v = __ldg(reinterpret_cast<const VEC*>(src));
                    b[u][0] = (ACC)v.x; b[u][1] = (ACC)v.y; b[u][2] = (ACC)v.z; b[u][3] = (ACC)v.w;
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        b[u][j] = col + j < N ? (ACC)__ldg(src + j) : (ACC)0;
                }
            }                                          /* rows k >= K meet zeros of as */
#pragma unroll
            for (int u = 0; u < STRIP_U; ++u)
#pragma unroll
                for (int r = 0; r < STRIP_ROWS; ++r) {
                    const ACC a = (ACC)as[r * STRIP_KC + kk + u];
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        acc[r][j] += a * b[u][j];
                }
        }
    }
#pragma unroll
    for (int r = 0; r < STRIP_ROWS; ++r)
        if (r < srows) {                               /* uniform across the CTA */
#pragma unroll
            for (int j = 0; j < 4; ++j)
                red[warp * BN + 4 * lane + j] = (ELEM)acc[r][j];
            __syncthreads();
            if (tid < BN) {
                ACC sum = (ACC)0;
#pragma unroll
                for (int w = 0; w < NT / 32; ++w)
                    sum += (ACC)red[w * BN + tid];
                const int c = chunk * BN + tid;
                if (c < N)
                    C[(size_t)(row_first + r) * N + c] = (ELEM)sum;
            }
            __syncthreads();
        }
}

extern "C" __global__ __launch_bounds__(NT, MINB)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    const int ntiles_n = (N + BN - 1) / BN;
    const int srows = strip_rows(M);
    const int strips = srows ? ntiles_n : 0;
    M -= srows;                                        /* the tiles' rows */
    const int mtiles = (M + BM - 1) / BM;
    int tm, tcol;
#if TAILK > 1
    /* 1-D grid (see TAILK): CTAs 0 .. full-1 take one whole tile each; the last r tiles of the
     * order, the partial last wave, are split TAILK ways along K, CTA full + j taking tile
     * full + j % r and k-slice j / r (slices of a tile in increasing CTA order, as the serial
     * reduction needs). The host put r (TAILK - 1) extra CTAs in the grid: r = 0, no split. */
    const int tiles_all = mtiles * ntiles_n;
    const int r = ((int)gridDim.x - strips - tiles_all) / (TAILK - 1);
    const int full = tiles_all - r;
    const int lin = blockIdx.x;
    if (lin >= (int)gridDim.x - strips) {
        strip_chunk(A, B, C, M, srows, N, K, lin - ((int)gridDim.x - strips));
    } else if (lin < full) {
        tile_of(lin, mtiles, ntiles_n, tm, tcol);
        gemm_tile(A, B, C, M, N, K, tm, tcol, ntiles_n, 0, 1);
    } else {
        const int j = lin - full;
        tile_of(full + j % r, mtiles, ntiles_n, tm, tcol);
        gemm_tile(A, B, C, M, N, K, tm, tcol, ntiles_n, j / r, TAILK);
    }
#else
    const int rows_y = (int)gridDim.y - (strips ? 1 : 0);    /* grid rows of tiles */
    if ((int)blockIdx.y >= rows_y) {                   /* the last grid row: the strip */
        strip_chunk(A, B, C, M, srows, N, K, blockIdx.x);
        return;
    }
    int splits = 1, z = 0;
#if SPLITK > 1
    splits = rows_y / mtiles;
    z = blockIdx.y / mtiles;
#endif
    tile_of((blockIdx.y % mtiles) * ntiles_n + blockIdx.x, mtiles, ntiles_n, tm, tcol);
    gemm_tile(A, B, C, M, N, K, tm, tcol, ntiles_n, z, splits);
#endif
}

/* BCOPY = 1's pre-pass: B (K x N) copied into S (K x LDB_OF(N)), columns N .. LDB - 1 zero. The
 * file defines it whatever BCOPY is, as the header names it; the header runs it only for
 * BCOPY = 1 (its [prepass] when). */
extern "C" __global__ __launch_bounds__(128)
void pad_b(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
           int M, int N, int K)
{
    (void)A; (void)M;
    pad_b_rows(B, S, N, K);
}
