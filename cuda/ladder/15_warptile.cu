/*
+++
name = "warptile"
title = "Warptiling: block tile → warp tiles → per-thread tm × tn pieces; 128-bit loads"
summary = "Warptiling: the block tile splits into warp tiles, each into wmiter × wniter sub-tiles, each into per-thread tm × tn pieces (the CUTLASS hierarchy), so a warp's shared reads are reused across its sub-tiles; 128-bit loads, a padded transposed A tile."
source = "siboehm's SGEMM_CUDA worklog (https://siboehm.com/articles/22/CUDA-MMM), kernel 10; CUTLASS hierarchy"
role = "rung"
order = 15
newcomer = true

[params]
bm = [128]
bn = [128]
bk = [16, 8]
wm = [64]
wn = [32, 64]
wniter = [2]
tm = [8]
tn = [4]

[descriptions]
bm = "rows of C per block"
bn = "columns of C per block"
bk = "depth (k) of the shared tiles"
wm = "rows of a warp's tile; divides bm"
wn = "columns of a warp's tile; divides bn"
wniter = "sub-tiles of a warp tile along N (wmiter along M follows)"
tm = "rows of a thread's piece of a sub-tile; a multiple of 4"
tn = "columns of a thread's piece of a sub-tile; a multiple of 4"

[derived]
wmiter = "(wm * wn) // (32 * tm * tn * wniter)"
wsubm = "wm // wmiter"
wsubn = "wn // wniter"
threads = "32 * (bm // wm) * (bn // wn)"

[[constraints]]
check = "bm % wm == 0 and bn % wn == 0"
reason = "wm must divide bm and wn must divide bn"

[[constraints]]
check = "(wm * wn) % (32 * tm * tn * wniter) == 0"
reason = "a {wm}×{wn} warp tile does not split into 32 lanes × {tm}×{tn} × wniter={wniter}"

[[constraints]]
check = "wmiter >= 1 and wm % wmiter == 0 and wn % wniter == 0"
reason = "wniter={wniter} leaves no whole sub-tile (wmiter={wmiter})"

[[constraints]]
check = "wsubm % tm == 0 and wsubn % tn == 0 and (wsubm // tm) * (wsubn // tn) == 32"
reason = "a {wsubm}×{wsubn} sub-tile is not 32 lanes of {tm}×{tn}"

[[constraints]]
check = "tm % 4 == 0 and tn % 4 == 0 and bk % 4 == 0"
reason = "tm, tn and bk must be multiples of 4 (128-bit accesses)"

[[constraints]]
check = "threads >= 32 and threads <= 1024"
reason = "{threads} threads per block (need 32..1024)"

[launch]
grid = ["cdiv(N, bn)", "cdiv(M, bm)"]
block = ["threads", 1]
+++
*/
/*
 * 15_warptile.cu -- warptiling: the block's BMxBN tile of C is split into WMxWN warp
 * tiles, each warp's tile into WMITERxWNITER sub-tiles of WSUBMxWSUBN, and each thread
 * computes a TMxTN piece of every sub-tile. A warp then reads from shared memory only
 * the rows/columns of its own warp tile (fewer distinct addresses per LDS, broadcasts
 * inside the warp), registers hold (WMITER*TM) x (WNITER*TN) accumulators, and the
 * schedule maps cleanly onto the SM's four warp schedulers.
 *
 * Technique and source: kernel 10 ("warptiling") of siboehm's SGEMM_CUDA worklog
 * (https://siboehm.com/articles/22/CUDA-MMM) and CUTLASS's hierarchical GEMM; rewritten
 * for this lab. Shared layout as 14_bankfree.cu (A transposed and padded). Loads: 128-bit
 * where in bounds and aligned (K % 4, N % 4 == 0), scalar guarded with zero fill
 * elsewhere; guarded stores: any M, N, K.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types (float, or int with unsigned accumulator)
 *   BM, BN, BK block tile and depth                                (default 128, 128, 16)
 *   WM, WN     warp tile; divide BM, BN                             (default 64, 64)
 *   WNITER     sub-tiles of a warp tile along N                     (default 4)
 *   TM, TN     per-thread piece of a sub-tile; multiples of 4       (default 8, 4)
 *   PAD        padding of the transposed A tile (multiple of 4)     (default 4)
 * Derived: WMITER = WM*WN / (32*TM*TN*WNITER), WSUBM = WM/WMITER, WSUBN = WN/WNITER,
 * and a warp's 32 lanes must tile a sub-tile: (WSUBM/TM) * (WSUBN/TN) == 32.
 *
 * Launch geometry: block (32 * (BM/WM) * (BN/WN), 1), grid (ceil(N/BN), ceil(M/BM)).
 * Row-major A (MxK), B (KxN), C (MxN); 32-bit indices.
 */
#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 128
#endif
#ifndef BK
#define BK 16
#endif
#ifndef WM
#define WM 64
#endif
#ifndef WN
#define WN 64
#endif
#ifndef WNITER
#define WNITER 4
#endif
#ifndef TM
#define TM 8
#endif
#ifndef TN
#define TN 4
#endif
#ifndef PAD
#define PAD 4
#endif
#define NWARPS ((BM / WM) * (BN / WN))
#define NT (32 * NWARPS)
#define WMITER ((WM * WN) / (32 * TM * TN * WNITER))
#define WSUBM (WM / WMITER)
#define WSUBN (WN / WNITER)
#if BM % WM || BN % WN || WMITER < 1 || WM % WMITER || WN % WNITER || (WSUBM / TM) * (WSUBN / TN) != 32
#error "inconsistent warptile parameters"
#endif
#if TM % 4 || TN % 4 || BK % 4 || PAD % 4
#error "TM, TN, BK and PAD must be multiples of 4"
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VEC CAT(ELEM, 4)          /* float4 or int4 */
#define A_VECS (BM * BK / 4)
#define B_VECS (BK * BN / 4)

extern "C" __global__ __launch_bounds__(NT)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    __shared__ __align__(16) ELEM As[BK][BM + PAD];   /* transposed: As[k][m] */
    __shared__ __align__(16) ELEM Bs[BK][BN];

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / (BN / WN)) * WM;         /* warp tile origin in the block tile */
    const int wcol = (warp % (BN / WN)) * WN;
    const int tcol = lane % (WSUBN / TN);
    const int trow = lane / (WSUBN / TN);
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    const bool vec_a = (K & 3) == 0;
    const bool vec_b = (N & 3) == 0;

    ACC acc[WMITER * TM][WNITER * TN];
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j)
            acc[i][j] = (ACC)0;

    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int it = 0; it < (A_VECS + NT - 1) / NT; ++it) {
            const int v = tid + it * NT;
            if (A_VECS % NT != 0 && v >= A_VECS)
                break;
            const int r = v / (BK / 4), c = (v % (BK / 4)) * 4;
            const int gr = row0 + r, gk = k0 + c;
            VEC x;
            if (vec_a && gr < M && gk + 3 < K) {
                x = *reinterpret_cast<const VEC*>(&A[gr * K + gk]);
            } else {
                const bool in = gr < M;
                x.x = (in && gk + 0 < K) ? A[gr * K + gk + 0] : (ELEM)0;
                x.y = (in && gk + 1 < K) ? A[gr * K + gk + 1] : (ELEM)0;
                x.z = (in && gk + 2 < K) ? A[gr * K + gk + 2] : (ELEM)0;
                x.w = (in && gk + 3 < K) ? A[gr * K + gk + 3] : (ELEM)0;
            }
            As[c + 0][r] = x.x;
            As[c + 1][r] = x.y;
            As[c + 2][r] = x.z;
            As[c + 3][r] = x.w;
        }
#pragma unroll
        for (int it = 0; it < (B_VECS + NT - 1) / NT; ++it) {
            const int v = tid + it * NT;
            if (B_VECS % NT != 0 && v >= B_VECS)
                break;
            const int r = v / (BN / 4), c = (v % (BN / 4)) * 4;
            const int gk = k0 + r, gc = col0 + c;
            VEC x;
            if (vec_b && gk < K && gc + 3 < N) {
                x = *reinterpret_cast<const VEC*>(&B[gk * N + gc]);
            } else {
                const bool in = gk < K;
                x.x = (in && gc + 0 < N) ? B[gk * N + gc + 0] : (ELEM)0;
                x.y = (in && gc + 1 < N) ? B[gk * N + gc + 1] : (ELEM)0;
                x.z = (in && gc + 2 < N) ? B[gk * N + gc + 2] : (ELEM)0;
                x.w = (in && gc + 3 < N) ? B[gk * N + gc + 3] : (ELEM)0;
            }
            *reinterpret_cast<VEC*>(&Bs[r][c]) = x;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            ELEM ra[WMITER * TM], rb[WNITER * TN];
#pragma unroll
            for (int mi = 0; mi < WMITER; ++mi)
#pragma unroll
                for (int q = 0; q < TM / 4; ++q) {
                    const VEC x = *reinterpret_cast<const VEC*>(
                        &As[k][wrow + mi * WSUBM + trow * TM + 4 * q]);
                    ra[mi * TM + 4 * q + 0] = x.x; ra[mi * TM + 4 * q + 1] = x.y;
                    ra[mi * TM + 4 * q + 2] = x.z; ra[mi * TM + 4 * q + 3] = x.w;
                }
#pragma unroll
            for (int ni = 0; ni < WNITER; ++ni)
#pragma unroll
                for (int q = 0; q < TN / 4; ++q) {
                    const VEC x = *reinterpret_cast<const VEC*>(
                        &Bs[k][wcol + ni * WSUBN + tcol * TN + 4 * q]);
                    rb[ni * TN + 4 * q + 0] = x.x; rb[ni * TN + 4 * q + 1] = x.y;
                    rb[ni * TN + 4 * q + 2] = x.z; rb[ni * TN + 4 * q + 3] = x.w;
                }
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j)
                    acc[i][j] += (ACC)ra[i] * (ACC)rb[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int mi = 0; mi < WMITER; ++mi)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int row = row0 + wrow + mi * WSUBM + trow * TM + i;
            if (row >= M)
                continue;
#pragma unroll
            for (int ni = 0; ni < WNITER; ++ni)
#pragma unroll
                for (int q = 0; q < TN / 4; ++q) {
                    const int col = col0 + wcol + ni * WSUBN + tcol * TN + 4 * q;
                    const ACC* a = &acc[mi * TM + i][ni * TN + 4 * q];
                    if (vec_b && col + 3 < N) {
                        VEC x;
                        x.x = (ELEM)a[0]; x.y = (ELEM)a[1]; x.z = (ELEM)a[2]; x.w = (ELEM)a[3];
                        *reinterpret_cast<VEC*>(&C[row * N + col]) = x;
                    } else {
#pragma unroll
                        for (int j = 0; j < 4; ++j)
                            if (col + j < N)
                                C[row * N + col + j] = (ELEM)a[j];
                    }
                }
        }
}
