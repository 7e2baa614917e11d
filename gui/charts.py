"""Live charts (pyqtgraph): runtime, GFLOP/s and bandwidth against size, a bar view
comparing variants at one size, and a roofline.

Drawing follows the ScopeFoundry pattern: results land in the shared
:class:`gui.results_store.ResultStore` as they arrive, which only marks the charts
stale; a QTimer redraws the visible chart a few times a second.  A burst of results
therefore costs one redraw, and the event loop stays responsive during a sweep.

Each chart is drawn by a function ``render_*(view, series, options)`` that the live
tabs and the exporter share, so an exported file matches what is on screen.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel,
                               QPushButton, QStackedWidget, QTabWidget, QVBoxLayout, QWidget)

from engine.backends import DeviceInfo

from .chart_data import (METRICS, Series, build_series, describe_record, intensity, problem_size,
                         roof, shape_of, shape_text, shapes_in, speedups)
from .hover import HoverTip
from .results_store import ResultStore
from .theme import FAILED_COLOR, SOURCE_SYMBOLS, ChartTheme

pg.setConfigOptions(antialias=True)

#: Chart kinds in tab order, with tab titles.
CHARTS: dict[str, str] = {
    "runtime": "Runtime",
    "gflops": "GFLOP/s",
    "bandwidth": "Bandwidth",
    "compare": "Compare",
    "roofline": "Roofline",
}
REDRAW_MS = 150
SIZE_AXIS_LABEL = "Problem size  ∛(M·N·K)"


@dataclass(frozen=True)
class ChartOptions:
    """What a chart's drawing depends on besides the records."""

    log_axes: bool = True
    error_bars: bool = True
    compare_shape: tuple[int, int, int] | None = None   # None: the largest shown
    compare_metric: str = "gflops"                      # gflops | runtime
    peak_gflops: float | None = None
    peak_gbps: float | None = None


class ChartView(pg.PlotWidget):
    """A PlotWidget with a legend, a hover tip and palette-following colours."""

    def __init__(self, kind: str, parent=None):
        super().__init__(parent)
        self.kind = kind
        self.theme = ChartTheme.from_palette()
        plot = self.getPlotItem()
        plot.showGrid(x=True, y=True, alpha=0.18)
        self.legend = plot.addLegend(offset=(8, 8), labelTextSize="8.5pt", verSpacing=-4)
        self.hover = HoverTip(self)
        self.placeholder = pg.TextItem(anchor=(0.5, 0.5))
        self.apply_theme(self.theme)

    def apply_theme(self, theme: ChartTheme) -> None:
        self.theme = theme
        self.setBackground(theme.background)
        plot = self.getPlotItem()
        for name in ("left", "bottom", "right", "top"):
            axis = plot.getAxis(name)
            axis.setPen(pg.mkPen(theme.muted))
            axis.setTextPen(pg.mkPen(theme.foreground))
        plot.titleLabel.setAttr("color", theme.foreground.name())
        self.legend.setBrush(pg.mkBrush(theme.legend_background))
        self.legend.setPen(pg.mkPen(theme.muted))
        self.legend.setLabelTextColor(theme.foreground)
        self.hover.apply_theme(theme)
        self.placeholder.setColor(theme.muted)

    def reset(self) -> pg.PlotItem:
        """Empty the plot for a redraw, keeping the user's zoom if they zoomed."""
        plot = self.getPlotItem()
        plot.clear()
        self.legend.clear()
        self.hover.clear()
        self.hover.attach()
        plot.setTitle(None)
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            axis.setLogMode(False)
            axis.setTicks(None)  # back to automatic ticks after the bar view's labels
        plot.getAxis("left").setWidth(None)
        plot.getViewBox().invertY(False)
        return plot

    def set_labels(self, bottom: str, left: str) -> None:
        color = self.theme.foreground.name()
        plot = self.getPlotItem()
        plot.setLabel("bottom", bottom, color=color)
        plot.setLabel("left", left, color=color)

    def show_placeholder(self, text: str) -> None:
        plot = self.getPlotItem()
        self.placeholder.setText(text)
        plot.addItem(self.placeholder, ignoreBounds=True)
        (x0, x1), (y0, y1) = plot.getViewBox().viewRange()
        self.placeholder.setPos((x0 + x1) / 2, (y0 + y1) / 2)


def _log(a, on: bool) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if not on:
        return a
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a > 0, np.log10(np.where(a > 0, a, 1.0)), np.nan)


def _failed_item(x, y, theme: ChartTheme) -> pg.ScatterPlotItem:
    return pg.ScatterPlotItem(x=x, y=y, symbol="x", size=15, pen=pg.mkPen(FAILED_COLOR, width=2.5),
                              brush=pg.mkBrush(FAILED_COLOR), name="✗ verification failed")


def _symbol(s: Series) -> str:
    return SOURCE_SYMBOLS[s.source_index % len(SOURCE_SYMBOLS)]


def render_metric(view: ChartView, series: list[Series], metric_key: str,
                  opts: ChartOptions) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Draw one metric against problem size: a curve per series, min–max error bars,
    red crosses on failed points.  Returns ``{label: (sizes, values)}``."""
    metric = METRICS[metric_key]
    plot = view.reset()
    log = opts.log_axes
    plot.getAxis("bottom").setLogMode(log)
    plot.getAxis("left").setLogMode(log)
    # No ``units=``: pyqtgraph would rescale with SI prefixes (kGFLOP/s).
    view.set_labels(SIZE_AXIS_LABEL, f"{metric.title} ({metric.unit})")
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    fail_x, fail_y = [], []
    sp = speedups(r for s in series for r in s.records)
    all_x = [problem_size(r) for s in series for r in s.records]
    tx_all = _log(all_x, log) if all_x else np.array([0.0])
    span = float(np.nanmax(tx_all) - np.nanmin(tx_all)) if all_x else 0.0
    beam = 0.012 * span if span > 0 else (0.02 if log else 0.02 * max(all_x or [1.0]))
    for s in series:
        vals = np.array([metric.values(r) for r in s.records], dtype=float).reshape(-1, 3)
        x = np.array([problem_size(r) for r in s.records], dtype=float)
        y, lo, hi = vals[:, 0], vals[:, 1], vals[:, 2]
        ok = np.isfinite(y) & (y > 0)
        if not ok.any():
            continue
        x, y, lo, hi = x[ok], y[ok], lo[ok], hi[ok]
        recs = [r for r, keep in zip(s.records, ok) if keep]
        tx, ty = _log(x, log), _log(y, log)
        pen = pg.mkPen(s.color, width=2, style=s.line_style)
        plot.addItem(pg.PlotDataItem(tx, ty, pen=pen, symbol=_symbol(s), symbolSize=7,
                                     symbolBrush=pg.mkBrush(s.color), symbolPen=pg.mkPen(s.color),
                                     name=s.label))
        if opts.error_bars:
            good = np.isfinite(lo) & np.isfinite(hi) & (lo > 0)
            if good.any():
                tlo, thi = _log(lo[good], log), _log(hi[good], log)
                plot.addItem(pg.ErrorBarItem(x=tx[good], y=ty[good], top=thi - ty[good],
                                             bottom=ty[good] - tlo, beam=beam,
                                             pen=pg.mkPen(s.color, width=1)))
        view.hover.add_points(tx, ty, [describe_record(r, sp.get(id(r))) for r in recs])
        for r, px, py in zip(recs, tx, ty):
            if r.status == "failed":
                fail_x.append(px)
                fail_y.append(py)
        curves[s.label] = (x, y)
    if fail_x:
        plot.addItem(_failed_item(fail_x, fail_y, view.theme))
    if not curves:
        view.show_placeholder("No results yet — press Run, or open a results file")
    return curves


def render_compare(view: ChartView, series: list[Series], opts: ChartOptions
                   ) -> dict[str, float]:
    """Horizontal bars for one problem size, one per series, labelled with the value
    and the speed-up over naive.  Returns ``{label: value}``."""
    plot = view.reset()
    shapes = shapes_in(series)
    if not shapes:
        view.show_placeholder("No results to compare yet")
        return {}
    shape = opts.compare_shape if opts.compare_shape in shapes else shapes[-1]
    metric = METRICS["runtime" if opts.compare_metric == "runtime" else "gflops"]
    rows = []
    for s in series:
        recs = [r for r in s.records if shape_of(r) == shape]
        if recs:
            rec = recs[-1]
            val = metric.values(rec)[0]
            if math.isfinite(val):
                rows.append((s, rec, val))
    sp = speedups(r for s in series for r in s.records)
    plot.getViewBox().invertY(True)  # first series at the top, like the legend
    view.set_labels(f"{metric.title} ({metric.unit})", "")
    plot.setTitle(f"Problem size {shape_text(shape)}", color=view.theme.foreground.name(), size="10pt")
    if not rows:
        view.show_placeholder("No timed results at this size")
        return {}
    values = np.array([v for _, _, v in rows])
    ys = np.arange(len(rows), dtype=float)
    brushes = [pg.mkBrush(s.color) for s, _, _ in rows]
    pens = [pg.mkPen(FAILED_COLOR, width=2.5) if r.status == "failed" else pg.mkPen(s.color.darker(130))
            for s, r, _ in rows]
    plot.addItem(pg.BarGraphItem(x0=np.zeros(len(rows)), y=ys, height=0.66, width=values,
                                 brushes=brushes, pens=pens))
    vmax = float(values.max()) if len(values) else 1.0
    out: dict[str, float] = {}
    for (s, rec, val), y in zip(rows, ys):
        speed = sp.get(id(rec))
        text = f"{val:,.4g} {metric.unit}"
        if speed is not None and math.isfinite(speed) and rec.variant != "naive":
            text += f"   ×{speed:.2f} vs naive"
        if rec.status == "failed":
            text += "   ✗ failed verification"
        label = pg.TextItem(text, anchor=(0, 0.5),
                            color=FAILED_COLOR if rec.status == "failed" else view.theme.foreground)
        label.setPos(val + vmax * 0.01, y)
        plot.addItem(label)
        view.hover.add_box(0.0, val, y - 0.33, y + 0.33, describe_record(rec, speed))
        out[s.label] = val
    axis = plot.getAxis("left")
    axis.setTicks([[(float(y), s.label) for (s, _, _), y in zip(rows, ys)], []])
    fm = QFontMetrics(view.font())
    axis.setWidth(min(420, max(fm.horizontalAdvance(s.label) for s, _, _ in rows) + 16))
    plot.getViewBox().setRange(xRange=(0, vmax * 1.45), yRange=(-0.6, len(rows) - 0.4), padding=0)
    return out


def render_roofline(view: ChartView, series: list[Series], opts: ChartOptions
                    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each result a point (arithmetic intensity, GFLOP/s) under the device's FP32 and
    bandwidth ceilings.  Returns ``{label: (intensity, gflops)}``."""
    plot = view.reset()
    plot.getAxis("bottom").setLogMode(True)
    plot.getAxis("left").setLogMode(True)
    view.set_labels("Arithmetic intensity (FLOP / byte of compulsory traffic)", "Throughput (GFLOP/s)")
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    all_ai, all_g = [], []
    fail_x, fail_y = [], []
    sp = speedups(r for s in series for r in s.records)
    for s in series:
        pts = [(intensity(r), METRICS["gflops"].values(r)[0], r) for r in s.records]
        pts = [(a, g, r) for a, g, r in pts if math.isfinite(a) and a > 0 and math.isfinite(g) and g > 0]
        if not pts:
            continue
        ai = np.array([p[0] for p in pts])
        g = np.array([p[1] for p in pts])
        tx, ty = np.log10(ai), np.log10(g)
        plot.addItem(pg.ScatterPlotItem(x=tx, y=ty, symbol=_symbol(s), size=9,
                                        brush=pg.mkBrush(s.color), pen=pg.mkPen(s.color.darker(140)),
                                        name=s.label))
        texts = []
        for a, gf, r in pts:
            t = describe_record(r, sp.get(id(r))) + f"<br>intensity {a:.3g} FLOP/B"
            ceiling = float(roof(np.array([a]), opts.peak_gflops, opts.peak_gbps)[0])
            if math.isfinite(ceiling):
                t += f" · {100 * gf / ceiling:.1f}% of the roof"
            texts.append(t)
            if r.status == "failed":
                fail_x.append(math.log10(a))
                fail_y.append(math.log10(gf))
        view.hover.add_points(tx, ty, texts)
        all_ai.extend(ai)
        all_g.extend(g)
        out[s.label] = (ai, g)
    if fail_x:
        plot.addItem(_failed_item(fail_x, fail_y, view.theme))
    lo = min(all_ai) / 4 if all_ai else 0.1
    hi = max(all_ai) * 4 if all_ai else 1000.0
    if opts.peak_gflops and opts.peak_gbps:
        ridge = opts.peak_gflops / opts.peak_gbps
        lo, hi = min(lo, ridge / 4), max(hi, ridge * 4)
    _draw_ceilings(view, plot, lo, hi, opts)
    if not out:
        view.show_placeholder("No results yet" if (opts.peak_gflops or opts.peak_gbps)
                              else "No results yet; device peaks unknown (enter them above)")
    elif not (opts.peak_gflops or opts.peak_gbps):
        note = pg.TextItem("Device peaks unknown: enter peak GFLOP/s and GB/s above to draw the roof",
                           color=view.theme.muted, anchor=(0, 0))
        plot.addItem(note, ignoreBounds=True)
        note.setPos(math.log10(lo), math.log10(max(all_g) * 2))
    return out


def _draw_ceilings(view: ChartView, plot: pg.PlotItem, lo: float, hi: float, opts: ChartOptions) -> None:
    if not (opts.peak_gflops or opts.peak_gbps):
        return
    ai = np.logspace(math.log10(lo), math.log10(hi), 200)
    g = roof(ai, opts.peak_gflops, opts.peak_gbps)
    pen = pg.mkPen(view.theme.ceiling, width=2.5)
    plot.addItem(pg.PlotCurveItem(np.log10(ai), np.log10(g), pen=pen))
    if opts.peak_gflops:
        t = pg.TextItem(f"FP32 peak {opts.peak_gflops:,.0f} GFLOP/s", color=view.theme.ceiling,
                        anchor=(1, 1))
        t.setPos(math.log10(hi), math.log10(opts.peak_gflops))
        plot.addItem(t)
    if opts.peak_gbps:
        x0 = lo * 1.5
        t = pg.TextItem(f"bandwidth {opts.peak_gbps:,.0f} GB/s", color=view.theme.ceiling, anchor=(0, 1),
                        angle=0)
        t.setPos(math.log10(x0), math.log10(float(roof(np.array([x0]), opts.peak_gflops,
                                                            opts.peak_gbps)[0])))
        plot.addItem(t)


def render(view: ChartView, kind: str, series: list[Series], opts: ChartOptions):
    """Draw chart ``kind`` (a key of :data:`CHARTS`) into ``view``."""
    if kind in METRICS:
        return render_metric(view, series, kind, opts)
    if kind == "compare":
        return render_compare(view, series, opts)
    if kind == "roofline":
        return render_roofline(view, series, opts)
    raise KeyError(f"unknown chart '{kind}'")


class ChartsPanel(QWidget):
    """The chart tabs, their options, and a timer that redraws what went stale.

    Signals
    -------
    export_requested()
        The Export button was pressed (the window shows the export dialog).
    """

    export_requested = Signal()

    def __init__(self, store: ResultStore, parent=None):
        super().__init__(parent)
        self.store = store
        self.series: list[Series] = []
        self._series_stale = True
        self._stale: set[str] = set(CHARTS)
        self.last: dict[str, object] = {}
        self._build()
        store.changed.connect(self.mark_stale)
        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_MS)
        self._timer.timeout.connect(self._tick)
        self._timer.start()

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.views: dict[str, ChartView] = {}
        for kind, title in CHARTS.items():
            view = ChartView(kind)
            self.views[kind] = view
            self.tabs.addTab(view, title)
        self.log_axes = QCheckBox("Log axes")
        self.log_axes.setChecked(True)
        self.error_bars = QCheckBox("Min–max bars")
        self.error_bars.setChecked(True)
        self.error_bars.setToolTip("Error bars from the fastest to the slowest timed launch")

        self.compare_size = QComboBox()
        self.compare_size.setMinimumContentsLength(10)
        self.compare_metric = QComboBox()
        self.compare_metric.addItem("GFLOP/s", "gflops")
        self.compare_metric.addItem("Runtime (ms)", "runtime")
        compare_opts = QWidget()
        cl = QHBoxLayout(compare_opts)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(QLabel("Size"))
        cl.addWidget(self.compare_size)
        cl.addWidget(self.compare_metric)

        self.peak_gflops = self._peak_spin(" GFLOP/s", "FP32 peak of the device (0: unknown)")
        self.peak_gbps = self._peak_spin(" GB/s", "Memory bandwidth of the device (0: unknown)")
        roof_opts = QWidget()
        rl = QHBoxLayout(roof_opts)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(QLabel("Peak"))
        rl.addWidget(self.peak_gflops)
        rl.addWidget(QLabel("Bandwidth"))
        rl.addWidget(self.peak_gbps)

        self.axis_opts = QWidget()
        al = QHBoxLayout(self.axis_opts)
        al.setContentsMargins(0, 0, 0, 0)
        al.addWidget(self.log_axes)
        al.addWidget(self.error_bars)
        self.options = QStackedWidget()
        self.options.addWidget(self.axis_opts)
        self.options.addWidget(compare_opts)
        self.options.addWidget(roof_opts)
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Save this chart (or all) as PNG or SVG at a chosen size")
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 0, 4, 0)
        bar.addWidget(self.options)
        bar.addStretch(1)
        bar.addWidget(self.export_button)
        self.tabs.setCornerWidget(self._corner(bar), Qt.Corner.TopRightCorner)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)

        self.tabs.currentChanged.connect(self._tab_changed)
        for sig in (self.log_axes.toggled, self.error_bars.toggled,
                    self.compare_size.currentIndexChanged, self.compare_metric.currentIndexChanged,
                    self.peak_gflops.valueChanged, self.peak_gbps.valueChanged):
            sig.connect(self._options_changed)
        self.export_button.clicked.connect(self.export_requested)
        self._tab_changed(0)

    @staticmethod
    def _corner(layout) -> QWidget:
        w = QWidget()
        w.setLayout(layout)
        return w

    @staticmethod
    def _peak_spin(suffix: str, tip: str) -> QDoubleSpinBox:
        spin = QDoubleSpinBox()
        spin.setRange(0, 1e7)
        spin.setDecimals(0)
        spin.setSingleStep(100)
        spin.setSuffix(suffix)
        spin.setSpecialValueText("unknown")
        spin.setToolTip(tip)
        spin.setKeyboardTracking(False)
        return spin

    # --- state -------------------------------------------------------------------------

    @property
    def current_kind(self) -> str:
        return list(CHARTS)[self.tabs.currentIndex()]

    def set_current(self, kind: str) -> None:
        self.tabs.setCurrentIndex(list(CHARTS).index(kind))

    def options_now(self) -> ChartOptions:
        shape = self.compare_size.currentData()
        return ChartOptions(
            log_axes=self.log_axes.isChecked(),
            error_bars=self.error_bars.isChecked(),
            compare_shape=tuple(shape) if shape else None,
            compare_metric=self.compare_metric.currentData() or "gflops",
            peak_gflops=self.peak_gflops.value() or None,
            peak_gbps=self.peak_gbps.value() or None,
        )

    def set_device(self, info: DeviceInfo | None) -> None:
        """Take the roofline's ceilings from the device's estimates (0 when unknown)."""
        self.peak_gflops.setValue(info.peak_gflops_fp32 or 0 if info else 0)
        self.peak_gbps.setValue(info.peak_gbps or 0 if info else 0)

    # --- redrawing -----------------------------------------------------------------------

    def mark_stale(self) -> None:
        self._series_stale = True
        self._stale = set(CHARTS)

    def _options_changed(self, *_) -> None:
        self._stale = set(CHARTS)
        self._draw(self.current_kind)

    def _tab_changed(self, index: int) -> None:
        kind = list(CHARTS)[index]
        self.options.setCurrentIndex({"compare": 1, "roofline": 2}.get(kind, 0))
        if kind in self._stale:
            self._draw(kind)

    def _tick(self) -> None:
        if self.current_kind in self._stale and self.isVisible():
            self._draw(self.current_kind)

    def _refresh_series(self) -> None:
        if not self._series_stale:
            return
        self.series = build_series(self.store.records)
        self._series_stale = False
        # Keep the chosen comparison size while it still exists; default to the largest.
        shapes = shapes_in(self.series)
        chosen = self.compare_size.currentData()
        self.compare_size.blockSignals(True)
        self.compare_size.clear()
        for sh in shapes:
            self.compare_size.addItem(shape_text(sh), list(sh))
        idx = self.compare_size.findData(chosen) if chosen else -1
        self.compare_size.setCurrentIndex(idx if idx >= 0 else self.compare_size.count() - 1)
        self.compare_size.blockSignals(False)

    def _draw(self, kind: str) -> None:
        self._refresh_series()
        self.last[kind] = render(self.views[kind], kind, self.series, self.options_now())
        self._stale.discard(kind)

    def redraw(self, kind: str | None = None) -> None:
        """Draw now: one chart, or every chart (tests, exports, screenshots)."""
        for k in ([kind] if kind else list(CHARTS)):
            self._draw(k)

    def curves(self, kind: str):
        """What the last drawing of ``kind`` showed (drawing it first if stale)."""
        if kind in self._stale or kind not in self.last:
            self._draw(kind)
        return self.last[kind]

    def retheme(self) -> None:
        theme = ChartTheme.from_palette(self.palette())
        for view in self.views.values():
            view.apply_theme(theme)
        self._stale = set(CHARTS)
        self._draw(self.current_kind)

    def changeEvent(self, event):  # noqa: N802 (Qt API)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.retheme()
        super().changeEvent(event)

    def options_state(self) -> dict:
        return {"log": self.log_axes.isChecked(), "error_bars": self.error_bars.isChecked(),
                "tab": self.current_kind, "metric": self.compare_metric.currentData()}

    def set_options_state(self, state: dict) -> None:
        if not isinstance(state, dict):
            return
        self.log_axes.setChecked(bool(state.get("log", True)))
        self.error_bars.setChecked(bool(state.get("error_bars", True)))
        i = self.compare_metric.findData(state.get("metric"))
        if i >= 0:
            self.compare_metric.setCurrentIndex(i)
        if state.get("tab") in CHARTS:
            self.set_current(state["tab"])

