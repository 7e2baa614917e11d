/*
+++
name = "tiled"
title = "Shared-memory tiles of A and B, two barriers a tile; M, N and K multiples of the block"
summary = "Shared-memory tiles of A and B (block × block), two barriers per tile: each element of A and B is read from global memory once per tile instead of once per product. As the seed's CUDA sample there are no bounds checks, so the sizes must be multiples of the block; tiled_any takes any size."
source = "seed 000/001: shared-memory matrixMul (CUDA sample style, no bounds checks)"
role = "seed"
order = 2
newcomer = true

[params]
block = [16, 8, 32]

[descriptions]
block = "side of the square tiles of A, B and C, and of the thread block (block × block threads)"

[[constraints]]
check = "M % block == 0 and N % block == 0 and K % block == 0"
reason = "sizes must be multiples of block={block} (like the seed's CUDA sample, no bounds checks): M={M}, N={N}, K={K}; use tiled_any for any size"

[launch]
grid = ["cdiv(N, block)", "cdiv(M, block)"]
block = ["block", "block"]
+++
*/
/*
 * 02_tiled.cu -- tiled matmul: each block stages BLOCKxBLOCK tiles of A and B in
 * shared memory, two barriers per tile, one thread per element of C.
 *
 * Seed: 000/001 (the CUDA sample's matrixMulCUDA / matrixMulShared). Like the seed
 * there are no bounds checks: M, N and K must be multiples of BLOCK (the registry
 * enforces it; use 03_tiled_any otherwise). Differences from the seeds: plain
 * row-major pointers instead of the Matrix struct / aBegin-aEnd arithmetic, no
 * `if (row < ...)` around the barriers (seed 000 wraps __syncthreads in a branch),
 * a templated element type ELEM, accumulator ACC (unsigned int for int32, so overflow
 * wraps modulo 2^32), inner loop unrolled.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   BLOCK  side of the square thread block and of the tiles (default 16)
 *
 * Launch geometry: block (BLOCK, BLOCK), grid (N/BLOCK, M/BLOCK); thread x along
 * columns of C, y along rows. Row-major A (MxK), B (KxN), C (MxN); 32-bit indices.
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
        As[ty][tx] = A[row * K + (k0 + tx)];
        Bs[ty][tx] = B[(k0 + ty) * N + col];
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BLOCK; ++k)
            acc += (ACC)As[ty][k] * (ACC)Bs[k][tx];
        __syncthreads();
    }
    C[row * N + col] = (ELEM)acc;
}
