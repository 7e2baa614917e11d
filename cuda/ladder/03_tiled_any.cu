/*
+++
name = "tiled_any"
title = "Shared-memory tiles with bounds-checked, zero-filled loads: any M, N, K"
summary = "tiled with every tile load bounds-checked: elements past M, N or K load as zero and the stores are guarded, so any size runs; threads outside C still take part in every load and barrier."
source = "seed 003: matMul_SharedMem with guarded tile loads"
role = "seed"
order = 3

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
 * 03_tiled_any.cu -- tiled matmul for any M, N, K: BLOCKxBLOCK tiles of A and B in
 * shared memory, loads bounds-checked and zero-filled outside the matrices.
 *
 * Seed: 003 (matMul_SharedMem with guarded tile loads). Differences from the seed:
 * thread x runs along the columns of C (the seed puts row = x, so its loads do not
 * coalesce), the tile loop is ceil(K/BLOCK) in integers instead of
 * ceil((float)k / BLOCK), a templated element type ELEM and accumulator ACC (unsigned
 * int for int32 so overflow wraps modulo 2^32; the seed sums into a signed int).
 * As in the seed, threads outside C still take part in every load and barrier and
 * only skip the final store.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   BLOCK  side of the square thread block and of the tiles (default 16)
 *
 * Launch geometry: block (BLOCK, BLOCK), grid (ceil(N/BLOCK), ceil(M/BLOCK)).
 * Row-major A (MxK), B (KxN), C (MxN); 32-bit indices.
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
    __shared__ ELEM As[BLOCK][BLOCK];
    __shared__ ELEM Bs[BLOCK][BLOCK];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * BLOCK + ty;
    const int col = blockIdx.x * BLOCK + tx;

    ACC acc = (ACC)0;
    for (int k0 = 0; k0 < K; k0 += BLOCK) {
        const int ka = k0 + tx;   /* column of A this thread loads */
        const int kb = k0 + ty;   /* row of B this thread loads */
        As[ty][tx] = (row < M && ka < K) ? A[row * K + ka] : (ELEM)0;
        Bs[ty][tx] = (kb < K && col < N) ? B[kb * N + col] : (ELEM)0;
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BLOCK; ++k)
            acc += (ACC)As[ty][k] * (ACC)Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[row * N + col] = (ELEM)acc;
}
