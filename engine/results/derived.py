"""Figures derived from records, computed here and only here: speed-up over the baseline
(× naive), per cent of cuBLAS, per cent of peak, GFLOP/s per watt, and the lab best per problem. The runner
fills a run's final records with them, and the charts, the results table and ``bench``
read or recompute them through these functions, so every view shows the same numbers.

Records are :class:`engine.results.records.ResultRecord` (not imported here: the records
module imports this one).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterable

from engine.kernels import registry
from engine.measure import peaks
from engine.results.status import RAN, RecordStatus


def pct_of(part: float, whole: float | None) -> float:
    """``100 × part / whole``; NaN where ``whole`` is missing or not positive."""
    if not whole or not math.isfinite(whole) or whole <= 0:
        return math.nan
    return 100.0 * part / whole


def gflops_per_watt(flops: int, joules_per_launch: float) -> float:
    """GFLOP/s per watt, i.e. GFLOP per joule: a launch's FLOPs over the energy it took;
    NaN where the energy is not known."""
    if not flops or not math.isfinite(joules_per_launch) or joules_per_launch <= 0:
        return math.nan
    return flops / 1e9 / joules_per_launch


def pct_of_peak(gflops: float, peak_gflops: float | None) -> float:
    """Per cent of the peak of the record's own arithmetic (NaN: no peak known)."""
    return pct_of(gflops, peak_gflops)


def pct_of_reference(reference_ms: float | None, median_ms: float) -> float:
    """Per cent of the reference line's speed (cuBLAS): its time over this time."""
    if reference_ms is None or not math.isfinite(median_ms) or median_ms <= 0:
        return math.nan
    return 100.0 * reference_ms / median_ms


def ratio_to_best_baseline(records: Iterable, baseline_key, record_key
                           ) -> dict[int, float]:
    """``best baseline median / record median`` per record, keyed by ``id(record)``.

    ``baseline_key(r)`` is the group a baseline run belongs to (None for non-baselines);
    ``record_key(r)`` the group whose fastest baseline ``r`` is compared with. Records
    without a finite, positive median, or without a baseline in their group, get none.
    Speed-up over naive and per cent of cuBLAS are both this ratio.
    """
    recs = [r for r in records if math.isfinite(r.median_ms) and r.median_ms > 0]
    best: dict[Any, float] = {}
    for r in recs:
        key = baseline_key(r)
        if key is not None:
            best[key] = min(best.get(key, math.inf), r.median_ms)
    out = {}
    for r in recs:
        key = record_key(r)
        if key in best:
            out[id(r)] = best[key] / r.median_ms
    return out


def record_precision(r) -> str:
    """The arithmetic of a record: :attr:`~ResultRecord.precision` (engine.run.runner.fill_ceilings),
    else its variant's (fp32 or tf32) as the registry knows it, int32 for integer data."""
    if r.precision:
        return r.precision
    v = registry.REGISTRY.get(r.variant)
    return peaks.precision_of(v.precision if v is not None else "fp32", r.dtype)


def is_reference_record(r) -> bool:
    """A library reference line (cuBLAS): never the lab's own kernel."""
    v = registry.REGISTRY.get(r.variant)
    return v.role == "reference" if v is not None else r.variant.lower().startswith("cublas")


def table_key(r) -> tuple:
    """The devices whose records make one table: a share-mode run over devices of one model
    is one (its :attr:`~ResultRecord.share_group`: one lab best over all of them); any
    other record's table is its own device's (:meth:`~ResultRecord.device_key`)."""
    return ("share", r.share_group) if r.share_group else r.device_key()


def problem_key(r) -> tuple:
    """(source, backend, table, M, N, K, dtype, mode, precision): one problem of one run's
    table (:func:`table_key`), the key of :func:`lab_best`."""
    return (r.source, r.backend) + table_key(r) + (r.m, r.n, r.k, r.dtype, r.mode,
                                                   record_precision(r))


def device_problem_key(r) -> tuple:
    """:func:`problem_key` on the record's own device: the key of :func:`reference_times`
    (a ratio is of a reference line timed on the device that timed the record)."""
    return (r.source, r.backend) + r.device_key() + (r.m, r.n, r.k, r.dtype, r.mode,
                                                     record_precision(r))


def reference_times(records: Iterable) -> dict[tuple, float]:
    """The fastest run (median ms) of the library reference line (cuBLAS) per
    :func:`device_problem_key`: what a lab best row is compared with."""
    out: dict[tuple, float] = {}
    for r in records:
        if is_reference_record(r) and r.status == RecordStatus.OK and math.isfinite(r.median_ms):
            key = device_problem_key(r)
            out[key] = min(out.get(key, math.inf), r.median_ms)
    return out


def lab_best_pct_of_reference(key: tuple, best, refs: dict[tuple, float]) -> float:
    """% of the reference line for the lab best row ``key`` (of :func:`lab_best`), whose
    record is ``best``: the line of the row's precision timed on ``best``'s own device
    (``refs`` from :func:`reference_times`); NaN where that device ran none."""
    own = device_problem_key(best)[:-1] + (key[-1],)
    return pct_of_reference(refs.get(own), best.median_ms)


#: Arithmetic a request of a precision may run on: a TF32 request may take an FP32 kernel
#: (as accurate or more), as cuBLAS's TF32 mode runs its FP32 GEMV on a matrix-vector product.
SERVES = {"tf32": ("tf32", "fp32")}


def lab_best(records: Iterable) -> dict[tuple, Any]:
    """The lab's best per problem: for each (source, backend, table, M, N, K, dtype, mode,
    precision) (:func:`problem_key`: a device, or the devices of a share run of one model), the fastest record of the lab's own kernels (not a library reference) that
    ran and passed verification. It is what a user gets by dispatching each shape to the
    fastest kernel, as cuBLAS does, and stands beside cuBLAS of the same precision. Where a
    TF32 kernel ran, the TF32 best may be an FP32 kernel (:data:`SERVES`): dispatching a
    TF32 request to it loses nothing."""
    best: dict[tuple, Any] = {}
    for r in records:
        if (r.status != RecordStatus.OK or r.passed is not True or not math.isfinite(r.median_ms)
                or r.median_ms <= 0 or is_reference_record(r)):
            continue
        key = problem_key(r)
        if key not in best or r.median_ms < best[key].median_ms:
            best[key] = r
    for key in [k for k in best if k[-1] in SERVES]:
        for other in SERVES[key[-1]]:
            r = best.get(key[:-1] + (other,))
            if r is not None and r.median_ms < best[key].median_ms:
                best[key] = r
    return best


def same_run_key(r) -> tuple:
    """One problem on one device in one run: backend, device, shape, dtype, mode."""
    return (r.backend,) + r.device_key() + (r.m, r.n, r.k, r.dtype, r.mode)


def fill_speedups(results: list) -> None:
    """Speed-up over the best run of the baseline (the ``baseline`` role: naive) of the
    same shape, dtype, mode and device."""
    base = registry.baseline_name()
    ratios = ratio_to_best_baseline(
        results, lambda r: same_run_key(r) if r.variant == base else None, same_run_key)
    for r in results:
        if id(r) in ratios:
            r.speedup_vs_naive = ratios[id(r)]


def fill_pct_of_cublas(results: list) -> None:
    """Per cent of the best run of the reference line (the ``reference`` role: cuBLAS) of
    the same shape, dtype, mode, device and arithmetic (FP32 kernels against cublas_fp32,
    TF32 ones against cublas_tf32), in this run."""
    by_precision = registry.references_by_precision()
    refs = set(by_precision.values())

    def reference_of(r):
        precision = getattr(registry.REGISTRY.get(r.variant), "precision", "fp32")
        return (by_precision.get(precision),) + same_run_key(r)

    ratios = ratio_to_best_baseline(
        results, lambda r: (r.variant,) + same_run_key(r) if r.variant in refs else None,
        reference_of)
    for r in results:
        if id(r) in ratios:
            r.pct_of_cublas = 100.0 * ratios[id(r)]


def speedups_over_naive(records: Iterable, key: Callable[[Any], tuple]) -> dict[int, float]:
    """Speed-up over the fastest naive run with the same ``key(record)``, keyed by
    ``id(record)``; a record's own saved figure where no naive run is among ``records``."""
    recs = list(records)
    out = ratio_to_best_baseline(recs, lambda r: key(r) if r.variant == "naive" else None, key)
    for r in recs:
        if id(r) not in out and math.isfinite(r.speedup_vs_naive):
            out[id(r)] = r.speedup_vs_naive
    return out


def peak_from_share(gflops: float, pct: float) -> float:
    """The peak a record's % of peak was of: ``gflops / pct × 100`` (NaN if unknown)."""
    if not (math.isfinite(gflops) and math.isfinite(pct)) or gflops <= 0 or pct <= 0:
        return math.nan
    return gflops / pct * 100.0


def has_run(r) -> bool:
    """Ran and is not known to be wrong (ok or unverified)."""
    return r.status in RAN
