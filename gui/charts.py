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
                               QPushButton, QTabWidget, QVBoxLayout, QWidget)

from engine.backends import DeviceInfo

from .chart_data import (METRICS, Series, build_series, describe_record, intensity, problem_size,
                         rate_text, roof, shape_of, shape_text, shapes_in, speedups)
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
REDRAW_MS = 200
SIZE_AXIS_LABEL = "Problem size  ∛(M·N·K)"
MAX_SIZE_TICKS = 14


@dataclass(frozen=True)
class ChartOptions:
    """What a chart's drawing depends on besides the records."""

    log_axes: bool = True
    error_bars: bool = True
    compare_shape: tuple[int, int, int] | None = None   # None: the largest shown
    compare_metric: str = "gflops"                      # gflops | runtime
    peak_gflops: float | None = None
    peak_gbps: float | None = None


def plain_number(x: float) -> str:
    """``0.05``, ``20``, ``4096``, ``1.2e+06``: what a reader expects on an axis."""
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e6:
        return f"{x:.4g}"
    return f"{x:.2g}"


class PlainLogAxis(pg.AxisItem):
    """An axis whose log-mode labels read ``20`` and ``0.5`` rather than ``2·10¹``."""

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph API)
        out = []
        for v in values:
            x = 10 ** float(v) * scale
            mantissa = x / 10 ** math.floor(math.log10(x)) if x > 0 else 0
            # Label 1-2-5 steps only; the other minor ticks stay as unlabelled lines.
            out.append(plain_number(x) if any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5)) else "")
        return out


class ChartView(pg.PlotWidget):
    """A PlotWidget with a legend, a hover tip and palette-following colours."""

    def __init__(self, kind: str, parent=None):
        super().__init__(parent, axisItems={"bottom": PlainLogAxis("bottom"),
                                            "left": PlainLogAxis("left")})
        self.kind = kind
        self.theme = ChartTheme.from_palette()
        plot = self.getPlotItem()
        plot.showGrid(x=True, y=True, alpha=0.18)
        self.legend = plot.addLegend(offset=(8, 8), labelTextSize="8.5pt", verSpacing=-4)
        self.hover = HoverTip(self)
        self.placeholder = pg.TextItem(anchor=(0.5, 0.5))
        #: Items of the current drawing by series label, and what they were drawn for:
        #: a render with the same signature only updates their data.
        self.items: dict[str, tuple] = {}
        self.signature: tuple | None = None
        self.apply_theme(self.theme)

    def apply_theme(self, theme: ChartTheme) -> None:
        self.theme = theme
        self.signature = None  # items carry the old colours: rebuild on the next render
        self.setBackground(theme.background)
        plot = self.getPlotItem()
        for name in ("left", "bottom", "right", "top"):
            axis = plot.getAxis(name)
            axis.enableAutoSIPrefix(False)  # "GB/s (x0.001)" reads worse than 0.0004
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
        self.items.clear()
        self.signature = None
        self.legend.clear()
        self.legend.show()
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

    def place_legend(self, xs, ys, extent_y=None) -> None:
        """Put the legend in the corner of the view that hides the fewest points.

        ``xs``/``ys`` are the points, in view coordinates; ``extent_y`` anything else
        that stretches the y range (error bars).  While the view auto-ranges (the user
        has not zoomed) its range is computed from these, since pyqtgraph only
        updates the range when it next paints.
        """
        xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        ok = np.isfinite(xs) & np.isfinite(ys)
        xs, ys = xs[ok], ys[ok]
        ext = np.concatenate([ys, np.asarray(extent_y if extent_y is not None else [], dtype=float)])
        ext = ext[np.isfinite(ext)]
        vb = self.getPlotItem().getViewBox()
        (x0, x1), (y0, y1) = vb.viewRange()
        auto_x, auto_y = vb.autoRangeEnabled()
        if xs.size:
            if auto_x:
                x0, x1 = xs.min(), xs.max()
                x0, x1 = x0 - 0.05 * (x1 - x0), x1 + 0.05 * (x1 - x0)
            if auto_y:
                y0, y1 = ext.min(), ext.max()
                y0, y1 = y0 - 0.05 * (y1 - y0), y1 + 0.05 * (y1 - y0)
        best = (0.0, 0.0)
        if xs.size and x1 > x0 and y1 > y0 and vb.width() > 0 and vb.height() > 0:
            rect = self.legend.boundingRect()
            w = (rect.width() + 16) / vb.width()
            h = (rect.height() + 16) / vb.height()
            fx = (xs - x0) / (x1 - x0)
            fy = (y1 - ys) / (y1 - y0)  # 0 at the top
            if vb.yInverted():
                fy = 1 - fy
            counts = {}
            for cx, cy in ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)):
                in_x = fx <= w if cx == 0 else fx >= 1 - w
                in_y = fy <= h if cy == 0 else fy >= 1 - h
                counts[(cx, cy)] = int(np.count_nonzero(in_x & in_y))
            best = min(counts, key=lambda c: (counts[c], c[1], c[0]))  # ties: top, then left
        cx, cy = best
        self.legend.anchor(itemPos=(cx, cy), parentPos=(cx, cy),
                           offset=(8 if cx == 0 else -8, 8 if cy == 0 else -8))

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


@dataclass
class _Curve:
    """One size-chart series prepared for drawing (view coordinates and hover texts)."""

    series: Series
    x: np.ndarray            # problem sizes (data units)
    y: np.ndarray            # metric values (data units)
    tx: np.ndarray           # view coordinates (log10 when the axes are logarithmic)
    ty: np.ndarray
    err: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None   # x, y, top, bottom
    texts: list[str]
    failed: list[tuple[float, float]]


def _prepare_curves(series: list[Series], metric_key: str, opts: ChartOptions) -> list[_Curve]:
    metric = METRICS[metric_key]
    log = opts.log_axes
    sp = speedups(r for s in series for r in s.records)
    out = []
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
        err = None
        good = np.isfinite(lo) & np.isfinite(hi) & (lo > 0)
        if opts.error_bars and good.any():
            tlo, thi = _log(lo[good], log), _log(hi[good], log)
            err = (tx[good], ty[good], thi - ty[good], ty[good] - tlo)
        failed = [(float(px), float(py)) for r, px, py in zip(recs, tx, ty) if r.status == "failed"]
        out.append(_Curve(s, x, y, tx, ty, err,
                          [describe_record(r, sp.get(id(r))) for r in recs], failed))
    return out


def render_metric(view: ChartView, series: list[Series], metric_key: str,
                  opts: ChartOptions) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Draw one metric against problem size: a curve per series, min–max error bars,
    red crosses on failed points.  Returns ``{label: (sizes, values)}``.

    While the set of curves stays the same (a sweep adding points), the existing
    items only get new data, which keeps a redraw to a few milliseconds.
    """
    metric = METRICS[metric_key]
    log = opts.log_axes
    curves = _prepare_curves(series, metric_key, opts)
    failed = [p for c in curves for p in c.failed]
    all_tx = np.concatenate([c.tx for c in curves]) if curves else np.empty(0)
    span = float(all_tx.max() - all_tx.min()) if all_tx.size else 0.0
    beam = 0.012 * span if span > 0 else 0.02 * (1.0 if log else max(1.0, float(all_tx.max(initial=1.0))))
    signature = ("metric", metric_key, log, opts.error_bars, bool(failed), id(view.theme),
                 tuple((c.series.label, c.err is not None) for c in curves))
    if view.signature != signature:
        plot = view.reset()
        plot.getAxis("bottom").setLogMode(log)
        plot.getAxis("left").setLogMode(log)
        # No ``units=``: pyqtgraph would rescale with SI prefixes (kGFLOP/s).
        view.set_labels(SIZE_AXIS_LABEL, f"{metric.title} ({metric.unit})")
        for c in curves:
            s = c.series
            curve = pg.PlotDataItem(pen=pg.mkPen(s.color, width=2, style=s.line_style),
                                    symbol=_symbol(s), symbolSize=7, symbolBrush=pg.mkBrush(s.color),
                                    symbolPen=pg.mkPen(s.color), name=s.label)
            plot.addItem(curve)
            bars = None
            if c.err is not None:
                bars = pg.ErrorBarItem(pen=pg.mkPen(s.color, width=1))
                plot.addItem(bars)
            view.items[s.label] = (curve, bars)
        if failed:
            view.items["__failed__"] = (_failed_item([], [], view.theme), None)
            plot.addItem(view.items["__failed__"][0])
        if not curves:
            view.legend.hide()
            # A plausible empty frame: 10…5000 in size, 0.01…100 in value (log).
            plot.getViewBox().setRange(xRange=(1, 3.7) if log else (0, 4096),
                                       yRange=(-2, 2) if log else (0, 100), padding=0)
            view.show_placeholder("No results yet — press Run, or open a results file")
        view.signature = signature
    plot = view.getPlotItem()
    view.hover.clear()
    for c in curves:
        curve, bars = view.items[c.series.label]
        curve.setData(c.tx, c.ty)
        if bars is not None and c.err is not None:
            ex, ey, top, bottom = c.err
            bars.setData(x=ex, y=ey, top=top, bottom=bottom, beam=beam)
        view.hover.add_points(c.tx, c.ty, c.texts)
    if failed:
        view.items["__failed__"][0].setData([p[0] for p in failed], [p[1] for p in failed])
    sizes = sorted({round(float(v), 6) for c in curves for v in c.x})
    axis = plot.getAxis("bottom")
    if 1 < len(sizes) <= MAX_SIZE_TICKS:
        # Ticks at the measured sizes (32, 64, 128, ...) say more than decades do; a
        # size too close to the previous labelled one keeps its line but no label.
        pos = [float(_log([v], log)[0]) for v in sizes]
        span = (pos[-1] - pos[0]) or 1.0
        ticks, last = [], -math.inf
        for p, v in zip(pos, sizes):
            label = plain_number(round(v, 1)) if (p - last) / span >= 0.06 else ""
            if label:
                last = p
            ticks.append((p, label))
        axis.setTicks([ticks, []])
    else:
        axis.setTicks(None)
    if curves:
        bars = [np.concatenate([c.err[1] + c.err[2], c.err[1] - c.err[3]]) for c in curves if c.err]
        view.place_legend(np.concatenate([c.tx for c in curves]), np.concatenate([c.ty for c in curves]),
                          np.concatenate(bars) if bars else None)
    return {c.series.label: (c.x, c.y) for c in curves}


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
    plot.getViewBox().invertY(True)  # first series at the top, in legend order
    view.legend.hide()  # the axis names the bars
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
        text = f"{format(val, '.4g') if metric.key == 'runtime' else rate_text(val)} {metric.unit}"
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
    if out:
        view.place_legend(np.log10(all_ai), np.log10(all_g))
    if not out:
        view.legend.hide()
        view.show_placeholder("No results yet" if (opts.peak_gflops or opts.peak_gbps)
                              else "No results yet; device peaks unknown (enter them above)")
    elif not (opts.peak_gflops or opts.peak_gbps):
        plot.setTitle("Device peaks unknown: enter the peak GFLOP/s and GB/s above to draw the roof",
                      color=view.theme.muted.name(), size="9pt")
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
        self._compare_choice: list[int] | None = None   # a size picked by the user
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
        roof_label = QLabel("Roof")
        roof_label.setToolTip("The device's FP32 peak and memory bandwidth (estimates from the "
                              "device, or your own figures)")
        rl.addWidget(roof_label)
        rl.addWidget(self.peak_gflops)
        rl.addWidget(self.peak_gbps)

        self.axis_opts = QWidget()
        al = QHBoxLayout(self.axis_opts)
        al.setContentsMargins(0, 0, 0, 0)
        al.addWidget(self.log_axes)
        al.addWidget(self.error_bars)
        # Shown one at a time; plain show/hide (not a QStackedWidget) so that the corner
        # only takes the width of the options on display and leaves room for the tabs.
        self.option_pages = [self.axis_opts, compare_opts, roof_opts]
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Save this chart (or all) as PNG or SVG at a chosen size")
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 0, 4, 0)
        for page in self.option_pages:
            bar.addWidget(page)
        bar.addSpacing(12)
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
        self.compare_size.activated.connect(self._compare_picked)  # user action only
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
        spin.setFixedWidth(spin.fontMetrics().horizontalAdvance("9,999,999" + suffix) + 28)
        spin.setRange(0, 1e7)
        spin.setDecimals(0)
        spin.setGroupSeparatorShown(True)
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

    def _compare_picked(self, index: int) -> None:
        self._compare_choice = self.compare_size.itemData(index)

    def _options_changed(self, *_) -> None:
        self._stale = set(CHARTS)
        self._draw(self.current_kind)

    def _tab_changed(self, index: int) -> None:
        kind = list(CHARTS)[index]
        shown = {"compare": 1, "roofline": 2}.get(kind, 0)
        for i, page in enumerate(self.option_pages):
            page.setVisible(i == shown)
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
        # Keep a size the user picked while it still exists; otherwise follow the
        # largest size shown (which grows during a sweep).
        shapes = shapes_in(self.series)
        chosen = self._compare_choice
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

