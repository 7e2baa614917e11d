/*
+++
name = "ffma_regdb_padb"
title = "ffma_regdb for N not a multiple of 4: a pre-pass copies B into rows padded to roundup(N, 4) with zeros, so every B copy is one 16-byte cp.async and interior tiles take the bounds-free path (unpadded, each B element costs a 4-byte copy with a bounds check on every tile); what ffma_wide_padb is to ffma_wide, for the shapes where ffma_regdb's smaller tiles win."
source = "cuda/lab/ffma_regdb.cu (included, PAD_B = 1); the pre-pass of cuda/lab/ffma_wide_padb.cu (pad_b_rows in lab_ptx.cuh); operand padding as cuBLAS/CUTLASS do for misaligned leading dimensions"
role = "rung"
order = 27

[params]             # ffma_regdb's
bm = [128, 96, 80, 64]
tn = [8]
bk = [8]
splitk = [1, 2, 3, 4, 6, 8]
hybrid = [0, 1]      # split-K for every tile (0) or the last partial wave's tiles only (1): by the grid

[derived]
ldb = "roundup(N, 4)"
threads = "(bm // 8) * (128 // tn)"
stages = "4 if bk == 8 else 3"
tiles = "cdiv(M, bm) * cdiv(N, 128)"
per_sm = "3 if bm == 64 else 2"                # CTAs per SM (registers)
wave = "SMS * per_sm"
# the tiles split: with hybrid those of the last partial wave, else all (a grid short of a wave)
rem = "0 if splitk == 1 else (tiles % wave if hybrid else tiles)"
workspace = "0 if splitk == 1 else roundup(4 * rem, 256) + splitk * rem * bm * 128 * 4"

[chosen]             # the value a run that leaves it to the shape (auto) gets; the constraints say why
hybrid = "1 if splitk > 1 and tiles > wave else 0"

[[constraints]]
check = "N % 4 != 0"
reason = "B rows are already 16-byte aligned (N % 4 == 0): ffma_regdb runs the same without the copy"

[[constraints]]
check = "(bm == 64 or bm == 80 or bm == 96 or bm == 128) and (tn == 8 or tn == 16) and (bk == 8 or bk == 16) and splitk >= 1"
reason = "bm must be 64, 80, 96 or 128, tn 8 or 16, bk 8 or 16, splitk ≥ 1 (as ffma_regdb)"

[[constraints]]
check = "bm == 64 or bm == 128 or (M <= bm and M > bm - 16)"
reason = "{bm}-row tiles are for M = {bm - 15}..{bm}, one tile where 64-row ones take two; elsewhere 64-row tiles (3 blocks per SM) ran faster (M = 200: 70% of cuBLAS against 90%)"

[[constraints]]
check = "threads >= 128"
reason = "bm=64 with tn=16 is 64 threads per block: too few warps per SM"

[[constraints]]
check = "not (bm == 128 and tn == 8 and splitk > 1)"
reason = "split-K with the 256-thread 128×128 tile needs more than 128 registers (spills at 2 blocks/SM)"

[[constraints]]
check = "hybrid == (1 if splitk > 1 and tiles > wave else 0)"
reason = "{tiles} tiles for {wave} CTAs a wave at split-K {splitk} take hybrid = {1 if splitk > 1 and tiles > wave else 0} (chosen by the shape: split-K for a last partial wave's tiles only where the tiles make more than a wave, every tile split where they make less)"

[[constraints]]
check = "splitk == 1 or rem > 0"
reason = "the {tiles} tiles fill whole waves of {wave} CTAs: no tile of a partial wave to split"

[[constraints]]
check = "workspace <= 2**28"
reason = "split-K {splitk} would need {workspace // 2**20} MiB of partial tiles (at most 256): split-K is for grids too small to fill the GPU"

[[constraints]]
check = "not (bm == 128 and tn == 8 and bk == 16)"
reason = "bk=16 with the 256-thread 128×128 tile spills at 128 registers (2 blocks/SM)"

[launch]
grid = ["tiles + rem * (splitk - 1) if hybrid else cdiv(N, 128)", "1 if hybrid else cdiv(M, bm) * splitk"]
block = ["threads", 1]
shared = "stages * bk * (bm + 4 + 128) * 4"
workspace = "workspace"

[prepass]            # B (K × N) -> Bp (K × ldb), zero columns N..ldb-1
entry = "pad_b"
grid = ["cdiv(ldb, 4 * 128)", "min(K, 65535)"]
block = [128, 1]
scratch = "4 * K * ldb"
+++
*/
/*
 * ffma_regdb_padb.cu -- ffma_regdb.cu for shapes whose N is not a multiple of 4.
 *
 * Why: as in ffma_wide_padb.cu. With N % 4 != 0 the rows of B start at N * 4-byte strides,
 * so ffma_regdb copies B 4 bytes at a time with a bounds check per element, on every tile,
 * and no tile takes the bounds-free path. On an H100 ffma_regdb ran 1000x3000x2000 and
 * 1000x3004x2000 at 102% of cuBLAS FP32 and 1000x3001x2000 at 87.5% (benchmarks/NOTES.md,
 * issue 11 round 9); ffma_wide_padb, the padded 256-row rung, reached 76% there (96 tiles
 * for 132 SMs).
 *
 * Technique: operand padding, as libraries do for a leading dimension that breaks vector
 * alignment (an aligned copy of the operand, paid once per GEMM), on ffma_regdb's tiles.
 * How: the pre-pass (pad_b_rows, lab_ptx.cuh; timed with the GEMM) copies B into a scratch
 * buffer Bp of K rows of ldb = roundup(N, 4) floats, the last ldb - N zero; matmul is
 * ffma_regdb compiled with PAD_B = 1, reading B from Bp with row stride ldb: every B copy is
 * one 16-byte cp.async and the zero columns make the edge tiles' copies that straddle N
 * exact. C keeps its N columns (scalar stores when N % 4). Cost of the copy: K * N * 4 bytes
 * read and K * ldb * 4 written.
 *
 * Compile-time constants (ELEM, ACC, BM, TN, BK, SPLITK, HYBRID), split-K and its workspace:
 * as ffma_regdb.cu (HYBRID, the header's hybrid: split-K for a last partial wave's tiles
 * only where the tiles make more than a wave). Pre-pass: block
 * (128, 1), grid (ceil(ldb / 512), min(K, 65535)). Arguments: pad_b(A, B, S, M, N, K),
 * matmul(A, S, C, M, N, K, workspace).
 */
#define PAD_B 1                       /* before lab_ptx.cuh: LDB_OF pads */
#include "lab_ptx.cuh"
#include "ffma_regdb.cu"

extern "C" __global__ __launch_bounds__(128)
void pad_b(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
           int M, int N, int K)
{
    (void)A; (void)M;
    pad_b_rows(B, S, N, K);
}
