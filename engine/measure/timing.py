"""When a timed launch series stops, and how its launches were timed.

Three stop rules (a plan picks one): a fixed count of launches (``repeats``), a time
budget, or a noise target (:class:`NoiseStop`, like nvbench's ``--max-noise``): launches
go on until the relative standard error of the mean of the per-launch times falls below
the target, within a minimum and a maximum time. The standard error (stdev / √n / mean)
says how well the series pins down the kernel's time, so a quiet kernel stops after a
few dozen launches and a noisy one gets more samples, up to the maximum time; nvbench's
stdrel (stdev / mean) says how noisy each sample is, which more launches do not lower,
so it could only stop quiet kernels. The per-launch times exist in every timing mode
(each launch has its own event pair, held back to back or not), so the rule is the same
for all backends.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Sequence

import numpy as np


class TimingMode(StrEnum):
    """How a record's launches were timed (a ``str``: files keep the word)."""

    #: One device event pair per launch, each launch issued as the host gets to it
    #: (OpenCL profiling events; CUDA where the stream hold is unavailable).
    EVENTS = "events"
    #: CUDA: a batch of launches queued behind the stream hold and released at once, so
    #: they run back to back, each between its own event pair (stream_hold.py).
    HELD = "held"
    #: The host's clock around one synchronous launch (the cpu backend).
    HOST_CLOCK = "host clock"
    #: Triton's interpreter on the host (the cpu backend's .py kernels): numpy running each
    #: program one after another; a check of the arithmetic, meaningless as a kernel time.
    INTERPRETER = "interpreter"


class StopReason(StrEnum):
    """What ended a timed series."""

    REPEATS = "repeats"          # the fixed count was reached
    BUDGET = "budget"            # the time budget was spent
    NOISE = "noise"              # the noise target was met (after the minimum time)
    MAX_TIME = "max time"        # the noise rule's maximum time passed first
    LIMIT = "launch limit"       # the most launches one series may take
    CANCELLED = "cancelled"


#: Launches a budget or noise series takes at least, and at most.
MIN_LAUNCHES = 3
MAX_LAUNCHES = 100_000
#: The noise rule's defaults (chosen by measuring: benchmarks/NOTES.md, issue 37).
NOISE_DEFAULT_PCT = 0.5
NOISE_MIN_S = 0.05
NOISE_MAX_S = 1.0
#: Fewer samples than this say nothing about their spread.
NOISE_MIN_LAUNCHES = 10
#: Limits of the noise target and of its times (the window's controls and ``bench``).
NOISE_PCT_RANGE = (0.01, 50.0)
NOISE_TIME_RANGE = (0.0, 3600.0)


def relative_standard_error(times_ms: Sequence[float]) -> float:
    """The relative standard error of the mean of ``times_ms`` in % (stdev / √n / mean);
    infinity for fewer than two samples or a mean of 0."""
    t = np.asarray(times_ms, dtype=np.float64)
    if t.size < 2:
        return math.inf
    mean = float(t.mean())
    if not mean > 0:
        return math.inf
    return 100.0 * float(t.std(ddof=1)) / math.sqrt(t.size) / mean


@dataclass(frozen=True)
class NoiseStop:
    """Time until the relative standard error of the mean is below ``pct`` %, after at
    least ``min_s`` seconds and :data:`NOISE_MIN_LAUNCHES` launches; stop at ``max_s``
    seconds whatever the noise."""

    pct: float = NOISE_DEFAULT_PCT
    min_s: float = NOISE_MIN_S
    max_s: float = NOISE_MAX_S

    def problem(self) -> str | None:
        """Why these settings cannot be used (None when they can)."""
        lo, hi = NOISE_PCT_RANGE
        if not lo <= self.pct <= hi:                       # NaN fails too
            return f"the noise target must be from {lo} to {hi} %, not {self.pct}"
        tlo, thi = NOISE_TIME_RANGE
        for what, value in (("minimum", self.min_s), ("maximum", self.max_s)):
            if not tlo <= value <= thi:
                return f"the noise rule's {what} time must be from {tlo} to {thi} s, not {value}"
        if self.max_s <= 0 or self.min_s > self.max_s:
            return (f"the noise rule's maximum time ({self.max_s} s) must be above 0 and not "
                    f"below its minimum ({self.min_s} s)")
        return None

    def describe(self) -> str:
        return f"noise < {self.pct:g}% (error of the mean), {self.min_s:g}–{self.max_s:g} s"


def stop_rule_text(repeats: int, budget_s: float | None, noise: NoiseStop | None) -> str:
    """The rule a series ran under, in words (a record's ``stop_rule``)."""
    if noise is not None:
        return noise.describe()
    if budget_s is not None:
        return f"budget {budget_s:g} s"
    return f"repeats {max(repeats, 1)}"


class TimingLoop:
    """The stop rule of one timed series: ask :meth:`due` before each launch (or batch),
    :meth:`add` each launch's time; :attr:`stopped_by` says what ended it."""

    def __init__(self, repeats: int, budget_s: float | None, noise: NoiseStop | None = None):
        self.repeats, self.budget_s, self.noise = max(repeats, 1), budget_s, noise
        self.times: list[float] = []
        # Running sums: the rule is asked after every launch, so it must not re-read them all.
        self._sum = self._sum_sq = 0.0
        self.start = time.perf_counter()
        self.stopped_by: StopReason | None = None
        #: The noise statistic when the series stopped (NaN until then).
        self.final_noise_pct = math.nan

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def add(self, ms: float) -> None:
        self.times.append(ms)
        self._sum += ms
        self._sum_sq += ms * ms

    def noise_pct(self) -> float:
        """:func:`relative_standard_error` of the times so far, from the running sums."""
        n = len(self.times)
        if n < 2 or not self._sum > 0:
            return math.inf
        mean = self._sum / n
        var = max(self._sum_sq - n * mean * mean, 0.0) / (n - 1)
        return 100.0 * math.sqrt(var / n) / mean

    def cancel(self) -> None:
        self.stopped_by = StopReason.CANCELLED

    def batch(self, held_batch: int) -> int:
        """Launches to queue before the next look at the rule (a backend that batches)."""
        if self.budget_s is not None or self.noise is not None:
            return 8
        return max(1, min(self.repeats - len(self.times), held_batch))

    def due(self) -> bool:
        """Whether another launch is due; when not, :attr:`stopped_by` is set."""
        if self.stopped_by is not None:
            return False
        count, elapsed = len(self.times), self.elapsed()
        reason = None
        if self.noise is not None:
            noise = self.noise
            if count >= max(MIN_LAUNCHES, NOISE_MIN_LAUNCHES) and elapsed >= noise.min_s \
                    and self.noise_pct() < noise.pct:
                reason = StopReason.NOISE
            elif count >= MIN_LAUNCHES and elapsed >= noise.max_s:
                reason = StopReason.MAX_TIME
        elif self.budget_s is not None:
            if count >= MIN_LAUNCHES and elapsed >= self.budget_s:
                reason = StopReason.BUDGET
        elif count >= self.repeats:
            reason = StopReason.REPEATS
        if reason is None and count >= MAX_LAUNCHES:
            reason = StopReason.LIMIT
        if reason is not None:
            self.stopped_by = reason
            self.final_noise_pct = relative_standard_error(self.times)
            return False
        return True
