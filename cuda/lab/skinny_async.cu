/*
+++
name = "skinny_async"
title = "Tall-and-narrow GEMM (N ≤ 64, A the large operand) as a stream of A through shared memory: asynchronous copies (cp.async, or one bulk copy a row on Hopper) keep A's bytes in flight without registers; the lanes of a warp split K (each its own 4 k of a chunk, 8-16 rows x 8-16 columns), so every 16-byte shared read of A or of a pre-transposed B is a distinct word, and the k-lanes are summed once at the end by a butterfly."
source = "CUTLASS/CUDA programming guide multistage cp.async pipelines; cuBLAS's split-K GEMV (K over the lanes, one reduction at the end); operand transposition as a pre-pass (cuda/27's padding pre-pass); the seeds' effective-bandwidth lesson. Written for the class where cuda/24_skinny's rows path streamed A at 28-55% of the copy (benchmarks/NOTES.md, issue 11 round 17)"
role = "rung"
order = 33
dtypes = ["float32", "int32"]
precision = "fp32"

[params]             # the first value of each list is the default
tn = [16, 8, 24, 32, 64]   # columns of B per block (chosen by N, [chosen] below)
warps = [4, 8]       # warps per block, each its own rw rows
stages = [4, 6, 3]   # the cp.async ring, in 128-k units (chunks of kc k: 128 / kc of them a unit)

[defaults.sm_90]    # H200 (benchmarks/results/h200_offsuite_narrow.json): 8 warps, 3 stages 89.3 us at 8192x16x8192 against 141.4 with 4 warps, 4 stages (127.5 vs 147.9 at 8192x17x8192, 276.8 vs 318.2 at 8192x64x8192)
warps = 8
stages = 3

[derived]
tn_pick = "8 if N <= 8 else 16 if N <= 16 else 24 if N <= 24 else 32 if N <= 32 else 64"   # the tile that holds N
tl = "8 if tn == 8 else 12 if tn == 24 else 16"   # columns per lane
rw = "16 if tl == 8 else 8"             # rows per warp (and per lane): 128 accumulators a lane (96 at tl = 12)
kl = "32 * tl // tn"                    # k-lanes: the warp's lanes are kl x (tn / tl) column groups
kc = "4 * kl"                           # k per chunk
rb = "warps * rw"                       # rows per block
ntiles = "cdiv(N, tn)"
blocks = "cdiv(M, rb) * ntiles"
ldk = "roundup(K, kc)"                  # k per row of the transposed B (zero past K)
np = "ntiles * tn"                      # its rows (zero past N)
chunks = "ldk // kc"
chunk = "4 * kc * (rb + tn)"            # bytes of a chunk: A's rb rows and B's tn rows of kc k
# the ring: stages x 128 k, or as many chunks as fit where fewer do (16 rows a warp at tn = 8
# and 8 warps: 3 of 68 KB)
fit = "(227 * 1024) // chunk"
ring = "min(stages * 128 // kc, fit)"
smem = "ring * chunk"
# blocks per SM: 4 warps (<= 255 registers a thread) fit twice where shared memory allows
bps = "min(2 if warps == 4 else 1, (228 * 1024) // (smem + 1024))"
slots = "bps * SMS"
# split K across blocks (grid.y): the slices s (1-8, 12 or 16; >= 512 k each) that minimise
# waves x (k a slice + 256): a stream is paced per SM, so an SM without a block loses its
# share, and each slice costs about 256 k of filling and draining its ring (fitted on the
# H200 to the best of 1-12 slices at 19 shapes; it picks the best at 18 and is 1.6% off at
# 10000x16x4096). E.g. 10000x16x4096, 157 blocks: 90.8 -> 74.5 us with 4 slices;
# 3000x17x5000, 47 blocks: 2 slices (one wave, 71% of the SMs) 49.6 us, 5 (1.8 waves) 45.2.
# At tn = 8 (half the FMAs: closer to DRAM than to the SMs' pace) one wave of slices where the
# grid is short (6000x8x6000: 2 slices 48.3 us, 5 52.1), else none.
smax = "max(1, min(16, ldk // 512))"
c1 = "cdiv(blocks, slots) * (chunks * kc + 256)"
c2 = "cdiv(2 * blocks, slots) * (cdiv(chunks, 2) * kc + 256) if smax >= 2 else c1 + 1"
c3 = "cdiv(3 * blocks, slots) * (cdiv(chunks, 3) * kc + 256) if smax >= 3 else c1 + 1"
c4 = "cdiv(4 * blocks, slots) * (cdiv(chunks, 4) * kc + 256) if smax >= 4 else c1 + 1"
c5 = "cdiv(5 * blocks, slots) * (cdiv(chunks, 5) * kc + 256) if smax >= 5 else c1 + 1"
c6 = "cdiv(6 * blocks, slots) * (cdiv(chunks, 6) * kc + 256) if smax >= 6 else c1 + 1"
c7 = "cdiv(7 * blocks, slots) * (cdiv(chunks, 7) * kc + 256) if smax >= 7 else c1 + 1"
c8 = "cdiv(8 * blocks, slots) * (cdiv(chunks, 8) * kc + 256) if smax >= 8 else c1 + 1"
c12 = "cdiv(12 * blocks, slots) * (cdiv(chunks, 12) * kc + 256) if smax >= 12 else c1 + 1"
c16 = "cdiv(16 * blocks, slots) * (cdiv(chunks, 16) * kc + 256) if smax >= 16 else c1 + 1"
# the least cost, then the fewest slices: (cost, s) packed in one integer, s < 32
s_best = "min(32 * c1 + 1, 32 * c2 + 2, 32 * c3 + 3, 32 * c4 + 4, 32 * c5 + 5, 32 * c6 + 6, 32 * c7 + 7, 32 * c8 + 8, 32 * c12 + 12, 32 * c16 + 16) % 32"
split_want = "(max(1, min(slots // blocks, smax)) if 2 * blocks <= slots else 1) if tn == 8 else s_best"
# then as few slices as give every one the same whole chunks, the last maybe fewer (none empty)
splits = "cdiv(chunks, cdiv(chunks, split_want))"
# split-K: per-block arrival counters (256-byte aligned), then each slice's partial
# (rw * tl / kl outputs a thread, rounded up to 4)
workspace = "0 if splits == 1 else roundup(4 * blocks, 256) + splits * blocks * warps * 32 * roundup(rw * tl // kl, 4) * 4"

[chosen]             # the value a run that leaves it to the shape (auto) gets
tn = "tn_pick"

[[constraints]]
check = "N <= 64"
reason = "made for narrow N (≤ 64, A the large operand); use ffma_regdb or ffma_wide"

[[constraints]]
check = "(tn == 8 or tn == 16 or tn == 24 or tn == 32 or tn == 64) and (warps == 4 or warps == 8) and (stages == 3 or stages == 4 or stages == 6)"
reason = "tn must be 8, 16, 24, 32 or 64, warps 4 or 8, stages 3, 4 or 6"

[[constraints]]
check = "tn == tn_pick or (ntiles == 2 and (tn == 16 or tn == 32))"
reason = "N = {N} takes {tn_pick}-column tiles (or two of 16 or 32 columns), not {ntiles} of {tn}"

[[constraints]]
check = "stages == 3 or (4 if stages == 6 else 3) * 128 // kc < fit"
reason = "N = {N} in {tn}-column tiles of {rb} rows: {stages} stages make the ring of {4 if stages == 6 else 3} ({fit} chunks of {chunk // 1024} KB fill the shared memory)"

[launch]
grid = ["blocks", "splits"]
block = ["32 * warps", 1]
shared = "smem"
workspace = "workspace"

[prepass]            # B (K x N) -> S (np x ldk): Bᵀ, zero past N and K; 32x32 tiles through shared memory
entry = "transpose_b"
grid = ["ldk // 32", "cdiv(np, 32)"]
block = [32, 4]
scratch = "4 * np * ldk"
+++
*/
/*
 * skinny_async.cu -- C (M x N) = A (M x K) . B (K x N), row-major, N <= 64 (the tall,
 * narrow class: A is the large operand and the product is a copy of A with a little
 * arithmetic on the way). FP32 and int32 (wrapping).
 *
 * Why a new rung: cuda/24_skinny's rows path loads A into registers (a rolling ring of
 * 16-byte loads) and reads B from shared memory as broadcasts over 4 row groups. At 9-32
 * columns ncu showed it latency-bound with 8 warps per SM (the ring and 64-128 accumulators
 * fill 255 registers) and every LDS.128 of B costing 4 shared wavefronts for 8 distinct
 * words: 28-55% of the copy bandwidth at N = 9-32 (benchmarks/NOTES.md, round 17).
 *
 * Technique:
 *  - A goes to shared memory asynchronously, in a ring of chunks of KC k (STAGES x 128 k in
 *    all): the bytes in flight need no registers, and a block holds (ring - 1) chunks of its
 *    RB rows in flight (96 KB at RB = 64, 4 x 128 k). Each warp copies its own RW rows: on
 *    sm_90 at TN <= 16, a whole chunk is one cp.async.bulk a row (512 bytes) completing on
 *    the slot's mbarrier; else (and for a chunk cut by K, and where K % 4 != 0, A's rows then
 *    being unaligned) cp.async of 16 bytes (4 where K % 4 != 0), zero past K and M. B's chunk
 *    is copied by the whole block (cp.async), one barrier a chunk.
 *  - The pre-pass writes Bᵀ (np rows of ldk = roundup(K, KC) k, zero past N and past K) to
 *    the scratch buffer, so that B's chunk is TN rows of 4 KC contiguous bytes (16-byte
 *    copies, no bounds: the zeros are there) and k-lane kl reads the same 4 k, 4 kl .. +3, of
 *    A's rows and of Bᵀ's: one LDS.128 a lane, KL distinct 16-byte words a warp (4 wavefronts,
 *    no conflicts).
 *  - The warp's 32 lanes are KL k-lanes x NL column groups (32 x 1 up to 16 columns, 16 x 2
 *    at 24 and 32, 8 x 4 at 64); lane (kl, nl) holds RW rows x TL columns (16 x 8 at TN = 8,
 *    8 x 12 at 24, else 8 x 16: 128 accumulators, 96 at 24). Per chunk RW + TL LDS.128 and
 *    4 RW TL FMAs: the smaller of the two operands' 4-vectors is held (A's RW at TL >= 12,
 *    B's TL at TL = 8), the other streamed. The 24-column tile is for N = 17-24, where 32
 *    columns would compute up to 15 empty ones (8192x17x8192: 154.6 -> 128.1 us on the H200).
 *    Column groups rather than two 16-column tiles at TN = 32: B's chunk per row of the block
 *    halves (8192x32x8192: 175 -> 155 us).
 *  - At the end the KL k-lanes' partial sums are added by a butterfly (shuffles at distances
 *    KL / 2 .. 1, each halving what a lane holds): lane (kl, nl) is left with V = RW TL / KL
 *    consecutive outputs, V kl .. V kl + V - 1 of its group's RW x TL (row-major): 16-byte
 *    stores (V = 6 at TN = 24: 4-byte ones).
 *  - Split-K across blocks (grid.y, the header's splits: the slice count of least waves x (k a
 *    slice + 256), a model of a stream paced per SM): each slice's V outputs a thread (padded
 *    to whole 4-vectors) go to the workspace; the block that arrives last sums them in slice
 *    order (lab_ptx.cuh's splitk_fixup: deterministic).
 *
 * Tails: rows past M are not read (src-size 0, or no bulk copy; their accumulators are never
 * stored: a first version copied row M - 1 into them, and 56 rows of one block reading the
 * same 512 bytes held 8200x16x8192 at 126 us against 98 at 8192 rows); k past K is zero in
 * A's chunk (cp.async src-size 0) and in Bᵀ (the pre-pass); columns past N are Bᵀ's zero
 * rows, never stored. Any M, N <= 64 (two tiles past that: the constraints), K.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC   element and accumulator types (float; int32: int, unsigned)     (float)
 *   TN          8, 16, 24, 32 or 64 columns per block (the lanes' split above)  (16)
 *   WARPS       4 or 8 warps per block                                          (4)
 *   STAGES      3, 4 or 6: the ring, in 128-k units, at most what fits (RING)  (4)
 * Launch (header): grid (ceil(M / RB) * ceil(N / TN), splits), block (32 WARPS); dynamic shared
 * memory RING * 4 * KC * (RB + TN) bytes (static: the ring's mbarriers). Pre-pass
 * transpose_b(A, B, S, M, N, K): grid (ldk / 32, ceil(np / 32)), block (32, 4); then
 * matmul(A, S, C, M, N, K, workspace). Needs sm_80 or newer (cp.async; bulk copies on sm_90).
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef TN
#define TN 16
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef STAGES
#define STAGES 4
#endif
#if (TN != 8 && TN != 16 && TN != 24 && TN != 32 && TN != 64) || (WARPS != 4 && WARPS != 8) || STAGES < 2
#error "inconsistent parameters"
#endif

#define TL (TN == 8 ? 8 : TN == 24 ? 12 : 16)   /* columns per lane */
#define RW (TL == 8 ? 16 : 8)           /* rows per warp (and per lane): 128 accumulators (96 at TL = 12) */
#define NL (TN / TL)                    /* column groups of a warp: 1, 1, 2, 2, 4 */
#define KL (32 / NL)                    /* k-lanes: 32, 32, 16, 16, 8 */
#define KC (4 * KL)                     /* k per chunk */
#define V (RW * TL / KL)                /* outputs a lane holds after the butterfly: 4, 4, 6, 8, 16 */
#define VP ((V + 3) / 4 * 4)            /* ... in whole 4-vectors (split-K's partials) */
#define RB (WARPS * RW)                 /* rows per block */
#define NT (32 * WARPS)
#define A_WORDS (RB * KC)
#define STAGE_WORDS ((RB + TN) * KC)
#define FIT ((227 * 1024) / (4 * STAGE_WORDS))
/* chunks in the ring: STAGES x 128 k whatever KC, or as many as fit (the header's ring) */
#define RING (STAGES * 128 / KC < FIT ? STAGES * 128 / KC : FIT)
#define VEC vec4_of<ELEM>::type
/* A's whole chunks by bulk copies (sm_90+, tn <= 16: rows of 512 bytes, a ring of 2-3
 * chunks): one cp.async.bulk a row into an mbarrier, no L1 request a 16-byte piece. H200,
 * 8192x16x8192, 8 warps: 89.1 us with a ring of 3 against 99.5 by cp.async; but with 4 or 5
 * chunks 112-113 against 98-99 (4 warps: 118-142 against 112-119), the copies of a deeper
 * ring held up the warps that issue them; at tn = 32 and 64 (rows of 256 and 128 bytes) they
 * lost 9-19%. Those keep cp.async. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BULK_A (TN <= 16 && RING <= 3)
#else
#define BULK_A 0
#endif

/* ------------------------------------------------------------------------------------------ */
/* Pre-pass: S = Bᵀ, np = ceil(N / TN) * TN rows of ldk = roundup(K, KC), zero past N and K
 * (lab_ptx.cuh's transpose_tile32, a 32 x 32 tile a block). */
extern "C" __global__ __launch_bounds__(128)
void transpose_b(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
                 int M, int N, int K)
{
    (void)A; (void)M;
    transpose_tile32<4>(B, S, N, K, (N + TN - 1) / TN * TN, (K + KC - 1) / KC * KC, blockIdx.x * 32,
                        blockIdx.y * 32);
}

/* ------------------------------------------------------------------------------------------ */
/* One chunk (KC k from kc) into ring slot `st`: the warp's RW rows of A, KL 16-byte pieces a
 * row, piece q = lane + 32 i of the warp's (row q / KL, k 4 (q % KL)) where K % 4 == 0, zero
 * past K and past M (src-size 0: rows past M are not read); else 4-byte copies, element e =
 * lane + 32 j; and, shared by the block, Bᵀ's TN rows (always whole: the pre-pass padded
 * them). */
__device__ __forceinline__ void load_chunk(unsigned sbase, int st, int kc, const ELEM* __restrict__ A,
                                           const ELEM* __restrict__ S, int M, int K, int ldk,
                                           int mw, int n0, bool kvec, int warp, int lane, int tid,
                                           unsigned long long* full_bar)
{
    (void)full_bar;
    const unsigned sa = sbase + 4u * (unsigned)(st * STAGE_WORDS + warp * RW * KC);
#if BULK_A
    if (kvec && kc + KC <= K) {                      /* a whole chunk: one bulk copy a row < M */
        const unsigned bar = (unsigned)__cvta_generic_to_shared(&full_bar[st]);
        if (tid == 0)                                /* the block's rows < M, whole */
            mbar_arrive_expect_tx(bar, (unsigned)(min(RB, M - (mw - warp * RW)) * KC * 4));
        if (lane < RW && mw + lane < M)
            bulk_load(sa + 4u * (unsigned)(lane * KC), A + (size_t)(mw + lane) * K + kc, KC * 4, bar);
    } else
#endif
    if (kvec) {
#pragma unroll
        for (int i = 0; i < RW * KL / 32; ++i) {
            const int q = lane + 32 * i, r = q / KL, k = kc + 4 * (q % KL), m = mw + r;
            const bool in = k < K && m < M;          /* K % 4 == 0: the whole 4 k are in or out */
            cp_async16(sa + 4u * (unsigned)(4 * q), A + (in ? (size_t)m * K + k : 0), in);
        }
    } else {
#pragma unroll
        for (int j = 0; j < RW * KC / 32; ++j) {
            const int e = lane + 32 * j, r = e / KC, k = kc + e % KC, m = mw + r;
            const bool in = k < K && m < M;
            cp_async4(sa + 4u * (unsigned)e, A + (in ? (size_t)m * K + k : 0), in);
        }
    }
    const unsigned sb = sbase + 4u * (unsigned)(st * STAGE_WORDS + A_WORDS);
#pragma unroll
    for (int i = 0; i < (TN * KL + NT - 1) / NT; ++i) {   /* TN rows x KL 16-byte pieces */
        const int q = tid + i * NT, n = q / KL, p = q % KL;
        if ((TN * KL) % NT != 0 && q >= TN * KL)
            break;
        cp_async16_full(sb + 4u * (unsigned)(n * KC + 4 * p), S + (size_t)(n0 + n) * ldk + kc + 4 * p);
    }
}

/* acc[r][n] += A[r][k..k+3] . Bᵀ[n][k..k+3] for the lane's 4 k of one chunk. */
__device__ __forceinline__ void fma4(ACC& acc, const VEC& a, const VEC& b)
{
    acc += (ACC)a.x * (ACC)b.x;
    acc += (ACC)a.y * (ACC)b.y;
    acc += (ACC)a.z * (ACC)b.z;
    acc += (ACC)a.w * (ACC)b.w;
}

/* as: the warp's RW rows of A in the slot, bs: the lane's TL rows of Bᵀ, kl: its k-lane. */
__device__ __forceinline__ void compute_chunk(ACC (&acc)[RW * TL], const ELEM* as, const ELEM* bs, int kl)
{
    if constexpr (TL >= RW) {                        /* hold A's RW vectors, stream Bᵀ's */
        VEC a[RW];
#pragma unroll
        for (int r = 0; r < RW; ++r)
            a[r] = *reinterpret_cast<const VEC*>(as + r * KC + 4 * kl);
#pragma unroll
        for (int n = 0; n < TL; ++n) {
            const VEC b = *reinterpret_cast<const VEC*>(bs + n * KC + 4 * kl);
#pragma unroll
            for (int r = 0; r < RW; ++r)
                fma4(acc[r * TL + n], a[r], b);
        }
    } else {                                         /* hold Bᵀ's TL vectors, stream A's */
        VEC b[TL];
#pragma unroll
        for (int n = 0; n < TL; ++n)
            b[n] = *reinterpret_cast<const VEC*>(bs + n * KC + 4 * kl);
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const VEC a = *reinterpret_cast<const VEC*>(as + r * KC + 4 * kl);
#pragma unroll
            for (int n = 0; n < TL; ++n)
                fma4(acc[r * TL + n], a, b[n]);
        }
    }
}

/* One level of the butterfly at distance D (a k-lane bit): acc[0, 2 D V) holds the lane's
 * share on entry, of which it keeps the upper half where its bit D is set (else the lower),
 * sends the other half to lane ^ D and adds what comes back: acc[0, D V) on exit. One
 * template per level: written as one loop over the levels, the compiler left it rolled and
 * put acc in local memory. */
template <int D>
__device__ __forceinline__ void butterfly(ACC (&acc)[RW * TL], int lane)
{
    const bool up = (lane & D) != 0;
#pragma unroll
    for (int i = 0; i < D * V; ++i) {
        const ACC send = up ? acc[i] : acc[i + D * V];
        const ACC keep = up ? acc[i + D * V] : acc[i];
        acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, D);
    }
}

extern "C" __global__ __launch_bounds__(NT, 1)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ S, ELEM* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    /* a launch that does not match the header would overflow the ring */
    if (blockDim.x != NT || 4u * RING * STAGE_WORDS > dyn_smem_bytes())
        __trap();
    const ELEM* const sm = reinterpret_cast<const ELEM*>(smem_raw);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem_raw);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int kl = lane % KL, nl = lane / KL;
    const int ntiles = (N + TN - 1) / TN;
    const int nt = blockIdx.x % ntiles, mb = blockIdx.x / ntiles;   /* N-tiles fastest: A's re-read hits L2 */
    const int m0 = mb * RB, n0 = nt * TN, mw = m0 + warp * RW;
    const int ldk = (K + KC - 1) / KC * KC;
    const bool kvec = (K & 3) == 0;

    /* this slice's chunks [c0, c1) */
    const int chunks = ldk / KC, splits = gridDim.y, z = blockIdx.y;
    const int per = (chunks + splits - 1) / splits;
    const int c0 = min(chunks, z * per), c1 = min(chunks, c0 + per);

    /* the ring slots' barriers for bulk copies (one arrival: thread 0's expect_tx) */
    __shared__ __align__(8) unsigned long long full_bar[RING];
#if BULK_A
    if (tid < RING)
        mbar_init((unsigned)__cvta_generic_to_shared(&full_bar[tid]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    __syncthreads();
#endif

    ACC acc[RW * TL];
#pragma unroll
    for (int i = 0; i < RW * TL; ++i)
        acc[i] = (ACC)0;

#pragma unroll 1
    for (int s = 0; s < RING - 1; ++s) {
        if (c0 + s < c1)
            load_chunk(sbase, s, (c0 + s) * KC, A, S, M, K, ldk, mw, n0, kvec, warp, lane, tid, full_bar);
        cp_async_commit();
    }
    int st = 0;                                      /* ring slot of chunk c */
    for (int c = c0; c < c1; ++c) {
        cp_async_wait<RING - 2>();                   /* chunk c has landed (this thread's copies) */
#if BULK_A
        if (kvec && c * KC + KC <= K)                /* ... and its bulk copies: the slot's n-th fill */
            mbar_wait((unsigned)__cvta_generic_to_shared(&full_bar[st]), (unsigned)(((c - c0) / RING) & 1));
#endif
        __syncthreads();                             /* ... everyone's; and slot st - 1 is free */
        const int cn = c + RING - 1;
        if (cn < c1)
            load_chunk(sbase, st == 0 ? RING - 1 : st - 1, cn * KC, A, S, M, K, ldk, mw, n0, kvec,
                       warp, lane, tid, full_bar);
        cp_async_commit();
        compute_chunk(acc, sm + st * STAGE_WORDS + warp * RW * KC,
                      sm + st * STAGE_WORDS + A_WORDS + nl * TL * KC, kl);
        st = st + 1 == RING ? 0 : st + 1;
    }
    cp_async_wait<0>();

    /* Butterfly over the KL k-lanes (distances KL / 2 .. 1): lane (kl, nl) ends with outputs
     * V kl .. V kl + V - 1 of its column group's RW x TL (row-major), each the sum of all KL
     * k-lanes in a fixed order. */
    if constexpr (KL == 32) butterfly<16>(acc, lane);
    if constexpr (KL >= 16) butterfly<8>(acc, lane);
    butterfly<4>(acc, lane);
    butterfly<2>(acc, lane);
    butterfly<1>(acc, lane);
    ACC out[VP];
#pragma unroll
    for (int e = 0; e < VP; ++e)
        out[e] = e < V ? acc[e] : (ACC)0;

    if (splits > 1 && !splitk_fixup<VP, NT, 1>(out, workspace, gridDim.x, blockIdx.x, splits, z, tid))
        return;

    const int r = (V * kl) / TL, c = (V * kl) % TL;
    const int m = mw + r, n = n0 + nl * TL + c;
    if (m >= M)
        return;
    ELEM* dst = C + (size_t)m * N + n;
    if constexpr (V % 4 != 0) {                      /* TL = 12: 6 columns from 0 or 6 of the group */
#pragma unroll
        for (int e = 0; e < V; ++e)
            if (n + e < N)
                dst[e] = (ELEM)out[e];
    } else {
#pragma unroll
        for (int q = 0; q < V / 4; ++q) {
            if ((N & 3) == 0 && n + 4 * q < N) {     /* N % 4 == 0: the 4 columns are in */
                VEC o;
                o.x = (ELEM)out[4 * q]; o.y = (ELEM)out[4 * q + 1]; o.z = (ELEM)out[4 * q + 2]; o.w = (ELEM)out[4 * q + 3];
                *reinterpret_cast<VEC*>(dst + 4 * q) = o;
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (n + 4 * q + e < N)
                        dst[4 * q + e] = (ELEM)out[4 * q + e];
            }
        }
    }
}
