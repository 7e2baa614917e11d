/*
+++
name = "half_wmma"
title = "FP16/BF16 tensor cores by WMMA 16×16×16 fragments over shared tiles, FP32 accumulation"
summary = "The tensor-core ladder's first step: nvcuda::wmma 16×16×16 fragments (FP16 or BF16 inputs by the run's type, FP32 accumulators) over zero-padded shared-memory tiles of A and B, loaded with bounds checks (16-byte vectors where the rows allow), one tile in flight; C written through a per-warp staging tile in FP32 or the input type."
source = "CUDA C++ Programming Guide, Warp Matrix Functions (nvcuda::wmma); the first level of ThunderKittens' H100 BF16 GEMM walk-through; written anew for this lab"
role = "rung"
order = 30
dtypes = ["float16", "bfloat16"]
layouts = ["kn", "nk"]
precision = "half"

[params]
tile = [128, 64]
bk = [32, 16]

[descriptions]
tile = "rows and columns of C per block (128: 8 warps of 64 × 32; 64: 4 warps of 32 × 32)"
bk = "depth (k) of the shared tiles; a multiple of 16 (one WMMA step)"

[derived]
warps = "8 if tile == 128 else 4"

[[constraints]]
check = "tile == 64 or tile == 128"
reason = "tile must be 64 or 128 (the warp layouts written for: 2 × 2 warps of 32 × 32, 2 × 4 of 64 × 32)"

[[constraints]]
check = "bk % 16 == 0 and bk <= 64"
reason = "bk must be a multiple of 16 (a WMMA fragment is 16 deep) and at most 64 (the static shared tiles)"

[launch]
grid = ["cdiv(N, tile)", "cdiv(M, tile)"]
block = ["32 * warps", 1]
+++
*/
/*
 * 30_half_wmma.cu -- the first tensor-core step for 16-bit inputs: C = A·B with A (M×K)
 * and B (K×N) in FP16 or BF16 (ELEM), products summed in FP32 by the tensor cores, C
 * written as FP32 or the input type (OUT). A block computes a TILE×TILE tile of C with
 * 2 × WARPS/2 warps; each warp owns a (TILE/2) × (2·TILE/WARPS) warp tile made of
 * FM × FN = (TILE/32) × 2 accumulator fragments of 16×16 floats.
 *
 * Technique and source: the CUDA C++ Programming Guide's Warp Matrix Functions
 * (nvcuda::wmma::load_matrix_sync / mma_sync / store_matrix_sync on 16×16×16 fragments;
 * BF16 fragments from sm_80); the level ThunderKittens' BF16 GEMM walk-through starts
 * from. Written anew for this lab. What it leaves for the next steps: WMMA hides the
 * fragment layout, so the shared tiles are loaded by load_matrix_sync with whatever bank
 * conflicts its layout has (rows padded by 8 elements to spread them), and one tile is
 * in flight (load, sync, multiply, sync): no cp.async pipeline, no ldmatrix, no swizzle.
 *
 * Any M, N, K: tiles of A and B are copied to shared memory with bounds checks, elements
 * outside the matrices written as zero, so a partial last tile (K not a multiple of 16 or
 * of BK, M or N not a multiple of TILE) multiplies zeros. A thread copies 8 elements
 * (16 bytes) at a time as one vector where the 8 lie inside the matrix and the row starts
 * 16-byte aligned (K % 8 == 0 for A, N % 8 == 0 for B; cudaMalloc bases are 256-byte
 * aligned), else element by element. C: each warp stores a fragment to its own 16×16
 * FP32 staging tile in shared memory, and its lanes write the in-bounds elements,
 * converted to OUT (round to nearest even).
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM  __half or __nv_bfloat16 (the run's input type)     (default __half)
 *   OUT   float or ELEM (the run's output type)               (default float)
 *   ACC   float (the accumulator fragments)                   (default float)
 *   TILE  64 or 128 (rows = columns of C per block)           (default 128)
 *   BK    depth of the shared tiles, a multiple of 16         (default 32)
 *   B_NK  1: B is stored N×K (row-major; "layout nk"): its tiles are copied as A's, TILE
 *         rows of BK, and read as column-major matrix_b fragments   (default 0: K×N)
 * Launch: grid (ceil(N/TILE), ceil(M/TILE)), block 32·WARPS threads (WARPS = 8 for
 * TILE 128, 4 for 64). Shared memory is static: TILE·(BK+8) + BK·(TILE+8) elements for
 * the tiles (2·TILE·(BK+8) with B_NK) plus WARPS·256 floats of staging (27 KiB at TILE
 * 128, BK 32).
 * Models: FLOPs = 2·M·N·K; bytes = (M·K + K·N)·2 + M·N·sizeof(OUT) (A and B read once,
 * C written once; the lab's byte model for 16-bit inputs).
 */
#include <mma.h>
#include "half.cuh"

#ifndef ELEM
#define ELEM __half
#endif
#ifndef OUT
#define OUT float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef TILE
#define TILE 128
#endif
#ifndef BK
#define BK 32
#endif
#ifndef B_NK
#define B_NK 0
#endif

#define WARPS (TILE == 128 ? 8 : 4)
#define THREADS (32 * WARPS)
#define WARPS_N (WARPS / 2)
#define WTM (TILE / 2)              // rows of a warp tile
#define WTN (TILE / WARPS_N)        // columns of a warp tile (32)
#define FM (WTM / 16)
#define FN (WTN / 16)
// Rows padded by 8 elements (16 bytes): load_matrix_sync wants ldm a multiple of 8 and
// fragment starts 32-byte aligned, which (BK + 8) · 2 and (TILE + 8) · 2 bytes keep.
#define LDA (BK + 8)
#define LDB (TILE + 8)

#if (TILE != 64 && TILE != 128) || BK % 16 != 0
#error "TILE must be 64 or 128 and BK a multiple of 16"
#endif
static_assert(sizeof(ACC) == 4, "ACC is float: the tensor cores accumulate in FP32 here");

using namespace nvcuda;

__device__ __forceinline__ ELEM zero_elem() { return ELEM(0.0f); }

// One ROWS×COLS tile of a row-major matrix (rows × cols, leading dimension ld) from
// (r0, c0) into shared memory S (leading dimension lds), zeros outside the matrix.
template <int ROWS, int COLS>
__device__ __forceinline__ void load_tile(const ELEM* __restrict__ G, ELEM* S, int lds,
                                          int rows, int cols, int ld, int r0, int c0,
                                          bool rows_aligned)
{
    constexpr int CHUNKS = ROWS * COLS / 8;          // 8 elements = 16 bytes each
    for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
        const int r = c / (COLS / 8), col = (c % (COLS / 8)) * 8;
        const int gr = r0 + r, gc = c0 + col;
        ELEM* dst = S + r * lds + col;
        if (rows_aligned && gr < rows && gc + 8 <= cols) {
            *reinterpret_cast<uint4*>(dst) =
                __ldg(reinterpret_cast<const uint4*>(G + (size_t)gr * ld + gc));
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e)
                dst[e] = (gr < rows && gc + e < cols) ? G[(size_t)gr * ld + gc + e] : zero_elem();
        }
    }
}

extern "C" __global__ __launch_bounds__(THREADS) void matmul(
    const ELEM* __restrict__ A, const ELEM* __restrict__ B, OUT* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(128) ELEM As[TILE * LDA];
#if B_NK
    __shared__ __align__(128) ELEM Bs[TILE * LDA];   // B's tile as N×K rows, like A's
#else
    __shared__ __align__(128) ELEM Bs[BK * LDB];
#endif
    __shared__ __align__(128) ACC stage[WARPS][16 * 16];

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    const bool a_aligned = K % 8 == 0, b_aligned = (B_NK ? K : N) % 8 == 0;

    wmma::fragment<wmma::accumulator, 16, 16, 16, ACC> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
            wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tile<TILE, BK>(A, As, LDA, M, K, K, row0, k0, a_aligned);
#if B_NK
        load_tile<TILE, BK>(B, Bs, LDA, N, K, K, col0, k0, b_aligned);
#else
        load_tile<BK, TILE>(B, Bs, LDB, K, N, N, k0, col0, b_aligned);
#endif
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            // B's fragments held for the k-step, A's loaded one at a time (fewer registers)
#if B_NK      // element (k, n) at Bs[n * LDA + k]: a column-major 16×16 fragment
            wmma::fragment<wmma::matrix_b, 16, 16, 16, ELEM, wmma::col_major> fb[FN];
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(fb[j], Bs + (wn * WTN + j * 16) * LDA + kk, LDA);
#else
            wmma::fragment<wmma::matrix_b, 16, 16, 16, ELEM, wmma::row_major> fb[FN];
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(fb[j], Bs + kk * LDB + wn * WTN + j * 16, LDB);
#endif
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, ELEM, wmma::row_major> fa;
                wmma::load_matrix_sync(fa, As + (wm * WTM + i * 16) * LDA + kk, LDA);
#pragma unroll
                for (int j = 0; j < FN; ++j)
                    wmma::mma_sync(acc[i][j], fa, fb[j], acc[i][j]);
            }
        }
        __syncthreads();
    }

    // Each fragment through the warp's staging tile: the accumulator layout is opaque,
    // and C's edge tiles and 16-bit outputs need element-wise, guarded stores.
    ACC* st = stage[warp];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            wmma::store_matrix_sync(st, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            const int r0 = row0 + wm * WTM + i * 16, c0 = col0 + wn * WTN + j * 16;
#pragma unroll 2      // fully unrolled, the 8 fragments' stores hold ~150 registers
            for (int e = lane; e < 256; e += 32) {
                const int r = r0 + e / 16, c = c0 + e % 16;
                if (r < M && c < N)
                    store_out(C + (size_t)r * N + c, st[e]);
            }
            __syncwarp();
        }
}
