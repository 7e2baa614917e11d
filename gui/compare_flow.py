"""File ▸ Compare with…: the shown results against a results file (BASE).

Every shown record (each source apart: the live run, each opened file) is paired with the
chosen file's records by :func:`engine.results.compare.compare`, the rule of ``main.py
compare``. The results table then shows each row's NEW/BASE ratio and verdict, and the
compare chart colours its bars by verdict; overlays stay as they are. The comparison
follows the shown results (a new run, an opened file) until File ▸ Clear comparison.
The file is read on a thread of its own, so a slow file system never holds the window.

The threshold (File ▸ Compare threshold, ``compare --threshold``'s default) applies at
once to the comparison shown. The Log lists how the two runs' conditions differ, as the
command's header does: the files' environment blocks (GPU UUID, driver, app version,
timing settings, clock lock, kernel file hashes) and the records' clocks and power.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QDoubleSpinBox, QFileDialog, QHBoxLayout, QLabel, QWidget, QWidgetAction

from engine.results.compare import DEFAULT_THRESHOLD_PCT, Comparison, Pair, compare
from engine.results.environment import Environment
from engine.results.records import ResultRecord

from . import dialogs
from .results_files import ResultsFileError, read_results_file
from .results_flow import RESULTS_FILTER

if TYPE_CHECKING:
    from .main_window import MainWindow

#: How long after the shown results change the comparison is worked out again (one pass
#: for a burst of rows in a sweep).
REFRESH_MS = 250
#: The threshold control's range in per cent (compare's --threshold accepts up to 1000).
THRESHOLD_RANGE = (0.0, 1000.0)


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
        self.base: list[ResultRecord] | None = None
        self.base_path: Path | None = None
        #: The compared file's environment block (None: an older file without one).
        self.base_environment: Environment | None = None
        #: The shown sources' environment blocks, by source (see _environment_of).
        self._environments: dict[str, Environment | None] = {}
        self.threshold = QDoubleSpinBox()
        self.threshold.setRange(*THRESHOLD_RANGE)
        self.threshold.setDecimals(1)
        self.threshold.setSingleStep(0.5)
        self.threshold.setSuffix(" %")
        self.threshold.setValue(threshold_pct)
        self.threshold.setToolTip(
            "The least change of the median time that counts as FASTER or SLOWER, beside "
            f"the noise of both records (compare --threshold; default {DEFAULT_THRESHOLD_PCT:g}%)")
        self.threshold.valueChanged.connect(self._threshold_changed)
        #: The File menu's "Compare threshold [ 5.0 % ]" row.
        self.threshold_action = QWidgetAction(self)
        row = QWidget()
        layout = QHBoxLayout(row)
        layout.setContentsMargins(28, 2, 8, 2)
        layout.addWidget(QLabel("Compare threshold"))
        layout.addWidget(self.threshold)
        self.threshold_action.setDefaultWidget(row)
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

    @property
    def threshold_pct(self) -> float:
        return self.threshold.value()

    @threshold_pct.setter
    def threshold_pct(self, pct: float) -> None:
        self.threshold.setValue(pct)

    def _threshold_changed(self, _pct: float) -> None:
        if self.base is None:
            return
        self.refresh()
        self.window.statusBar().showMessage(
            f"Compared with {self.base_path.name if self.base_path else 'BASE'}: "
            + (self._summary() if self._total() else "no result in common")
            + f" (threshold {self.threshold_pct:g}%)", 10000)

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
                got = _read(path)
                self._read_done.emit((path, got, ""))
            except ResultsFileError as exc:
                self._read_done.emit((path, None, str(exc)))
            except Exception as exc:  # noqa: BLE001  (any failure is a message, never a traceback)
                self._read_done.emit((path, None, f"{path.name}: {type(exc).__name__}: {exc}"))

        self.window.statusBar().showMessage(f"Reading {path.name} to compare…")
        threading.Thread(target=read, name="compare-read", daemon=True).start()

    def _background_read(self, done) -> None:
        path, got, error = done
        if error:
            self._failed(error)
        else:
            self._set_file(path, got)

    def compare_with(self, path: str | Path) -> bool:
        """Read ``path`` now and compare the shown results with it (scripts, tests); a
        bad file gives a message box and False."""
        path = Path(path)
        try:
            got = _read(path)
        except ResultsFileError as exc:
            self._failed(str(exc))
            return False
        return self._set_file(path, got)

    def _set_file(self, path: Path, got) -> bool:
        """A read results file (:class:`engine.results.records.ResultsFile`) as BASE."""
        if got.environment_problem:
            self.window.log.append("warning", f"compare with {path.name}: its environment "
                                              f"block is not read: {got.environment_problem}")
        env = None if got.environment == Environment() else got.environment
        return self.set_base(path, got.records, env)

    def _failed(self, message: str) -> None:
        self.window.statusBar().clearMessage()
        self.window.log.append("error", f"cannot compare: {message}")
        if not self.window.closing:
            dialogs.show_error(self.window, "Cannot compare", message)

    def set_base(self, path: Path, recs: list[ResultRecord],
                 environment: Environment | None = None) -> bool:
        """Compare the shown results with ``recs`` (the file at ``path``, whose environment
        block is ``environment``: None for an older file without one)."""
        if not len(self.window.store):
            self._failed("There are no results to compare yet: run or open results first, "
                         f"then compare them with {path.name}.")
            return False
        self.base, self.base_path, self.base_environment = recs, path, environment
        self._environments = {}
        self.refresh()
        log = self.window.log
        total = self._total()
        if not total:
            log.append("warning", f"compare with {path.name}: no shown result has a match in it")
        for source, comp in self.comparisons.items():
            shown = source or "this run"
            for d in comp.differences:
                log.append("info", f"compare with {path.name}: {d.what} differs: "
                                   f"BASE {d.base} · {shown} {d.new}")
        self.window.statusBar().showMessage(
            f"Compared with {path.name}: " + (self._summary() if total else "no result in common"), 10000)
        return True

    def clear(self) -> None:
        self.base, self.base_path, self.base_environment = None, None, None
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
        self.comparisons = {src: compare(self.base, recs, self.threshold_pct,
                                         self.base_environment, self._environment_of(src, recs))
                            for src, recs in by_source.items()}
        pairs: dict[int, Pair] = {id(p.new): p for c in self.comparisons.values() for p in c.pairs}
        self.window.table.set_comparison(pairs)
        self.window.charts.set_verdicts(tuple((i, p.verdict.value, p.ratio) for i, p in pairs.items()),
                                        self.base_path.name if self.base_path else "")
        self.changed.emit()

    def _environment_of(self, source: str, recs: list[ResultRecord]) -> Environment | None:
        """The shown side's environment block: an opened file's own (None: it has none),
        else that of the window's runs, as saving them would write it. Worked out once a
        source and comparison (it runs ``git describe`` and hashes kernel files): only
        :meth:`set_base`'s Log lines use the differences."""
        if source not in self._environments:
            self._environments[source] = self._environment_now(source, recs)
        return self._environments[source]

    def _environment_now(self, source: str, recs: list[ResultRecord]) -> Environment | None:
        files = self.window.files
        if source in files.environments:
            env = files.environments[source]
            return None if env == Environment() else env
        return files.environment(recs)

    def _total(self) -> int:
        return sum(len(c.pairs) for c in self.comparisons.values())

    def _summary(self) -> str:
        counts: dict[str, int] = {}
        for c in self.comparisons.values():
            for v, n in c.counts.items():
                counts[v.name] = counts.get(v.name, 0) + n
        return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


def _read(path: Path):
    """A results file's valid records and environment block (a
    :class:`engine.results.records.ResultsFile`; ResultsFileError saying why not)."""
    if path.is_dir():
        raise ResultsFileError(f"{path.name} is a folder, not a results file.")
    return read_results_file(path)
