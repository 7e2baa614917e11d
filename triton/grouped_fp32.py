"""
+++
name = "triton_grouped_fp32"
title = "Triton: a tiled matmul with grouped tile ordering, strict FP32 (ieee dot)"
summary = "What a Triton user writes first: one program per C tile, tiles visited in groups of group_m rows so that neighbouring programs share A and B tiles in L2; tl.dot in IEEE FP32."
source = "the Triton matmul tutorial (grouped ordering), in the lab's words"
role = "rung"
precision = "fp32"

[params]
block_m = [64, 32, 128]
block_n = [64, 32, 128]
block_k = [32, 16, 64]
group_m = [8, 4]
num_warps = [4, 8]
num_stages = [3, 4]

[descriptions]
block_m = "rows of C one program computes"
block_n = "columns of C one program computes"
block_k = "depth of the A and B tiles loaded per step of K"
group_m = "tile rows visited together, so that neighbouring programs reuse B's tiles in L2"
num_warps = "warps per program (Triton's launch option): 32 * num_warps threads per block"
num_stages = "software-pipeline depth of the K loop (Triton's launch option)"

[launch]
grid = ["cdiv(M, block_m) * cdiv(N, block_n)", "1"]
+++

The kernel's side: ``matmul(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
stride_cm, stride_cn, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M)``; the header's parameters arrive
upper-case as ``tl.constexpr`` (num_warps and num_stages are launch options).
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
        acc = tl.dot(a, b, acc, input_precision="ieee")
    tl.store(C + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))
