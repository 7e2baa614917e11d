"""GUI: charts with many curves (a real 29-kernel H200 sweep): legend, units, roofline
peaks, the bar view, distinct styles and the best-per-variant filter."""
import copy
import dataclasses
import math
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import pyqtgraph as pg  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402

from engine.results import records  # noqa: E402
from engine.results.records import ResultRecord  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LADDER = ROOT / "tests" / "data" / "h200_ladder_v2.json"   # a real H200 ladder run


def _ladder_records():
    if not LADDER.is_file():
        pytest.skip(f"{LADDER.name} is not in this checkout")
    return records.load(LADDER)


def _synthetic(n_series=30, sizes=(256, 512, 1024), device="dev A", peak=20_000.0):
    """``n_series`` parameter sets of one variant plus a cuBLAS reference."""
    out = []
    for i in range(n_series):
        for m in sizes:
            flops = 2 * m ** 3
            g = 1000.0 + 500 * i + m
            ms = flops / g / 1e6
            out.append(ResultRecord(backend="cuda", device=device, variant="tiled", params={"block": i},
                                    m=m, n=m, k=m, dtype="float32", median_ms=ms, min_ms=ms * 0.98, max_ms=ms * 1.05,
                                    gflops=g, flops=flops, bytes=12 * m * m, pct_of_peak=100 * g / peak,
                                    repeats=3, status="ok", passed=True))
    return out


@pytest.fixture
def ladder_window(make_window):
    recs = _ladder_records()
    assert len(recs) > 100
    win = make_window()
    assert win.open_results(LADDER)
    return win


# --- 1. legend ----------------------------------------------------------------------------

def test_legend_in_columns_with_compact_rows_for_30_series(qtbot):
    """An exported view (no side list) puts 30 entries in several tight columns."""
    from gui.chart_data import build_series
    from gui.chart_render import ChartOptions, render
    from gui.chart_view import ChartView, CompactSample

    view = ChartView("gflops")
    qtbot.addWidget(view)
    view.resize(1200, 700)
    view.show()
    qtbot.waitExposed(view)
    series = build_series(_synthetic(30))
    assert len(series) == 30
    render(view, "gflops", series, ChartOptions())
    legend = view.legend
    assert len(legend.items) == 30 and legend.isVisible()
    assert legend.columnCount >= 2
    assert legend.rowCount <= math.ceil(30 / legend.columnCount)
    sample, label = legend.items[0]
    assert isinstance(sample, CompactSample) and sample.boundingRect().height() <= 15
    # The box stays well inside the plot rather than covering it.
    assert legend.boundingRect().height() < 0.6 * view.getPlotItem().getViewBox().height()
    # Clicking a sample asks for that curve to be hidden.
    asked = []
    view.legend_toggled.connect(asked.append)
    sample.sigClicked.emit(sample.item)
    assert asked == [series[0].label]


def test_many_curves_list_beside_the_plot_and_toggle(ladder_window, qtbot):
    win = ladder_window
    charts = win.charts
    charts.set_current("gflops")
    curves = charts.curves("gflops")
    # 30 kernels plus the lab best FP32 line (one TF32 kernel in this file: no TF32 line)
    assert len(curves) == 31 and "lab best FP32" in curves and "lab best TF32" not in curves
    view = charts.views["gflops"]
    assert view.legend_in_side and not view.legend.isVisible()
    side = view.side
    assert side.isVisible() and side.list.count() == 31
    assert side.list.item(0).toolTip()  # the full label
    # Legend texts drop the parameters that all of a variant's sets share.
    texts = [side.list.item(i).text() for i in range(side.list.count())]
    assert "pipelined[bm=64,minb=2]" in texts
    # Unticking a row hides the curve in every chart; ticking brings it back.
    label = side.list.item(3).data(Qt.ItemDataRole.UserRole)
    side.list.item(3).setCheckState(Qt.CheckState.Unchecked)
    assert label in charts.hidden
    curve, bars = view.items[label]
    assert not curve.isVisible() and not bars.isVisible()  # its error bars go too
    assert label not in charts.curves("compare")
    assert "30 of 31" in side.title.text()
    side.list.item(3).setCheckState(Qt.CheckState.Checked)
    charts.set_current("gflops")
    assert curve.isVisible() and label not in charts.hidden
    side.none_button.click()
    assert len(charts.hidden) == 31
    side.all_button.click()
    assert not charts.hidden


# --- 2. axis units and tick labels ----------------------------------------------------------

def test_plain_tick_strings_and_units(qapp):
    from gui.chart_data import pick_unit, value_text
    from gui.chart_view import PlainLogAxis, plain_number

    axis = PlainLogAxis("left")
    axis.setLogMode(True)
    vals = list(np.log10([1e5, 2e5, 3e5, 5e5, 1e6]))
    assert axis.logTickStrings(vals, 1.0, 1.0) == ["100000", "200000", "", "500000", "1000000"]
    axis.set_unit_factor(1e-3)   # GFLOP/s data shown in TFLOP/s
    assert axis.logTickStrings(vals, 1.0, 1.0) == ["100", "200", "", "500", "1000"]
    axis.set_unit_factor(1.0)
    assert axis.logTickStrings(list(np.log10([0.05, 0.1, 0.2])), 1.0, 1.0) == ["0.05", "0.1", "0.2"]
    axis.setLogMode(False)
    assert axis.tickStrings([0, 100_000, 200_000], 1.0, 100_000) == ["0", "100000", "200000"]
    axis.set_unit_factor(1e-3)
    assert axis.tickStrings([0, 100_000, 250_000], 1.0, 50_000) == ["0", "100", "250"]
    assert plain_number(16384) == "16384" and plain_number(0.5) == "0.5" and "e" not in plain_number(5e5)

    assert pick_unit("gflops", [900, 5e5]) == ("TFLOP/s", 1e-3)
    assert pick_unit("gflops", [900, 9000]) == ("GFLOP/s", 1.0)
    assert pick_unit("bandwidth", [20_000]) == ("TB/s", 1e-3)
    assert pick_unit("runtime", [0.02, 0.9]) == ("µs", 1e3)
    assert pick_unit("runtime", [0.02, 3.0]) == ("ms", 1.0)
    assert value_text(416_255, "gflops") == "416.3 TFLOP/s"


def test_axes_of_the_ladder_read_in_tflops(ladder_window):
    charts = ladder_window.charts
    charts.curves("gflops")
    plot = charts.views["gflops"].getPlotItem()
    assert "TFLOP/s" in plot.getAxis("left").labelText
    assert plot.getAxis("left").unit_factor == pytest.approx(1e-3)
    # The data (and the view coordinates) stay in GFLOP/s.
    label = next(lbl for lbl in charts.curves("gflops") if lbl.startswith("cublas_tf32"))
    assert max(charts.curves("gflops")[label][1]) > 1e5


# --- 3. roofline peaks ----------------------------------------------------------------------

def test_roofline_peak_derived_from_pct_of_peak(ladder_window):
    from gui.chart_data import derived_peaks

    recs = _ladder_records()
    peaks = derived_peaks(recs)
    assert set(peaks) == {recs[0].device_key()} and recs[0].device == "NVIDIA H200"
    expected = recs[0].gflops / recs[0].pct_of_peak * 100
    assert peaks[recs[0].device_key()] == pytest.approx(expected, rel=1e-3)

    charts = ladder_window.charts
    charts.set_current("roofline")
    assert charts.curves("roofline")
    assert charts.peak_gflops.value() == pytest.approx(expected, abs=1)
    plot = charts.views["roofline"].getPlotItem()
    assert "unknown" not in (plot.titleLabel.text or "")
    texts = [i.textItem.toPlainText() for i in plot.items if isinstance(i, pg.TextItem)]
    assert any("FP32 SIMT peak 66.9" in t and "TFLOP/s" in t for t in texts), texts


def test_roofline_gives_each_device_its_own_roof(qtbot):
    from gui.chart_data import build_series, derived_peaks
    from gui.chart_render import ChartOptions, render, roofs_for
    from gui.chart_view import ChartView

    recs = _synthetic(3, device="dev A", peak=20_000) + _synthetic(3, device="dev B", peak=50_000)
    series = build_series(recs)
    opts = ChartOptions(derived_peaks=tuple(derived_peaks(recs).items()), peak_gbps=1000)
    roofs = roofs_for(series, opts)
    assert {r.device: round(r.peak_gflops) for r in roofs} == {"dev A": 20_000, "dev B": 50_000}
    # A typed (or the device's own) figure wins for its device; bandwidth only where typed.
    typed = roofs_for(series, ChartOptions(peak_gflops=30_000, peak_gbps=900, peak_device="dev B",
                                           derived_peaks=opts.derived_peaks))
    by = {r.device: r for r in typed}
    assert by["dev B"].peak_gflops == 30_000 and by["dev B"].peak_gbps == 900 and not by["dev B"].derived
    assert round(by["dev A"].peak_gflops) == 20_000 and by["dev A"].peak_gbps is None
    view = ChartView("roofline")
    qtbot.addWidget(view)
    render(view, "roofline", series, opts)
    texts = [i.textItem.toPlainText() for i in view.getPlotItem().items if isinstance(i, pg.TextItem)]
    assert any(t.startswith("dev A") and "FP32 SIMT peak" in t for t in texts)
    assert any(t.startswith("dev B") and "FP32 SIMT peak" in t for t in texts)


def test_roofline_draws_each_precisions_ceiling_and_the_measured_copy_roof(qtbot):
    """Records of FP32, TF32 and int32 kernels each sit under their own ceiling: the
    derived FP32 peak ignores the TF32 records' % (of the TF32 peak), the TF32 tensor-core
    and int32 roofs and the measured copy bandwidth come from the records."""
    from gui.chart_data import build_series, derived_peaks, record_ceilings
    from gui.chart_render import ChartOptions, render, roofs_for
    from gui.chart_view import ChartView

    fp32 = _synthetic(2, device="dev A", peak=60_000)
    tf32 = [dataclasses.replace(r, variant="tf32_mma", gflops=r.gflops * 8, median_ms=r.median_ms / 8,
                                pct_of_peak=100 * r.gflops * 8 / 480_000,
                                extra={"precision": "tf32", "peak_gflops": 480_000.0, "copy_gbps": 3000.0})
            for r in _synthetic(1, device="dev A", peak=60_000)]
    ints = [dataclasses.replace(r, dtype="int32", pct_of_peak=100 * r.gflops / 30_000,
                                extra={"precision": "int32", "peak_gflops": 30_000.0, "copy_gbps": 3000.0})
            for r in _synthetic(1, device="dev A", peak=60_000)]
    recs = fp32 + tf32 + ints
    assert list(derived_peaks(recs).values()) == [pytest.approx(60_000)]
    ceilings = record_ceilings(recs)
    assert ceilings == {"dev A": {"tf32": 480_000.0, "int32": 30_000.0, "copy": 3000.0}}
    opts = ChartOptions(derived_peaks=tuple(derived_peaks(recs).items()), peak_gbps=4000,
                        ceilings=tuple((d, w, v) for d, per in ceilings.items() for w, v in per.items()))
    series = build_series(recs)
    (rf,) = roofs_for(series, opts)
    assert rf.peak_of("fp32") == pytest.approx(60_000) and rf.peak_of("tf32") == 480_000
    assert rf.peak_of("int32") == 30_000 and rf.copy_gbps == 3000 and rf.bandwidth() == 4000
    view = ChartView("roofline")
    qtbot.addWidget(view)
    render(view, "roofline", series, opts)
    texts = [i.textItem.toPlainText() for i in view.getPlotItem().items if isinstance(i, pg.TextItem)]
    assert any("FP32 SIMT peak 60" in t for t in texts), texts
    assert any("TF32 tensor-core peak 480" in t for t in texts), texts
    assert any("int32 peak 30" in t for t in texts), texts
    assert any("measured copy 3,000 GB/s" in t for t in texts), texts
    # Each point's "% of the roof" is against its own precision's ceiling: a TF32 point at
    # m = 256 (intensity 256/6 FLOP/B) under min(480 TFLOP/s, 4000 GB/s × intensity).
    r = tf32[0]
    expected = 100 * r.gflops / min(480_000, 4000 * r.flops / r.bytes)
    (tip,) = [t for t in view.hover._texts if "tf32_mma" in t and "<br>256 ·" in t]
    assert f"{expected:.1f}% of the roof" in tip, tip


def test_live_device_estimates_are_kept(make_window):
    from engine.measure.backends import DeviceInfo

    win = make_window()
    info = DeviceInfo(backend="cuda", index=0, name="Some GPU", peak_gflops_fp32=12_345.0, peak_gbps=678.0)
    win.charts.set_live_peaks(info)
    assert win.charts.peak_gflops.value() == 12_345 and win.charts.peak_gbps.value() == 678
    assert win.charts.options_now().peak_device == "Some GPU"


# --- 4. the bar view --------------------------------------------------------------------------

def test_compare_sorted_best_first_with_cublas_share(ladder_window):
    charts = ladder_window.charts
    charts.set_current("compare")
    bars = charts.curves("compare")
    # The largest size (8192): the 26 parameter sets that ran it.
    assert charts.compare_size.currentText() == "8192"
    # every series at 8192 but the lab best lines (their points are the winners' bars)
    assert len(bars) == sum(any(r.m == 8192 for r in s.records) for s in charts.series if not s.lab) == 26
    values = list(bars.values())
    assert values == sorted(values, reverse=True)
    plot = charts.views["compare"].getPlotItem()
    texts = [i.textItem.toPlainText() for i in plot.items if isinstance(i, pg.TextItem)]
    assert any("% of cuBLAS" in t and "TFLOP/s" in t for t in texts)
    assert not any("% of cuBLAS" in t for t in texts if t.startswith("416"))  # not on cuBLAS itself
    # Every bar is named on the axis (elided, never dropped).
    ticks = plot.getAxis("left")._tickLevels[0]
    assert len(ticks) == 26 and all(text for _, text in ticks)
    # Runtime: the fastest first.
    charts.compare_metric.setCurrentIndex(charts.compare_metric.findData("runtime"))
    times = list(charts.curves("compare").values())
    assert times == sorted(times)


def test_compare_scrolls_when_bars_do_not_fit(qtbot):
    from gui.chart_data import build_series
    from gui.chart_render import ChartOptions, render
    from gui.chart_view import ChartView

    view = ChartView("compare")
    qtbot.addWidget(view)
    view.resize(800, 300)
    view.show()
    qtbot.waitExposed(view)
    render(view, "compare", build_series(_synthetic(60)), ChartOptions())
    vb = view.getPlotItem().getViewBox()
    assert vb.wheel_scrolls
    (_, _), (y0, y1) = vb.viewRange()
    assert y1 - y0 < 40   # a window onto the 60 bars
    assert "scroll" in view.getPlotItem().titleLabel.text


# --- 5. distinct styles -----------------------------------------------------------------------

def test_thirty_labels_get_distinct_styles_and_cublas_reads_as_reference(qtbot):
    from gui.chart_data import build_series
    from gui.chart_render import ChartOptions, render
    from gui.chart_view import ChartView
    from gui.theme import SERIES_COLORS, assign_styles

    assert len(set(SERIES_COLORS)) >= 20
    styles = assign_styles(f"kernel_{i}[p={i}]" for i in range(30))
    assert len({(c.name(), rnd) for c, rnd in styles.values()}) == 30
    assert assign_styles(f"kernel_{i}[p={i}]" for i in reversed(range(30))) == styles  # stable

    recs = _synthetic(30)
    cublas = [copy.copy(r) for r in recs if r.params == {"block": 0}]
    for r in cublas:
        r.variant, r.params = "cublas_fp32", {}
    series = build_series(recs + cublas)
    view = ChartView("gflops")
    qtbot.addWidget(view)
    render(view, "gflops", series, ChartOptions())
    looks = set()
    for s in series:
        curve, _ = view.items[s.label]
        pen = curve.opts["pen"]
        looks.add((pen.color().name(), pen.style(), curve.opts["symbol"]))
        if s.reference:
            assert pen.widthF() >= 3 and pen.style() != Qt.PenStyle.SolidLine
            assert pen.color() == view.theme.foreground
        else:
            assert pen.color() != view.theme.foreground
    assert len(looks) == len(series) == 31


# --- 6. best per variant ----------------------------------------------------------------------

def test_best_per_variant_filter(ladder_window):
    from gui.chart_data import best_per_variant, build_series

    series = build_series(_ladder_records())
    best = best_per_variant(series)
    assert len(series) == 31 and len(best) == 11      # + the lab best FP32 line
    assert len({s.variant for s in best}) == 11
    pipelined = next(s for s in best if s.variant == "pipelined")
    assert pipelined.records[0].params["bm"] == 64 and pipelined.records[0].params["minb"] == 2
    # naive_uncoalesced never ran the largest size: its best at its own largest.
    naive = next(s for s in best if s.variant == "naive_uncoalesced")
    assert naive.records[0].params == {"block": 16}

    charts = ladder_window.charts
    assert len(charts.curves("gflops")) == 31
    charts.best_only.setChecked(True)
    assert len(charts.curves("gflops")) == 11
    assert len(charts.curves("compare")) == 8   # two variants never ran 8192
    assert len(charts.curves("roofline")) == 10
    assert charts.options_state()["best"] is True
    charts.best_only.setChecked(False)
    assert len(charts.curves("runtime")) == 31


def test_one_size_chart_has_a_tick_and_short_bars(qtbot, tmp_path):
    """One size: the x axis is labelled at it and the min–max bars' caps are short, not
    full-width lines (the view does not zoom onto a zero-width range)."""
    import math
    from engine.results.records import ResultRecord
    from gui.chart_data import build_series
    from gui.chart_render import ChartOptions, render
    from gui.chart_view import ChartView

    recs = [ResultRecord(backend="cpu", device="CPU", variant=v, params={}, m=1024, n=1024, k=1024,
                         dtype="float32", median_ms=ms, min_ms=ms * 0.9, max_ms=ms * 1.2,
                         flops=2 * 1024 ** 3, bytes=12 * 1024 ** 2, repeats=5, status="ok", passed=True)
            for v, ms in (("naive", 4.0), ("tiled", 2.0))]
    view = ChartView("runtime")
    qtbot.addWidget(view)
    view.resize(800, 500)
    view.show()
    render(view, "runtime", build_series(recs), ChartOptions())
    axis = view.getPlotItem().getAxis("bottom")
    ticks = axis._tickLevels[0] if axis._tickLevels else []
    assert [label for _p, label in ticks] == ["1024"]
    (x0, x1), _ = view.getPlotItem().getViewBox().viewRange()
    assert x1 - x0 >= 0.9                                  # about a decade, not a sliver
    assert x0 < math.log10(1024) < x1
    view.grab().save(str(tmp_path / "one_size.png"))
    # A second size hands the range back to the data.
    recs2 = recs + [dataclasses_replace(recs[0], m=2048, n=2048, k=2048)]
    render(view, "runtime", build_series(recs2), ChartOptions())
    assert [label for _p, label in view.getPlotItem().getAxis("bottom")._tickLevels[0]] == ["1024", "2048"]


def dataclasses_replace(rec, **kw):
    import dataclasses
    return dataclasses.replace(rec, **kw)


def test_roofline_without_peaks_spans_two_decades_and_exports_without_hints(qtbot):
    from engine.results.records import ResultRecord
    from gui.chart_data import build_series
    from gui.chart_render import ChartOptions, render
    from gui.chart_view import ChartView

    recs = [ResultRecord(backend="cpu", device="CPU", variant="naive", params={}, m=512, n=512, k=512,
                         dtype="float32", median_ms=1.0, flops=2 * 512 ** 3, bytes=12 * 512 ** 2,
                         gflops=268.0, repeats=3, status="ok", passed=True)]
    for export in (False, True):
        view = ChartView("roofline")
        qtbot.addWidget(view)
        view.resize(800, 500)
        view.show()
        render(view, "roofline", build_series(recs), ChartOptions(for_export=export))
        (x0, x1), _ = view.getPlotItem().getViewBox().viewRange()
        assert x1 - x0 >= 2.0
        title = view.getPlotItem().titleLabel.text
        assert "Device peaks unknown" in title
        assert ("above" in title) is (not export)          # an image has no controls above it


def test_a_live_redraw_builds_a_few_new_curves_at_a_time(qtbot):
    """With ``max_new_curves`` a drawing builds at most that many new curves and says more
    are pending; the next drawings finish the job, and every curve ends up drawn."""
    from engine.results.records import ResultRecord
    from gui.chart_data import build_series
    from gui.chart_render import ChartOptions, render
    from gui.chart_view import ChartView

    recs = [ResultRecord(backend="cpu", device="CPU", variant="naive", params={"block": b}, m=m,
                         n=m, k=m, dtype="float32", median_ms=0.1 * b + m / 1000, flops=2 * m ** 3,
                         bytes=12 * m * m, repeats=3, status="ok", passed=True)
            for b in (8, 16, 32, 64, 128) for m in (64, 128)]
    view = ChartView("runtime")
    qtbot.addWidget(view)
    view.resize(800, 500)
    view.show()
    series = build_series(recs)
    render(view, "runtime", [], ChartOptions())                  # the empty frame first
    built = []
    for _ in range(5):
        out = render(view, "runtime", series, ChartOptions(max_new_curves=2))
        built.append(len(out))
        if not view.pending:
            break
    assert built == [2, 4, 5] and not view.pending
    assert set(view.items) == {s.label for s in series}
    assert render(view, "runtime", series, ChartOptions()).keys() == {s.label for s in series}
