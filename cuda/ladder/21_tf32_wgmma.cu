/*
+++
name = "tf32_wgmma"
title = "TF32 on Hopper's warpgroup MMA (wgmma, sm_90a) fed by a cp.async pipeline, 128 × bn tiles"
summary = "TF32 on Hopper's warpgroup MMA (wgmma.m64n128k8, sm_90a): 128 × bn tiles, 2 warpgroups, operands in 128B-swizzled shared memory fed by a cp.async pipeline (B transposed to K-major on the way), each thread rounding the elements it copied to TF32 round-to-nearest like cuBLAS."
source = "PTX ISA wgmma.mma_async + matrix descriptors, cvt.rna.tf32.f32; CUTLASS sm90 GMMA mainloop (cp.async instead of TMA)"
role = "rung"
order = 21
dtypes = ["float32"]
precision = "tf32"
arch_suffix = "a"

[params]
bn = [128, 256]
stages = [4, 3]

[descriptions]
bn = "columns of C per block: 128 or 256"
stages = "shared-memory stages in the cp.async ring (at least 3)"

[launch]
grid = ["cdiv(N, bn)", "cdiv(M, 128)"]
block = [256, 1]
shared = "stages * (128 + bn) * 32 * 4 + 1024"    # + 1024: swizzle-atom alignment
+++
*/
/*
 * 21_tf32_wgmma.cu -- TF32 tensor cores through Hopper's warpgroup MMA (wgmma, sm_90a):
 * a block of 2 warpgroups (256 threads) computes a 128 x BN tile of C; warpgroup g owns
 * rows 64g .. 64g+63 and issues wgmma.mma_async.m64n128k8.f32.tf32.tf32 (BN/128 per
 * k-step of 8) with both operands read by the tensor cores straight from shared memory
 * through matrix descriptors, FP32 accumulators in registers (BN/2 per thread).
 * Operands are stored K-major (TF32 wgmma accepts only K-major operands) in the 128-byte
 * swizzle layout: one row of a tile = 32 tf32 of k = 128 bytes, 16-byte chunk c of row r
 * stored at chunk c ^ (r % 8), 8-row atoms of 1024 bytes (descriptor: swizzle mode 1 =
 * 128B, stride byte offset 1024, start address advanced by 32 bytes per k-step of 8).
 * A (row-major, K-major already) arrives with 16-byte cp.async; B (row-major K x N is
 * N-major) is transposed on the way with 4-byte cp.async, a warp covering 8 n x 4 k so
 * that both the global reads (32-byte sectors) and the swizzled shared writes (32 banks)
 * stay efficient. STAGES-deep pipeline: after the barrier of k-tile t, tile t+STAGES-2 is
 * fetched into the stage that wgmma of tile t-2 used (wgmma.wait_group 1 keeps one group
 * of MMAs in flight across the barrier); fence.proxy.async makes the cp.async (generic
 * proxy) writes visible to the tensor cores (async proxy) before the barrier.
 * The tensor cores read A and B as TF32 (the low 13 mantissa bits ignored); precision
 * "tf32".
 *
 * Rounding (TF32_RN = 1, the default). Ignoring the low 13 bits truncates raw FP32 inputs
 * (rounds toward zero), a one-sided error that makes the relative L2 error a few times cuBLAS
 * TF32's (measured on 23_tf32_wgmma_tma.cu: benchmarks/NOTES.md).
 * cuBLAS and 20_tf32_mma round to nearest: cvt.rna.tf32.f32 (ties away from zero), whose
 * .b32 result is the FP32 pattern with the low 13 bits zero, stored back as a float. This
 * kernel has no pre-pass (adding one is 22's step), and cp.async cannot convert, so both
 * operands are rounded in shared memory: after cp.async.wait_group says k-tile t has
 * landed, each thread rounds exactly the elements it copied of that tile (its own copies
 * are visible to it after the wait: no extra barrier), i.e. its 4 16-byte A chunks
 * (ld/st.shared.v4) and its BN/8 4-byte B elements (ld/st.shared.f32, conflict-free in the
 * same 8 n x 4 k warp pattern as the copies), before the fence.proxy.async and barrier that
 * already precede the wgmma of tile t. Zero-filled elements stay 0. The work (16 KB +
 * BN * 128 bytes read and written per k-tile) overlaps the wgmma group of tile t-1 still in
 * flight. ptxas: 159-166 registers at BN = 128 and 254 at BN = 256 (120 and 168 without the
 * rounding: the B addresses stay in registers), no spills; one block per SM either way (set
 * by shared memory). TF32_RN = 0 (edit the #define; not a registry parameter) restores
 * truncation.
 *
 * Technique and source: NVIDIA PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-
 * Accumulate" (wgmma.mma_async, matrix descriptors, swizzling modes, fence.proxy.async);
 * the CUTLASS sm90 GMMA collective mainloops; written anew for this lab (cp.async + manual
 * swizzle in place of TMA, whose tensor map pycuda cannot easily build).
 *
 * Tails: 16-byte copies of A where K % 4 == 0, else 4-byte; src-size 0 zero-fills out-of-
 * bounds elements; stores guarded: any M, N, K. Built for sm_90a only (the cuda backend
 * passes -gencode=arch=compute_90a,code=sm_90a for this variant); compiled for any other
 * target the body is a stub that traps, so that plain sm_90 / sm_80 builds still link.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  must be float                                     (default float)
 *   BN         block tile width: 128 or 256                      (default 128)
 *   STAGES     shared-memory stages, >= 3                         (default 4)
 *   MINB       __launch_bounds__ minimum blocks per SM            (default 1)
 *   TF32_RN    1: round A and B to TF32 to nearest (as cuBLAS), 0: truncate (default 1)
 * Fixed: BM = 128, BK = 32. Shared memory is dynamic: STAGES * (128 + BN) * 128 + 1024
 * bytes (the 1024 to align the swizzle atoms).
 *
 * Launch geometry: block (256, 1), grid (ceil(N/BN), ceil(M/128)).
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BN
#define BN 128
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef MINB
#define MINB 1
#endif
#ifndef TF32_RN
#define TF32_RN 1
#endif
#define BM 128
#define BK 32
#define NT 256
#define NH (BN / 128)                        /* wgmma n128 instructions per k-step */
#define A_BYTES (BM * BK * 4)                /* 16 KB */
#define B_BYTES (BN * BK * 4)
#define STAGE_BYTES (A_BYTES + B_BYTES)
#if (BN != 128 && BN != 256) || STAGES < 3 || (TF32_RN != 0 && TF32_RN != 1)
#error "BN must be 128 or 256, STAGES >= 3 and TF32_RN 0 or 1"
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* byte offset of element (row r, k) in a swizzled K-major tile of 128-byte rows */
__device__ __forceinline__ unsigned swz(int r, int k)
{
    return (unsigned)(r * 128 + ((((k >> 2) ^ (r & 7))) << 4) + (k & 3) * 4);
}

__device__ __forceinline__ void load_tile(const float* __restrict__ A, const float* __restrict__ B,
                                          unsigned sa, unsigned sb, int M, int N, int K,
                                          int row0, int col0, int k0, int tid, bool vec_a)
{
#pragma unroll
    for (int it = 0; it < BM * BK / 4 / NT; ++it) {    /* A: 16-byte chunks, 4 per thread */
        const int v = tid + it * NT;
        const int r = v >> 3, c = v & 7;
        const int gr = row0 + r, gk = k0 + 4 * c;
        const unsigned dst = sa + (unsigned)(r * 128 + ((c ^ (r & 7)) << 4));
        if (vec_a) {
            const bool in = gr < M && gk < K;
            cp_async16(dst, in ? &A[gr * K + gk] : A, in);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool in = gr < M && gk + j < K;
                cp_async4(dst + 4 * j, in ? &A[gr * K + gk + j] : A, in);
            }
        }
    }
    const int lane = tid & 31, warp = tid >> 5;
#pragma unroll 4
    for (int it = 0; it < BN * BK / NT; ++it) {        /* B: 4-byte, transposed, BN/8 per thread */
        const int wi = warp + it * (NT / 32);          /* warp chunk: 8 n x 4 k */
        const int n = (wi % (BN / 8)) * 8 + (lane & 7);
        const int k = (wi / (BN / 8)) * 4 + (lane >> 3);
        const int gk = k0 + k, gc = col0 + n;
        const bool in = gk < K && gc < N;
        cp_async4(sb + swz(n, k), in ? &B[gk * N + gc] : B, in);
    }
}

#if TF32_RN
/* an operand element as the tensor cores should see it: rounded to TF32 to nearest
   (lab_ptx.cuh's tf32_rna), or, with TF32_RN 0, as is (the tensor cores truncate) */
#define TF32_IN(x) (TF32_RN ? tf32_rna(x) : (x))

/* the elements load_tile copied for this thread into stage (sa, sb), rounded to TF32 in place:
   same index arithmetic, loads first, then the stores */
__device__ __forceinline__ void round_tile(unsigned sa, unsigned sb, int tid)
{
    constexpr int NA = BM * BK / 4 / NT;                /* 16-byte A chunks: 4 */
    float4 va[NA];
#pragma unroll
    for (int it = 0; it < NA; ++it) {
        const int v = tid + it * NT;
        const int r = v >> 3, c = v & 7;
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                     : "=f"(va[it].x), "=f"(va[it].y), "=f"(va[it].z), "=f"(va[it].w)
                     : "r"(sa + (unsigned)(r * 128 + ((c ^ (r & 7)) << 4))) : "memory");
    }
#pragma unroll
    for (int it = 0; it < NA; ++it) {
        const int v = tid + it * NT;
        const int r = v >> 3, c = v & 7;
        asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n"
                     :: "r"(sa + (unsigned)(r * 128 + ((c ^ (r & 7)) << 4))),
                        "f"(TF32_IN(va[it].x)), "f"(TF32_IN(va[it].y)),
                        "f"(TF32_IN(va[it].z)), "f"(TF32_IN(va[it].w)) : "memory");
    }
    const int lane = tid & 31, warp = tid >> 5;
    constexpr int NB = BN * BK / NT;                    /* 4-byte B elements: BN / 8 */
    constexpr int NBB = 16;                             /* in batches of 16 (registers) */
#pragma unroll
    for (int b0 = 0; b0 < NB; b0 += NBB) {
        float vb[NBB];
#pragma unroll
        for (int j = 0; j < NBB; ++j) {
            const int wi = warp + (b0 + j) * (NT / 32);
            const int n = (wi % (BN / 8)) * 8 + (lane & 7);
            const int k = (wi / (BN / 8)) * 4 + (lane >> 3);
            asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(vb[j]) : "r"(sb + swz(n, k)) : "memory");
        }
#pragma unroll
        for (int j = 0; j < NBB; ++j) {
            const int wi = warp + (b0 + j) * (NT / 32);
            const int n = (wi % (BN / 8)) * 8 + (lane & 7);
            const int k = (wi / (BN / 8)) * 4 + (lane >> 3);
            asm volatile("st.shared.f32 [%0], %1;\n" :: "r"(sb + swz(n, k)), "f"(TF32_IN(vb[j])) : "memory");
        }
    }
}
#endif
#endif

extern "C" __global__ __launch_bounds__(NT, MINB)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;

    const int tid = threadIdx.x;
    const int wg = tid >> 7;                            /* warpgroup 0 or 1 */
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool vec_a = (K & 3) == 0;
    const int ktiles = (K + BK - 1) / BK;

    float acc[NH][64];
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int j = 0; j < 64; ++j)
            acc[h][j] = 0.f;

#pragma unroll
    for (int st = 0; st < STAGES - 2; ++st) {
        if (st < ktiles)
            load_tile(A, B, base + st * STAGE_BYTES, base + st * STAGE_BYTES + A_BYTES,
                      M, N, K, row0, col0, st * BK, tid, vec_a);
        cp_async_commit();
    }
    for (int t = 0; t < ktiles; ++t) {
        cp_async_wait<STAGES - 3>();                    /* tile t has landed (this thread) */
#if TF32_RN
        round_tile(base + (t % STAGES) * STAGE_BYTES, base + (t % STAGES) * STAGE_BYTES + A_BYTES, tid);
#endif
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();                                /* ... for all; wgmma <= t-2 done */
        {
            const int tn = t + STAGES - 2;
            const int st = tn % STAGES;
            if (tn < ktiles)
                load_tile(A, B, base + st * STAGE_BYTES, base + st * STAGE_BYTES + A_BYTES,
                          M, N, K, row0, col0, tn * BK, tid, vec_a);
            cp_async_commit();
        }
        const unsigned sa = base + (t % STAGES) * STAGE_BYTES + wg * (64 * 128);
        const unsigned sb = base + (t % STAGES) * STAGE_BYTES + A_BYTES;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / 8; ++kk)
#pragma unroll
            for (int h = 0; h < NH; ++h)
                wgmma_n128(acc[h], make_desc(sa + kk * 32), make_desc(sb + h * (128 * 128) + kk * 32));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    cp_async_wait<0>();

    const int warp = (tid >> 5) & 3, lane = tid & 31;
    const bool vec_c = (N & 1) == 0;
#pragma unroll
    for (int h = 0; h < NH; ++h)
#pragma unroll
        for (int j = 0; j < 64; j += 2) {
            const int row = row0 + wg * 64 + warp * 16 + (lane >> 2) + 8 * ((j >> 1) & 1);
            const int col = col0 + h * 128 + (j >> 2) * 8 + (lane & 3) * 2;
            if (row >= M)
                continue;
            if (vec_c && col + 1 < N) {
                *reinterpret_cast<float2*>(&C[row * N + col]) = make_float2(acc[h][j], acc[h][j + 1]);
            } else {
                if (col < N)
                    C[row * N + col] = acc[h][j];
                if (col + 1 < N)
                    C[row * N + col + 1] = acc[h][j + 1];
            }
        }
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
