/*
+++
name = "ffma_small"
title = "Small, latency-bound GEMMs: 32-column tiles, 64-k stages, K split inside the block and by shape"
summary = "Shapes of a few hundred rows, columns and k are bound by latency, not throughput: the whole product is about a microsecond of FFMA, and the time is the chain of dependent steps (global round trips, barriers, split-K slices waiting on each other). So: 32-column tiles of 16-64 rows (many CTAs); 32 or 64 k per cp.async stage, the next stage in flight while this one's FFMAs run (few round trips); K split inside the block over groups of 64 threads, whose partial tiles are summed through shared memory in a fixed order (no workspace, no waiting on other CTAs); and K split across CTAs only where the tiles leave SMs idle, each slice writing its tile to a workspace and the last CTA to arrive summing them in slice order (deterministic, no second kernel)."
source = "cuBLAS's small-shape FFMA kernels (32×32 tiles, split-K, at 256³); the CUDA programming guide's multistage cp.async pipeline; the seeds' tiled kernel, whose 16×16 tiles with no split beat the big-tile rungs at 256³: few dependent round trips decide a kernel this short"
role = "rung"
order = 25
dtypes = ["float32", "int32"]
precision = "fp32"

[params]             # the first value of each list is the default
bm = [32, 16, 64]
kg = [4, 2]
ks = [64, 32]
splitk = [1, 2, 4, 8, 16, 32]

[descriptions]
bm = "tile rows (tiles are 32 columns wide): 2, 4 or 8 rows per thread"
kg = "groups of 64 threads splitting each stage's k, summed in shared memory (block = 64 * kg threads)"
ks = "k rows per cp.async stage (two stages: more were slower)"
splitk = "CTAs sharing a tile's K through a workspace, the last summing in order (chosen by the shape)"

[derived]
tiles = "cdiv(M, bm) * cdiv(N, 32)"
stage_words = "bm * (ks + 4) + ks * 32"        # A as it lies, rows padded by 4 words; B's 32 columns
red_words = "kg * bm * 32"                     # the groups' partial tiles, for the sum
smem = "4 * max(2 * stage_words, red_words)"   # the file's STAGES = 2
# split K across CTAs only where the tiles leave SMs idle (under 2 CTAs per SM) and K >= 512,
# every slice keeping >= 128 k (2 stages of 64; a floor of 256 or 512 k was not faster);
# K under 512 is never split (256³ split in two was slower); up to 32 slices, since the last
# CTA's sum loads many slices at once (benchmarks/NOTES.md, rung 32 ffma_small)
split_want = "1 if K < 512 else max(1, min(32, (2 * SMS) // tiles, K // 128))"
split_pick = "32 if split_want >= 32 else 16 if split_want >= 16 else 8 if split_want >= 8 else 4 if split_want >= 4 else 2 if split_want >= 2 else 1"
qpt = "cdiv(bm * 8, 64 * kg)"                  # 16-byte quads of the summed tile per thread
# workspace (split-K): per-tile arrival counters (256-byte aligned), then each slice's
# partial tile, qpt quads per thread
workspace = "0 if splitk == 1 else roundup(4 * tiles, 256) + splitk * tiles * qpt * 64 * kg * 16"

[chosen]             # the value a run that leaves it to the shape (auto) gets
splitk = "split_pick"

[[constraints]]
check = "(bm == 16 or bm == 32 or bm == 64) and (kg == 2 or kg == 4) and (ks == 32 or ks == 64)"
reason = "bm must be 16, 32 or 64, kg 2 or 4, ks 32 or 64"

[[constraints]]
check = "ks // kg >= 8"
reason = "each group takes ks / kg = {ks // kg} k of a stage: at least 8 (two steps of 4)"

[[constraints]]
check = "splitk == split_pick"
reason = "{tiles} tiles of {bm} rows with K = {K} take split-K {split_pick} (chosen by the shape: CTAs share a tile's K only where the tiles make under 2 CTAs per SM and K >= 512, >= 128 k a slice)"

[[constraints]]
check = "smem <= 227 * 1024"
reason = "{smem} bytes of shared memory: more than a block may have"

[launch]
grid = ["cdiv(N, 32)", "cdiv(M, bm) * splitk"]
block = ["64 * kg", 1]
shared = "smem"
workspace = "workspace"
+++
*/
/*
 * ffma_small.cu -- C (M x N) = A (M x K) . B (K x N), row-major, FP32 (int32 wrapping), for
 * shapes too small to fill the GPU with the big-tile rungs.
 *
 * Technique: latency first. At 256^3 the whole product is about a microsecond of FFMA on 132
 * SMs, and the seeds' tiled kernel (16x16 tiles, one output per thread, no split) ran
 * as fast as cuBLAS where every big-tile rung was slower (benchmarks/NOTES.md, rung 32). A
 * kernel this short is decided by its chain of dependent steps: global round trips (each
 * a good part of a microsecond from L2 or DRAM), barriers, and serial split-K waits, not by
 * FFMA throughput. So:
 *   - small tiles, 32 columns by BM = 16, 32 or 64 rows: 64-256 CTAs at 256^2 where
 *     ffma_regdb's 64x128 tiles make 8 and must split K across CTAs (serially, in order);
 *   - few round trips: stages of KS = 64 (or 32) k, A as it lies and B's 32 columns by
 *     16-byte cp.async, the next stage in flight while this one's FFMAs run: K/64 dependent
 *     copies where ffma_regdb's 8-deep k-tiles take K/8 steps (deeper pipelines, 4 stages
 *     issued before the first FFMA, were slower: more copies ahead of the first FFMA, and
 *     the round trips were no longer what bound it);
 *   - K split inside the block: KG groups of 64 threads take each stage's k in KG slices
 *     and add their partial tiles through shared memory at the end, in group order
 *     (deterministic, no workspace, no second kernel, no waiting on other CTAs);
 *   - K split across CTAs only where the tiles leave SMs idle (under 2 CTAs per SM, K >= 512,
 *     >= 128 k a slice; the header picks SPLITK from the shape): SPLITK CTAs take
 *     whole stages of a tile's K, write their summed tiles to a workspace and count
 *     themselves in; the last to arrive adds the slices in slice order and stores C
 *     (splitk_arrive in lab_ptx.cuh, as ffma_regdb: deterministic, no second kernel).
 *
 * Thread layout: in a group of 64 threads, tc = t % 8 owns columns 4tc..4tc+3 of the tile,
 * tr = t / 8 owns rows tr, tr+8, .. (BM/8 of them). Per 4 k: 4 LDS.128 of B (row k..k+3,
 * the warp's 8 tc read 128 contiguous bytes, a broadcast over tr) and BM/8 LDS.128 of A (4
 * consecutive k of one row; the warp's 4 tr read 4 consecutive rows at a pitch of KS+4
 * words, 4 banks apart: conflict-free), then 16*BM/8 FFMAs.
 *
 * Copies: a stage is BM x KS of A ([m][k], pitch KS+4 words) and KS x 32 of B ([k][n],
 * pitch 32), copied by all 64*KG threads: 16 bytes per copy where A's rows (K % 4 == 0) or
 * B's (N % 4 == 0) are 16-byte aligned, else 4 bytes. Outside M, N or K the copies write
 * zeros (cp.async src-size 0), so every FFMA of an edge tile is harmless and the stores are
 * the only bounds checks of the main loop. Pipeline: STAGES-1 stages before the loop, one
 * more per stage computed, one barrier per stage (the buffer refilled at stage s is the one
 * computed at s-1). STAGES is 2 (the header's shared memory assumes it).
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC   element and accumulator types                                (default float)
 *   BM          16, 32 or 64: tile rows                                      (default 32)
 *   KG          2 or 4: groups of 64 threads splitting K in the block          (default 4)
 *   KS          32 or 64: k rows per stage                                    (default 64)
 *   SPLITK      1, 2, 4, 8, 16 or 32: CTAs sharing a tile's K (grid.y = M-tiles x SPLITK) (default 1)
 *   STAGES      stages of the pipeline, fixed at 2 (not a parameter: above)
 * Launch geometry (header): grid (ceil(N/32), ceil(M/BM)*SPLITK), block 64*KG, dynamic shared
 * memory 4 * max(2*(BM*(KS+4) + 32*KS), KG*BM*32) bytes; with SPLITK > 1 a workspace of
 * per-tile counters (zero between launches) and SPLITK partial tiles per tile. Needs sm_80 or newer (cp.async).
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef BM
#define BM 32
#endif
#ifndef KG
#define KG 4
#endif
#ifndef KS
#define KS 64
#endif
#ifndef SPLITK
#define SPLITK 1
#endif
#define STAGES 2
#if (BM != 16 && BM != 32 && BM != 64) || (KG != 2 && KG != 4) || (KS != 32 && KS != 64) \
    || KS / KG < 8 || (SPLITK & (SPLITK - 1)) || SPLITK > 32
#error "inconsistent parameters"
#endif
#define BN 32
#define NT (64 * KG)
#define RM (BM / 8)                    /* rows per thread */
#define AP (KS + 4)                    /* A's row pitch in a stage (words) */
#define STAGE_WORDS (BM * AP + KS * BN)
#define KPG (KS / KG)                  /* k of a stage per group */
#define VEC vec4_of<ELEM>::type

extern "C" __global__ __launch_bounds__(NT, 1)   /* (NT) alone: ptxas capped a 4-stage build at 96 registers and spilled */
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    /* a launch that does not match the header would overflow the stages or the sum */
    if (blockDim.x != NT || 4u * (unsigned)max(STAGES * STAGE_WORDS, KG * BM * BN) > dyn_smem_bytes())
        __trap();
    ELEM* const sm = reinterpret_cast<ELEM*>(smem_raw);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem_raw);
    const int tid = threadIdx.x;
    const int g = tid >> 6, t = tid & 63, tc = t & 7, tr = t >> 3;
    const int mtiles = (M + BM - 1) / BM;
    const int mt = blockIdx.y % mtiles, z = blockIdx.y / mtiles;   /* M-tile, K slice */
    const int n0 = blockIdx.x * BN, m0 = mt * BM;
    const bool avec = (K & 3) == 0, bvec = (N & 3) == 0;
    /* slice z: whole stages [s0, s1) of the tile's K, floor or ceil of nstages / SPLITK each
     * (the header splits only where K >= 128 * SPLITK: no slice is empty) */
    const int nstages = (K + KS - 1) / KS;
    const int s0 = z * nstages / SPLITK, s1 = (z + 1) * nstages / SPLITK, nst = s1 - s0;

    /* the slice's stage s into buffer s % STAGES: A rows m0.., k (s0+s)*KS..; B rows
     * (s0+s)*KS.., columns n0.. */
    auto load_stage = [&](int s) {
        const int k0 = (s0 + s) * KS;
        const unsigned abuf = sbase + 4u * (unsigned)((s % STAGES) * STAGE_WORDS);
        const unsigned bbuf = abuf + 4u * (unsigned)(BM * AP);
        if (avec) {
            for (int e = tid; e < BM * (KS / 4); e += NT) {
                const int r = e / (KS / 4), kq = 4 * (e % (KS / 4));
                const bool in = m0 + r < M && k0 + kq < K;      /* K % 4 == 0: whole quad */
                cp_async16(abuf + 4u * (unsigned)(r * AP + kq),
                           in ? A + (size_t)(m0 + r) * K + k0 + kq : A, in);
            }
        } else {
            for (int e = tid; e < BM * KS; e += NT) {
                const int r = e / KS, kk = e % KS;
                const bool in = m0 + r < M && k0 + kk < K;
                cp_async4(abuf + 4u * (unsigned)(r * AP + kk),
                          in ? A + (size_t)(m0 + r) * K + k0 + kk : A, in);
            }
        }
        if (bvec) {
            for (int e = tid; e < KS * (BN / 4); e += NT) {
                const int kk = e / (BN / 4), nq = 4 * (e % (BN / 4));
                const bool in = k0 + kk < K && n0 + nq < N;     /* N % 4 == 0: whole quad */
                cp_async16(bbuf + 4u * (unsigned)(kk * BN + nq),
                           in ? B + (size_t)(k0 + kk) * N + n0 + nq : B, in);
            }
        } else {
            for (int e = tid; e < KS * BN; e += NT) {
                const int kk = e / BN, nn = e % BN;
                const bool in = k0 + kk < K && n0 + nn < N;
                cp_async4(bbuf + 4u * (unsigned)(kk * BN + nn),
                          in ? B + (size_t)(k0 + kk) * N + n0 + nn : B, in);
            }
        }
    };

    ACC acc[RM][4];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            acc[i][j] = (ACC)0;

#pragma unroll
    for (int p = 0; p < STAGES - 1; ++p) {
        if (p < nst)
            load_stage(p);
        cp_async_commit();                 /* empty groups keep the count uniform */
    }
    for (int s = 0; s < nst; ++s) {
        cp_async_wait<STAGES - 2>();
        __syncthreads();                   /* stage s is in; buffer (s-1) % STAGES is free */
        if (s + STAGES - 1 < nst)
            load_stage(s + STAGES - 1);
        cp_async_commit();
        const ELEM* as = sm + (s % STAGES) * STAGE_WORDS + tr * AP + g * KPG;
        const ELEM* bs = sm + (s % STAGES) * STAGE_WORDS + BM * AP + g * KPG * BN + 4 * tc;
#pragma unroll
        for (int k4 = 0; k4 < KPG; k4 += 4) {
            ACC b[4][4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const VEC bv = *reinterpret_cast<const VEC*>(bs + (k4 + j) * BN);
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    b[j][e] = (ACC)vget(bv, e);
            }
#pragma unroll
            for (int i = 0; i < RM; ++i) {
                const VEC av = *reinterpret_cast<const VEC*>(as + 8 * i * AP + k4);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const ACC a = (ACC)vget(av, j);
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        acc[i][e] += a * b[j][e];
                }
            }
        }
    }

    /* the KG partial tiles through shared memory, summed in group order */
    cp_async_wait<0>();
    __syncthreads();                       /* everyone is done with the stages */
    ACC* const red = reinterpret_cast<ACC*>(smem_raw);     /* [KG][BM][BN] */
#pragma unroll
    for (int i = 0; i < RM; ++i) {
        ACC* p = red + (g * BM + tr + 8 * i) * BN + 4 * tc;
#pragma unroll
        for (int e = 0; e < 4; ++e)
            p[e] = acc[i][e];
    }
    __syncthreads();
    constexpr int QUADS = BM * (BN / 4);           /* 16-byte quads of the tile */
    constexpr int QPT = (QUADS + NT - 1) / NT;     /* per thread: quad tid + i*NT */
    ACC v[4 * QPT];
#pragma unroll
    for (int i = 0; i < QPT; ++i) {
        const int q = tid + i * NT;
#pragma unroll
        for (int e = 0; e < 4; ++e)
            v[4 * i + e] = (ACC)0;
        if (QUADS % NT == 0 || q < QUADS) {
            const int r = q / (BN / 4), c = 4 * (q % (BN / 4));
#pragma unroll
            for (int gg = 0; gg < KG; ++gg)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    v[4 * i + e] += red[(gg * BM + r) * BN + c + e];
        }
    }
#if SPLITK > 1
    /* this slice's tile to the workspace; the CTA that arrives last sums the slices in order,
     * all of v at once (PARTS = 1: few accumulators, a latency-bound sum), the loads of up to
     * 16 / QPT slices in flight together (<= 64 registers): one L2 round trip per slice
     * would make the sum a long chain at many slices (benchmarks/NOTES.md, the split-K
     * epilogues of ffma_wide and ffma_small) */
    constexpr int AHEAD = SPLITK - 1 < 16 / QPT ? SPLITK - 1 : (16 / QPT > 1 ? 16 / QPT : 1);
    if (!splitk_fixup<4 * QPT, NT, 1, AHEAD>(v, workspace, mtiles * gridDim.x, mt * gridDim.x + blockIdx.x,
                                             SPLITK, z, tid))
        return;
#endif
#pragma unroll
    for (int i = 0; i < QPT; ++i) {
        const int q = tid + i * NT;
        const int r = q / (BN / 4), c = 4 * (q % (BN / 4));
        const int m = m0 + r, n = n0 + c;
        if ((QUADS % NT != 0 && q >= QUADS) || m >= M)
            continue;
        ELEM* out = C + (size_t)m * N + n;
        if (bvec && n < N) {                       /* N % 4 == 0: the whole quad is in */
            VEC o;
            o.x = (ELEM)v[4 * i]; o.y = (ELEM)v[4 * i + 1]; o.z = (ELEM)v[4 * i + 2]; o.w = (ELEM)v[4 * i + 3];
            *reinterpret_cast<VEC*>(out) = o;
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (n + e < N)
                    out[e] = (ELEM)v[4 * i + e];
        }
    }
}
