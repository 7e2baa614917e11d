"""GUI: several devices (compare and share), the Ray choice, cancel and close with
several engines, an engine process killed mid-run, and telling devices apart."""
import dataclasses
import os
import signal

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtWidgets import QGroupBox  # noqa: E402

from engine.run.engines import LocalEngine  # noqa: E402
from engine.results.records import ResultRecord  # noqa: E402
from gui.run_controller import RunTarget  # noqa: E402


def two_cpu_devices(win):
    """Offer the one CPU twice (devices 0 and 1), as a two-GPU machine offers two
    devices; the tests' engine factories run both on the real device 0."""
    st = win.statuses["cpu"]
    d0 = st.devices[0]
    fake = dict(win.statuses)
    fake["cpu"] = dataclasses.replace(st, devices=[d0, dataclasses.replace(d0, index=1)])
    win.config.set_statuses(fake)


def process_engine_on_cpu0(backend, device):
    from engine.run.process import ProcessEngine

    return ProcessEngine(backend, 0)


class CountingEngine(LocalEngine):
    """An in-process engine on the CPU that counts the tasks it was given."""

    made: list = []

    def __init__(self, backend, device):
        super().__init__(backend, 0)
        self.tasks = 0
        CountingEngine.made.append(self)

    def run(self, plan, emit, cancel):
        self.tasks += 1
        return super().run(plan, emit, cancel)


def _finish(qtbot, win, timeout=60_000):
    with qtbot.waitSignal(win.controller.finished, timeout=timeout) as done:
        qtbot.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    return done.args[0]


# --- the picker ---------------------------------------------------------------------------

@pytest.mark.slow
def test_device_picker_offers_several_devices_a_mode_and_ray(make_window, configure, gui_settings):
    win = configure(make_window(), "cpu", ("cpu_numpy",), "32,64")
    two_cpu_devices(win)
    cfg, picker = win.config, win.config.picker
    cfg.select("cpu", 0)
    # One device is the plain default: the mode does not apply yet.
    assert sorted(picker.checks.boxes) == [0, 1] and picker.devices() == [0]
    assert not picker.mode_row.isEnabled()
    assert cfg.run_count() == 2 and win.run_bar.status.text() == "Ready: 2 runs"
    picker.checks.boxes[1].setChecked(True)
    assert picker.mode_row.isEnabled()
    assert cfg.run_count() == 4                        # compare: each device runs both sizes
    assert "2 devices" in cfg.device_note.text() and "each runs everything" in cfg.device_note.text()
    picker.mode_buttons["share"].setChecked(True)
    assert cfg.run_count() == 2
    assert cfg.target() == RunTarget("cpu", (0, 1), "share", None)
    # No device: Run says why.
    picker.set_checked([])
    assert "Choose at least one device." in cfg.problems()
    assert not win.run_bar.run_button.isEnabled()
    picker.set_checked([0, 1])

    # Ray: a cluster address replaces the device choice.
    assert win.ray_status is not None
    picker.set_ray_status(True, "ray 2.x")
    picker.ray_check.setChecked(True)
    picker.ray_address.setText("ray://head:10001")
    assert not picker.checks.isEnabled() and picker.mode_row.isEnabled()
    assert cfg.target().ray_address == "ray://head:10001"
    assert "Ray cluster" in cfg.device_note.text() and "per worker slot" in cfg.device_note.text()
    picker.ray_address.setText("")
    assert "Give the Ray cluster's address (or 'local')." in cfg.problems()
    picker.ray_address.setText("ray://head:10001")
    # Unavailable: disabled, with the reason, and the run stays on this machine.
    picker.set_ray_status(False, "Ray is not installed (pip install ray)")
    assert not picker.ray_check.isEnabled() and not picker.ray_check.isChecked()
    assert picker.ray_note.isVisibleTo(win) and "Ray is not installed" in picker.ray_note.text()
    assert "Ray is not installed" in picker.ray_check.toolTip()
    assert cfg.target() == RunTarget("cpu", (0, 1), "share", None)

    # The choices persist (the wish for Ray too, until Ray is there again).
    win.close()
    saved = win.settings.load_config()
    assert (saved["devices"], saved["device_mode"], saved["ray"], saved["ray_address"]) == (
        [0, 1], "share", True, "ray://head:10001")
    again = make_window(gui_settings)
    p2 = again.config.picker
    assert p2.mode() == "share" and p2.ray_address.text() == "ray://head:10001"
    assert p2.devices() == [0]                 # this machine has one CPU
    assert p2.ray_check.isChecked() == again.ray_status[0]


def test_device_panel_lists_every_device_of_every_backend(make_window):
    win = make_window()
    for name, st in win.statuses.items():
        text = win.devices.status_text(name)
        for d in st.devices:
            assert f"{d.index}: {d.name}" in text


# --- runs on several devices ------------------------------------------------------------

@pytest.mark.slow
def test_compare_mode_runs_everything_on_each_engine(qtbot, make_window, configure):
    win = configure(make_window(engines=process_engine_on_cpu0), "cpu", ("cpu_numpy",),
                    "32,64,96", repeats=3)
    two_cpu_devices(win)
    win.config.select_devices("cpu", [0, 1], "compare")
    assert win.run_bar.status.text() == "Ready: 6 runs"
    ev = _finish(qtbot, win)
    assert ev.cancelled is False and ev.started
    recs = win.store.records
    assert len(recs) == 6 and all(r.status == "ok" and r.passed for r in recs)
    # Both engines' records arrive: two engine processes, each ran every size.
    workers = {r.worker for r in recs}
    assert len(workers) == 2 and all(w.startswith("process ") for w in workers)
    for w in workers:
        assert sorted(r.m for r in recs if r.worker == w) == [32, 64, 96]
    assert win.run_bar.status.text().startswith("Finished 6 runs")
    assert "2 devices (compare)" in win.log.plain_text() or "[cpu:0]" in win.log.plain_text()
    # The engines stay for the next run.
    engines = win.controller.engines()
    assert len(engines) == 2 and all(e.alive() for e in engines)
    _finish(qtbot, win)
    assert win.controller.engines() == engines and len(win.store) == 6


def test_share_mode_splits_the_work(qtbot, make_window, configure):
    CountingEngine.made = []
    win = configure(make_window(engines=CountingEngine), "cpu", ("cpu_numpy",),
                    "32,48,64,80,96,112", budget_s=0.05)
    two_cpu_devices(win)
    win.config.select_devices("cpu", [0, 1], "share")
    assert win.config.run_count() == 6
    ev = _finish(qtbot, win)
    assert ev.cancelled is False
    recs = win.store.records
    assert sorted(r.m for r in recs) == [32, 48, 64, 80, 96, 112]   # each item once
    assert all(r.status == "ok" for r in recs)
    assert len(CountingEngine.made) == 2 and all(e.tasks >= 1 for e in CountingEngine.made)
    assert sum(e.tasks for e in CountingEngine.made) == 6


def test_cancel_a_two_device_run_keeps_what_finished(qtbot, make_window, configure):
    win = configure(make_window(engines=CountingEngine), "cpu", ("cpu_numpy",), "32:256:32",
                    budget_s=0.15)
    two_cpu_devices(win)
    win.config.select_devices("cpu", [0, 1], "compare")
    total = win.config.run_count()
    assert total == 16
    with qtbot.waitSignal(win.controller.result, timeout=30_000):
        assert win.start_run()
    assert not any(g.isEnabled() for g in win.config.findChildren(QGroupBox))
    with qtbot.waitSignal(win.controller.finished, timeout=30_000) as done:
        qtbot.mouseClick(win.run_bar.cancel_button, Qt.MouseButton.LeftButton)
    assert done.args[0].cancelled is True
    kept = len(win.store)
    assert 1 <= kept < total
    assert win.run_bar.status.text().startswith(f"Cancelled: kept {kept}")
    assert all(g.isEnabled() for g in win.config.findChildren(QGroupBox))
    assert win.run_bar.run_button.isEnabled() and not win.running


@pytest.mark.slow
def test_engine_process_killed_mid_run_is_restarted(qtbot, make_window, configure):
    """The item in flight is recorded as an error ("engine restarted"); the rest runs."""
    win = configure(make_window(engines="process"), "cpu", ("cpu_numpy",), "64,128,192,256",
                    budget_s=0.4)
    killed = []

    def kill_in_flight(ev):
        # The second item has just started (its progress event): end its process.
        if ev.done >= 1 and not killed:
            eng = win.controller.engines()[0]
            killed.append(eng.pid)
            os.kill(eng.pid, signal.SIGKILL)

    win.controller.progress.connect(kill_in_flight)
    ev = _finish(qtbot, win, timeout=90_000)
    assert killed and ev.cancelled is False and ev.started
    recs = win.store.records
    assert sorted(r.m for r in recs) == [64, 128, 192, 256]
    errors = [r for r in recs if r.status == "error"]
    assert len(errors) == 1, [(r.m, r.status, r.error) for r in recs]
    assert "engine restarted" in errors[0].error and "killed" in errors[0].error
    assert all(r.status == "ok" for r in recs if r is not errors[0])
    assert "engine restarted" in win.log.plain_text()
    eng = win.controller.engines()[0]
    assert eng.alive() and eng.pid != killed[0] and eng.starts == 2
    assert "1 error" in win.run_bar.status.text()
    # The table shows the lost item's row with its reason.
    model = win.table.model()
    cols = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    status = [model.index(r, cols.index("Status")).data() for r in range(model.rowCount())]
    assert status.count("error") == 1


# --- telling devices apart ------------------------------------------------------------------

def _rec(device_index, variant="tiled", m=512, ms=1.0, host="node1", device="NVIDIA H200"):
    flops = 2 * m ** 3
    return ResultRecord(backend="cuda", device=device, variant=variant, params={}, m=m, n=m, k=m,
                        dtype="float32", median_ms=ms, min_ms=ms, max_ms=ms, flops=flops,
                        bytes=12 * m * m, gflops=flops / ms / 1e6, pct_of_peak=flops / ms / 1e6 / 500,
                        repeats=3, status="ok", passed=True, host=host,
                        device_index=device_index)


def test_series_table_and_ratios_tell_two_devices_of_one_model_apart(make_window):
    from gui.chart_data import best_per_variant, build_series, derived_peaks, speedups

    recs = [_rec(0, "naive", ms=4.0), _rec(0, ms=1.0), _rec(1, "naive", ms=8.0), _rec(1, ms=2.0)]
    series = build_series(recs)
    # one lab best line per device: the faster of naive and tiled at each size there
    assert sorted(s.label for s in series) == ["lab best FP32 · #0", "lab best FP32 · #1", "naive · #0",
                                               "naive · #1", "tiled · #0", "tiled · #1"]
    # Speed-ups compare with the naive run of the same device, not the other one's.
    sp = speedups(recs)
    assert sp[id(recs[1])] == pytest.approx(4.0) and sp[id(recs[3])] == pytest.approx(4.0)
    assert len(best_per_variant(series)) == 6
    assert set(derived_peaks(recs)) == {("node1", "NVIDIA H200", 0), ("node1", "NVIDIA H200", 1)}
    # Different models: the model name alone tells them apart.
    other = [_rec(0), _rec(0, device="NVIDIA H100")]
    assert sorted(s.label for s in build_series(other)) == ["tiled · NVIDIA H100", "tiled · NVIDIA H200"]
    # The same index on two hosts: the host too.
    hosts = [_rec(0, host="a"), _rec(0, host="b")]
    assert sorted(s.label for s in build_series(hosts)) == ["tiled · #0 @ a", "tiled · #0 @ b"]
    # Mixed models and indices: model and index.
    mixed = [_rec(0), _rec(1), _rec(0, device="NVIDIA H100")]
    assert sorted(s.label for s in build_series(mixed)) == [
        "tiled · NVIDIA H100 #0", "tiled · NVIDIA H200 #0", "tiled · NVIDIA H200 #1"]

    win = make_window()
    win.store.add(recs)
    model = win.table.model()
    cols = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    devices = {model.index(r, cols.index("Device")).data() for r in range(model.rowCount())}
    assert devices == {"NVIDIA H200 #0", "NVIDIA H200 #1"}
    assert win.table.isColumnHidden(cols.index("Host"))        # one host: nothing to tell apart
    win.store.add([_rec(0, host="node2")])
    assert not win.table.isColumnHidden(cols.index("Host"))


# --- Ray clusters (a stand-in factory: the cluster tests start real ones) -------------------

def test_ray_cluster_choice_runs_on_the_clusters_engines(qtbot, make_window, configure,
                                                         error_dialogs):
    asked = []

    def cluster(address, backend):
        asked.append((address, backend))
        if address == "nowhere:1":
            raise RuntimeError("cannot reach nowhere:1")
        return [CountingEngine(backend, 0), CountingEngine(backend, 0)]

    CountingEngine.made = []
    win = configure(make_window(engines=lambda b, d: pytest.fail("no local engine wanted")),
                    "cpu", ("cpu_numpy",), "32,48,64", repeats=2)
    win.controller.cluster_factory = cluster
    picker = win.config.picker
    picker.set_ray_status(True, "ray (stand-in)")
    picker.ray_check.setChecked(True)
    picker.ray_address.setText("head:6379")
    picker.set_mode("share")
    assert win.config.target() == RunTarget("cpu", (0,), "share", "head:6379")
    ev = _finish(qtbot, win)
    assert ev.started and not ev.cancelled
    assert asked == [("head:6379", "cpu")]
    assert sorted(r.m for r in win.store.records) == [32, 48, 64]
    assert sum(e.tasks for e in CountingEngine.made) == 3
    assert "Ray cluster 'head:6379': 2 engine(s)" in win.log.plain_text()
    # The cluster's engines are kept for the next run on it.
    _finish(qtbot, win)
    assert asked == [("head:6379", "cpu")] and len(win.controller.engines()) == 2

    # A cluster that cannot be reached: the run does not start, and says why.
    picker.ray_address.setText("nowhere:1")
    ev = _finish(qtbot, win)
    assert not ev.started and "cannot reach nowhere:1" in ev.message
    assert error_dialogs and "cannot reach nowhere:1" in error_dialogs[-1][1]
    assert win.run_bar.run_button.isEnabled() and not win.running


def test_probing_runs_off_the_gui_thread(qtbot, monkeypatch, make_window):
    import threading

    import gui.run_controller as rc

    threads = []
    real = rc.probe_all

    def probe_all():
        threads.append(threading.current_thread())
        return real()

    monkeypatch.setattr(rc, "probe_all", probe_all)
    win = make_window()
    assert threads and threads[0] is not threading.main_thread()
    assert win.statuses and "cpu" in win.statuses
