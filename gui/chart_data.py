"""From records to chart series: grouping, labels, colours, metrics, speed-ups.

Pure data (no widgets), so the grouping rules are easy to test and are shared by
the live charts and the exported images.
"""
from __future__ import annotations

import html
import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np
from PySide6.QtGui import QColor

from engine.measure import metrics
from engine.kernels import registry
from engine.results import derived
from engine.results.derived import is_reference_record, lab_best, record_precision, table_key
from engine.results.records import RecordStatus, ResultRecord
from engine.inputs.sizes import format_shape

from .results_store import is_plottable, source_name
from .theme import SOURCE_STYLES, assign_styles, is_reference

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
    # energy per launch has no per-launch spread (one counter over the loop): no error bars
    "efficiency": Metric("efficiency", "Energy efficiency", "GFLOP/s per W",
                         lambda r: (r.gflops_per_watt, math.nan, math.nan)),
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
    style_round: int = 0            # > 0 once the colours came round again: another marker
    short: str = ""                 # legend text: the label without parameters all its kin share
    #: A "lab best" line: per shape the fastest verified lab kernel (engine.results.derived.lab_best)
    lab: bool = False

    @property
    def line_style(self):
        return SOURCE_STYLES[self.source_index % len(SOURCE_STYLES)]

    @property
    def variant(self) -> str:
        return self.kernel if self.lab else self.records[0].variant

    @property
    def reference(self) -> bool:
        """A cuBLAS series: drawn as a reference line ("the bar to beat")."""
        return is_reference(self.variant)


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
             (varies(lambda r: r.device_key()), device_namer(g[0] for g in groups.values())),
             (varies(lambda r: r.dtype), lambda r: r.dtype),
             (varies(lambda r: r.mode), lambda r: r.mode)]
    out = []
    for key, rs in groups.items():
        first = rs[0]
        extra = [fmt(first) for on, fmt in parts if on]
        kernel = first.series_label()
        label = " · ".join([kernel] + extra)
        rs = sorted(rs, key=problem_size)
        out.append(Series(key, kernel, label, source_list.index(first.source), rs))
    out.sort(key=lambda s: (s.source_index, _variant_order(s.records[0].variant),
                            sorted(s.records[0].params.items()), s.label))
    styles = assign_styles(s.kernel for s in out if not s.reference)
    for s in out:
        s.color, s.style_round = styles.get(s.kernel, (QColor("#000000"), 0))
    set_short_labels(out)
    return out + lab_best_series(recs, parts, source_list)


LAB_BEST_LABEL = "lab best"


def lab_best_series(recs: list[ResultRecord], parts=(), source_list=None) -> list[Series]:
    """One "lab best" curve per (source, backend, device, dtype, mode, precision) where
    several of the lab's variants ran: at each shape the fastest verified one, beside
    cuBLAS of the same precision. ``parts`` are build_series' label parts."""
    source_list = source_list if source_list is not None else list(dict.fromkeys(r.source for r in recs))
    kernels: dict[tuple, set] = {}
    groups: dict[tuple, list[ResultRecord]] = {}
    for key, r in lab_best(recs).items():
        group = key[:2] + table_key(r) + (r.dtype, r.mode, key[-1])
        groups.setdefault(group, []).append(r)
    for r in recs:
        if r.status == RecordStatus.OK and r.passed is True and not is_reference_record(r):
            group = (r.source, r.backend) + table_key(r) + (r.dtype, r.mode, record_precision(r))
            kernels.setdefault(group, set()).add(r.variant)
    out = []
    for group, rs in groups.items():
        if len(kernels.get(group, ())) < 2:       # one variant: its own curves say it all
            continue
        first, precision = rs[0], group[-1]
        name = f"{LAB_BEST_LABEL} {precision.upper()}"
        # a share run's one table names its devices, not the first row's
        label = " · ".join([name] + [first.share_group if i == 2 and first.share_group
                                     else fmt(first) for i, (on, fmt) in enumerate(parts) if on])
        out.append(Series(("lab",) + group, name, label, source_list.index(first.source),
                          sorted(rs, key=problem_size), lab=True, short=label))
    return out


def device_namer(records: Iterable[ResultRecord]) -> Callable[[ResultRecord], str]:
    """The shortest device name that tells ``records``' devices apart: the model
    (``NVIDIA H200``) when models differ; the index (``#1``) when one model ran on several
    devices, with the host (``#0 @ node2``) when one index ran on several hosts; model and
    index (``NVIDIA H200 #1``) when models and indices are mixed."""
    keys = {r.device_key() for r in records}
    models = {k[1] for k in keys}
    if len(models) == len(keys):
        return lambda r: r.device
    if len(models) == 1:
        # One model on several devices (two H200s): the index says it, the model is noise
        # in a legend (the table and the tooltips keep the full name).
        if len({k[2] for k in keys}) == len(keys):
            return lambda r: f"#{r.device_index}"
        return lambda r: f"#{r.device_index} @ {r.host}"
    if len({(k[1], k[2]) for k in keys}) == len(keys):
        return lambda r: r.device_label()
    return lambda r: r.device_label(with_host=True)


def set_short_labels(series: list[Series]) -> None:
    """Legend texts: where a variant has several parameter sets, only the parameters
    that tell them apart (``vectorized[bm=64,bk=16]``); otherwise the full label."""
    by_variant: dict[str, list[Series]] = {}
    for s in series:
        by_variant.setdefault(s.variant, []).append(s)
    for group in by_variant.values():
        sets = [s.records[0].params or {} for s in group]
        keys = list(dict.fromkeys(k for p in sets for k in p))
        varying = [k for k in keys if len({str(p.get(k)) for p in sets}) > 1]
        for s in group:
            if not varying:
                s.short = s.label
                continue
            p = s.records[0].params
            kernel = f"{s.variant}[{','.join(f'{k}={p[k]}' for k in varying if k in p)}]"
            s.short = s.label.replace(s.kernel, kernel, 1)


def best_per_variant(series: list[Series]) -> list[Series]:
    """Per variant (and source, backend, device, dtype, mode), only the parameter set
    that is fastest at the largest size any of them ran; order kept."""
    groups: dict[tuple, list[Series]] = {}
    keep: set[int] = {id(s) for s in series if s.lab}     # lab best lines stay
    for s in series:
        if s.lab:
            continue
        r = s.records[0]
        groups.setdefault((r.source, r.backend) + r.device_key() + (r.variant, r.dtype, r.mode),
                          []).append(s)
    for group in groups.values():
        timed = [(s, r) for s in group for r in s.records
                 if math.isfinite(r.median_ms) and r.median_ms > 0]
        if not timed:
            keep.add(id(group[0]))
            continue
        largest = max(problem_size(r) for _, r in timed)
        at = [(r.median_ms, i) for i, s in enumerate(group) for r in s.records
              if problem_size(r) == largest and math.isfinite(r.median_ms) and r.median_ms > 0]
        keep.add(id(group[min(at)[1]]))
    out = [s for s in series if id(s) in keep]
    # Fewer curves: colours afresh, so that they come from the most distinct ones.
    styles = assign_styles(s.kernel for s in out if not s.reference and not s.lab)
    for s in out:
        s.color, s.style_round = styles.get(s.kernel, (s.color, 0))
    for s in out:
        # One parameter set per variant: the variant names it (the tooltip and the
        # hover give the parameters).
        if not s.lab:
            s.short = s.label.replace(s.kernel, s.variant, 1)
    return out


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def peak_precision(r: ResultRecord) -> str:
    """The arithmetic whose peak a record's % of peak is of (its ``precision``);
    records from before per-precision peaks were all measured against the FP32 peak."""
    return r.precision or "fp32"


def record_ceilings(records: Iterable[ResultRecord]) -> dict[str, dict[str, float]]:
    """Per device model, the ceilings the records carry besides the FP32 peak: ``tf32``
    and ``int32`` peaks and the measured copy bandwidth ``copy`` (GB/s), each the median
    over that model's records (:func:`engine.run.runner.fill_ceilings` writes them)."""
    found: dict[str, dict[str, list[float]]] = {}
    for r in records:
        per = found.setdefault(r.device, {})
        peak, copy = r.peak_gflops, r.copy_gbps
        precision = peak_precision(r)
        if precision != "fp32" and _finite(peak) and peak > 0:
            per.setdefault(precision, []).append(float(peak))
        if _finite(copy) and copy > 0:
            per.setdefault("copy", []).append(float(copy))
    return {d: {k: float(statistics.median(v)) for k, v in per.items()}
            for d, per in found.items() if per}


def derived_peaks(records: Iterable[ResultRecord]) -> dict[tuple, float]:
    """FP32 peak GFLOP/s per device (keyed by :meth:`ResultRecord.device_key`: host,
    model, index), from records that carry their share of it: ``gflops / pct_of_peak ×
    100`` (the median over the device's records)."""
    found: dict[tuple, list[float]] = {}
    for r in records:
        if peak_precision(r) != "fp32":        # their % is of the TF32 or int32 peak
            continue
        peak = derived.peak_from_share(r.gflops, r.pct_of_peak)
        if math.isfinite(peak) and derived.has_run(r):
            found.setdefault(r.device_key(), []).append(peak)
    # statistics, not np.median: numpy imports numpy.ma on a first median, which held
    # the window for 60-90 ms in the middle of a sweep on a GPU machine.
    return {d: float(statistics.median(v)) for d, v in found.items()}


def peaks_by_model(derived: Iterable[tuple[tuple | str, float]]) -> dict[str, float]:
    """:func:`derived_peaks` per device model (a roof is the model's: two GPUs of one
    model share it); the first device's figure where several of one model differ."""
    out: dict[str, float] = {}
    for key, peak in derived:
        out.setdefault(key[1] if isinstance(key, tuple) else key, peak)
    return out


#: Units a metric may be shown in: (name, factor from the base unit), smallest first.
UNITS: dict[str, tuple[tuple[str, float], ...]] = {
    "runtime": (("µs", 1e3), ("ms", 1.0), ("s", 1e-3)),
    "gflops": (("MFLOP/s", 1e3), ("GFLOP/s", 1.0), ("TFLOP/s", 1e-3)),
    "bandwidth": (("MB/s", 1e3), ("GB/s", 1.0), ("TB/s", 1e-3)),
    "efficiency": (("MFLOP/s per W", 1e3), ("GFLOP/s per W", 1.0), ("TFLOP/s per W", 1e-3)),
}


def pick_unit(metric_key: str, values) -> tuple[str, float]:
    """The unit that keeps the largest value readable: TFLOP/s (TB/s) once the data
    pass 10⁴ GFLOP/s (GB/s), µs when every runtime is under 1 ms, s past 10⁴ ms."""
    units = UNITS[metric_key]
    v = np.asarray(list(values), dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    base = next(u for u in units if u[1] == 1.0)
    if not v.size:
        return base
    top = float(v.max())
    if top >= 1e4:
        return units[-1]
    if top < 1.0:
        return units[0]
    return base


def value_text(v: float, metric_key: str, unit: tuple[str, float] | None = None) -> str:
    """``416.3 TFLOP/s``, ``512 GB/s``, ``35.2 µs``: a value in a readable unit."""
    name, factor = unit or pick_unit(metric_key, [v])
    x = v * factor
    if abs(x) >= 1000:
        return f"{x:,.0f} {name}"
    return f"{x:#.4g}".rstrip(".") + f" {name}"


def speedups(records: Iterable[ResultRecord]) -> dict[int, float]:
    """Speed-up over the fastest naive run of the same source, device, shape, dtype
    and mode, keyed by ``id(record)``; the record's own figure where no naive run is
    shown (e.g. a file saved with speed-ups)."""
    return derived.speedups_over_naive(
        (r for r in records if is_plottable(r)),
        lambda r: (r.source, r.backend) + r.device_key() + (r.m, r.n, r.k, r.dtype, r.mode))


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


def conditions_text(rec: ResultRecord) -> str:
    """``SM 1725 MHz (min 1665) · 506 W · 55 °C · 457 GFLOP/s per W``, or "" (no NVML)."""
    parts = []
    if _finite(rec.sm_clock_median_mhz):
        parts.append(f"SM {rec.sm_clock_median_mhz:.0f} MHz"
                     + (f" (min {rec.sm_clock_min_mhz:.0f})"
                        if _finite(rec.sm_clock_min_mhz) and rec.sm_clock_min_mhz < rec.sm_clock_median_mhz
                        else ""))
    if _finite(rec.power_w):
        parts.append(f"{rec.power_w:.0f} W")
    if _finite(rec.temperature_c):
        parts.append(f"{rec.temperature_c:.0f} °C")
    if _finite(rec.gflops_per_watt):
        parts.append(value_text(rec.gflops_per_watt, "efficiency"))
    return " · ".join(parts)


def describe_record(rec: ResultRecord, speedup: float | None = None) -> str:
    """Hover text (HTML) for one point: what, where, how fast, how correct."""
    lines = [f"<b>{rec.label()}</b>",
             f"{shape_text(shape_of(rec))} · {rec.dtype} · {rec.mode} · {rec.backend}",
             f"on {html.escape(rec.device_label(with_host=True))}",
             f"median {rec.median_ms:.4g} ms (min {rec.min_ms:.4g}, max {rec.max_ms:.4g}, "
             f"{rec.repeats} runs)"]
    rates = []
    g, _, _ = METRICS["gflops"].values(rec)
    b, _, _ = METRICS["bandwidth"].values(rec)
    if math.isfinite(g):
        rates.append(value_text(g, "gflops"))
    if math.isfinite(b):
        rates.append(value_text(b, "bandwidth"))
    if speedup is not None and math.isfinite(speedup):
        rates.append(f"×{speedup:.2f} vs naive")
    if _finite(rec.pct_of_cublas) and not is_reference(rec.variant):
        rates.append(f"{rec.pct_of_cublas:.0f}% of cuBLAS")
    if rates:
        lines.append(" · ".join(rates))
    cond = conditions_text(rec)
    if cond:
        lines.append(html.escape(cond))
    if rec.throttled:
        lines.append(f"<span style='color:#f39c12'><b>▲ timed under a power/thermal cap</b></span> "
                     f"({html.escape(', '.join(rec.throttle))})")
    if rec.passed is True:
        lines.append(f"verified ✓ rel-L2 {rec.rel_l2:.2e}, max-abs {rec.max_abs:.2e}")
    elif rec.passed is False:
        lines.append(f"<span style='color:#e3242b'><b>verification FAILED</b></span> "
                     f"rel-L2 {rec.rel_l2:.2e}, max-abs {rec.max_abs:.2e}")
    if rec.source:
        lines.append(f"<i>{rec.source}</i>")
    return "<br>".join(lines)
