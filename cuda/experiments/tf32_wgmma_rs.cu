/*
+++
name = "tf32_wgmma_rs"
title = "TF32 wgmma without a pre-pass: computes C^T = B^T·A^T so that A's K-major rows are wgmma's shared-memory operand (16-byte cp.async, 128B swizzle) and B's N-major tile feeds wgmma's register operand (conflict-free ld.shared.v2 fragments, rows paired onto adjacent columns); m64n256k8, 256×128 tiles of C, producer + 2 consumer warpgroups (setmaxnreg 40/232), full/empty mbarriers, two 8-register fragment sets with one commit group always queued, transposed float2 epilogue; persist=1: persistent grid, the next tile's loads overlap the epilogue."
source = "PTX ISA wgmma.mma_async (A in registers, .m64nNk8 fragment layouts), mbarrier, setmaxnreg; CUTLASS sm90 RS warp-specialized mainloops and swap-AB"
role = "experiment"
order = 90
dtypes = ["float32"]
precision = "tf32"
arch_suffix = "a"

[params]
stages = [4, 3]
persist = [1, 0]

[derived]
tiles = "cdiv(M, 256) * cdiv(N, 128)"     # 256 (M) × 128 (N) tiles of C
# persistent grid: 132 = SMs of an H100/H200 SXM (fewer SMs only queue the extra CTAs)
sms = "132"

[[constraints]]
check = "(stages == 3 or stages == 4) and (persist == 0 or persist == 1)"
reason = "stages must be 3 or 4 (5 exceeds 227 KB of shared memory), persist 0 or 1"

[launch]
grid = ["min(tiles, sms) if persist else tiles", 1]
block = [384, 1]
# per stage: the A tile (256 × 32, 128B-swizzled) + the B tile (32 × 136 floats);
# + alignment, mbarriers
shared = "stages * (256 * 32 * 4 + 32 * 136 * 4) + 1024 + 256"
+++
*/
/*
 * experiments/tf32_wgmma_rs.cu -- TF32 GEMM on Hopper without a pre-pass: the transposed problem
 * C^T = B^T A^T on warp-specialized wgmma with the A operand from REGISTERS (sm_90a).
 *
 * Technique. TF32 wgmma reads only K-major operands from shared memory (no transpose
 * flag for .tf32), and B (K x N, row-major) is N-major; v4 (22_tf32_wgmma_ws.cu) paid a
 * transposing pre-pass for it. But wgmma's A operand may come from registers, loaded
 * in any layout, so compute D = C^T (N x M) = B^T (N x K) . A^T (K x M):
 *   - wgmma's shared-memory B operand is A^T, i.e. K-major rows of A itself: the producer
 *     copies A's 256 x 32 k-tile with 16-byte cp.async into the 128-byte swizzle layout
 *     (16-byte chunk c of row r at chunk c ^ (r % 8), 1024-byte 8-row atoms), as v4 did
 *     with Bt;
 *   - wgmma's register A operand is B^T: the producer copies B's 32 x 128 k-tile
 *     row-major (N-contiguous, row stride 136 floats) with 16-byte cp.async, and each
 *     consumer thread reads its m64k8 fragments with ld.shared.v2: fragment rows
 *     16w + g and 16w + g + 8 (warp w, g = lane / 4) are mapped to the ADJACENT columns
 *     16w + 2g and 16w + 2g + 1 of the tile, so a0/a1 (k = lane % 4) and a2/a3 (k + 4)
 *     are two 8-byte loads; with the 136-float stride each half-warp phase hits all 32
 *     banks once (conflict-free);
 *   - the epilogue writes the accumulators of D transposed into row-major C: a thread's
 *     (d[4j], d[4j+2]) and (d[4j+1], d[4j+3]) are float2 pieces of two rows of C.
 * Block: 384 threads = producer warpgroup 0 + consumer warpgroups 1, 2; tile of C =
 * 256 (M) x 128 (N): consumer g owns columns 64(g-1)..+63 and issues
 * wgmma.m64n256k8.f32.tf32.tf32 (A from registers, B = the A tile by descriptor).
 * Registers: setmaxnreg gives the producer 40 and the consumers 232 (128 accumulators +
 * 16 fragment registers; at the 168 of 384 threads ptxas serialized the wgmmas, C7512);
 * the producer's copy loops stay rolled so that 40 suffice without spills.
 * Pipeline: STAGES stages, full/empty mbarriers per stage. The producer fills a stage,
 * waits for the tile issued LAG = STAGES - 2 tiles earlier (cp.async.wait_group),
 * fence.proxy.async.shared::cta (its cp.async writes are read by the tensor cores
 * through the async proxy), arrives on the full barrier. A consumer splits each 32-deep
 * k-tile into two commit groups of 2 wgmmas with two 8-register fragment sets X, Y:
 * load X, issue, wait_group 1 (the previous group, which read Y, is done: its stage is
 * released on the empty barrier), load Y, issue, wait_group 1 -- always one group queued
 * on the tensor cores while the other set is reloaded, 16 fragment registers in all.
 * PERSIST = 1: a persistent grid (at most 132 CTAs, one per H100/H200 SM; more SMs are
 * merely left idle, fewer only queue the rest) walks the tiles with a stride of the grid
 * size, stage/phase counters running on across tiles, so the producer fills the next
 * tile's stages while the consumers store the previous tile (prologue and epilogue
 * overlap). PERSIST = 0: one tile per CTA.
 *
 * Source: NVIDIA PTX ISA ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate":
 * wgmma.mma_async with A in registers, register fragment layout of .m64nNk8 A and D,
 * matrix descriptors, swizzling modes; mbarrier; cp.async; fence.proxy.async); the
 * CUTLASS sm90 "RS" (register-sourced A) warp-specialized mainloops and the swap-AB
 * trick (compute the transposed product when an operand's layout does not fit);
 * written anew for this lab. Descriptor and swizzle as in 19_/21_ (verified there).
 *
 * Any M, N, K: zero-filled copies at the edges (src-size 0) and guarded stores. The
 * 16-byte copies need 16-byte-aligned rows: A when K % 4 == 0, B when N % 4 == 0; else
 * that operand falls back to 4-byte cp.async (slower, same layout). The tensor cores read
 * A and B as TF32: precision "tf32". Built for sm_90a only (the cuda backend passes
 * -gencode=arch=compute_90a,code=sm_90a); for other targets matmul is a stub that traps.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  must be float                                      (default float)
 *   STAGES     shared-memory stages, 3 or 4                        (default 4)
 *   PERSIST    1: persistent grid of <= 132 CTAs; 0: one tile per CTA (default 1)
 * Tried (v5 notes): one commit group of 4 wgmmas per k-tile with the next k-tile's
 * fragments loaded while it runs gave WRONG results: ptxas reused the fragment registers
 * of the in-flight group without a wait, so RS fragments must stay untouched until
 * wgmma.wait_group retires their group, as the PTX ISA says.
 * Measured (v5): ~129 TFLOP/s at 4096^2 whatever STAGES and PERSIST, the same per-SM
 * rate at 1024^2 with 32 CTAs -- bound inside the SM, not by memory; see the v5 notes.
 * Fixed: BM = 256 (C rows per tile = wgmma N), BN = 128 (C columns), BK = 32.
 * Dynamic shared memory: STAGES * (256 * 128 + 32 * 136 * 4) + 1024 + 256 bytes.
 * Launch: block (384, 1), grid (min(tiles, 132) if PERSIST else tiles, 1),
 * tiles = ceil(M / 256) * ceil(N / 128); args (A, B, C, M, N, K). No scratch, no pre-pass.
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
#define BM 256
#define BN 128
#define BK 32
#define NT 384
#define LAG (STAGES - 2)
#ifndef PRODUCER_REGS
#define PRODUCER_REGS 40
#endif
#ifndef CONSUMER_REGS
#define CONSUMER_REGS 232                    /* 128 x 40 + 256 x 232 <= 65536 */
#endif
#define BSTRIDE 136                          /* floats per k-row of the B tile (128 + 8) */
#define A_BYTES (BM * BK * 4)                /* 32 KB, swizzled, 1024-aligned */
#define B_BYTES (BK * BSTRIDE * 4)           /* 17 KB */
#define STAGE_BYTES (A_BYTES + B_BYTES)      /* 49 x 1024 */
#if STAGES < 3 || STAGES > 4
#error "STAGES must be 3 or 4"
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ void lds64(unsigned addr, unsigned& x, unsigned& y)
{
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(x), "=r"(y) : "r"(addr) : "memory");
}

/* D(64 x 256) += A(64 x 8, registers a[0..3]) . B(8 x 256, shared, descriptor) */
__device__ __forceinline__ void wgmma_rs_n256(float* d, const unsigned* a, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}
#endif

extern "C" __global__ __launch_bounds__(NT, 1)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
    const unsigned bars = base + STAGES * STAGE_BYTES;  /* full[s] at +8s, empty[s] at +8(STAGES+s) */

    const int tid = threadIdx.x;
    const int wg = tid >> 7;                            /* 0: producer, 1-2: consumers */
    const int ntm = (M + BM - 1) / BM, ntn = (N + BN - 1) / BN;
    const int ntiles = ntm * ntn;
    const int ktiles = (K + BK - 1) / BK;
    const int tstep = PERSIST ? (int)gridDim.x : ntiles;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 128);               /* producer threads */
            mbar_init(bars + 8 * (STAGES + s), 256);    /* consumer threads */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        /* ---------------- producer ---------------- */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(PRODUCER_REGS));
        const int ptid = tid;
        const bool vecA = (K & 3) == 0, vecB = (N & 3) == 0;
        int it = 0;                                     /* k-tiles issued, across tiles */
        for (int tile = blockIdx.x; tile < ntiles; tile += tstep) {
            const int m0 = (tile / ntn) * BM, n0 = (tile % ntn) * BN;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % STAGES;
                if (it >= STAGES)
                    mbar_wait(bars + 8 * (STAGES + s), ((it / STAGES) - 1) & 1);
                const unsigned sa = base + s * STAGE_BYTES, sb = sa + A_BYTES;
                const int k0 = kt * BK;
                if (vecA) {                             /* A: 256 rows x 8 chunks of 16 B */
                    const int c = ptid & 7, gk = k0 + 4 * c;
                    const bool kin = gk < K;
#pragma unroll 1
                    for (int i = 0; i < BM / 16; ++i) {
                        const int r = (ptid >> 3) + 16 * i, gr = m0 + r;
                        const bool in = kin && gr < M;
                        cp_async16(sa + (unsigned)(r * 128 + ((c ^ (r & 7)) << 4)),
                                   in ? A + (size_t)gr * K + gk : A, in);
                    }
                } else {                                /* A rows not 16-byte aligned */
                    const int kk = ptid & 31, gk = k0 + kk;
                    const bool kin = gk < K;
#pragma unroll 1
                    for (int i = 0; i < BM / 4; ++i) {
                        const int r = (ptid >> 5) + 4 * i, gr = m0 + r;
                        const bool in = kin && gr < M;
                        cp_async4(sa + (unsigned)(r * 128 + ((((kk >> 2) ^ (r & 7)) << 4) | ((kk & 3) << 2))),
                                  in ? A + (size_t)gr * K + gk : A, in);
                    }
                }
                if (vecB) {                             /* B: 32 k-rows x 32 chunks of 16 B */
                    const int q = ptid & 31, gn = n0 + 4 * q;
                    const bool nin = gn < N;
#pragma unroll 1
                    for (int i = 0; i < BK / 4; ++i) {
                        const int kr = (ptid >> 5) + 4 * i, gk = k0 + kr;
                        const bool in = nin && gk < K;
                        cp_async16(sb + (unsigned)(kr * BSTRIDE * 4 + q * 16),
                                   in ? B + (size_t)gk * N + gn : B, in);
                    }
                } else {                                /* B rows not 16-byte aligned */
                    const int gn = n0 + ptid;
                    const bool nin = gn < N;
#pragma unroll 1
                    for (int kr = 0; kr < BK; ++kr) {
                        const int gk = k0 + kr;
                        const bool in = nin && gk < K;
                        cp_async4(sb + (unsigned)(kr * BSTRIDE * 4 + ptid * 4),
                                  in ? B + (size_t)gk * N + gn : B, in);
                    }
                }
                cp_async_commit();
                if (it >= LAG) {
                    cp_async_wait<LAG>();               /* k-tile it - LAG landed (this thread) */
                    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                    mbar_arrive(bars + 8 * ((it - LAG) % STAGES));
                }
            }
        }
        cp_async_wait<0>();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        for (int j = it > LAG ? it - LAG : 0; j < it; ++j)
            mbar_arrive(bars + 8 * (j % STAGES));
    } else {
        /* ---------------- consumers ---------------- */
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(CONSUMER_REGS));
        const int cw = wg - 1;
        const int warp = (tid >> 5) & 3, lane = tid & 31;
        const int g = lane >> 2, t = lane & 3;
        const int nl = cw * 64 + warp * 16 + 2 * g;     /* fragment rows g, g+8 -> columns nl, nl+1 */
        const unsigned foff = (unsigned)((t * BSTRIDE + nl) * 4);
        const bool vec_c = (N & 1) == 0;
        int it = 0;
        for (int tile = blockIdx.x; tile < ntiles; tile += tstep) {
            const int m0 = (tile / ntn) * BM, n0 = (tile % ntn) * BN;
            float acc[128];
#pragma unroll
            for (int j = 0; j < 128; ++j)
                acc[j] = 0.f;
            for (int kt = 0; kt < ktiles; ++kt, ++it) {
                const int s = it % STAGES;
                mbar_wait(bars + 8 * s, (it / STAGES) & 1);
                const unsigned sa = base + s * STAGE_BYTES, sb = sa + A_BYTES + foff;
                unsigned x[8], y[8];
#pragma unroll
                for (int kk = 0; kk < 2; ++kk) {        /* k = 8kk + t and 8kk + t + 4 */
                    lds64(sb + (8 * kk) * BSTRIDE * 4, x[4 * kk + 0], x[4 * kk + 1]);
                    lds64(sb + (8 * kk + 4) * BSTRIDE * 4, x[4 * kk + 2], x[4 * kk + 3]);
                }
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                wgmma_rs_n256(acc, x + 0, make_desc(sa + 0 * 32));
                wgmma_rs_n256(acc, x + 4, make_desc(sa + 1 * 32));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > 0)                             /* k-tile it-1 fully read: release */
                    mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
#pragma unroll
                for (int kk = 2; kk < 4; ++kk) {
                    lds64(sb + (8 * kk) * BSTRIDE * 4, y[4 * kk - 8], y[4 * kk - 7]);
                    lds64(sb + (8 * kk + 4) * BSTRIDE * 4, y[4 * kk - 6], y[4 * kk - 5]);
                }
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
                wgmma_rs_n256(acc, y + 0, make_desc(sa + 2 * 32));
                wgmma_rs_n256(acc, y + 4, make_desc(sa + 3 * 32));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));

            /* D(n, m) -> C(m, n): d[4j], d[4j+2] = C(m, n..n+1); d[4j+1], d[4j+3] = C(m+1, ..) */
            const int n = n0 + nl;
#pragma unroll
            for (int j = 0; j < 32; ++j) {
                const int m = m0 + 8 * j + 2 * t;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    if (m + h >= M)
                        continue;
                    float* p = C + (size_t)(m + h) * N + n;
                    const float v0 = acc[4 * j + h], v1 = acc[4 * j + 2 + h];
                    if (vec_c && n + 1 < N) {
                        *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
                    } else {
                        if (n < N)
                            p[0] = v0;
                        if (n + 1 < N)
                            p[1] = v1;
                    }
                }
            }
        }
    }
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
