/*
+++
name = "tf32_wgmma_tma"
title = "tf32_wgmma_ws with a TMA producer: tensor-map loads, TF32 rounding by the copy engine"
summary = "tf32_wgmma_ws with its producer replaced by TMA: one elected thread issues cp.async.bulk.tensor.2d loads (128B-swizzle tensor maps for A and the pre-transposed Bt, encoded on the host with cuTensorMapEncodeTiled and stored in the scratch tail) completing as tx bytes on the stage's full mbarrier; inputs rounded to TF32 to nearest like cuBLAS by the copy engine itself (TFLOAT32 tensor maps); 2 consumer warpgroups × wgmma.m64n256k8, 128 × 256 tiles; persist = 1: a persistent grid of #SMs CTAs looping over tiles rasterised in groups of 8 tile rows, the stage ring running on across tiles."
source = "PTX ISA cp.async.bulk.tensor, mbarrier expect_tx, fence.proxy.tensormap, wgmma.mma_async; CUDA driver cuTensorMapEncodeTiled and its CU_TENSOR_MAP_DATA_TYPE_TFLOAT32; CUTLASS sm90 TMA warp-specialized persistent GMMA kernels; cuda/ladder/22_tf32_wgmma_ws.cu"
role = "rung"
order = 23
dtypes = ["float32"]
precision = "tf32"
arch_suffix = "a"

[params]
stages = [4, 3]
persist = [1, 0]

[descriptions]
stages = "shared-memory stages of the TMA ring: 3 or 4"
persist = "1: a persistent grid of one CTA per SM looping over the tiles; 0: one tile per CTA"

[derived]
tiles = "cdiv(M, 128) * cdiv(N, 256)"     # 128 (M) × 256 (N) tiles of C
kp = "roundup(K, 4)"                      # row length of Bt (and Ap)
# the two tensor maps (128 bytes each) after the pre-pass's Bt (and Ap), 128-aligned
maps_at = "roundup(4 * kp * (N + (M if K % 4 else 0)), 128)"

[[constraints]]
check = "(stages == 3 or stages == 4) and (persist == 0 or persist == 1)"
reason = "stages must be 3 or 4 (5 exceeds 227 KB of shared memory), persist 0 or 1"

[launch]
grid = ["min(tiles, SMS) if persist else tiles", 1]   # persistent: one CTA per SM
block = [384, 1]
# + atom alignment, mbarriers: full and empty per stage = 2 × 4 × 8 = 64 of the 256 bytes
shared = "stages * (128 + 256) * 32 * 4 + 1024 + 256"

[prepass]            # Bt (N × Kp) and, when K % 4, Ap (M × Kp): moved, not rounded (TMA rounds)
entry = "prepass"
grid = ["cdiv(kp, 32)", "cdiv(N, 32) + (cdiv(M, 32) if K % 4 else 0)"]
block = [32, 8]
scratch = "maps_at + 2 * 128"

# A (or Ap when K % 4) as M rows of Kp floats, box 32 × 128; 128B swizzle; rounded to TF32
# as TMA copies it
[[prepass.tensor_maps]]
at = "maps_at"
base = "'scratch' if K % 4 else 'a'"
offset = "4 * kp * N if K % 4 else 0"
dims = ["kp", "M"]
stride = "4 * kp"
box = [32, 128]
elem = "tf32"

# Bt as N rows of Kp floats, box 32 × 256; rounded to TF32 as TMA copies it
[[prepass.tensor_maps]]
base = "'scratch'"
offset = 0
dims = ["kp", "N"]
stride = "4 * kp"
box = [32, 256]
elem = "tf32"
+++
*/
/*
 * 23_tf32_wgmma_tma.cu -- TF32 GEMM on Hopper: warp-specialized wgmma fed by TMA (sm_90a),
 * optionally persistent. Same two kernels per GEMM as 22_tf32_wgmma_ws.cu:
 *
 * 1. prepass (timed with the GEMM, launched by the cuda backend): B (K x N) transposed into
 *    a K-major scratch buffer Bt (N rows of Kp = roundup(K, 4) floats, zero-padded) and,
 *    when K % 4 != 0, A copied into M rows of Kp floats, so that every operand row stride is
 *    a multiple of 16 bytes (a TMA requirement as much as cp.async's). It moves values as
 *    they are: the copy engine rounds them (see "Rounding").
 * 2. matmul: a block of 3 warpgroups (384 threads) computes 128 x 256 tiles of C.
 *    Warpgroup 0 is the producer, but only one elected thread works: per stage it announces
 *    the stage's bytes on the "full" mbarrier (mbarrier.arrive.expect_tx) and issues two
 *    cp.async.bulk.tensor.2d loads (A box 32 x 128, Bt box 32 x 256, 128-byte swizzle done by
 *    the copy engine into the same layout that 21 built by hand: 16-byte chunk c of row r at
 *    c ^ (r % 8), 1024-byte atoms), completing as tx bytes; out-of-range rows and k are
 *    zero-filled by the TMA unit (box bytes always count in full). The two tensor maps
 *    (CUtensorMap, 128 bytes each) are encoded on the host with cuTensorMapEncodeTiled and
 *    written by the backend into the tail of the scratch buffer, at byte offset
 *    roundup(4 * Kp * (N + (K % 4 ? M : 0)), 128) (A's map, then Bt's); the producer thread
 *    orders them into the tensormap proxy with fence.proxy.tensormap::generic.acquire and
 *    prefetch.tensormap before its first copy. Warpgroups 1 and 2 consume as in 22: wait on
 *    full, 4 x wgmma.mma_async.m64n256k8.f32.tf32.tf32 per 32-deep k-tile, one wgmma group in
 *    flight, arrive on the previous stage's "empty" mbarrier (256 arrivals).
 *    PERSIST = 1: grid of min(tiles, #SMs) CTAs, each looping over tiles t = blockIdx.x +
 *    i * gridDim.x; the stage ring and its barrier phases run on across tiles, so the
 *    producer loads the next tile while the consumers store the last one. Tiles are
 *    rasterised in groups of GM = 8 tile rows (M), column by column within a group, so the
 *    ~132 tiles in flight share a few A row panels and Bt column panels in L2.
 *    PERSIST = 0: one tile per CTA (grid = tiles), same order.
 *
 * Rounding. The tensor cores read a .tf32 operand as the FP32 bit pattern and ignore its low
 * 13 mantissa bits: raw FP32 inputs are truncated (rounded toward zero), a one-sided error
 * that made this kernel's relative L2 error a few times cuBLAS TF32's, one truncated operand
 * alone less so (benchmarks/NOTES.md). cuBLAS rounds both operands to nearest. Here the copy engine does it: both tensor maps
 * are encoded with the element type TFLOAT32 (header: elem = "tf32"), and TMA then rounds
 * every float to TF32 as it writes shared memory, to nearest with ties to even (the low 13
 * bits cleared; NaN stays NaN, the largest floats round up to infinity, as any rounding
 * does; checked bit for bit by tests/test_tma_tf32.py on the GPU). No thread touches the
 * operands: earlier versions rounded Bt in the pre-pass (cvt.rna) and A in shared memory
 * with the producer warpgroup's three idle warps (16 KB read and written again per k-tile,
 * a measurable part of the GEMM). Ties go to even here, away from zero with
 * cvt.rna: a tie is 1 input in 8192 and moves the result by a part in 1e7, nothing the
 * error statistics can see.
 *
 * Technique and source: NVIDIA PTX ISA (cp.async.bulk.tensor, mbarrier expect_tx /
 * complete_tx, fence.proxy.tensormap, prefetch.tensormap, wgmma.mma_async and its matrix
 * descriptors); CUDA Driver API cuTensorMapEncodeTiled; the CUTLASS sm90 TMA warp-specialized
 * (persistent) GMMA kernels and their tile-rasterisation swizzle; written anew for this lab
 * on top of 22_tf32_wgmma_ws.cu (descriptors, swizzle layout and pre-pass from there).
 *
 * Any M, N, K (bounds by TMA zero-fill and guarded stores). Precision "tf32" (inputs
 * rounded to nearest TF32, FP32 accumulation). Built for sm_90a only; for other targets
 * matmul is a stub that traps.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  must be float                                      (default float)
 *   STAGES     shared-memory stages, 3 or 4                        (default 4)
 *   PERSIST    1: persistent grid with a tile loop, 0: one tile per CTA (default 1)
 * Fixed: BM = 128, BN = 256, BK = 32, GM = 8. Dynamic shared memory: STAGES * 48 KB + 1024
 * (atom alignment) + 256 (mbarriers: full and empty per stage, 2 * STAGES * 8 bytes).
 *
 * Launch: prepass as in 22; matmul block (384, 1), grid (PERSIST ? min(tiles, 132) : tiles, 1),
 * tiles = ceil(M/128) * ceil(N/256); args (A, scratch, C, M, N, K). Scratch: the pre-pass's
 * bytes rounded up to 128, + 256 for the two tensor maps.
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
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
#define BM 128
#define BN 256
#define BK 32
#define GM 8
#define NT 384
#define A_BYTES (BM * BK * 4)                /* 16 KB */
#define B_BYTES (BN * BK * 4)                /* 32 KB */
#define STAGE_BYTES (A_BYTES + B_BYTES)
#if STAGES < 3 || STAGES > 4 || (PERSIST != 0 && PERSIST != 1)
#error "STAGES must be 3 or 4, PERSIST 0 or 1"
#endif

/* B (K x N) -> Bt (N x Kp, K-major, zero-padded); if K % 4, A (M x K) -> Ap (M x Kp). */
extern "C" __global__ __launch_bounds__(256)
void prepass(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
             int M, int N, int K)
{
    const int Kp = (K + 3) & ~3;
    const int nby = (N + 31) / 32;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int k0 = blockIdx.x * 32;
    if ((int)blockIdx.y < nby) {
        transpose_tile32<8>(B, S, N, K, N, Kp, k0, blockIdx.y * 32);
    } else {
        ELEM* Ap = S + (size_t)N * Kp;
        const int m0 = (blockIdx.y - nby) * 32;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int m = m0 + ty + 8 * i, k = k0 + tx;
            if (m < M && k < Kp)
                Ap[(size_t)m * Kp + k] = k < K ? A[(size_t)m * K + k] : 0.f;
        }
    }
}

extern "C" __global__ __launch_bounds__(NT, 1)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ S, ELEM* __restrict__ C,
            int M, int N, int K)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
    /* full[s] at +8s, empty[s] at +8(STAGES+s): 2 STAGES * 8 <= 256 */
    const unsigned bars = base + STAGES * STAGE_BYTES;

    const int tid = threadIdx.x;
    const int wg = tid >> 7;                            /* 0: producer, 1-2: consumers */
    const int Kp = (K + 3) & ~3;
    const int ktiles = (Kp + BK - 1) / BK;
    const int mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN;
    const int tiles = mt * nt;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);                 /* the producer's arrive + tx bytes */
            mbar_init(bars + 8 * (STAGES + s), 256);    /* consumer threads */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        if (tid == 0) {
            const size_t pre = (size_t)4 * Kp * (N + ((K & 3) ? M : 0));
            const unsigned char* maps = reinterpret_cast<const unsigned char*>(S) + ((pre + 127) & ~(size_t)127);
            const void* tmA = maps;
            const void* tmB = maps + 128;
            tensormap_acquire(tmA);
            tensormap_acquire(tmB);
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                int row0, col0;
                tile_origin(t, mt, nt, GM, BM, BN, row0, col0);
                for (int kt = 0; kt < ktiles; ++kt, ++it) {
                    unsigned full;
                    const unsigned sa = ring_claim_stage<STAGES>(it, base, bars, STAGE_BYTES, full);
                    tma_load_2d(sa, tmA, kt * BK, row0, full);
                    tma_load_2d(sa + A_BYTES, tmB, kt * BK, col0, full);
                }
            }
        }                                               /* warps 1-3 of warpgroup 0: idle */
    } else {
        const int cw = wg - 1;
        const int warp = (tid >> 5) & 3, lane = tid & 31;
        float acc[BN / 2];
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
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < BK / 8; ++kk)
                    wgmma_n256(acc, make_desc(sa + kk * 32), make_desc(sb + kk * 32));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > 0)                             /* k-tile it-1 read: release its stage */
                    mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (ktiles > 0)
                mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));

            store_wgmma_acc<BN>(acc, C, row0 + cw * 64, col0, M, N, warp, lane);
        }
    }
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
