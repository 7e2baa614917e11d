/*
+++
name = "wpt"
title = "Tiled with more work per thread: each thread computes wpt outputs of one row of C"
summary = "Tiled with more work per thread: a block computes a ts × ts tile of C with ts/wpt × ts threads; each thread keeps wpt accumulators in registers for wpt outputs of one row, so each value of A read from shared memory feeds wpt multiply-adds."
source = "seed 004: OpenCL submatrix + WPT kernel"
role = "seed"
order = 4

[params]
ts = [32, 16, 8]
wpt = [4, 1, 2, 8]

[descriptions]
ts = "side of the square tiles of A, B and C"
wpt = "work per thread: outputs of one row of C each thread computes (ts/wpt threads along a tile row); divides ts"

[[constraints]]
check = "ts % wpt == 0"
reason = "wpt={wpt} must divide ts={ts}"

[launch]
grid = ["cdiv(N, ts)", "cdiv(M, ts)"]
block = ["ts // wpt", "ts"]
+++
*/
/*
 * 04_wpt.cu -- tiled matmul with more work per thread: a block computes a TSxTS tile
 * of C with TS/WPT x TS threads; each thread keeps WPT accumulators in registers for
 * WPT outputs of one row, at columns tx + w*(TS/WPT) of the tile.
 *
 * Seed: 004 (OpenCL "submatrix + WPT" kernel). Differences from the seed: row-major
 * instead of column-major, so the seed's layout is transposed: x (TS/WPT threads)
 * runs along the columns of C and y (TS threads) along its rows, and each thread
 * loads WPT elements of each tile at columns tx + w*(TS/WPT), so consecutive threads
 * read consecutive addresses; bounds-checked, zero-filled loads and guarded stores
 * for any M, N, K (the seed needs multiples of the tile); the accumulator has type
 * ACC (the seed sums ints into a float), unsigned int for int32 so overflow wraps
 * modulo 2^32; every WPT loop is fully unrolled so acc[] stays in registers.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   TS     side of the square tiles of A, B and C           (default 32)
 *   WPT    outputs per thread; must divide TS               (default 4)
 *
 * Launch geometry: block (TS/WPT, TS), grid (ceil(N/TS), ceil(M/TS)).
 * Row-major A (MxK), B (KxN), C (MxN); 32-bit indices.
 */
#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef TS
#define TS 32
#endif
#ifndef WPT
#define WPT 4
#endif

#define RTS (TS / WPT)   /* threads along x: the reduced tile width */

#if TS % WPT != 0
#error "WPT must divide TS"
#endif

extern "C" __global__ __launch_bounds__(RTS * TS)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    __shared__ ELEM As[TS][TS];
    __shared__ ELEM Bs[TS][TS];

    const int tx = threadIdx.x;                 /* 0 .. RTS-1 */
    const int ty = threadIdx.y;                 /* 0 .. TS-1  */
    const int row = blockIdx.y * TS + ty;       /* row of C (and of A) */
    const int col0 = blockIdx.x * TS + tx;      /* first column of C; then + w*RTS */

    ACC acc[WPT];
#pragma unroll
    for (int w = 0; w < WPT; ++w)
        acc[w] = (ACC)0;

    for (int k0 = 0; k0 < K; k0 += TS) {
        const int kb = k0 + ty;                 /* row of B this thread loads */
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            const int ka = k0 + tx + w * RTS;   /* column of A */
            const int cb = col0 + w * RTS;      /* column of B */
            As[ty][tx + w * RTS] = (row < M && ka < K) ? A[row * K + ka] : (ELEM)0;
            Bs[ty][tx + w * RTS] = (kb < K && cb < N) ? B[kb * N + cb] : (ELEM)0;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < TS; ++k) {
            const ACC a = (ACC)As[ty][k];
#pragma unroll
            for (int w = 0; w < WPT; ++w)
                acc[w] += a * (ACC)Bs[k][tx + w * RTS];
        }
        __syncthreads();
    }

    if (row < M) {
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            const int c = col0 + w * RTS;
            if (c < N)
                C[row * N + c] = (ELEM)acc[w];
        }
    }
}
