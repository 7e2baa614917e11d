"""The run controller on its own (no window): signal order, engine reuse, stragglers."""
import os
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from engine.run.engines import LocalEngine  # noqa: E402
from engine.run.runner import Plan, expand_items  # noqa: E402
from gui.run_controller import RunController, RunTarget  # noqa: E402


def _plan(sizes=(32, 48, 64), budget=None):
    return Plan(backend="cpu", items=expand_items("cpu", ["cpu_numpy"]),
                shapes=[(s, s, s) for s in sizes], warmup=0, repeats=2, time_budget_s=budget)


@pytest.fixture
def controller(qtbot):
    ctl = RunController(engine_factory=LocalEngine)
    yield ctl
    ctl.close()


def _record_signals(ctl):
    seen = []
    for name in ("started", "progress", "result", "finished"):
        getattr(ctl, name).connect(
            lambda *args, name=name: seen.append((name, threading.current_thread())))
    return seen


def test_signals_arrive_in_order_in_the_gui_thread(qtbot, controller):
    seen = _record_signals(controller)
    with qtbot.waitSignal(controller.finished, timeout=30_000) as done:
        assert controller.start(_plan(), RunTarget("cpu", (0,)))
        assert controller.running
        assert not controller.start(_plan(), RunTarget("cpu", (0,)))   # one run at a time
    assert not controller.running and done.args[0].started
    kinds = [k for k, _ in seen]
    assert kinds[0] == "started" and kinds[-1] == "finished" and kinds.count("result") == 3
    assert all(t is threading.main_thread() for _, t in seen)
    # The engine is kept for the next run on the same device, and replaced for another.
    eng = controller.engines()
    with qtbot.waitSignal(controller.finished, timeout=30_000):
        controller.start(_plan(), RunTarget("cpu", (0,)))
    assert controller.engines() == eng
    with qtbot.waitSignal(controller.finished, timeout=30_000):
        controller.start(_plan(), RunTarget("cpu", (0, 0), "share"))
    assert len(controller.engines()) == 2 and eng[0] in controller.engines()


def test_a_run_that_cannot_start_still_finishes_after_start_returned(qtbot, controller):
    seen = _record_signals(controller)
    bad = Plan(backend="cpu", items=[], shapes=[(32, 32, 32)])
    with qtbot.waitSignal(controller.finished, timeout=10_000) as done:
        assert controller.start(bad, RunTarget("cpu", (0,)))
        assert seen == []          # nothing is delivered inside start()
    assert not done.args[0].started and "no variants" in done.args[0].message


def test_a_closed_controllers_stragglers_are_dropped(qtbot, controller):
    seen = _record_signals(controller)
    with qtbot.waitSignal(controller.result, timeout=30_000):
        controller.start(_plan(sizes=(64, 96, 128, 160, 192), budget=0.1), RunTarget("cpu", (0,)))
    assert controller.close()
    assert controller.is_closed and controller.engines() == []
    n = len(seen)
    qtbot.wait(300)               # anything still queued would arrive now
    assert len(seen) == n and ("finished", threading.main_thread()) not in seen
    assert not controller.start(_plan(), RunTarget("cpu", (0,)))
