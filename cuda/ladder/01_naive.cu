/*
+++
name = "naive"
title = "One thread per element of C, reading A and B straight from global memory"
summary = "One thread per C element reading A and B straight from global memory; x runs along the columns of C, so the loads of B and the stores of C coalesce. The baseline every other kernel is measured against."
source = "seed 000/004: the 'naive' kernel timed against the shared-memory one"
role = "baseline"
order = 1
newcomer = true

[params]
block = [16, 8, 32]

[descriptions]
block = "side of the square thread block: block × block threads, one element of C each"

[launch]
grid = ["cdiv(N, block)", "cdiv(M, block)"]
block = ["block", "block"]
+++
*/
/*
 * 01_naive.cu -- naive matmul: one thread per element of C, A and B read straight
 * from global memory (no reuse through shared memory).
 *
 * Seed: 000 (the "GPU" row timed against the shared-memory kernel) and 004 (the
 * OpenCL "naive" kernel). Differences from the seeds: row-major, thread x along the
 * columns of C so that the loads of B and the store of C coalesce (seed 000 likewise),
 * a bounds guard so any M, N, K work, a templated element type ELEM and an accumulator
 * of type ACC (unsigned int for int32, so overflow wraps modulo 2^32 with defined
 * behaviour; seed 004 sums into a signed int).
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   BLOCK  side of the square thread block                  (default 16)
 *
 * Launch geometry: block (BLOCK, BLOCK), grid (ceil(N/BLOCK), ceil(M/BLOCK)).
 * Row-major: A is MxK, B is KxN, C is MxN; 32-bit indices (M*K, K*N, M*N < 2^31).
 */
#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BLOCK
#define BLOCK 16
#endif

extern "C" __global__ __launch_bounds__(BLOCK * BLOCK)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    const int col = blockIdx.x * BLOCK + threadIdx.x;
    const int row = blockIdx.y * BLOCK + threadIdx.y;
    if (row >= M || col >= N)
        return;

    ACC acc = (ACC)0;
    for (int k = 0; k < K; ++k)
        acc += (ACC)A[row * K + k] * (ACC)B[k * N + col];
    C[row * N + col] = (ELEM)acc;
}
