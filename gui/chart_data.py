"""From records to chart series: grouping, labels, colours, metrics, speed-ups.

Pure data (no widgets), so the grouping rules are easy to test and are shared by
the live charts and the exported images.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
from PySide6.QtGui import QColor

from engine import metrics, registry
from engine.records import ResultRecord
from engine.sizes import format_shape

from .results_store import is_plottable, source_name
from .theme import SOURCE_STYLES, assign_colors

Shape = tuple[int, int, int]


def problem_size(rec: ResultRecord) -> float:
    """The x of the size charts: ∛(M·N·K), which is M for a square problem."""
    return float(rec.m * rec.n * rec.k) ** (1.0 / 3.0)


def shape_of(rec: ResultRecord) -> Shape:
    return rec.m, rec.n, rec.k


def shape_text(shape: Shape) -> str:
    """``512`` for a cube, ``127×253×61`` otherwise."""
    return format_shape(shape).replace("x", "×")


def _gflops(rec: ResultRecord, ms: float) -> float:
    return metrics.gflops(rec.flops, ms) if rec.flops and math.isfinite(ms) else math.nan


def _gbps(rec: ResultRecord, ms: float) -> float:
    return metrics.gbps(rec.bytes, ms) if rec.bytes and math.isfinite(ms) else math.nan


@dataclass(frozen=True)
class Metric:
    """One y quantity: its title, unit and (value, low, high) per record.

    Low and high come from the fastest and slowest launch (min–max error bars);
    for a rate the slowest launch gives the low end.
    """

    key: str
    title: str
    unit: str
    values: Callable[[ResultRecord], tuple[float, float, float]]


def _rate(per_ms, stored):
    def values(r: ResultRecord) -> tuple[float, float, float]:
        mid = stored(r)
        if not math.isfinite(mid):
            mid = per_ms(r, r.median_ms)
        return mid, per_ms(r, r.max_ms), per_ms(r, r.min_ms)
    return values


METRICS: dict[str, Metric] = {
    "runtime": Metric("runtime", "Runtime", "ms", lambda r: (r.median_ms, r.min_ms, r.max_ms)),
    "gflops": Metric("gflops", "Throughput", "GFLOP/s", _rate(_gflops, lambda r: r.gflops)),
    "bandwidth": Metric("bandwidth", "Effective bandwidth", "GB/s", _rate(_gbps, lambda r: r.gbps)),
}


@dataclass
class Series:
    """The records of one curve: one variant × parameters × source × dtype × mode."""

    key: tuple
    kernel: str                     # variant[params]: decides the colour
    label: str                      # legend text: the kernel plus what tells it apart
    source_index: int               # decides line style and symbol
    records: list[ResultRecord] = field(default_factory=list)
    color: QColor = field(default_factory=QColor)

    @property
    def line_style(self):
        return SOURCE_STYLES[self.source_index % len(SOURCE_STYLES)]


def _variant_order(name: str) -> int:
    names = list(registry.REGISTRY)
    return names.index(name) if name in names else len(names)


def build_series(records: Iterable[ResultRecord]) -> list[Series]:
    """Group plottable records into curves, in a stable order, labelled minimally.

    A label names the kernel and adds only what differs between the curves shown
    (source file, backend, device, dtype, mode), so one run reads ``tiled[block=16]``
    and an overlay of two files reads ``tiled[block=16] · run_a.json``.
    """
    recs = [r for r in records if is_plottable(r)]
    sources: dict[str, None] = {}
    for r in recs:
        sources.setdefault(r.source, None)
    source_list = list(sources)
    groups: dict[tuple, list[ResultRecord]] = {}
    for r in recs:
        groups.setdefault(r.series_key(), []).append(r)

    def varies(attr) -> bool:
        return len({attr(g[0]) for g in groups.values()}) > 1

    parts = [(varies(lambda r: r.source), lambda r: source_name(r)),
             (varies(lambda r: r.backend), lambda r: r.backend),
             (varies(lambda r: r.device), lambda r: r.device),
             (varies(lambda r: r.dtype), lambda r: r.dtype),
             (varies(lambda r: r.mode), lambda r: r.mode)]
    out = []
    for key, rs in groups.items():
        first = rs[0]
        extra = [fmt(first) for on, fmt in parts if on]
        kernel = first.label()
        label = " · ".join([kernel] + extra)
        rs = sorted(rs, key=problem_size)
        out.append(Series(key, kernel, label, source_list.index(first.source), rs))
    out.sort(key=lambda s: (s.source_index, _variant_order(s.records[0].variant),
                            sorted(s.records[0].params.items()), s.label))
    colors = assign_colors(s.kernel for s in out)
    for s in out:
        s.color = colors[s.kernel]
    return out


def speedups(records: Iterable[ResultRecord]) -> dict[int, float]:
    """Speed-up over the fastest naive run of the same source, device, shape, dtype
    and mode, keyed by ``id(record)``; the record's own figure where no naive run is
    shown (e.g. a file saved with speed-ups)."""
    recs = [r for r in records if is_plottable(r)]
    best: dict[tuple, float] = {}

    def key(r):
        return r.source, r.backend, r.device, r.m, r.n, r.k, r.dtype, r.mode

    for r in recs:
        if r.variant == "naive":
            best[key(r)] = min(best.get(key(r), math.inf), r.median_ms)
    out = {}
    for r in recs:
        if key(r) in best:
            out[id(r)] = best[key(r)] / r.median_ms
        elif math.isfinite(r.speedup_vs_naive):
            out[id(r)] = r.speedup_vs_naive
    return out


def shapes_in(series: list[Series]) -> list[Shape]:
    """Distinct problem shapes of the shown curves, smallest first."""
    shapes = {shape_of(r) for s in series for r in s.records}
    return sorted(shapes, key=lambda sh: (sh[0] * sh[1] * sh[2], sh))


def intensity(rec: ResultRecord) -> float:
    return metrics.arithmetic_intensity(rec.flops, rec.bytes)


def roof(ai: np.ndarray, peak_gflops: float | None, peak_gbps: float | None) -> np.ndarray:
    """Attainable GFLOP/s at arithmetic intensity ``ai``: min(peak, bandwidth × AI)."""
    out = np.full_like(np.asarray(ai, dtype=float), np.inf)
    if peak_gbps:
        out = np.minimum(out, peak_gbps * np.asarray(ai, dtype=float))
    if peak_gflops:
        out = np.minimum(out, peak_gflops)
    return out


def rate_text(v: float) -> str:
    """``12,345``, ``123.4`` or ``0.0412``: three significant digits at least."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}"


def describe_record(rec: ResultRecord, speedup: float | None = None) -> str:
    """Hover text (HTML) for one point: what, where, how fast, how correct."""
    lines = [f"<b>{rec.label()}</b>",
             f"{shape_text(shape_of(rec))} · {rec.dtype} · {rec.mode} · {rec.backend}",
             f"median {rec.median_ms:.4g} ms (min {rec.min_ms:.4g}, max {rec.max_ms:.4g}, "
             f"{rec.repeats} runs)"]
    rates = []
    g, _, _ = METRICS["gflops"].values(rec)
    b, _, _ = METRICS["bandwidth"].values(rec)
    if math.isfinite(g):
        rates.append(f"{rate_text(g)} GFLOP/s")
    if math.isfinite(b):
        rates.append(f"{rate_text(b)} GB/s")
    if speedup is not None and math.isfinite(speedup):
        rates.append(f"×{speedup:.2f} vs naive")
    if rates:
        lines.append(" · ".join(rates))
    if rec.passed is True:
        lines.append(f"verified ✓ rel-L2 {rec.rel_l2:.2e}, max-abs {rec.max_abs:.2e}")
    elif rec.passed is False:
        lines.append(f"<span style='color:#e3242b'><b>verification FAILED</b></span> "
                     f"rel-L2 {rec.rel_l2:.2e}, max-abs {rec.max_abs:.2e}")
    if rec.source:
        lines.append(f"<i>{rec.source}</i>")
    return "<br>".join(lines)
