"""GUI: the Profile action and the Profile view.

The view is fed hardware counters recorded by Nsight Compute on an H100
(tests/data/ncu); the window's Profile flow runs for real on the OpenCL backend (PoCL)
with a stand-in ``ncu`` (tests/fake_ncu.py) in place of the GPU's profiler, since
profiling needs CUDA — the GPU tests drive the same flow with the real one.
"""
import math
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from PySide6.QtGui import QImage  # noqa: E402

from engine.profile import nsight as profile, metrics as pm  # noqa: E402
from engine.results import records  # noqa: E402
from gui.profile_flow import ProfileFlow  # noqa: E402
from gui.profile_view import ProfileView, header_text, short_labels  # noqa: E402
from gui.results_store import ResultStore  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "data" / "ncu" / "h100_2048"


@pytest.fixture
def recorded():
    return records.load(FIXTURES / "records_2048.json")


def _colours(path: Path) -> int:
    img = QImage(str(path))
    return len({img.pixel(x, y) for x in range(0, img.width(), 3) for y in range(0, img.height(), 3)})


def test_view_lays_variants_side_by_side(qtbot, recorded, tmp_path):
    store = ResultStore()
    view = ProfileView(store)
    qtbot.addWidget(view)
    view.resize(1100, 420)
    view.show()
    assert view.empty.isVisible() and not view.splitter.isVisible()
    store.add(recorded)
    assert view.splitter.isVisible() and not view.empty.isVisible()
    assert view.shape_combo.currentText() == "2048 float32"
    cols = view.columns()
    assert [r.label() for r in cols] == [r.label() for r in recorded]
    assert view.table.rowCount() == len(pm.METRICS) and view.table.columnCount() == 10
    for i, metric in enumerate(pm.METRICS):
        for j, rec in enumerate(cols):
            assert view.table.item(i, j).text() == pm.value_text(metric, rec.profile["counters"], stalls=1)
    assert view.table.horizontalHeaderItem(0).text() == "naive\nblock=16"
    view.select_metric("gld_sectors_per_request")
    bars = view.bar_values()
    assert bars["naive_uncoalesced[block=16]"] >= 4 * bars["naive[block=16]"]
    assert math.isnan(bars["cublas_tf32"])           # no plain global loads: no bar
    assert "Coalescing" in view.explain.text() and "32-byte sectors" in view.explain.text()
    view.select_metric("shared_bank_conflicts")
    bars = view.bar_values()
    assert bars["aat_coalesced[tile=32]"] >= 10 * bars["aat_padded[tile=32]"]
    assert "[T][T+1]" in view.explain.text()
    view.select_metric("top_stalls")
    assert view.table.item(len(pm.METRICS) - 1, 1).toolTip().count("warps/issue") >= 3
    shot = tmp_path / "profile_view.png"
    assert view.grab().save(str(shot))
    assert _colours(shot) > 20


def test_view_follows_the_store_and_shapes(qtbot, recorded):
    store = ResultStore()
    view = ProfileView(store)
    qtbot.addWidget(view)
    other = records.load(FIXTURES / "records_2048.json")[:2]
    for r in other:
        r.m = r.n = r.k = 1024
    store.add(recorded + other)
    assert view.shape_combo.count() == 2
    assert view.show_shape(1024, 1024, 1024, "float32") and len(view.columns()) == 2
    assert not view.show_shape(7, 7, 7, "float32")
    store.clear()
    assert not view.empty.isHidden() and view.table.columnCount() == 0


def test_short_labels_keep_only_what_tells_columns_apart(recorded):
    a, b = recorded[0], records.load(FIXTURES / "records_2048.json")[0]
    b.params = {"block": 32}
    assert short_labels([a, b, recorded[8]]) == ["naive[block=16]", "naive[block=32]", "cublas_fp32"]
    ffma = next(r for r in recorded if r.variant == "ffma_wide")
    assert short_labels([ffma]) == ["ffma_wide"]
    assert header_text(ffma).split("\n")[0] == "ffma_wide"
    assert all(len(line) <= 24 for line in header_text(ffma).split("\n")[1:])


def test_opened_results_show_their_profiles(make_window):
    win = make_window()
    assert win.open_results(FIXTURES / "records_2048.json")
    assert len(win.profile_view.columns()) == 10


def test_profile_is_disabled_with_the_reason_off_cuda(make_window, configure, error_dialogs):
    win = configure(make_window(), backend="opencl")
    assert not win.profile_action.isEnabled()
    assert "needs the cuda backend" in win.profile_action.toolTip()
    assert "needs the cuda backend" in win.profile_view.empty.text().replace("\n", " ")
    assert not win.start_profile()
    assert error_dialogs and "needs the cuda backend" in error_dialogs[-1][1]


@pytest.fixture
def profile_anywhere(monkeypatch, fake_ncu):
    """Let the window profile OpenCL records with the stand-in ncu."""
    monkeypatch.setattr(ProfileFlow, "status", lambda self: (True, ""))
    monkeypatch.setattr(profile, "why_not_profiled", lambda rec, host: "")
    import gui.dialogs
    picked = []

    def choose(parent, title, text, items, default):
        picked.append((items, default))
        return "64"

    monkeypatch.setattr(gui.dialogs, "choose", choose)
    return picked


@pytest.mark.slow
def test_profile_times_one_size_then_shows_the_counters(qtbot, make_window, configure,
                                                        profile_anywhere):
    win = configure(make_window(), sizes="32,64", variants=("naive", "tiled_any"),
                    params={("naive", "block"): [16], ("tiled_any", "block"): [16]})
    assert win.profile_action.isEnabled()
    with qtbot.waitSignal(win.profiler.finished, timeout=120_000) as done:
        assert win.start_profile()
        assert not win.run_action.isEnabled() and not win.profile_action.isEnabled()
    results, _seconds, cancelled = done.args
    assert profile_anywhere == [(["32", "64"], "64")]
    assert not cancelled and len(results) == 2 and all(r.ok for r in results)
    recs = win.store.records
    assert {(r.m, r.n, r.k) for r in recs} == {(64, 64, 64)}       # timed at the one size
    assert all(r.passed and r.profile["counters"]["duration_ns"] > 0 for r in recs)
    assert all(Path(r.profile["report"]).is_file() for r in recs)
    assert win.bottom_tabs.currentWidget() is win.profile_view
    assert len(win.profile_view.columns()) == 2
    assert "Profiled 2 kernel launches" in win.run_bar.status.text()
    assert win.profile_action.isEnabled() and win.run_action.isEnabled()
    assert "profiled naive[block=16] at 64×64×64" in win.log.plain_text()


@pytest.mark.slow
def test_a_profile_can_be_cancelled(qtbot, make_window, configure, profile_anywhere,
                                    monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "hang")
    win = configure(make_window(), sizes="64", variants=("naive",),
                    params={("naive", "block"): [16]})
    with qtbot.waitSignal(win.profiler.finished, timeout=120_000) as done:
        assert win.start_profile()
        qtbot.waitUntil(lambda: win.profiler.running, timeout=60_000)
        win.cancel_run()
    assert done.args[2] is True
    assert win.run_bar.status.text().startswith("Profile cancelled")
    assert win.run_action.isEnabled()


def test_a_failed_profile_is_reported(qtbot, make_window, configure, profile_anywhere,
                                      monkeypatch, error_dialogs):
    monkeypatch.setenv("FAKE_NCU_MODE", "perm")
    win = configure(make_window(), sizes="64", variants=("naive",),
                    params={("naive", "block"): [16]})
    with qtbot.waitSignal(win.profiler.finished, timeout=120_000):
        assert win.start_profile()
    assert error_dialogs and "ERR_NVGPUCTRPERM" in error_dialogs[-1][1]
    assert "1 failed" in win.run_bar.status.text()
    rec = win.store.records[0]
    assert "ERR_NVGPUCTRPERM" in rec.profile["error"] and not rec.profile["counters"]


@pytest.mark.slow
def test_the_runner_is_idle_when_the_window_hears_it_finished(qtbot, monkeypatch, tmp_path):
    """The window's finished slot asks whether anything still runs before it enables Run
    again; the worker thread is still alive while it emits, so the runner must already say
    idle then (it said busy when the slot ran before the thread ended: Run stayed disabled
    after a profile, now and then)."""
    import time

    from PySide6.QtCore import Qt

    from gui.profile_runner import ProfileRunner

    monkeypatch.setattr(profile, "profile_records", lambda *a, **k: time.sleep(0.3) or [])
    runner = ProfileRunner()
    seen = []
    # the window's slot, queued to this thread when the worker emits; then a slot that runs
    # in the worker, inside its emit, after the first was queued: the thread stays alive
    # while the queued slot runs
    runner.finished.connect(lambda *a: seen.append(runner.running), Qt.ConnectionType.QueuedConnection)
    runner.finished.connect(lambda *a: time.sleep(1.0), Qt.ConnectionType.DirectConnection)
    assert runner.start([], tmp_path)
    assert runner.running
    qtbot.waitUntil(lambda: bool(seen), timeout=10_000)
    assert runner._thread.is_alive()                 # the race this test is about
    assert seen == [False]
    assert runner.wait(5)
