/*
+++
name = "planted_first_launch_only"
role = "user"
title = "Planted fault: computes on its first launch only (a flag in device memory)"
summary = "A test kernel that is right only when verified: a device-memory counter of finished blocks, left over from the first launch, makes every later launch return at once. The check of the last timed launch (C poisoned before the warm-up) catches it, and so does the second seed's."
source = "tests/test_timed_recheck.py (issue 37: re-check what was timed)"

[params]
block = [16]

[launch]
grid = ["cdiv(N, block)", "cdiv(M, block)"]
block = ["block", "block"]
+++
*/
/*
 * planted_first_launch_only.cu -- naive matmul that skips all work once one whole launch
 * has finished: blocks count themselves out in a module-scope counter, and a block that
 * starts when the counter already covers a full grid returns. Within the first launch
 * the counter stays below the grid's size, so that launch is complete and right.
 */
#ifndef ELEM
#define ELEM float
#endif
#ifndef BLOCK
#define BLOCK 16
#endif

__device__ unsigned int planted_blocks_done;

extern "C" __global__ __launch_bounds__(BLOCK * BLOCK)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    const unsigned int grid = gridDim.x * gridDim.y;
    if (*(volatile unsigned int*)&planted_blocks_done >= grid)
        return;                       /* the fault: a launch has finished before */
    const int col = blockIdx.x * BLOCK + threadIdx.x;
    const int row = blockIdx.y * BLOCK + threadIdx.y;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0)
        atomicAdd(&planted_blocks_done, 1u);
}
