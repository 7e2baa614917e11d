"""GUI: running a sweep, live charts, cancelling, event-loop latency, closing mid-run."""
import math
import os
import subprocess
import sys
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication, QGroupBox  # noqa: E402

from engine.measure.backends import get_backend  # noqa: E402
from engine.run.engines import EngineHandle, EngineLost  # noqa: E402
from engine.run.runner import Event  # noqa: E402
from gui.charts import CHARTS  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

SIZES = (32, 64, 96)
VARIANTS = ("naive[block=16]", "tiled_any[block=16]")


def _finish(qtbot, win, timeout=60_000):
    with qtbot.waitSignal(win.controller.finished, timeout=timeout) as blocker:
        pass
    return blocker.args[0]


def test_run_fills_table_and_every_chart(qtbot, make_window, configure):
    win = configure(make_window(), "opencl", ("naive", "tiled_any"), "32,64,96",
                    params={("naive", "block"): [16], ("tiled_any", "block"): [16]})
    assert win.run_bar.status.text() == "Ready: 6 runs"
    with qtbot.waitSignal(win.controller.finished, timeout=60_000) as done:
        qtbot.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    assert done.args[0].cancelled is False

    # Table: one row per (variant, size), all verified.
    model = win.table.model()
    assert model.rowCount() == 6
    recs = win.store.records
    assert {(r.label(), r.m) for r in recs} == {(v, s) for v in VARIANTS for s in SIZES}
    assert all(r.status == "ok" and r.passed for r in recs)
    assert win.run_bar.progress.value() == 6 and win.run_bar.progress.maximum() == 6
    assert win.run_bar.status.text().startswith("Finished 6 runs")
    assert win.run_bar.run_button.isEnabled() and not win.run_bar.cancel_button.isEnabled()

    # Size charts: one curve per variant, one finite point per size, and the lab best
    # line: per size the faster of the two.
    for kind in ("runtime", "gflops", "bandwidth"):
        curves = win.charts.curves(kind)
        assert set(curves) == set(VARIANTS) | {"lab best FP32"}, kind
        for x, y in curves.values():
            assert list(x) == pytest.approx(SIZES)
            assert np.all(np.isfinite(y)) and np.all(y > 0)
        best = np.min([curves[v][1] for v in VARIANTS], axis=0) if kind == "runtime" else \
            np.max([curves[v][1] for v in VARIANTS], axis=0)
        assert curves["lab best FP32"][1] == pytest.approx(best), kind
    # Bars: the largest size by default, both variants, naive's speed-up vs itself is 1.
    bars = win.charts.curves("compare")
    assert set(bars) == set(VARIANTS)
    assert win.charts.compare_size.currentText() == "96"
    win.charts.compare_size.setCurrentIndex(0)
    win.charts.compare_size.activated.emit(0)  # as if the user picked 32
    win.store.touch()
    assert win.charts.curves("compare") and win.charts.compare_size.currentText() == "32"
    # Roofline: each result a point at its arithmetic intensity.
    roof = win.charts.curves("roofline")
    for label, (ai, g) in roof.items():
        assert len(ai) == 3 and np.all(np.diff(ai) > 0), label
    # The engine's speed-ups arrive with 'finished' and reach the table.
    naive = [r for r in recs if r.variant == "naive"]
    assert all(r.speedup_vs_naive == pytest.approx(1.0) for r in naive)
    # The log holds each compile's resource report verbatim.
    log = win.log.plain_text()
    assert "built 01_naive.cl" in log and "built 03_tiled_any.cl" in log
    # Every tab draws without error, with the legend naming the curves.
    for kind in CHARTS:
        win.charts.set_current(kind)
        qtbot.wait(10)


def test_cancel_stops_early_and_keeps_finished_results(qtbot, make_window, configure):
    win = configure(make_window(), "cpu", ("cpu_numpy",), "32:256:32", budget_s=0.15)
    total = win.config.run_count()
    assert total == 8
    with qtbot.waitSignal(win.controller.result, timeout=30_000):
        assert win.start_run()
    qtbot.waitUntil(lambda: "ETA" in win.run_bar.status.text(), timeout=10_000)
    # Mid-run: nothing the sweep depends on can change.
    assert win.running
    assert not any(g.isEnabled() for g in win.config.findChildren(QGroupBox))
    assert not win.run_bar.run_button.isEnabled() and win.run_bar.cancel_button.isEnabled()
    assert not win.clear_action.isEnabled()
    assert "of 8" in win.run_bar.progress.text()
    assert "Running" in win.run_bar.status.text() and "ETA" in win.run_bar.status.text()
    with qtbot.waitSignal(win.controller.finished, timeout=30_000) as done:
        qtbot.mouseClick(win.run_bar.cancel_button, Qt.MouseButton.LeftButton)
    assert done.args[0].cancelled is True
    kept = len(win.store)
    assert 1 <= kept < total
    # Every kept item was timed, except one the cancel caught between its verification
    # and its timing, which says so.
    assert all(math.isfinite(r.median_ms) or "cancelled before timing" in r.error
               for r in win.store.records)
    assert win.run_bar.status.text().startswith(f"Cancelled: kept {kept}")
    assert all(g.isEnabled() for g in win.config.findChildren(QGroupBox))
    assert win.run_bar.run_button.isEnabled()
    # A new run replaces the live results and works after a cancel.
    win.config.sizes.set_text("32")
    with qtbot.waitSignal(win.controller.finished, timeout=30_000):
        win.start_run()
    assert len(win.store) == 1


def _largest_event_loop_gap(qtbot, win) -> float:
    """Run the configured sweep with a 5 ms heartbeat; the largest gap between beats (s)."""
    gaps, _finished = _sweep_beats(qtbot, win, 5)
    assert len(win.store) == 9
    assert len(gaps) > 50
    return max(gaps)


@pytest.mark.slow
def test_live_results_import_no_module_in_the_window_process():
    """A module first imported mid-sweep is imported in the GUI thread (numpy's lazy
    numpy.ma, on a first np.median, held the window 60-90 ms on a GPU machine): results
    recorded on a GPU, shown live on every chart, must import nothing new."""
    out = subprocess.run([sys.executable, os.path.join(HERE, "window_imports.py"),
                          os.path.join(HERE, "data", "h200_records.json")],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) if " " in line else (line, "")
                 for line in out.stdout.splitlines() if line.startswith(("RECORDS", "IMPORTED")))
    assert int(lines["RECORDS"]) == 40
    assert lines["IMPORTED"].split() == []


@pytest.mark.slow
def test_event_loop_never_blocks_during_a_sweep(qtbot, make_window, configure):
    win = configure(make_window(), "opencl", ("naive", "tiled_any"), "32,64,96", budget_s=0.08,
                    params={("naive", "block"): [16, 8], ("tiled_any", "block"): [16]})
    # Best of two sweeps: on a loaded 2-core machine the OS can preempt the GUI thread
    # for a while whatever the app does; a slot of ours that blocks shows in both.
    worst = []
    for _ in range(2):
        worst.append(_largest_event_loop_gap(qtbot, win))
        if worst[-1] < 0.100:
            break
    print(f"largest event-loop gap per sweep: {[round(g * 1e3, 1) for g in worst]} ms")
    assert min(worst) < 0.100, f"event loop blocked for {min(worst) * 1e3:.0f} ms in every sweep"


@pytest.mark.slow
def test_closing_mid_run_cancels_and_exits_zero(qtbot, tmp_path, error_dialogs):
    """main() with a window closed during a sweep (the app's own engine processes):
    cancel, close the engines, exit 0, within 5 s of the close."""
    from gui.app import MainWindow, main

    seen = {}

    def close_now():
        if "t_close" not in seen:          # results may come faster than the close
            seen["engines"] = seen["win"].controller.engines()
            seen["t_close"] = time.perf_counter()
        seen["win"].close()

    def find_window():
        wins = [w for w in QApplication.topLevelWidgets()
                if isinstance(w, MainWindow) and w.isVisible()]
        if not wins or not wins[0].backends_ready():
            QTimer.singleShot(20, find_window)
            return
        win = seen["win"] = wins[0]
        cfg = win.config
        cfg.select("cpu", 0)
        cfg.variants.set_only(["cpu_numpy"])
        cfg.sizes.set_text("32:512:32")
        cfg.budget_radio.setChecked(True)
        cfg.budget.setValue(0.2)
        win.controller.result.connect(lambda rec: QTimer.singleShot(0, close_now))
        assert win.start_run()

    QTimer.singleShot(0, find_window)
    code = main(["--settings", str(tmp_path / "app.ini")])
    took = time.perf_counter() - seen["t_close"]
    win = seen["win"]
    assert code == 0
    assert took < 5.0, f"closing took {took:.1f} s"
    assert not win.isVisible()
    assert win.controller.is_closed
    assert seen["engines"] and not any(e.alive() for e in seen["engines"])
    assert 1 <= len(win.store) < 16  # cancelled early, finished ones kept until the end
    assert error_dialogs == []


@pytest.mark.slow
def test_closing_while_a_kernel_runs_ends_its_engine_in_time(qtbot, make_window, configure):
    """A launch that takes far longer than the close deadline: the engine process is
    killed and the window is gone within 5 s."""
    win = configure(make_window(engines="process"), "cpu", ("cpu_numpy",), "6144",
                    repeats=50, verify=False)
    with qtbot.waitSignal(win.controller.progress, timeout=60_000):
        assert win.start_run()
    qtbot.wait(300)                       # the 6144³ launches are under way now
    engines = win.controller.engines()
    assert len(engines) == 1 and engines[0].alive()
    t0 = time.perf_counter()
    win.close()
    qtbot.waitUntil(lambda: not win.isVisible(), timeout=6_000)
    took = time.perf_counter() - t0
    print(f"closed {took:.2f} s after close() with a kernel running")
    assert took < 5.0
    assert win.controller.is_closed and not engines[0].alive()


def _sweep_beats(qtbot, win, interval_ms: int):
    """Run the configured sweep with a heartbeat every ``interval_ms``; the gaps (s) and
    the run's finished event."""
    gaps, last = [], [time.perf_counter()]

    def beat():
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    heart = QTimer()
    heart.setInterval(interval_ms)
    heart.timeout.connect(beat)
    heart.start()
    try:
        with qtbot.waitSignal(win.controller.finished, timeout=120_000) as done:
            last[0] = time.perf_counter()
            assert win.start_run()
        qtbot.wait(400)  # the redraw timer runs over the finished data as well
    finally:
        heart.stop()
    return gaps, done.args[0]


@pytest.mark.slow
def test_event_loop_stays_responsive_with_engine_processes(qtbot, make_window, configure):
    """The app's own set-up (an engine process per device) on a verified cpu sweep: the
    GUI thread only draws, so a 10 ms timer keeps its beat."""
    win = configure(make_window(engines="process"), "cpu", ("cpu_numpy",),
                    "256,512,768,1024,1280,1536", budget_s=0.15, verify=True)
    worst = []
    for _ in range(2):
        gaps, finished = _sweep_beats(qtbot, win, 10)
        assert finished.cancelled is False
        assert len(win.store) == 6 and all(r.passed for r in win.store.records)
        assert all(r.worker.startswith("process ") for r in win.store.records)
        worst.append(max(gaps))
        print(f"event loop with engine processes: max gap {max(gaps) * 1e3:.1f} ms, p99 "
              f"{float(np.percentile(gaps, 99)) * 1e3:.1f} ms over {len(gaps)} beats")
        if worst[-1] <= 0.050:
            break
    # 50 ms is the aim on a desktop. Here the engine's BLAS threads share 2 cores with
    # the GUI thread, and the OS preempts it now and then whatever the app does: best
    # of two sweeps, within 150 ms (a slot of ours that blocks shows in both).
    assert min(worst) <= 0.150, f"the event loop stalled for {min(worst) * 1e3:.0f} ms"


class HangingEngine(EngineHandle):
    """An engine whose kernel never returns and ignores Cancel, until it is killed."""

    def __init__(self, backend, device):
        super().__init__(backend, device)
        self.killed = threading.Event()
        self.kills = 0

    def open(self):
        self.info = get_backend("cpu").probe().devices[0]
        return self.info

    def run(self, plan, emit, cancel):
        name, params = plan.items[0]
        emit(Event("progress", "hanging", done=0, total=1, current="hanging",
                   item=(name, params, plan.shapes[0])))
        self.killed.wait(60)
        raise EngineLost("killed", restartable=False)

    def kill(self):
        self.kills += 1
        self.killed.set()

    def close(self, timeout=10.0):
        return self.killed.wait(timeout)


@pytest.mark.slow
def test_closing_while_an_engine_ignores_cancel_kills_it_within_5_s(qtbot, make_window, configure):
    win = configure(make_window(engines=HangingEngine), "cpu", ("cpu_numpy",), "64")
    with qtbot.waitSignal(win.controller.progress, timeout=10_000):
        assert win.start_run()
    eng, = win.controller.engines()
    t0 = time.perf_counter()
    win.close()
    assert win.isVisible()                     # the close goes on off the GUI thread
    qtbot.waitUntil(lambda: not win.isVisible(), timeout=6_000)
    took = time.perf_counter() - t0
    assert took < 5.0 and eng.kills >= 1 and win.controller.is_closed
