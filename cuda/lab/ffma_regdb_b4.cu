/*
+++
name = "ffma_regdb_b4"
title = "ffma_regdb for N not a multiple of 4 without a pre-pass: B's k-tiles come as 4-byte cp.async copies laid out along the warps' rows (each instruction 32 consecutive columns of one B row, coalesced; columns past N predicated off), so every full k-tile of every tile takes the bounds-free path on the unpadded B; C by rows through shared memory where K is short; split-K only for the tiles of a last partial wave (whole tiles in the full waves before it); for the mid sizes where ffma_regdb_padb's copy of B is a tenth of the time."
source = "cuda/lab/ffma_regdb.cu (included, B4 = 1); coalesced scalar global-to-shared copies of a misaligned operand, as CUTLASS's 4-byte-alignment SIMT GEMMs and cp.async with a per-copy source size"
role = "rung"
order = 30

[params]             # ffma_regdb's, without the 256-thread 128-row tile
bm = [64, 80, 96]
tn = [8]
bk = [8]
splitk = [1, 2, 3, 4, 6, 8]
crows = [1, 0]       # C stored by rows through shared memory (1) or from the fragments (0): by K
hybrid = [0, 1]      # split-K for every tile (0) or the last partial wave's tiles only (1): by the grid

[derived]
threads = "(bm // 8) * (128 // tn)"
stages = "4 if bk == 8 else 3"
tiles = "cdiv(M, bm) * cdiv(N, 128)"
per_sm = "3 if bm == 64 else 2"                # CTAs per SM (registers: 155-167 at 128 threads)
wave = "SMS * per_sm"
# the tiles split: with hybrid those of the last partial wave, else all (a grid short of a wave)
rem = "0 if splitk == 1 else (tiles % wave if hybrid else tiles)"
# workspace: arrival counters and partial tiles for the rem split tiles
workspace = "0 if splitk == 1 else roundup(4 * rem, 256) + splitk * rem * bm * 128 * 4"

[chosen]             # the value a run that leaves it to the shape (auto) gets; the constraints say why
crows = "1 if K <= 2560 else 0"
hybrid = "1 if splitk > 1 and tiles > wave else 0"

[[constraints]]
check = "N % 4 != 0"
reason = "B rows are 16-byte aligned (N % 4 == 0): use ffma_regdb, which copies them 16 bytes at a time"

[[constraints]]
check = "(bm == 64 or bm == 80 or bm == 96) and tn == 8 and bk == 8 and splitk >= 1"
reason = "bm must be 64, 80 or 96 (the tiles whose edges copy clamped; the 256-thread 128-row tile has no register for B4's pointers), tn 8, bk 8, splitk ≥ 1"

[[constraints]]
check = "crows == (1 if K <= 2560 else 0)"
reason = "K = {K} takes crows = {1 if K <= 2560 else 0} (chosen by the shape): C goes by rows through shared memory where K ≤ 2560 (its stores a larger part of the time: 1025³ 93.9% of cuBLAS against 91.8%), from the fragments past it (the main loop's allocation without the staging code: 97×4099×4096 103.7% against 99.9%)"

[[constraints]]
check = "bm == 64 or (M <= bm and M > bm - 16)"
reason = "{bm}-row tiles are for M = {bm - 15}..{bm}, one tile where 64-row ones take two; elsewhere 64-row tiles (3 blocks per SM) ran faster (M = 200: 70% of cuBLAS against 90%)"

[[constraints]]
check = "hybrid == (1 if splitk > 1 and tiles > wave else 0)"
reason = "{tiles} tiles for {wave} CTAs a wave at split-K {splitk} take hybrid = {1 if splitk > 1 and tiles > wave else 0} (chosen by the shape: split-K for a last partial wave's tiles only where the tiles make more than a wave, every tile split where they make less; the 1-D grid's build ran 1025³ 1.3% slower where both split every tile)"

[[constraints]]
check = "splitk == 1 or rem > 0"
reason = "the {tiles} tiles fill whole waves of {wave} CTAs: no tile of a partial wave to split"

[[constraints]]
check = "workspace <= 2**28"
reason = "split-K {splitk} would need {workspace // 2**20} MiB of partial tiles (at most 256): split-K is for grids too small to fill the GPU"

[launch]
grid = ["tiles + rem * (splitk - 1) if hybrid else cdiv(N, 128)", "1 if hybrid else cdiv(M, bm) * splitk"]
block = ["threads", 1]
shared = "stages * bk * (bm + 4 + 128) * 4"
workspace = "workspace"
+++
*/
/*
 * ffma_regdb_b4.cu -- ffma_regdb.cu for N % 4 != 0 with B read where it lies.
 *
 * Why: with N % 4 != 0 B's rows start at N * 4-byte strides, so no 16-byte copy of B is
 * aligned. ffma_regdb_padb.cu pads B in a pre-pass (K * N * 4 bytes read, K *
 * roundup(N, 4) * 4 written, plus a launch): at 1000 x 1001 x 1000 that copy is ~5 us of a
 * ~50 us GEMM, and the padded rung ran 86% of cuBLAS FP32 where ffma_regdb at 1000^3 runs
 * 95% (benchmarks/NOTES.md, issue 11 rounds 13 and 14). Round 13 tried ffma_regdb's own
 * 4-byte path on the fast path (each thread four copies of 4 consecutive columns): a warp
 * instruction then touched a 512-byte stretch for 128 useful bytes, and it lost everywhere.
 *
 * Technique: the B k-tile (BK rows x 128 columns) is copied row by row by whole warps: warp w
 * takes rows w, w + NT/32, .., lane l columns l, l + 32, l + 64, l + 96 of each, so one copy
 * instruction moves 32 consecutive floats (128 bytes, 4-5 sectors) into 32 consecutive
 * shared words (no bank conflict). A row's source is one pointer made per CTA plus k0 * N,
 * its four copies immediate offsets from it; columns past N are predicated off per CTA
 * (cp.async's source size 0: zero-filled, nothing read), so the edge column tile copies
 * like the others. Per k-tile a thread issues 8 B copies (BM = 64) against ffma_regdb's 2,
 * beside 4 A copies and 512 FFMAs. C's rows are misaligned too: with crows = 1 the tile
 * goes through shared memory in two halves and warps store whole rows, 32 consecutive
 * columns per instruction; with crows = 0 each thread stores its fragments 4 bytes at a
 * time (each instruction 32 values 16 bytes apart). The staging code moves the main loop's
 * register allocation (157 -> 167 registers at BM = 64, split-K 3), which costs 1-4% where
 * K is long and C's stores a small part: the header takes crows = 1 for K <= 2560 only.
 * Split-K, where the tiles make more than one wave (hybrid = 1, HYBRID in 18): only the tiles
 * of the last partial wave are cut into splitk slices, the tiles of the full waves before it
 * run whole (a 1-D grid, whole tiles first; rem = tiles mod (#SMs x CTAs per SM) from the
 * header): 2047 x 2049 x 1023 82.2 -> 84.7% of cuBLAS FP32. Where they make less, every tile
 * is split, as ffma_regdb's split-K (hybrid = 0). Everything else is ffma_regdb: tiles, fragments,
 * register double buffering, the split-K fix-up.
 *
 * Compile-time constants (ELEM, ACC, BM, TN, BK, SPLITK): as ffma_regdb.cu (BM 64, 80
 * or 96); CROWS and HYBRID (0 or 1) as above. Workspace (SPLITK > 1): counters and partial
 * tiles for the rem split tiles, laid out as 18's. Launch: block (BM / 8 * 16, 1), grid
 * (tiles - rem + rem * SPLITK, 1) with HYBRID, else as 18. Arguments: matmul(A, B, C, M, N, K, workspace).
 */
#define B4 1
#include "ffma_regdb.cu"
