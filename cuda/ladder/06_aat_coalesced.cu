/*
+++
name = "aat_coalesced"
title = "C = A·Aᵀ with coalesced loads into shared tiles, one transposed (bank conflicts on its stores)"
summary = "C = A·Aᵀ with coalesced loads into a tile and a transposed tile in shared memory: the reads from global memory coalesce, but the column-wise store of the transposed tile has a stride of tile words, so the threads of a warp hit the same bank (aat_padded removes the conflict)."
source = "seed 002: coalescedMultiply"
role = "seed"
order = 6
kind = "aat"

[params]
tile = [32, 16]

[descriptions]
tile = "side of the thread block and of both shared tiles"

[launch]
grid = ["cdiv(M, tile)", "cdiv(M, tile)"]
block = ["tile", "tile"]
+++
*/
/*
 * 06_aat_coalesced.cu -- C = A*A^T with coalesced loads: per chunk of TILE columns
 * of A, a block loads its TILE rows of A into aTile and the TILE rows of A that
 * give its columns of C into transposedTile, transposing on the store to shared
 * memory. Reads from global memory coalesce; the column-wise store
 * transposedTile[tx][ty] has a stride of TILE words, so with TILE = 32 every thread
 * of a warp hits the same bank (32-way bank conflict): that is the point of this
 * kernel (07_aat_padded removes it).
 *
 * Seed: 002 (coalescedMultiply, CUDA C Best Practices Guide). Differences from the
 * seed: any K (a loop over K in chunks of TILE with two barriers per chunk, where
 * the seed has K == TILE_DIM and one barrier), zero-filled loads and a guarded
 * store for any M, K, a templated element type ELEM and accumulator ACC (unsigned int
 * for int32 so overflow wraps modulo 2^32). Threads outside C take part in every
 * load and barrier and only skip the store. C is computed in full.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   TILE   side of the thread block and of both tiles       (default 32)
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
    __shared__ ELEM aTile[TILE][TILE];
    __shared__ ELEM transposedTile[TILE][TILE];

    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;     /* row of C and of A (first term) */
    const int col = blockIdx.x * TILE + tx;     /* column of C */
    const int trow = blockIdx.x * TILE + ty;    /* row of A loaded into column ty of transposedTile */

    ACC acc = (ACC)0;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        const int k = k0 + tx;
        aTile[ty][tx] = (row < M && k < K) ? A[row * K + k] : (ELEM)0;
        transposedTile[tx][ty] = (trow < M && k < K) ? A[trow * K + k] : (ELEM)0;
        __syncthreads();

#pragma unroll
        for (int i = 0; i < TILE; ++i)
            acc += (ACC)aTile[ty][i] * (ACC)transposedTile[i][tx];
        __syncthreads();
    }
    if (row < M && col < M)
        C[row * M + col] = (ELEM)acc;
}
