"""Every OpenCL variant × every parameter combination of the registry, run for real on
PoCL (the CPU OpenCL driver) through :class:`engine.run.runner.Sweep`, at odd and even
shapes, for float32, small int32 values and full-range int32 values (whose products
wrap modulo 2³²).

The three sweeps run once per module (one open Sweep, so one OpenCL context); the
parametrized tests then check each (variant, params) row against the registry's own
rules: verification passed, skips exactly where :meth:`Variant.check` says, and the
record's n, flops, bytes, GFLOP/s and GB/s follow the models.
"""
from __future__ import annotations

import math
import secrets

import numpy as np
import pytest

from engine.kernels import registry
from engine.kernels.registry import params_to_str
from engine.run.runner import Plan, Sweep
from engine.measure.verify import float32_tolerance
from tests.helpers import require_backend

SHAPES = [(127, 253, 61), (61, 127, 253), (64, 64, 64), (1, 1, 1)]
#: float32 uniform; int32 from the 'int' distribution; int32 over the full range.
MODES = ("float32", "int32-small", "int32-full")
#: Fresh inputs each run; the seed is in every failure message to replay it.
SEED = secrets.randbelow(2**31)

SEED_ANY_SHAPE = {"naive", "tiled_any", "wpt", "aat_simple", "aat_coalesced", "aat_padded"}
# From the registry, not hard-coded: a new variant or parameter value is tested too.
ITEMS = [(v.name, p) for v in registry.variants_for("opencl") for p in v.combos()]


def _dtype(mode: str) -> str:
    return "float32" if mode == "float32" else "int32"


def _full_range_pair(shape, rng):
    m, n, k = shape
    a = rng.integers(-2**31, 2**31, (m, k), dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, (k, n), dtype=np.int64).astype(np.int32)
    return a, b


@pytest.fixture(scope="module")
def sweep():
    require_backend("opencl")
    s = Sweep()
    yield s
    s.close()


@pytest.fixture(scope="module")
def results(sweep):
    """mode → {(variant, params text, shape): record}, plus the events of every sweep."""
    items = [(name, dict(p)) for name, p in ITEMS]
    out: dict[str, dict] = {}
    events: dict[str, list] = {}
    for mode in MODES:
        table, evs = {}, []
        if mode == "int32-full":
            rng = np.random.default_rng(SEED)
            plans = []
            for shape in SHAPES:
                a, b = _full_range_pair(shape, rng)
                plans.append(([shape], Plan(backend="opencl", items=items, matrices=(a, b),
                                            dtype="int32", warmup=0, repeats=1, seed=SEED)))
        else:
            plans = [(SHAPES, Plan(backend="opencl", items=items, shapes=SHAPES,
                                   dtype=_dtype(mode), dist="uniform" if mode == "float32" else "int",
                                   warmup=0, repeats=1, seed=SEED))]
        for shapes, plan in plans:
            recs = sweep.run(plan, evs.append)
            # Records come in plan order: input set by input set, items in order.
            expected = [(shape, name, params_to_str(p)) for shape in shapes for name, p in items]
            assert len(recs) == len(expected), (mode, len(recs), len(expected))
            for (shape, name, ptext), r in zip(expected, recs):
                assert (r.variant, params_to_str(r.params)) == (name, ptext), (mode, shape, r)
                table[(name, ptext, shape)] = r
        out[mode] = table
        events[mode] = evs
    return out, events


def _rec(table, name, params, shape):
    return table[(name, params_to_str(params), shape)]


@pytest.mark.slow
def test_sweeps_complete_without_errors(results):
    tables, events = results
    for mode in MODES:
        assert len(tables[mode]) == len(ITEMS) * len(SHAPES), mode
        finished = [e for e in events[mode] if e.kind == "finished"]
        assert finished and all(e.done == e.total and not e.cancelled for e in finished), mode
        errors = [e.message for e in events[mode] if e.kind == "log" and e.level == "error"]
        assert not errors, (mode, SEED, errors[:3])


def test_full_range_inputs_really_overflow_int32():
    """The full-range case only tests wrap-around if the exact products leave int32."""
    rng = np.random.default_rng(SEED)
    for shape in SHAPES:
        a, b = _full_range_pair(shape, rng)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        assert np.abs(exact).max() > 2**31, shape


def test_some_runs_are_skipped_and_some_tiled_runs_run(results):
    tables, _ = results
    recs = list(tables["float32"].values())
    assert any(r.status == "skipped" for r in recs)
    assert any(r.variant == "tiled" and r.status == "ok" for r in recs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,params", ITEMS,
                         ids=[registry.get(n).label(p) for n, p in ITEMS])
def test_variant_params(results, mode, name, params):
    tables, _ = results
    v = registry.get(name)
    dtype = _dtype(mode)
    for shape in SHAPES:
        m, n, k = shape
        r = _rec(tables[mode], name, params, shape)
        where = f"{v.label(params)} @ {m}x{n}x{k} {mode} (seed {SEED})"
        reason = v.check("opencl", params, m, n, k, dtype)
        expect_skip = reason is not None
        # Of the seed kernels only tiled (no bounds checks) refuses shapes: non-multiples.
        if name == "tiled":
            assert expect_skip == any(d % params["block"] for d in shape), (where, reason)
        elif name in SEED_ANY_SHAPE:
            assert reason is None, (where, reason)
        # Common record fields.
        n_eff = m if v.kind == "aat" else n
        assert (r.backend, r.dtype, r.mode, r.warmup) == ("opencl", dtype, "hot", 0), where
        assert r.params == params and (r.m, r.n, r.k) == (m, n_eff, k), where
        assert r.flops == 2 * m * n_eff * k, where
        if v.kind == "aat":
            assert r.bytes == (m * k + m * m) * 4, where          # A read once, C written once
        else:
            assert r.bytes == (m * k + k * n + m * n) * 4, where  # A, B read once, C written once
        if expect_skip:
            assert r.status == "skipped" and r.error == reason, (where, r.status, r.error)
            if name == "tiled":
                assert "multiples of block" in r.error, where
            assert r.passed is None and math.isnan(r.median_ms) and math.isnan(r.gflops), where
            continue
        assert r.status == "ok" and r.passed is True and r.error == "", (where, r.status, r.error)
        assert r.verify_method == "full", where
        if dtype == "float32":
            assert 0.0 <= r.rel_l2 <= float32_tolerance(k), (where, r.rel_l2)
        else:
            assert r.rel_l2 == 0.0 and r.max_abs == 0.0, (where, r.rel_l2, r.max_abs)
        assert r.repeats == 1, where
        assert r.median_ms > 0 and r.min_ms == r.median_ms == r.max_ms == r.mean_ms, where
        assert r.noise_pct == 0.0, where
        assert r.gflops == pytest.approx(r.flops / (r.median_ms * 1e-3) / 1e9, rel=1e-12), where
        assert r.gbps == pytest.approx(r.bytes / (r.median_ms * 1e-3) / 1e9, rel=1e-12), where
        assert math.isfinite(r.upload_ms) and r.upload_ms >= 0, where
