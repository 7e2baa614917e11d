"""Drawing each chart from the series: one function per chart kind.

The live tabs and the exporter call the same ``render`` function, so an exported
file shows exactly what the tab shows.  The size charts update their items in place
while the set of curves stays the same (a sweep adding points), which keeps a redraw
to a few milliseconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics

from engine.measure import peaks
from engine.results.derived import record_precision
from engine.results.records import RecordStatus

from .chart_data import (METRICS, Series, describe_record, intensity, peaks_by_model, pick_unit,
                         problem_size, roof, shape_of, shape_text, shapes_in, speedups,
                         value_text)
from .chart_view import ChartView, LegendEntry, plain_number
from .theme import FAILED_COLOR, REFERENCE_STYLES, SOURCE_SYMBOLS, VERDICT_COLORS, ChartTheme

#: Each arithmetic's ceiling as the roofline names it: the engine's peak labels as
#: adjectives ("TF32 tensor-core peak").
PRECISION_LABELS = {p: label.replace("tensor core", "tensor-core")
                    for p, label in peaks.LABELS.items()}
SIZE_AXIS_LABEL = "Problem size  ∛(M·N·K)"
MAX_SIZE_TICKS = 14


@dataclass(frozen=True)
class ChartOptions:
    """What a chart's drawing depends on besides the records."""

    log_axes: bool = True
    error_bars: bool = True
    compare_shape: tuple[int, int, int] | None = None   # None: the largest shown
    compare_metric: str = "gflops"                      # gflops | runtime
    peak_gflops: float | None = None                    # the FP32 roof of peak_device
    peak_gbps: float | None = None
    peak_device: str | None = None                      # None: the first device shown
    #: (device model, or a device_key(), GFLOP/s) worked out from the records' % of peak
    derived_peaks: tuple[tuple[str | tuple, float], ...] = ()
    #: (device model, ceiling, value): the TF32 and int32 peaks (GFLOP/s) and the measured
    #: copy bandwidth (``copy``, GB/s) the records carry (chart_data.record_ceilings)
    ceilings: tuple[tuple[str, str, float], ...] = ()
    hidden: frozenset[str] = frozenset()                # series labels hidden by the user
    #: Drawn for a file (export): no hints that point at the window's controls.
    for_export: bool = False
    #: At most this many new curves per drawing (None: all): a live chart spreads the
    #: building of many new curves over several redraws, so none of them is long.
    max_new_curves: int | None = None
    #: A comparison with a results file (gui.compare_flow): (id(record), verdict, NEW/BASE)
    #: per paired record, and the file's name; the compare chart colours its bars by verdict.
    verdicts: tuple[tuple[int, str, float], ...] = ()
    verdict_base: str = ""


def _log(a, on: bool) -> np.ndarray:
    a = np.asarray(a, dtype=float)
    if not on:
        return a
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a > 0, np.log10(np.where(a > 0, a, 1.0)), np.nan)


def _failed_item(x, y, theme: ChartTheme) -> pg.ScatterPlotItem:
    return pg.ScatterPlotItem(x=x, y=y, symbol="x", size=15, pen=pg.mkPen(FAILED_COLOR, width=2.5),
                              brush=pg.mkBrush(FAILED_COLOR), name="✗ verification failed")


#: The marker of a point timed under a power or thermal cap (ResultRecord.throttled).
THROTTLED_COLOR = "#f39c12"


def _throttled_item(x, y) -> pg.ScatterPlotItem:
    return pg.ScatterPlotItem(x=x, y=y, symbol="t1", size=13, pen=pg.mkPen(THROTTLED_COLOR, width=2),
                              brush=pg.mkBrush(None), name="▲ timed under a power/thermal cap")


def _symbol(s: Series) -> str:
    if s.reference:
        return ("s", "d", "star")[s.style_round % 3] if s.style_round else "s"
    return SOURCE_SYMBOLS[(s.source_index + s.style_round) % len(SOURCE_SYMBOLS)]


def _reference_symbols(series: list[Series]) -> dict[str, str]:
    """cuBLAS series share one colour; their markers tell them apart."""
    refs = [s for s in series if s.reference]
    return {s.label: ("s", "d", "star", "t")[i % 4] for i, s in enumerate(refs)}


def _pen(s: Series, theme: ChartTheme, width: float = 2.0):
    if s.lab:   # a broad translucent band behind the winning kernels' own curves
        return pg.mkPen(_with_alpha(theme.ceiling, 90), width=width + 7.0)
    if s.reference:
        return pg.mkPen(theme.foreground, width=width + 1.0,
                        style=REFERENCE_STYLES[s.source_index % len(REFERENCE_STYLES)])
    return pg.mkPen(s.color, width=width, style=s.line_style)


def _color(s: Series, theme: ChartTheme):
    return theme.foreground if s.reference else s.color


def _style_curve(curve, s: Series, ref_symbols: dict[str, str], theme: ChartTheme) -> None:
    """Pen, marker and fill of a series' curve (again when a new curve shifts the styles;
    a curve whose style is unchanged is left alone)."""
    color = _color(s, theme)
    style = (s.reference, s.source_index, s.style_round, str(s.line_style), color.name()
             if hasattr(color, "name") else str(color), ref_symbols.get(s.label))
    if getattr(curve, "_lab_style", None) == style:
        return
    curve._lab_style = style
    curve.setPen(_pen(s, theme))
    if s.lab:
        curve.setSymbol(None)
        curve.setZValue(-2)
        return
    curve.setSymbol(ref_symbols.get(s.label) or _symbol(s))
    curve.setSymbolSize(8 if s.reference else 7)
    curve.setSymbolBrush(pg.mkBrush(theme.background if s.reference else color))
    curve.setSymbolPen(pg.mkPen(color, width=1.5 if s.reference else 1))
    curve.setZValue(5 if s.reference else 0)


def _curve_items(plot, c, ref_symbols: dict[str, str], theme: ChartTheme) -> tuple:
    """A series' curve (and its min–max bars when it has them), added to ``plot``."""
    # No dynamic range limit: with it, every change of the view's range (each new result
    # rescales the axes) makes every curve rebuild its markers in Python while painting.
    # Our values are run times and rates, never near the float limits it guards against.
    curve = pg.PlotDataItem(dynamicRangeLimit=None)
    _style_curve(curve, c.series, ref_symbols, theme)
    plot.addItem(curve)
    bars = None
    if c.err is not None:
        bars = pg.ErrorBarItem(pen=pg.mkPen(_color(c.series, theme), width=1))
        plot.addItem(bars)
    return curve, bars


def _entry(s: Series, item) -> LegendEntry:
    tip = s.label + ("\ncuBLAS: the reference to beat" if s.reference else
                     "\nper shape the fastest verified kernel of the lab (what dispatching by "
                     "shape, as cuBLAS does, would give)" if s.lab else "")
    return LegendEntry(s.label, s.short or s.label, tip, item)


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
    throttled: list[tuple[float, float]] = field(default_factory=list)


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
        failed = [(float(px), float(py)) for r, px, py in zip(recs, tx, ty) if r.status == RecordStatus.FAILED]
        throttled = [(float(px), float(py)) for r, px, py in zip(recs, tx, ty) if r.throttled]
        out.append(_Curve(s, x, y, tx, ty, err,
                          [describe_record(r, sp.get(id(r))) for r in recs], failed, throttled))
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
    shown = [c for c in curves if c.series.label not in opts.hidden]
    failed = [p for c in shown for p in c.failed]
    throttled = [p for c in shown for p in c.throttled]
    all_tx = np.concatenate([c.tx for c in curves]) if curves else np.empty(0)
    span = float(all_tx.max() - all_tx.min()) if all_tx.size else 0.0
    beam = 0.012 * span if span > 0 else 0.02 * (1.0 if log else max(1.0, float(all_tx.max(initial=1.0))))
    unit = pick_unit(metric_key, np.concatenate([c.y for c in shown]) if shown else [])
    ref_symbols = _reference_symbols([c.series for c in curves])
    # What only a rebuild can change; the value unit and the failed-point markers are
    # updated in place (a unit that changes mid-sweep, ms to s, used to rebuild the chart).
    frame = ("metric", metric_key, log, opts.error_bars, id(view.theme))
    signature = frame + (tuple((c.series.label, c.err is not None) for c in curves),)
    updated = False
    if view.signature != signature and curves and view.signature is not None \
            and view.signature[:-1] == frame:
        updated = True
        # Only the set of curves changed (a sweep reached a new kernel or device, or its
        # first result): add and drop curve items instead of rebuilding the chart, so the
        # redraw stays short however many curves there are.
        plot = view.getPlotItem()
        if not view.signature[-1]:               # the empty frame: its text and fixed range go
            plot.removeItem(view.placeholder)
            if view.framed:
                view.framed = False
                plot.getViewBox().enableAutoRange()
        wanted = {c.series.label for c in curves}
        for label in [k for k in view.items if k not in ("__failed__", "__throttled__")
                      and k not in wanted]:
            view.drawn.pop(label, None)
            for item in view.items.pop(label):
                if item is not None:
                    plot.removeItem(item)
        entries = []
        budget = opts.max_new_curves
        for c in curves:
            if c.series.label not in view.items:
                if budget is not None and budget <= 0:
                    continue                    # the next drawing builds it
                view.items[c.series.label] = _curve_items(plot, c, ref_symbols, view.theme)
                budget = None if budget is None else budget - 1
            else:
                _style_curve(view.items[c.series.label][0], c.series, ref_symbols, view.theme)
            entries.append(_entry(c.series, view.items[c.series.label][0]))
        view.set_legend(entries, opts.hidden)
        curves = [c for c in curves if c.series.label in view.items]
        view.pending = len(curves) < len(signature[-1])
        view.signature = frame + (tuple((c.series.label, c.err is not None) for c in curves),)
        shown = [c for c in curves if c.series.label not in opts.hidden]
        failed = [p for c in shown for p in c.failed]
        throttled = [p for c in shown for p in c.throttled]
    if not updated and view.signature != signature:
        view.pending = False
        plot = view.reset()
        plot.getAxis("bottom").setLogMode(log)
        plot.getAxis("left").setLogMode(log)
        # The unit scales the tick labels only (data and view coordinates stay in the
        # metric's base unit); no ``units=``: pyqtgraph would add SI prefixes.
        plot.getAxis("left").set_unit_factor(unit[1])
        view.set_labels(SIZE_AXIS_LABEL, f"{metric.title} ({unit[0]})")
        entries = []
        for c in curves:
            view.items[c.series.label] = _curve_items(plot, c, ref_symbols, view.theme)
            entries.append(_entry(c.series, view.items[c.series.label][0]))
        view.unit = unit
        view.set_legend(entries, opts.hidden)
        if not curves:
            # A plausible empty frame: 10…5000 in size, 0.01…100 in value (log).
            plot.getViewBox().setRange(xRange=(1, 3.7) if log else (0, 4096),
                                       yRange=(-2, 2) if log else (0, 100), padding=0)
            view.framed = True
            view.show_placeholder(
                "No energy figures: NVML (nvidia-ml-py) measures them on an NVIDIA GPU,\n"
                "over timed loops of at least 0.25 s (e.g. a time budget of 0.5 s)"
                if metric_key == "efficiency" and not opts.for_export
                else "No results" if opts.for_export
                else "No results yet — press Run, or open a results file")
        view.signature = signature
    plot = view.getPlotItem()
    if getattr(view, "unit", None) != unit:
        plot.getAxis("left").set_unit_factor(unit[1])
        view.set_labels(SIZE_AXIS_LABEL, f"{metric.title} ({unit[0]})")
        view.unit = unit
    if failed and "__failed__" not in view.items:
        view.items["__failed__"] = (_failed_item([], [], view.theme), None)
        plot.addItem(view.items["__failed__"][0])
    if throttled and "__throttled__" not in view.items:
        view.items["__throttled__"] = (_throttled_item([], []), None)
        plot.addItem(view.items["__throttled__"][0])
    view.hover.clear()
    for c in curves:
        curve, bars = view.items[c.series.label]
        visible = c.series.label not in opts.hidden
        # Only curves whose points changed are given them again (pyqtgraph rebuilds a
        # curve's markers on every setData): a redraw costs what the new results cost.
        key = (c.tx.tobytes(), c.ty.tobytes(), beam,
               None if c.err is None else tuple(a.tobytes() for a in c.err))
        if view.drawn.get(c.series.label) != key:
            curve.setData(c.tx, c.ty)
            if bars is not None and c.err is not None:
                ex, ey, top, bottom = c.err
                bars.setData(x=ex, y=ey, top=top, bottom=bottom, beam=beam)
            view.drawn[c.series.label] = key
        if curve.isVisible() != visible:
            curve.setVisible(visible)
        if bars is not None and bars.isVisible() != visible:
            bars.setVisible(visible)
        if visible:
            view.hover.add_points(c.tx, c.ty, c.texts)
    view.sync_legend(opts.hidden)
    if "__failed__" in view.items:
        view.items["__failed__"][0].setData([p[0] for p in failed], [p[1] for p in failed])
    if "__throttled__" in view.items:
        view.items["__throttled__"][0].setData([p[0] for p in throttled], [p[1] for p in throttled])
    sizes = sorted({round(float(v), 6) for c in curves for v in c.x})
    axis = plot.getAxis("bottom")
    vb = plot.getViewBox()
    if len(sizes) == 1:
        # One size: give the point room (half a decade each side) instead of letting the
        # view zoom onto a zero-width range, where min–max bars become full-width lines.
        p = float(_log(sizes, log)[0])
        half = 0.5 if log else 0.5 * sizes[0]
        vb.setXRange(p - half, p + half, padding=0)
        view.one_size = True
    elif getattr(view, "one_size", False):
        view.one_size = False              # more sizes now: the data sets the range again
        vb.enableAutoRange(axis=pg.ViewBox.XAxis)
    if 1 <= len(sizes) <= MAX_SIZE_TICKS:
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
    if shown:
        bars = [np.concatenate([c.err[1] + c.err[2], c.err[1] - c.err[3]]) for c in shown if c.err]
        view.place_legend(np.concatenate([c.tx for c in shown]), np.concatenate([c.ty for c in shown]),
                          np.concatenate(bars) if bars else None)
    return {c.series.label: (c.x, c.y) for c in curves}


COMPARE_ROW_PX = 16      # the least height of a bar row before the view scrolls
COMPARE_LABEL_MAX_PX = 300


def render_compare(view: ChartView, series: list[Series], opts: ChartOptions
                   ) -> dict[str, float]:
    """Horizontal bars for one problem size, best first, labelled with the value, the
    speed-up over naive and the share of cuBLAS; cuBLAS bars grey with a dashed line
    to beat.  Too many bars to fit scroll (mouse wheel).  Returns ``{label: value}``."""
    plot = view.reset()
    shapes = shapes_in(series)
    if not shapes:
        view.show_placeholder("No results to compare yet")
        return {}
    shape = opts.compare_shape if opts.compare_shape in shapes else shapes[-1]
    key = "runtime" if opts.compare_metric == "runtime" else "gflops"
    metric = METRICS[key]
    rows = []
    for s in series:
        if s.label in opts.hidden:
            continue
        recs = [r for r in s.records if shape_of(r) == shape]
        if recs:
            rec = recs[-1]
            val = metric.values(rec)[0]
            if math.isfinite(val) and val > 0:
                rows.append((s, rec, val))
    # Best first: the highest rate, or the shortest time.
    rows.sort(key=lambda row: row[2], reverse=key != "runtime")
    sp = speedups(r for s in series for r in s.records)
    vb = plot.getViewBox()
    vb.invertY(True)  # the best at the top
    view.legend.hide()  # the axis names the bars
    unit = pick_unit(key, [v for _, _, v in rows])
    plot.getAxis("bottom").set_unit_factor(unit[1])
    view.set_labels(f"{metric.title} ({unit[0]})", "")
    if not rows:
        plot.setTitle(f"Problem size {shape_text(shape)}", color=view.theme.foreground.name(), size="10pt")
        view.show_placeholder("No timed results at this size")
        return {}
    values = np.array([v for _, _, v in rows])
    ys = np.arange(len(rows), dtype=float)
    ref_brush = _with_alpha(view.theme.ceiling, 110)
    verdicts = {i: (v, ratio) for i, v, ratio in opts.verdicts}
    brushes = [pg.mkBrush(VERDICT_COLORS[verdicts[id(r)][0]] if verdicts.get(id(r), ("",))[0] in VERDICT_COLORS
                          else ref_brush if s.reference else s.color) for s, r, _ in rows]
    pens = [pg.mkPen(FAILED_COLOR, width=2.5) if r.status == RecordStatus.FAILED
            else pg.mkPen(view.theme.foreground, width=1.2, style=Qt.PenStyle.DashLine) if s.reference
            else pg.mkPen(s.color.darker(130)) for s, r, _ in rows]
    plot.addItem(pg.BarGraphItem(x0=np.zeros(len(rows)), y=ys, height=0.7, width=values,
                                 brushes=brushes, pens=pens))
    vmax = float(values.max())
    font = QFont(view.font())
    font.setPointSizeF(8.0)
    out: dict[str, float] = {}
    texts: list[str] = []
    for (s, rec, val), y in zip(rows, ys):
        speed = sp.get(id(rec))
        parts = [value_text(val, key, unit)]
        if speed is not None and math.isfinite(speed) and rec.variant != "naive":
            parts.append(f"×{speed:.3g} vs naive")
        pct = rec.pct_of_cublas
        if isinstance(pct, float) and math.isfinite(pct) and not s.reference:
            parts.append(f"{pct:.0f}% of cuBLAS")
        if rec.status == RecordStatus.FAILED:
            parts.append("✗ failed verification")
        if id(rec) in verdicts:
            verdict, ratio = verdicts[id(rec)]
            parts.append(f"{ratio:.2f}× base, {verdict.upper()}" if math.isfinite(ratio)
                         else verdict.upper())
        text = "  ·  ".join(parts)
        texts.append(text)
        label = pg.TextItem(text, anchor=(0, 0.5),
                            color=FAILED_COLOR if rec.status == RecordStatus.FAILED else view.theme.foreground)
        label.setFont(font)
        label.setPos(val + vmax * 0.008, y)
        plot.addItem(label)
        view.hover.add_box(0.0, val, y - 0.35, y + 0.35, describe_record(rec, speed))
        out[s.label] = val
    # cuBLAS: a dashed line across every bar, the bar to beat.
    for s, _, val in rows:
        if s.reference:
            line = pg.InfiniteLine(pos=val, angle=90, movable=False,
                                   pen=pg.mkPen(view.theme.foreground, width=1.2, style=Qt.PenStyle.DashLine),
                                   )
            line.setZValue(-5)
            plot.addItem(line, ignoreBounds=True)
    axis = plot.getAxis("left")
    axis.setTickFont(font)
    fm = QFontMetrics(font)
    names = [s.short or s.label for s, _, _ in rows]
    width = min(COMPARE_LABEL_MAX_PX, max(fm.horizontalAdvance(n) for n in names) + 4)
    axis.setTicks([[(float(y), fm.elidedText(n, Qt.TextElideMode.ElideMiddle, width))
                    for n, y in zip(names, ys)], []])
    axis.setWidth(width + 12)
    # Room right of every bar for its text: x_hi ≥ val + text width in data units.
    plot_px = max((view.width() or 800) - width - 50, 200)
    x_hi = max(val / max(0.25, 1 - (fm.horizontalAdvance(t) + 12) / plot_px)
               for (_, _, val), t in zip(rows, texts))
    height_px = max((vb.height() or view.height() - 90), 100)
    fit = max(3, int(height_px // COMPARE_ROW_PX))
    title = f"Problem size {shape_text(shape)}"
    if opts.verdict_base:
        title += f"  —  vs {opts.verdict_base}: green faster · orange slower · grey same"
    vb.setMouseEnabled(x=False, y=True)
    if len(rows) > fit:
        vb.wheel_scrolls = True
        vb.setLimits(yMin=-0.6, yMax=len(rows) - 0.4, xMin=0, xMax=x_hi)
        vb.setRange(xRange=(0, x_hi), yRange=(-0.6, fit - 0.4), padding=0)
        title += f"  —  {len(rows)} bars, scroll for more"
    else:
        vb.setRange(xRange=(0, x_hi), yRange=(-0.6, len(rows) - 0.4), padding=0)
    plot.setTitle(title, color=view.theme.foreground.name(), size="9pt")
    return out


def _with_alpha(color, alpha: int) -> QColor:
    c = QColor(color)
    c.setAlpha(alpha)
    return c


@dataclass(frozen=True)
class Roof:
    """One device's ceilings: FP32 peak (GFLOP/s) and memory bandwidth (GB/s), the peaks
    of other arithmetic its records ran (``others``: TF32, FP16/BF16, FP8 and int8 tensor
    cores, int32) and the measured copy bandwidth (``copy_gbps``)."""

    device: str
    peak_gflops: float | None
    peak_gbps: float | None
    derived: bool = False        # the peak was worked out from the records' % of peak
    others: tuple[tuple[str, float], ...] = ()
    copy_gbps: float | None = None

    def peak_of(self, precision: str) -> float | None:
        """The compute ceiling of ``precision`` (``fp32``, ``tf32``, ``int32``, ``int8``...)."""
        return self.peak_gflops if precision == "fp32" else dict(self.others).get(precision)

    def bandwidth(self) -> float | None:
        """The bandwidth roof points are measured against: the typed or estimated figure,
        else the measured copy bandwidth."""
        return self.peak_gbps or self.copy_gbps


def roofs_for(series: list[Series], opts: ChartOptions) -> list[Roof]:
    """The roof of each device shown: the typed (or the device's own) figures for
    ``opts.peak_device`` (the first device when that one is not shown), the peak
    derived from % of peak for the others."""
    devices = list(dict.fromkeys(r.device for s in series for r in s.records))
    if not devices:
        return []
    derived = peaks_by_model(opts.derived_peaks)
    primary = opts.peak_device if opts.peak_device in devices else devices[0]
    extra: dict[str, dict[str, float]] = {}
    for d, what, value in opts.ceilings:
        extra.setdefault(d, {})[what] = value
    out = []
    for d in devices:
        typed = d == primary and bool(opts.peak_gflops)
        peak = opts.peak_gflops if typed else derived.get(d)
        gbps = opts.peak_gbps if d == primary else None
        mine = extra.get(d, {})
        # every arithmetic but FP32's (the solid roof), in the engine's order
        others = tuple((p, mine[p]) for p in peaks.PRECISIONS if p != "fp32" and mine.get(p))
        copy = mine.get("copy")
        if peak or gbps or others or copy:
            out.append(Roof(d, peak or None, gbps or None, derived=not typed and bool(peak),
                            others=others, copy_gbps=copy or None))
    return out


def render_roofline(view: ChartView, series: list[Series], opts: ChartOptions
                    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each result a point (arithmetic intensity, GFLOP/s) under each device's FP32
    and bandwidth ceilings.  Returns ``{label: (intensity, gflops)}``."""
    plot = view.reset()
    plot.getAxis("bottom").setLogMode(True)
    plot.getAxis("left").setLogMode(True)
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    all_ai, all_g = [], []
    fail_x, fail_y = [], []
    sp = speedups(r for s in series for r in s.records)
    roofs = roofs_for(series, opts)
    by_device = {rf.device: rf for rf in roofs}
    ref_symbols = _reference_symbols(series)
    entries = []
    for s in series:
        pts = [(intensity(r), METRICS["gflops"].values(r)[0], r) for r in s.records]
        pts = [(a, g, r) for a, g, r in pts if math.isfinite(a) and a > 0 and math.isfinite(g) and g > 0]
        if not pts:
            continue
        ai = np.array([p[0] for p in pts])
        g = np.array([p[1] for p in pts])
        out[s.label] = (ai, g)
        tx, ty = np.log10(ai), np.log10(g)
        color = _color(s, view.theme)
        item = pg.ScatterPlotItem(x=tx, y=ty, symbol=ref_symbols.get(s.label) or _symbol(s),
                                  size=10 if s.reference else 9,
                                  brush=pg.mkBrush(view.theme.background if s.reference else color),
                                  pen=pg.mkPen(color if s.reference else s.color.darker(140),
                                               width=1.8 if s.reference else 1))
        plot.addItem(item)
        entries.append(_entry(s, item))
        if s.label in opts.hidden:
            item.setVisible(False)
            continue
        texts = []
        for a, gf, r in pts:
            t = describe_record(r, sp.get(id(r))) + f"<br>intensity {a:.3g} FLOP/B"
            rf = by_device.get(r.device)
            if rf is not None:
                ceiling = float(roof(np.array([a]), rf.peak_of(record_precision(r)), rf.bandwidth())[0])
                if math.isfinite(ceiling):
                    t += f" · {100 * gf / ceiling:.1f}% of the roof"
            texts.append(t)
            if r.status == RecordStatus.FAILED:
                fail_x.append(math.log10(a))
                fail_y.append(math.log10(gf))
        view.hover.add_points(tx, ty, texts)
        all_ai.extend(ai)
        all_g.extend(g)
    if fail_x:
        plot.addItem(_failed_item(fail_x, fail_y, view.theme))
    lo = min(all_ai) / 4 if all_ai else 0.1
    hi = max(all_ai) * 4 if all_ai else 1000.0
    for rf in roofs:
        for peak in (rf.peak_gflops,) + tuple(p for _, p in rf.others):
            for bw in (rf.peak_gbps, rf.copy_gbps):
                if peak and bw:
                    lo, hi = min(lo, peak / bw / 4), max(hi, peak / bw * 4)
    if hi / lo < 100:
        # At least two decades of intensity, so the axis has ticks to read (points of one
        # size all share one intensity, and without ceilings nothing else sets the range).
        mid = math.sqrt(lo * hi)
        lo, hi = mid / 10, mid * 10
    plot.getViewBox().setXRange(math.log10(lo), math.log10(hi), padding=0.02)
    unit = pick_unit("gflops", list(all_g) + [p for rf in roofs for p in
                                              (rf.peak_gflops,) + tuple(v for _, v in rf.others) if p])
    plot.getAxis("left").set_unit_factor(unit[1])
    view.set_labels("Arithmetic intensity (FLOP / byte of compulsory traffic)", f"Throughput ({unit[0]})")
    for i, rf in enumerate(roofs):
        _draw_ceilings(view, plot, lo, hi, rf, i, len(roofs) > 1, unit)
    view.set_legend(entries, opts.hidden)
    if all_g:
        view.place_legend(np.log10(all_ai), np.log10(all_g))
    if not out:
        view.legend.hide()
        view.show_placeholder("No results yet" if (opts.peak_gflops or opts.peak_gbps or opts.for_export)
                              else "No results yet; device peaks unknown (enter them above)")
    elif not roofs:
        plot.setTitle("Device peaks unknown: no roof drawn" if opts.for_export else
                      "Device peaks unknown: enter the peak GFLOP/s and GB/s above to draw the roof",
                      color=view.theme.muted.name(), size="9pt")
    return out


ROOF_STYLES = (Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine, Qt.PenStyle.DashDotLine)


def _draw_ceilings(view: ChartView, plot: pg.PlotItem, lo: float, hi: float, rf: Roof, index: int,
                   named: bool, unit: tuple[str, float]) -> None:
    """The FP32 roof (solid; one line style per device), each other precision's roof
    (TF32 tensor cores, int32: dotted) and the measured copy-bandwidth slope (dashed)."""
    ai = np.logspace(math.log10(lo), math.log10(hi), 200)
    who = f"{rf.device} · " if named else ""
    style = ROOF_STYLES[index % len(ROOF_STYLES)]
    if rf.peak_gflops or rf.peak_gbps:
        g = roof(ai, rf.peak_gflops, rf.peak_gbps)
        plot.addItem(pg.PlotCurveItem(np.log10(ai), np.log10(g),
                                      pen=pg.mkPen(view.theme.ceiling, width=2.5, style=style)))
    if rf.peak_gflops:
        how = " (from % of peak)" if rf.derived else ""
        t = pg.TextItem(f"{who}FP32 SIMT peak {value_text(rf.peak_gflops, 'gflops', unit)}{how}",
                        color=view.theme.ceiling, anchor=(1, 1))
        t.setPos(math.log10(hi), math.log10(rf.peak_gflops))
        plot.addItem(t)
    if rf.peak_gbps:
        x0 = lo * 1.5
        t = pg.TextItem(f"{who}bandwidth {rf.peak_gbps:,.0f} GB/s", color=view.theme.ceiling, anchor=(0, 1))
        t.setPos(math.log10(x0), math.log10(float(roof(np.array([x0]), rf.peak_gflops, rf.peak_gbps)[0])))
        plot.addItem(t)
    bw = rf.bandwidth()
    for precision, peak in rf.others:
        g = roof(ai, peak, bw)
        plot.addItem(pg.PlotCurveItem(np.log10(ai), np.log10(g),
                                      pen=pg.mkPen(view.theme.ceiling, width=1.8, style=Qt.PenStyle.DotLine)))
        t = pg.TextItem(f"{who}{PRECISION_LABELS.get(precision, precision)} peak "
                        f"{value_text(peak, 'gflops', unit)}", color=view.theme.ceiling, anchor=(1, 1))
        t.setPos(math.log10(hi), math.log10(peak))
        plot.addItem(t)
    if rf.copy_gbps:
        top = max([rf.peak_gflops or 0.0] + [p for _, p in rf.others]) or None
        g = roof(ai, top, rf.copy_gbps)
        plot.addItem(pg.PlotCurveItem(np.log10(ai), np.log10(g),
                                      pen=pg.mkPen(view.theme.ceiling, width=1.8, style=Qt.PenStyle.DashLine)))
        x0 = lo * 1.5
        t = pg.TextItem(f"{who}measured copy {rf.copy_gbps:,.0f} GB/s", color=view.theme.ceiling, anchor=(0, 0))
        t.setPos(math.log10(x0), math.log10(float(roof(np.array([x0]), top, rf.copy_gbps)[0])))
        plot.addItem(t)


def render(view: ChartView, kind: str, series: list[Series], opts: ChartOptions):
    """Draw chart ``kind`` (a key of :data:`CHARTS`) into ``view``."""
    if kind in METRICS:
        return render_metric(view, series, kind, opts)
    # The lab best line repeats points of other series: a size chart's line only.
    if kind == "compare":
        return render_compare(view, [s for s in series if not s.lab], opts)
    if kind == "roofline":
        return render_roofline(view, [s for s in series if not s.lab], opts)
    raise KeyError(f"unknown chart '{kind}'")
