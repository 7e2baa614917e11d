/*
+++
name = "pipelined"
title = "warptile fed by a stages-deep cp.async pipeline: copies overlap the FMAs, one barrier a tile"
summary = "warptile fed by a stages-deep cp.async pipeline (sm_80 and newer): the copies of the next tiles run in the background while the warps compute on the current one, one barrier per tile."
source = "CUTLASS sm80 multistage mainloop; CUDA Programming Guide async copies; siboehm's SGEMM_CUDA worklog (https://siboehm.com/articles/22/CUDA-MMM), kernel 11"
role = "rung"
order = 16

[params]
bm = [128, 64]
bn = [128]
bk = [16]
wm = [64]
wn = [32]
wniter = [2]
tm = [8]
tn = [4]
stages = [3]
minb = [2, 1]

[descriptions]
bm = "rows of C per block"
bn = "columns of C per block"
bk = "depth (k) of a tile"
wm = "rows of a warp's tile; divides bm"
wn = "columns of a warp's tile; divides bn"
wniter = "sub-tiles of a warp tile along N"
tm = "rows of a thread's piece of a sub-tile; a multiple of 4"
tn = "columns of a thread's piece of a sub-tile; a multiple of 4"
stages = "tiles in flight in the cp.async ring (at least 2)"
minb = "blocks per SM asked of ptxas (__launch_bounds__), which caps the registers a thread"

[defaults.sm_90]    # H200: the faster tile at 4096-8192 (benchmarks/NOTES.md, issue 36: the ladder's arch defaults)
bm = 64

[derived]
wmiter = "(wm * wn) // (32 * tm * tn * wniter)"
wsubm = "wm // wmiter"
wsubn = "wn // wniter"
threads = "32 * (bm // wm) * (bn // wn)"

[[constraints]]
check = "stages >= 2 and minb >= 1"
reason = "stages must be at least 2 and minb at least 1"

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
shared = "stages * (bk * (bm + 4) + bk * bn) * 4"    # per stage: A transposed, BK x (BM + PAD), PAD = 4; B, BK x BN
+++
*/
/*
 * 16_pipelined.cu -- 15_warptile.cu with a STAGES-deep software pipeline: tiles of A
 * and B are copied global -> shared with cp.async (sm_80+), which bypasses registers
 * and runs in the background, so while the warps compute on tile t the copies of tiles
 * t+1 .. t+STAGES-1 are in flight (STAGES = 2 is classic double buffering). One
 * __syncthreads per tile: cp.async.wait_group(STAGES-2) + barrier make tile t visible
 * and also certify that every warp has left the stage about to be refilled.
 *
 * Technique and source: multistage cp.async pipelines of CUTLASS (sm80 "multistage"
 * mainloop) and the CUDA C Programming Guide's "asynchronous data copies" section;
 * double buffering is also kernel 11 of siboehm's SGEMM_CUDA worklog. Rewritten here.
 * A is stored transposed (As[k][m], padded), so it goes with 4-byte cp.async (consecutive
 * threads copy consecutive k of a row: coalesced reads); B goes with 16-byte cp.async
 * where N % 4 == 0 (else 4-byte). Out-of-bounds elements use cp.async's src-size 0,
 * which zero-fills the shared destination: any M, N, K.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types (float, or int with unsigned accumulator)
 *   BM, BN, BK block tile and depth                                (default 128, 128, 16)
 *   WM, WN     warp tile; divide BM, BN                             (default 64, 64)
 *   WNITER     sub-tiles of a warp tile along N                     (default 4)
 *   TM, TN     per-thread piece of a sub-tile; multiples of 4       (default 8, 4)
 *   PAD        padding of the transposed A tile (multiple of 4)     (default 4)
 *   STAGES     tiles in flight, >= 2                                (default 3)
 *   MINB       minimum resident blocks per SM asked of ptxas        (default 1)
 * Shared memory is dynamic: STAGES * (BK*(BM+PAD) + BK*BN) * sizeof(ELEM) bytes
 * (engine.ladder passes it; above 48 KB the backend opts in).
 *
 * Launch geometry: block (32 * (BM/WM) * (BN/WN), 1), grid (ceil(N/BN), ceil(M/BM)).
 * Row-major A (MxK), B (KxN), C (MxN); 32-bit indices. Needs sm_80 or newer.
 */
#include "lab_ptx.cuh"

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
#ifndef STAGES
#define STAGES 3
#endif
#ifndef MINB
#define MINB 1            /* __launch_bounds__ min blocks per SM: 2 caps registers for 2 blocks */
#endif
#if STAGES < 2
#error "STAGES must be at least 2"
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

#define AS_WORDS (BK * (BM + PAD))
#define BS_WORDS (BK * BN)

/* Issue the copies of tile kt (columns k0 .. k0+BK-1 of A, rows of B) into stage st. */
__device__ __forceinline__ void load_tile(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* As, ELEM* Bs, int M, int N, int K,
                                          int row0, int col0, int k0, int tid, bool vec_b)
{
#pragma unroll
    for (int it = 0; it < (BM * BK + NT - 1) / NT; ++it) {
        const int e = tid + it * NT;
        if ((BM * BK) % NT != 0 && e >= BM * BK)
            break;
        const int r = e / BK, c = e % BK;              /* consecutive threads: consecutive k */
        const int gr = row0 + r, gk = k0 + c;
        const bool in = gr < M && gk < K;
        cp_async4(&As[c * (BM + PAD) + r], in ? &A[gr * K + gk] : A, in);
    }
#pragma unroll
    for (int it = 0; it < (B_VECS + NT - 1) / NT; ++it) {
        const int v = tid + it * NT;
        if (B_VECS % NT != 0 && v >= B_VECS)
            break;
        const int r = v / (BN / 4), c = (v % (BN / 4)) * 4;
        const int gk = k0 + r, gc = col0 + c;
        if (vec_b) {                                   /* N % 4 == 0: all four in or all out */
            const bool in = gk < K && gc < N;
            cp_async16(&Bs[r * BN + c], in ? &B[gk * N + gc] : B, in);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool in = gk < K && gc + j < N;
                cp_async4(&Bs[r * BN + c + j], in ? &B[gk * N + gc + j] : B, in);
            }
        }
    }
}

extern "C" __global__ __launch_bounds__(NT, MINB)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    ELEM* const smem = reinterpret_cast<ELEM*>(smem_raw);   /* STAGES x (As, Bs) */

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wrow = (warp / (BN / WN)) * WM;         /* warp tile origin in the block tile */
    const int wcol = (warp % (BN / WN)) * WN;
    const int tcol = lane % (WSUBN / TN);
    const int trow = lane / (WSUBN / TN);
    const int row0 = blockIdx.y * BM;
    const int col0 = blockIdx.x * BN;
    const bool vec_b = (N & 3) == 0;

    ACC acc[WMITER * TM][WNITER * TN];
#pragma unroll
    for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
        for (int j = 0; j < WNITER * TN; ++j)
            acc[i][j] = (ACC)0;

    const int ktiles = (K + BK - 1) / BK;
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        if (st < ktiles)
            load_tile(A, B, smem + st * (AS_WORDS + BS_WORDS), smem + st * (AS_WORDS + BS_WORDS) + AS_WORDS,
                      M, N, K, row0, col0, st * BK, tid, vec_b);
        cp_async_commit();                             /* empty groups keep the count uniform */
    }

    for (int t = 0; t < ktiles; ++t) {
        cp_async_wait<STAGES - 2>();                   /* this thread's copies of tile t landed */
        __syncthreads();                               /* ... everyone's; stage (t-1) % STAGES is free */
        {
            const int tn = t + STAGES - 1;
            const int st = tn % STAGES;
            if (tn < ktiles)
                load_tile(A, B, smem + st * (AS_WORDS + BS_WORDS), smem + st * (AS_WORDS + BS_WORDS) + AS_WORDS,
                          M, N, K, row0, col0, tn * BK, tid, vec_b);
            cp_async_commit();
        }
        const ELEM* As = smem + (t % STAGES) * (AS_WORDS + BS_WORDS);
        const ELEM* Bs = As + AS_WORDS;

#pragma unroll
        for (int k = 0; k < BK; ++k) {
            ELEM ra[WMITER * TM], rb[WNITER * TN];
#pragma unroll
            for (int mi = 0; mi < WMITER; ++mi)
#pragma unroll
                for (int q = 0; q < TM / 4; ++q) {
                    const VEC x = *reinterpret_cast<const VEC*>(
                        &As[k * (BM + PAD) + wrow + mi * WSUBM + trow * TM + 4 * q]);
                    ra[mi * TM + 4 * q + 0] = x.x; ra[mi * TM + 4 * q + 1] = x.y;
                    ra[mi * TM + 4 * q + 2] = x.z; ra[mi * TM + 4 * q + 3] = x.w;
                }
#pragma unroll
            for (int ni = 0; ni < WNITER; ++ni)
#pragma unroll
                for (int q = 0; q < TN / 4; ++q) {
                    const VEC x = *reinterpret_cast<const VEC*>(
                        &Bs[k * BN + wcol + ni * WSUBN + tcol * TN + 4 * q]);
                    rb[ni * TN + 4 * q + 0] = x.x; rb[ni * TN + 4 * q + 1] = x.y;
                    rb[ni * TN + 4 * q + 2] = x.z; rb[ni * TN + 4 * q + 3] = x.w;
                }
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j)
                    acc[i][j] += (ACC)ra[i] * (ACC)rb[j];
        }
    }
    cp_async_wait<0>();

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
