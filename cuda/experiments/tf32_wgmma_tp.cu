/*
+++
name = "tf32_wgmma_tp"
title = "tf32_wgmma_ws without its pre-pass: the producer transposes B's k-tiles in registers"
summary = "tf32_wgmma_ws without its pre-pass: the producer warpgroup loads B's 32 × 256 k-tiles with 16-byte read-only loads one k-tile ahead, transposes 4 × 4 blocks in registers and stores K-major 16-byte chunks (st.shared.v4, conflict-free) into the 128B-swizzled stage; A by 16-byte cp.async; fence.proxy.async and full/empty mbarriers; the consumers unchanged (2 × wgmma.m64n256k8, 128 × 256 tiles)."
source = "PTX ISA wgmma.mma_async, mbarrier, fence.proxy.async; CUTLASS sm90 warp-specialized GMMA mainloop with a transposing producer; cuda/ladder/22_tf32_wgmma_ws.cu"
role = "experiment"
order = 91
dtypes = ["float32"]
precision = "tf32"
arch_suffix = "a"

[params]
stages = [4, 3]

[descriptions]
stages = "shared-memory stages between the producer and the consumers: 3 or 4"

[derived]
smem = "stages * (128 + 256) * 32 * 4 + 1024 + 256"   # + atom alignment, mbarriers

[[constraints]]
check = "stages >= 3 and smem <= 227 * 1024"
reason = "stages={stages}: need 3 or 4 (≥ 3 for the pipeline, ≤ 4 for 227 KB of shared memory)"

[launch]
grid = ["cdiv(N, 256)", "cdiv(M, 128)"]
block = [384, 1]
shared = "smem"
+++
*/
/*
 * experiments/tf32_wgmma_tp.cu -- TF32 GEMM on Hopper without a pre-pass: 22_tf32_wgmma_ws.cu's
 * warp-specialized SS wgmma pipeline, with B transposed to K-major by the PRODUCER on its
 * way into shared memory instead of by a separate kernel (sm_90a).
 *
 * Technique. TF32 wgmma reads only K-major operands from shared memory; B (K x N,
 * row-major) is N-major. 22_ runs a transposing pre-pass (a noticeable part of its time:
 * benchmarks/NOTES.md).
 * Here the producer warpgroup (128 threads) loads each 32 x 256 k-tile of B with 16-byte
 * read-only global loads (4 consecutive k-rows x 4 consecutive n per unit, 4 units per
 * thread, 64 registers, issued one k-tile ahead), transposes each 4 x 4 block in
 * registers and writes four K-major 16-byte chunks (k 4c..4c+3 of one column n) into the
 * 128-byte swizzle layout with st.shared.v4 (chunk c of row n at c ^ (n % 8): the 8 lanes
 * of a quarter-warp write the 8 chunks of one 128-byte row, conflict-free). A's k-tile
 * (K-major already) still goes by 16-byte cp.async. Before arriving on the stage's full
 * mbarrier the producer waits for its cp.async (wait_group LAG) and executes
 * fence.proxy.async.shared::cta, which publishes both its cp.async writes and its plain
 * st.shared writes to the tensor cores (async proxy). Consumers are 21_'s unchanged:
 * 2 warpgroups x wgmma.m64n256k8 over a 128 x 256 tile of C, one commit group in flight,
 * empty mbarrier per stage.
 *
 * Source: NVIDIA PTX ISA (wgmma.mma_async, matrix descriptors, 128B swizzle, mbarrier,
 * cp.async, fence.proxy.async); CUTLASS sm90 warp-specialized GMMA mainloops and its
 * "transpose in the producer" idea for operands that TMA cannot deliver K-major; written
 * anew for this lab on top of 22_tf32_wgmma_ws.cu (descriptor, swizzle, consumers).
 *
 * Any M, N, K: zero-filled copies and loads at the edges, guarded stores. 16-byte
 * accesses need aligned rows: A when K % 4 == 0 (else 4-byte cp.async), B when N % 4 == 0
 * (else guarded scalar loads). Precision "tf32". sm_90a only; a stub that traps elsewhere.
 *
 * Compile-time constants: ELEM, ACC = float; STAGES >= 3 (default 4).
 * Fixed: BM = 128, BN = 256, BK = 32. Dynamic shared memory: STAGES * 48 KB + 1024 + 256.
 * Launch: block (384, 1), grid (ceil(N / 256), ceil(M / 128)); args (A, B, C, M, N, K).
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
#define BM 128
#define BN 256
#define BK 32
#define NT 384
#define LAG (STAGES - 2)
#define A_BYTES (BM * BK * 4)
#define B_BYTES (BN * BK * 4)
#define STAGE_BYTES (A_BYTES + B_BYTES)
#if STAGES < 3
#error "STAGES must be >= 3"
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void sts128(unsigned addr, float a, float b, float c, float d)
{
    asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" :: "r"(addr), "f"(a), "f"(b), "f"(c), "f"(d) : "memory");
}

/* B k-tile (32 x 256) -> registers: unit u = rows k0+4c..+3 (c = lane % 8) x columns
   n0+4g..+3 (g = lane / 8 + 4 warp + 16 u) */
__device__ __forceinline__ void load_b(float4 (&v)[4][4], const float* __restrict__ B, int N, int K,
                                       int n0, int k0, int c, int gbase, bool vecB)
{
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        const int gn = n0 + 4 * (gbase + 16 * u);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int gk = k0 + 4 * c + j;
            const float* p = B + (size_t)gk * N + gn;
            if (gk < K && vecB && gn < N) {
                v[u][j] = __ldg(reinterpret_cast<const float4*>(p));
            } else {
                v[u][j].x = (gk < K && gn < N) ? __ldg(p) : 0.f;
                v[u][j].y = (gk < K && gn + 1 < N) ? __ldg(p + 1) : 0.f;
                v[u][j].z = (gk < K && gn + 2 < N) ? __ldg(p + 2) : 0.f;
                v[u][j].w = (gk < K && gn + 3 < N) ? __ldg(p + 3) : 0.f;
            }
        }
    }
}

/* registers -> stage, transposed: column n = 4g + i gets the chunk (k 4c..4c+3) */
__device__ __forceinline__ void store_b(const float4 (&v)[4][4], unsigned sb, int c, int gbase)
{
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        const int n = 4 * (gbase + 16 * u);
        sts128(sb + (unsigned)((n + 0) * 128 + ((c ^ ((n + 0) & 7)) << 4)), v[u][0].x, v[u][1].x, v[u][2].x, v[u][3].x);
        sts128(sb + (unsigned)((n + 1) * 128 + ((c ^ ((n + 1) & 7)) << 4)), v[u][0].y, v[u][1].y, v[u][2].y, v[u][3].y);
        sts128(sb + (unsigned)((n + 2) * 128 + ((c ^ ((n + 2) & 7)) << 4)), v[u][0].z, v[u][1].z, v[u][2].z, v[u][3].z);
        sts128(sb + (unsigned)((n + 3) * 128 + ((c ^ ((n + 3) & 7)) << 4)), v[u][0].w, v[u][1].w, v[u][2].w, v[u][3].w);
    }
}
#endif

extern "C" __global__ __launch_bounds__(NT, 1)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
    const unsigned bars = base + STAGES * STAGE_BYTES;

    const int tid = threadIdx.x;
    const int wg = tid >> 7;
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
    const int ktiles = (K + BK - 1) / BK;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 128);
            mbar_init(bars + 8 * (STAGES + s), 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        const int ptid = tid, lane = tid & 31;
        const bool vecA = (K & 3) == 0, vecB = (N & 3) == 0;
        const int c = lane & 7, gbase = (lane >> 3) + 4 * (ptid >> 5);
        float4 v[4][4];
        load_b(v, B, N, K, col0, 0, c, gbase, vecB);
        for (int t = 0; t < ktiles; ++t) {
            const int s = t % STAGES;
            if (t >= STAGES)
                mbar_wait(bars + 8 * (STAGES + s), ((t / STAGES) - 1) & 1);
            const unsigned sa = base + s * STAGE_BYTES, sb = sa + A_BYTES;
            const int k0 = t * BK;
            if (vecA) {
                const int ca = ptid & 7, gk = k0 + 4 * ca;
                const bool kin = gk < K;
#pragma unroll
                for (int i = 0; i < BM / 16; ++i) {
                    const int r = (ptid >> 3) + 16 * i, gr = row0 + r;
                    const bool in = kin && gr < M;
                    cp_async16(sa + (unsigned)(r * 128 + ((ca ^ (r & 7)) << 4)),
                               in ? A + (size_t)gr * K + gk : A, in);
                }
            } else {
                const int kk = ptid & 31, gk = k0 + kk;
                const bool kin = gk < K;
#pragma unroll 4
                for (int i = 0; i < BM / 4; ++i) {
                    const int r = (ptid >> 5) + 4 * i, gr = row0 + r;
                    const bool in = kin && gr < M;
                    cp_async4(sa + (unsigned)(r * 128 + ((((kk >> 2) ^ (r & 7)) << 4) | ((kk & 3) << 2))),
                              in ? A + (size_t)gr * K + gk : A, in);
                }
            }
            cp_async_commit();
            store_b(v, sb, c, gbase);                   /* k-tile t of B, loaded one tile ago */
            if (t + 1 < ktiles)
                load_b(v, B, N, K, col0, k0 + BK, c, gbase, vecB);
            if (t >= LAG) {
                cp_async_wait<LAG>();
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                mbar_arrive(bars + 8 * ((t - LAG) % STAGES));
            }
        }
        cp_async_wait<0>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        for (int t = ktiles > LAG ? ktiles - LAG : 0; t < ktiles; ++t)
            mbar_arrive(bars + 8 * (t % STAGES));
    } else {
        const int cw = wg - 1;
        float acc[BN / 2];
#pragma unroll
        for (int j = 0; j < BN / 2; ++j)
            acc[j] = 0.f;
        for (int t = 0; t < ktiles; ++t) {
            const int s = t % STAGES;
            mbar_wait(bars + 8 * s, (t / STAGES) & 1);
            const unsigned sa = base + s * STAGE_BYTES + cw * (64 * 128);
            const unsigned sb = base + s * STAGE_BYTES + A_BYTES;
            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
            for (int kk = 0; kk < BK / 8; ++kk)
                wgmma_n256(acc, make_desc(sa + kk * 32), make_desc(sb + kk * 32));
            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            if (t > 0)
                mbar_arrive(bars + 8 * (STAGES + (t - 1) % STAGES));
        }
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");

        const int warp = (tid >> 5) & 3, lane = tid & 31;
        store_wgmma_acc<BN>(acc, C, row0 + cw * 64, col0, M, N, warp, lane);
    }
#else
    __trap();
#endif
}
