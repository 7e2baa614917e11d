"""engine.run.dispatch: engines that join a share-mode run in progress (``joiners``).

Runs real OpenCL/PoCL sweeps with in-process engines; the Ray flavour (a worker node
that joins the cluster) is in test_cluster.py.
"""
from __future__ import annotations

import threading

import pytest

from engine.run import dispatch
from engine.measure.backends.base import BackendError
from engine.run.dispatch import start_run
from engine.run.engines import LocalEngine
from engine.kernels.registry import params_to_str
from engine.run.runner import Plan, expand_items
from tests.helpers import require_backend


class CountingEngine(LocalEngine):
    """An in-process engine that counts the tasks it ran."""

    def __init__(self, name: str):
        super().__init__("opencl", 0)
        self.name, self.tasks = name, 0

    @property
    def label(self) -> str:
        return f"opencl:0/{self.name}"

    def run(self, plan, emit, cancel):
        self.tasks += 1
        return super().run(plan, emit, cancel)


class BrokenEngine(CountingEngine):
    def open(self):
        raise BackendError("no such device here")


@pytest.fixture
def quick_joins(monkeypatch):
    require_backend("opencl")
    monkeypatch.setattr(dispatch, "JOIN_POLL_S", 0.2)
    monkeypatch.setattr(dispatch, "JOIN_RETRY_S", 0.2)


def _plan():
    items = expand_items("opencl", ["naive", "tiled_any", "wpt"])
    return items, Plan("opencl", items, shapes=[(61, 47, 53)], warmup=0, repeats=2,
                       time_budget_s=0.15)


def _keys(recs):
    return sorted((r.variant, params_to_str(r.params)) for r in recs)


def _run(engines, joiners, mode="share"):
    logs = []
    first = threading.Event()

    def emit(ev):
        if ev.kind == "log":
            logs.append(ev.message)
        elif ev.kind == "result":
            first.set()

    run = start_run(_plan()[1], engines, emit, mode, joiners)
    recs = run.result(timeout=180)
    for e in engines:
        e.close()
    return recs, logs, first


@pytest.mark.slow
def test_an_engine_that_joins_mid_run_takes_queued_items(quick_joins):
    items, _ = _plan()
    first = CountingEngine("first")
    late = CountingEngine("late")
    asked = []
    started = threading.Event()

    def joiners():
        asked.append(1)
        # A device becomes free once the run is under way (a node joining a cluster).
        if started.is_set() and late.tasks == 0 and late.info is None:
            return [late]
        return []

    orig_run = first.run

    def run_and_mark(plan, emit, cancel):
        started.set()
        return orig_run(plan, emit, cancel)

    first.run = run_and_mark
    recs, logs, _ = _run([first], joiners)
    late.close()
    assert _keys(recs) == sorted((n, params_to_str(p)) for n, p in items)   # each item once
    assert all(r.status == "ok" and r.passed for r in recs)
    assert any("opencl:0/late" in m and "joined the run" in m for m in logs), logs
    assert late.tasks >= 1 and first.tasks >= 1
    assert first.tasks + late.tasks == len(items)          # one task per item
    assert asked


@pytest.mark.slow
def test_a_joiner_that_cannot_open_is_said_and_the_run_goes_on(quick_joins):
    items, _ = _plan()
    broken = []

    def joiners():
        if not broken:
            broken.append(BrokenEngine("broken"))
            return list(broken)
        return []

    recs, logs, _ = _run([CountingEngine("only")], joiners)
    assert _keys(recs) == sorted((n, params_to_str(p)) for n, p in items)
    assert any("could not join" in m and "no such device here" in m for m in logs), logs
    assert broken[0].tasks == 0


@pytest.mark.slow
def test_a_failing_joiner_query_is_a_warning_not_a_failed_run(quick_joins):
    items, _ = _plan()
    calls = []

    def joiners():
        calls.append(1)
        raise ConnectionError("the cluster went away")

    recs, logs, _ = _run([CountingEngine("only")], joiners)
    assert _keys(recs) == sorted((n, params_to_str(p)) for n, p in items)
    assert any("looking for new engines failed" in m for m in logs), logs
    assert calls


@pytest.mark.slow
def test_compare_mode_never_asks_for_joiners(quick_joins):
    def joiners():
        raise AssertionError("compare mode asked for engines to join")

    recs, logs, _ = _run([CountingEngine("only")], joiners, mode="compare")
    assert len(recs) == len(_plan()[0])
    assert not any("internal error" in m for m in logs), logs
