/*
+++
name = "fp8_wgmma"
title = "FP8 (e4m3/e5m2) by Hopper wgmma fed by TMA, sums moved to FP32 every k-tile, scales at the end"
summary = "The tensor-core ladder's FP8 step: step 32's producer thread, TMA ring and consumer warpgroups with 8-bit operands and 128-deep k-tiles (one 128-byte swizzled row). Hopper's FP8 tensor cores sum in about 13 bits, so each consumer runs a k-tile as wgmma.m64n128k32 into 64 partial sums per N half and adds them to its FP32 sums (setmaxnreg gives the consumers the registers); C = scale_a·scale_b·A·B written as BF16 or FP32. FP8 wgmma reads both operands K-major only: B as N×K is loaded as it lies, B as K×N is transposed by a pre-pass into the scratch first."
source = "PTX ISA wgmma.mma_async (.e4m3/.e5m2, K-major descriptors), cp.async.bulk.tensor and mbarrier expect_tx; CUDA driver cuTensorMapEncodeTiled; DeepGEMM's and CUTLASS's sm90 FP8 GEMMs (scales applied to the FP32 accumulators); cuda/ladder/32_half_wgmma.cu"
role = "rung"
order = 33
dtypes = ["float8_e4m3", "float8_e5m2"]
layouts = ["kn", "nk"]
precision = "fp8"
arch_suffix = "a"

[params]
stages = [4, 3]
persist = [1, 0]
bm = [128, 64]
bn = [256, 128]

[descriptions]
stages = "k-tiles (128 deep, (bm + bn) · 128 bytes of A and B) in flight in the TMA ring: 3 or 4"
persist = "1: a persistent grid of one CTA per SM looping over the tiles; 0: one tile per CTA"
bm = "rows of C a CTA computes, 64 per consumer warpgroup: 128 (two consumers) or 64 (one)"
bn = "columns of C a CTA computes: 256 (two wgmma.m64n128k32 halves) or 128 (one; more tiles where C is small)"

[derived]
tiles = "cdiv(M, bm) * cdiv(N, bn)"       # bm (M) × bn (N) tiles of C
kp = "roundup(K, 16)"                     # a row of K bytes padded to 16 bytes (TMA)
# Ap (M × Kp) when K % 16; Bt (N × Kp): B as K×N transposed (always), B as N×K padded
# (when K % 16)
ap_bytes = "M * kp if K % 16 else 0"
bp_bytes = "(N * kp if K % 16 else 0) if NK else N * kp"

[[constraints]]
check = "(stages == 3 or stages == 4) and (persist == 0 or persist == 1)"
reason = "stages must be 3 or 4 (5 stages of 48 KB exceed 227 KB of shared memory), persist 0 or 1"

[[constraints]]
check = "(bm == 64 or bm == 128) and (bn == 128 or bn == 256)"
reason = "a consumer warpgroup computes 64 rows (bm: one or two of them) in N halves of 128 columns (bn: one or two)"

[launch]
grid = ["min(tiles, SMS) if persist else tiles", 1]
block = ["128 + 2 * bm", 1]               # a producer warpgroup + bm / 64 consumer warpgroups
shared = "stages * (bm + bn) * 128 + 1024 + 256"

[prepass]            # no blocks (no launch) for B as N×K with K % 16 == 0
entry = "prepass"
grid = ["cdiv(kp, 32) if ap_bytes + bp_bytes else 0", "(cdiv(M, 32) if K % 16 else 0) + (cdiv(N, 32) if bp_bytes else 0)"]
block = [32, 8]
# the padded copies (at least 256 bytes: S is a device pointer even where nothing is padded);
# the tensor maps are the kernel's first two arguments
scratch = "max(ap_bytes + bp_bytes, 256)"
maps_in = "params"

# A (or Ap) as M rows of K (Kp) bytes, box 128 (k) × bm (m); 128B swizzle
[[prepass.tensor_maps]]
base = "'scratch' if K % 16 else 'a'"
offset = 0
dims = ["kp", "M"]
stride = "kp"
box = [128, "bm"]
elem = "b8"

# B as N rows of K (Kp) bytes (B itself where it is N×K with K % 16 == 0, else Bt), box
# 128 (k) × bn (n); 128B swizzle
[[prepass.tensor_maps]]
base = "'scratch' if bp_bytes else 'b'"
offset = "ap_bytes if bp_bytes else 0"
dims = ["kp", "N"]
stride = "kp"
box = [128, "bn"]
elem = "b8"
+++
*/
/*
 * 33_fp8_wgmma.cu -- C = scale_a·scale_b·(A·B) with A (M×K) and B (K×N, or N×K with B_NK) in
 * FP8 (e4m3 or e5m2), FP32 accumulators, C written as BF16 or FP32, on Hopper (sm_90a).
 *
 * What changes from 32_half_wgmma: the operands are bytes, so a 128-byte swizzled row holds
 * 128 of k (BK = 128) and one wgmma.m64n128k32 covers 32 of k and 128 columns (4 a k-tile,
 * each 32 bytes further along the row). The tensor cores keep about 13 bits of an FP8 sum
 * (docs/precisions.md), so a k-tile's four wgmmas start from zero (scale-d 0) in 64 partial
 * sums and are added into the FP32 sums once they are done, one 128-column half of the tile
 * at a time; the other consumer's wgmmas fill the tensor cores meanwhile. FP8 wgmma takes no
 * transpose bit: both operands must be K-major
 * in shared memory, so B as K×N goes through a pre-pass that writes Bt (N × Kp) into the
 * scratch (a 32 × 32 tile transpose through shared memory), while B as N×K is read where it
 * lies. The epilogue multiplies the FP32 accumulators by scale = scale_a·scale_b (the
 * kernel's last argument) before rounding C to its type.
 *
 * Technique and source: the PTX ISA's FP8 wgmma (.e4m3/.e5m2, K-major only); DeepGEMM's and
 * CUTLASS's sm90 FP8 GEMMs (scales applied to the FP32 accumulators); written anew for this
 * lab on top of 32_half_wgmma.cu.
 *
 * Pre-pass (timed with the GEMM): Ap = A padded to Kp = roundup(K, 16) where K % 16; Bt as
 * above (B as N×K: padded to Kp where K % 16, else no pre-pass blocks at all).
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM     __nv_fp8_e4m3 or __nv_fp8_e5m2 (the run's input type) (default __nv_fp8_e4m3)
 *   OUT      __nv_bfloat16 or float (the run's output type)        (default __nv_bfloat16)
 *   ACC      float                                                 (default float)
 *   STAGES   3 or 4                                                (default 4)
 *   PERSIST  0 or 1                                                (default 1)
 *   B_NK     1: B is stored N×K ("layout nk")                      (default 0)
 *   BM, BN   128 or 64, 256 or 128: the tile of C                  (default 128, 256)
 * Launch: prepass (32, 8) blocks as the header says; matmul block 128 + 2 · BM, grid as
 * above, dynamic shared memory STAGES · (BM + BN) · 128 + 1280;
 * args (the maps of A and B, A, scratch, C, M, N, K, scale).
 * Models: FLOPs = 2·M·N·K; bytes = M·K + K·N + M·N·sizeof(OUT).
 */
#include "fp8.cuh"
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM __nv_fp8_e4m3
#endif
#ifndef OUT
#define OUT __nv_bfloat16
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef PERSIST
#define PERSIST 1
#endif
#ifndef B_NK
#define B_NK 0
#endif
#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#define BK 128
#define GM 8
#define CONSUMERS (BM / 64)
#define HALVES (BN / 128)
#define NT (128 * (1 + CONSUMERS))
#define A_BYTES (BM * BK)                    /* 16 KB at BM = 128 */
#define B_BYTES (BN * BK)                    /* 32 KB at BN = 256 */
#define STAGE_BYTES (A_BYTES + B_BYTES)
#if STAGES < 3 || STAGES > 4 || (PERSIST != 0 && PERSIST != 1)
#error "STAGES must be 3 or 4, PERSIST 0 or 1"
#endif
#if (BM != 64 && BM != 128) || (BN != 128 && BN != 256)
#error "BM must be 64 or 128, BN 128 or 256"
#endif
static_assert(sizeof(ELEM) == 1, "ELEM is an 8-bit type");

/* Ap (M × Kp) where K % 16, then Bt (N × Kp): eight_bit.cuh's pad_or_transpose_bytes. */
extern "C" __global__ __launch_bounds__(256)
void prepass(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
             int M, int N, int K)
{
    pad_or_transpose_bytes<B_NK>(A, B, S, M, N, K);
}

extern "C" __global__ __launch_bounds__(NT, 1)
void matmul(const __grid_constant__ TensorMapArg mapA, const __grid_constant__ TensorMapArg mapB,
            const ELEM* __restrict__ A, const ELEM* __restrict__ S, OUT* __restrict__ C,
            int M, int N, int K, float scale)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
    /* full[s] at +8s, empty[s] at +8(STAGES+s): 2 STAGES * 8 <= 256 */
    const unsigned bars = base + STAGES * STAGE_BYTES;

    const int tid = threadIdx.x;
    const int wg = tid >> 7;                            /* 0: producer, 1-2: consumers */
    const int ktiles = (K + BK - 1) / BK;
    const int mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN;
    const int tiles = mt * nt;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);                 /* the producer's arrive + tx bytes */
            mbar_init(bars + 8 * (STAGES + s), 128 * CONSUMERS);   /* consumer threads */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

#if CONSUMERS == 2
    /* registers to the consumers (setmaxnreg is warpgroup-wide): up to 128 sums + 64
     * partials each, beyond the 168 a thread of 384 gets at launch (256 threads get 255) */
    if (wg == 0)
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    else
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
#endif

    if (wg == 0) {
        if (tid == 0) {
            const void* tmA = &mapA;                    /* in the launch's parameter space */
            const void* tmB = &mapB;
            tensormap_prefetch(tmA);
            tensormap_prefetch(tmB);
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int row0, col0;
                tile_origin(t, mt, nt, GM, BM, BN, row0, col0);
                for (int kt = 0; kt < ktiles; ++kt, ++it)
                    load_byte_k_tile<STAGES, BM, BN>(it, base, bars, tmA, tmB, row0, col0, kt);
            }
        }
    } else {
        const int cw = wg - 1;
        const int warp = (tid >> 5) & 3, lane = tid & 31;
        float acc[BN / 2];                              /* C's FP32 sums */
        float part[64];                                 /* one k-tile of one 128-column half, on the tensor cores */
        int it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int row0, col0;
            tile_origin(t, mt, nt, GM, BM, BN, row0, col0);
#pragma unroll
            for (int j = 0; j < BN / 2; ++j)
                acc[j] = 0.f;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(bars + 8 * s, (it / STAGES) & 1);
                const unsigned sa = base + s * STAGE_BYTES + cw * (64 * 128);
                const unsigned sb = base + s * STAGE_BYTES + A_BYTES;
#pragma unroll
                for (int h = 0; h < HALVES; ++h) {      /* N columns 128 h .. 128 h + 127 */
                    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                    for (int kk = 0; kk < BK / 32; ++kk)
                        wgmma_n128k32(part, make_desc(sa + kk * 32),
                                      make_desc(sb + h * (128 * 128) + kk * 32), kk > 0, ELEM());
                    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
                    for (int j = 0; j < 64; ++j)        /* same lane layout: columns 128 h on */
                        acc[h * 64 + j] += part[j];
                }
                mbar_arrive(bars + 8 * (STAGES + s));   /* both halves read: release the stage */
            }
            store_wgmma_out<BN>(acc, C, row0 + cw * 64, col0, M, N, warp, lane, scale);
        }
    }
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
