"""GUI: exporting charts (PNG/SVG), saving and reopening results, overlays, TSV copy."""
import os
import xml.dom.minidom

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QImage  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from engine.results import records  # noqa: E402
from gui.charts import CHARTS  # noqa: E402

SIZES = "32,64,96"


@pytest.fixture
def ran(qtbot, make_window, configure):
    """A window after a tiny opencl sweep: naive and tiled_any at block 16, 3 sizes."""
    win = configure(make_window(), "opencl", ("naive", "tiled_any"), SIZES,
                    params={("naive", "block"): [16], ("tiled_any", "block"): [16]})
    with qtbot.waitSignal(win.controller.finished, timeout=60_000):
        win.start_run()
    assert len(win.store) == 6
    return win


def distinct_colours(img: QImage, step: int = 3) -> int:
    img = img.convertToFormat(QImage.Format.Format_RGB32)
    seen = set()
    for y in range(0, img.height(), step):
        for x in range(0, img.width(), step):
            seen.add(img.pixel(x, y))
    return len(seen)


@pytest.mark.slow
def test_export_png_and_svg_at_the_chosen_size(ran, tmp_path):
    png, = ran.export_charts(["runtime"], tmp_path / "runtime.png", 900, 560)
    img = QImage(str(png))
    assert not img.isNull()
    assert (img.width(), img.height()) == (900, 560)
    assert distinct_colours(img) > 20  # curves, text and grid: anything but a blank image

    svg, = ran.export_charts(["gflops"], tmp_path / "gflops.svg", 1000, 600)
    doc = xml.dom.minidom.parse(str(svg))
    root = doc.documentElement
    assert root.tagName == "svg"
    assert float(root.getAttribute("width").rstrip("px")) == pytest.approx(1000, abs=1)
    drawn = doc.getElementsByTagName("path") + doc.getElementsByTagName("polyline")
    assert len(drawn) > 5
    text = svg.read_text()
    assert "naive[block=16]" in text and "tiled_any[block=16]" in text


@pytest.mark.slow
def test_export_all_charts_and_dark_palette(ran, tmp_path):
    paths = ran.export_charts(list(CHARTS), tmp_path / "charts.png", 640, 400)
    assert [p.name for p in paths] == [f"charts-{k}.png" for k in CHARTS]
    for p in paths:
        assert distinct_colours(QImage(str(p))) > 10, p.name
    light = QImage(str(paths[0])).pixel(5, 5)
    ran.dark_action.setChecked(True)  # charts follow the palette
    try:
        dark, = ran.export_charts(["runtime"], tmp_path / "dark.png", 640, 400)
        corner = QImage(str(dark)).pixelColor(5, 5)
        assert corner.lightness() < 80 and QImage(str(paths[0])).pixelColor(5, 5).lightness() > 170
        assert QImage(str(dark)).pixel(5, 5) != light
    finally:
        ran.dark_action.setChecked(False)


@pytest.mark.parametrize("suffix", [".csv", ".json"])
@pytest.mark.slow
def test_saved_results_reopen_with_the_same_curves(ran, make_window, tmp_path, suffix):
    path = tmp_path / f"run{suffix}"
    assert ran.save_results(path)
    assert records.load(path)[0].variant == "naive"
    before = {k: ran.charts.curves(k) for k in ("runtime", "gflops", "bandwidth", "roofline")}

    other = make_window()  # a fresh window: no GPU work, just the file
    assert other.open_results(path)
    assert len(other.store) == 6
    for kind, curves in before.items():
        again = other.charts.curves(kind)
        assert set(again) == set(curves), kind
        for label, (x, y) in curves.items():
            assert np.allclose(again[label][0], x) and np.allclose(again[label][1], y), (kind, label)
    assert str(path) in other.settings.recent_files()


@pytest.mark.slow
def test_second_file_overlays_and_source_tells_them_apart(ran, make_window, tmp_path, error_dialogs):
    a, b = tmp_path / "a" / "run.json", tmp_path / "b" / "run.json"
    for p in (a, b):
        p.parent.mkdir()
    ran.save_results(a)
    recs = records.load(a)
    for r in recs:  # a second run: same kernels, other timings
        r.median_ms *= 2
    records.save(recs, b)

    win = make_window()
    assert win.open_results(a) and win.open_results(b)
    curves = win.charts.curves("runtime")
    assert len(curves) == 6          # two kernels and a lab best line per file
    assert {lbl.split(" · ")[1] for lbl in curves} == {"run.json", "b/run.json"}
    assert "lab best FP32 · b/run.json" in curves
    first = curves["naive[block=16] · run.json"][1]
    second = curves["naive[block=16] · b/run.json"][1]
    assert np.allclose(second, 2 * first)
    assert not win.table.isColumnHidden(0)  # the Source column appears for two sources
    # Reopening a file replaces its curves rather than doubling them.
    win.open_results(a)
    assert len(win.store) == 12
    assert error_dialogs == []


def test_bad_results_file_gives_a_dialog_and_changes_nothing(ran, tmp_path, error_dialogs):
    bad = tmp_path / "broken.json"
    bad.write_text("{ not json")
    not_records = tmp_path / "other.csv"
    not_records.write_text("a,b\n1,2\n")
    assert not ran.open_results(bad)
    assert not ran.open_results(not_records)
    assert not ran.open_results(tmp_path / "missing.json")
    assert len(error_dialogs) == 3
    assert "broken.json" in error_dialogs[0][1] and "other.csv" in error_dialogs[1][1]
    assert len(ran.store) == 6


def test_table_sorts_numerically_and_copies_tsv(ran, qtbot):
    table = ran.table
    cols = [table.model().headerData(c, Qt.Orientation.Horizontal) for c in range(table.model().columnCount())]
    median = cols.index("Median ms")
    table.sortByColumn(median, Qt.SortOrder.DescendingOrder)
    values = [float(table.model().index(r, median).data()) for r in range(6)]
    assert values == sorted(values, reverse=True)
    text = ran.table.copy_tsv(all_rows=True)
    assert QApplication.clipboard().text() == text
    lines = text.rstrip("\n").split("\n")
    assert len(lines) == 7 and lines[0].split("\t")[:3] == ["Variant", "Params", "M"]
    assert all(len(line.split("\t")) == len(lines[0].split("\t")) for line in lines)
    table.selectRow(0)
    assert len(ran.table.tsv(all_rows=False).strip().split("\n")) == 2


@pytest.mark.slow
def test_failed_verification_is_marked_on_charts_and_in_the_table(ran, make_window, tmp_path):
    """A results file (e.g. from another machine) with a wrong kernel in it."""
    from PySide6.QtCore import QPointF

    from gui.theme import failed_row_colors

    recs = list(ran.store.records)
    bad = recs[3]
    bad.status, bad.passed, bad.error = "failed", False, "wrong result: planted for the test"
    records.save(recs, tmp_path / "with_failure.json")
    win = make_window()
    assert win.open_results(tmp_path / "with_failure.json")
    for kind in ("runtime", "gflops", "roofline"):
        win.charts.curves(kind)
        marker = win.charts.views[kind].items.get("__failed__") if kind != "roofline" else None
        if marker is not None:
            xs, _ = marker[0].getData()
            assert len(xs) == 1
    model = win.table.model()
    status_col = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())].index("Status")
    rows = [r for r in range(model.rowCount()) if model.index(r, status_col).data() == "failed"]
    assert len(rows) == 1
    assert model.index(rows[0], 0).data(Qt.ItemDataRole.BackgroundRole) == failed_row_colors()[0]
    # Hovering the failed point says so.
    view = win.charts.views["runtime"]
    win.charts.set_current("runtime")
    x, y = win.charts.curves("runtime")[bad.label()]
    i = int(np.argmin(np.abs(x - bad.m)))
    hit = view.hover.pick(QPointF(np.log10(x[i]), np.log10(y[i])))
    assert hit is not None and "verification FAILED" in hit[2] and bad.label() in hit[2]


@pytest.mark.slow
def test_export_dialog_choices(ran, tmp_path):
    from gui.export import ExportDialog

    dlg = ExportDialog("gflops", str(tmp_path), ran)
    kinds, path, w, h = dlg.choice()
    assert kinds == ["gflops"] and path == tmp_path / "gflops.png" and (w, h) == (1600, 1000)
    dlg.format.setCurrentIndex(dlg.format.findData("svg"))
    dlg.chart.setCurrentIndex(dlg.chart.findData("all"))
    dlg.width_spin.setValue(800)
    kinds, path, w, h = dlg.choice()
    assert kinds == list(CHARTS) and path == tmp_path / "charts.svg" and w == 800
    written = ran.export_charts(kinds, path, w, h)
    assert all(p.suffix == ".svg" and p.stat().st_size > 1000 for p in written)


@pytest.mark.slow
def test_dropping_a_results_file_on_the_window_opens_it(qtbot, ran, make_window, tmp_path):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent

    ran.save_results(tmp_path / "dropped.csv")
    win = make_window()
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(tmp_path / "dropped.csv"))])
    win.dropEvent(QDropEvent(QPointF(600, 300), Qt.DropAction.CopyAction, mime,
                             Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
    # Read on a thread of its own: the records come a moment later.
    qtbot.waitUntil(lambda: len(win.store) == 6, timeout=10_000)
    assert win.store.sources() == ["dropped.csv"] and not win.files.loading
