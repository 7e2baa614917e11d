"""What each engine of a run did when: setup, compile, verify, check and timing intervals.

The dispatcher (:mod:`engine.run.dispatch`) fills a :class:`Timeline` from its engines'
``phase`` and ``result`` events, so that a share run's idle engines show: ``bench
--timeline`` prints :meth:`Timeline.text`, ``benchmarks/multi_gpu.py`` writes
:meth:`Timeline.to_json` beside its records.
"""
from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from enum import StrEnum

from engine.run.events import Phase


class Activity(StrEnum):
    """What an engine did in an interval: a :class:`~engine.run.events.Phase` of an item,
    or a task's setup before its first item (inputs made and uploaded, kernels built at
    once by a backend that can)."""

    SETUP = "setup"
    COMPILE = Phase.COMPILE.value
    VERIFY = Phase.VERIFY.value
    CHECK = Phase.CHECK.value
    TIME = Phase.TIME.value


#: One character per activity in :meth:`Timeline.text` ('.' is idle).
MARKS = {Activity.SETUP: "s", Activity.COMPILE: "c", Activity.VERIFY: "v",
         Activity.CHECK: "k", Activity.TIME: "#"}


@dataclass(frozen=True)
class Interval:
    """``engine`` did ``activity`` (on ``item``, a kernel label at a shape) from
    ``start_s`` to ``end_s``, seconds since the run started."""

    engine: str
    activity: Activity
    start_s: float
    end_s: float
    item: str = ""


class Timeline:
    """Intervals per engine, thread-safe: each engine's events come from its own thread."""

    def __init__(self, clock=time.perf_counter):
        self._clock = clock
        self.t0 = clock()
        self.intervals: list[Interval] = []
        #: Per engine: the activity under way, its item and start.
        self._open: dict[str, tuple[Activity, str, float]] = {}
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._clock() - self.t0

    def begin(self, engine: str, activity: Activity, item: str = "") -> None:
        """``engine`` starts ``activity`` now (what it did before ends here)."""
        with self._lock:
            t = self.now()
            self._close(engine, t)
            self._open[engine] = (Activity(activity), item, t)

    def end(self, engine: str) -> None:
        """``engine``'s activity ends now (an item's result, a task's end)."""
        with self._lock:
            self._close(engine, self.now())

    def _close(self, engine: str, t: float) -> None:
        was = self._open.pop(engine, None)
        if was is not None:
            activity, item, start = was
            self.intervals.append(Interval(engine, activity, start, max(t, start), item))

    def engines(self) -> list[str]:
        with self._lock:
            return sorted({i.engine for i in self.intervals})

    def span_s(self) -> float:
        """From the run's start to the last interval's end."""
        with self._lock:
            return max((i.end_s for i in self.intervals), default=0.0)

    def busy_s(self, engine: str) -> float:
        """Seconds ``engine`` was doing something (any activity)."""
        with self._lock:
            return sum(i.end_s - i.start_s for i in self.intervals if i.engine == engine)

    def seconds_by_activity(self, engine: str) -> dict[Activity, float]:
        with self._lock:
            out: dict[Activity, float] = {}
            for i in self.intervals:
                if i.engine == engine:
                    out[i.activity] = out.get(i.activity, 0.0) + i.end_s - i.start_s
            return out

    def idle_tail_s(self) -> dict[str, float]:
        """Per engine: how long before the run's last interval ended it had nothing to do."""
        span = self.span_s()
        with self._lock:
            last: dict[str, float] = {}
            for i in self.intervals:
                last[i.engine] = max(last.get(i.engine, 0.0), i.end_s)
        return {e: span - t for e, t in last.items()}

    def text(self, width: int = 72) -> str:
        """One row per engine, one character per ``span / width`` seconds: the activity that
        took most of that slice (``#`` timing, ``c`` compile, ``v`` verify, ``k`` check,
        ``s`` setup, ``.`` idle), then its busy share and idle tail."""
        span = self.span_s()
        if span <= 0:
            return "(no engine activity recorded)"
        step = span / width
        names = self.engines()
        tails = self.idle_tail_s()
        pad = max(len(n) for n in names)
        with self._lock:
            intervals = list(self.intervals)
        rows = []
        for name in names:
            mine = [i for i in intervals if i.engine == name]
            cells = []
            for c in range(width):
                lo, hi = c * step, (c + 1) * step
                cover: dict[Activity, float] = {}
                for i in mine:
                    overlap = min(hi, i.end_s) - max(lo, i.start_s)
                    if overlap > 0:
                        cover[i.activity] = cover.get(i.activity, 0.0) + overlap
                busy = sum(cover.values())
                cells.append(MARKS[max(cover, key=cover.get)] if busy >= step / 2 else ".")
            busy_s = sum(i.end_s - i.start_s for i in mine)
            rows.append(f"{name:<{pad}} |{''.join(cells)}| busy {100 * busy_s / span:3.0f}%, "
                        f"idle at the end {tails.get(name, 0.0):.1f} s")
        end = f"{span:.1f} s"
        legend = (" " * (pad + 2) + "0 s" + " " * max(1, width - 3 - len(end)) + end + "\n"
                  "# timing  c compile  v verify  k check  s setup (inputs, builds)  . idle")
        return "\n".join(rows + [legend])

    def to_json(self) -> dict:
        """The intervals and the per-engine sums, for a file."""
        names = self.engines()
        return {"span_s": self.span_s(),
                "engines": {n: {"busy_s": self.busy_s(n),
                                "by_activity": {str(k): v for k, v in
                                                self.seconds_by_activity(n).items()},
                                "idle_at_end_s": self.idle_tail_s().get(n, 0.0)}
                            for n in names},
                "intervals": [dict(asdict(i), activity=str(i.activity)) for i in self.intervals]}
