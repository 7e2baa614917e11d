"""FP8 on Hopper's tensor cores sums in fewer bits than FP32 (engine.measure.verify's
FP8_TENSOR_CORE_U): a product computed the way the hardware adds passes verification
when its sums move into FP32 every 128 of K (as fp8_wgmma does), and a result missing
one k-tile, or summed without that promotion over a long K, still fails."""
from __future__ import annotations

import numpy as np
import pytest

from engine.common.dtypes import TypeSpec
from engine.inputs import matrices
from engine.measure import verify
from engine.measure.verify import FP8_TENSOR_CORE_U, Reference

BITS = 13          # what the model keeps: u_tc = 2^-13


def tensor_core_sum(a: np.ndarray, b: np.ndarray, promote: int, group: int = 32) -> np.ndarray:
    """A·B as Hopper's FP8 wgmma adds it: ``group`` exact products at a time aligned to
    the largest of them and the running sum, truncated BITS below it; the running sum
    added into an FP32-exact total every ``promote`` of K (0: never)."""
    total = np.zeros((a.shape[0], b.shape[1]))
    acc = np.zeros_like(total)
    for g0 in range(0, a.shape[1], group):
        if promote and g0 % promote == 0:
            total, acc = total + acc, np.zeros_like(acc)
        p = a[:, g0:g0 + group, None] * b[None, g0:g0 + group, :]
        top = np.maximum(np.abs(acc), np.abs(p).max(axis=1))
        q = 2.0 ** (np.floor(np.log2(np.where(top > 0, top, 1.0))) - BITS)
        acc = (np.trunc(acc / q) + np.trunc(p / q[:, None, :]).sum(axis=1)) * q
    return total + acc


def _case(m, n, k, dtype, out, seed):
    ops = matrices.generate_pair(m, n, k, dtype, seed=seed)
    a = np.asarray(ops.a).astype(np.float64)
    b = np.asarray(ops.b).astype(np.float64)
    spec = TypeSpec(dtype, out)
    ref = Reference(ops.a, ops.b, spec=spec, scale_a=ops.scale_a, scale_b=ops.scale_b,
                    force_method="full")
    return a, b, ops.scale_a * ops.scale_b, ref


@pytest.mark.parametrize("m,n,k,dtype", [(127, 61, 253, "float8_e4m3"), (61, 127, 253, "float8_e5m2"),
                                         (40, 36, 2048, "float8_e4m3")])
def test_promoted_tensor_core_sums_pass_and_a_missing_k_tile_fails(m, n, k, dtype, monkeypatch):
    seed = int(np.random.default_rng().integers(1 << 30))
    a, b, scale, ref = _case(m, n, k, dtype, "float32", seed)
    c = tensor_core_sum(a, b, promote=128)
    with monkeypatch.context() as patch:     # FP32's bounds alone call it wrong
        patch.setattr(verify, "FP8_TENSOR_CORE_U", 0.0)
        assert not ref.check((c * scale).astype(np.float32), "fp8").passed, seed
    v = ref.check((c * scale).astype(np.float32), "fp8")
    assert v.passed, (seed, v.detail)
    short = tensor_core_sum(a[:, 128:], b[128:], promote=128) if k > 128 else \
        tensor_core_sum(a[:, 1:], b[1:], promote=128)
    assert not ref.check((short * scale).astype(np.float32), "fp8").passed, seed


def test_one_wrong_element_still_fails():
    a, b, scale, ref = _case(127, 61, 253, "float8_e4m3", "float32", 7)
    c = tensor_core_sum(a, b, promote=128)
    i, j = 50, 30
    # off by 1% of the element's own noise scale sqrt(Σ (a·b)²): far above u_tc's bound
    c[i, j] += 0.01 * np.sqrt((a[i] ** 2) @ (b[:, j] ** 2))
    v = ref.check((c * scale).astype(np.float32), "fp8")
    assert not v.passed and "[50, 30]" in v.detail


def test_unpromoted_sums_over_a_long_k_are_outside_the_bound():
    """cuBLASLt's FAST_ACCUM kind of kernel: the tensor cores' sum over all of K grows
    beyond u_tc's bound, and verification says so rather than widening for it."""
    a, b, scale, ref = _case(32, 32, 8192, "float8_e4m3", "float32", 3)
    c = tensor_core_sum(a, b, promote=0)
    assert not ref.check((c * scale).astype(np.float32), "fp8").passed
    assert FP8_TENSOR_CORE_U == 2.0 ** -BITS
