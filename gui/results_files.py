"""Which results are shown and where they came from: the live run, opened files, saving.

:class:`ResultsFiles` owns the :class:`~gui.results_store.ResultStore`'s sources: a live
run's records (source ``""``, renamed ``run N (hh:mm)`` when the next run keeps them),
each opened results file under a short unique name (the overlay source), results
restored from a crashed session, saving, the recent-files list and the last directories
used.  Every live record is journaled (:mod:`gui.journal`) until it is safe.  It shows
no dialogs: problems come back as :class:`engine.results.records.ResultsFileError` (or the
``open_failed`` signal) with a message the window shows verbatim.

Results files are read with :func:`engine.results.records.load_report`: only regular files
(a named pipe is refused at once, before any thread is involved), each record checked
field by field, bad records skipped with their reasons.  The window reads them on a
thread of their own (:meth:`ResultsFiles.open_in_background`), one per file, so a slow
or stuck file system holds neither the window nor later loads, nor the app's exit.
"""
from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from engine.results import environment as env_block, records
from engine.common.files import check_regular_file
from engine.measure.backends import DeviceInfo
from engine.results.environment import Environment
from engine.results.records import ResultRecord, ResultsFileError

from .journal import OrphanJournal, SessionJournal
from .results_store import ResultStore
from .settings import AppSettings

__all__ = ["ResultsFileError", "ResultsFiles", "read_results"]


def read_results(path: Path) -> tuple[list[ResultRecord], list[str]]:
    """A results file's valid records and the reasons others were skipped.

    Raises
    ------
    ResultsFileError
        Not a regular file, unreadable, not a results file, or no valid record in it.
    """
    got = read_results_file(path)
    return got.records, got.skipped


def read_results_file(path: Path) -> records.ResultsFile:
    """:func:`read_results` with the file's environment block (see there)."""
    try:
        got = records.load_file(path)
        recs = got.records
    except ResultsFileError:
        raise
    except ValueError as exc:
        raise ResultsFileError(str(exc)) from None
    except OSError as exc:  # e.g. unreadable
        raise ResultsFileError(f"{path.name}: {exc.strerror or exc}") from None
    if not recs:
        raise ResultsFileError(f"{path.name} holds no results.")
    return got


class ResultsFiles(QObject):
    """The store's sources: the live run and opened files; saving and recent files.

    Parameters
    ----------
    journal
        Where live records are journaled; by default a :class:`SessionJournal` in the
        user-data folder.

    Signals
    -------
    recent_changed()
        The recent-files list changed (the window rebuilds its menu).
    opened(str, list, list)
        A file opened in the background was added: ``(path, records, skipped)``, the
        reasons of the records left out.
    open_failed(str, str)
        A file could not be opened: ``(path, message)``.
    loading_changed()
        A background load started or ended (see :attr:`loading`).
    log(str, str)
        ``(level, message)`` for the window's log (the journal stopped working).
    """

    recent_changed = Signal()
    opened = Signal(str, object, object)
    open_failed = Signal(str, str)
    loading_changed = Signal()
    log = Signal(str, str)
    #: Internal: a loader thread's ``(token, path, records, skipped, error)``.
    _read_done = Signal(object)

    def __init__(self, store: ResultStore, settings: AppSettings, parent: QObject | None = None,
                 journal: SessionJournal | None = None):
        super().__init__(parent)
        self.store = store
        self.settings = settings
        self._opened: dict[str, str] = {}   # resolved results file path → source name
        #: Each opened file's environment block (engine.results.environment), by source name.
        self.environments: dict[str, Environment] = {}
        self._live: list[ResultRecord] = []
        self._runs = 0                      # live runs started, for "run N" labels
        self._running = False
        self._kept_runs: set[int] = set()   # runs shown as "run N (hh:mm)"
        #: The shown runs' devices as their engines opened them (UUID, driver: the
        #: environment block of a saved file), by (backend, index).
        self._run_devices: dict[tuple[str, int], DeviceInfo] = {}
        #: The shown runs' (time budget, clock lock text), for the block's timing settings.
        self._run_timing: list[tuple[float | None, str]] = []
        self.journal = journal if journal is not None else SessionJournal(
            on_problem=lambda text: self.log.emit("warning", text))
        if hasattr(self.journal, "prepare"):
            self.journal.prepare()
        #: Background loads not finished yet: token → path.
        self.loading: dict[int, Path] = {}
        self._tokens = itertools.count(1)
        self._shut_down = False
        self._read_done.connect(self._background_read)

    # --- opened files ----------------------------------------------------------------

    def source_for(self, path: Path) -> str:
        """A short, unique name for a file's curves: the file name, or parent/name."""
        key = _key(path)
        if key in self._opened:
            return self._opened[key]
        name = path.name
        if name in self._taken():
            name = f"{path.parent.name}/{path.name}"
        return self._unique(name)

    def _taken(self) -> set[str]:
        return set(self._opened.values()) | {r.source for r in self.store.records}

    def _unique(self, name: str) -> str:
        taken = self._taken()
        n, base = 2, name
        while name in taken:
            name, n = f"{base} ({n})", n + 1
        return name

    def open(self, path: str | Path) -> tuple[list[ResultRecord], list[str]]:
        """Read a results file now (in the calling thread) and add its records to the
        store, replacing an earlier opening of the same file; put it first in the recent
        files.  Returns the records and the reasons records were skipped.

        Raises
        ------
        ResultsFileError
            The file is not a regular file, unreadable, not a results file, or holds no
            valid record.
        """
        path = Path(path)
        got = read_results_file(path)
        self._add_file(path, got.records, got)
        return got.records, got.skipped

    def _add_file(self, path: Path, recs: list[ResultRecord],
                  got: records.ResultsFile | None = None) -> None:
        source = self.source_for(path)
        if got is not None:
            # the file's environment block: the window's Run info (device panel)
            self.environments[source] = got.environment
            if got.environment_problem:
                self.log.emit("warning", f"{path.name}: {got.environment_problem}")
        for r in recs:
            # A file saved from an overlay keeps its own sources; a plain run gets the name.
            r.source = r.source or source
        self._opened[_key(path)] = source
        self.store.replace_where(lambda r: r.source != source, recs)
        self.add_recent(path)

    def open_in_background(self, path: str | Path) -> bool:
        """Start reading a results file on a thread of its own; ``opened`` or
        ``open_failed`` follows.  What can be told at once (missing, a folder, a named
        pipe, a device) is: ``open_failed`` is emitted before this returns False."""
        path = Path(path)
        try:
            check_regular_file(path, path.name, ResultsFileError)
        except ResultsFileError as exc:
            self.open_failed.emit(str(path), str(exc))
            return False
        token = next(self._tokens)
        self.loading[token] = path
        self.loading_changed.emit()
        # A daemon thread per file: a read that never returns (a file swapped for a pipe
        # after the check, a hung network mount) holds neither later loads nor the exit.
        threading.Thread(target=self._read_in_thread, args=(token, path), daemon=True,
                         name=f"results-loader-{token}").start()
        return True

    def _read_in_thread(self, token: int, path: Path) -> None:
        try:
            got = read_results_file(path)
            outcome = (token, path, got, "")
        except ResultsFileError as exc:
            outcome = (token, path, None, str(exc))
        except Exception as exc:  # noqa: BLE001  (a reader bug still becomes a message)
            outcome = (token, path, None,
                       f"{path.name}: unexpected error while reading: {type(exc).__name__}: {exc}")
        if self._shut_down:
            return
        try:
            self._read_done.emit(outcome)   # queued to the GUI thread
        except RuntimeError:
            pass                            # the window is gone already

    def _background_read(self, outcome) -> None:
        token, path, got, error = outcome
        if self._shut_down or self.loading.pop(token, None) is None:
            return
        self.loading_changed.emit()
        if error:
            self.open_failed.emit(str(path), error)
            return
        self._add_file(path, got.records, got)
        self.opened.emit(str(path), got.records, got.skipped)

    def shutdown(self) -> None:
        """Stop delivering background loads (their threads end on their own)."""
        self._shut_down = True
        self.loading.clear()

    def save(self, path: str | Path) -> int:
        """Write every shown record to ``path`` (.csv or .json); the number written.

        Raises
        ------
        ResultsFileError
            Unknown suffix, or the file cannot be written.
        """
        path = Path(path)
        try:
            records.save(self.store.records, path, environment=self.environment())
        except (ValueError, OSError) as exc:
            raise ResultsFileError(str(exc)) from None
        if not self._running:
            # The file holds every shown result: nothing left for the journal to keep.
            # (During a run, results still to come need it.)
            self.journal.done()
        self.add_recent(path)
        return len(self.store)

    def environment(self, recs: list[ResultRecord] | None = None) -> Environment:
        """The environment block of the shown records (or ``recs``), as ``bench --out``
        writes it: the runs' devices as opened (UUID, driver), their timing settings and
        clock lock."""
        recs = self.store.records if recs is None else recs
        budgets = {b for b, _ in self._run_timing}
        locks = [c for _, c in self._run_timing if c]
        timing = env_block.timing_of(recs, next(iter(budgets)) if len(budgets) == 1 else None,
                                     clock_lock="; ".join(dict.fromkeys(locks)))
        return env_block.collect(recs, list(self._run_devices.values()), timing)

    def run_settings(self, budget_s: float | None, clock_lock: str) -> None:
        """The starting run's time budget and what it asked of the clocks (the block's
        timing settings)."""
        self._run_timing.append((budget_s, clock_lock))

    def run_devices(self, devices: list[DeviceInfo]) -> None:
        """The run's devices as its engines opened them (the ``started`` event's)."""
        for info in devices:
            self._run_devices[(info.backend, info.index)] = info

    def clear(self) -> None:
        """Forget every shown record: the live run's, the opened files' and restored ones."""
        self.store.clear()
        self._opened.clear()
        self._live = []
        self._kept_runs.clear()
        self._run_devices.clear()
        self._run_timing.clear()
        self.journal.done()

    def close(self) -> None:
        """The window closes cleanly: the journal is done."""
        self.shutdown()
        self.journal.done()

    # --- results of a crashed session ---------------------------------------------------

    def restore(self, orphans: list[OrphanJournal]) -> list[ResultRecord]:
        """Show the records of crashed sessions' journals, each session (each run, where
        it had several) as an overlay source ``restored session (date)``.  The journals
        are taken over (see :meth:`SessionJournal.adopt`).  Returns the records added."""
        added: list[ResultRecord] = []
        for orphan in orphans:
            if not self.journal.adopt(orphan.path):
                continue     # another window or instance restored it first
            label = orphan.label()
            for i, run in enumerate(orphan.runs, 1):
                source = self._unique(label if len(orphan.runs) == 1 else f"{label} · run {i}")
                for r in run:
                    r.source = source
                self.store.add(run)
                added.extend(run)
        return added

    def file_sources(self) -> list[str]:
        """Sources other than the live run, in order of appearance."""
        return [s for s in self.store.sources() if s]

    # --- recent files and directories -------------------------------------------------

    def recent(self) -> list[str]:
        return self.settings.recent_files()

    def add_recent(self, path: str | Path) -> None:
        self.settings.add_recent(path)
        self.recent_changed.emit()

    def forget(self, path: str) -> None:
        """Drop one entry (e.g. a file that no longer exists) from the recent files."""
        files = [f for f in self.settings.recent_files() if f != path]
        self.settings.clear_recent()
        for f in reversed(files):
            self.settings.add_recent(f)
        self.recent_changed.emit()

    def clear_recent(self) -> None:
        self.settings.clear_recent()
        self.recent_changed.emit()

    def last_dir(self, kind: str) -> str:
        """The directory last used for ``kind`` (``results`` or ``export``), or ''."""
        return self.settings.last_dir(kind)

    def remember_dir(self, kind: str, path: str | Path) -> None:
        self.settings.set_last_dir(kind, Path(path).parent)

    # --- the live run ----------------------------------------------------------------

    @property
    def live_records(self) -> list[ResultRecord]:
        """The current (or last) run's records, in arrival order."""
        return self._live

    def begin_run(self, keep_previous: bool) -> None:
        """Make room for a new run: the last run's records become ``run N (hh:mm)`` when
        kept, else they go (opened files stay either way)."""
        if keep_previous:
            live = [r for r in self.store.records if not r.source]
            if live:
                label = f"run {self._runs} ({time.strftime('%H:%M')})"
                for r in live:
                    r.source = label
                self.store.replace_where(lambda r: True)
                self._kept_runs.add(self._runs)
        else:
            self.store.replace_where(lambda r: bool(r.source))
            self._run_devices.clear()        # the runs they described are gone
            self._run_timing.clear()
            # The last run's results left the window by choice: not to be restored either.
            if self._kept_runs:
                self.journal.drop(self._runs)
            else:
                self.journal.reset()     # nothing journaled is shown any more
        self._runs += 1
        self._live = []
        self._running = True

    def add_live(self, rec: ResultRecord) -> None:
        """One record of the running run (journaled before it is shown)."""
        self.journal.record(self._runs, rec)
        self._live.append(rec)
        self.store.add([rec])

    def live_changed(self) -> None:
        """The last run's records changed in place (a profile added counters): journal
        them again and tell the views."""
        if self._live and not self._running:
            self.journal.final(self._runs, self._live)
        self.store.touch()

    def finish_run(self, final: list[ResultRecord] | None) -> list[ResultRecord]:
        """The run ended: its final copies (speed-ups, % of cuBLAS filled in) replace the
        records shown while it ran.  Returns the run's records."""
        self._running = False
        if final is not None:
            live = {id(r) for r in self._live}
            self.store.replace_where(lambda r: id(r) not in live, final)
            self._live = list(final)
            if final:
                self.journal.final(self._runs, final)
        return self._live


def _key(path: Path) -> str:
    """One name per file however it is reached (``resolve`` fails on a loop of links)."""
    try:
        return str(path.resolve())
    except (OSError, RuntimeError):
        return os.path.abspath(path)
