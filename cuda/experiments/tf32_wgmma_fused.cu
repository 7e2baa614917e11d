/*
+++
name = "tf32_wgmma_fused"
title = "TF32 wgmma with B transposed in shared memory instead of a pre-pass (slower than tf32_wgmma_tma)"
summary = "TF32 wgmma with B transposed in shared memory, no pre-pass (slower than tf32_wgmma_tma: the transposing warps are the limit): TMA lands B as it lies (N-major, eight 32 × 32 boxes in the 128B swizzle) in a raw ring; the producer warpgroup's warps 1-3 round A in place and transpose B into a K-major swizzled ring (4 × 4 register transposes, rounded to TF32), three decoupled rings (A, Bt, raw B); 128 × 256 tiles, 2 consumer warpgroups × wgmma.m64n256k8, a persistent rasterised grid. One launch per GEMM where K and N are multiples of 4."
source = "PTX ISA cp.async.bulk.tensor, mbarrier expect_tx, fence.proxy.async, cvt.rna.tf32.f32, wgmma.mma_async; CUTLASS sm90 TMA warp-specialized persistent GMMA kernels (rings of mbarrier-guarded stages); cuda/ladder/23_tf32_wgmma_tma.cu"
role = "experiment"
order = 91
dtypes = ["float32"]
precision = "tf32"
arch_suffix = "a"

[params]
astages = [4, 3]     # A ring: TMA lands A here, rounded in place, read by wgmma (16 KB each)
bstages = [2, 3]     # Bt ring: the transposed, rounded B tiles wgmma reads (32 KB each)
raws = [3, 2]        # raw ring: TMA lands B here as it lies (N-major, 32 KB each)
persist = [1, 0]

[descriptions]
astages = "slots of the A ring (TMA lands A there, rounded in place, read by wgmma; 16 KB each)"
bstages = "slots of the Bt ring (the transposed, rounded B tiles wgmma reads; 32 KB each)"
raws = "slots of the raw ring (TMA lands B there as it lies, N-major; 32 KB each)"
persist = "1: a persistent grid of one CTA per SM looping over the tiles; 0: one tile per CTA"

[derived]
tiles = "cdiv(M, 128) * cdiv(N, 256)"     # 128 (M) × 256 (N) tiles of C
kp = "roundup(K, 4)"                      # row length of Ap (when K % 4)
np = "roundup(N, 4)"                      # row length of Bp (when N % 4)
# the pre-pass's padded copies, only where a row stride is not a multiple of 16 bytes (as
# TMA needs): Ap (M × Kp) when K % 4, then Bp (K × Np) when N % 4; the two tensor maps
# (128 bytes each) after them, 128-aligned
ap_bytes = "4 * M * kp if K % 4 else 0"
bp_bytes = "4 * K * np if N % 4 else 0"
maps_at = "roundup(ap_bytes + bp_bytes, 128)"

[[constraints]]
check = "16 * astages + 32 * (bstages + raws) <= 225"
reason = "the three rings (A 16 KB, Bt and raw B 32 KB per slot) must fit in 227 KB of shared memory with the alignment slack and the mbarriers"

[[constraints]]
check = "(astages == 3 or astages == 4) and (bstages == 2 or bstages == 3) and (raws == 2 or raws == 3) and (persist == 0 or persist == 1)"
reason = "the kernel is built for 3 or 4 A slots, 2 or 3 Bt slots, 2 or 3 raw slots and persist 0 or 1"

[launch]
grid = ["min(tiles, SMS) if persist else tiles", 1]   # persistent: one CTA per SM
block = [384, 1]
# + atom alignment, mbarriers: A full, empty, ready; Bt empty, ready; raw full, empty
shared = "(16 * astages + 32 * (bstages + raws)) * 1024 + 1024 + 256"

[prepass]            # padded copies only where needed: no blocks (no launch) when K % 4 == N % 4 == 0
entry = "prepass"
grid = ["cdiv(max(kp if K % 4 else 0, np if N % 4 else 0), 128)", "(cdiv(M, 32) if K % 4 else 0) + (cdiv(K, 32) if N % 4 else 0)"]
block = [32, 8]
scratch = "maps_at + 2 * 128"

# A (or Ap) as M rows of K (Kp) floats, box 32 (k) × 128 (m); 128B swizzle
[[prepass.tensor_maps]]
at = "maps_at"
base = "'scratch' if K % 4 else 'a'"
offset = 0
dims = ["kp", "M"]
stride = "4 * kp"
box = [32, 128]

# B (or Bp) as K rows of N (Np) floats, box 32 (n) × 32 (k); 128B swizzle
[[prepass.tensor_maps]]
base = "'scratch' if N % 4 else 'b'"
offset = "ap_bytes if N % 4 else 0"
dims = ["np", "K"]
stride = "4 * np"
box = [32, 32]
+++
*/
/*
 * experiments/tf32_wgmma_fused.cu -- TF32 GEMM on Hopper with B transposed inside the kernel
 * (sm_90a).
 *
 * Why: wgmma reads a .tf32 operand from shared memory only K-major. A (M x K, row-major) is
 * K-major; B (K x N) is N-major, so 21-23 transpose (and round) B into a scratch buffer in a
 * pre-pass: 8 bytes of DRAM traffic per element of B on every launch, a pre-pass kernel that
 * cuBLAS TF32's single kernel does not pay (Nsight Compute figures: benchmarks/NOTES.md,
 * tf32_wgmma_fused). This kernel moves the transpose into the GEMM, where B passes through
 * shared memory anyway.
 *
 * A block of 3 warpgroups (384 threads) computes 128 x 256 tiles of C, K in steps of 32,
 * through three rings of shared memory, each with its own depth:
 *  - A ring (ASTAGES x 16 KB): TMA lands A's box (32 k x 128 m); rounded in place; read by
 *    wgmma. Barriers a_full (TMA bytes), a_ready (96 rounders), a_empty (256 consumers).
 *  - raw ring (RAWS x 32 KB): TMA lands B as it lies, eight boxes of 32 n x 32 k. Barriers
 *    raw_full (TMA bytes), raw_empty (96 transposers).
 *  - Bt ring (BSTAGES x 32 KB): B transposed to K-major (256 rows n x 32 k) and rounded, in
 *    the 128B-swizzled layout TMA gave 23's Bt; read by wgmma. Barriers b_ready (96
 *    transposers), b_empty (256 consumers).
 * All TMA boxes use the 128-byte swizzle (16-byte chunk c of 128-byte row r at c ^ (r % 8));
 * out-of-range rows, columns and k are zero-filled.
 *  - warpgroup 0, thread 0: issues, per k-tile j of the CTA, A's copy (after a_empty) and
 *    raw B's copy for k-tile j + RAW_AHEAD (after raw_empty), so that each ring is refilled
 *    as soon as it frees, and neither wait holds the other back.
 *  - warpgroup 0, warps 1-3 (96 threads): per k-tile, round the A slot in place
 *    (round_stage_tf32: wait a_full, round, fence.proxy.async, arrive a_ready); then wait
 *    raw_full and b_empty, transpose the raw slot into the Bt slot (transpose_ktile), arrive
 *    raw_empty, fence.proxy.async, arrive b_ready.
 *  - warpgroups 1-2 (consumers): as 23: wait a_ready, a_full, b_ready; 4 x
 *    wgmma.m64n256k8 (both operands through K-major descriptors), one group in flight;
 *    arrive a_empty and b_empty for the previous k-tile; the epilogue stores C from registers.
 *
 * Bank conflicts of the transpose. A block is (box nb, n-quad q, k-quad c): raw rows
 * k = 4c + i, chunk q (phys. q ^ (k % 8)); Bt rows n = 32 nb + 4q + j, chunk c (phys.
 * c ^ (n % 8)). A 16-byte access is conflict-free when each quarter-warp (8 lanes) touches 8
 * distinct physical chunks. Lane l of a quarter-warp takes q = l and c = (l >> 1) ^ v, v the
 * quarter-warp's task: reads hit l ^ 4(((l >> 1) ^ v) & 1) ^ i, writes (l >> 1) ^ v ^ 4(l & 1)
 * ^ j, both permutations of 0..7 over l; the 8 tasks v of a box cover its 64 blocks
 * (tests/test_ladder.py emulates this). 64 tasks per k-tile over 12 quarter-warps: 6 rounds.
 *
 * Why it stays an experiment (benchmarks/NOTES.md, tf32_wgmma_fused, has the figures): it
 * verifies at every test shape and combination but runs well below tf32_wgmma_tma at the
 * large sizes whatever the ring depths (faster only at 1024^3). The three transposing warps
 * are the limit: per k-tile they move 48 KB through registers (A 16 KB rounded, B 32 KB
 * transposed) where 23's move 16 KB; the warps stall on shared-memory scoreboards, the
 * shared stores meet bank conflicts that the quarter-warp model above does not predict, and
 * the TF32 rounding compiles to integer instructions. This file issues every load of a
 * k-tile before its stores (one wait per k-tile), which was slightly slower than one 4 x 4
 * block at a time.
 *
 * Pre-pass: TMA needs every row stride to be a multiple of 16 bytes. Where K % 4 != 0 the
 * pre-pass copies A into Ap (M x Kp, zero-padded), where N % 4 != 0 B into Bp (K x Np); with
 * K % 4 == N % 4 == 0 it has no blocks and the backend launches nothing: one kernel per GEMM.
 * The tensor maps (A's, then B's) are encoded by the backend into the scratch at
 * roundup(|Ap| + |Bp|, 128).
 *
 * Technique and source: NVIDIA PTX ISA (cp.async.bulk.tensor, mbarrier expect_tx,
 * fence.proxy.async, cvt.rna.tf32.f32, wgmma.mma_async); the CUTLASS sm90
 * warp-specialized GMMA kernels (mbarrier-guarded rings);
 * written anew for this lab on top of 23_tf32_wgmma_tma.cu (consumers, epilogue, A rounding)
 * and tf32_wgmma_rs.cu (padding pre-pass, B boxes).
 *
 * Any M, N, K (TMA zero-fill, guarded stores). Precision "tf32": A and B rounded to nearest
 * TF32 as cuBLAS does, FP32 accumulation. sm_90a only; elsewhere matmul traps.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  must be float                                      (default float)
 *   ASTAGES    A slots, 3 or 4                                     (default 4)
 *   BSTAGES    Bt slots, 2 or 3                                    (default 2)
 *   RAWS       raw B slots, 2 or 3                                 (default 3)
 *   PERSIST    1: persistent grid with a tile loop, 0: one tile per CTA (default 1)
 * Fixed: BM = 128, BN = 256, BK = 32, GM = 8. Dynamic shared memory: (16 ASTAGES + 32 (BSTAGES
 * + RAWS)) KB + 1024 (atom alignment) + 256 (mbarriers).
 *
 * Launch: prepass block (32, 8) over 32 x 128 tiles of Ap then Bp (none when not needed);
 * matmul block (384, 1), grid (PERSIST ? min(tiles, SMS) : tiles, 1), tiles = ceil(M/128) *
 * ceil(N/256); args (A, scratch, C, M, N, K).
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef ASTAGES
#define ASTAGES 4
#endif
#ifndef BSTAGES
#define BSTAGES 2
#endif
#ifndef RAWS
#define RAWS 3
#endif
#ifndef PERSIST
#define PERSIST 1
#endif
#define BM 128
#define BN 256
#define BK 32
#define GM 8
#define A_BYTES (BM * BK * 4)                /* 16 KB */
#define B_BYTES (BN * BK * 4)                /* 32 KB: Bt in a stage, or a raw slot */
#define BBOX_BYTES (32 * BK * 4)             /* 4 KB: one raw B box, 32 k rows x 32 n */
#define RCH (A_BYTES / 16)                   /* 16-byte chunks of a stage's A region: 1024 */
#define NXT 96                               /* transposer (and A rounder) threads: warps 1-3 */
#define XROUNDS 6                            /* ceil(64 quarter-warp tasks / 12) per k-tile */
#define NT 384
/* How many k-tiles the raw B copies run ahead of A's. The raw slot of k-tile j frees when
   the transposers are done with k-tile j - RAWS, i.e. soon after the consumers left k-tile
   j - RAWS - BSTAGES (its Bt slot); A's slot of k-tile j when they left k-tile j - ASTAGES.
   Issuing raw B for k-tile j + RAW_AHEAD right after A's for k-tile j makes both waits end
   together, so neither holds the other's copies back (clamped to what the raw ring holds). */
#define RAW_AHEAD (RAWS + BSTAGES - ASTAGES < 0 ? 0 : RAWS + BSTAGES - ASTAGES > RAWS - 1 ? RAWS - 1 : RAWS + BSTAGES - ASTAGES)
#if ASTAGES < 3 || ASTAGES > 4 || BSTAGES < 2 || BSTAGES > 3 || RAWS < 2 || RAWS > 3 || (PERSIST != 0 && PERSIST != 1)
#error "ASTAGES must be 3 or 4, BSTAGES 2 or 3, RAWS 2 or 3, PERSIST 0 or 1"
#endif

/* Ap (M x Kp) when K % 4, Bp (K x Np) when N % 4: zero-padded copies, 32 x 128 per block */
extern "C" __global__ __launch_bounds__(256)
void prepass(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
             int M, int N, int K)
{
    pad_for_tma(A, B, S, M, N, K);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* The producer's copies of raw B for this CTA's k-tile j (tile blockIdx.x + (j / ktiles) *
 * gridDim.x): eight 32 x 32 boxes into slot j % RAWS, completing on its raw_full barrier. */
__device__ __forceinline__ void issue_raw_b(int j, const void* tmB, unsigned raws, unsigned bars,
                                            int ktiles, int mt, int nt)
{
    int row0, col0;
    tile_origin(blockIdx.x + (j / ktiles) * gridDim.x, mt, nt, GM, BM, BN, row0, col0);
    const int r = j % RAWS;
    const unsigned sr = raws + r * B_BYTES, full = bars + 8 * (3 * ASTAGES + 2 * BSTAGES + r);
    mbar_arrive_expect_tx(full, B_BYTES);
#pragma unroll
    for (int b = 0; b < BN / 32; ++b)
        tma_load_2d(sr + b * BBOX_BYTES, tmB, col0 + 32 * b, (j % ktiles) * BK, full);
}

/* A transposer thread's part of one k-tile: XROUNDS 4 x 4 blocks (k = 4c + i, n = 4q + j) of
 * the raw slot at `raw` -> Bt rows n = 32 nb + 4q + j, chunk c, of the slot at `bt`, rounded.
 * Task (round, quarter-warp) -> box nb and v; lane l of the quarter-warp -> q = l, c = (l/2)^v
 * (conflict-free, see the header). All loads are issued before the first store, so that each
 * thread waits for shared memory once per k-tile, not once per block. */
__device__ __forceinline__ void transpose_ktile(unsigned raw, unsigned bt, int xw, int lane)
{
    const int q = lane & 7;
    float x[XROUNDS][4][4];
#pragma unroll
    for (int round = 0; round < XROUNDS; ++round) {
        const int task = round * 12 + xw * 4 + (lane >> 3);      /* 64 per k-tile */
        if (task < 64) {
            const int nb = task >> 3, c = (q >> 1) ^ (task & 7);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const unsigned k = 4 * c + i;
                const unsigned addr = raw + nb * BBOX_BYTES + k * 128u + ((q ^ (k & 7u)) << 4);
                asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                             : "=f"(x[round][i][0]), "=f"(x[round][i][1]), "=f"(x[round][i][2]), "=f"(x[round][i][3])
                             : "r"(addr) : "memory");
            }
        }
    }
#pragma unroll
    for (int round = 0; round < XROUNDS; ++round) {
        const int task = round * 12 + xw * 4 + (lane >> 3);
        if (task < 64) {
            const int nb = task >> 3, c = (q >> 1) ^ (task & 7);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const unsigned n = 32 * nb + 4 * q + j;
                const unsigned addr = bt + n * 128u + ((c ^ (n & 7u)) << 4);
                asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n"
                             :: "r"(addr), "f"(tf32_rna(x[round][0][j])), "f"(tf32_rna(x[round][1][j])),
                                "f"(tf32_rna(x[round][2][j])), "f"(tf32_rna(x[round][3][j])) : "memory");
            }
        }
    }
}
#endif

extern "C" __global__ __launch_bounds__(NT, 1)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ S, ELEM* __restrict__ C,
            int M, int N, int K)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
    const unsigned bts = base + ASTAGES * A_BYTES;       /* Bt ring */
    const unsigned raws = bts + BSTAGES * B_BYTES;       /* raw B ring */
    const unsigned bars = raws + RAWS * B_BYTES;         /* 3 ASTAGES + 2 BSTAGES + 2 RAWS <= 24 */
#define A_FULL(s) (bars + 8 * (s))
#define A_EMPTY(s) (bars + 8 * (ASTAGES + (s)))
#define A_READY(s) (bars + 8 * (2 * ASTAGES + (s)))
#define B_EMPTY(s) (bars + 8 * (3 * ASTAGES + (s)))
#define B_READY(s) (bars + 8 * (3 * ASTAGES + BSTAGES + (s)))
#define RAW_FULL(r) (bars + 8 * (3 * ASTAGES + 2 * BSTAGES + (r)))
#define RAW_EMPTY(r) (bars + 8 * (3 * ASTAGES + 2 * BSTAGES + RAWS + (r)))

    const int tid = threadIdx.x;
    const int wg = tid >> 7;                 /* 0: TMA, transposers, A rounders; 1-2: consumers */
    const int Kp = (K + 3) & ~3;
    const int ktiles = (Kp + BK - 1) / BK;
    const int mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN;
    const int tiles = mt * nt;

    if (tid == 0) {
#pragma unroll
        for (int s = 0; s < ASTAGES; ++s) {
            mbar_init(A_FULL(s), 1);                     /* the producer's arrive + A's tx bytes */
            mbar_init(A_EMPTY(s), 256);                  /* consumer threads */
            mbar_init(A_READY(s), NXT);                  /* rounder threads */
        }
#pragma unroll
        for (int s = 0; s < BSTAGES; ++s) {
            mbar_init(B_EMPTY(s), 256);                  /* consumer threads */
            mbar_init(B_READY(s), NXT);                  /* transposer threads */
        }
#pragma unroll
        for (int r = 0; r < RAWS; ++r) {
            mbar_init(RAW_FULL(r), 1);                   /* the producer's arrive + B's tx bytes */
            mbar_init(RAW_EMPTY(r), NXT);                /* transposer threads */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        /* this CTA's k-tiles, numbered j = 0 .. total-1 across its tiles */
        const int my_tiles = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
        const int total = my_tiles * ktiles;
        if (tid == 0) {
            const unsigned char* maps = maps_after_padding(S, M, N, K);
            const void* tmA = maps;
            const void* tmB = maps + 128;
            tensormap_acquire(tmA);
            tensormap_acquire(tmB);
            for (int j = 0; j < RAW_AHEAD && j < total; ++j)    /* slots free at the start */
                issue_raw_b(j, tmB, raws, bars, ktiles, mt, nt);
            for (int j = 0; j < total; ++j) {
                const int s = j % ASTAGES;
                if (j >= ASTAGES)
                    mbar_wait(A_EMPTY(s), ((j / ASTAGES) - 1) & 1);
                int row0, col0;
                tile_origin(blockIdx.x + (j / ktiles) * gridDim.x, mt, nt, GM, BM, BN, row0, col0);
                mbar_arrive_expect_tx(A_FULL(s), A_BYTES);
                tma_load_2d(base + s * A_BYTES, tmA, (j % ktiles) * BK, row0, A_FULL(s));
                const int jr = j + RAW_AHEAD;
                if (jr < total) {
                    if (jr >= RAWS)
                        mbar_wait(RAW_EMPTY(jr % RAWS), ((jr / RAWS) - 1) & 1);
                    issue_raw_b(jr, tmB, raws, bars, ktiles, mt, nt);
                }
            }
        } else if (tid >= 32) {                          /* warps 1-3: round A, B -> Bt */
            const int xt = tid - 32;
            const int xw = xt >> 5, lane = xt & 31;
            for (int j = 0; j < total; ++j) {
                const int sa = j % ASTAGES, sb = j % BSTAGES, r = j % RAWS;
                /* A: round in place once landed (round_stage_tf32: wait, round, fence, arrive) */
                round_stage_tf32<RCH, NXT, (RCH + NXT - 1) / NXT>(base + sa * A_BYTES, A_FULL(sa),
                                                                (j / ASTAGES) & 1, A_READY(sa), xt);
                /* B: once the raw slot landed and the consumers left the Bt slot */
                mbar_wait(RAW_FULL(r), (j / RAWS) & 1);
                if (j >= BSTAGES)
                    mbar_wait(B_EMPTY(sb), ((j / BSTAGES) - 1) & 1);
                const unsigned sr = raws + r * B_BYTES, bt = bts + sb * B_BYTES;
                transpose_ktile(sr, bt, xw, lane);
                mbar_arrive(RAW_EMPTY(r));               /* the slot's values are stored */
                asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                mbar_arrive(B_READY(sb));
            }
        }
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
                const int sa = it % ASTAGES, sb = it % BSTAGES;
                mbar_wait(A_READY(sa), (it / ASTAGES) & 1);   /* A rounded */
                mbar_wait(A_FULL(sa), (it / ASTAGES) & 1);    /* A's TMA bytes (complete by now) */
                mbar_wait(B_READY(sb), (it / BSTAGES) & 1);   /* Bt written */
                const unsigned a_tile = base + sa * A_BYTES + cw * (64 * 128);
                const unsigned b_tile = bts + sb * B_BYTES;
                asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                for (int kk = 0; kk < BK / 8; ++kk)
                    wgmma_n256(acc, make_desc(a_tile + kk * 32), make_desc(b_tile + kk * 32));
                asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                if (kt > 0) {                            /* k-tile it-1 read: release its slots */
                    mbar_arrive(A_EMPTY((it - 1) % ASTAGES));
                    mbar_arrive(B_EMPTY((it - 1) % BSTAGES));
                }
            }
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (ktiles > 0) {
                mbar_arrive(A_EMPTY((it - 1) % ASTAGES));
                mbar_arrive(B_EMPTY((it - 1) % BSTAGES));
            }

            store_wgmma_acc<BN>(acc, C, row0 + cw * 64, col0, M, N, warp, lane);
        }
    }
#undef A_FULL
#undef A_EMPTY
#undef A_READY
#undef B_EMPTY
#undef B_READY
#undef RAW_FULL
#undef RAW_EMPTY
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
