/*
+++
name = "blocktile_2d"
title = "2-D blocktiling: each thread a tm × tn sub-tile, an outer product of cached A and B values"
summary = "2-D blocktiling: each thread computes a tm × tn sub-tile of C as an outer product of tm values of A and tn values of B cached in registers per k."
source = "siboehm's SGEMM_CUDA worklog (https://siboehm.com/articles/22/CUDA-MMM), kernel 5"
role = "rung"
order = 12
newcomer = true

[params]
bm = [128, 64]
bn = [128, 64]
bk = [8]
tm = [8]
tn = [8]

[descriptions]
bm = "rows of C per block"
bn = "columns of C per block"
bk = "depth (k) of the shared tiles"
tm = "rows of the sub-tile of C each thread computes; divides bm"
tn = "columns of the sub-tile of C each thread computes; divides bn"

[defaults.sm_90]    # H200: the faster tile at 4096-8192 (benchmarks/NOTES.md, issue 36: the ladder's arch defaults)
bm = 64
bn = 128

[derived]
threads = "(bn // tn) * (bm // tm)"

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
 * 12_blocktile_2d.cu -- 2-D blocktiling: each thread computes a TMxTN sub-tile of the
 * block's BMxBN tile of C; per k it loads TM values of A and TN values of B from shared
 * memory into registers and does TM*TN FMAs (an outer product), raising arithmetic
 * intensity per shared-memory load from ~1 (1-D) to TM*TN/(TM+TN).
 *
 * Technique and source: kernel 5 ("2D blocktiling") of siboehm's SGEMM_CUDA worklog
 * (https://siboehm.com/articles/22/CUDA-MMM), rewritten for this lab: 2-D thread block
 * (x along columns), strided tile-load loops valid for any parameter combination,
 * bounds-checked zero-filled loads and guarded stores for any M, N, K; ELEM/ACC.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types                 (default float)
 *   BM, BN     tile of C per block                           (default 128, 128)
 *   BK         depth of the shared tiles                     (default 8)
 *   TM, TN     sub-tile of C per thread; divide BM, BN       (default 8, 8)
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
#if BM % TM != 0 || BN % TN != 0
#error "TM must divide BM and TN must divide BN"
#endif
#define TX (BN / TN)
#define TY (BM / TM)
#define NT (TX * TY)

extern "C" __global__ __launch_bounds__(NT)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    __shared__ ELEM As[BM][BK];
    __shared__ ELEM Bs[BK][BN];

    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * TX + tx;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    ACC acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = (ACC)0;
    ACC ra[TM], rb[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int it = 0; it < (BM * BK + NT - 1) / NT; ++it) {
            const int idx = tid + it * NT;
            if ((BM * BK) % NT != 0 && idx >= BM * BK)
                break;
            const int r = idx / BK, c = idx % BK;
            const int gr = row0 + r, gk = k0 + c;
            As[r][c] = (gr < M && gk < K) ? A[gr * K + gk] : (ELEM)0;
        }
#pragma unroll
        for (int it = 0; it < (BK * BN + NT - 1) / NT; ++it) {
            const int idx = tid + it * NT;
            if ((BK * BN) % NT != 0 && idx >= BK * BN)
                break;
            const int r = idx / BN, c = idx % BN;
            const int gk = k0 + r, gc = col0 + c;
            Bs[r][c] = (gk < K && gc < N) ? B[gk * N + gc] : (ELEM)0;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i)
                ra[i] = (ACC)As[ty * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j)
                rb[j] = (ACC)Bs[k][tx * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] += ra[i] * rb[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + ty * TM + i;
        if (row < M) {
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const int col = col0 + tx * TN + j;
                if (col < N)
                    C[row * N + col] = (ELEM)acc[i][j];
            }
        }
    }
}
