"""The cpu backend: cpu_numpy verified for both dtypes, hot and cold mode recorded,
and the time-budget mode (at least 3 launches, stopping near the budget)."""
from __future__ import annotations

import math
import secrets
import time

import pytest

from engine.kernels import registry
from engine.measure.backends.base import MIN_BUDGET_LAUNCHES
from engine.measure.backends.cpu import CpuBackend
from engine.run.runner import Plan, Sweep, expand_items
from tests.helpers import run_plan

SEED = secrets.randbelow(2**31)
SHAPES = [(127, 253, 61), (61, 127, 253), (64, 64, 64), (1, 1, 1)]


@pytest.fixture(scope="module")
def sweep():
    s = Sweep()
    yield s
    s.close()


def test_cpu_backend_offers_cpu_numpy():
    items = expand_items("cpu")
    assert items == [("cpu_numpy", {})]
    # the Triton kernels' interpreter runs only when named (tests/test_triton_kernels.py)
    assert [v.name for v in registry.variants_for("cpu") if not v.is_triton] == ["cpu_numpy"]


@pytest.mark.parametrize("cold", [False, True], ids=["hot", "cold"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cpu_numpy_verifies_and_records_mode(sweep, dtype, cold):
    plan = Plan(backend="cpu", items=expand_items("cpu"), shapes=SHAPES, dtype=dtype,
                dist="uniform" if dtype == "float32" else "int", warmup=1, repeats=3,
                cold=cold, seed=SEED)
    events = []
    recs = sweep.run(plan, events.append)
    assert len(recs) == len(SHAPES)
    for r, (m, n, k) in zip(recs, SHAPES):
        where = (r.m, r.n, r.k, dtype, cold, SEED)
        assert (r.backend, r.variant, r.dtype) == ("cpu", "cpu_numpy", dtype), where
        assert (r.m, r.n, r.k) == (m, n, k), where
        assert r.mode == ("cold" if cold else "hot"), where
        assert r.status == "ok" and r.passed is True and r.verify_method == "full", (where, r.error)
        assert r.rel_l2 <= (1e-5 if dtype == "float32" else 0.0), where
        assert r.repeats == 3 and r.warmup == 1, where
        assert 0 < r.min_ms <= r.median_ms <= r.max_ms and math.isfinite(r.noise_pct), where
        assert r.gflops == pytest.approx(2 * m * n * k / (r.median_ms * 1e-3) / 1e9, rel=1e-12)
        assert r.upload_ms == 0.0          # host memory: nothing to upload
    assert events[0].kind == "started" and events[-1].kind == "finished"
    assert not [e for e in events if e.kind == "log" and e.level == "error"]


def test_cold_flush_stays_outside_the_timed_launch(sweep):
    """Cold launches follow a 256 MiB cache flush: the flush must not be inside the timing
    (a tiny problem stays far under the ~tens of ms a 256 MiB fill takes)."""
    plan = Plan(backend="cpu", items=expand_items("cpu"), shapes=[(8, 8, 8)], cold=True,
                warmup=0, repeats=3, seed=SEED)
    (rec,) = sweep.run(plan, lambda e: None)
    assert rec.mode == "cold" and rec.passed
    assert rec.median_ms < 5.0, rec.median_ms


def test_time_budget_runs_until_the_budget_is_spent(sweep):
    budget = 0.4
    plan = Plan(backend="cpu", items=expand_items("cpu"), shapes=[(64, 64, 64)],
                warmup=0, repeats=1, time_budget_s=budget, seed=SEED)
    t0 = time.perf_counter()
    (rec,) = sweep.run(plan, lambda e: None)
    wall = time.perf_counter() - t0
    assert rec.passed and rec.status == "ok"
    assert rec.repeats >= MIN_BUDGET_LAUNCHES and rec.repeats > 10, rec.repeats  # not `repeats`
    timed = rec.mean_ms * rec.repeats / 1e3
    assert timed <= budget + 0.05, timed
    assert budget <= wall <= budget + 1.0, wall


def test_time_budget_gives_at_least_three_launches_when_one_exceeds_it(sweep):
    # int32 matmul is not BLAS in numpy: one 320³ launch takes longer than the smallest
    # budget the app accepts (10 ms).
    plan = Plan(backend="cpu", items=expand_items("cpu"), shapes=[(320, 320, 320)], dtype="int32",
                dist="int", warmup=0, repeats=50, time_budget_s=0.01, seed=SEED)
    (rec,) = sweep.run(plan, lambda e: None)
    assert rec.passed and rec.repeats == MIN_BUDGET_LAUNCHES


def test_time_launches_stops_when_asked():
    be = CpuBackend()
    be.open(0)
    try:
        from engine.inputs import matrices
        a, b = matrices.generate_pair(16, 16, 16, "float32", seed=SEED)
        ws = be.prepare(a, b)
        kern = be.compile(registry.get("cpu_numpy"), {}, "float32")
        be.ensure_output(ws, (16, 16))
        calls = []
        times = be.time_launches(kern, ws, 16, 16, 16, 0, 1000, False, None,
                                 should_stop=lambda: calls.append(1) or len(calls) >= 4)
        assert len(times) == 4
    finally:
        be.close()


def test_cpu_has_one_device():
    recs, events = run_plan(Plan(backend="cpu", items=expand_items("cpu"), shapes=[(4, 4, 4)],
                                 device=1))
    assert recs == []
    assert any(e.kind == "log" and e.level == "error" and "one device" in e.message for e in events)
