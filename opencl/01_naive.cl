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
 * 01_naive.cl -- naive matmul: one work-item per element of C, A and B read straight
 * from global memory (no reuse through local memory). Mirrors cuda/01_naive.cu.
 *
 * Seed: 004 (the OpenCL "naive" multiplyMatrices kernel) and 000. Differences from
 * the seeds: a bounds guard so any M, N, K work (seed 004 launches exactly NxM
 * work-items), a templated element type ELEM and an accumulator of type ACC (unsigned
 * int for int32, so overflow wraps modulo 2^32 with defined behaviour; the seed sums
 * into a signed int). Row-major with dimension 0 along the columns of C, as in the
 * seed, so the loads of B and the store of C coalesce.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   BLOCK  side of the square work-group                    (default 16)
 *
 * Launch geometry: local (BLOCK, BLOCK), global (ceil(N/BLOCK)*BLOCK,
 * ceil(M/BLOCK)*BLOCK). Row-major A (MxK), B (KxN), C (MxN); 32-bit indices.
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

__kernel __attribute__((reqd_work_group_size(BLOCK, BLOCK, 1)))
void matmul(__global const ELEM* A, __global const ELEM* B, __global ELEM* C,
            const int M, const int N, const int K)
{
    const int col = get_group_id(0) * BLOCK + get_local_id(0);
    const int row = get_group_id(1) * BLOCK + get_local_id(1);
    if (row >= M || col >= N)
        return;

    ACC acc = (ACC)0;
    for (int k = 0; k < K; ++k)
        acc += (ACC)A[row * K + k] * (ACC)B[k * N + col];
    C[row * N + col] = (ELEM)acc;
}
