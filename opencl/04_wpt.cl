/*
+++
name = "wpt"
title = "Tiled with more work per thread: each thread computes wpt outputs of one row of C"
summary = "Tiled with more work per thread: a block computes a ts × ts tile of C with ts/wpt × ts threads; each thread keeps wpt accumulators in registers for wpt outputs of one row, so each value of A read from shared memory feeds wpt multiply-adds."
source = "seed 004: OpenCL submatrix + WPT kernel"
role = "seed"
order = 4
newcomer = true

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
 * 04_wpt.cl -- tiled matmul with more work per work-item: a work-group computes a
 * TSxTS tile of C with TS/WPT x TS work-items; each keeps WPT accumulators in
 * registers for WPT outputs of one row, at columns tx + w*(TS/WPT) of the tile.
 * Mirrors cuda/04_wpt.cu.
 *
 * Seed: 004 (OpenCL "submatrix + WPT" multiplyMatrices). Differences from the seed:
 * row-major instead of column-major, so the seed's layout is transposed: dimension
 * 0 (TS/WPT work-items) runs along the columns of C and dimension 1 (TS work-items)
 * along its rows, and each work-item loads WPT elements of each tile at columns
 * tx + w*(TS/WPT), so neighbouring work-items read neighbouring addresses;
 * bounds-checked, zero-filled loads and guarded stores for any M, N, K (the seed
 * needs multiples of the tile); the accumulator has type ACC (the seed sums ints into
 * a float), unsigned int for int32 so overflow wraps modulo 2^32; every WPT loop is
 * fully unrolled so acc[] stays in registers.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM      element type: float or int                       (default float)
 *   ACC    accumulator:  float, or unsigned int for int     (default float)
 *   TS     side of the square tiles of A, B and C           (default 32)
 *   WPT    outputs per work-item; must divide TS            (default 4)
 *
 * Launch geometry: local (TS/WPT, TS), global (ceil(N/TS)*(TS/WPT), ceil(M/TS)*TS).
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

#define RTS (TS / WPT)   /* work-items along dimension 0: the reduced tile width */

#if TS % WPT != 0
#error "WPT must divide TS"
#endif

__kernel __attribute__((reqd_work_group_size(RTS, TS, 1)))
void matmul(__global const ELEM* A, __global const ELEM* B, __global ELEM* C,
            const int M, const int N, const int K)
{
    __local ELEM As[TS][TS];
    __local ELEM Bs[TS][TS];

    const int tx = get_local_id(0);                 /* 0 .. RTS-1 */
    const int ty = get_local_id(1);                 /* 0 .. TS-1  */
    const int row = get_group_id(1) * TS + ty;      /* row of C (and of A) */
    const int col0 = get_group_id(0) * TS + tx;     /* first column of C; then + w*RTS */

    ACC acc[WPT];
#pragma unroll
    for (int w = 0; w < WPT; ++w)
        acc[w] = (ACC)0;

    for (int k0 = 0; k0 < K; k0 += TS) {
        const int kb = k0 + ty;                     /* row of B this work-item loads */
#pragma unroll
        for (int w = 0; w < WPT; ++w) {
            const int ka = k0 + tx + w * RTS;       /* column of A */
            const int cb = col0 + w * RTS;          /* column of B */
            As[ty][tx + w * RTS] = (row < M && ka < K) ? A[row * K + ka] : (ELEM)0;
            Bs[ty][tx + w * RTS] = (kb < K && cb < N) ? B[kb * N + cb] : (ELEM)0;
        }
        barrier(CLK_LOCAL_MEM_FENCE);

#pragma unroll
        for (int k = 0; k < TS; ++k) {
            const ACC a = (ACC)As[ty][k];
#pragma unroll
            for (int w = 0; w < WPT; ++w)
                acc[w] += a * (ACC)Bs[k][tx + w * RTS];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
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
