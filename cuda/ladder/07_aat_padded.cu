/*
+++
name = "aat_padded"
title = "As aat_coalesced, the transposed tile padded to [T][T+1]: its column writes hit 32 banks"
summary = "As aat_coalesced, with the transposed tile padded to [tile][tile + 1] so that its column-wise writes have a stride of tile + 1 words and the threads of a warp hit 32 different banks: the bank conflict disappears."
source = "seed 002: coalescedMultiply with transposedTile[TILE_DIM][TILE_DIM+1]"
role = "seed"
order = 7
kind = "aat"

[params]
tile = [32, 16]

[descriptions]
tile = "side of the thread block and of both shared tiles (the transposed one padded by a word a row)"

[launch]
grid = ["cdiv(M, tile)", "cdiv(M, tile)"]
block = ["tile", "tile"]
+++
*/
/*
 * 07_aat_padded.cu -- C = A*A^T with coalesced loads, as 06_aat_coalesced, but the
 * transposed tile is padded to [TILE][TILE+1]: the column-wise store
 * transposedTile[tx][ty] then has a stride of TILE+1 words (33 for TILE = 32), so
 * the threads of a warp hit 32 different banks and the bank conflict disappears.
 * The reads transposedTile[i][tx] stay conflict-free.
 *
 * Seed: 002 (coalescedMultiply with __shared__ float transposedTile[TILE_DIM][TILE_DIM+1],
 * CUDA C Best Practices Guide). Differences from the seed: any K (a loop over K in
 * chunks of TILE with two barriers per chunk, where the seed has K == TILE_DIM),
 * zero-filled loads and a guarded store for any M, K, a templated element type ELEM and
 * accumulator ACC (unsigned int for int32 so overflow wraps modulo 2^32). Threads
 * outside C take part in every load and barrier and only skip the store. C is
 * computed in full.
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
    __shared__ ELEM transposedTile[TILE][TILE + 1];   /* +1: padding against bank conflicts */

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
