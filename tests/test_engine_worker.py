"""The engine thread: calls run on it, sweeps can be cancelled mid-way (keeping what
finished), and shutdown ends it cleanly."""
from __future__ import annotations

import dataclasses

import threading
import time

import pytest

from engine.run.runner import Plan, expand_items
from engine.run.worker import EngineThread
from tests.helpers import require_backend


@pytest.fixture
def engine():
    eng = EngineThread().start()
    yield eng
    assert eng.shutdown(30)


def test_call_runs_on_the_engine_thread(engine):
    assert engine.call(lambda: threading.current_thread().name).result(10) == "engine"
    assert engine.thread.name == "engine" and engine.thread.daemon
    assert engine.call(lambda a, b=0: a + b, 2, b=3).result(10) == 5


def test_call_exceptions_reach_the_caller_and_the_thread_survives(engine):
    def boom():
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        engine.call(boom).result(10)
    assert engine.call(lambda: 42).result(10) == 42


def test_events_are_emitted_on_the_engine_thread(engine):
    threads = set()
    plan = Plan(backend="cpu", items=expand_items("cpu"), shapes=[(8, 8, 8)], warmup=0, repeats=1)
    recs = engine.submit(plan, lambda e: threads.add(threading.current_thread().name)).result(30)
    assert recs[0].passed and threads == {"engine"}


@pytest.mark.parametrize("backend", ["opencl", "cpu"])
def test_cancel_after_the_first_result_keeps_finished_records(engine, backend):
    require_backend(backend)
    first_result = threading.Event()
    go_on = threading.Event()
    events = []

    def emit(ev):
        events.append(ev)
        if ev.kind == "result" and not first_result.is_set():
            first_result.set()
            go_on.wait(10)           # hold the sweep here until the test has cancelled

    items = (expand_items("opencl", ["naive", "tiled_any", "wpt"]) if backend == "opencl"
             else expand_items("cpu"))
    shapes = [(48, 40, 24), (40, 48, 24), (64, 64, 64)] + [(s, s, s) for s in range(20, 90, 3)]
    plan = Plan(backend=backend, items=items, shapes=shapes, warmup=0, repeats=1)
    total = len(items) * len(shapes)
    assert total > 20
    job = engine.submit(plan, emit)
    assert first_result.wait(60), "no result arrived"
    t0 = time.perf_counter()
    job.cancel()
    go_on.set()
    recs = job.result(30)
    assert time.perf_counter() - t0 < 10
    finished = [e for e in events if e.kind == "finished"]
    assert len(finished) == 1 and finished[0].cancelled is True
    assert finished[0].done == len(recs) < total
    assert len(recs) == 1 and recs[0].passed is True, recs   # the finished record is kept
    results = [e.record for e in events if e.kind == "result"]
    # The finished records are new copies with the post-run columns filled in; the ones
    # sent in result events stay as they were sent.
    post = {"speedup_vs_naive", "pct_of_cublas"}
    strip = lambda r: {k: v for k, v in dataclasses.asdict(r).items() if k not in post}  # noqa: E731
    assert [strip(r) for r in results] == [strip(r) for r in recs]
    assert all(a is not b for a, b in zip(results, recs))
    assert finished[0].records == recs
    # The engine still works after a cancelled sweep.
    plan2 = Plan(backend=backend, items=items[:1], shapes=[(9, 10, 11)], warmup=0, repeats=1)
    assert engine.submit(plan2, lambda e: None).result(30)[0].passed


def test_cancel_current_from_the_event_callback(engine):
    """The GUI's Stop button: EngineThread.cancel_current() while a sweep runs."""
    results = []

    def emit(ev):
        if ev.kind == "result":
            results.append(ev.record)
            engine.cancel_current()

    plan = Plan(backend="cpu", items=expand_items("cpu"), shapes=[(s, s, s) for s in range(8, 40)],
                warmup=0, repeats=1)
    recs = engine.submit(plan, emit).result(30)
    assert len(recs) == 1 == len(results)


def test_plan_errors_are_reported_not_raised(engine):
    events = []
    recs = engine.submit(Plan(backend="cpu", items=[], shapes=[(4, 4, 4)]), events.append).result(10)
    assert recs == []
    assert [e.kind for e in events] == ["log", "finished"]
    assert events[0].level == "error" and "no variants selected" in events[0].message


def test_shutdown_returns_true_and_closes_the_backend():
    eng = EngineThread().start()
    plan = Plan(backend="cpu", items=expand_items("cpu"), shapes=[(8, 8, 8)], warmup=0, repeats=1)
    eng.submit(plan, lambda e: None).result(30)
    assert eng.call(lambda: eng._sweep.backend is not None).result(10)
    assert eng.shutdown(30) is True
    assert not eng.thread.is_alive()
    assert eng._sweep.backend is None               # closed on the engine thread
    assert EngineThread().shutdown() is True        # never started: nothing to do


def test_shutdown_cancels_a_running_sweep():
    eng = EngineThread().start()
    started = threading.Event()

    def emit(ev):
        if ev.kind == "result":
            started.set()

    plan = Plan(backend="cpu", items=expand_items("cpu"),
                shapes=[(s, s, s) for s in range(100, 400, 2)], dtype="int32", dist="int",
                warmup=0, repeats=5)
    job = eng.submit(plan, emit)
    assert started.wait(30)
    t0 = time.perf_counter()
    assert eng.shutdown(30) is True
    assert time.perf_counter() - t0 < 10
    assert len(job.result(1)) < len(plan.shapes)


def test_shutdown_does_not_run_sweeps_still_queued():
    eng = EngineThread().start()
    started = threading.Event()
    queued_events = []
    long_plan = Plan(backend="cpu", items=expand_items("cpu"),
                     shapes=[(s, s, s) for s in range(100, 400, 2)], dtype="int32", dist="int",
                     warmup=0, repeats=5)
    first = eng.submit(long_plan, lambda e: started.set() if e.kind == "result" else None)
    queued = eng.submit(Plan(backend="cpu", items=expand_items("cpu"), shapes=[(8, 8, 8)],
                             warmup=0, repeats=1), queued_events.append)
    assert started.wait(30)
    assert eng.shutdown(60) is True
    assert len(first.result(1)) < len(long_plan.shapes)
    assert queued_events == [] and queued.future.cancelled()
