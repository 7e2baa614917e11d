/*
+++
name = "tf32_mma"
title = "TF32 tensor cores by mma.sync.m16n8k8: 128 × 128 tiles, cp.async pipeline, optional split-K"
summary = "TF32 tensor cores via mma.sync.m16n8k8 (FP32 accumulate), 128 × 128 block, 64 × 32 warp tiles, a cp.async pipeline, optional parallel split-K (partials in a workspace, summed in slice order by the tile's last CTA)."
source = "PTX ISA mma.m16n8k8 .tf32 fragment layouts; CUTLASS sm80 TF32 GEMM; parallel split-K with an in-kernel fix-up (CUTLASS split-K parallel / stream-K fix-up)"
role = "rung"
order = 20
dtypes = ["float32"]
precision = "tf32"

[params]
bk = [32, 16]
stages = [3, 4]
splitk = [1, 2, 3, 4]     # > 1: grids of few tiles (1024³: 64 tiles on 132 SMs; 1536³: 144, 1.09 waves)

[descriptions]
bk = "depth (k) of a tile; a multiple of 8"
stages = "tiles in flight in the cp.async ring"
splitk = "K split across CTAs for grids of few tiles, partials summed in a fixed order (1: none)"

[derived]
tiles = "cdiv(M, 128) * cdiv(N, 128)"
# parallel split-K: per-tile arrival counters (256-byte aligned), then splitk partial
# 128×128 tiles per tile (the layout in lab_ptx.cuh, above splitk_arrive)
workspace = "0 if splitk == 1 else roundup(4 * tiles, 256) + splitk * tiles * 128 * 128 * 4"

[[constraints]]
check = "bk % 8 == 0 and stages >= 2 and splitk >= 1"
reason = "bk must be a multiple of 8, stages ≥ 2 and splitk ≥ 1"

[[constraints]]
check = "workspace <= 2**28"
reason = "split-K {splitk} would need {workspace // 2**20} MiB of partial tiles (at most 256): split-K is for grids too small to fill the GPU"

[launch]
grid = ["cdiv(N, 128)", "cdiv(M, 128) * splitk"]
block = [256, 1]
shared = "stages * (128 * (bk + 4) + bk * (128 + 8)) * 4"
workspace = "workspace"
+++
*/
/*
 * 20_tf32_mma.cu -- TF32 tensor cores through warp-level mma.sync.m16n8k8 (sm_80+):
 * A and B are rounded to TF32 (cvt.rna: 10 explicit mantissa bits) and multiplied on the
 * tensor cores with FP32 accumulation; storage stays float32. A block of 8 warps computes
 * a BMxBN = 128x128 tile of C, each warp a 64x32 warp tile = 4x4 mma tiles of 16x8
 * (64 accumulators per thread). Tiles of A and B arrive through a STAGES-deep cp.async
 * pipeline (as 16_pipelined.cu) in padded row-major layouts chosen so that the fragment
 * loads are bank-conflict-free: As[m][BK+4] (lane (g,t) reads word g*(BK+4)+t: 32
 * distinct banks for BK = 16 or 32) and Bs[k][BN+8] (word 8t+g). (A variant that
 * permuted k to load A pairs as 64-bit words with As[m][BK+8] was slower: its bigger rows
 * cost more than the wider loads saved; benchmarks/NOTES.md.)
 *
 * Technique and source: PTX ISA "mma.sync.aligned.m16n8k8 .tf32" fragment layouts
 * (NVIDIA PTX ISA, section "Matrix fragments for mma.m16n8k8"), the CUTLASS sm80 TF32
 * multistage GEMM structure; written anew for this lab. Not Hopper's fastest path:
 * cuBLAS uses wgmma + TMA on sm_90, which this warp-level kernel cannot match.
 *
 * Split-K (SPLITK > 1): at 1024^3 the 128x128 tiles are 64 blocks on a 132-SM H100, so
 * each tile's K range is cut into S slices run by separate blocks (grid.y = tiles * S,
 * slice z = blockIdx.y / ceil(M/128)), all at once. Parallel, as ffma_regdb.cu: each
 * slice writes its partial tile to the workspace, and the tile's last CTA to arrive sums
 * the S partials in slice order and stores C (splitk_fixup in lab_ptx.cuh: deterministic,
 * no slice waits for another). The serial split-K it replaces (slice z adds into C after
 * z - 1, as 17_ffma_tuned.cu still does) gained nothing at 1024^3.
 *
 * Tails: A goes with 16-byte cp.async where K % 4 == 0 and with 4-byte copies otherwise;
 * B with 16-byte copies where N % 4 == 0, else 4-byte; src-size 0 zero-fills out-of-
 * bounds elements; stores guarded: any M, N, K. float32 only (precision "tf32").
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  must be float                                    (default float)
 *   BK         depth of a tile; multiple of 8                  (default 32)
 *   STAGES     tiles in flight, >= 2                           (default 3)
 *   SPLITK     k-slices (grid.y = ceil(M/128) * SPLITK)         (default 1)
 * Workspace (SPLITK > 1, the last kernel argument): the split-K layout of lab_ptx.cuh.
 * Fixed: BM = BN = 128, warp tile 64x32, 256 threads. Shared memory is dynamic:
 * STAGES * (128*(BK+4) + BK*136) * 4 bytes (engine.ladder passes it).
 *
 * Launch geometry: block (256, 1), grid (ceil(N/128), ceil(M/128) * SPLITK).
 * Row-major A (MxK), B (KxN), C (MxN); 32-bit indices. Needs sm_80 or newer.
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BK
#define BK 32
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef SPLITK
#define SPLITK 1
#endif
#define BM 128
#define BN 128
#define WM 64
#define WN 32
#define NT 256
#define MT (WM / 16)              /* mma tiles per warp along M */
#define NT8 (WN / 8)              /* mma tiles per warp along N */
#define LDA (BK + 4)
#define LDB (BN + 8)
#define AS_WORDS (BM * LDA)
#define BS_WORDS (BK * LDB)
#if BK % 8 || STAGES < 2 || SPLITK < 1
#error "BK must be a multiple of 8, STAGES >= 2 and SPLITK >= 1"
#endif

__device__ __forceinline__ unsigned to_tf32(float x) { return __float_as_uint(tf32_rna(x)); }

__device__ __forceinline__ void load_tile(const float* __restrict__ A, const float* __restrict__ B,
                                          float* As, float* Bs, int M, int N, int K,
                                          int row0, int col0, int k0, int tid, bool vec_a, bool vec_b)
{
    /* A tile: BM rows x BK columns, as BK/4 vectors per row */
#pragma unroll
    for (int it = 0; it < (BM * BK / 4) / NT; ++it) {
        const int v = tid + it * NT;
        const int r = v / (BK / 4), c = (v % (BK / 4)) * 4;
        const int gr = row0 + r, gk = k0 + c;
        if (vec_a) {
            const bool in = gr < M && gk < K;
            cp_async16(&As[r * LDA + c], in ? &A[gr * K + gk] : A, in);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool in = gr < M && gk + j < K;
                cp_async4(&As[r * LDA + c + j], in ? &A[gr * K + gk + j] : A, in);
            }
        }
    }
    /* B tile: BK rows x BN columns */
#pragma unroll
    for (int it = 0; it < (BK * BN / 4) / NT; ++it) {
        const int v = tid + it * NT;
        const int r = v / (BN / 4), c = (v % (BN / 4)) * 4;
        const int gk = k0 + r, gc = col0 + c;
        if (vec_b) {
            const bool in = gk < K && gc < N;
            cp_async16(&Bs[r * LDB + c], in ? &B[gk * N + gc] : B, in);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const bool in = gk < K && gc + j < N;
                cp_async4(&Bs[r * LDB + c + j], in ? &B[gk * N + gc + j] : B, in);
            }
        }
    }
}

extern "C" __global__ __launch_bounds__(NT)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    float* const smem = reinterpret_cast<float*>(smem_raw);   /* STAGES x (As, Bs) */

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int g = lane >> 2, t4 = lane & 3;      /* mma "groupID" and "threadID_in_group" */
    const int wrow = (warp / (BN / WN)) * WM;
    const int wcol = (warp % (BN / WN)) * WN;
    const int mtiles = (M + BM - 1) / BM;
    const int splits = SPLITK, z = SPLITK > 1 ? blockIdx.y / mtiles : 0;
    const int row0 = (blockIdx.y % mtiles) * BM;
    const int col0 = blockIdx.x * BN;
    const bool vec_a = (K & 3) == 0;
    const bool vec_b = (N & 3) == 0;

    float acc[MT][NT8][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

    /* this slice's k-tiles: [kt0, kt0 + ktiles) of the whole K range */
    const int ktiles_all = (K + BK - 1) / BK;
    const int per = (ktiles_all + splits - 1) / splits;
    const int kt0 = z * per;
    const int ktiles = max(0, min(ktiles_all, kt0 + per) - kt0);
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        if (st < ktiles)
            load_tile(A, B, smem + st * (AS_WORDS + BS_WORDS), smem + st * (AS_WORDS + BS_WORDS) + AS_WORDS,
                      M, N, K, row0, col0, (kt0 + st) * BK, tid, vec_a, vec_b);
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
                          M, N, K, row0, col0, (kt0 + tn) * BK, tid, vec_a, vec_b);
            cp_async_commit();
        }
        const float* As = smem + (t % STAGES) * (AS_WORDS + BS_WORDS);
        const float* Bs = As + AS_WORDS;

#pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            unsigned af[MT][4], bf[NT8][2];
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const float* a = &As[(wrow + i * 16 + g) * LDA + kk + t4];
                af[i][0] = to_tf32(a[0]);
                af[i][1] = to_tf32(a[8 * LDA]);
                af[i][2] = to_tf32(a[4]);
                af[i][3] = to_tf32(a[8 * LDA + 4]);
            }
#pragma unroll
            for (int j = 0; j < NT8; ++j) {
                const float* b = &Bs[(kk + t4) * LDB + wcol + j * 8 + g];
                bf[j][0] = to_tf32(b[0]);
                bf[j][1] = to_tf32(b[4 * LDB]);
            }
#pragma unroll
            for (int i = 0; i < MT; ++i)
#pragma unroll
                for (int j = 0; j < NT8; ++j)
                    asm volatile(
                        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                        : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                        : "r"(af[i][0]), "r"(af[i][1]), "r"(af[i][2]), "r"(af[i][3]),
                          "r"(bf[j][0]), "r"(bf[j][1]));
        }
    }
    cp_async_wait<0>();

#if SPLITK > 1
    /* parallel split-K (see the top): all but the tile's last CTA to arrive are done */
    if (!splitk_fixup<MT * NT8 * 4, NT>(reinterpret_cast<float(&)[MT * NT8 * 4]>(acc), workspace,
                                        mtiles * gridDim.x, (blockIdx.y % mtiles) * gridDim.x + blockIdx.x,
                                        SPLITK, z, tid))
        return;
#endif
    const bool vec_c = (N & 1) == 0;
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {                   /* rows g and g + 8 of the mma tile */
            const int row = row0 + wrow + i * 16 + g + 8 * h;
            if (row >= M)
                continue;
#pragma unroll
            for (int j = 0; j < NT8; ++j) {
                const int col = col0 + wcol + j * 8 + 2 * t4;
                const float c0 = acc[i][j][2 * h], c1 = acc[i][j][2 * h + 1];
                if (vec_c && col + 1 < N) {
                    float2* p = reinterpret_cast<float2*>(&C[row * N + col]);
                    __stcg(p, make_float2(c0, c1));
                } else {
                    if (col < N) __stcg(&C[row * N + col], c0);
                    if (col + 1 < N) __stcg(&C[row * N + col + 1], c1);
                }
            }
        }
}
