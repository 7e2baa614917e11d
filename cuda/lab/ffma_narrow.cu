/*
+++
name = "ffma_narrow"
title = "ffma_regdb for narrow N (≤ 64: A tall, B a strip of 16–64 columns): 64-, 48-, 32- and 16-column block tiles 64–256 rows tall, so a tile holds few empty columns; edge copies clamped, parallel split-K over the few row tiles."
source = "cuda/lab/ffma_regdb.cu (included, BN = bn, EDGE_CLAMP = 1); tall-and-narrow SIMT tiles as cuBLAS and CUTLASS pick per shape (CUTLASS's 128x32 and 256x32 SIMT threadblock shapes); parallel split-K as rung 18"
role = "rung"
order = 28

[params]
bn = [64, 48, 32, 16]   # block columns: a tile that holds N (A read once), < 16 empty columns
bm = [128, 256, 64]  # block rows; 128 threads of 8 × tn, tn = bm·bn/1024 (4, 8 or 12)
splitk = [1, 2, 3, 4, 6, 8, 12, 16]   # a tall narrow GEMM has few row tiles: M / bm

[derived]
tn = "bm * bn // 1024"                        # columns per thread (the file's TN)
stages = "4"                                  # 18's STAGES at bk 8
tiles = "cdiv(M, bm) * cdiv(N, bn)"
# workspace (parallel split-K, as ffma_regdb): per-tile arrival counters, then each slice's
# partial tile (bm × bn floats) per tile and slice
workspace = "0 if splitk == 1 else roundup(4 * tiles, 256) + splitk * tiles * bm * bn * 4"

[[constraints]]
check = "N <= 64"
reason = "made for narrow N (≤ 64); use ffma_regdb or ffma_wide, whose 128-column tiles N fills"

[[constraints]]
check = "(bn == 64 or bn == 48 or bn == 32 or bn == 16) and (bm == 64 or bm == 128 or bm == 256) and splitk >= 1"
reason = "bn must be 64, 48, 32 or 16, bm 64, 128 or 256, splitk ≥ 1"

[[constraints]]
check = "tn == 4 or tn == 8 or tn == 12"
reason = "a {bm}×{bn} tile in 128 threads is {tn} columns per thread: rung 18's fragments are whole 4-column pieces (4, 8 or 12 columns; 256×64 would be 16 and spill)"

[[constraints]]
check = "bn >= N and (bn - N < 16 or (bn == 64 and N > 32))"
reason = "N = {N} takes a tile that holds it with under 16 empty columns, or 64 columns past N = 32 (not {bn}: {'two column tiles would read A twice' if bn < N else 'too many empty columns'})"

[[constraints]]
check = "splitk == 1 or tiles * splitk <= 4 * SMS"
reason = "split-K {splitk} is for grids short of the GPU: {tiles} tiles × {splitk} slices is over 4 CTAs per SM"

[[constraints]]
check = "workspace <= 2**28"
reason = "split-K {splitk} would need {workspace // 2**20} MiB of partial tiles (at most 256)"

[launch]
grid = ["cdiv(N, bn)", "cdiv(M, bm) * splitk"]
block = [128, 1]
shared = "stages * 8 * (bm + 4 + bn) * 4"
workspace = "workspace"
+++
*/
/*
 * ffma_narrow.cu -- ffma_regdb.cu with narrow block tiles, for C = A . B where N is at
 * most 64 and M (and K) large: 8192 x 64 x 8192, 4096 x 32 x 4096, a tall matrix times a
 * few columns.
 *
 * Why: ffma_regdb's tiles are 128 columns wide. At N = 64 half of every tile is empty
 * columns: its FFMAs, its B copies, its registers. On an H100 it ran 8192x64x8192 at 50% of
 * cuBLAS FP32 and 4096x64x4096 at 58% (benchmarks/NOTES.md, issue 11 round 12). The
 * transposed shape (64 x 4096 x 4096, the same work with M small) ran at 96%, on 64-row
 * tiles and split-K. The skinny rung streams A once, but it pays a shared-memory read of B
 * per 8 FFMAs at 16-32 columns (38-48% of the copy bandwidth at 8192x32x8192 and
 * 4096x16x4096): past a few columns the product is FFMA work again.
 *
 * Technique: the same mainloop as ffma_regdb (4-stage cp.async pipeline, A transposed in
 * shared memory by 4-byte copies, register double-buffered LDS.128 fragments, 8 x TN per
 * thread in strided 4x4 pieces), with BN = 64, 48, 32 or 16 columns, BM = 64, 128 or 256:
 *   bn 64 x bm 128, 8x8 per thread (157 registers, 3 blocks per SM); bn 64 x bm 64, 8x4;
 *   bn 48 x bm 256, 8x12 (221 registers, 2 blocks per SM: N = 33..48 without the 64-column
 *   tile's 25-48% empty columns, which cuBLAS pays: its 8192x50x8192 takes as long as its
 *   8192x64x8192); bn 32 x bm 256, 8x8; bn 32 x bm 128, 8x4; bn 16 x bm 256, 8x4;
 * always 128 threads, TN = BM * BN / 1024 (the 256-thread 256 x 64 tile spills at 128
 * registers). N takes a BN that holds it (one column tile) with fewer than 16 empty columns;
 * N = 33..48 may also take 64 columns, whose 64-row tiles suit short M (below).
 * A tall tile keeps the per-thread work of rung 18 (64 or 32 FFMAs per 3-4 LDS.128), and
 * with N <= BN one column tile reads A exactly once. The grid is M / BM row tiles (64 at
 * 8192 rows and BM = 128): parallel split-K (rung 18's, deterministic) fills the SMs. Its
 * fix-up is one CTA per tile reading the tile's SPLITK partials: 64-row tiles halve that
 * read and double the tiles, for grids where split-K must be deep (M ~ 1000).
 * Narrow B costs few copies, so N % 4 != 0 needs no padded pre-pass: a thread's one 16-byte
 * B copy per k-tile becomes four 4-byte ones, columns clamped, beside its 4-16 A copies
 * (8192x50x8192 took 5% longer than 8192x52x8192). EDGE_CLAMP = 1: tiles past M or N copy
 * like interior ones, rows and columns clamped into the matrix (N < BN is the common case).
 *
 * Compile-time constants: ELEM and ACC (float, or int and unsigned for int32), BN (64, 48,
 * 32, 16), BM (64, 128, 256) and SPLITK as ffma_regdb.cu (BK 8, STAGES 4);
 * TN = BM * BN / 1024 (128 threads). Entry: matmul(A, B, C, M, N, K, workspace). Workspace
 * and launch geometry as ffma_regdb.cu with BN in place of 128: block (128, 1), grid
 * (ceil(N/BN), ceil(M/BM)*SPLITK).
 */
#ifndef BN
#define BN 64
#endif
#ifndef BM
#define BM 128
#endif
#define TN (BM * BN / 1024)
#ifndef EDGE_CLAMP
#define EDGE_CLAMP 1
#endif
#include "lab_ptx.cuh"
#include "ffma_regdb.cu"
