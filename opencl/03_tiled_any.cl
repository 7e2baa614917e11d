/*
+++
name = "tiled_any"
title = "Shared-memory tiles with bounds-checked, zero-filled loads: any M, N, K"
summary = "tiled with every tile load bounds-checked: elements past M, N or K load as zero and the stores are guarded, so any size runs; threads outside C still take part in every load and barrier."
source = "seed 003: matMul_SharedMem with guarded tile loads"
role = "seed"
order = 3
newcomer = true

[params]
block = [16, 8, 32]

[descriptions]
block = "side of the square tiles of A, B and C, and of the thread block (block × block threads)"

[launch]
grid = ["cdiv(N, block)", "cdiv(M, block)"]
block = ["block", "block"]
+++
*/
/*
 * 03_tiled_any.cl -- tiled matmul for any M, N, K: BLOCKxBLOCK tiles of A and B in
 * local memory, loads bounds-checked and zero-filled outside the matrices. Mirrors
 * cuda/03_tiled_any.cu.
 *
 * Seed: 003 (CUDA matMul_SharedMem with guarded tile loads), written in OpenCL.
 * Differences from the seed: dimension 0 runs along the columns of C (the seed puts
 * row = x, so its loads do not coalesce), the tile loop is ceil(K/BLOCK) in integers
 * instead of ceil((float)k / BLOCK), a templated element type ELEM and accumulator ACC
 * (unsigned int for int32 so overflow wraps modulo 2^32; the seed sums into a signed
 * int). As in the seed, work-items outside C still take part in every load and
 * barrier and only skip the final store.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   BLOCK  side of the square work-group and of the tiles   (default 16)
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
    __local ELEM As[BLOCK][BLOCK];
    __local ELEM Bs[BLOCK][BLOCK];

    const int tx = get_local_id(0);
    const int ty = get_local_id(1);
    const int row = get_group_id(1) * BLOCK + ty;
    const int col = get_group_id(0) * BLOCK + tx;

    ACC acc = (ACC)0;
    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        const int ka = k0 + tx;   /* column of A this work-item loads */
        const int kb = k0 + ty;   /* row of B this work-item loads */
        As[ty][tx] = (row < M && ka < K) ? A[row * K + ka] : (ELEM)0;
        Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : (ELEM)0;
        barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll
        for (int k = 0; k < BLOCK; ++k)
            acc += (ACC)As[ty][k] * (ACC)Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (row < M && col < N)
        C[row * N + col] = (ELEM)acc;
}
