"""
+++
name = "triton_grouped_fp8"
title = "Triton: a tiled matmul with grouped tile ordering, FP8 (e4m3/e5m2) tensor cores, scaled C"
summary = "What a Triton user writes first in FP8: one program per C tile, tiles visited in groups of group_m rows so that neighbouring programs share A and B tiles in L2; tl.dot of e4m3 or e5m2 tiles into FP32 accumulators (Hopper's wgmma; the tensor cores' partial sums moved into FP32 once per block_k of K, where Triton's sm_90 default never moves them), then C = scale * acc with scale = scale_a * scale_b, stored as bfloat16 or float32. Both layouts of B compile for sm_90 (Triton 3.6): as N×K, B is K-major as FP8 wgmma reads it and cp.async pipelines its tiles like A's; as K×N, Triton loads each B tile into registers and transposes it on its way to shared memory (byte permutes), so only A's tiles are pipelined: what the Triton tutorial's advice to pre-transpose B for FP8 avoids."
source = "the Triton matmul tutorial (grouped ordering, FP8 inputs with B transposed), in the lab's words; triton/grouped_half.py; cuda/ladder/33_fp8_wgmma.cu (the scale after K)"
role = "rung"
precision = "fp8"
dtypes = ["float8_e4m3", "float8_e5m2"]
layouts = ["kn", "nk"]

[params]
block_m = [128, 64]
block_n = [128, 256, 64]
block_k = [128, 64]
group_m = [8]
num_warps = [8, 4]
num_stages = [3, 4]

[descriptions]
block_m = "rows of C one program computes"
block_n = "columns of C one program computes"
block_k = "depth of the A and B tiles loaded per step of K (1-byte elements: 128 is one 128-byte row)"
group_m = "tile rows visited together, so that neighbouring programs reuse B's tiles in L2"
num_warps = "warps per program (Triton's launch option): 32 * num_warps threads per block"
num_stages = "software-pipeline depth of the K loop (Triton's launch option): A (and, B as N×K, B) tiles in flight"

[[constraints]]
check = "num_stages * (block_m + block_n) * block_k <= 232448"
reason = "num_stages A and B tiles of 1-byte elements must fit the 227 KB of shared memory a block may have"

[[constraints]]
check = "2 * block_m * block_n <= 128 * 32 * num_warps"
reason = "2 * block_m * block_n / (32 * num_warps) FP32 accumulators a thread (the sums and the tensor cores' partial sums that max_num_imprecise_acc keeps): more than 128 spill (128 × 256 on 8 warps needs 256)"

[launch]
grid = ["cdiv(M, block_m) * cdiv(N, block_n)", "1"]
+++

The kernel's side: ``matmul(A, B, C, M, N, K, scale, stride_am, stride_ak, stride_bk,
stride_bn, stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)``: A and B point to
float8e4nv or float8e5, C to bfloat16 or float32 (the run's output); ``scale`` is
scale_a·scale_b (a float, after K, as the CUDA FP8 kernels take it); B as N×K comes with
``stride_bk = 1, stride_bn = K``. The header's parameters arrive upper-case as
``tl.constexpr`` (num_warps and num_stages are launch options).
"""
import triton
import triton.language as tl


@triton.jit
def matmul(A, B, C, M, N, K, scale, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
           stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
           GROUP_M: tl.constexpr):
    # Grouped ordering: programs walk GROUP_M tile rows before the next column of tiles.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % group_rows
    tile_n = (pid % per_group) // group_rows

    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + ks
        a = tl.load(A + rows[:, None] * stride_am + kk[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(B + kk[:, None] * stride_bk + cols[None, :] * stride_bn,
                    mask=(kk[:, None] < K) & (cols[None, :] < N), other=0.0)
        # FP8 tensor cores sum in about 13 bits: move the sums into FP32 once per k-tile
        # (Triton's sm_90 default, 2**30, never does; docs/precisions.md)
        acc = tl.dot(a, b, acc, max_num_imprecise_acc=BLOCK_K)
    # the per-tensor scales on the FP32 sums, then C's own type (bfloat16 or float32)
    c = acc * scale
    tl.store(C + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c.to(C.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))
