"""GUI: a record's conditions (issue 37 §1) — the Throttled, SM MHz, W and GFLOP/s/W
columns, the ▲ marker of throttled points on the size charts, the GFLOP/s/W chart, and
the Run info of an opened file in the device panel."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import math  # noqa: E402

import pyqtgraph as pg  # noqa: E402

from engine.results import records  # noqa: E402
from engine.results.records import ResultRecord  # noqa: E402
from gui.chart_data import METRICS  # noqa: E402
from gui.results_table import COLUMNS  # noqa: E402


def rec(variant, n, ms, gpw, throttled=False) -> ResultRecord:
    return ResultRecord(backend="cuda", device="NVIDIA H200", variant=variant, params={},
                        m=n, n=n, k=n, dtype="float32", median_ms=ms, min_ms=ms, max_ms=ms,
                        repeats=20, passed=True, flops=2 * n**3, sm_clock_median_mhz=1700.0,
                        sm_clock_min_mhz=1600.0, power_w=450.0, gflops_per_watt=gpw,
                        throttle=["sw_power_cap"] if throttled else [], throttled=throttled)


RECS = [rec("cublas_tf32", 4096, 0.4, 457.0, throttled=True), rec("cublas_tf32", 8192, 3.0, 523.0),
        rec("cublas_fp32", 4096, 2.7, 81.0), rec("cublas_fp32", 8192, 21.4, math.nan)]


def cells(win, title):
    model = win.table.model_
    col = [c.title for c in COLUMNS].index(title)
    return [model.data(model.index(r, col)) for r in range(model.rowCount())]


def test_columns_chart_marker_and_run_info(make_window, tmp_path):
    path = records.save(RECS, tmp_path / "h200.json")
    win = make_window()
    assert win.open_results(path) if hasattr(win, "open_results") else win.results_flow.open(path)
    assert cells(win, "Throttled") == ["▲ sw_power_cap", "", "", ""]
    assert cells(win, "GFLOP/s/W") == ["457", "523", "81", ""]
    assert cells(win, "SM MHz")[0] == "1700" and cells(win, "W")[0] == "450"
    # the energy chart: one curve per kernel, NaN left out
    assert METRICS["efficiency"].values(RECS[0])[0] == 457.0
    win.charts.set_current("efficiency")
    drawn = win.charts.curves("efficiency")
    assert {k: list(v[1]) for k, v in drawn.items()} == {"cublas_tf32": [457.0, 523.0],
                                                         "cublas_fp32": [81.0]}
    # the throttled point carries the ▲ marker on the size charts
    win.charts.set_current("gflops")
    win.charts.curves("gflops")
    plot = win.charts.views["gflops"].getPlotItem()
    marks = [i for i in plot.items if isinstance(i, pg.ScatterPlotItem)
             and i.name() == "▲ timed under a power/thermal cap"]
    assert len(marks) == 1 and len(marks[0].data) == 1
    # Run info: the file's environment block in the device panel
    panel = win.devices
    assert "h200.json" in panel.run_infos
    panel.show_run_info("h200.json")
    rows = {panel.table.item(r, 0).text(): panel.table.item(r, 1).text()
            for r in range(panel.table.rowCount())}
    assert rows["Host"] and rows["Stop rule"] == "20"
    assert panel.title.text() == "Run info: h200.json"


def test_an_old_file_says_it_has_no_run_info(make_window, tmp_path):
    import json
    path = tmp_path / "old.json"
    path.write_text(json.dumps([records.to_dict(r) for r in RECS]))
    win = make_window()
    win.results_flow.open(path)
    win.devices.show_run_info("old.json")
    assert "has none" in win.devices.table.item(0, 1).text()
    assert cells(win, "GFLOP/s/W")[0] == "457"


def test_no_energy_figures_say_how_to_get_them(make_window, tmp_path):
    plain = [ResultRecord(backend="opencl", device="pocl", variant="naive", params={}, m=64, n=64,
                          k=64, dtype="float32", median_ms=1.0, repeats=3, flops=2 * 64**3)]
    win = make_window()
    win.results_flow.open(records.save(plain, tmp_path / "cpu.csv"))
    win.charts.set_current("efficiency")
    assert win.charts.curves("efficiency") == {}
    assert "nvidia-ml-py" in win.charts.views["efficiency"].placeholder.textItem.toPlainText()
