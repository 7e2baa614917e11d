"""engine.run.pool: the engines' one owner (reuse, retire, close and join), with real
cpu and opencl engines (in this process, and in processes of their own)."""
from __future__ import annotations

import os

import threading
import time

import pytest

from engine.common import cpus
from engine.run.engines import LocalEngine
from engine.run.pool import EnginePool, RunTarget
from engine.run.process import ProcessEngine
from engine.run.runner import Plan, expand_items
from tests.helpers import require_backend


def _plan(backend="cpu", variants=("cpu_numpy",), sizes=(32, 48)):
    return Plan(backend=backend, items=expand_items(backend, list(variants)),
                shapes=[(s, s, s) for s in sizes], warmup=0, repeats=2)


def _run(pool: EnginePool, target: RunTarget, plan: Plan):
    run = pool.start_run(plan, target, lambda ev: None)
    return run.result(180)     # generous: engine processes start slowly on a loaded machine


def _engine_alive(eng) -> bool:
    if isinstance(eng, ProcessEngine):
        return eng.alive()
    return eng.thread._thread.is_alive()


def _wait_until(cond, timeout=15.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def test_engines_are_made_lazily_and_reused_while_the_target_stays():
    made = []

    def factory(backend, device):
        made.append((backend, device))
        return LocalEngine(backend, device)

    pool = EnginePool(factory)
    try:
        assert pool.engines() == [] and pool.idle() and made == []   # nothing opened early
        target = RunTarget("cpu", (0,))
        first = _run(pool, target, _plan())
        engines = pool.engines()
        second = _run(pool, target, _plan())
        assert pool.engines() == engines and made == [("cpu", 0)]
        assert len(first) == len(second) == 2
        assert all(not r.error and r.median_ms > 0 for r in first + second)
        # a second engine on the same device joins the first, which is kept
        two = pool.engines_for(RunTarget("cpu", (0, 0), "share"))
        assert two[0] is engines[0] and len(two) == 2 and made == [("cpu", 0)] * 2
    finally:
        assert pool.close(5.0)


def test_cpu_threads_are_shared_among_the_engines_less_the_owners_reserve():
    pool = EnginePool(LocalEngine, reserve_cpus=cpus.WINDOW_CPUS)
    try:
        one = pool.engines_for(RunTarget("cpu", (0,)))
        assert one[0].cpu_threads == cpus.engine_threads(1, cpus.WINDOW_CPUS)
        three = pool.engines_for(RunTarget("cpu", (0, 0, 0)))
        assert [e.cpu_threads for e in three] == [cpus.engine_threads(3, cpus.WINDOW_CPUS)] * 3
    finally:
        pool.close(5.0)
    cli = EnginePool(LocalEngine, reserve_cpus=0)
    try:
        assert cli.engines_for(RunTarget("cpu", (0,)))[0].cpu_threads == cpus.engine_threads(1, 0)
    finally:
        cli.close(5.0)


def test_engines_no_longer_wanted_are_retired_and_closed():
    require_backend("opencl")
    pool = EnginePool(LocalEngine)
    try:
        cpu_two = pool.engines_for(RunTarget("cpu", (0, 0)))
        _run(pool, RunTarget("cpu", (0, 0)), _plan())
        assert all(_engine_alive(e) for e in cpu_two)
        # one device fewer: the second engine goes, the first stays
        kept = pool.engines_for(RunTarget("cpu", (0,)))
        assert kept == cpu_two[:1]
        assert _wait_until(lambda: not _engine_alive(cpu_two[1]))
        assert _engine_alive(cpu_two[0])
        # another backend: the cpu engine goes too, the opencl one runs
        recs = _run(pool, RunTarget("opencl", (0,)), _plan("opencl", ("naive",), (33,)))
        assert recs and all(not r.error and r.passed for r in recs)
        assert [e.backend for e in pool.engines()] == ["opencl"]
        assert _wait_until(lambda: not _engine_alive(cpu_two[0]))
        assert not pool.idle()                      # the opencl engine is still held
    finally:
        assert pool.close(5.0)
    assert pool.idle()


def test_a_cluster_target_retires_the_local_engines_and_keeps_its_own():
    asked = []

    def fake_cluster(address, backend):      # real engines, as a cluster's would be
        asked.append((address, backend))
        return [LocalEngine(backend, 0), LocalEngine(backend, 0)]

    pool = EnginePool(LocalEngine, fake_cluster)
    try:
        local = pool.engines_for(RunTarget("cpu", (0,)))
        target = RunTarget("cpu", mode="share", ray_address="head:6379")
        group = pool.engines_for(target)
        assert len(group) == 2 and pool.engines() == group
        assert _wait_until(lambda: not _engine_alive(local[0]))
        assert pool.engines_for(target) is group and asked == [("head:6379", "cpu")]
        back = pool.engines_for(RunTarget("cpu", (0,)))
        assert back[0] is not local[0] and pool.engines() == back
        assert _wait_until(lambda: not any(_engine_alive(e) for e in group if e.info))
    finally:
        pool.close(5.0)


def test_a_cluster_with_no_engine_is_an_error_and_changes_nothing():
    pool = EnginePool(LocalEngine, lambda address, backend: [])
    try:
        local = pool.engines_for(RunTarget("cpu", (0,)))
        with pytest.raises(RuntimeError, match="has no cpu worker"):
            pool.cluster_engines("head:6379", "cpu")
        assert pool.engines() == local
    finally:
        pool.close(5.0)


def test_close_ends_every_engine_process_and_joins_every_thread():
    """Real engine processes, one retired mid-way: after close nothing of the pool runs."""
    before = set(threading.enumerate())
    pool = EnginePool(ProcessEngine)
    two = pool.engines_for(RunTarget("cpu", (0, 0)))
    recs = _run(pool, RunTarget("cpu", (0, 0), "share"), _plan())
    assert len(recs) == 2 and all(e.alive() for e in two)
    procs = [e.proc for e in two]
    pool.engines_for(RunTarget("cpu", (0,)))          # retires the second, in the background
    pool.close(10.0)
    assert pool.engines() == [] and pool.idle()
    assert all(p.exitcode is not None for p in procs)  # ended and reaped, not orphaned
    assert not any(e.alive() for e in two)
    left = [t for t in set(threading.enumerate()) - before if t.is_alive()
            and (t.name.startswith(("close-", "retire-", "engine-")))]
    assert left == []
    with pytest.raises(RuntimeError, match="closed"):
        pool.engines_for(RunTarget("cpu", (0,)))
    assert pool.close(1.0)                              # idempotent


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_kill_first_ends_the_engines_under_a_run_at_once():
    pool = EnginePool(ProcessEngine)
    eng, = pool.engines_for(RunTarget("cpu", (0,)))
    run = pool.start_run(_plan(sizes=(512,) * 40), RunTarget("cpu", (0,)), lambda ev: None)
    assert _wait_until(lambda: eng.alive() and eng.info is not None, 60)
    proc = eng.proc
    run.cancel()             # as the window does: cancelled first, so nothing restarts it
    pool.close(1.0, kill_first=True)
    # Killed, not stopped. Where the run's thread reaped the child first (two threads
    # waiting on one pid), multiprocessing never learns its exit code: then the pid is gone.
    assert (proc.exitcode is not None and proc.exitcode < 0) or not _pid_exists(proc.pid), proc
    run.result(30)           # the run ends (its engine gone) rather than hanging
    assert not eng.alive()
