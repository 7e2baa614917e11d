"""engine.autotune on OpenCL (PoCL on CI) at tiny sizes: the cache is written, reused
without timing anything, --retune searches again, and the winner is the fastest record."""
from __future__ import annotations

import json

import pytest

from engine import autotune as at
from engine import registry
from engine.runner import Plan, Sweep, expand_items
from tests.helpers import require_backend

SHAPE = (16, 24, 8)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(at.CACHE_ENV, str(tmp_path / "cachedir"))
    return tmp_path / "cachedir" / "autotune.json"


@pytest.fixture
def timed(monkeypatch):
    """Count time_launches calls of the opencl backend (one per timed series)."""
    require_backend("opencl")
    from engine.backends.opencl import OpenCLBackend
    calls = []
    orig = OpenCLBackend.time_launches

    def counting(self, kernel, *a, **kw):
        calls.append(kernel.variant.label(kernel.params))
        return orig(self, kernel, *a, **kw)
    monkeypatch.setattr(OpenCLBackend, "time_launches", counting)
    return calls


def test_cache_path_env_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv(at.CACHE_ENV, str(tmp_path / "x.json"))
    assert at.cache_path() == tmp_path / "x.json"
    monkeypatch.setenv(at.CACHE_ENV, str(tmp_path))
    assert at.cache_path() == tmp_path / "autotune.json"
    monkeypatch.delenv(at.CACHE_ENV)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    p = at.cache_path()
    assert p.name == "autotune.json" and p.parent.name == "matmul-lab" and p.parent.parent.name == ".cache"


def test_best_record_ignores_wrong_and_failed():
    from engine.records import ResultRecord

    def rec(ms, status="ok", passed=True):
        r = ResultRecord(backend="b", device="d", variant="naive", params={"block": int(ms)},
                         m=1, n=1, k=1, dtype="float32", mode="hot", warmup=0, repeats=1,
                         timestamp="", versions="", flops=2, bytes=12, median_ms=ms)
        r.status, r.passed = status, passed
        return r
    recs = [rec(3.0), rec(1.0, "failed", False), rec(2.0), rec(0.5, "error", None)]
    assert at.best_record(recs).median_ms == 2.0
    assert at.best_record([]) is None


def test_autotune_cache_written_reused_and_retuned(cache, timed):
    sweep = Sweep()
    try:
        space = registry.get("naive").combos()
        best, recs = at.autotune(sweep, "opencl", 0, "naive", SHAPE, "float32",
                                 warmup=0, repeats=2)
        assert len(recs) == len(space) == len(timed)
        ok = [r for r in recs if r.status == "ok"]
        assert ok and all(r.passed for r in ok)
        fastest = min(ok, key=lambda r: r.median_ms)
        assert best == fastest.params                      # the fastest of the records
        data = json.loads(cache.read_text())
        (key, entry), = data.items()
        assert key.startswith("opencl|") and key.endswith("|naive|float32|16x24x8")
        assert entry["params"] == best and entry["searched"] == len(space)

        n = len(timed)
        best2, recs2 = at.autotune(sweep, "opencl", 0, "naive", SHAPE, "float32",
                                   warmup=0, repeats=2)
        assert best2 == best and recs2 == [] and len(timed) == n   # no new timing run

        best3, recs3 = at.autotune(sweep, "opencl", 0, "naive", SHAPE, "float32",
                                   warmup=0, repeats=2, retune=True)
        assert len(recs3) == len(space) and len(timed) == n + len(space)
        assert best3 == min((r for r in recs3 if r.status == "ok"), key=lambda r: r.median_ms).params
        # another shape or dtype is another key
        at.autotune(sweep, "opencl", 0, "naive", (8, 8, 8), "float32", warmup=0, repeats=1)
        assert len(json.loads(cache.read_text())) == 2
    finally:
        sweep.close()


def test_autotune_through_engine_thread(cache, timed):
    from engine.worker import EngineThread
    eng = EngineThread().start()
    try:
        best, recs = at.autotune(eng, "opencl", 0, "tiled_any", SHAPE, "float32",
                                 warmup=0, repeats=1, combos=[{"block": 8}, {"block": 16}])
        assert best in ({"block": 8}, {"block": 16}) and len(recs) == 2
        best2, recs2 = at.autotune(eng, "opencl", 0, "tiled_any", SHAPE, "float32")
        assert best2 == best and recs2 == [] and len(timed) == 2
    finally:
        assert eng.shutdown(30)


def test_stale_cache_entry_is_ignored(cache, timed):
    sweep = Sweep()
    try:
        name = sweep.ensure_open("opencl", 0).name
        key = at.cache_key("opencl", name, "naive", "float32", SHAPE)
        cache.parent.mkdir(parents=True)
        cache.write_text(json.dumps({key: {"params": {"block": 999}}}))
        best, recs = at.autotune(sweep, "opencl", 0, "naive", SHAPE, "float32", warmup=0, repeats=1)
        assert recs and best["block"] != 999
    finally:
        sweep.close()


def test_plan_autotune_in_sweep(cache, timed):
    items = expand_items("opencl", ["naive", "tiled_any"])
    plan = Plan(backend="opencl", items=items, shapes=[SHAPE, (9, 7, 5)], warmup=0, repeats=1,
                autotune=True)
    events = []
    sweep = Sweep()
    try:
        recs = at.run_autotuned(sweep, plan, events.append)
        assert [(r.variant, (r.m, r.n, r.k)) for r in recs] == [
            ("naive", SHAPE), ("tiled_any", SHAPE), ("naive", (9, 7, 5)), ("tiled_any", (9, 7, 5))]
        assert all(r.status == "ok" and r.passed for r in recs)
        searched = len(timed)
        assert searched == 2 * len(items)
        assert [e.kind for e in events].count("started") == 1
        assert events[-1].kind == "finished" and events[-1].records == recs
        again = at.run_autotuned(sweep, plan, lambda e: None)  # cache hit: one timed run each
        assert len(timed) == searched + 4
        assert [r.params for r in again] == [r.params for r in recs]
        plan.retune = True
        at.run_autotuned(sweep, plan, lambda e: None)
        assert len(timed) == searched + 4 + 2 * len(items)
    finally:
        sweep.close()


def test_cli_autotune(cache, timed, capsys):
    from engine.cli import run_bench
    args = ["--in-process", "--backend", "opencl", "--variants", "naive", "--sizes", "16x24x8", "--warmup", "0",
            "--repeats", "1", "--quiet", "--autotune"]
    assert run_bench(args) == 0
    n = len(timed)
    assert n == len(registry.get("naive").combos()) and cache.is_file()
    assert run_bench(args) == 0 and len(timed) == n + 1
    assert run_bench(args + ["--retune"]) == 0 and len(timed) == 2 * n + 1
    out = capsys.readouterr().out
    assert "naive[block=" in out
