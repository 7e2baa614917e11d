"""The records the window shows: the live run's plus any opened results files.

One list, shared by the results table and the charts.  Records arrive one at a
time from a run (through :mod:`gui.run_controller`) or in bulk from a file; views
listen to the signals and never keep their own copy.
"""
from __future__ import annotations

import math
from typing import Iterable

from PySide6.QtCore import QObject, Signal

from engine.results.records import ResultRecord

#: What a live run's records are called in labels (their ``source`` is empty).
LIVE_SOURCE_NAME = "this session"

PLOTTABLE = ("ok", "failed", "unverified")


def is_plottable(rec: ResultRecord) -> bool:
    """Whether a record has a timing worth a chart point."""
    return rec.status in PLOTTABLE and math.isfinite(rec.median_ms) and rec.median_ms > 0


def source_name(rec: ResultRecord) -> str:
    return rec.source or LIVE_SOURCE_NAME


class ResultStore(QObject):
    """An ordered list of :class:`ResultRecord` with change signals.

    Signals
    -------
    rows_appended(first, count)
        ``count`` records were appended at index ``first``.
    reset()
        The list changed in some other way (cleared, a source replaced).
    values_changed()
        Records changed in place (e.g. the engine filled in speed-ups at the end).
    changed()
        Any of the above; the charts only need this one.
    """

    rows_appended = Signal(int, int)
    reset = Signal()
    values_changed = Signal()
    changed = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._records: list[ResultRecord] = []

    def __len__(self) -> int:
        return len(self._records)

    @property
    def records(self) -> list[ResultRecord]:
        """The records, in arrival order (do not mutate the list)."""
        return self._records

    def add(self, records: Iterable[ResultRecord]) -> None:
        new = list(records)
        if not new:
            return
        first = len(self._records)
        self._records.extend(new)
        self.rows_appended.emit(first, len(new))
        self.changed.emit()

    def replace_where(self, keep, new: Iterable[ResultRecord] = ()) -> None:
        """Keep the records for which ``keep(rec)`` is true, then append ``new``."""
        self._records = [r for r in self._records if keep(r)] + list(new)
        self.reset.emit()
        self.changed.emit()

    def clear(self) -> None:
        self.replace_where(lambda r: False)

    def touch(self) -> None:
        """Tell views that records changed in place."""
        self.values_changed.emit()
        self.changed.emit()

    def sources(self) -> list[str]:
        """Distinct sources in order of first appearance ('' is the live run)."""
        seen: dict[str, None] = {}
        for r in self._records:
            seen.setdefault(r.source, None)
        return list(seen)
