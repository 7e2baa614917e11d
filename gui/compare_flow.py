"""File ▸ Compare with…: the shown results against a results file (BASE).

Every shown record (each source apart: the live run, each opened file) is paired with the
chosen file's records by :func:`engine.results.compare.compare`, the rule of ``main.py
compare``. The results table then shows each row's NEW/BASE ratio and verdict, and the
compare chart colours its bars by verdict; overlays stay as they are. The comparison
follows the shown results (a new run, an opened file) until File ▸ Clear comparison.
The file is read on a thread of its own, so a slow file system never holds the window.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QFileDialog

from engine.results.compare import DEFAULT_THRESHOLD_PCT, Comparison, Pair, compare
from engine.results.records import ResultRecord

from . import dialogs
from .results_files import ResultsFileError, read_results
from .results_flow import RESULTS_FILTER

if TYPE_CHECKING:
    from .main_window import MainWindow

#: How long after the shown results change the comparison is worked out again (one pass
#: for a burst of rows in a sweep).
REFRESH_MS = 250


class CompareFlow(QObject):
    """Holds the compared file's records and keeps the table and chart up to date.

    Signals
    -------
    changed()
        A comparison was set, refreshed or cleared.
    """

    changed = Signal()
    #: Internal: a reader thread's ``(path, records, error)``.
    _read_done = Signal(object)

    def __init__(self, window: MainWindow, threshold_pct: float = DEFAULT_THRESHOLD_PCT):
        super().__init__(window)
        self.window = window
        self.threshold_pct = threshold_pct
        self.base: list[ResultRecord] | None = None
        self.base_path: Path | None = None
        #: One comparison per shown source, the last worked out.
        self.comparisons: dict[str, Comparison] = {}
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        window.store.changed.connect(self._store_changed)
        self._read_done.connect(self._background_read)

    @property
    def active(self) -> bool:
        return self.base is not None

    # --- choosing the file ---------------------------------------------------------------

    def choose(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Compare with results",
                                              self.window.files.last_dir("results"), RESULTS_FILTER)
        if path:
            self.window.files.remember_dir("results", path)
            self.compare_in_background(path)

    def compare_in_background(self, path: str | Path) -> None:
        path = Path(path)

        def read() -> None:
            try:
                recs = _read(path)
                self._read_done.emit((path, recs, ""))
            except ResultsFileError as exc:
                self._read_done.emit((path, None, str(exc)))
            except Exception as exc:  # noqa: BLE001  (any failure is a message, never a traceback)
                self._read_done.emit((path, None, f"{path.name}: {type(exc).__name__}: {exc}"))

        self.window.statusBar().showMessage(f"Reading {path.name} to compare…")
        threading.Thread(target=read, name="compare-read", daemon=True).start()

    def _background_read(self, done) -> None:
        path, recs, error = done
        if error:
            self._failed(error)
        else:
            self.set_base(path, recs)

    def compare_with(self, path: str | Path) -> bool:
        """Read ``path`` now and compare the shown results with it (scripts, tests); a
        bad file gives a message box and False."""
        path = Path(path)
        try:
            recs = _read(path)
        except ResultsFileError as exc:
            self._failed(str(exc))
            return False
        return self.set_base(path, recs)

    def _failed(self, message: str) -> None:
        self.window.statusBar().clearMessage()
        self.window.log.append("error", f"cannot compare: {message}")
        if not self.window.closing:
            dialogs.show_error(self.window, "Cannot compare", message)

    def set_base(self, path: Path, recs: list[ResultRecord]) -> bool:
        if not len(self.window.store):
            self._failed("There are no results to compare yet: run or open results first, "
                         f"then compare them with {path.name}.")
            return False
        self.base, self.base_path = recs, path
        self.refresh()
        log = self.window.log
        total = self._total()
        if not total:
            log.append("warning", f"compare with {path.name}: no shown result has a match in it")
        for comp in self.comparisons.values():
            for d in comp.differences:
                log.append("info", f"compare with {path.name}: {d.what} differs: "
                                   f"BASE {d.base} · shown {d.new}")
        self.window.statusBar().showMessage(
            f"Compared with {path.name}: " + (self._summary() if total else "no result in common"), 10000)
        return True

    def clear(self) -> None:
        self.base, self.base_path = None, None
        self.comparisons = {}
        self._timer.stop()
        self.window.table.set_comparison(None)
        self.window.charts.set_verdicts((), "")
        self.changed.emit()

    # --- keeping it up to date -----------------------------------------------------------

    def _store_changed(self) -> None:
        if self.active and not self._timer.isActive():
            self._timer.start()

    def refresh(self) -> None:
        """Work the comparison out again over the shown results, one source at a time."""
        if self.base is None:
            return
        by_source: dict[str, list[ResultRecord]] = {}
        for r in self.window.store.records:
            by_source.setdefault(r.source, []).append(r)
        self.comparisons = {src: compare(self.base, recs, self.threshold_pct)
                            for src, recs in by_source.items()}
        pairs: dict[int, Pair] = {id(p.new): p for c in self.comparisons.values() for p in c.pairs}
        self.window.table.set_comparison(pairs)
        self.window.charts.set_verdicts(tuple((i, p.verdict.value, p.ratio) for i, p in pairs.items()),
                                        self.base_path.name if self.base_path else "")
        self.changed.emit()

    def _total(self) -> int:
        return sum(len(c.pairs) for c in self.comparisons.values())

    def _summary(self) -> str:
        counts: dict[str, int] = {}
        for c in self.comparisons.values():
            for v, n in c.counts.items():
                counts[v.name] = counts.get(v.name, 0) + n
        return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


def _read(path: Path) -> list[ResultRecord]:
    """The valid records of a results file (ResultsFileError saying why not)."""
    if path.is_dir():
        raise ResultsFileError(f"{path.name} is a folder, not a results file.")
    return read_results(path)[0]
