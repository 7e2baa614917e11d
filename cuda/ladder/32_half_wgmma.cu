/*
+++
name = "half_wgmma"
title = "FP16/BF16 by Hopper wgmma from shared tiles that TMA fills through an mbarrier ring"
summary = "The tensor-core ladder's third step: no thread loads an operand any more. One elected producer thread issues TMA copies (cp.async.bulk.tensor, 128-byte swizzle) of A's and B's k-tiles into a ring of shared-memory stages, each completing as bytes on the stage's 'full' mbarrier; two consumer warpgroups multiply straight from shared memory with wgmma.mma_async m64nNk16 (a 128 × 256 tile of C by default, FP32 accumulators; the tile's width bn is a parameter, so that the tiles can fill the last wave) and release each stage on its 'empty' mbarrier. B as K×N is read MN-major (wgmma's transpose bit), B as N×K K-major like A, so neither layout is copied. persist = 1: one CTA per SM looping over the tiles in grouped order; streamk = 1: the last partial wave's tiles shared along K by every CTA (stream-K), their partials summed in k order by the last to arrive; tmastore = 1: C leaves by TMA stores from a small staging buffer while the consumers go on to the next tile; cluster = 2: pairs of CTAs on tiles one above the other share B's k-tiles by TMA multicast."
source = "PTX ISA wgmma.mma_async (.f16/.bf16, matrix descriptors, MN- and K-major operands), cp.async.bulk.tensor and mbarrier expect_tx; CUDA driver cuTensorMapEncodeTiled; CUTLASS's canonical GMMA layouts (cute mma_traits_sm90_gmma.hpp); the TMA and wgmma levels of ThunderKittens' H100 GEMM walk-through; cuda/ladder/23_tf32_wgmma_tma.cu"
role = "rung"
order = 32
dtypes = ["float16", "bfloat16"]
layouts = ["kn", "nk"]
precision = "half"
arch_suffix = "a"

[params]
stages = [4, 3]
persist = [1, 0]
bm = [128, 64]
bn = [256, 128, 192, 160, 224]
streamk = [0, 1]
rowpad = [16, 128]
inplace = [0, 1]
tmastore = [0, 1]
cluster = [1, 2]

[descriptions]
stages = "k-tiles (64 deep, (bm + bn) · 128 bytes of A and B) in flight in the TMA ring: 3 or 4"
persist = "1: a persistent grid of one CTA per SM looping over the tiles; 0: one tile per CTA"
tmastore = "1: C leaves by TMA stores from a small staging buffer, so the consumers go on to the next tile while the copy engine writes it (where C's rows are whole 16-byte units); 0: stores from registers"
bm = "rows of C a CTA computes, 64 per consumer warpgroup: 128 (two consumers) or 64 (one)"
bn = "columns of C a CTA computes, the wgmma's N: a multiple of 32 from 128 to 256 (a width whose tiles fill the last wave)"
streamk = "1: the last partial wave's tiles shared along K by every CTA, partials summed in k order (persist = 1)"
rowpad = "bytes every row of A and B that TMA reads is a multiple of: 16 (a padded copy only where TMA needs one) or 128 (a padded copy wherever a row would start inside an L2 line)"
inplace = "with rowpad = 128: 1 leaves A where it lies (padded only where a row is not whole 16 bytes), B still onto whole lines; 0 both onto whole lines"
cluster = "CTAs of a cluster on neighbouring tiles along M: 2 load half of B's k-tile each and multicast it to both (B's L2 reads halved); 1: none"

[derived]
tiles = "cdiv(M, bm) * cdiv(N, bn)"       # bm (M) × bn (N) tiles of C
units = "cdiv(M, bm * cluster) * cdiv(N, bn)"   # a cluster's tiles one above the other
cps = "2 if bm == 64 and bn == 128 else 1"   # CTAs an SM holds
bbox = "64 * cdiv(bn, 64)"                # B's columns a stage has room for (whole 64-column boxes)
pe = "rowpad // 2"                        # elements a padded row is a multiple of
pea = "8 if inplace else pe"              # of A: 8 (the 16 bytes TMA needs) where it stays
kp = "roundup(K, pe)"                     # a row of K 16-bit elements padded to rowpad bytes
kpa = "roundup(K, pea)"                   # a row of A, padded
np = "roundup(N, pe)"
# padded copies only where a row is not a multiple of its pitch: Ap (M × Kpa) when K % pea;
# Bp when B's rows are short: K × Np for B as K×N (N % pe), N × Kp for N×K (K % pe)
ap_bytes = "2 * M * kpa if K % pea else 0"
bp_bytes = "(2 * N * kp if K % pe else 0) if NK else (2 * K * np if N % pe else 0)"

[[constraints]]
check = "rowpad == 16 or rowpad == 128"
reason = "rowpad must be 16 (TMA's least row pitch) or 128 (an L2 line)"

[[constraints]]
check = "inplace == 0 or (inplace == 1 and rowpad == 128)"
reason = "inplace must be 0 or 1, and 1 only with rowpad = 128 (with 16 every row TMA can read stays in place)"

[[constraints]]
check = "(stages == 3 or stages == 4) and (persist == 0 or persist == 1)"
reason = "stages must be 3 or 4 (5 stages of 48 KB exceed 227 KB of shared memory), persist 0 or 1"

[[constraints]]
check = "cluster == 1 or (cluster == 2 and persist == 1 and streamk == 0)"
reason = "cluster must be 1 or 2, and 2 only in a persistent grid without stream-K (a cluster's two CTAs walk their tiles as one)"

[[constraints]]
check = "streamk == 0 or persist == 1"
reason = "stream-K shares the last wave's tiles among the CTAs of a persistent grid: it needs persist = 1"

[[constraints]]
check = "(bm == 64 or bm == 128) and bn % 32 == 0 and 128 <= bn <= 256"
reason = "a consumer warpgroup computes 64 rows (bm: one or two of them) by one wgmma of N = bn columns (a multiple of 32 up to 256: bn / 2 accumulators a thread)"

[[constraints]]
check = "streamk == 0 or bm == 128 or bn != 224"
reason = "stream-K's sum of partials beside one consumer's 112 accumulators (bm = 64, bn = 224) spills registers"

[[constraints]]
check = "tmastore == 0 or streamk == 0 or bm == 128 or bn != 128"
reason = "two CTAs to an SM at 64 x 128 tiles (128 registers a thread): stream-K's sum of partials and C's staging together spill registers"

[[constraints]]
check = "stages * (bm + 64 * cdiv(bn, 64)) * 128 + (bm // 64) * 16384 * tmastore + 1280 <= 232448"
reason = "the stages and C's staging (16 KB a consumer) must fit in 227 KB of shared memory: with tmastore, 4 stages of 128 x 256 tiles just fit"

[launch]
# persistent: a CTA per SM slot (with stream-K every slot: a last wave has idle ones to share)
grid = ["(SMS * cps if streamk else cluster * min(units, SMS * cps // cluster)) if persist else tiles", 1]
block = ["128 + 2 * bm", 1]               # a producer warpgroup + bm / 64 consumer warpgroups
# the stages + C's staging (tmastore: 2 boxes of 8 KB a consumer) + atom alignment +
# mbarriers (full and empty per stage: 64 of the 256 bytes)
shared = "stages * (bm + bbox) * 128 + (bm // 64) * 16384 * tmastore + 1024 + 256"
# stream-K: an arrival counter per tile (256-byte aligned), then a partial tile (bm × bn
# floats) per piece of the shared tiles: fewer than 2 · grid
workspace = "roundup(4 * tiles, 256) + 2 * SMS * cps * bm * bn * 4 if streamk else 0"

[prepass]            # padded copies only where needed: no blocks (no launch) otherwise
entry = "prepass"
grid = ["cdiv(max(kpa if K % pea else 0, (kp if NK else np) if bp_bytes else 0), 256)", "(cdiv(M, 32) if K % pea else 0) + (cdiv(N if NK else K, 32) if bp_bytes else 0)"]
block = [32, 8]
# the padded copies (at least 256 bytes: S is a device pointer even where nothing is padded,
# and C's stand-in map below lies inside it); the tensor maps are the kernel's first three
# arguments
scratch = "max(ap_bytes + bp_bytes, 256)"
maps_in = "params"

# A (or Ap) as M rows of K (Kp) elements, box 64 (k) × 128 (m); 128B swizzle
[[prepass.tensor_maps]]
base = "'scratch' if K % pea else 'a'"
offset = 0
dims = ["kpa", "M"]
stride = "2 * kpa"
box = [64, "bm"]
elem = "b16"

# B (or Bp): as K×N, K rows of N (Np), boxes 64 (n) × 64 (k); as N×K, N rows of K (Kp),
# one box 64 (k) × bn (n); 128B swizzle; in a cluster of two each CTA loads half of the k
# (K×N) or n (N×K) rows
[[prepass.tensor_maps]]
base = "'scratch' if bp_bytes else 'b'"
offset = "ap_bytes if bp_bytes else 0"
dims = ["kp if NK else np", "N if NK else K"]
stride = "2 * (kp if NK else np)"
box = [64, "(bn if NK else 64) // cluster"]
elem = "b16"

# C as M rows of N elements of OB bytes, in 4-byte units (a 16-bit C two to a unit), box 32
# (128 bytes) × 64 rows; 128B swizzle: tmastore's stores. TMA needs 16-byte row strides:
# where N · OB % 16 the kernel stores from registers, and the map is a one-row stand-in at
# the scratch's start that nothing uses
[[prepass.tensor_maps]]
base = "'c' if N * OB % 16 == 0 else 'scratch'"
offset = 0
dims = ["N * OB // 4 if N * OB % 16 == 0 else 4", "M if N * OB % 16 == 0 else 1"]
stride = "N * OB if N * OB % 16 == 0 else 16"
box = [32, 64]
+++
*/
/*
 * 32_half_wgmma.cu -- C = A·B with A (M×K) and B (K×N, or N×K with B_NK) in FP16 or BF16,
 * FP32 accumulators, C written as FP32 or the input type, on Hopper (sm_90a).
 *
 * What it adds to 31_half_mma: the copies and the multiplies leave the threads.
 *  - TMA: a tensor map per operand (encoded on the host by cuTensorMapEncodeTiled, passed
 *    as the kernel's first arguments: TMA reads them from the parameter space, with no
 *    fence and no fetch from global memory before the first copy); one thread of warpgroup 0 announces a stage's
 *    48 KB on its "full" mbarrier (expect_tx) and issues the copies, which land in the
 *    128-byte swizzle (16-byte chunk c of row r at c ^ (r % 8), 1024-byte atoms) and
 *    zero-fill past the matrix. Warps 1-3 of warpgroup 0 have nothing to do.
 *  - wgmma: warpgroups 1 and 2 (64 rows of C each) wait on "full", issue 4 wgmma.m64n256k16
 *    per 64-deep k-tile reading both operands from shared memory through descriptors, keep
 *    one k-tile of wgmma in flight, and arrive on the previous stage's "empty" mbarrier
 *    (256 arrivals) so that the producer may refill it. A tile's first wgmma sets D = A·B
 *    (scale-d 0): accumulators zeroed by ordinary instructions make ptxas wait after every
 *    wgmma of the loop (its warning C7515).
 *  - TMASTORE = 1: C leaves through shared memory: a consumer writes a box (64 rows × 128
 *    bytes) of its tile into one of its two staging buffers, one thread stores it by TMA
 *    (a map of C in 4-byte units), and the consumers go on to the next tile while the copy
 *    engine writes C (half.cuh's store_wgmma_out_tma). Where C's rows are not whole 16-byte
 *    units, or a 16-bit C's tile not whole boxes (BN 160, 224), C is stored from registers.
 *  - Layouts: A's tile is K-major (rows of 64 k = 128 B). B as N×K likewise (one 64 × 256
 *    box). B as K×N is MN-major: four boxes of 64 columns × 64 k, 8 KB each, rows of 64
 *    columns = 128 B per k; its descriptor says so (leading byte offset 8 KB from one
 *    64-column block to the next, stride 1 KB from one 8-k atom to the next) and the
 *    wgmma's transpose bit for B is set. A step of 16 in k moves A's (and N×K B's)
 *    descriptor 32 bytes along the swizzled row, K×N B's two atoms (2 KB) down.
 * Technique and source: the PTX ISA's wgmma.mma_async (matrix descriptors, MN- and K-major
 * operands), cp.async.bulk.tensor and mbarrier expect_tx; CUTLASS's canonical GMMA layouts;
 * the TMA and wgmma levels of ThunderKittens' H100 GEMM walk-through; written anew for this
 * lab on top of 23_tf32_wgmma_tma.cu.
 * Left for the next step: the consumers stall during the epilogue (no second tile in
 * flight, no ping-pong), one CTA per SM.
 *
 * Pre-pass (timed with the GEMM; no blocks at all when every row is a multiple of its
 * pitch): Ap = A padded to roundup(K, PE_A) where K % PE_A; Bp = B padded to Np (K×N) or Kp
 * (N×K), multiples of ROWPAD / 2, where its rows are short, zeros in the padding. ROWPAD 16
 * pads only where TMA must have it; 128 also where rows would start inside an L2 line (K =
 * 3000: each 128-byte box row then spans two lines, and the L2 serves more requests for the
 * same bytes), A's rows only without INPLACE (A's rows read in place cost less than B's:
 * benchmarks/NOTES.md).
 *
 * Tiles: BM = 128 rows × BN = 256 columns (or BM = 64: one consumer warpgroup, two CTAs to
 * an SM at BN = 128; BN = 128-224: wgmma.m64nBNk16, a width whose tiles leave no mostly idle
 * last wave: 1536 wide, 8 tiles of 192 where 6 of 256 or 12 of 128 would), BK = 64; persist = 1:
 * grid of min(tiles, #SMs · CTAS_PER_SM)
 * CTAs, each taking tiles t = blockIdx.x + i · gridDim.x, grouped by GM = 8 tile rows (the
 * ring's stages and barrier phases run on across tiles); persist = 0: one tile per CTA.
 * STREAMK = 1 (with PERSIST): a CTA per SM slot. Where the tiles leave a last partial wave
 * (rem = tiles % grid), its rem tiles' k-tiles are cut into one contiguous range per CTA
 * (half.cuh's TileWalk), so that no SM idles through the last wave; a tile cut into pieces
 * is summed by the CTA that finishes its last piece, in k order from the pieces' partials
 * in the workspace (streamk_piece), and stored as any other.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM     __half or __nv_bfloat16 (the run's input type)      (default __half)
 *   OUT      float or ELEM (the run's output type)                (default float)
 *   ACC      float                                                (default float)
 *   STAGES   3 or 4                                               (default 4)
 *   PERSIST  0 or 1                                               (default 1)
 *   B_NK     1: B is stored N×K ("layout nk")                     (default 0)
 *   BM, BN   128 or 64; a multiple of 32 from 128 to 256: the tile (default 128, 256)
 *   STREAMK  1: share the last partial wave along K (PERSIST 1)   (default 0)
 *   ROWPAD   16 or 128: bytes a row TMA reads is a multiple of     (default 16)
 *   INPLACE  1: with ROWPAD 128, A's rows stay in place           (default 0)
 *   TMASTORE 1: C by TMA stores from a staging buffer              (default 0)
 *   CLUSTER  2: CTA pairs share B's k-tiles by multicast (PERSIST) (default 1)
 * CLUSTER = 2: the grid's CTAs pair up as clusters (__cluster_dims__) on two tiles one above
 * the other (a unit of tile_origin's order, 2 · BM rows); each producer loads half of B's
 * k-tile (half its k rows as K×N, half its n rows as N×K) and multicasts it into both CTAs'
 * stage, so that B's rows come from L2 once per pair: where they start inside a sector they
 * cost L2 requests, not a copy. A stage is refilled once both CTAs' consumers released it
 * (lane 0 of each consumer warp also arrives on the peer's empty barrier).
 * Launch: prepass (32, 8) blocks as the header says; matmul block 128 + 2 · BM, grid as
 * above, dynamic shared memory STAGES · (BM + 64 · cdiv(BN, 64)) · 128 + (TMASTORE: BM / 64
 * · 16 KB) + 1280; args (the maps of A, B and C, A, scratch, C, M, N, K, workspace) (the workspace: stream-K's
 * counters and partial tiles; null without it).
 * Models: FLOPs = 2·M·N·K; bytes = (M·K + K·N)·2 + M·N·sizeof(OUT).
 */
#include "half.cuh"
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM __half
#endif
#ifndef OUT
#define OUT float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef PERSIST
#define PERSIST 1
#endif
#ifndef B_NK
#define B_NK 0
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef STREAMK
#define STREAMK 0
#endif
#ifndef ROWPAD
#define ROWPAD 16
#endif
#ifndef TMASTORE
#define TMASTORE 0
#endif
#ifndef INPLACE
#define INPLACE 0
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif
#if CLUSTER != 1 && (CLUSTER != 2 || PERSIST != 1 || STREAMK != 0)
#error "CLUSTER must be 1 or 2, and 2 only with PERSIST 1 and STREAMK 0"
#endif
#if INPLACE != 0 && (INPLACE != 1 || ROWPAD != 128)
#error "INPLACE must be 0 or 1, and 1 only with ROWPAD 128"
#endif
#if ROWPAD != 16 && ROWPAD != 128
#error "ROWPAD must be 16 or 128"
#endif
/* elements a padded row of A is a multiple of: 8 is the 16 bytes TMA needs */
#define PE_A (INPLACE ? 8 : ROWPAD / 2)
#define BK 64
#define GM 8
#define CONSUMERS (BM / 64)
#define NT (128 * (1 + CONSUMERS))
#define A_BYTES (BM * BK * 2)                /* 16 KB at BM = 128 */
/* room for B in whole boxes of 64 columns (as K×N a bn of 160 or 224 loads one it half uses) */
#define B_BYTES (64 * ((BN + 63) / 64) * BK * 2)   /* 32 KB at BN = 256 */
#define STAGE_BYTES (A_BYTES + B_BYTES)
#if STAGES < 3 || STAGES > 4 || (PERSIST != 0 && PERSIST != 1)
#error "STAGES must be 3 or 4, PERSIST 0 or 1"
#endif
#if (BM != 64 && BM != 128) || BN % 32 != 0 || BN < 128 || BN > 256
#error "BM must be 64 or 128, BN a multiple of 32 from 128 to 256"
#endif
#if STREAMK != 0 && (STREAMK != 1 || PERSIST != 1)
#error "STREAMK must be 0 or 1, and 1 only with PERSIST 1"
#endif
/* 64 × 128 tiles: two CTAs to an SM (at most 97 KB of shared memory and 128 registers each) */
#define CTAS_PER_SM (BM == 64 && BN == 128 ? 2 : 1)
static_assert(sizeof(ELEM) == 2, "ELEM is a 16-bit type");
/* C's staging: a consumer's 2 boxes (C_STAGE_BYTES), used where its tile is whole boxes */
#define STG_BYTES (TMASTORE ? CONSUMERS * C_STAGE_BYTES : 0)

/* Ap (M × Kp) where K % PE_A, then Bp where B's rows are short of ROWPAD / 2, zero-padded
 * (half.cuh's pad_short_rows). */
extern "C" __global__ __launch_bounds__(256)
void prepass(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
             int M, int N, int K)
{
    pad_short_rows<B_NK, PE_A, ROWPAD / 2>(A, B, S, M, N, K);
}

extern "C" __global__ __launch_bounds__(NT, CTAS_PER_SM) CLUSTER_DIMS_OF(CLUSTER)
void matmul(const __grid_constant__ TensorMapArg mapA, const __grid_constant__ TensorMapArg mapB,
            const __grid_constant__ TensorMapArg mapC, const ELEM* __restrict__ A, const ELEM* __restrict__ S, OUT* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
    /* the stages, C's staging (1024-aligned: the stages are whole KB), then full[s] at +8s,
       empty[s] at +8(STAGES+s): 2 STAGES * 8 <= 256 */
    const unsigned stg = base + STAGES * STAGE_BYTES;
    const unsigned bars = stg + STG_BYTES;

    const int tid = threadIdx.x;
    const int wg = tid >> 7;                            /* 0: producer, 1-2: consumers */
    const int ktiles = (K + BK - 1) / BK;
    /* a cluster's CLUSTER CTAs take tiles one above the other as one unit of tile_origin's
       order (rank r the r-th; past M: zeros in, nothing out) and walk the units together */
    const unsigned rank = cluster_rank_of<CLUSTER>();
    const int mtu = (M + BM * CLUSTER - 1) / (BM * CLUSTER), nt = (N + BN - 1) / BN;
    const int units = mtu * nt;
    const TileWalk<> walk(units, ktiles, STREAMK, gridDim.x / CLUSTER, blockIdx.x / CLUSTER);

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);                 /* the producer's arrive + tx bytes */
            /* the consumer threads, and one lane a warp of the peer's (whose stage this
               CTA's multicast refills too) */
            mbar_init(bars + 8 * (STAGES + s), (128 + 4 * (CLUSTER - 1)) * CONSUMERS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#if CLUSTER > 1
    cluster_sync();                                     /* the peer's barriers exist before its loads */
#else
    __syncthreads();
#endif

#if (STREAMK || TMASTORE) && CONSUMERS == 2 && BN > 128
    /* stream-K's sum of partials, or the staging of C, beside up to 128 accumulators needs
     * more than the 168 registers a thread of 384 gets at launch: the producer's go to the
     * consumers (warpgroup-wide) */
    if (wg == 0)
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    else
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
#endif

    if (wg == 0) {
        if (tid == 0) {
            const void* tmA = &mapA;                    /* in the launch's parameter space */
            const void* tmB = &mapB;
            tensormap_prefetch(tmA);
            tensormap_prefetch(tmB);
            int it = 0, t, kb, ke, a;
            for (int n = 0; walk.piece(n, t, kb, ke, a); ++n) {
                int row0, col0;
                tile_origin(t, mtu, nt, GM, BM * CLUSTER, BN, row0, col0);
                row0 += rank * BM;
                for (int kt = kb; kt < ke; ++kt, ++it)
                    load_half_k_tile<STAGES, BM, BN, B_NK, CLUSTER, 1>(it, base, bars, tmA, tmB, row0, col0,
                                                                       kt, rank);
            }
        }
    } else {
        const int cw = wg - 1;
        const int warp = (tid >> 5) & 3, lane = tid & 31;
#if TMASTORE
        /* TMA stores where C's rows are whole 16-byte units and a tile whole 128-byte boxes */
        const bool staged = c_boxes_whole<BN, OUT>() && (N * (int)sizeof(OUT)) % 16 == 0;
        const bool lead = (tid & 127) == 0;
        unsigned part = 0;
#endif
        float acc[BN / 2];
        int it = 0, t, kb, ke, a;
        for (int n = 0; walk.piece(n, t, kb, ke, a); ++n) {
            int row0, col0;
            tile_origin(t, mtu, nt, GM, BM * CLUSTER, BN, row0, col0);
            row0 += rank * BM;
            for (int kt = kb; kt < ke; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(bars + 8 * s, (it / STAGES) & 1);
                const unsigned sa = base + s * STAGE_BYTES + cw * (64 * 128);
                const unsigned sb = base + s * STAGE_BYTES + A_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
#if B_NK
                    wgmma_k16<BN, 0, ELEM>(acc, make_desc(sa + kk * 32), make_desc(sb + kk * 32), kk > 0 || kt > kb);
#else
                    wgmma_k16<BN, 1, ELEM>(acc, make_desc(sa + kk * 32), make_desc_mn(sb + kk * 2048, 8192), kk > 0 || kt > kb);
#endif
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > kb)                            /* k-tile it-1 read: release its stage */
                    release_stage<CLUSTER>(bars + 8 * (STAGES + (it - 1) % STAGES), rank, lane);
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (ke > kb)
                release_stage<CLUSTER>(bars + 8 * (STAGES + (it - 1) % STAGES), rank, lane);
#if STREAMK
            /* a piece of a shared tile: its partial to the workspace; the tile's last piece
               to arrive sums them all (named barrier 1: the consumers only) */
            if ((kb > 0 || ke < ktiles)
                && !streamk_piece<BN / 2, 128 * CONSUMERS, 1>(acc, walk, a, workspace, units, tid - 128))
                continue;
#endif
#if TMASTORE
            if constexpr (c_boxes_whole<BN, OUT>()) {
                if (staged) {                           /* named barriers 2 and 3 */
                    store_wgmma_out_tma<BN, OUT>(acc, stg + cw * C_STAGE_BYTES, &mapC, row0 + cw * 64,
                                                 col0, warp, lane, lead, 2 + cw, part);
                    continue;
                }
            }
#endif
            store_wgmma_out<BN>(acc, C, row0 + cw * 64, col0, M, N, warp, lane);
        }
#if TMASTORE
        if (staged && lead)
            bulk_wait<0>();                             /* the last tile's stores complete */
#endif
    }
#if CLUSTER > 1
    cluster_sync();                                     /* no exit while the peer may still load or arrive here */
#endif
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
