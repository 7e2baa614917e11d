"""FP8 on a GPU (issue 39, ladder step 33): fp8_wgmma verified at odd shapes in e4m3 and
e5m2, C in BF16 and FP32, B as K×N (transposed by its pre-pass) and N×K (read in place),
with the inputs' per-tensor scales applied; unwritten tiles caught by the poisoned C.
Skips cleanly without a CUDA device (or on one before sm_90: the kernel needs sm_90a)."""
from __future__ import annotations

import pytest

from engine.kernels import registry
from engine.run.runner import Plan
from tests.code_paths import distinct_items
from tests.helpers import require_backend, run_plan

pytestmark = pytest.mark.gpu

FP8 = ("float8_e4m3", "float8_e5m2")
#: K % 16 != 0 (A and B padded), K < one k-tile, M and N off the tiles, more tiles than SMs
ODD = [(127, 61, 253), (61, 127, 253), (1, 1, 1), (33, 1, 65), (130, 131, 17),
       (257, 129, 9), (2100, 2050, 136), (129, 260, 40)]   # the last: N % 4 == 0 (8-byte stores of C)


@pytest.mark.parametrize("dtype", FP8)
@pytest.mark.parametrize("out,layout", [("bfloat16", "kn"), ("float32", "kn"), ("bfloat16", "nk")])
def test_fp8_wgmma_verifies_at_odd_shapes(dtype, out, layout):
    require_backend("cuda")
    v = registry.get("fp8_wgmma")
    # every code path and parameter value (tests.code_paths), not every product
    items = distinct_items([("fp8_wgmma", c) for c in v.combos()], ODD, dtype)
    assert len({(c["bm"], c["bn"]) for _n, c in items}) >= 2
    plan = Plan(backend="cuda", items=items, shapes=ODD,
                dtype=dtype, out_dtype=out, layout=layout, warmup=0, repeats=1)
    recs = run_plan(plan)[0]
    if all(r.status == "skipped" for r in recs):
        pytest.skip(recs[0].error)
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in recs if not r.passed]
    assert not bad, bad
    assert all(r.precision == "fp8" and r.out_dtype == out and r.layout == layout for r in recs)
    assert all(r.scale_a > 0 and r.scale_b > 0 for r in recs)


@pytest.mark.parametrize("dtype", FP8)
def test_fp8_wgmma_at_4096(dtype):
    """Verified at 4096³ in both layouts, its % of the FP8 peak filled in and printed."""
    require_backend("cuda")
    v = registry.get("fp8_wgmma")
    for layout in ("nk", "kn"):
        plan = Plan(backend="cuda", items=[("fp8_wgmma", v.default_params())],
                    shapes=[(4096, 4096, 4096)], dtype=dtype, layout=layout, warmup=2, repeats=10)
        (r,) = run_plan(plan)[0]
        if r.status == "skipped":
            pytest.skip(r.error)
        assert r.passed, r.error
        assert 0 < r.pct_of_peak < 100 and r.bytes == 4096 * 4096 * (1 + 1 + 2)
        print(f"\nfp8_wgmma {dtype} B {layout} 4096³: {r.gflops / 1e3:.0f} TFLOP/s, "
              f"{r.pct_of_peak:.1f}% of the FP8 peak")


def test_fp8_wgmma_against_cublaslt_at_4096():
    """e4m3, B as N×K (the TN form cuBLASLt's FP8 GEMM takes): both verified on the same
    inputs, the kernel's % of cuBLASLt filled in and printed, its relative L2 error within
    1.25× of cuBLASLt's (or under FP32's own accumulation rounding)."""
    require_backend("cuda")
    v = registry.get("fp8_wgmma")
    plan = Plan(backend="cuda", items=[("cublaslt_fp8", {}), ("fp8_wgmma", v.default_params())],
                shapes=[(4096, 4096, 4096)], dtype="float8_e4m3", layout="nk", warmup=2,
                repeats=10)
    recs = {r.variant: r for r in run_plan(plan)[0]}
    lt, mine = recs["cublaslt_fp8"], recs["fp8_wgmma"]
    if mine.status == "skipped":
        pytest.skip(mine.error)
    assert mine.passed, mine.error
    if lt.status == "skipped":
        pytest.skip(lt.error)
    assert lt.passed, lt.error
    assert mine.pct_of_cublas > 0
    assert mine.rel_l2 <= 1.25 * lt.rel_l2 or mine.rel_l2 < 2.0 ** -24 * 64
    print(f"\nfp8_wgmma e4m3 4096³: {mine.gflops / 1e3:.0f} TFLOP/s, {mine.pct_of_cublas:.1f}% of "
          f"cuBLASLt ({lt.gflops / 1e3:.0f}); rel L2 {mine.rel_l2:.3g} vs {lt.rel_l2:.3g}")
