/*
+++
name = "half_wgmma_pingpong"
title = "FP16/BF16 by wgmma and TMA, two consumer warpgroups in ping-pong on tiles of their own"
summary = "The tensor-core ladder's fourth step: step 32's producer thread and TMA ring, but each consumer warpgroup owns whole 128 × 128 tiles of C (two wgmma.m64n128k16 a k-step into 128 FP32 accumulators; 128 × 64 with bn = 64) and the two take the CTA's tiles in turn; with cluster = 2, pairs of CTAs on neighbouring tiles share A's rows by TMA multicast. A named-barrier handshake orders them: one runs its main loop while the other writes its last tile out, so the tensor cores never wait for an epilogue; the ring (up to 6 stages of 32 KB) carries the two tiles' k-tiles in sequence. Persistent grid, grouped tile order; B as K×N read MN-major, as N×K K-major."
source = "PTX ISA wgmma.mma_async, cp.async.bulk.tensor (and its .multicast::cluster form), mbarrier expect_tx and try_wait.parity (the current or immediately preceding phase), remote mbarrier.arrive, barrier.cluster, bar.sync/bar.arrive named barriers; CUTLASS's sm90 ping-pong kernel schedule (KernelTmaWarpSpecializedPingpong: ordered math warpgroups); the ping-pong level of ThunderKittens' H100 GEMM walk-through; cuda/ladder/32_half_wgmma.cu"
role = "rung"
order = 34
dtypes = ["float16", "bfloat16"]
layouts = ["kn", "nk"]
precision = "half"
arch_suffix = "a"

[params]
stages = [6, 4]
bn = [128, 64]
cluster = [1, 2]
rowpad = [16, 128]
streamk = [0, 1]

[descriptions]
stages = "k-tiles (64 deep, 16 KB of A and bn · 128 bytes of B) in flight in the TMA ring: 4 or 6"
bn = "columns of a consumer's tile (128 × bn): 128, or 64 (twice the tiles, where 128 × 128 ones leave SMs idle)"
cluster = "CTAs of a cluster on neighbouring tiles along N: 2 load half of A's rows each and multicast them to both (A's L2 reads halved); 1: none"
rowpad = "bytes every row of A and B that TMA reads is a multiple of: 16 (a padded copy only where TMA needs one) or 128 (a padded copy wherever a row would start inside an L2 line)"
streamk = "1: the last partial wave's tiles shared along K by every CTA in ranges of at least 8 k-tiles, partials summed in k order (cluster = 1)"

[derived]
tiles = "cdiv(M, 128) * cdiv(N, bn)"      # 128 × bn tiles of C, each one consumer's
units = "cdiv(M, 128) * cdiv(N, bn * cluster)"   # a cluster's tiles side by side along N
pe = "rowpad // 2"                        # elements a padded row is a multiple of
kp = "roundup(K, pe)"                     # a row of K 16-bit elements padded to rowpad bytes
np = "roundup(N, pe)"
# padded copies only where a row is not a multiple of rowpad bytes, as step 32
ap_bytes = "2 * M * kp if K % pe else 0"
bp_bytes = "(2 * N * kp if K % pe else 0) if NK else (2 * K * np if N % pe else 0)"

[[constraints]]
check = "rowpad == 16 or rowpad == 128"
reason = "rowpad must be 16 (TMA's least row pitch) or 128 (an L2 line)"

[[constraints]]
check = "streamk == 0 or (streamk == 1 and cluster == 1)"
reason = "streamk must be 0 or 1, and 1 only without clusters (a cluster's two CTAs walk their tiles as one)"

[[constraints]]
check = "cluster == 1 or cluster == 2"
reason = "cluster must be 1 or 2 (two CTAs sharing A's rows by TMA multicast)"

[[constraints]]
check = "(stages == 4 or stages == 6) and (bn == 128 or bn == 64)"
reason = "stages must be 4 or 6 (7 stages of 32 KB leave no room for a second tile's first k-tiles' worth of margin; 8 exceed 227 KB), bn 128 or 64 (wgmma.m64n128k16 or m64n64k16)"

[launch]
# persistent: the consumers alternate over its tiles (stream-K: every SM, a last wave has
# idle ones to share)
grid = ["SMS if streamk else cluster * min(units, SMS // cluster)", 1]
block = [384, 1]                          # a producer warpgroup + 2 consumer warpgroups
shared = "stages * (16384 + 128 * bn) + 1024 + 256"
# stream-K: an arrival counter per tile (256-byte aligned), then a partial tile (128 × bn
# floats) per piece of the shared tiles: fewer than 2 · grid
workspace = "roundup(4 * tiles, 256) + 2 * SMS * 128 * bn * 4 if streamk else 0"

[prepass]            # padded copies only where needed: no blocks (no launch) otherwise
entry = "prepass"
grid = ["cdiv(max(kp if K % pe else 0, (kp if NK else np) if bp_bytes else 0), 256)", "(cdiv(M, 32) if K % pe else 0) + (cdiv(N if NK else K, 32) if bp_bytes else 0)"]
block = [32, 8]
# the padded copies (at least 256 bytes: S is a device pointer even where nothing is padded);
# the tensor maps are the kernel's first two arguments
scratch = "max(ap_bytes + bp_bytes, 256)"
maps_in = "params"

# A (or Ap) as M rows of K (Kp) elements, box 64 (k) × 128 (m) (× 64 in a cluster of two:
# each CTA loads one half for both); 128B swizzle
[[prepass.tensor_maps]]
base = "'scratch' if K % pe else 'a'"
offset = 0
dims = ["kp", "M"]
stride = "2 * kp"
box = [64, "128 // cluster"]
elem = "b16"

# B (or Bp): as K×N, K rows of N (Np), boxes 64 (n) × 64 (k); as N×K, N rows of K (Kp),
# one box 64 (k) × bn (n); 128B swizzle
[[prepass.tensor_maps]]
base = "'scratch' if bp_bytes else 'b'"
offset = "ap_bytes if bp_bytes else 0"
dims = ["kp if NK else np", "N if NK else K"]
stride = "2 * (kp if NK else np)"
box = [64, "bn if NK else 64"]
elem = "b16"
+++
*/
/*
 * 34_half_wgmma_pingpong.cu -- C = A·B with A (M×K) and B (K×N, or N×K with B_NK) in FP16 or
 * BF16, FP32 accumulators, C written as FP32 or the input type, on Hopper (sm_90a).
 *
 * What it changes in 32_half_wgmma: there, both consumer warpgroups share each 128 × 256
 * tile and finish it together, so the tensor cores idle while both write C out. Here each
 * consumer owns whole 128 × 128 tiles (rows 0-63 and 64-127 by two wgmma.m64n128k16 a
 * k-step, 128 accumulators a thread) and the two take the CTA's tiles in turn: consumer 0
 * tiles 0, 2, 4, ..., consumer 1 tiles 1, 3, 5, ... of its persistent sequence.
 *  - The producer fills the ring with tile 0's k-tiles, then tile 1's, and so on: ring
 *    position p counts the k-tiles of the CTA's tiles (stream-K: pieces) in order.
 *  - Order (named barriers 1 and 2, 256 threads each): a consumer starts a tile's main
 *    loop only once the other has issued all of its previous tile's wgmmas (bar.sync on
 *    its own id, which the other bar.arrives), then lets the other go the same way. So one
 *    warpgroup's main loop runs while the other writes its tile out, and a consumer never
 *    waits on a stage more than one phase ahead of its barrier (mbarrier.try_wait.parity
 *    names only the current or the preceding phase: a consumer far ahead would take a
 *    stale phase for its own).
 *  - Each stage is read by one consumer: "empty" barriers count 128 arrivals.
 *  - CLUSTER = 2: the grid's CTAs pair up as clusters (__cluster_dims__) on two neighbouring
 *    tiles along N, which read the same 128 rows of A. Each CTA's producer loads 64 of
 *    those rows a k-tile and multicasts them into both CTAs' stage (A's box is 64 rows),
 *    so A's reads from L2 halve: 24 KB a k-tile a CTA where one alone reads 32. A stage is
 *    then refilled by both producers, so its empty barrier also counts lane 0 of each of
 *    the peer's consumer warps (a remote arrive with the default .release.cta semantics, as
 *    CUTLASS's consumers release: it only says the wgmma reads are done; .release.cluster
 *    would put a MEMBAR.ALL.GPU before each); cluster barriers after the mbarriers' init and
 *    before exit keep each CTA's barriers alive while its peer may use them.
 *  - STREAMK = 1 (CLUSTER 1): a CTA per SM. Where the tiles leave a last partial wave, its
 *    tiles' k-tiles are cut into ranges of at least 8 k-tiles, one a CTA (half.cuh's TileWalk,
 *    as step 32's but with a least range: a tile's summing CTA reads back a few partials, not
 *    one per k-tile), and the two consumers take the CTA's pieces in turn as they take
 *    tiles; a tile cut into pieces is summed in k order by the consumer that finishes its
 *    last piece (streamk_piece, its own named barrier 3 or 4) and stored as any other.
 * Technique and source: CUTLASS's sm90 ping-pong schedule (ordered math warpgroups) and
 * the ping-pong level of ThunderKittens' H100 GEMM walk-through; written anew for this lab
 * on top of 32_half_wgmma.cu.
 * Left for later steps: a TMA-store epilogue.
 *
 * Pre-pass (timed with the GEMM; no blocks at all when every row is a multiple of ROWPAD
 * bytes): as step 32's.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM     __half or __nv_bfloat16 (the run's input type)      (default __half)
 *   OUT      float or ELEM (the run's output type)                (default float)
 *   ACC      float                                                (default float)
 *   STAGES   4 or 6                                               (default 6)
 *   B_NK     1: B is stored N×K ("layout nk")                     (default 0)
 *   BN       128 or 64: a consumer's tile is 128 × BN (64: wgmma.m64n64k16, 64
 *            accumulators a thread, twice the tiles where few 128 × 128 ones leave SMs
 *            idle)                                                (default 128)
 *   CLUSTER  1 or 2: CTAs a cluster, sharing A's rows by multicast  (default 1)
 *   ROWPAD   16 or 128: bytes a row TMA reads is a multiple of     (default 16)
 *   STREAMK  1: share the last partial wave along K (CLUSTER 1)    (default 0)
 * Launch: prepass (32, 8) blocks as the header says; matmul block 384, grid CLUSTER ·
 * min(units, #SMs / CLUSTER) (units: CLUSTER tiles side by side; stream-K: #SMs), dynamic
 * shared memory STAGES · (16 KB + BN · 128 bytes) + 1280;
 * args (the maps of A and B, A, scratch, C, M, N, K, workspace) (the workspace: stream-K's
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
#define STAGES 6
#endif
#ifndef B_NK
#define B_NK 0
#endif
#ifndef BN
#define BN 128
#endif
#ifndef CLUSTER
#define CLUSTER 1
#endif
#ifndef ROWPAD
#define ROWPAD 16
#endif
#ifndef STREAMK
#define STREAMK 0
#endif
#if STREAMK != 0 && (STREAMK != 1 || CLUSTER != 1)
#error "STREAMK must be 0 or 1, and 1 only with CLUSTER 1"
#endif
/* stream-K's least range: 8 k-tiles (a tile of 47 then has about 6 partials to read back) */
#define SK_MIN_RANGE 8
#if ROWPAD != 16 && ROWPAD != 128
#error "ROWPAD must be 16 or 128"
#endif
#define BM 128
#define BK 64
#define GM 8
#define NT 384
#define A_BYTES (BM * BK * 2)                /* 16 KB */
#define B_BYTES (BN * BK * 2)                /* 16 KB (8 KB at BN 64) */
#define STAGE_BYTES (A_BYTES + B_BYTES)
#if STAGES != 4 && STAGES != 6
#error "STAGES must be 4 or 6"
#endif
#if BN != 128 && BN != 64
#error "BN must be 128 or 64"
#endif
#if CLUSTER != 1 && CLUSTER != 2
#error "CLUSTER must be 1 or 2"
#endif
static_assert(sizeof(ELEM) == 2, "ELEM is a 16-bit type");

/* Ap (M × Kp) where K % (ROWPAD / 2), then Bp where B's rows are short, zero-padded
 * (half.cuh's pad_short_rows). */
extern "C" __global__ __launch_bounds__(256)
void prepass(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
             int M, int N, int K)
{
    pad_short_rows<B_NK, ROWPAD / 2>(A, B, S, M, N, K);
}

/* The CTA's walk at `at` in shared memory, through a pointer the compiler cannot see through:
 * its fields are loaded where they are used, never kept from one piece to the next. */
__device__ __forceinline__ const TileWalk<SK_MIN_RANGE>& walk_in(const unsigned char* at)
{
    const unsigned char* p;
    asm volatile("mov.b64 %0, %1;\n" : "=l"(p) : "l"(at));
    return *reinterpret_cast<const TileWalk<SK_MIN_RANGE>*>(p);
}

extern "C" __global__ __launch_bounds__(NT, 1) CLUSTER_DIMS_OF(CLUSTER)
void matmul(const __grid_constant__ TensorMapArg mapA, const __grid_constant__ TensorMapArg mapB,
            const ELEM* __restrict__ A, const ELEM* __restrict__ S, OUT* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
    /* full[s] at +8s, empty[s] at +8(STAGES+s): 2 STAGES * 8 <= 256 */
    const unsigned bars = base + STAGES * STAGE_BYTES;

    const int tid = threadIdx.x;
    const int wg = tid >> 7;                            /* 0: producer, 1-2: consumers */
    const int ktiles = (K + BK - 1) / BK;
    const int mt = (M + BM - 1) / BM;
    /* a cluster's CLUSTER CTAs take neighbouring tiles along N as one unit of tile_origin's
       order (rank r the r-th; past N: zeros in, nothing out) and walk the units together */
    const unsigned rank = cluster_rank_of<CLUSTER>();
    const int ntu = (N + BN * CLUSTER - 1) / (BN * CLUSTER);
    const int units = mt * ntu;
    const int G = gridDim.x / CLUSTER, unit = blockIdx.x / CLUSTER;
    /* this CTA's (cluster's) units, whole, and with stream-K pieces of the last wave's: in
       shared memory, read afresh at each piece (walk_in), so that no register holds it
       through a main loop (128 accumulators leave few for anything else) */
    __shared__ __align__(8) unsigned char walk_at[sizeof(TileWalk<SK_MIN_RANGE>)];
#if STREAMK
    __shared__ bool last_piece[2];                      /* each consumer's streamk_piece verdict */
#endif

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);                 /* the producer's arrive + tx bytes */
            /* the one consumer of each use, and one lane a warp of the peer's (whose stage
               this CTA's multicast refills too) */
            mbar_init(bars + 8 * (STAGES + s), 128 + 4 * (CLUSTER - 1));
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        *reinterpret_cast<TileWalk<SK_MIN_RANGE>*>(walk_at) =
            TileWalk<SK_MIN_RANGE>(units, ktiles, STREAMK, G, unit);
    }
#if CLUSTER > 1
    cluster_sync();                                     /* the peer's barriers exist before its loads */
#else
    __syncthreads();
#endif

#if STREAMK && BN == 128
    /* stream-K's sum of partials beside 128 accumulators needs more than the 168 registers
     * a thread of 384 gets at launch: the producer's go to the consumers (warpgroup-wide) */
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
            int it = 0, t, kb, ke, a;                   /* it: ring position, over all pieces */
            for (int n = 0; walk_in(walk_at).piece(n, t, kb, ke, a); ++n) {
                int row0, col0;
                tile_origin(t, mt, ntu, GM, BM, BN * CLUSTER, row0, col0);
                col0 += rank * BN;
                for (int kt = kb; kt < ke; ++kt, ++it)
                    load_half_k_tile<STAGES, BM, BN, B_NK, CLUSTER>(it, base, bars, tmA, tmB, row0, col0,
                                                                    kt, rank);
            }
        }
    } else {
        const int lane = tid & 31;
        float acc[BN];                                  /* rows 0-63, then 64-127 of the tile */
        int t, kb, ke, a;
        /* consumer c takes pieces n = c, c + 2, ... of the CTA's walk (so c = n % 2 below);
           it0: the ring position of piece n's first k-tile (consumer 1 starts after piece 0) */
        int it0 = wg == 2 && walk_in(walk_at).piece(0, t, kb, ke, a) ? ke - kb : 0;
        for (int n = wg - 1; walk_in(walk_at).piece(n, t, kb, ke, a); n += 2) {
#pragma unroll
            for (int i = 0; i < BN; ++i)
                acc[i] = 0.f;
            if (n > 0)                                  /* the other has issued piece n - 1 */
                consumers_wait<1>(n & 1);             /* named barriers 1 and 2 */
            int it = it0;
            for (int kt = kb; kt < ke; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(bars + 8 * s, (it / STAGES) & 1);
                const unsigned sa = base + s * STAGE_BYTES;
                const unsigned sb = sa + A_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk) {
#if B_NK
                    const unsigned long long db = make_desc(sb + kk * 32);
                    wgmma_k16<BN, 0, ELEM>(acc, make_desc(sa + kk * 32), db);
                    wgmma_k16<BN, 0, ELEM>(acc + BN / 2, make_desc(sa + 64 * 128 + kk * 32), db);
#else
                    const unsigned long long db = make_desc_mn(sb + kk * 2048, 8192);
                    wgmma_k16<BN, 1, ELEM>(acc, make_desc(sa + kk * 32), db);
                    wgmma_k16<BN, 1, ELEM>(acc + BN / 2, make_desc(sa + 64 * 128 + kk * 32), db);
#endif
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > kb)                            /* position it-1 read: release its stage */
                    release_stage<CLUSTER>(bars + 8 * (STAGES + (it - 1) % STAGES), rank, lane);
            }
            int t1, kb1, ke1, a1;
            const bool other = walk_in(walk_at).piece(n + 1, t1, kb1, ke1, a1);
            it0 = it + (other ? ke1 - kb1 : 0);         /* past the other's piece n + 1 */
            if (other)                                  /* the other's next piece: its turn */
                consumers_let_go<1>(1 - (n & 1));
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (ke > kb)
                release_stage<CLUSTER>(bars + 8 * (STAGES + (it - 1) % STAGES), rank, lane);
#if STREAMK
            /* a piece of a shared tile: its partial to the workspace; the tile's last piece to
               arrive sums them all (named barrier 3 or 4: this consumer's warpgroup only) */
            if ((kb > 0 || ke < ktiles)
                && !streamk_piece<BN, 128, -1>(acc, walk_in(walk_at), a, workspace, units, tid & 127,
                                               3 + (n & 1), &last_piece[n & 1]))
                continue;
#endif
            int row0, col0;                             /* here: no registers held through the loop */
            tile_origin(t, mt, ntu, GM, BM, BN * CLUSTER, row0, col0);
            col0 += rank * BN;
            const int warp = (tid >> 5) & 3;
            store_wgmma_out<BN>(acc, C, row0, col0, M, N, warp, lane);
            store_wgmma_out<BN>(acc + BN / 2, C, row0 + 64, col0, M, N, warp, lane);
        }
    }
#if CLUSTER > 1
    cluster_sync();                                     /* no exit while the peer may still load or arrive here */
#endif
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
