/*
+++
name = "int8_wgmma"
title = "int8 by Hopper wgmma fed by TMA: exact int32 sums straight from the tensor cores"
summary = "The tensor-core ladder's integer step: step 33's producer thread, TMA ring and 128-deep k-tiles of bytes, with wgmma.m64n{bn}k32.s32.s8.s8. Integer sums are exact (they wrap modulo 2³² like the lab's int32 kernels), so unlike FP8 nothing is moved out of the tensor cores' sums: each consumer warpgroup keeps one wgmma group in flight and releases a stage as soon as the next one is issued, as the 16-bit step does, and C is written as int32. Integer wgmma reads both operands K-major only: B as N×K is loaded as it lies, B as K×N is transposed by the pre-pass into the scratch first."
source = "PTX ISA wgmma.mma_async (.s32.s8.s8, K-major descriptors), cp.async.bulk.tensor and mbarrier expect_tx; CUDA driver cuTensorMapEncodeTiled; CUTLASS's sm90 integer GEMMs (s8 × s8 → s32); cuda/ladder/33_fp8_wgmma.cu"
role = "rung"
order = 35
dtypes = ["int8"]
layouts = ["kn", "nk"]
precision = "int8"
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
bn = "columns of C a CTA computes: 256 (wgmma.m64n256k32) or 128 (m64n128k32; more tiles where C is small)"

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
reason = "a consumer warpgroup computes 64 rows (bm: one or two of them) by one wgmma of bn columns (128 or 256)"

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
 * 35_int8_wgmma.cu -- C = A·B with A (M×K) and B (K×N, or N×K with B_NK) in int8, int32
 * sums and an int32 C, on Hopper (sm_90a).
 *
 * What changes from 33_fp8_wgmma: the tensor cores sum integers exactly, so there is no
 * reason to move their sums out every k-tile as FP8's 13-bit sums need. A consumer issues a
 * k-tile's four wgmma.m64n{BN}k32 straight into C's sums (BN / 2 int32 registers a thread),
 * commits them as a group and waits only for the group before (wgmma.wait_group 1): the
 * tensor cores always hold the next k-tile's work while the previous stage is released to
 * the producer, as in 32_half_wgmma. No scale, no rounding: C = A·B modulo 2³² (no term
 * wraps before K = 2¹⁷: |a·b| ≤ 2¹⁴).
 * Integer wgmma has no transpose either: both operands must be K-major in shared memory, so
 * B as K×N goes through step 33's pre-pass (eight_bit.cuh) into Bt (N × Kp) in the scratch,
 * while B as N×K is read where it lies.
 *
 * Technique and source: the PTX ISA's integer wgmma (.s32.s8.s8, K-major only); CUTLASS's
 * sm90 s8 GEMMs; written anew for this lab on top of 33_fp8_wgmma.cu.
 *
 * Pre-pass (timed with the GEMM): Ap = A padded to Kp = roundup(K, 16) where K % 16; Bt as
 * above (B as N×K: padded to Kp where K % 16, else no pre-pass blocks at all).
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM     signed char (the run's input type, int8)               (default signed char)
 *   OUT, ACC int                                                    (default int)
 *   STAGES   3 or 4                                                 (default 4)
 *   PERSIST  0 or 1                                                 (default 1)
 *   B_NK     1: B is stored N×K ("layout nk")                       (default 0)
 *   BM, BN   128 or 64, 256 or 128: the tile of C                   (default 128, 256)
 * Launch: prepass (32, 8) blocks as the header says; matmul block 128 + 2 · BM, grid as
 * above, dynamic shared memory STAGES · (BM + BN) · 128 + 1280;
 * args (the maps of A and B, A, scratch, C, M, N, K).
 * Models: OPs = 2·M·N·K; bytes = M·K + K·N + 4·M·N.
 */
#include "eight_bit.cuh"
#include "half.cuh"
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM signed char
#endif
#ifndef OUT
#define OUT int
#endif
#ifndef ACC
#define ACC int
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
#define NT (128 * (1 + CONSUMERS))
#define A_BYTES (BM * BK)                    /* 16 KB at BM = 128 */
#define STAGE_BYTES ((BM + BN) * BK)         /* 48 KB at 128 × 256 */
#if STAGES < 3 || STAGES > 4 || (PERSIST != 0 && PERSIST != 1)
#error "STAGES must be 3 or 4, PERSIST 0 or 1"
#endif
#if (BM != 64 && BM != 128) || (BN != 128 && BN != 256)
#error "BM must be 64 or 128, BN 128 or 256"
#endif
#if BN == 256
#define WGMMA_S8_K32 wgmma_s8_n256k32
#else
#define WGMMA_S8_K32 wgmma_s8_n128k32
#endif
static_assert(sizeof(ELEM) == 1 && (ELEM)(-1) < 0, "ELEM is int8");
static_assert(sizeof(OUT) == 4 && sizeof(ACC) == 4, "C and its sums are int32");

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
            int M, int N, int K)
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
        int acc[BN / 2];                                /* C's int32 sums */
        int it = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int row0, col0;
            tile_origin(t, mt, nt, GM, BM, BN, row0, col0);
#pragma unroll
            for (int j = 0; j < BN / 2; ++j)
                acc[j] = 0;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(bars + 8 * s, (it / STAGES) & 1);
                const unsigned sa = base + s * STAGE_BYTES + cw * (64 * BK);
                const unsigned sb = base + s * STAGE_BYTES + A_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < BK / 32; ++kk)    /* 32 bytes of k further along the rows */
                    WGMMA_S8_K32(acc, make_desc(sa + kk * 32), make_desc(sb + kk * 32));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > 0)                             /* k-tile it-1 read: release its stage */
                    mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (ktiles > 0)
                mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
            store_wgmma_out<BN>(acc, C, row0 + cw * 64, col0, M, N, warp, lane);
        }
    }
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
