/*
+++
name = "skinny"
title = "Skinny GEMM (M or N ≤ 64) as a stream of its large operand: 16-byte loads kept in flight by a rolling register prefetch, the small operand staged by cp.async (A transposed, or a swizzled B) and read as broadcasts, K split over the warps of a block, serial split-K across blocks only where the grid is short."
source = "cuBLAS gemv / split-K GEMV kernels (one pass over the matrix, K split over threads and reduced in a fixed order); CUTLASS serial split-K (as in ffma_wide.cu); the seeds' effective-bandwidth lesson: a GEMM with M or N small is a copy of its large operand"
role = "rung"
order = 24
dtypes = ["float32", "int32"]
precision = "fp32"

[params]             # the first value of each list is the default
tile = [16, 32]      # rows of A per columns-path block (M-group); 32 also allows 32-column rows-path tiles
unroll = [8, 4]      # depth of the load rings (16-byte loads of the streamed operand in flight)
fill = [2, 1]        # blocks per SM (132 SMs) the grid aims at before K is split across blocks

[derived]
cols = "M <= N"      # columns path (B streamed); else the rows path (A streamed)
# columns path: blocks of 32 columns x tile rows of A, the M-group fastest in grid.x
cblocks = "cdiv(M, tile) * cdiv(N, 32)"
# rows path: rtn columns of B per block (N-tiles fastest in grid.x), 4 or 2 rows per lane
rtn = "1 if N == 1 else 4 if N <= 4 else 8 if N <= 8 else 16 if (N <= 16 or tile == 16) else 32"
rnt = "cdiv(N, rtn)"
# rows per lane: 4 below 16 columns, 2 at 32; at 16, 4 where A is tall: each B word read from
# shared memory then feeds 4 rows, not 2 (H200: 8192x16x8192 99 -> 108% of cuBLAS, 16384x16x4096
# 125 -> 147%), where its blocks bl4 are >= 66 (a short A keeps 2: 3000x16x5000) and fill their
# waves (one block per SM) within 5% as well as those of 2 rows, bl2, do (20000x16x1000: 157
# blocks, 1.2 waves, lost 95 -> 85%); a grid of one wave or less is split across K anyway.
# wr4, wr2: wr below at rpw 16 and 8 (at rtn >= 16 it is 4 or 8). The kernel tells which from
# its grid.
tgt = "fill * 132"
wr4 = "8 if cdiv(M, 128) * rnt * 4 >= 3 * tgt else 4"
wr2 = "8 if cdiv(M, 64) * rnt * 4 >= 3 * tgt else 4"
bl4 = "cdiv(M, 16 * wr4) * rnt"
bl2 = "cdiv(M, 8 * wr2) * rnt"
rr = "4 if rtn < 16 or (rtn == 16 and bl4 >= 66 and (bl4 <= 132 or 20 * bl4 * cdiv(bl2, 132) >= 19 * bl2 * cdiv(bl4, 132))) else 2"
rpw = "4 * rr"                                 # rows per warp: 4 row groups x rr
# warps along rows (the other 8 / wr split K in the block): the most that keep >= 3/4 of tgt
# blocks; at least 4 at rtn >= 16 (bounds a B stage to the shared memory below)
wr = "8 if cdiv(M, 8 * rpw) * rnt * 4 >= 3 * tgt else 4 if (cdiv(M, 4 * rpw) * rnt * 4 >= 3 * tgt or rtn >= 16) else 2 if cdiv(M, 2 * rpw) * rnt * 4 >= 3 * tgt else 1"
blocks = "cblocks if cols else cdiv(M, wr * rpw) * rnt"
# serial split-K slices (grid.y): only on grids short of 3/4 of tgt, >= 512 k per slice
splits = "1 if (blocks * 4 >= 3 * tgt or blocks > 1024) else max(1, min((tgt + blocks // 2) // blocks, K // 512, 32))"
smem = "8192 * unroll"                         # bytes: two stages of the largest instantiation

[[constraints]]
check = "min(M, N) <= 64"
reason = "made for skinny shapes (M or N ≤ 64); use ffma_wide"

[[constraints]]
check = "(tile == 16 or tile == 32) and (unroll == 4 or unroll == 8) and fill >= 1"
reason = "tile must be 16 or 32, unroll 4 or 8, fill ≥ 1"

[launch]
grid = ["blocks", "splits"]
block = ["8 if cols else 32 * wr", "32 if cols else 8 // wr"]
shared = "smem"
+++
*/
/*
 * skinny.cu -- C (M x N) = A (M x K) . B (K x N), row-major, for the memory-bound regime
 * where M or N is at most 64 (matrix-vector and skinny products). FP32 and int32 (wrapping).
 *
 * Technique: such a product is a copy of its large operand with a little arithmetic on the
 * way (effective bandwidth = (M*K + K*N + M*N) * 4 bytes / time, the seeds' lesson). What
 * decides it is that the large operand is read exactly once, by 16-byte loads, with enough of
 * them in flight on every SM to cover DRAM latency (Little's law: ~3 TB/s x ~1 us = ~3 MB in
 * flight, ~23 KB per SM). The small operand is staged in shared memory once per block and read
 * as broadcasts. K is split over the warps of a block (reduced through shared memory) and over
 * blocks only where the grid would leave SMs idle (serial split-K, deterministic). Sources:
 * cuBLAS's gemv and split-K GEMV kernels, CUTLASS serial split-K (ffma_wide.cu), the
 * rolling (modulo-scheduled) prefetch of streaming kernels. Written anew here.
 *
 * Why not 19's tiles: at M = 1 a 256x128 tile is 255/256 padding, and at M = 16 or N = 7 any
 * square-ish tile re-reads the large operand from L2 per tile column and starves DRAM of
 * requests; here each element of the large operand is loaded by exactly one thread, once.
 *
 * Two paths, chosen at run time from the shape (the header's [launch] says the same):
 *
 * Columns path (M <= N; B is the large operand), block (8, 32) = 256 threads:
 *   thread (x, y) owns the 4 columns col0 + 4x of a 32-column strip and k-lane y (K split 32
 *   ways in the block): step u = 4g + j of chunk c reads row kbeg + c*KC + 128g + 4y + j, so a
 *   thread takes its rows in groups of 4 consecutive k. A warp reads 4 rows of B, 128 bytes
 *   each, per 16-byte load (LDG.128; 4 scalar loads, merged in L1, when N % 4 != 0). The
 *   block's M-group of A (TMB = 4, 8, 16 or 32 rows, from the rows left in the group of TILE)
 *   is copied per chunk of KC = 32*U rows into shared memory as it lies, As[m][k], by 16-byte
 *   cp.async (a warp copies 512 contiguous bytes of one row; 4-byte copies when K % 4 != 0,
 *   A's rows then being unaligned), double-buffered, one barrier per chunk. Per group of 4 k:
 *   4 loads of B, TMB LDS.128 of A (4 consecutive k of one row; the warp's 4 k-lanes read 64
 *   contiguous bytes, a broadcast over x), 16*TMB FMAs. B's ring of U registers rolls: each
 *   is reloaded with the next chunk's row right after its last use, so U loads per thread
 *   stay in flight, across the barriers too. End: shuffles add the 4 k-lanes of a warp,
 *   shared memory the 8 warps in a fixed order. Grid.x = ceil(M/TILE) * ceil(N/32), M-group
 *   fastest: the groups of one strip run together and B comes from DRAM once (the other
 *   groups hit L2).
 *   Why A as it lies: the first version stored A transposed (As[k][m]) by 4-byte copies, 32
 *   per thread per chunk at TMB = 16, twice the loads of B: ncu on the H200 at 16x8192x8192
 *   showed the warps stalled on the LSU queue (lg_throttle) as much as on B's data. 16-byte
 *   copies are a quarter of those instructions, which also paid for a ring twice as deep at
 *   TMB = 16 (16 loads, 64 KB per SM in flight): 115.9 -> 88.3 us there (59 -> 79% of the
 *   measured copy bandwidth; benchmarks/NOTES.md, round 16).
 *
 * Rows path (M > N; A is the large operand), block (32*WR, 8/WR):
 *   lane = (kl, rg): kl = lane % 8 reads A[m][k + 4kl .. +3] (LDG.128: 8 lanes = one 128-byte
 *   line per row; 4 scalar loads, merged in L1, when K % 4 != 0), rg = lane / 8 one of 4 row
 *   groups; a lane holds R rows (4; 2 at TN = 32, and at TN = 16 unless A is tall: the
 *   header's rr) x TN columns (TN = 1, 4, 8, 16, or 32 at
 *   TILE = 32, from N; wider N takes ceil(N/TN) N-tiles, tile fastest in grid.x so that A's
 *   re-reads come from L2). WR warps along rows, WK = 8/WR along K (interleaved 32-k steps).
 *   The chunk of B (WK*32*U rows x TN) is copied by cp.async (16 bytes when N % 4 == 0) into a
 *   swizzled layout [step][j][q][kl ^ c(j, q)] (k = 32 step + 4 kl + j, n = 4q + e): the 8
 *   k-lanes of a read hit 8 distinct 16-byte slots (a broadcast over the 4 row groups: one
 *   wavefront per LDS.128) and the copies of a warp land on distinct banks too. Per LDS.128 of
 *   B: 4*R FMAs. A's ring (R*U registers of 16 bytes) rolls like B's above. End: shuffles over
 *   the 8 k-lanes, then the WK warps through shared memory in a fixed order. WR: the most of
 *   8, 4, 2, 1 that keeps >= 3/4 of FILL*132 blocks (>= 4 at TN >= 16).
 *
 * Split-K across blocks (both paths): grid.y = S slices of whole chunks; S > 1 only when the
 * grid has < 3/4 of FILL*132 blocks (then S ~ FILL*132 / blocks, <= 32, >= 512 k a slice).
 * Slice 0 stores (C may hold NaN); slice z > 0 waits for tile_counter[tile] == z, adds its part
 * to C (L2 loads and stores) and passes the counter on; the last slice resets it to 0. The
 * slice is grid.y, the slowest-varying index: a waiting block never holds a slot that an
 * earlier slice still needs (blocks are dispatched in increasing linear index).
 *
 * Full chunks and the tail: a chunk that lies wholly in the slice is fetched without bounds
 * checks (rows past M and columns past N read clamped, valid addresses; their accumulators are
 * never stored), and only a slice's last, partial chunk is loaded with checks, without the
 * prefetch. This keeps the hot loops at >= 77 % FFMA (ncu's executed instructions: 82 % at
 * 16x8192x8192 before the columns path's 16-byte A copies, fewer instructions since).
 *
 * Register budget: one block of 256 threads per SM, <= 255 registers (MINB = 1). At two
 * blocks per SM (<= 128) ptxas spilled a few bytes in the combined kernel however shallow the
 * rings, so the rings are deep instead: U_* below (16 loads per thread at up to 16 rows, 12
 * at 16 rows in the int32 and sm_80 builds, 4 at 32 rows; rows path R*U = 16, 12 at TN = 16
 * with 4 rows, 8 at TN = 32),
 * i.e. 32-64 KB per SM in flight from 8 warps. TILE = 32: 32-row M-groups (half of B's L2 re-reads at M = 64) and
 * 32-column rows-path tiles (half of A's at N = 64); TILE = 16: 16-row groups, TN <= 16.
 *
 * Tails: loads past K or the slice are zero (cp.async src-size 0, or no load), loads past M or
 * N are clamped to valid addresses and never stored; stores are guarded: any M, N, K. int32: ACC = unsigned, wrapping
 * like the other rungs. Deterministic: the reduction order is fixed everywhere.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types                                 (default float)
 *   TILE       16 or 32: rows per M-group; 32 also allows TN = 32 (above)     (default 16)
 *   UNROLL     8 or 4: scales the load-ring depths U_*                         (default 8)
 *   FILL       read by the header only (blocks per SM the grid aims at)       (default 2)
 * Launch geometry (header): columns path grid (ceil(M/TILE)*ceil(N/32), S), block (8, 32);
 * rows path grid (ceil(M/(WR*4R))*ceil(N/TN), S), block (32*WR, 8/WR). Dynamic shared memory
 * 8192*UNROLL bytes (two stages of the largest instantiation; reused for the reductions).
 * Needs sm_80 or newer (cp.async).
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef TILE
#define TILE 16
#endif
#ifndef UNROLL
#define UNROLL 8
#endif
#ifndef FILL
#define FILL 2
#endif
#if (TILE != 16 && TILE != 32) || (UNROLL != 4 && UNROLL != 8) || FILL < 1
#error "inconsistent parameters"
#endif
#define NT 256
#define MAX_TILES 1024                 /* split-K only on grids of < 3/4 * FILL*132 blocks */
#define SMEM_WORDS (2048 * UNROLL)    /* = the header's smem / 4: two stages */
#define VEC vec4_of<ELEM>::type

/* Ring depths (loads in flight per thread) of each instantiation at UNROLL = 8 (halved at 4):
 * deep where the accumulators are few. One block of 256 threads per SM (<= 255 registers):
 * with 8 warps per SM the rings must hold 32-64 KB per SM in flight on their own. */
#define MINB 1
#define DEPTH(d) ((d) * UNROLL / 8 > 0 ? (d) * UNROLL / 8 : 1)
#define CDEPTH(d) (DEPTH(d) < 4 ? 4 : DEPTH(d))   /* columns path: groups of 4 k */
#define U_C4 CDEPTH(16)                /* columns path, TMB = 4: 16 accumulators */
#define U_C8 CDEPTH(16)                /*   TMB = 8: 32 */
#define U_C16 (LEAN && UNROLL == 8 ? 12 : CDEPTH(16))   /*   TMB = 16: 64 */
#define U_C32 CDEPTH(4)                /*   TMB = 32: 128 (TILE = 32) */
#define U_R1 DEPTH(4)                  /* rows path, TN = 1, R = 4 (R*U loads in flight) */
#define U_R4 DEPTH(4)                  /*   TN = 4, R = 4 */
#define U_R8 DEPTH(4)                  /*   TN = 8, R = 4 */
#define U_R16 DEPTH(4)                 /*   TN = 16, R = 2 */
#define U_R16T DEPTH(3)                /*   TN = 16, R = 4 (tall A, the header's rr; 4 spilled) */
#define U_R32 DEPTH(2)                 /*   TN = 32, R = 2: 64 accumulators (TILE = 32) */

/* The 16-deep ring at TMB = 16 fits 255 registers without spills in the FP32 build for sm_90
 * (79% of the H200's copy at 16x8192x8192, against 68% with 12); the int32 build (IMADs) and
 * sm_80's spill 4-16 bytes with it, none with 12: they take 12 (LEAN). */
template <class T> struct IsFloat { static constexpr bool value = false; };
template <> struct IsFloat<float> { static constexpr bool value = true; };
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LEAN (!IsFloat<ELEM>::value)
#else
#define LEAN true
#endif

__device__ unsigned tile_counter[MAX_TILES];     /* split-K order; 0 between launches */


__device__ __forceinline__ VEC vzero()
{
    VEC v;
    v.x = v.y = v.z = v.w = (ELEM)0;
    return v;
}


/* [kbeg, kend) of slice z: whole chunks of kc rows, ceil(chunks / splits) per slice */
__device__ __forceinline__ void slice_range(int K, int kc, int z, int splits, int& kbeg, int& kend)
{
    const long long chunks = ((long long)K + kc - 1) / kc;
    const long long per = (chunks + splits - 1) / splits;
    const long long b = min((long long)K, (long long)z * per * kc);
    kbeg = (int)b;
    kend = (int)min((long long)K, b + per * kc);
}

/* Serial split-K, before touching C: slice z > 0 waits until slice z - 1 has added its part. */
__device__ __forceinline__ void slice_wait(int tile, int z, int tid)
{
    if (z > 0) {
        if (tid == 0) {
            while (*reinterpret_cast<volatile unsigned*>(&tile_counter[tile]) != (unsigned)z)
                __nanosleep(64);
            __threadfence();
        }
        __syncthreads();
    }
}

/* ... and after: pass the tile to slice z + 1 (the last slice resets the counter to 0). */
__device__ __forceinline__ void slice_pass(int tile, int z, int splits, int tid)
{
    if (splits > 1) {
        __threadfence();
        __syncthreads();
        if (tid == 0)
            atomicExch(&tile_counter[tile], z + 1 == splits ? 0u : (unsigned)(z + 1));
    }
}

__device__ __forceinline__ void put(ELEM* c, ACC v, bool add)
{
    if (add)
        v += (ACC)__ldcg(c);
    __stcg(c, (ELEM)v);
}

/* A compile-time bool for the chunk bodies: full = the chunk being fetched lies wholly in the
 * slice (no bounds checks: rows past M and columns past N read clamped, valid addresses, and
 * their accumulators are never stored); else every load is checked and zero outside. */
template <bool F> struct Full { static constexpr bool value = F; };

/* ---- columns path: M <= N, B streamed -------------------------------------------------- */

template <int TMB, int U, bool VB>     /* VB: N % 4 == 0, B read by 16-byte loads */
__device__ __forceinline__ void cols_path(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* __restrict__ C, int M, int N, int K, int m0, int col0,
                                          int tile, int z, int splits, unsigned char* smem_raw)
{
    constexpr int KC = 32 * U;                     /* k rows per chunk */
    constexpr int STAGE = TMB * KC;                /* words per stage: As[m][k], unpadded */
    constexpr int QPR = KC / 4;                    /* 16-byte quads per row of a stage */
    constexpr int AQT = TMB * QPR / NT;            /* quads of A per thread per chunk */
    static_assert(U % 4 == 0, "a thread takes its k rows in groups of 4");
    static_assert(TMB * QPR % NT == 0, "A copies must split evenly");
    static_assert(2 * STAGE <= SMEM_WORDS && 8 * TMB * 32 <= SMEM_WORDS, "shared memory");

    ELEM* const As = reinterpret_cast<ELEM*>(smem_raw);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem_raw);
    const int x = threadIdx.x, y = threadIdx.y;
    const int tid = y * 8 + x;
    const int col = col0 + 4 * x;
    int kbeg, kend;
    slice_range(K, KC, z, splits, kbeg, kend);
    const int span = max(kend - kbeg, 0);          /* k rows of this slice */
    const int nchunks = (span + KC - 1) / KC, nfull = span / KC;
    const bool kvec = (K & 3) == 0;                /* A's rows 16-byte aligned */

    /* A copies: quad e = tid + i*NT of the stage is row e / QPR (past M: row M - 1, never
     * stored), k 4 * (e % QPR) .. +3 of the chunk; a warp copies 512 contiguous bytes */
    auto copy_a = [&](int c, auto full) {
        const int rem = span - c * KC;             /* k rows of this chunk in the slice */
        const unsigned dst0 = sbase + 4u * (unsigned)((c & 1) * STAGE);
#pragma unroll
        for (int i = 0; i < AQT; ++i) {
            const int e = tid + i * NT;
            const int am = e / QPR, kq = 4 * (e % QPR);
            const ELEM* src = A + ((unsigned)min(m0 + am, M - 1) * (unsigned)K
                                   + (unsigned)(kbeg + c * KC + kq));
            const unsigned dst = dst0 + 4u * (unsigned)(am * KC + kq);
            if (kvec) {
                if (decltype(full)::value)
                    cp_async16_full(dst, src);
                else
                    cp_async16(dst, kq < rem ? src : A, kq < rem);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (decltype(full)::value) {
                        cp_async4_full(dst + 4u * j, src + j);
                    } else {
                        const bool in = kq + j < rem;
                        cp_async4(dst + 4u * j, in ? src + j : A, in);
                    }
                }
            }
        }
        cp_async_commit();
    };

    /* B row kbeg + c*KC + 128g + 4y + j of step u = 4g + j, columns col..col+3 (clamped to N:
     * never stored) */
    const unsigned brow0 = (unsigned)(kbeg + 4 * y) * (unsigned)N;
    auto load_b = [&](int c, int u, auto full) -> VEC {
        const int du = 128 * (u >> 2) + (u & 3);
        const int kr = c * KC + du + 4 * y;        /* row within the slice */
        VEC v;
        if (decltype(full)::value || kr < span) {
            const unsigned off = brow0 + (unsigned)(c * KC + du) * (unsigned)N;
            if (VB) {
                v = __ldg(reinterpret_cast<const VEC*>(B + (off + (unsigned)min(col, N - 4))));
            } else {
                v.x = __ldg(B + (off + (unsigned)min(col, N - 1)));
                v.y = __ldg(B + (off + (unsigned)min(col + 1, N - 1)));
                v.z = __ldg(B + (off + (unsigned)min(col + 2, N - 1)));
                v.w = __ldg(B + (off + (unsigned)min(col + 3, N - 1)));
            }
        } else {
            v = vzero();                   /* past the slice: A is zero there too */
        }
        return v;
    };

    ACC acc[TMB][4];
#pragma unroll
    for (int i = 0; i < TMB; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            acc[i][j] = (ACC)0;

    /* U steps of chunk c from stage c&1; with PF, each step's B register is reloaded with
     * chunk c+1's row (a full chunk) right after its last use: the rolling prefetch */
    VEC b[U];
    auto chunk = [&](int c, auto PF) {
        const ELEM* as = As + (c & 1) * STAGE + 4 * y;
#pragma unroll
        for (int g = 0; g < U / 4; ++g) {
            ACC bb[4][4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const VEC bv = b[4 * g + j];
                if (decltype(PF)::value)
                    b[4 * g + j] = load_b(c + 1, 4 * g + j, Full<true>());
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    bb[j][e] = (ACC)vget(bv, e);
            }
#pragma unroll
            for (int m = 0; m < TMB; ++m) {
                const VEC av = *reinterpret_cast<const VEC*>(as + m * KC + 128 * g);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const ACC a = (ACC)vget(av, j);
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        acc[m][e] += a * bb[j][e];
                }
            }
        }
    };

    /* full chunks: A copied one chunk ahead (double buffer, one barrier per chunk) */
    if (nfull > 0) {
        copy_a(0, Full<true>());
#pragma unroll
        for (int u = 0; u < U; ++u)
            b[u] = load_b(0, u, Full<true>());
    }
    for (int c = 0; c < nfull; ++c) {
        cp_async_wait<0>();
        __syncthreads();                   /* chunk c of A is in; stage (c+1)&1 is free */
        if (c + 1 < nfull) {
            copy_a(c + 1, Full<true>());
            chunk(c, Full<true>());
        } else {
            chunk(c, Full<false>());
        }
    }
    /* the slice's last, partial chunk: every load bounds-checked, no prefetch */
    if (nchunks > nfull) {
        copy_a(nfull, Full<false>());
#pragma unroll
        for (int u = 0; u < U; ++u)
            b[u] = load_b(nfull, u, Full<false>());
        cp_async_wait<0>();
        __syncthreads();
        chunk(nfull, Full<false>());
    }

    /* the 4 k-lanes of a warp (lanes x, x+8, x+16, x+24), then the 8 warps in order */
#pragma unroll
    for (int i = 0; i < TMB; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], 8);
            acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], 16);
        }
    cp_async_wait<0>();
    __syncthreads();                       /* everyone is done with As */
    ACC* const red = reinterpret_cast<ACC*>(smem_raw);    /* [8 warps][TMB][32] */
    const int w = tid >> 5, lane = tid & 31;
    if (lane < 8) {
#pragma unroll
        for (int i = 0; i < TMB; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                red[(w * TMB + i) * 32 + 4 * lane + j] = acc[i][j];
    }
    __syncthreads();
    slice_wait(tile, z, tid);
#pragma unroll
    for (int o = tid; o < TMB * 32; o += NT) {
        const int m = o >> 5, cc = o & 31;
        ACC v = red[m * 32 + cc];
#pragma unroll
        for (int ww = 1; ww < 8; ++ww)
            v += red[(ww * TMB + m) * 32 + cc];
        if (m0 + m < M && col0 + cc < N)
            put(C + (size_t)(m0 + m) * N + col0 + cc, v, z > 0);
    }
    slice_pass(tile, z, splits, tid);
}

/* ---- rows path: M > N, A streamed ----------------------------------------------------- */

/* Word of element (k, n) of a B stage, k = 32*s + 4*kl + j within the chunk. TN == 1: k.
 * Else [s][j][q][kl ^ c][4], q = n / 4, c = (QN*j + q) % 8 (2*j % 8 when QN == 1): the 8 kl
 * of one (s, j, q) are 8 distinct 16-byte slots (reads), and the copies of one warp (8, 4, 2
 * or 1 consecutive k by 4*QN columns) land on distinct slots too. */
template <int TN>
__device__ __forceinline__ int bs_word(int k, int n)
{
    if (TN == 1)
        return k;
    constexpr int QN = TN / 4;
    const int s = k >> 5, kl = (k >> 2) & 7, j = k & 3;
    const int q = n >> 2, e = n & 3;
    const int c = (QN == 1 ? 2 * j : QN * j + q) & 7;
    return ((((s * 4 + j) * QN + q) * 8 + (kl ^ c)) << 2) + e;
}

template <int TN, int R, int U, bool KV>   /* KV: K % 4 == 0, A read by 16-byte loads */
__device__ __forceinline__ void rows_path(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* __restrict__ C, int M, int N, int K, int row0, int n0,
                                          int tile, int z, int splits, unsigned char* smem_raw)
{
    constexpr int QN = TN >= 4 ? TN / 4 : 1;
    /* words of one 32-k step in a B stage: 32 k x TN columns (bs_word's layout) */
    constexpr int STEPW = TN == 1 ? 32 : 128 * QN;
    static_assert(32 * R * TN <= SMEM_WORDS, "shared memory");

    ELEM* const Bs = reinterpret_cast<ELEM*>(smem_raw);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem_raw);
    const int WR = blockDim.x >> 5, WK = blockDim.y;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31, wr = threadIdx.x >> 5, wk = threadIdx.y;
    const int kl = lane & 7, rg = lane >> 3;
    const int KCR = WK * 32 * U;                   /* k rows per chunk (U 32-k steps per warp) */
    constexpr int STAGE = SMEM_WORDS / 2;          /* words per stage (KCR * TN are used) */
    const int RB = WR * 4 * R;                     /* rows per block */
    const bool bvec = TN >= 4 && (N & 3) == 0;
    int kbeg, kend;
    slice_range(K, KCR, z, splits, kbeg, kend);
    const int span = max(kend - kbeg, 0);
    const int nchunks = (span + KCR - 1) / KCR, nfull = span / KCR;

    /* a launch that does not match the header would overflow the stages */
    if (KCR * TN > STAGE || 4u * SMEM_WORDS > dyn_smem_bytes())
        __trap();

    /* the lane's rows row0 + wr*4R + 4r + rg (past M: row M - 1, never stored); its k in
     * chunk c, step u: kbeg + c*KCR + 32*(u*WK + wk) + 4*kl */
    const int mb = row0 + wr * 4 * R + rg;
    unsigned ro[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
        ro[r] = (unsigned)min(mb + 4 * r, M - 1) * (unsigned)K + (unsigned)kbeg;
    const int kl0 = 32 * wk + 4 * kl, ustep = 32 * WK;

    auto copy_b = [&](int c, auto full) {
        const int kc0 = kbeg + c * KCR;
        const int rem = span - c * KCR;            /* rows of this chunk in the slice */
        const unsigned sst = sbase + 4u * (unsigned)((c & 1) * STAGE);
        if (bvec) {
            for (int e = tid; e < KCR * QN; e += NT) {
                const int kk = e / QN, q = e % QN;
                const int n = n0 + 4 * q;
                const bool in = (decltype(full)::value || kk < rem) && n < N;
                cp_async16(sst + 4u * (unsigned)bs_word<TN>(kk, 4 * q),
                           in ? B + (size_t)(kc0 + kk) * N + n : B, in);
            }
        } else {
            for (int e = tid; e < KCR * TN; e += NT) {
                const int kk = e / TN, nn = e % TN;
                const int n = n0 + nn;
                const bool in = (decltype(full)::value || kk < rem) && n < N;
                cp_async4(sst + 4u * (unsigned)bs_word<TN>(kk, nn),
                          in ? B + (size_t)(kc0 + kk) * N + n : B, in);
            }
        }
        cp_async_commit();
    };

    auto load_a = [&](int c, int u, int r, auto full) -> VEC {
        const int kr = c * KCR + u * ustep + kl0;  /* k within the slice */
        const ELEM* p = A + (ro[r] + (unsigned)kr);
        VEC v;
        if (decltype(full)::value) {
            if (KV) {
                v = __ldg(reinterpret_cast<const VEC*>(p));
            } else {
                v.x = __ldg(p); v.y = __ldg(p + 1); v.z = __ldg(p + 2); v.w = __ldg(p + 3);
            }
        } else {
            v = vzero();
            if (kr < span) {
                if (KV) {                          /* span % 4 == 0: whole quad in */
                    v = __ldg(reinterpret_cast<const VEC*>(p));
                } else {
                    v.x = __ldg(p);
                    if (kr + 1 < span) v.y = __ldg(p + 1);
                    if (kr + 2 < span) v.z = __ldg(p + 2);
                    if (kr + 3 < span) v.w = __ldg(p + 3);
                }
            }
        }
        return v;
    };

    ACC acc[R][TN];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < TN; ++n)
            acc[r][n] = (ACC)0;

    /* U steps of chunk c from stage c&1; with PF, each A register is reloaded with chunk
     * c+1's quad (a full chunk) right after its last use: the rolling prefetch */
    VEC a[U][R];
    auto chunk = [&](int c, auto PF) {
        const ELEM* bs = Bs + (c & 1) * STAGE + wk * STEPW;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            ACC xa[R][4];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const VEC t = a[u][r];
                if (decltype(PF)::value)
                    a[u][r] = load_a(c + 1, u, r, Full<true>());
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    xa[r][j] = (ACC)vget(t, j);
            }
            const ELEM* bu = bs + u * WK * STEPW;      /* the warp's 32-k step u*WK + wk */
            if (TN == 1) {
                const VEC bv = *reinterpret_cast<const VEC*>(bu + 4 * kl);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const ACC bj = (ACC)vget(bv, j);
#pragma unroll
                    for (int r = 0; r < R; ++r)
                        acc[r][0] += xa[r][j] * bj;
                }
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int q = 0; q < QN; ++q) {
                        const int cc = (QN == 1 ? 2 * j : QN * j + q) & 7;
                        const VEC bv = *reinterpret_cast<const VEC*>(
                            bu + (((j * QN + q) * 8 + (kl ^ cc)) << 2));
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const ACC be = (ACC)vget(bv, e);
#pragma unroll
                            for (int r = 0; r < R; ++r)
                                acc[r][4 * q + e] += xa[r][j] * be;
                        }
                    }
            }
        }
    };

    /* full chunks: B copied one chunk ahead (double buffer, one barrier per chunk) */
    if (nfull > 0) {
        copy_b(0, Full<true>());
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r)
                a[u][r] = load_a(0, u, r, Full<true>());
    }
    for (int c = 0; c < nfull; ++c) {
        cp_async_wait<0>();
        __syncthreads();                   /* chunk c of B is in; stage (c+1)&1 is free */
        if (c + 1 < nfull) {
            copy_b(c + 1, Full<true>());
            chunk(c, Full<true>());
        } else {
            chunk(c, Full<false>());
        }
    }
    /* the slice's last, partial chunk: every load bounds-checked, no prefetch */
    if (nchunks > nfull) {
        copy_b(nfull, Full<false>());
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r)
                a[u][r] = load_a(nfull, u, r, Full<false>());
        cp_async_wait<0>();
        __syncthreads();
        chunk(nfull, Full<false>());
    }

    /* the 8 k-lanes of a row group (lane bits 0-2), then the WK warps in order */
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            acc[r][n] += __shfl_xor_sync(0xffffffffu, acc[r][n], 1);
            acc[r][n] += __shfl_xor_sync(0xffffffffu, acc[r][n], 2);
            acc[r][n] += __shfl_xor_sync(0xffffffffu, acc[r][n], 4);
        }
    cp_async_wait<0>();
    __syncthreads();                       /* everyone is done with Bs */
    ACC* const red = reinterpret_cast<ACC*>(smem_raw);    /* [WK][RB][TN] */
    if (kl == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int n = 0; n < TN; ++n)
                red[(wk * RB + wr * 4 * R + 4 * r + rg) * TN + n] = acc[r][n];
    }
    __syncthreads();
    slice_wait(tile, z, tid);
    for (int o = tid; o < RB * TN; o += NT) {
        const int row = o / TN, n = o % TN;
        ACC v = red[o];
        for (int ww = 1; ww < WK; ++ww)
            v += red[ww * RB * TN + o];
        if (row0 + row < M && n0 + n < N)
            put(C + (size_t)(row0 + row) * N + n0 + n, v, z > 0);
    }
    slice_pass(tile, z, splits, tid);
}

/* ---- entry -------------------------------------------------------------------------------- */

template <int TMB, int U>
__device__ __forceinline__ void cols(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                     ELEM* __restrict__ C, int M, int N, int K, int m0, int col0,
                                     int tile, int z, int splits, unsigned char* smem_raw)
{
    if ((N & 3) == 0)
        cols_path<TMB, U, true>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
    else
        cols_path<TMB, U, false>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
}

template <int TN, int R, int U>
__device__ __forceinline__ void rows(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                     ELEM* __restrict__ C, int M, int N, int K, int row0, int n0,
                                     int tile, int z, int splits, unsigned char* smem_raw)
{
    if ((K & 3) == 0)
        rows_path<TN, R, U, true>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
    else
        rows_path<TN, R, U, false>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
}

/* 16 columns: 4 rows per lane where A is tall (the header's rr), else 2 */
__device__ __forceinline__ void rows16(bool tall, const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                       ELEM* __restrict__ C, int M, int N, int K, int row0, int n0,
                                       int tile, int z, int splits, unsigned char* smem_raw)
{
    if (tall)
        rows<16, 4, U_R16T>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
    else
        rows<16, 2, U_R16>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
}

extern "C" __global__ __launch_bounds__(NT, MINB)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const int splits = gridDim.y, z = blockIdx.y;
    const int tile = blockIdx.x;
    if (splits > 1 && tile >= MAX_TILES)
        __trap();                          /* the header never splits a grid this wide */
    if (M <= N) {
        /* columns path: block (8, 32); grid.x = M-groups (fastest) x 32-column strips */
        if (blockDim.x != 8 || blockDim.y != 32)
            __trap();
        const int mg = (M + TILE - 1) / TILE;
        const int g = blockIdx.x % mg, cb = blockIdx.x / mg;
        const int m0 = g * TILE, col0 = cb * 32;
        const int rows = min(TILE, M - m0);
        if (rows <= 4)
            cols<4, U_C4>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
        else if (rows <= 8)
            cols<8, U_C8>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
#if TILE >= 32
        else if (rows <= 16)
            cols<16, U_C16>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
        else
            cols<32, U_C32>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
#else
        else
            cols<16, U_C16>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
#endif
    } else {
        /* rows path: block (32*WR, 8/WR); grid.x = row blocks x N-tiles (fastest) */
        if (blockDim.x * blockDim.y != NT || (blockDim.x & 31))
            __trap();
        const int tn = N == 1 ? 1 : N <= 4 ? 4 : N <= 8 ? 8 : (N <= 16 || TILE < 32) ? 16 : 32;
        const int nt = (N + tn - 1) / tn;
        /* the header's rr (4 rows per lane at 16 columns where A is tall), read from the grid:
         * ceil(M / (WR*4*rr)) row blocks per N-tile (where both counts agree, both cover M) */
        const int wr = blockDim.x >> 5;
        const int g4 = (M + 16 * wr - 1) / (16 * wr) * nt, g2 = (M + 8 * wr - 1) / (8 * wr) * nt;
        const bool tall = tn == 16 && (int)gridDim.x == g4 && g4 != g2;
        if ((int)gridDim.x != (tn < 16 ? g4 : tall ? g4 : g2))
            __trap();                      /* a launch that does not match the header */
        const int r = tn < 16 || tall ? 4 : 2;
        const int nti = blockIdx.x % nt, rb = blockIdx.x / nt;
        const int row0 = rb * (wr * 4 * r), n0 = nti * tn;
        switch (tn) {
        case 1:
            rows<1, 4, U_R1>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
        case 4:
            rows<4, 4, U_R4>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
        case 8:
            rows<8, 4, U_R8>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
#if TILE >= 32
        case 16:
            rows16(tall, A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
        default:
            rows<32, 2, U_R32>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
#else
        default:
            rows16(tall, A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
#endif
        }
    }
}
