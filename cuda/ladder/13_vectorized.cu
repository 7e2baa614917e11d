/*
+++
name = "vectorized"
title = "2-D blocktiling with 128-bit global and shared accesses, A transposed in shared memory"
summary = "2-D blocktiling with 128-bit global and shared accesses and A transposed in shared memory, so a thread's tm values of A are one vector load; scalar, guarded tails (the fast path at N, K % 4 == 0)."
source = "siboehm's SGEMM_CUDA worklog (https://siboehm.com/articles/22/CUDA-MMM), kernel 6"
role = "rung"
order = 13

[params]
bm = [128, 64]
bn = [128]
bk = [8, 16]
tm = [8]
tn = [8]

[descriptions]
bm = "rows of C per block"
bn = "columns of C per block"
bk = "depth (k) of the shared tiles; a multiple of 4"
tm = "rows of the sub-tile of C per thread; a multiple of 4"
tn = "columns of the sub-tile of C per thread; a multiple of 4"

[defaults.sm_90]    # H200: the faster depth at 4096-8192 (benchmarks/NOTES.md, issue 36: the ladder's arch defaults)
bk = 16

[derived]
threads = "(bn // tn) * (bm // tm)"

[[constraints]]
check = "tm % 4 == 0 and tn % 4 == 0 and bk % 4 == 0"
reason = "tm, tn and bk must be multiples of 4 (128-bit accesses)"

[[constraints]]
check = "bm % tm == 0 and bn % tn == 0"
reason = "tm must divide bm and tn must divide bn"

[[constraints]]
check = "threads >= 32 and threads <= 1024"
reason = "{threads} threads per block (need 32..1024)"

[launch]
grid = ["cdiv(N, bn)", "cdiv(M, bm)"]
block = ["bn // tn", "bm // tm"]
+++
*/
/*
 * 13_vectorized.cu -- 2-D blocktiling with 128-bit memory access: tiles of A and B are
 * read from global memory as 4-element vectors (float4/int4), A's tile is stored
 * TRANSPOSED in shared memory (As[BK][BM]) so that a thread's TM values of A for one k
 * are contiguous and, like its TN values of B, come out of shared memory as vectors
 * (LDS.128); C is written with vector stores.
 *
 * Technique and source: kernel 6 ("vectorize SMEM and GMEM accesses") of siboehm's
 * SGEMM_CUDA worklog (https://siboehm.com/articles/22/CUDA-MMM), rewritten for this
 * lab. Tails are handled, not forbidden: a vector access is used where the four
 * elements are in bounds and 16-byte aligned (K % 4 == 0 for A, N % 4 == 0 for B and C;
 * cudaMalloc bases are 256-byte aligned), otherwise the four elements are loaded
 * one by one with bounds checks and zero fill. So any M, N, K works; the fast path
 * needs N and K multiples of 4. The transposed store of A has 2-way bank conflicts
 * (fixed in 14_bankfree.cu).
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types (float, or int with unsigned accumulator)
 *   BM, BN     tile of C per block                               (default 128, 128)
 *   BK         depth of the shared tiles; multiple of 4          (default 8)
 *   TM, TN     sub-tile of C per thread; multiples of 4          (default 8, 8)
 *
 * Launch geometry: block (BN/TN, BM/TM), grid (ceil(N/BN), ceil(M/BM)).
 * Row-major A (MxK), B (KxN), C (MxN); 32-bit indices.
 */
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
#define BN 128
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 8
#endif
#if BM % TM != 0 || BN % TN != 0 || TM % 4 != 0 || TN % 4 != 0 || BK % 4 != 0
#error "TM | BM, TN | BN, and TM, TN, BK multiples of 4"
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VEC CAT(ELEM, 4)          /* float4 or int4 */
#define TX (BN / TN)
#define TY (BM / TM)
#define NT (TX * TY)
#define A_VECS (BM * BK / 4)
#define B_VECS (BK * BN / 4)

extern "C" __global__ __launch_bounds__(NT)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    __shared__ __align__(16) ELEM As[BK][BM];     /* transposed: As[k][m] */
    __shared__ __align__(16) ELEM Bs[BK][BN];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    const bool vec_a = (K & 3) == 0;
    const bool vec_b = (N & 3) == 0;

    ACC acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = (ACC)0;

    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int it = 0; it < (A_VECS + NT - 1) / NT; ++it) {
            const int v = tid + it * NT;
            if (A_VECS % NT != 0 && v >= A_VECS)
                break;
            const int r = v / (BK / 4), c = (v % (BK / 4)) * 4;
            const int gr = row0 + r, gk = k0 + c;
            VEC x;
            if (vec_a && gr < M && gk + 3 < K) {
                x = *reinterpret_cast<const VEC*>(&A[gr * K + gk]);
            } else {
                const bool in = gr < M;
                x.x = (in && gk + 0 < K) ? A[gr * K + gk + 0] : (ELEM)0;
                x.y = (in && gk + 1 < K) ? A[gr * K + gk + 1] : (ELEM)0;
                x.z = (in && gk + 2 < K) ? A[gr * K + gk + 2] : (ELEM)0;
                x.w = (in && gk + 3 < K) ? A[gr * K + gk + 3] : (ELEM)0;
            }
            As[c + 0][r] = x.x;
            As[c + 1][r] = x.y;
            As[c + 2][r] = x.z;
            As[c + 3][r] = x.w;
        }
#pragma unroll
        for (int it = 0; it < (B_VECS + NT - 1) / NT; ++it) {
            const int v = tid + it * NT;
            if (B_VECS % NT != 0 && v >= B_VECS)
                break;
            const int r = v / (BN / 4), c = (v % (BN / 4)) * 4;
            const int gk = k0 + r, gc = col0 + c;
            VEC x;
            if (vec_b && gk < K && gc + 3 < N) {
                x = *reinterpret_cast<const VEC*>(&B[gk * N + gc]);
            } else {
                const bool in = gk < K;
                x.x = (in && gc + 0 < N) ? B[gk * N + gc + 0] : (ELEM)0;
                x.y = (in && gc + 1 < N) ? B[gk * N + gc + 1] : (ELEM)0;
                x.z = (in && gc + 2 < N) ? B[gk * N + gc + 2] : (ELEM)0;
                x.w = (in && gc + 3 < N) ? B[gk * N + gc + 3] : (ELEM)0;
            }
            *reinterpret_cast<VEC*>(&Bs[r][c]) = x;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            ELEM ra[TM], rb[TN];
#pragma unroll
            for (int q = 0; q < TM / 4; ++q) {
                const VEC x = *reinterpret_cast<const VEC*>(&As[k][ty * TM + 4 * q]);
                ra[4 * q + 0] = x.x; ra[4 * q + 1] = x.y; ra[4 * q + 2] = x.z; ra[4 * q + 3] = x.w;
            }
#pragma unroll
            for (int q = 0; q < TN / 4; ++q) {
                const VEC x = *reinterpret_cast<const VEC*>(&Bs[k][tx * TN + 4 * q]);
                rb[4 * q + 0] = x.x; rb[4 * q + 1] = x.y; rb[4 * q + 2] = x.z; rb[4 * q + 3] = x.w;
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += (ACC)ra[i] * (ACC)rb[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + ty * TM + i;
        if (row >= M)
            continue;
#pragma unroll
        for (int q = 0; q < TN / 4; ++q) {
            const int col = col0 + tx * TN + 4 * q;
            if (vec_b && col + 3 < N) {
                VEC x;
                x.x = (ELEM)acc[i][4 * q + 0]; x.y = (ELEM)acc[i][4 * q + 1];
                x.z = (ELEM)acc[i][4 * q + 2]; x.w = (ELEM)acc[i][4 * q + 3];
                *reinterpret_cast<VEC*>(&C[row * N + col]) = x;
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N)
                        C[row * N + col + j] = (ELEM)acc[i][4 * q + j];
            }
        }
    }
}
