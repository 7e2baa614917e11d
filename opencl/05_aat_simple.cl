/*
+++
name = "aat_simple"
title = "C = A·Aᵀ straight from global memory: the Aᵀ term is read with a stride of K (uncoalesced)"
summary = "C = A·Aᵀ with one thread per element of C, straight from global memory: the second operand is read with a stride of K across a warp (neighbouring threads read neighbouring rows of A), so it does not coalesce, which is the point of this seed."
source = "seed 002: simpleMultiply (CUDA Best Practices, strided access)"
role = "seed"
order = 5
newcomer = true
kind = "aat"

[params]
tile = [32, 16]

[descriptions]
tile = "side of the square thread block (tile × tile threads, one element of C each)"

[launch]
grid = ["cdiv(M, tile)", "cdiv(M, tile)"]
block = ["tile", "tile"]
+++
*/
/*
 * 05_aat_simple.cl -- C = A*A^T straight from global memory, one work-item per
 * element of C: C[row][col] = sum_k A[row][k] * A[col][k]. The second term is read
 * with a stride of K across neighbouring work-items (neighbouring rows of A), so it
 * does not coalesce: that is the point of this kernel. Mirrors cuda/05_aat_simple.cu.
 *
 * Seed: 002 (simpleMultiply, CUDA C Best Practices Guide), written in OpenCL.
 * Differences from the seed: any K instead of K == TILE_DIM (the loop runs to K and
 * the row stride is K), a bounds guard for any M, a templated element type ELEM and
 * accumulator ACC (unsigned int for int32 so overflow wraps modulo 2^32). C is
 * computed in full (both triangles), as in the seed.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   TILE   side of the square work-group                    (default 32)
 *
 * Launch geometry: local (TILE, TILE), global (ceil(M/TILE)*TILE, ceil(M/TILE)*TILE);
 * row = dimension 1, col = dimension 0. Row-major A (MxK), C (MxM); 32-bit indices.
 */
#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef TILE
#define TILE 32
#endif

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void matmul(__global const ELEM* A, __global ELEM* C, const int M, const int K)
{
    const int row = get_group_id(1) * TILE + get_local_id(1);
    const int col = get_group_id(0) * TILE + get_local_id(0);
    if (row >= M || col >= M)
        return;

    ACC acc = (ACC)0;
    for (int k = 0; k < K; ++k)
        acc += (ACC)A[row * K + k] * (ACC)A[col * K + k];
    C[row * M + col] = (ELEM)acc;
}
