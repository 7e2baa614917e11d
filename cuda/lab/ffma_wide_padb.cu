/*
+++
name = "ffma_wide_padb"
title = "ffma_wide for N not a multiple of 4: a pre-pass copies B into rows padded to roundup(N, 4) with zeros, so every B copy is one 16-byte cp.async and interior tiles take the bounds-free path (unpadded, each B element costs a 4-byte copy on every tile)."
source = "cuda/lab/ffma_wide.cu (included, PAD_B = 1); operand padding as cuBLAS/CUTLASS do for misaligned leading dimensions (an aligned copy, or alignment-1 iterators); the seed on coalescing and padding"
role = "rung"
order = 25

[params]             # ffma_wide's
bm = [256]
bk = [8, 16]
stages = [4]
sw = [1, 8]
splitk = [1, 4]
tailk = [8, 1]       # k-slices of the partial last wave's tiles (1: none); 8 costs ≤ 0.6 % where it does not split (H100)

[defaults.sm_90]     # as ffma_wide
bk = 16

[derived]
ldb = "roundup(N, 4)"
smem = "stages * bk * (bm + 4 + 128) * 4"
srows = "M % bm if M > bm and M % bm <= 16 else 0"     # the strip, as ffma_wide's header says
strip = "cdiv(N, 128) if srows else 0"
tiles = "cdiv(M - srows, bm) * cdiv(N, 128)"
splits = "splitk if tiles <= 65536 else 1"
# the tail split of the partial last wave, as ffma_wide's header explains
last = "tiles % SMS"
tail = "last if tailk > 1 and tiles <= 65536 and 2 * cdiv(last * tailk, SMS) <= tailk else 0"

[[constraints]]
check = "N % 4 != 0"
reason = "B rows are already 16-byte aligned (N % 4 == 0): ffma_wide runs the same without the copy"

[[constraints]]
check = "bm == 256 and (bk == 8 or bk == 16) and stages >= 2 and sw >= 1 and splitk >= 1"
reason = "bm must be 256, bk 8 or 16, stages ≥ 2, sw ≥ 1, splitk ≥ 1 (as ffma_wide)"

[[constraints]]
check = "tailk >= 1 and (splitk == 1 or tailk == 1)"
reason = "tailk must be ≥ 1, and split-K of every tile (splitk={splitk}) excludes the last wave's (tailk={tailk})"

[[constraints]]
check = "smem <= 227 * 1024"
reason = "{smem} B of shared memory (> 227 KB)"

[launch]
grid = ["tiles + tail * (tailk - 1) + strip if tailk > 1 else cdiv(N, 128)",
        "1 if tailk > 1 else cdiv(M - srows, bm) * splits + (1 if srows else 0)"]
block = [256, 1]
shared = "smem"

[prepass]            # B (K × N) -> Bp (K × ldb), zero columns N..ldb-1
entry = "pad_b"
grid = ["cdiv(ldb, 4 * 128)", "min(K, 65535)"]
block = [128, 1]
scratch = "4 * K * ldb"
+++
*/
/*
 * ffma_wide_padb.cu -- ffma_wide.cu for shapes whose N is not a multiple of 4.
 *
 * Why: cp.async moves 16 bytes only from a 16-byte-aligned address. With N % 4 != 0 the rows
 * of B (K x N, row-major) start at N * 4-byte strides, so ffma_wide copies B 4 bytes at a
 * time, with a bounds check per element, on every tile: 4x the copy instructions of the
 * aligned case and no bounds-free interior path. On the H100 ffma_wide ran at 35.9 TFLOP/s
 * (72.0 % of cuBLAS) at 4100x4090x4095 against 48.9 (94.6 %) at 4096^3; cuBLAS loses
 * nothing on that shape (49.9 against 51.7 TFLOP/s; benchmarks/NOTES.md).
 *
 * Technique: operand padding, as libraries do for a leading dimension that breaks vector
 * alignment (an aligned copy of the operand, paid once per GEMM). How: a pre-pass (timed with the GEMM, launched by the cuda backend in the same region)
 * copies B into a scratch buffer Bp of K rows of ldb = roundup(N, 4) floats, the last
 * ldb - N of them zero; matmul is ffma_wide compiled with PAD_B = 1, reading B from Bp with
 * row stride ldb: every B copy is one 16-byte cp.async, interior tiles (block tile inside
 * M x N, full k-tile) take the running-pointer path, and the zero columns make the edge tiles'
 * 16-byte copies that straddle N exact. C keeps its N columns (scalar stores when N % 4).
 * A needs nothing: ffma_wide copies A 4 bytes at a time anyway, transposing it into shared
 * memory. Cost of the copy: K * N * 4 bytes read and K * ldb * 4 written, ~1.8 % of the
 * GEMM at 4100x4090x4095 on an H100 (~50 us against ~2.8 ms).
 *
 * Compile-time constants (ELEM and ACC for the element and accumulator types, BM, BK,
 * STAGES, SW, SPLITK, TAILK), launch geometry, split-K and the split last wave: as
 * ffma_wide.cu. Pre-pass: block
 * (128, 1), grid (ceil(ldb / 512), min(K, 65535)), each thread one 16-byte group of a padded
 * row, rows strided by gridDim.y. Arguments: pad_b(A, B, S, M, N, K), matmul(A, S, C, M, N, K).
 */
#define PAD_B 1                       /* before lab_ptx.cuh: LDB_OF pads */
#include "lab_ptx.cuh"
#include "ffma_wide.cu"

extern "C" __global__ __launch_bounds__(128)
void pad_b(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
           int M, int N, int K)
{
    (void)A; (void)M;
    pad_b_rows(B, S, N, K);
}
