/*
+++
name = "aat_simple"
title = "C = A·Aᵀ straight from global memory: the Aᵀ term is read with a stride of K (uncoalesced)"
summary = "C = A·Aᵀ with one thread per element of C, straight from global memory: the second operand is read with a stride of K across a warp (neighbouring threads read neighbouring rows of A), so it does not coalesce, which is the point of this seed."
source = "seed 002: simpleMultiply (CUDA Best Practices, strided access)"
role = "seed"
order = 5
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
 * 05_aat_simple.cu -- C = A*A^T straight from global memory, one thread per element
 * of C: C[row][col] = sum_k A[row][k] * A[col][k]. The second term is read with a
 * stride of K across a warp (neighbouring threads = neighbouring rows of A), so it
 * does not coalesce: that is the point of this kernel.
 *
 * Seed: 002 (simpleMultiply, CUDA C Best Practices Guide). Differences from the
 * seed: any K instead of K == TILE_DIM (the loop runs to K and the row stride is K),
 * a bounds guard for any M, a templated element type ELEM and accumulator ACC
 * (unsigned int for int32 so overflow wraps modulo 2^32). C is computed in full
 * (both triangles), as in the seed.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   TILE   side of the square thread block                  (default 32)
 *
 * Launch geometry: block (TILE, TILE), grid (ceil(M/TILE), ceil(M/TILE)); row = y,
 * col = x. Row-major A (MxK), C (MxM); 32-bit indices.
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

extern "C" __global__ __launch_bounds__(TILE * TILE)
void matmul(const ELEM* __restrict__ A, ELEM* __restrict__ C, int M, int K)
{
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= M)
        return;

    ACC acc = (ACC)0;
    for (int k = 0; k < K; ++k)
        acc += (ACC)A[row * K + k] * (ACC)A[col * K + k];
    C[row * M + col] = (ELEM)acc;
}
