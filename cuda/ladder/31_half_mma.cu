/*
+++
name = "half_mma"
title = "FP16/BF16 tensor cores by mma.sync.m16n8k16 and ldmatrix over swizzled tiles, cp.async ring"
summary = "The tensor-core ladder's second step: the fragments made explicit. 128 × 128 block tiles, 8 warps of 64 × 32, k-tiles of 32 arriving through a STAGES-deep cp.async ring; each warp loads its A and B fragments with ldmatrix (.trans for B as K×N) from shared tiles whose 16-byte chunks are XOR-swizzled so that the eight rows of every 8 × 8 matrix fall in distinct banks, and multiplies with mma.sync.m16n8k16 (FP32 accumulators, 64 a thread). B as N×K is copied like A and read without .trans."
source = "PTX ISA: mma.m16n8k16 and ldmatrix fragment layouts, cp.async; CUTLASS sm80 multistage GEMM (swizzled shared tiles, cp.async ring); the second level of ThunderKittens' H100 GEMM walk-through; written anew for this lab"
role = "rung"
order = 31
dtypes = ["float16", "bfloat16"]
layouts = ["kn", "nk"]
precision = "half"

[params]
stages = [3, 4, 2]

[descriptions]
stages = "k-tiles (32 deep, 16 KB of A and B) in flight in the cp.async ring"

[[constraints]]
check = "stages >= 2 and stages <= 4"
reason = "stages must be 2, 3 or 4 (the ring of 16 KB k-tiles within 64 KB)"

[launch]
grid = ["cdiv(N, 128)", "cdiv(M, 128)"]
block = [256, 1]
shared = "stages * 16384"
+++
*/
/*
 * 31_half_mma.cu -- C = A·B with A (M×K) and B (K×N, or N×K with B_NK) in FP16 or BF16,
 * products summed in FP32 by mma.sync.m16n8k16 (sm_80+), C written as FP32 or the input
 * type. What it adds to 30_half_wmma: the fragment layouts are explicit, so the shared
 * tiles can be laid out for them (ldmatrix, swizzle) and kept loading while the tensor
 * cores work (the cp.async ring).
 *
 * Technique and source: the PTX ISA's mma.m16n8k16 and ldmatrix fragment layouts and
 * cp.async; CUTLASS's sm80 multistage GEMM (XOR-swizzled shared tiles, a cp.async ring);
 * the second level of ThunderKittens' GEMM walk-through. Written anew for this lab. What
 * it leaves for the next steps: a warp still issues its own loads and its own mma.sync
 * (Hopper's wgmma lets a warpgroup multiply straight from shared memory, and TMA moves the
 * tiles without threads), and every warp both loads and computes (no specialisation).
 *
 * Block: 128 × 128 of C, 8 warps in 2 (M) × 4 (N), each a 64 × 32 warp tile = 4 × 4
 * fragments of m16n8 (4 FP32 accumulators a thread each). A k-tile is 32 deep: per 16 of k
 * a warp issues 4 ldmatrix.x4 for A (one m16k16 fragment each), 2 for B (two n8k16
 * fragments each) and 16 mma.
 *
 * Shared tiles (one stage: 8 KB of A + 8 KB of B, in 16-byte chunks of 8 elements):
 *   A, and B as N×K: 128 rows × 4 chunks; chunk c of row r at c ^ ((r >> 1) & 3). The 8 rows
 *     of an 8 × 8 matrix (64-byte pitch) then sit at 8 distinct 16-byte offsets of a
 *     128-byte line: ldmatrix reads them in one pass, without bank conflicts.
 *   B as K×N: 32 rows (k) × 16 chunks (n); chunk c of row k at c ^ (k & 7) (256-byte pitch).
 * Copies: 16-byte cp.async with zero fill past the matrix where a row's chunks are 16-byte
 * aligned (K % 8 == 0 for A and B as N×K, N % 8 == 0 for B as K×N); else each chunk is read
 * element by element (bounds checked, zeros outside) and stored synchronously, which the
 * barrier before each k-tile's use orders like the copies.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM    __half or __nv_bfloat16 (the run's input type)       (default __half)
 *   OUT     float or ELEM (the run's output type)                 (default float)
 *   ACC     float (the accumulators)                              (default float)
 *   STAGES  k-tiles in the cp.async ring, 2-4                     (default 3)
 *   B_NK    1: B is stored N×K ("layout nk")                      (default 0)
 * Launch: grid (ceil(N/128), ceil(M/128)), block 256, dynamic shared memory STAGES · 16 KB.
 * Models: FLOPs = 2·M·N·K; bytes = (M·K + K·N)·2 + M·N·sizeof(OUT).
 */
#include "half.cuh"
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM __half
#endif
#ifndef OUT
#define OUT float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef STAGES
#define STAGES 3
#endif
#ifndef B_NK
#define B_NK 0
#endif

#define BM 128
#define BN 128
#define BK 32
#define THREADS 256
#define WTM 64                          // rows of a warp tile: 4 m16 fragments
#define WTN 32                          // columns of a warp tile: 4 n8 fragments
#define STAGE_ELEMS (BM * BK)           // A's (and B's) elements in one stage: 4096

#if STAGES < 2 || STAGES > 4
#error "STAGES must be 2, 3 or 4"
#endif
static_assert(sizeof(ACC) == 4, "ACC is float: the tensor cores accumulate in FP32 here");
static_assert(sizeof(ELEM) == 2, "ELEM is a 16-bit type");

// Element offset of 16-byte chunk c of row r in a rows × 4-chunk tile (A; B as N×K).
__device__ __forceinline__ int k_major(int r, int c) { return r * BK + ((c ^ ((r >> 1) & 3)) << 3); }
// Element offset of chunk c of row k in a 32 × 16-chunk tile (B as K×N).
__device__ __forceinline__ int n_major(int k, int c) { return k * BN + ((c ^ (k & 7)) << 3); }

__device__ __forceinline__ unsigned smem_addr(const void* p)
{
    return (unsigned)__cvta_generic_to_shared(p);
}

// One 16-byte chunk of a row-major matrix (rows × cols, leading dimension cols) from
// (row, col): a cp.async where the row is 16-byte aligned (zeros past the matrix), else
// element by element.
__device__ __forceinline__ void copy_chunk(ELEM* dst, const ELEM* __restrict__ G, int rows, int cols,
                                          int row, int col, bool aligned)
{
    if (aligned) {
        const bool in = row < rows && col < cols;       // cols % 8 == 0: the whole chunk
        cp_async16(dst, in ? G + (size_t)row * cols + col : G, in);
    } else {
        union { uint4 v; ELEM e[8]; } u;
#pragma unroll
        for (int i = 0; i < 8; ++i)
            u.e[i] = (row < rows && col + i < cols) ? G[(size_t)row * cols + col + i] : ELEM(0.0f);
        *reinterpret_cast<uint4*>(dst) = u.v;
    }
}

extern "C" __global__ __launch_bounds__(THREADS) void matmul(
    const ELEM* __restrict__ A, const ELEM* __restrict__ B, OUT* __restrict__ C, int M, int N, int K)
{
    extern __shared__ __align__(128) unsigned char smem_raw[];
    ELEM* const As = reinterpret_cast<ELEM*>(smem_raw);
    ELEM* const Bs = As + STAGES * STAGE_ELEMS;

    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / 4, wn = warp % 4;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const bool a_aligned = K % 8 == 0, b_aligned = (B_NK ? K : N) % 8 == 0;
    const int ktiles = (K + BK - 1) / BK;

    // k-tile kt into stage s: 512 chunks of A and 512 of B, two of each a thread
    auto load = [&](int s, int kt) {
        ELEM* const as = As + s * STAGE_ELEMS;
        ELEM* const bs = Bs + s * STAGE_ELEMS;
        const int k0 = kt * BK;
#pragma unroll
        for (int q = tid; q < BM * BK / 8; q += THREADS) {
            const int r = q >> 2, c = q & 3;
            copy_chunk(as + k_major(r, c), A, M, K, row0 + r, k0 + 8 * c, a_aligned);
#if B_NK
            copy_chunk(bs + k_major(r, c), B, N, K, col0 + r, k0 + 8 * c, b_aligned);
#else
            const int k = q >> 4, cn = q & 15;
            copy_chunk(bs + n_major(k, cn), B, K, N, k0 + k, col0 + 8 * cn, b_aligned);
#endif
        }
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles)
            load(s, s);
        cp_async_commit();                      // an empty group past K keeps the count
    }

    const int mi = lane >> 3, rr = lane & 7;    // this lane's row address of matrix mi of an x4
    for (int kt = 0; kt < ktiles; ++kt) {
        cp_async_wait<STAGES - 2>();            // k-tile kt has landed (this thread's copies)
        __syncthreads();                        // ... everyone's; and stage kt - 1 is free
        if (kt + STAGES - 1 < ktiles)
            load((kt + STAGES - 1) % STAGES, kt + STAGES - 1);
        cp_async_commit();

        const ELEM* const as = As + (kt % STAGES) * STAGE_ELEMS;
        const ELEM* const bs = Bs + (kt % STAGES) * STAGE_ELEMS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            unsigned a[4][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i)         // matrices: rows +0/+8 (mi & 1), k +0/+8 (mi >> 1)
                ldmatrix_x4(a[i], smem_addr(as + k_major(wm * WTM + i * 16 + rr + (mi & 1) * 8,
                                                         kk / 8 + (mi >> 1))));
#pragma unroll
            for (int jp = 0; jp < 2; ++jp) {    // two n8 fragments an x4: k +0/+8, n +0/+8
                unsigned r[4];
#if B_NK
                ldmatrix_x4(r, smem_addr(bs + k_major(wn * WTN + jp * 16 + rr + (mi >> 1) * 8,
                                                      kk / 8 + (mi & 1))));
#else
                ldmatrix_x4_trans(r, smem_addr(bs + n_major(kk + rr + (mi & 1) * 8,
                                                            (wn * WTN + jp * 16) / 8 + (mi >> 1))));
#endif
                b[2 * jp][0] = r[0]; b[2 * jp][1] = r[1];
                b[2 * jp + 1][0] = r[2]; b[2 * jp + 1][1] = r[3];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    mma16816(acc[i][j], a[i], b[j], ELEM());
        }
    }
    cp_async_wait<0>();                         // no copy outlives the block

    // accumulator e of fragment (i, j): row group (+8 for e >= 2), columns 2·(lane % 4) + e % 2
    const int group = lane >> 2, pair = (lane & 3) * 2;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = row0 + wm * WTM + i * 16 + group + (e >> 1) * 8;
                const int c = col0 + wn * WTN + j * 8 + pair + (e & 1);
                if (r < M && c < N)
                    store_out(C + (size_t)r * N + c, acc[i][j][e]);
            }
}
