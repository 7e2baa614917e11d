/*
+++
name = "ffma_wide_b4"
title = "ffma_wide for N not a multiple of 4 without a pre-pass: B's k-tiles come as 4-byte cp.async copies laid out along the warps' rows (each instruction 32 consecutive columns of one B row, coalesced), the shifted edge tiles keeping every copy inside N, so interior tiles copy without a bounds check; C by rows through shared memory where K is short; for the large shapes where the padded rung's copy of B and its scattered 4-byte C stores cost 3-10%."
source = "cuda/lab/ffma_wide.cu (included, B4 = 1); the warp-row B copies of cuda/lab/ffma_regdb_b4.cu; coalesced scalar copies of a misaligned operand, as CUTLASS's 4-byte-alignment SIMT GEMMs"
role = "rung"
order = 31

[params]             # ffma_wide's, and C's store
bm = [256]
bk = [16, 8]
stages = [4]
sw = [1, 8]
splitk = [1, 4]
tailk = [8, 1]       # k-slices of the partial last wave's tiles (1: none)
crows = [1, 0]       # C stored by rows through shared memory (1) or from the fragments (0): by K

[defaults.sm_90]     # as ffma_wide
bk = 16

[derived]
smem = "stages * bk * (bm + 4 + 128) * 4"
srows = "M % bm if M > bm and M % bm <= 16 else 0"     # the strip, as ffma_wide's header says
strip = "cdiv(N, 128) if srows else 0"
tiles = "cdiv(M - srows, bm) * cdiv(N, 128)"
splits = "splitk if tiles <= 65536 else 1"
# the tail split of the partial last wave, as ffma_wide's header explains
last = "tiles % SMS"
tail = "last if tailk > 1 and tiles <= 65536 and 2 * cdiv(last * tailk, SMS) <= tailk else 0"

[chosen]             # the value a run that leaves it to the shape (auto) gets; the constraints say why
crows = "1 if K <= 3072 else 0"

[[constraints]]
check = "N % 4 != 0"
reason = "B rows are 16-byte aligned (N % 4 == 0): use ffma_wide, which copies them 16 bytes at a time"

[[constraints]]
check = "bm == 256 and (bk == 8 or bk == 16) and stages >= 2 and sw >= 1 and splitk >= 1"
reason = "bm must be 256, bk 8 or 16, stages ≥ 2, sw ≥ 1, splitk ≥ 1 (as ffma_wide)"

[[constraints]]
check = "tailk >= 1 and (splitk == 1 or tailk == 1)"
reason = "tailk must be ≥ 1, and split-K of every tile (splitk={splitk}) excludes the last wave's (tailk={tailk})"

[[constraints]]
check = "crows == (1 if K <= 3072 else 0)"
reason = "K = {K} takes crows = {1 if K <= 3072 else 0} (chosen by the shape): C goes by rows through shared memory where K ≤ 3072 (its stores a larger part of the time: 2048×2047×1024 89.9% of cuBLAS against 82.9%, 3000×3001×3000 93.1 against 88.0), from the fragments past it (the main loop's allocation without the staging code: 8191×8193×4095 96.9 against 95.0)"

[[constraints]]
check = "smem <= 227 * 1024"
reason = "{smem} B of shared memory (> 227 KB)"

[launch]
grid = ["tiles + tail * (tailk - 1) + strip if tailk > 1 else cdiv(N, 128)",
        "1 if tailk > 1 else cdiv(M - srows, bm) * splits + (1 if srows else 0)"]
block = [256, 1]
shared = "smem"
+++
*/
/*
 * ffma_wide_b4.cu -- ffma_wide.cu for N % 4 != 0 with B read where it lies.
 *
 * Why: with N % 4 != 0 no 16-byte copy of B is aligned. ffma_wide_padb.cu pads B in a
 * pre-pass (K * N * 4 bytes read, K * roundup(N, 4) * 4 written, and a second launch: 7 us
 * under ncu at 2048 x 2047 x 1024), and stores C from the fragments 4 bytes at a time, each
 * store instruction 32 values 16 bytes apart, so that every 32-byte sector of C is written
 * in four pieces: its GEMM took 256.6 us under ncu at 2048 x 2047 x 1024 against ffma_wide's
 * 232.7 us at 2048^2 x 1024 with the same 128 tiles, and the rung ran 82% of cuBLAS FP32
 * there, where ffma_wide runs 96% at 2048^2 x 1024 (benchmarks/NOTES.md, issue 11 round 15).
 * cuBLAS's FFMA kernels copy with 4-byte alignment at every N (their names say aligna4) and
 * lose nothing to N % 4.
 *
 * Technique: ffma_regdb_b4.cu's copies on ffma_wide's tiles. The B k-tile (BK rows x 128
 * columns) is copied by whole warps: warp w takes rows w, w + 8 (BK = 16), lane l columns
 * l, l + 32, l + 64, l + 96 of each, so one cp.async.ca instruction moves 32 consecutive
 * floats (128 bytes, 4-5 sectors) into 32 consecutive shared words (no bank conflict), from
 * one running pointer per thread (advanced by BK * N per k-tile) plus immediate offsets.
 * ffma_wide's shifted edge tiles (the last tile column computes the 128 columns that end at
 * N) keep every copy of every full k-tile inside B, so none is predicated; K's last partial
 * k-tile and shapes under one tile take the bounds-checked copies. A thread issues 8 B
 * copies per k-tile (BK = 16) against ffma_wide's 2, beside 2048 FFMAs. With crows = 1 C
 * goes through shared memory a 4-row piece per thread at a time and warps store whole rows,
 * 32 consecutive columns per instruction (split-K slices after the first add what is
 * there); the staging code moves the main loop's register allocation, so the header takes it
 * where K is short (its stores a larger share of the time). Everything else is ffma_wide:
 * tiles, block order, the tail split of the last wave, split-K, the strip of the last rows.
 *
 * Compile-time constants (ELEM, ACC, BM, BK, STAGES, SW, SPLITK, TAILK): as ffma_wide.cu
 * (BK 8 or 16); CROWS (0 or 1) as above. Launch geometry: as ffma_wide.cu. Arguments:
 * matmul(A, B, C, M, N, K).
 */
#define B4 1
#include "ffma_wide.cu"
