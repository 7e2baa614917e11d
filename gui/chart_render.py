"""Drawing each chart from the series: one function per chart kind.

The live tabs and the exporter call the same ``render`` function, so an exported
file shows exactly what the tab shows.  The size charts update their items in place
while the set of curves stays the same (a sweep adding points), which keeps a redraw
to a few milliseconds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QFontMetrics

from .chart_data import (METRICS, Series, describe_record, intensity, problem_size, rate_text,
                         roof, shape_of, shape_text, shapes_in, speedups)
from .chart_view import ChartView, plain_number
from .theme import FAILED_COLOR, SOURCE_SYMBOLS, ChartTheme

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
