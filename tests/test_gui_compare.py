"""GUI: File ▸ Compare with… adds ratio and verdict columns to the results table and
colours the compare chart's bars by verdict; a bad file gets a message box."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import math  # noqa: E402

import pyqtgraph as pg  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402

from engine.results import records  # noqa: E402
from engine.results.records import ResultRecord  # noqa: E402
from gui.results_table import COMPARE_COLUMNS, COLUMNS  # noqa: E402
from gui.theme import VERDICT_COLORS  # noqa: E402


def rec(variant, ms, params=None) -> ResultRecord:
    return ResultRecord(backend="cuda", device="NVIDIA H200", variant=variant, params=params or {},
                        m=2048, n=2048, k=2048, dtype="float32", median_ms=ms, min_ms=ms * 0.99,
                        max_ms=ms * 1.01, noise_pct=1.0, repeats=20, passed=True,
                        gflops=2 * 2048**3 / (ms * 1e-3) / 1e9)


BASE = [("naive", 10.0), ("tiled", 5.0), ("wpt", 2.0), ("ffma_wide", 1.0)]


@pytest.fixture
def files(tmp_path):
    base = records.save([rec(v, ms) for v, ms in BASE], tmp_path / "base.json")
    # The new run: tiled 20% slower, wpt twice as fast, ffma_wide within the noise, and a
    # kernel the base did not run.
    new_ms = {"naive": 10.0, "tiled": 6.0, "wpt": 1.0, "ffma_wide": 1.02}
    new = records.save([rec(v, new_ms[v]) for v, _ in BASE] + [rec("vectorized", 1.5)],
                       tmp_path / "new.csv")
    return base, new


def cells(win, title):
    model = win.table.model_
    col = [c.title for c in COLUMNS].index(title)
    return {model.record(r).variant: model.data(model.index(r, col))
            for r in range(model.rowCount())}


def bars(win):
    win.charts.set_current("compare")
    win.charts.redraw("compare")
    plot = win.charts.views["compare"].getPlotItem()
    item = next(i for i in plot.items if isinstance(i, pg.BarGraphItem))
    names = [t.textItem.toPlainText() for t in plot.items if isinstance(t, pg.TextItem)]
    return [b.color().name() for b in item.opts["brushes"]], names


def test_compare_columns_and_bar_colours(make_window, files, error_dialogs):
    base, new = files
    win = make_window()
    assert win.results_flow.open(new)
    assert all(win.table.isColumnHidden(c) for c in COMPARE_COLUMNS)
    plain, _ = bars(win)
    assert not win.clear_compare_action.isEnabled()

    assert win.compare_flow.compare_with(base)
    assert not error_dialogs
    assert not any(win.table.isColumnHidden(c) for c in COMPARE_COLUMNS)
    verdicts = cells(win, "Verdict")
    assert verdicts == {"naive": "SAME", "tiled": "SLOWER", "wpt": "FASTER", "ffma_wide": "SAME",
                        "vectorized": "not in base"}
    ratios = cells(win, "vs base")
    assert ratios["tiled"] == "1.200" and ratios["wpt"] == "0.500" and ratios["vectorized"] == ""
    model = win.table.model_
    col = [c.title for c in COLUMNS].index("Verdict")
    row = next(r for r in range(model.rowCount()) if model.record(r).variant == "tiled")
    assert model.data(model.index(row, col), Qt.ItemDataRole.ForegroundRole).name() == VERDICT_COLORS["slower"]
    assert "SLOWER" in win.table.tsv() and "vs base" in win.table.tsv()

    colours, texts = bars(win)
    # Bars best first: wpt (faster), ffma_wide (same), vectorized (unpaired: its own
    # colour), tiled (slower), naive (same).
    assert colours[1] == colours[4] == VERDICT_COLORS["same"]
    assert colours[0] == VERDICT_COLORS["faster"] and colours[3] == VERDICT_COLORS["slower"]
    assert colours[2] == plain[2] and colours[2] not in VERDICT_COLORS.values()
    assert any("1.20× base, SLOWER" in t for t in texts)
    assert win.clear_compare_action.isEnabled()
    assert "base.json" in win.statusBar().currentMessage()

    # It follows the shown results: a file opened later gets its own pairs.
    again = records.save([rec("naive", 20.0)], base.parent / "later.json")
    assert win.results_flow.open(again)
    win.compare_flow.refresh()
    assert sorted(p.verdict.name for c in win.compare_flow.comparisons.values() for p in c.pairs
                  if p.new.variant == "naive") == ["SAME", "SLOWER"]

    win.clear_compare_action.trigger()
    assert all(win.table.isColumnHidden(c) for c in COMPARE_COLUMNS)
    assert cells(win, "Verdict")["tiled"] == ""
    win.results_flow.clear()
    assert win.results_flow.open(new)
    assert bars(win)[0] == plain
    assert not win.clear_compare_action.isEnabled()


def test_bad_compare_file_gives_a_message(qtbot, make_window, files, tmp_path, error_dialogs):
    base, new = files
    win = make_window()
    assert not win.compare_flow.compare_with(base)          # nothing shown yet
    assert error_dialogs[-1][0] == "Cannot compare" and "no results to compare" in error_dialogs[-1][1]
    assert win.results_flow.open(new)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    for bad, words in ((garbage, "not a results file"), (tmp_path, "is a folder, not a results file"),
                       (tmp_path / "missing.csv", "was not found")):
        assert not win.compare_flow.compare_with(bad)
        title, text = error_dialogs[-1]
        assert title == "Cannot compare" and words in text, text
    assert not win.compare_flow.active
    assert all(win.table.isColumnHidden(c) for c in COMPARE_COLUMNS)
    # The window's own way reads on a thread: the message comes all the same.
    shown = len(error_dialogs)
    win.compare_flow.compare_in_background(garbage)
    qtbot.waitUntil(lambda: len(error_dialogs) > shown, timeout=5000)
    assert error_dialogs[-1][0] == "Cannot compare" and "garbage.json: not a results file" in error_dialogs[-1][1]
    assert math.isnan(win.table.model_.compared(win.store.records[0]).ratio)
