/*
+++
name = "naive_uncoalesced"
title = "One thread per element of C with x along the rows of C: uncoalesced loads of A and stores of C"
summary = "One thread per C element with x running along the ROWS of C: the 32 threads of a warp take 32 rows, so each load of A and each store of C is strided (uncoalesced) while B is one broadcast address. The counter-example to naive, which shows what coalescing buys."
source = "siboehm's SGEMM_CUDA worklog (https://siboehm.com/articles/22/CUDA-MMM), kernel 1"
role = "rung"
order = 10

[params]
block = [32, 16]

[descriptions]
block = "side of the square thread block (block × block threads, one element of C each)"

[launch]
grid = ["cdiv(M, block)", "cdiv(N, block)"]
block = ["block", "block"]
+++
*/
/*
 * 10_naive_uncoalesced.cu -- one thread per C element straight from global memory, with
 * thread x running along the ROWS of C: the counter-example that shows what coalescing
 * buys (compare with 01_naive.cu, where x runs along columns).
 *
 * Technique: none -- this is the first rung of the SGEMM ladder ("naive", kernel 1 of
 * siboehm's SGEMM_CUDA worklog, https://siboehm.com/articles/22/CUDA-MMM), written anew
 * for this lab's conventions. Within a warp the 32 threads take 32 different rows: each
 * load of A touches 32 rows (32 sectors, stride K) and each store of C 32 rows (stride N),
 * while B[k][col] is one broadcast address. This file deliberately breaks the registry
 * convention "x along columns"; everything else (ELEM/ACC, row-major, entry) follows it.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM   element type: float or int                       (default float)
 *   ACC    accumulator: float, or unsigned int for int      (default float)
 *   BLOCK  side of the square thread block                  (default 32)
 *
 * Launch geometry: block (BLOCK, BLOCK), grid (ceil(M/BLOCK), ceil(N/BLOCK)) -- x over rows.
 * Any M, N, K (guarded). Row-major A (MxK), B (KxN), C (MxN); 32-bit indices.
 */
#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BLOCK
#define BLOCK 32
#endif

extern "C" __global__ __launch_bounds__(BLOCK * BLOCK)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    const int row = blockIdx.x * BLOCK + threadIdx.x;   /* x along rows: uncoalesced */
    const int col = blockIdx.y * BLOCK + threadIdx.y;
    if (row >= M || col >= N)
        return;
    ACC acc = (ACC)0;
    for (int k = 0; k < K; ++k)
        acc += (ACC)A[row * K + k] * (ACC)B[k * N + col];
    C[row * N + col] = (ELEM)acc;
}
