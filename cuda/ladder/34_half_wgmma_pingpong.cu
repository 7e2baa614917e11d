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

[descriptions]
stages = "k-tiles (64 deep, 16 KB of A and bn · 128 bytes of B) in flight in the TMA ring: 4 or 6"
bn = "columns of a consumer's tile (128 × bn): 128, or 64 (twice the tiles, where 128 × 128 ones leave SMs idle)"
cluster = "CTAs of a cluster on neighbouring tiles along N: 2 load half of A's rows each and multicast them to both (A's L2 reads halved); 1: none"

[derived]
tiles = "cdiv(M, 128) * cdiv(N, bn)"      # 128 × bn tiles of C, each one consumer's
units = "cdiv(M, 128) * cdiv(N, bn * cluster)"   # a cluster's tiles side by side along N
kp = "roundup(K, 8)"                      # a row of K 16-bit elements padded to 16 bytes
np = "roundup(N, 8)"
# padded copies only where a row is not a multiple of 16 bytes (TMA needs it), as step 32
ap_bytes = "2 * M * kp if K % 8 else 0"
bp_bytes = "(2 * N * kp if K % 8 else 0) if NK else (2 * K * np if N % 8 else 0)"
maps_at = "roundup(ap_bytes + bp_bytes, 128)"

[[constraints]]
check = "cluster == 1 or cluster == 2"
reason = "cluster must be 1 or 2 (two CTAs sharing A's rows by TMA multicast)"

[[constraints]]
check = "(stages == 4 or stages == 6) and (bn == 128 or bn == 64)"
reason = "stages must be 4 or 6 (7 stages of 32 KB leave no room for a second tile's first k-tiles' worth of margin; 8 exceed 227 KB), bn 128 or 64 (wgmma.m64n128k16 or m64n64k16)"

[launch]
grid = ["cluster * min(units, SMS // cluster)", 1]   # persistent: the consumers alternate over its tiles
block = [384, 1]                          # a producer warpgroup + 2 consumer warpgroups
shared = "stages * (16384 + 128 * bn) + 1024 + 256"

[prepass]            # padded copies only where needed: no blocks (no launch) otherwise
entry = "prepass"
grid = ["cdiv(max(kp if K % 8 else 0, (kp if NK else np) if bp_bytes else 0), 32)", "(cdiv(M, 32) if K % 8 else 0) + (cdiv(N if NK else K, 32) if bp_bytes else 0)"]
block = [32, 8]
scratch = "maps_at + 2 * 128"

# A (or Ap) as M rows of K (Kp) elements, box 64 (k) × 128 (m) (× 64 in a cluster of two:
# each CTA loads one half for both); 128B swizzle
[[prepass.tensor_maps]]
at = "maps_at"
base = "'scratch' if K % 8 else 'a'"
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
 *    position p = j · ktiles + kt for k-tile kt of the CTA's j-th tile.
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
 * Technique and source: CUTLASS's sm90 ping-pong schedule (ordered math warpgroups) and
 * the ping-pong level of ThunderKittens' H100 GEMM walk-through; written anew for this lab
 * on top of 32_half_wgmma.cu.
 * Left for later steps: a TMA-store epilogue.
 *
 * Pre-pass (timed with the GEMM; no blocks at all when every row is a multiple of 16
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
 * Launch: prepass (32, 8) blocks as the header says; matmul block 384, grid CLUSTER ·
 * min(units, #SMs / CLUSTER) (units: CLUSTER tiles side by side), dynamic shared memory
 * STAGES · (16 KB + BN · 128 bytes) + 1280; args (A, scratch, C, M, N, K).
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
#if BN == 128
#define WGMMA_K16 wgmma_n128k16
#elif BN == 64
#define WGMMA_K16 wgmma_n64k16
#else
#error "BN must be 128 or 64"
#endif
#if CLUSTER != 1 && CLUSTER != 2
#error "CLUSTER must be 1 or 2"
#endif
#if CLUSTER > 1 && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900   /* clusters: sm_90 on */
#define CLUSTER_DIMS __cluster_dims__(CLUSTER, 1, 1)
#else
#define CLUSTER_DIMS
#endif
static_assert(sizeof(ELEM) == 2, "ELEM is a 16-bit type");

/* Ap (M × Kp) where K % 8, then Bp where B's rows are short, zero-padded (half.cuh's
 * pad_short_rows). */
extern "C" __global__ __launch_bounds__(256)
void prepass(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
             int M, int N, int K)
{
    pad_short_rows<B_NK>(A, B, S, M, N, K);
}

/* Named barrier 1 + c of the two consumer warpgroups (256 threads), c the consumer that
 * waits on it: bar.sync waits for the other warpgroup's bar.arrive (barrier 0 is
 * __syncthreads'). Immediate ids, so that ptxas reserves these two and no others. */
__device__ __forceinline__ void consumers_wait(int c)
{
    if (c == 0)
        asm volatile("bar.sync 1, 256;\n" ::: "memory");
    else
        asm volatile("bar.sync 2, 256;\n" ::: "memory");
}

__device__ __forceinline__ void consumers_let_go(int c)
{
    if (c == 0)
        asm volatile("bar.arrive 1, 256;\n" ::: "memory");
    else
        asm volatile("bar.arrive 2, 256;\n" ::: "memory");
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* A consumer's release of the stage whose empty barrier is `bar`: its 128 threads arrive here
 * and, in a cluster, lane 0 of each warp on the peer's barrier too (the peer's multicast of
 * its half of A refills this CTA's stage as well). */
__device__ __forceinline__ void release_stage(unsigned bar, unsigned rank, int lane)
{
    mbar_arrive(bar);
#if CLUSTER > 1
    if (lane == 0)
        mbar_arrive_peer(map_peer(bar, rank ^ 1));
#endif
}
#endif

extern "C" __global__ __launch_bounds__(NT, 1) CLUSTER_DIMS
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ S, OUT* __restrict__ C,
            int M, int N, int K)
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
#if CLUSTER > 1
    const unsigned rank = cluster_rank();
#else
    const unsigned rank = 0;
#endif
    const int ntu = (N + BN * CLUSTER - 1) / (BN * CLUSTER);
    const int units = mt * ntu;
    const int G = gridDim.x / CLUSTER, unit = blockIdx.x / CLUSTER;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);                 /* the producer's arrive + tx bytes */
            /* the one consumer of each use, and one lane a warp of the peer's (whose stage
               this CTA's multicast refills too) */
            mbar_init(bars + 8 * (STAGES + s), 128 + 4 * (CLUSTER - 1));
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#if CLUSTER > 1
    cluster_sync();                                     /* the peer's barriers exist before its loads */
#else
    __syncthreads();
#endif

    if (wg == 0) {
        if (tid == 0) {
            const unsigned char* maps = half_maps_after_padding<B_NK>(S, M, N, K);
            const void* tmA = maps;
            const void* tmB = maps + 128;
            tensormap_acquire(tmA);
            tensormap_acquire(tmB);
            int it = 0;                                 /* ring position: j · ktiles + kt */
            for (int t = unit; t < units; t += G) {
                int row0, col0;
                tile_origin(t, mt, ntu, GM, BM, BN * CLUSTER, row0, col0);
                col0 += rank * BN;
                for (int kt = 0; kt < ktiles; ++kt, ++it)
                    load_half_k_tile<STAGES, BM, BN, B_NK, CLUSTER>(it, base, bars, tmA, tmB, row0, col0,
                                                                    kt, rank);
            }
        }
    } else {
        const int cw = wg - 1;                          /* consumer 0 or 1 */
        const int warp = (tid >> 5) & 3, lane = tid & 31;
        float acc0[BN / 2], acc1[BN / 2];               /* rows 0-63 and 64-127 of the tile */
        for (int j = cw, t = unit + cw * G; t < units; j += 2, t += 2 * G) {
            int row0, col0;
            tile_origin(t, mt, ntu, GM, BM, BN * CLUSTER, row0, col0);
            col0 += rank * BN;
#pragma unroll
            for (int i = 0; i < BN / 2; ++i)
                acc0[i] = acc1[i] = 0.f;
            if (j > 0)                                  /* the other has issued tile j - 1 */
                consumers_wait(cw);
            int it = j * ktiles;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(bars + 8 * s, (it / STAGES) & 1);
                const unsigned sa = base + s * STAGE_BYTES;
                const unsigned sb = sa + A_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk) {
#if B_NK
                    const unsigned long long db = make_desc(sb + kk * 32);
                    WGMMA_K16<0>(acc0, make_desc(sa + kk * 32), db, ELEM());
                    WGMMA_K16<0>(acc1, make_desc(sa + 64 * 128 + kk * 32), db, ELEM());
#else
                    const unsigned long long db = make_desc_mn(sb + kk * 2048, 8192);
                    WGMMA_K16<1>(acc0, make_desc(sa + kk * 32), db, ELEM());
                    WGMMA_K16<1>(acc1, make_desc(sa + 64 * 128 + kk * 32), db, ELEM());
#endif
                }
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > 0)                             /* position it-1 read: release its stage */
                    release_stage(bars + 8 * (STAGES + (it - 1) % STAGES), rank, lane);
            }
            if (t + G < units)                          /* the other's next tile: its turn */
                consumers_let_go(1 - cw);
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (ktiles > 0)
                release_stage(bars + 8 * (STAGES + (it - 1) % STAGES), rank, lane);
            store_wgmma_out<BN>(acc0, C, row0, col0, M, N, warp, lane);
            store_wgmma_out<BN>(acc1, C, row0 + 64, col0, M, N, warp, lane);
        }
    }
#if CLUSTER > 1
    cluster_sync();                                     /* no exit while the peer may still load or arrive here */
#endif
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
