"""Timing statistics and the throughput models (GFLOP/s, effective GB/s)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class TimingStats:
    """Summary of one timed launch series, in milliseconds.

    ``noise_pct`` is the relative standard deviation (sample std / mean, in %):
    the spread a user must beat before calling two versions different.
    """

    median_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    noise_pct: float
    count: int


def summarize(times_ms: Sequence[float]) -> TimingStats:
    """Median, min, max, mean and noise of per-launch times.

    Raises
    ------
    ValueError
        If ``times_ms`` is empty or holds a non-finite or negative time.
    """
    t = np.asarray(times_ms, dtype=np.float64)
    if t.size == 0:
        raise ValueError("no timed launches")
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise ValueError(f"invalid launch times: {t.tolist()[:5]}")
    mean = float(t.mean())
    std = float(t.std(ddof=1)) if t.size > 1 else 0.0
    return TimingStats(
        median_ms=float(np.median(t)),
        min_ms=float(t.min()),
        max_ms=float(t.max()),
        mean_ms=mean,
        noise_pct=100.0 * std / mean if mean > 0 else 0.0,
        count=int(t.size),
    )


def gflops(flops: float, ms: float) -> float:
    """Throughput in GFLOP/s for ``flops`` operations taking ``ms`` milliseconds."""
    return flops / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")


def gbps(nbytes: float, ms: float) -> float:
    """Effective bandwidth in GB/s (10⁹ bytes) for ``nbytes`` moved in ``ms``."""
    return nbytes / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")


def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOP per byte of compulsory traffic: the x axis of a roofline."""
    return flops / nbytes if nbytes else float("nan")
