"""
+++
name = "triton_grouped_half"
title = "Triton: a tiled matmul with grouped tile ordering, FP16/BF16 tensor cores, FP32 accumulation"
summary = "What a Triton user writes first in half precision: one program per C tile, tiles visited in groups of group_m rows so that neighbouring programs share A and B tiles in L2; tl.dot of float16 or bfloat16 tiles summed in FP32 (on Hopper Triton issues wgmma from shared tiles that cp.async fills num_stages deep), C stored in its own type (float32, or the input type) by acc.to(C.dtype.element_ty). B is read through its strides, so one kernel takes B as K×N or as N×K. Tiles sized for Hopper: up to 128 × 256 with 64-deep k-steps."
source = "the Triton matmul tutorial (grouped ordering, FP16 inputs), in the lab's words; triton/grouped_tf32.py"
role = "rung"
precision = "half"
dtypes = ["float16", "bfloat16"]
layouts = ["kn", "nk"]

[params]
block_m = [128, 64]
block_n = [128, 256, 64]
block_k = [64, 32]
group_m = [8]
num_warps = [8, 4]
num_stages = [3, 4]

[descriptions]
block_m = "rows of C one program computes"
block_n = "columns of C one program computes"
block_k = "depth of the A and B tiles loaded per step of K (16-bit elements)"
group_m = "tile rows visited together, so that neighbouring programs reuse B's tiles in L2"
num_warps = "warps per program (Triton's launch option): 32 * num_warps threads per block"
num_stages = "software-pipeline depth of the K loop (Triton's launch option): A and B tiles in flight"

[[constraints]]
check = "num_stages * (block_m + block_n) * block_k * 2 <= 232448"
reason = "num_stages A and B tiles of 2-byte elements must fit the 227 KB of shared memory a block may have"

[[constraints]]
check = "block_m * block_n <= 128 * 32 * num_warps"
reason = "at most 128 FP32 accumulators a thread (block_m * block_n / (32 * num_warps)): a 128 × 256 tile on 4 warps needs 256 and spills"

[launch]
grid = ["cdiv(M, block_m) * cdiv(N, block_n)", "1"]
+++

The kernel's side: ``matmul(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)``; A and B point to float16 or
bfloat16, C to float32 or the input type (the run's output); B as N×K comes with
``stride_bk = 1, stride_bn = K``. The header's parameters arrive upper-case as
``tl.constexpr`` (num_warps and num_stages are launch options).
"""
import triton
import triton.language as tl


@triton.jit
def matmul(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
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
        acc = tl.dot(a, b, acc)          # 16-bit products, summed in FP32
    # C's own type: float32, or the inputs' 16-bit type (rounded to nearest here)
    tl.store(C + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc.to(C.dtype.element_ty),
             mask=(rows[:, None] < M) & (cols[None, :] < N))
