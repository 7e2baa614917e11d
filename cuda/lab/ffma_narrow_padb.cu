/*
+++
name = "ffma_narrow_padb"
title = "ffma_narrow for N not a multiple of 4 (N ≤ 64): a pre-pass copies the narrow B into rows padded to roundup(N, 4) with zeros, so each thread's B copy per k-tile is one 16-byte cp.async instead of four 4-byte ones; what ffma_regdb_padb is to ffma_regdb, for the tall-and-narrow class."
source = "cuda/lab/ffma_narrow.cu (included, PAD_B = 1); operand padding as cuBLAS/CUTLASS do for misaligned leading dimensions (the pre-pass of cuda/lab/ffma_regdb_padb.cu, one thread per 16-byte vector of the padded B)"
role = "rung"
order = 29

[params]             # ffma_narrow's
bn = [64, 48, 32, 16]
bm = [128, 256, 64]
splitk = [1, 2, 3, 4, 6, 8, 12, 16]

[derived]
ldb = "roundup(N, 4)"
tn = "bm * bn // 1024"
stages = "4"
tiles = "cdiv(M, bm) * cdiv(N, bn)"
workspace = "0 if splitk == 1 else roundup(4 * tiles, 256) + splitk * tiles * bm * bn * 4"

[[constraints]]
check = "N % 4 != 0"
reason = "B rows are already 16-byte aligned (N % 4 == 0): ffma_narrow runs the same without the copy"

[[constraints]]
check = "N <= 64"
reason = "made for narrow N (≤ 64); use ffma_regdb_padb or ffma_wide_padb, whose 128-column tiles N fills"

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

[prepass]            # B (K × N) -> Bp (K × ldb), zero columns N..ldb-1; a thread per 16-byte vector
entry = "pad_b"
grid = ["cdiv(K * (ldb // 4), 128)", 1]
block = [128, 1]
scratch = "4 * K * ldb"
+++
*/
/*
 * ffma_narrow_padb.cu -- ffma_narrow.cu for narrow N that is not a multiple of 4.
 *
 * Why: with N % 4 != 0 the rows of B are not 16-byte aligned, so ffma_narrow copies each
 * thread's B vector of a k-tile as four 4-byte copies (columns clamped). On an H100
 * 8192x50x8192 took 236.7 us against 224.4 us at N = 52, with 3.17 M global load requests
 * against 2.38 M (benchmarks/NOTES.md, issue 11 round 12, section 3).
 *
 * Technique: operand padding, as ffma_regdb_padb.cu does for ffma_regdb. The pre-pass
 * (timed with the GEMM) copies B into a scratch buffer Bp of K rows of ldb = roundup(N, 4)
 * floats, the last ldb - N zero; matmul is ffma_narrow compiled with PAD_B = 1, reading B
 * from Bp with row stride ldb: one 16-byte cp.async a thread a k-tile. A narrow B is small
 * (K x 64 floats at most: 2 MB at K = 8192), so the copy is one thread per 16-byte vector of
 * Bp over the whole of it, where 27's pre-pass runs a block per row of a wide B.
 *
 * Compile-time constants (ELEM, ACC, BN, BM, SPLITK), split-K and its workspace: as
 * ffma_narrow.cu. Pre-pass: block
 * (128, 1), grid (ceil(K * ldb / 4 / 128), 1). Arguments: pad_b(A, B, S, M, N, K),
 * matmul(A, S, C, M, N, K, workspace).
 */
#define PAD_B 1                       /* before lab_ptx.cuh: LDB_OF pads */
#include "lab_ptx.cuh"
#include "ffma_narrow.cu"

extern "C" __global__ __launch_bounds__(128)
void pad_b(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
           int M, int N, int K)
{
    (void)A; (void)M;
    const int vecs = LDB_OF(N) / 4;                    /* 16-byte vectors per row of Bp */
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= K * vecs)
        return;
    const int k = g / vecs, c = (g % vecs) * 4;
    const ELEM* src = B + (size_t)k * N + c;
    VEC v;
    v.x = c + 0 < N ? src[0] : (ELEM)0;
    v.y = c + 1 < N ? src[1] : (ELEM)0;
    v.z = c + 2 < N ? src[2] : (ELEM)0;
    v.w = c + 3 < N ? src[3] : (ELEM)0;
    *reinterpret_cast<VEC*>(S + (size_t)k * LDB_OF(N) + c) = v;
}
