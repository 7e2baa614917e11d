"""Which results are shown and where they came from: the live run, opened files, saving.

:class:`ResultsFiles` owns the :class:`~gui.results_store.ResultStore`'s sources: a live
run's records (source ``""``, renamed ``run N (hh:mm)`` when the next run keeps them),
each opened results file under a short unique name (the overlay source), saving, the
recent-files list and the last directories used.  It shows no dialogs: problems come
back as :class:`engine.records.ResultsFileError` with a message the window shows verbatim.
"""
from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from engine import records
from engine.records import ResultRecord, ResultsFileError

from .results_store import ResultStore
from .settings import AppSettings

__all__ = ["ResultsFileError", "ResultsFiles"]


class ResultsFiles(QObject):
    """The store's sources: the live run and opened files; saving and recent files.

    Signals
    -------
    recent_changed()
        The recent-files list changed (the window rebuilds its menu).
    """

    recent_changed = Signal()

    def __init__(self, store: ResultStore, settings: AppSettings, parent: QObject | None = None):
        super().__init__(parent)
        self.store = store
        self.settings = settings
        self._opened: dict[str, str] = {}   # resolved results file path → source name
        self._live: list[ResultRecord] = []
        self._runs = 0                      # live runs started, for "run N" labels

    # --- opened files ----------------------------------------------------------------

    def source_for(self, path: Path) -> str:
        """A short, unique name for a file's curves: the file name, or parent/name."""
        key = str(path.resolve())
        if key in self._opened:
            return self._opened[key]
        name = path.name
        taken = set(self._opened.values()) | {r.source for r in self.store.records}
        if name in taken:
            name = f"{path.parent.name}/{path.name}"
        n = 2
        base = name
        while name in taken:
            name, n = f"{base} ({n})", n + 1
        return name

    def open(self, path: str | Path) -> list[ResultRecord]:
        """Add a results file's records to the store, replacing an earlier opening of the
        same file, and put it first in the recent files.  Returns the records.

        Raises
        ------
        ResultsFileError
            The file is unreadable, not a results file, or empty.
        """
        path = Path(path)
        try:
            recs = records.load(path)
        except ValueError as exc:
            raise ResultsFileError(str(exc)) from None
        except OSError as exc:  # e.g. a directory or unreadable file
            raise ResultsFileError(f"{path.name}: {exc.strerror or exc}") from None
        if not recs:
            raise ResultsFileError(f"{path.name} holds no results.")
        source = self.source_for(path)
        for r in recs:
            # A file saved from an overlay keeps its own sources; a plain run gets the name.
            r.source = r.source or source
        self._opened[str(path.resolve())] = source
        self.store.replace_where(lambda r: r.source != source, recs)
        self.add_recent(path)
        return recs

    def save(self, path: str | Path) -> int:
        """Write every shown record to ``path`` (.csv or .json); the number written.

        Raises
        ------
        ResultsFileError
            Unknown suffix, or the file cannot be written.
        """
        path = Path(path)
        try:
            records.save(self.store.records, path)
        except (ValueError, OSError) as exc:
            raise ResultsFileError(str(exc)) from None
        self.add_recent(path)
        return len(self.store)

    def clear(self) -> None:
        """Forget every shown record: the live run's and the opened files'."""
        self.store.clear()
        self._opened.clear()
        self._live = []

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
        return str(self.settings.value(f"dirs/{kind}", "") or "")

    def remember_dir(self, kind: str, path: str | Path) -> None:
        self.settings.set_value(f"dirs/{kind}", str(Path(path).parent))

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
        else:
            self.store.replace_where(lambda r: bool(r.source))
        self._runs += 1
        self._live = []

    def add_live(self, rec: ResultRecord) -> None:
        """One record of the running run."""
        self._live.append(rec)
        self.store.add([rec])

    def finish_run(self, final: list[ResultRecord] | None) -> list[ResultRecord]:
        """The run ended: its final copies (speed-ups, % of cuBLAS filled in) replace the
        records shown while it ran.  Returns the run's records."""
        if final is not None:
            live = {id(r) for r in self._live}
            self.store.replace_where(lambda r: id(r) not in live, final)
            self._live = list(final)
        return self._live
