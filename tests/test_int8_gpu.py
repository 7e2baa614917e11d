"""int8 on a GPU (issue 39, ladder step 35): int8_wgmma's exact int32 C at odd shapes, B as
K×N (transposed by its pre-pass) and N×K (read in place), every parameter value once;
unwritten tiles caught by the poisoned C; its rate against cuBLASLt's int8 GEMM at 4096³.
Skips cleanly without a CUDA device (or on one before sm_90: the kernel needs sm_90a)."""
from __future__ import annotations

import pytest

from engine.kernels import registry
from engine.run.runner import Plan
from tests.code_paths import distinct_items
from tests.helpers import require_backend, run_plan

pytestmark = pytest.mark.gpu

#: K % 16 != 0 (A and B padded), K < one k-tile, M and N off the tiles, more tiles than SMs,
#: K long enough for sums past 2²⁴ (what an FP32 sum could not hold exactly)
ODD = [(127, 61, 253), (61, 127, 253), (1, 1, 1), (33, 1, 65), (130, 131, 17),
       (257, 129, 9), (2100, 2050, 136), (129, 260, 1100)]


@pytest.mark.parametrize("layout", ["kn", "nk"])
def test_int8_wgmma_is_exact_at_odd_shapes(layout):
    require_backend("cuda")
    v = registry.get("int8_wgmma")
    # every code path and parameter value (tests.code_paths), not every product
    items = distinct_items([("int8_wgmma", c) for c in v.combos()], ODD, "int8")
    assert len({(c["bm"], c["bn"]) for _n, c in items}) >= 2
    plan = Plan(backend="cuda", items=items, shapes=ODD, dtype="int8", layout=layout,
                warmup=0, repeats=1)
    recs = run_plan(plan)[0]
    if all(r.status == "skipped" for r in recs):
        pytest.skip(recs[0].error)
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in recs if not r.passed]
    assert not bad, bad
    assert all(r.precision == "int8" and r.out_dtype == "int32" and r.layout == layout
               and r.max_abs == 0 for r in recs)


def test_int8_wgmma_against_cublaslt_at_4096():
    """Both exact on the same inputs (B as N×K, the TN form cuBLASLt's int8 GEMM takes), the
    kernel's % of cuBLASLt and of the int8 peak filled in and printed; the lab's int8 line
    picks a kernel that verifies too."""
    require_backend("cuda")
    v = registry.get("int8_wgmma")
    plan = Plan(backend="cuda", items=[("cublaslt_int8", {}), ("int8_wgmma", v.default_params()),
                                       ("lab_int8", {})],
                shapes=[(4096, 4096, 4096)], dtype="int8", layout="nk", warmup=2, repeats=10)
    recs = {r.variant: r for r in run_plan(plan)[0]}
    lt, mine, line = recs["cublaslt_int8"], recs["int8_wgmma"], recs["lab_int8"]
    if mine.status == "skipped":
        pytest.skip(mine.error)
    assert mine.passed and line.passed, (mine.error, line.error)
    assert 0 < mine.pct_of_peak < 100 and mine.bytes == 4096 * 4096 * (1 + 1 + 4)
    if lt.status == "skipped":
        pytest.skip(lt.error)
    assert lt.passed, lt.error
    assert mine.pct_of_cublas > 0
    print(f"\nint8_wgmma 4096³: {mine.gflops / 1e3:.0f} TOP/s, {mine.pct_of_cublas:.1f}% of "
          f"cuBLASLt ({lt.gflops / 1e3:.0f}), {mine.pct_of_peak:.1f}% of the int8 peak")
