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
 * 02_tiled.cl -- tiled matmul: each work-group stages BLOCKxBLOCK tiles of A and B
 * in local memory, two barriers per tile, one work-item per element of C. Mirrors
 * cuda/02_tiled.cu.
 *
 * Seed: 000/001 (the CUDA sample's matrixMulCUDA / matrixMulShared), written in
 * OpenCL. Like the seed there are no bounds checks: M, N and K must be multiples of
 * BLOCK (the registry enforces it; use 03_tiled_any otherwise). Differences from the
 * seeds: plain row-major pointers instead of the Matrix struct / aBegin-aEnd
 * arithmetic, no branch around the barriers (seed 000 has one), a templated element
 * type ELEM, accumulator ACC (unsigned int for int32, so overflow wraps modulo 2^32),
 * inner loop unrolled.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   BLOCK  side of the square work-group and of the tiles   (default 16)
 *
 * Launch geometry: local (BLOCK, BLOCK), global (N, M); dimension 0 along columns
 * of C, 1 along rows. Row-major A (MxK), B (KxN), C (MxN); 32-bit indices.
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
        As[ty][tx] = A[row * K + (k0 + tx)];
        Bs[ty][tx] = B[(k0 + ty) * N + col];
        barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll
        for (int k = 0; k < BLOCK; ++k)
            acc += (ACC)As[ty][k] * (ACC)Bs[k][tx];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[row * N + col] = (ELEM)acc;
}
