/*
+++
name = "ffma_tuned"
title = "FP32 SIMT tuned for Hopper: 16-byte cp.async of A as it lies, conflict-free LDS.64/128 fragments"
summary = "FP32 SIMT tuned for Hopper: A un-transposed with 16-byte cp.async, a 3-stage pipeline, bm × 128 tiles of 256 threads, (bm/16) × 8 outputs a thread in strided 4 × 4 pieces (conflict-free LDS.64/128), optional deterministic serial split-K."
source = "classic 128×128 8×8-per-thread SGEMM layout; CUTLASS multistage mainloop and serial split-K"
role = "rung"
order = 17

[params]
bm = [128, 64]
kv = [4, 2]
splitk = [1, 2]

[descriptions]
bm = "rows of C per block: 128 or 64 (tm = bm / 16 rows a thread)"
kv = "k-steps per load of A's fragment: 2 (LDS.64) or 4 (LDS.128)"
splitk = "K split across blocks, summed in order through C (serial split-K; 1: none)"

[defaults.sm_90]    # H200: the faster fragment loads at 2048-8192 (benchmarks/NOTES.md, issue 36: the ladder's arch defaults)
kv = 2

[derived]
# split-K slices: SPLITK while the per-tile counters suffice (MAX_TILES = 65536 in this
# file), else 1 (no split)
splits = "splitk if cdiv(M, bm) * cdiv(N, 128) <= 65536 else 1"

[[constraints]]
check = "(bm == 64 or bm == 128) and (kv == 2 or kv == 4) and splitk >= 1"
reason = "bm must be 64 or 128, kv 2 or 4, splitk ≥ 1"

[[constraints]]
check = "not (bm == 128 and splitk > 1)"
reason = "split-K with bm=128 needs more than 128 registers (spills at 2 blocks/SM)"

[launch]
grid = ["cdiv(N, 128)", "cdiv(M, bm) * splits"]
block = [256, 1]
shared = "3 * (bm * 16 + 16 * 128) * 4"      # STAGES = 3, BK = 16, BN = 128
+++
*/
/*
 * 17_ffma_tuned.cu -- FP32 (and int32) SIMT GEMM tuned for Hopper: 16_pipelined.cu's
 * cp.async pipeline with (1) A stored UN-transposed in shared memory, copied with 16-byte
 * cp.async like B (no 4-byte transposing copies), (2) each thread a TMxTN sub-tile made
 * of (TM/4)x(TN/4) 4x4 pieces strided by BM/(TM/4) rows and BN/(TN/4) columns, so that
 * every shared load is an LDS.64/128 that is either a broadcast (A: the 8 lanes of a
 * quarter-warp share a row) or 8 consecutive 16-byte words (B): bank-conflict-free with
 * no padding; A is read as float2 or float4 along k (KV k-steps per load) and B as float4 along n,
 * (3) optional serial split-K (SPLITK > 1): the k-range is cut into SPLITK slices run by
 * different blocks, which add their partial tiles into C one after another, ordered by a
 * per-tile counter in global memory (slice 0 stores, slice z waits for counter == z, adds,
 * then publishes z+1; the last slice resets the counter to 0 for the next launch). It gives
 * small problems (1024^3: 64 tiles of 128x128 for 132 SMs) enough blocks to fill the GPU
 * while keeping the result deterministic.
 *
 * Technique and source: the classic "128x128, 8x8 per thread, strided 4x4 pieces" SGEMM
 * layout (e.g. the MegEngine/"how to optimize SGEMM" write-ups; CUTLASS SIMT thread maps),
 * CUTLASS's multistage cp.async mainloop and its serial split-K ("semaphore") reduction;
 * written anew for this lab.
 *
 * Tails: 16-byte copies where K % 4 == 0 (A) / N % 4 == 0 (B) and the 4 elements are in
 * bounds, else 4-byte copies; src-size 0 zero-fills out-of-bounds elements; stores guarded:
 * any M, N, K. The slice wait relies on blocks of lower slices being dispatched first
 * (slice = slowest grid index), so a waiting block never starves the block it waits for.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC   element and accumulator types                  (default float)
 *   BM, BN, BK  block tile and depth                           (default 128, 128, 16)
 *   TM, TN      per-thread tile, multiples of 4                (default BM/16, 8)
 *   STAGES      tiles in flight, >= 2                          (default 3)
 *   SPLITK      k-slices (the launch must match, see geometry)  (default 1)
 *   MINB        __launch_bounds__ minimum blocks per SM        (default 2)
 *   KV          k-steps per A load: 2 (LDS.64) or 4 (LDS.128)  (default 2)
 * Shared memory is dynamic: STAGES * (BM*BK + BK*BN) * sizeof(ELEM) bytes.
 *
 * Launch geometry: block ((BM/TM)*(BN/TN), 1), grid (ceil(N/BN), ceil(M/BM) * S) where S
 * is SPLITK (1 when the tile count exceeds MAX_TILES). Needs sm_80 or newer.
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
#ifndef TM
#define TM (BM / 16)          /* 16 threads along m */
#endif
#ifndef TN
#define TN 8
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef SPLITK
#define SPLITK 1
#endif
#ifndef MINB
#define MINB 2
#endif
#ifndef KV
#define KV 2              /* k-steps per A load: 2 (LDS.64) or 4 (LDS.128; more registers) */
#endif
#define TX (BN / TN)                     /* threads along n */
#define TY (BM / TM)                     /* threads along m */
#define NT (TX * TY)
#define PM (TM / 4)                      /* 4-row pieces per thread */
#define PN (TN / 4)
#define SM_ (BM / PM)                    /* row stride between a thread's pieces */
#define SN_ (BN / PN)
#define MAX_TILES 65536
#if TM % 4 || TN % 4 || BK % 4 || BM % TM || BN % TN || STAGES < 2 || SPLITK < 1
#error "inconsistent parameters"
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define VEC CAT(ELEM, 4)
#define VECA CAT(ELEM, KV)
#if KV != 2 && KV != 4
#error "KV must be 2 or 4"
#endif
#define AS_WORDS (BM * BK)
#define BS_WORDS (BK * BN)

__device__ unsigned tile_counter[MAX_TILES];     /* split-K order; 0 between launches */

#if KV == 4
__device__ __forceinline__ ELEM kv_elem(VECA v, int kk) { return kk == 2 ? v.z : v.w; }
#else
__device__ __forceinline__ ELEM kv_elem(VECA v, int kk) { return v.y; }
#endif

/* Copies of k-tile starting at k0: A rows row0.. (As[m][BK]) and B rows k0.. (Bs[k][BN]). */
__device__ __forceinline__ void load_tile(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* As, ELEM* Bs, int M, int N, int K, int row0,
                                          int col0, int k0, int kend, int tid, bool vec_a, bool vec_b)
{
#pragma unroll
    for (int it = 0; it < (AS_WORDS / 4 + NT - 1) / NT; ++it) {
        const int v = tid + it * NT;
        if ((AS_WORDS / 4) % NT != 0 && v >= AS_WORDS / 4)
            break;
        const int r = v / (BK / 4), c = (v % (BK / 4)) * 4;
        const int gr = row0 + r, gk = k0 + c;
        if (vec_a) {                                   /* K % 4 == 0 and kend % 4 == 0 */
            const bool in = gr < M && gk < kend;
            cp_async16(&As[r * BK + c], in ? &A[gr * K + gk] : A, in);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool in = gr < M && gk + j < kend;
                cp_async4(&As[r * BK + c + j], in ? &A[gr * K + gk + j] : A, in);
            }
        }
    }
#pragma unroll
    for (int it = 0; it < (BS_WORDS / 4 + NT - 1) / NT; ++it) {
        const int v = tid + it * NT;
        if ((BS_WORDS / 4) % NT != 0 && v >= BS_WORDS / 4)
            break;
        const int r = v / (BN / 4), c = (v % (BN / 4)) * 4;
        const int gk = k0 + r, gc = col0 + c;
        if (vec_b) {
            const bool in = gk < kend && gc < N;
            cp_async16(&Bs[r * BN + c], in ? &B[gk * N + gc] : B, in);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool in = gk < kend && gc + j < N;
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
    ELEM* const smem = reinterpret_cast<ELEM*>(smem_raw);

    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    const int mtiles = (M + BM - 1) / BM;
    int splits_ = 1, z_ = 0;
#if SPLITK > 1
    splits_ = gridDim.y / mtiles;                       /* SPLITK, or 1 (see geometry) */
    z_ = blockIdx.y / mtiles;
#endif
    const int row0 = (blockIdx.y % mtiles) * BM;     /* rows; recomputed for the stores */
    const int col0 = blockIdx.x * BN;

    const int ktiles_all = (K + BK - 1) / BK;
    const int per = (ktiles_all + splits_ - 1) / splits_;
    const int kt0 = z_ * per;
    const int ktiles = max(0, min(ktiles_all, kt0 + per) - kt0);
    const int kbeg = kt0 * BK;
    const int kend = min(K, kbeg + ktiles * BK);
    const bool vec_a = (K & 3) == 0;                    /* kend is K or a multiple of BK */
    const bool vec_b = (N & 3) == 0;

    ACC acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j)
            acc[i][j] = (ACC)0;

#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        if (st < ktiles)
            load_tile(A, B, smem + st * (AS_WORDS + BS_WORDS), smem + st * (AS_WORDS + BS_WORDS) + AS_WORDS,
                      M, N, K, row0, col0, kbeg + st * BK, kend, tid, vec_a, vec_b);
        cp_async_commit();
    }

    for (int t = 0; t < ktiles; ++t) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        {
            const int tn = t + STAGES - 1;
            const int st = tn % STAGES;
            if (tn < ktiles)
                load_tile(A, B, smem + st * (AS_WORDS + BS_WORDS), smem + st * (AS_WORDS + BS_WORDS) + AS_WORDS,
                          M, N, K, row0, col0, kbeg + tn * BK, kend, tid, vec_a, vec_b);
            cp_async_commit();
        }
        const ELEM* As = smem + (t % STAGES) * (AS_WORDS + BS_WORDS);
        const ELEM* Bs = As + AS_WORDS;
#pragma unroll
        for (int kb = 0; kb < BK; kb += KV) {
            VECA ra[TM];                                /* ra[i] = A[row i][kb .. kb+KV-1] */
#pragma unroll
            for (int i = 0; i < TM; ++i)
                ra[i] = *reinterpret_cast<const VECA*>(&As[((i / 4) * SM_ + ty * 4 + i % 4) * BK + kb]);
#pragma unroll
            for (int kk = 0; kk < KV; ++kk) {
                ELEM rb[TN];
#pragma unroll
                for (int p = 0; p < PN; ++p) {
                    const VEC x = *reinterpret_cast<const VEC*>(&Bs[(kb + kk) * BN + p * SN_ + tx * 4]);
                    rb[4 * p + 0] = x.x; rb[4 * p + 1] = x.y; rb[4 * p + 2] = x.z; rb[4 * p + 3] = x.w;
                }
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    const ELEM a = kk == 0 ? ra[i].x : kk == 1 ? ra[i].y : kv_elem(ra[i], kk);
#pragma unroll
                    for (int j = 0; j < TN; ++j)
                        acc[i][j] += (ACC)a * (ACC)rb[j];
                }
            }
        }
    }
    cp_async_wait<0>();

    /* split-K: wait for the slices before this one (thread 0 spins, the block waits). */
    const int tile = (blockIdx.y % mtiles) * gridDim.x + blockIdx.x;
#if SPLITK > 1
    {   /* recomputed from blockIdx here: nothing of this stays live through the main loop */
        const int mt = (M + BM - 1) / BM;
        z_ = blockIdx.y / mt;
        splits_ = gridDim.y / mt;
    }
    const int z = z_, splits = splits_;
#else
    const int z = 0, splits = 1;
#endif
    if (splits > 1 && z > 0) {
        if (tid == 0) {
            while (*reinterpret_cast<volatile unsigned*>(&tile_counter[tile]) != (unsigned)z) {
                __nanosleep(64);
            }
            __threadfence();
        }
        __syncthreads();
    }
    const bool add = splits > 1 && z > 0;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = row0 + (i / 4) * SM_ + ty * 4 + i % 4;
        if (row >= M)
            continue;
#pragma unroll
        for (int p = 0; p < PN; ++p) {
            const int col = col0 + p * SN_ + tx * 4;
            ACC* a = &acc[i][4 * p];
            if (vec_b && col + 3 < N) {
                VEC x;
                if (add) {
                    const VEC o = __ldcg(reinterpret_cast<const VEC*>(&C[row * N + col]));
                    x.x = (ELEM)((ACC)o.x + a[0]); x.y = (ELEM)((ACC)o.y + a[1]);
                    x.z = (ELEM)((ACC)o.z + a[2]); x.w = (ELEM)((ACC)o.w + a[3]);
                } else {
                    x.x = (ELEM)a[0]; x.y = (ELEM)a[1]; x.z = (ELEM)a[2]; x.w = (ELEM)a[3];
                }
                __stcg(reinterpret_cast<VEC*>(&C[row * N + col]), x);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) {
                        const ACC o = add ? (ACC)__ldcg(&C[row * N + col + j]) : (ACC)0;
                        __stcg(&C[row * N + col + j], (ELEM)(o + a[j]));
                    }
            }
        }
    }
    if (splits > 1) {
        __threadfence();                                /* this block's C is visible ... */
        __syncthreads();
        if (tid == 0)                                   /* ... before the next slice may go */
            atomicExch(&tile_counter[tile], z + 1 == splits ? 0u : (unsigned)(z + 1));
    }
}
