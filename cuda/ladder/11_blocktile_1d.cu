/*
+++
name = "blocktile_1d"
title = "1-D blocktiling: shared tiles of A and B, each thread tm rows of one column of C"
summary = "1-D blocktiling: bm × bk and bk × bn shared tiles, each thread computing tm rows of one column of C, so each value of B read from shared memory feeds tm multiply-adds."
source = "siboehm's SGEMM_CUDA worklog (https://siboehm.com/articles/22/CUDA-MMM), kernel 4"
role = "rung"
order = 11

[params]
bm = [64]
bn = [64]
bk = [8]
tm = [8, 16]

[descriptions]
bm = "rows of C per block"
bn = "columns of C per block (and threads along x)"
bk = "depth (k) of the shared tiles"
tm = "rows of C per thread; divides bm"

[defaults.sm_90]    # H200: the faster tm at 2048-8192 (benchmarks/NOTES.md, issue 36: the ladder's arch defaults)
tm = 16

[derived]
threads = "bn * bm // tm"

[[constraints]]
check = "bm % tm == 0"
reason = "tm={tm} must divide bm={bm}"

[[constraints]]
check = "threads >= 32 and threads <= 1024"
reason = "{threads} threads per block (need 32..1024)"

[launch]
grid = ["cdiv(N, bn)", "cdiv(M, bm)"]
block = ["bn", "bm // tm"]
+++
*/
/*
 * 11_blocktile_1d.cu -- 1-D blocktiling: a block computes a BMxBN tile of C from BMxBK
 * and BKxBN tiles of A and B in shared memory; each thread keeps TM accumulators for TM
 * consecutive rows of one column, so one B value read from shared memory feeds TM FMAs.
 *
 * Technique and source: kernel 4 ("1D blocktiling") of siboehm's SGEMM_CUDA worklog
 * (https://siboehm.com/articles/22/CUDA-MMM), rewritten for this lab: 2-D thread block
 * (x along columns of C, y over groups of TM rows), tile loads done by a strided loop so
 * any BM/BN/BK/TM combination works, loads bounds-checked and zero-filled and stores
 * guarded so any M, N, K works; ELEM/ACC as everywhere (int32 wraps modulo 2^32).
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types                 (default float)
 *   BM, BN     tile of C per block                           (default 64, 64)
 *   BK         depth of the shared tiles                     (default 8)
 *   TM         rows of C per thread; must divide BM          (default 8)
 *
 * Launch geometry: block (BN, BM/TM), grid (ceil(N/BN), ceil(M/BM)).
 * Row-major A (MxK), B (KxN), C (MxN); 32-bit indices.
 */
#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 8
#endif
#ifndef TM
#define TM 8
#endif
#if BM % TM != 0
#error "TM must divide BM"
#endif
#define NT (BN * (BM / TM))   /* threads per block */

extern "C" __global__ __launch_bounds__(NT)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    __shared__ ELEM As[BM][BK];
    __shared__ ELEM Bs[BK][BN];

    const int tx = threadIdx.x;                /* column within the tile */
    const int ty = threadIdx.y;                /* group of TM rows */
    const int tid = ty * BN + tx;
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;

    ACC acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i)
        acc[i] = (ACC)0;

    for (int k0 = 0; k0 < K; k0 += BK) {
        /* consecutive threads read consecutive k of a row of A / columns of B */
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
            const ACC b = (ACC)Bs[k][tx];
#pragma unroll
            for (int i = 0; i < TM; ++i)
                acc[i] += (ACC)As[ty * TM + i][k] * b;
        }
        __syncthreads();
    }

    const int col = col0 + tx;
    if (col < N) {
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int row = row0 + ty * TM + i;
            if (row < M)
                C[row * N + col] = (ELEM)acc[i];
        }
    }
}
