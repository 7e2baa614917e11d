/*
 * 05_aat_simple.cu -- C = A*A^T straight from global memory, one thread per element
 * of C: C[row][col] = sum_k A[row][k] * A[col][k]. The second term is read with a
 * stride of K across a warp (neighbouring threads = neighbouring rows of A), so it
 * does not coalesce: that is the point of this kernel.
 *
 * Seed: 002 (simpleMultiply, CUDA C Best Practices Guide). Differences from the
 * seed: any K instead of K == TILE_DIM (the loop runs to K and the row stride is K),
 * a bounds guard for any M, a templated element type T and accumulator ACC
 * (unsigned int for int32 so overflow wraps modulo 2^32). C is computed in full
 * (both triangles), as in the seed.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   T      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   TILE   side of the square thread block                  (default 32)
 *
 * Launch geometry: block (TILE, TILE), grid (ceil(M/TILE), ceil(M/TILE)); row = y,
 * col = x. Row-major A (MxK), C (MxM); 32-bit indices.
 */
#ifndef T
#define T float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef TILE
#define TILE 32
#endif

extern "C" __global__ __launch_bounds__(TILE * TILE)
void matmul(const T* __restrict__ A, T* __restrict__ C, int M, int K)
{
    const int row = blockIdx.y * TILE + threadIdx.y;
    const int col = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || col >= M)
        return;

    ACC acc = (ACC)0;
    for (int k = 0; k < K; ++k)
        acc += (ACC)A[row * K + k] * (ACC)A[col * K + k];
    C[row * M + col] = (T)acc;
}
