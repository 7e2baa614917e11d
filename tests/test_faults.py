"""Engine isolation: a kernel that hangs, an engine process killed mid-sweep, Cancel
during a kernel that never returns, several engines sharing the work while one dies.

Runs for real on OpenCL/PoCL (CI) with the ``fault_hang`` kernel; the CUDA faults (an
illegal address, a trap, a hang) run the same way on a GPU (``gpu`` marker).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from engine.kernels import registry
from engine.run.dispatch import start_run
from engine.run.process import ProcessEngine
from engine.run.runner import Plan
from tests import fault_kernels
from tests.helpers import require_backend

SHAPE = (67, 45, 33)


@pytest.fixture
def faults(monkeypatch):
    """The fault kernels, registered in this process for the duration of one test."""
    for v in fault_kernels.variants():
        monkeypatch.setitem(registry.REGISTRY, v.name, v)


def _engine(backend="opencl", device=0):
    return ProcessEngine(backend, device, preload=(fault_kernels.PRELOAD,))


def _items(*names):
    return [(n, {"block": 16}) for n in names]


class Recorder:
    """Collects a run's events; ``on_progress(name)`` runs a callback when an item starts."""

    def __init__(self):
        self.events = []
        self.hooks = {}
        self.finished = threading.Event()

    def __call__(self, ev):
        self.events.append(ev)
        if ev.kind == "progress" and ev.item and ev.item[0] in self.hooks:
            self.hooks.pop(ev.item[0])()
        if ev.kind == "finished":
            self.finished.set()

    @property
    def last(self):
        return self.events[-1]


def _hang_plan(launch_timeout_s: float) -> Plan:
    """naive, the kernel that never finishes, tiled_any: on OpenCL at an odd shape."""
    return Plan(backend="opencl", items=_items("naive", "fault_hang", "tiled_any"), shapes=[SHAPE],
                warmup=0, repeats=2, launch_timeout_s=launch_timeout_s)


def _by_variant(recs):
    out = {}
    for r in recs:
        assert r.variant not in out, f"{r.variant} recorded twice"
        out[r.variant] = r
    return out


@pytest.mark.slow
def test_hanging_kernel_times_out_and_the_sweep_goes_on(faults):
    require_backend("opencl")
    plan = _hang_plan(1.0)
    eng = _engine()
    rec = Recorder()
    try:
        t0 = time.monotonic()
        recs = start_run(plan, [eng], rec).result(120)
        took = time.monotonic() - t0
        by = _by_variant(recs)
        assert set(by) == {"naive", "fault_hang", "tiled_any"}
        assert by["naive"].status == "ok" and by["naive"].passed
        assert by["tiled_any"].status == "ok" and by["tiled_any"].passed   # after the restart
        hung = by["fault_hang"]
        assert hung.status == "error" and "timed out" in hung.error
        assert hung.error.endswith("engine restarted")
        assert eng.starts == 2 and took < 60
        assert rec.last.kind == "finished" and rec.last.started and not rec.last.cancelled
        assert by["naive"].worker != by["tiled_any"].worker                # a new process
    finally:
        assert eng.close(10)


@pytest.mark.slow
def test_engine_killed_mid_kernel_is_recorded_and_restarted(faults):
    require_backend("opencl")
    plan = _hang_plan(120.0)
    eng = _engine()
    rec = Recorder()
    rec.hooks["fault_hang"] = lambda: threading.Timer(
        0.5, lambda: os.kill(eng.pid, signal.SIGKILL)).start()
    try:
        recs = start_run(plan, [eng], rec).result(120)
        by = _by_variant(recs)
        assert by["naive"].passed and by["tiled_any"].passed
        assert by["fault_hang"].status == "error"
        assert "killed (SIGKILL)" in by["fault_hang"].error and "engine restarted" in by["fault_hang"].error
        errors = [e.message for e in rec.events if e.kind == "log" and e.level == "error"]
        assert any("SIGKILL" in m for m in errors)
    finally:
        eng.close(10)


@pytest.mark.slow
def test_cancel_ends_a_kernel_that_never_returns_within_2_s(faults):
    require_backend("opencl")
    plan = _hang_plan(120.0)
    eng = _engine()
    rec = Recorder()
    cancelled_at = []
    run = None

    def cancel_soon():
        def go():
            cancelled_at.append(time.monotonic())
            run.cancel()
        threading.Timer(0.3, go).start()
    rec.hooks["fault_hang"] = cancel_soon
    try:
        run = start_run(plan, [eng], rec)
        recs = run.result(60)
        stopped = time.monotonic() - cancelled_at[0]
        assert stopped < 2.0, f"cancel took {stopped:.2f} s"
        assert [r.variant for r in recs] == ["naive"] and recs[0].passed     # kept
        assert rec.last.kind == "finished" and rec.last.cancelled
        assert not eng.alive()                                               # ended, not left
        # The next run starts a fresh engine on its own.
        again = start_run(Plan(backend="opencl", items=_items("naive"), shapes=[SHAPE], warmup=0,
                               repeats=1), [eng], lambda ev: None).result(60)
        assert again[0].passed and eng.starts == 2
    finally:
        eng.close(10)


@pytest.mark.slow
def test_share_mode_survives_a_lost_engine_and_counts_each_item_once(faults):
    """Two engines share the items; one is killed in a hanging kernel; the rest of its task
    goes to the queue, and every item has exactly one record."""
    require_backend("opencl")
    names = ["naive", "tiled_any", "wpt", "fault_hang"]
    items = [(n, p) for n in names
             for p in (registry.get(n).combos()[:2] if n != "fault_hang" else [{"block": 16}])]
    plan = Plan(backend="opencl", items=items, shapes=[SHAPE], warmup=0, repeats=2,
                launch_timeout_s=120.0)
    engines = [_engine(), _engine()]
    rec = Recorder()

    rec.hooks["fault_hang"] = lambda: threading.Timer(0.5, _kill_hanging, (engines, rec)).start()
    try:
        recs = start_run(plan, engines, rec, mode="share").result(180)
        keys = [(r.variant, registry.params_to_str(r.params)) for r in recs]
        assert sorted(keys) == sorted((n, registry.params_to_str(p)) for n, p in items)
        by = {k: r for k, r in zip(keys, recs)}
        assert by[("fault_hang", "block=16")].status == "error"
        assert all(r.passed for k, r in by.items() if k[0] != "fault_hang")
        assert len({r.worker for r in recs}) >= 2                       # both engines ran items
        assert sum(e.starts for e in engines) == 3                      # one restart
    finally:
        for e in engines:
            e.close(10)


def _kill_hanging(engines, rec):
    """Kill the engine whose item in flight is the hanging kernel."""
    for e in engines:
        if e.in_flight and e.in_flight[0] == "fault_hang" and e.alive():
            os.kill(e.pid, signal.SIGKILL)


@pytest.mark.parametrize("backend", ["opencl", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.slow
def test_interpreter_exit_with_an_in_process_engine_in_a_hanging_kernel_exits_0(tmp_path, backend):
    """The exit path that aborted with pycuda ('context stack was not empty'): a script ends
    while its in-process engine is stuck in a kernel. The exit hook ends it with status 0."""
    require_backend(backend)
    script = tmp_path / "drop.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(os.getcwd())!r})
        import tests.fault_kernels_preload
        from engine.run.runner import Plan
        from engine.run.worker import EngineThread
        eng = EngineThread().start()
        started = []
        eng.submit(Plan(backend={backend!r}, items=[("fault_hang", {{"block": 16}})],
                        shapes=[(8, 8, 8)], warmup=0, repeats=1),
                   lambda ev: started.append(ev.kind))
        while "progress" not in started:
            time.sleep(0.05)
        time.sleep(0.3)
        print("leaving", flush=True)
    """))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "context stack" not in proc.stderr and "Abort" not in proc.stderr
    assert "leaving" in proc.stdout and time.monotonic() - t0 < 30


# --- on a GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("fault, words", [
    ("fault_illegal_address", "illegal"),
    ("fault_trap", ""),
    ("fault_hang", "timed out"),
])
def test_cuda_faults_end_only_the_engine(faults, fault, words):
    require_backend("cuda")
    plan = Plan(backend="cuda", items=_items("naive", fault, "tiled_any"), shapes=[(255, 129, 97)],
                warmup=1, repeats=3, launch_timeout_s=2.0)
    eng = _engine("cuda")
    rec = Recorder()
    try:
        t0 = time.monotonic()
        recs = start_run(plan, [eng], rec).result(300)
        by = _by_variant(recs)
        bad = by[fault]
        print(f"{fault}: {bad.error} ({time.monotonic() - t0:.1f} s)")
        assert bad.status == "error" and bad.error.endswith("engine restarted")
        assert words.lower() in bad.error.lower()
        assert by["naive"].passed and by["tiled_any"].passed
        assert eng.starts == 2
    finally:
        eng.close(10)


@pytest.mark.gpu
def test_cuda_illegal_address_in_process_is_recorded_not_fatal(tmp_path):
    """Without isolation the sweep stops at the lost context, records the item, and the
    process stays up and exits 0. (In a child process of its own: a sticky error poisons
    CUDA for the rest of the process, which must not be this test session.)"""
    require_backend("cuda")
    script = tmp_path / "in_process.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(os.getcwd())!r})
        import tests.fault_kernels_preload
        from engine.run.runner import Plan
        from engine.run.worker import EngineThread
        eng = EngineThread().start()
        events = []
        plan = Plan(backend="cuda", items=[(n, {{"block": 16}}) for n in
                    ("naive", "fault_illegal_address", "tiled_any")],
                    shapes=[(128, 128, 128)], warmup=0, repeats=2)
        recs = eng.submit(plan, events.append).result(120)
        print("RESULT", [(r.variant, str(r.status), r.error) for r in recs], events[-1].kind, flush=True)
        eng.shutdown(10)
    """))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    assert "('naive', 'ok', '')" in line and "'fault_illegal_address', 'error'" in line
    assert "illegal" in line.lower() and line.endswith("finished")
