/*
+++
name = "tf32_wgmma_ws"
title = "TF32 wgmma, warp-specialized: a cp.async producer warpgroup, two consumers, B pre-transposed"
summary = "TF32 wgmma (m64nBNk8, sm_90a), warp-specialized: a producer warpgroup fills stages 128B-swizzled stages with 16-byte cp.async (B pre-transposed to K-major by a pre-pass kernel, timed with the GEMM), full/empty mbarriers per stage, 2 consumer warpgroups with one wgmma group in flight; inputs rounded to TF32 to nearest like cuBLAS (B in the pre-pass, A by each producer thread on the chunks it copied); cl = 2: 2-CTA clusters along M share the B tile (each loads half, a DSMEM bulk copy to the peer)."
source = "PTX ISA wgmma.mma_async, mbarrier, fence.proxy.async, cvt.rna.tf32.f32; CUTLASS sm90 warp-specialized GMMA mainloop (cp.async instead of TMA)"
role = "rung"
order = 22
dtypes = ["float32"]
precision = "tf32"
arch_suffix = "a"

[params]
bn = [256, 128]
stages = [4, 3]
cl = [1, 2]          # clusters of cl CTAs along M

[descriptions]
bn = "columns of C per block: 256 or 128"
stages = "shared-memory stages between the producer and the consumers"
cl = "CTAs per cluster along M sharing the B tile: 1 or 2"

[derived]
smem = "stages * (128 + bn) * 32 * 4 + 1024 + 256"   # + atom alignment, mbarriers
kp = "roundup(K, 4)"                                 # row length of Bt (and Ap)

[[constraints]]
check = "smem <= 227 * 1024"
reason = "bn={bn} with {stages} stages needs {smem} B of shared memory (> 227 KB)"

[launch]
grid = ["cdiv(N, bn)", "cdiv(cdiv(M, 128), cl) * cl"]
block = [384, 1]
shared = "smem"

[prepass]            # Bt (N × Kp) and, when K % 4, a padded copy of A (M × Kp), rounded to TF32
entry = "prepass"
grid = ["cdiv(kp, 32)", "cdiv(N, 32) + (cdiv(M, 32) if K % 4 else 0)"]
block = [32, 8]
scratch = "4 * kp * (N + (M if K % 4 else 0))"
+++
*/
/*
 * 22_tf32_wgmma_ws.cu -- TF32 GEMM on Hopper: warp-specialized wgmma with an mbarrier
 * pipeline, both operands fed by 16-byte cp.async (sm_90a). Two kernels per GEMM:
 *
 * 1. prepass (one-off, launched by the cuda backend right before matmul, inside the same
 *    timed region, so its cost counts): writes B (K x N, row-major = N-major) transposed
 *    into a K-major scratch buffer Bt (N rows of Kp = roundup(K, 4) floats, zero-padded
 *    k in [K, Kp)), through a 32x33 shared tile (coalesced reads and writes). When K % 4
 *    != 0 it also copies A into M rows of Kp floats (zero-padded), so that every operand
 *    row starts 16-byte aligned. At 4096^2 the transpose moves 2 x 64 MB, a small part of
 *    what the GEMM's 137 GFLOP take on the tensor cores. TF32 wgmma reads only K-major
 *    operands from shared memory (no transpose flag for .tf32), hence the pre-pass. Every
 *    value it writes is rounded to TF32 (see "Rounding").
 * 2. matmul: a block of 3 warpgroups (384 threads) computes a 128 x BN tile of C.
 *    Warpgroup 0 is the producer: its 128 threads copy the A (128 x 32) and Bt (BN x 32)
 *    k-tiles of a stage with 16-byte cp.async (src-size 0 zero-fills out-of-range rows and
 *    k) into the 128-byte swizzle layout (16-byte chunk c of row r at chunk c ^ (r % 8),
 *    1024-byte 8-row atoms), and releases a stage to the consumers on its "full" mbarrier
 *    once its copies have landed: cp.async.wait_group LAG (LAG = STAGES - 2 tiles stay in
 *    flight), rounds the A chunks it copied of that tile to TF32 (see "Rounding"),
 *    fence.proxy.async.shared::cta (generic-proxy writes -> async-proxy reads of
 *    the tensor cores), mbarrier.arrive. Warpgroups 1 and 2 are the consumers: each waits
 *    on the stage's full barrier, issues 4 wgmma.mma_async.m64nBNk8.f32.tf32.tf32
 *    back-to-back over the 32-deep k-tile (rows 64(g-1) .. 64(g-1)+63 of the tile, FP32
 *    accumulators in registers: BN/2 per thread), commits, waits with wgmma.wait_group 1
 *    (one group in flight) and then arrives on the "empty" mbarrier of the previous stage,
 *    which the producer waits on before refilling it. No setmaxnreg: the kernel fits the
 *    168-register cap of 384 threads (ptxas: 154 at BN = 256 with or without the rounding,
 *    93-106 at BN = 128, no spills), while capping the producer at 40 or 56 registers made
 *    ptxas spill its precomputed copy addresses.
 *    Epilogue: accumulators stored straight to C (float2 where N is even), guarded.
 *    CL = 2: the grid is made of 2-CTA clusters along M (__cluster_dims__(1, 2, 1)) that
 *    need the same Bt tile: each CTA's producer copies only its half (BN/2 rows) from L2
 *    and, once landed, pushes it into the peer's stage with cp.async.bulk.shared::cluster
 *    (completing as tx bytes on the peer's full barrier, announced there by
 *    mbarrier.arrive.expect_tx); a stage is empty when the consumer warps of both CTAs have
 *    arrived (local + remote mbarrier.arrive). L2->SM bytes per k-tile drop from 48 KB to
 *    32 KB at BN = 256. Cluster barriers after the barrier init and before exit.
 *
 * Rounding (TF32_RN = 1, the default). The tensor cores read a .tf32 operand as the FP32 bit
 * pattern and ignore its low 13 mantissa bits: raw FP32 inputs are truncated (rounded toward
 * zero), a one-sided error that made the relative L2 error a few times cuBLAS TF32's
 * (measured on 23_tf32_wgmma_tma.cu, whose operands are these: benchmarks/NOTES.md).
 * cuBLAS and 20_tf32_mma round to nearest: cvt.rna.tf32.f32 (ties away from zero),
 * whose .b32 result is the FP32 pattern with the low 13 bits zero, stored back as a float.
 * The pre-pass rounds Bt (and Ap) as it writes them: free, the bytes move anyway. A, when
 * K % 4 == 0, is copied from the caller's buffer, so each producer thread rounds the 8
 * 16-byte chunks of the A tile that it copied itself (ld/st.shared.v4, conflict-free: a
 * quarter warp covers one 128-byte row), after its cp.async.wait_group (which makes its own
 * copies visible to it: no barrier needed) and before the fence.proxy.async that already
 * precedes its arrival on the full barrier. Zero-filled chunks stay 0; when K % 4 != 0 the
 * chunks come from the rounded Ap and rounding again changes nothing. Cost: 16 KB of shared
 * loads + 16 KB of stores per k-tile, in the producer, which runs LAG tiles ahead of the
 * consumers. TF32_RN = 0 (edit the #define; not a registry parameter) restores truncation.
 *
 * Technique and source: NVIDIA PTX ISA ("Asynchronous Warpgroup Level Matrix Multiply-
 * Accumulate": wgmma.mma_async, matrix descriptors, swizzling modes; mbarrier;
 * cp.async; fence.proxy.async); the CUTLASS sm90 warp-specialized GMMA
 * mainloops (producer/consumer warpgroups, full/empty barriers per stage; clusters sharing
 * operand tiles, as TMA multicast does); written anew
 * for this lab, cp.async in place of TMA (kept simple: no tensor map to build).
 * Descriptor and swizzle layout as in 21_tf32_wgmma.cu (verified there).
 *
 * Any M, N, K: bounds by zero-fill and guarded stores; the 16-byte copies need operand rows
 * that are multiples of 4 floats, which the pre-pass provides for Bt always and for A when
 * K % 4 != 0. The tensor cores read A and B as TF32 (rounded to nearest as above): precision
 * "tf32". Built for sm_90a only (the cuda backend passes
 * -gencode=arch=compute_90a,code=sm_90a for this variant); for any other target matmul is
 * a stub that traps, so that plain builds still link.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  must be float                                     (default float)
 *   BN         block tile width: 128 or 256                      (default 256)
 *   STAGES     shared-memory stages, >= 3                         (default 4)
 *   CL         CTAs per cluster along M sharing the B tile: 1 or 2 (default 1)
 *   TF32_RN    1: round A and B to TF32 to nearest (as cuBLAS), 0: truncate (default 1)
 * Fixed: BM = 128, BK = 32. Dynamic shared memory: STAGES * (128 + BN) * 128 + 1024 (swizzle
 * atom alignment) + 256 (mbarriers).
 *
 * Launch: prepass block (32, 8), grid (ceil(Kp/32), ceil(N/32) + (K % 4 ? ceil(M/32) : 0)),
 * args (A, B, scratch, M, N, K); matmul block (384, 1), grid (ceil(N/BN), ceil(M/128)
 * rounded up to a multiple of CL),
 * args (A, scratch, C, M, N, K). Scratch: 4 * Kp * (N + (K % 4 ? M : 0)) bytes.
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BN
#define BN 256
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef CL
#define CL 1
#endif
#ifndef TF32_RN
#define TF32_RN 1
#endif
#define BM 128
#define BK 32
#define NT 384
#define LAG (STAGES - 2)                     /* k-tiles of copies in flight in the producer */
#define A_BYTES (BM * BK * 4)                /* 16 KB */
#define B_BYTES (BN * BK * 4)
#define STAGE_BYTES (A_BYTES + B_BYTES)
#define BROWS (BN / CL)                      /* Bt rows of a stage this CTA copies from L2 */
#define HALF_B_BYTES (BROWS * BK * 4)
#if (BN != 128 && BN != 256) || STAGES < 3 || (CL != 1 && CL != 2) || (TF32_RN != 0 && TF32_RN != 1)
#error "BN must be 128 or 256, STAGES >= 3, CL 1 or 2, TF32_RN 0 or 1"
#endif

/* an operand element as the tensor cores should see it: rounded to TF32 to nearest
   (lab_ptx.cuh's tf32_rna), or, with TF32_RN 0, as is (the tensor cores truncate) */
#define TF32_IN(x) (TF32_RN ? tf32_rna(x) : (x))

/* B (K x N) -> Bt (N x Kp, K-major, zero-padded); if K % 4, A (M x K) -> Ap (M x Kp). */
extern "C" __global__ __launch_bounds__(256)
void prepass(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
             int M, int N, int K)
{
    const int Kp = (K + 3) & ~3;
    const int nby = (N + 31) / 32;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int k0 = blockIdx.x * 32;
    if ((int)blockIdx.y < nby) {
        transpose_tile32<8>(B, S, N, K, N, Kp, k0, blockIdx.y * 32, [](float x) { return TF32_IN(x); });
    } else {
        ELEM* Ap = S + (size_t)N * Kp;
        const int m0 = (blockIdx.y - nby) * 32;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + ty + 8 * i, k = k0 + tx;
            if (m < M && k < Kp)
                Ap[(size_t)m * Kp + k] = k < K ? TF32_IN(A[(size_t)m * K + k]) : 0.f;
        }
    }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#if CL == 2
/* bulk copy local smem -> peer smem; completes as tx bytes on the peer's mbarrier */
__device__ __forceinline__ void bulk_to_peer(unsigned dst_cluster, unsigned src, unsigned bytes,
                                             unsigned bar_cluster)
{
    asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(dst_cluster), "r"(src), "r"(bytes), "r"(bar_cluster) : "memory");
}
#endif

/* one k-tile of A (128 rows) and Bt (BN rows), 32 floats = eight 16-byte chunks per row */
__device__ __forceinline__ void load_stage(const float* __restrict__ Ap, const float* __restrict__ Bt,
                                           unsigned sa, unsigned sb, int M, int N, int Kp,
                                           int row0, int col0, int k0, int ptid, int brow0)
{
    const int c = ptid & 7;                          /* same chunk for every row of a thread */
    const int gk = k0 + 4 * c;
    const bool kin = gk < Kp;
#pragma unroll
    for (int it = 0; it < BM / 16; ++it) {
        const int r = (ptid >> 3) + 16 * it;
        const int gr = row0 + r;
        const bool in = kin && gr < M;
        cp_async16(sa + (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)),
                   in ? Ap + (size_t)gr * Kp + gk : Ap, in);
    }
#pragma unroll
    for (int it = 0; it < BROWS / 16; ++it) {
        const int r = brow0 + (ptid >> 3) + 16 * it;
        const int gn = col0 + r;
        const bool in = kin && gn < N;
        cp_async16(sb + (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)),
                   in ? Bt + (size_t)gn * Kp + gk : Bt, in);
    }
}

#if TF32_RN
/* the A chunks that load_stage copied for this thread (chunk ptid & 7 of rows ptid / 8 + 16 it,
   the same swizzled chunk in every row: 2048 bytes apart), rounded to TF32 in place */
__device__ __forceinline__ void round_stage_a(unsigned sa, int ptid)
{
    const int r0 = ptid >> 3, c = ptid & 7;
    const unsigned a0 = sa + (unsigned)(r0 * 128 + ((c ^ (r0 & 7)) << 4));
    float4 v[BM / 16];
#pragma unroll
    for (int it = 0; it < BM / 16; ++it)
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                     : "=f"(v[it].x), "=f"(v[it].y), "=f"(v[it].z), "=f"(v[it].w)
                     : "r"(a0 + it * 2048u) : "memory");
#pragma unroll
    for (int it = 0; it < BM / 16; ++it)
        asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n"
                     :: "r"(a0 + it * 2048u), "f"(TF32_IN(v[it].x)), "f"(TF32_IN(v[it].y)),
                        "f"(TF32_IN(v[it].z)), "f"(TF32_IN(v[it].w)) : "memory");
}
#endif
#endif

extern "C" __global__ __launch_bounds__(NT, 1)
#if CL == 2 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
__cluster_dims__(1, 2, 1)
#endif
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ S, ELEM* __restrict__ C,
            int M, int N, int K)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
    const unsigned bars = base + STAGES * STAGE_BYTES;  /* full[s] at +8s, empty[s] at +8(STAGES+s) */

    const int tid = threadIdx.x;
    const int wg = tid >> 7;                            /* 0: producer, 1-2: consumers */
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int Kp = (K + 3) & ~3;
    const float* Bt = S;
    const float* Ap = (K & 3) ? S + (size_t)N * Kp : A;
    const int ktiles = (Kp + BK - 1) / BK;

#if CL == 2
    /* cluster of 2 CTAs along M (same B columns): each copies half of the Bt tile from L2
       and pushes it into the peer's stage with a bulk DSMEM copy (tx bytes on its full
       barrier); a stage is empty once the consumer warps of both CTAs released it. */
    const unsigned rank = cluster_rank(), peer = rank ^ 1u;
    const int brow0 = (int)rank * BROWS;
    const unsigned empty_count = 2 * 8;                 /* consumer warps of both CTAs */
#else
    const int brow0 = 0;
    const unsigned empty_count = 256;                   /* consumer threads */
#endif
    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 128);               /* producer threads (+ tx bytes) */
            mbar_init(bars + 8 * (STAGES + s), empty_count);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#if CL == 2
    cluster_sync();
#else
    __syncthreads();
#endif

    /* producer: k-tile j of this CTA has landed and is fenced (this thread) -> full[j % S] */
    auto release_full = [&](int j) {
        const unsigned full = bars + 8 * (j % STAGES);
#if CL == 2
        asm volatile("bar.sync 1, 128;\n" ::: "memory");   /* all 128 producers' copies */
        if (tid == 0) {
            const unsigned half = base + (j % STAGES) * STAGE_BYTES + A_BYTES + brow0 * 128;
            bulk_to_peer(map_peer(half, peer), half, HALF_B_BYTES, map_peer(full, peer));
            mbar_arrive_expect_tx(full, HALF_B_BYTES);  /* the peer's half, pushed likewise */
        } else {
            mbar_arrive(full);
        }
#else
        mbar_arrive(full);
#endif
    };

    if (wg == 0) {
        for (int t = 0; t < ktiles; ++t) {
            const int s = t % STAGES;
            if (t >= STAGES)
                mbar_wait_cluster(bars + 8 * (STAGES + s), ((t / STAGES) - 1) & 1);
            load_stage(Ap, Bt, base + s * STAGE_BYTES, base + s * STAGE_BYTES + A_BYTES,
                       M, N, Kp, row0, col0, t * BK, tid, brow0);
            cp_async_commit();
            if (t >= LAG) {
                cp_async_wait<LAG>();                   /* tile t - LAG has landed (this thread) */
#if TF32_RN
                round_stage_a(base + ((t - LAG) % STAGES) * STAGE_BYTES, tid);
#endif
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                release_full(t - LAG);
            }
        }
        cp_async_wait<0>();
#if TF32_RN
        for (int t = ktiles > LAG ? ktiles - LAG : 0; t < ktiles; ++t)
            round_stage_a(base + (t % STAGES) * STAGE_BYTES, tid);
#endif
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        for (int t = ktiles > LAG ? ktiles - LAG : 0; t < ktiles; ++t)
            release_full(t);
    } else {
        const int cw = wg - 1;
        float acc[BN / 2];
#pragma unroll
        for (int j = 0; j < BN / 2; ++j)
            acc[j] = 0.f;
        for (int t = 0; t < ktiles; ++t) {
            const int s = t % STAGES;
            mbar_wait(bars + 8 * s, (t / STAGES) & 1);
            const unsigned sa = base + s * STAGE_BYTES + cw * (64 * 128);
            const unsigned sb = base + s * STAGE_BYTES + A_BYTES;
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int kk = 0; kk < BK / 8; ++kk) {
#if BN == 256
                wgmma_n256(acc, make_desc(sa + kk * 32), make_desc(sb + kk * 32));
#else
                wgmma_n128(acc, make_desc(sa + kk * 32), make_desc(sb + kk * 32));
#endif
            }
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            if (t > 0) {                                /* tile t-1 read: release its stage */
                const unsigned empty = bars + 8 * (STAGES + (t - 1) % STAGES);
#if CL == 2
                if ((tid & 31) == 0) {
                    mbar_arrive(empty);
                    mbar_arrive_remote(map_peer(empty, peer));
                }
#else
                mbar_arrive(empty);
#endif
            }
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

        const int warp = (tid >> 5) & 3, lane = tid & 31;
        store_wgmma_acc<BN>(acc, C, row0 + cw * 64, col0, M, N, warp, lane);
    }
#if CL == 2
    cluster_sync();                                     /* no CTA leaves while its peer may
                                                           still arrive on / copy into it */
#endif
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
