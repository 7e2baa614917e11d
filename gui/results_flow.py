"""The results-file flow: open (dialog, recent files, drag and drop), save, clear and
export, with what the user sees of it (dialogs, status bar, Log).

:class:`ResultsFlow` drives :class:`~gui.results_files.ResultsFiles` (which holds the
records, the journal and the recent-files list) for the window.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication, QFileDialog

from engine.results.records import ResultRecord

from . import dialogs
from .export import ExportDialog, export_chart, export_paths
from .results_files import ResultsFileError
from .theme import ChartTheme

if TYPE_CHECKING:
    from .main_window import MainWindow

RESULTS_FILTER = "Results (*.json *.csv);;JSON (*.json);;CSV (*.csv)"


class ResultsFlow(QObject):
    """Opens, saves, clears and exports results for the window (see the module)."""

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window
        self.files = window.files
        self.files.recent_changed.connect(self.rebuild_recent_menu)
        self.files.opened.connect(self._opened)
        self.files.open_failed.connect(self._failed)
        self.files.loading_changed.connect(self._loading_changed)
        self.files.log.connect(window.log.append)

    def _status(self, text: str, ms: int = 0) -> None:
        self.window.statusBar().showMessage(text, ms)

    # --- open ------------------------------------------------------------------------

    def open(self, path: str | Path) -> bool:
        """Read a results file now and add its records to the charts and table (replacing
        an earlier opening of the same file).  A bad file gives a dialog and returns
        False.  This waits for the read (scripts, tests); the window's own ways of
        opening files use :meth:`open_in_background`."""
        path = Path(path)
        try:
            recs, skipped = self.files.open(path)
        except ResultsFileError as exc:
            self._failed(str(path), str(exc))
            return False
        self._opened(str(path), recs, skipped)
        return True

    def open_in_background(self, path: str | Path) -> bool:
        """Open a results file without waiting: it is read on a thread of its own, and
        its records (or an error dialog) come when it is read.  False, with the dialog
        shown already, when it cannot be read at all (missing, a folder, a pipe)."""
        return self.files.open_in_background(path)

    def _opened(self, path: str, recs: list[ResultRecord], skipped: list[str]) -> None:
        log = self.window.log
        name = Path(path).name
        log.append("info", f"opened {name}: {len(recs)} results")
        self.window.devices.set_run_infos(self.files.environments)
        if skipped:
            shown = "; ".join(skipped[:5]) + (f"; and {len(skipped) - 5} more"
                                              if len(skipped) > 5 else "")
            log.append("warning", f"{name}: skipped {len(skipped)} record"
                                  f"{'s' if len(skipped) != 1 else ''}: {shown}")
        self._status(f"Opened {name} ({len(recs)} results"
                     + (f", {len(skipped)} skipped: see the Log" if skipped else "") + ")", 8000)

    def _failed(self, path: str, message: str) -> None:
        self.window.log.append("error", f"cannot open results: {message}")  # names the file
        if not self.window.closing:
            dialogs.show_error(self.window, "Cannot open results", message)

    def _loading_changed(self) -> None:
        names = [p.name for p in self.files.loading.values()]
        bar = self.window.statusBar()
        if names:
            bar.showMessage(f"Reading {', '.join(names)}…")
        elif bar.currentMessage().startswith("Reading "):
            bar.clearMessage()

    def open_dialog(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self.window, "Open results",
                                                self.files.last_dir("results"), RESULTS_FILTER)
        for p in paths:
            self.files.remember_dir("results", p)
            self.open_in_background(p)

    def rebuild_recent_menu(self) -> None:
        menu = self.window.recent_menu
        menu.clear()
        files = self.files.recent()
        for f in files:
            act = menu.addAction(Path(f).name)
            act.setToolTip(f)
            act.setStatusTip(f)
            act.triggered.connect(lambda _=False, p=f: self.open_recent(p))
        if files:
            menu.addSeparator()
            menu.addAction("Clear list", self.files.clear_recent)
        menu.setEnabled(bool(files))

    def open_recent(self, path: str) -> None:
        if not os.path.lexists(path):
            dialogs.show_error(self.window, "Cannot open results", f"{path} no longer exists.")
            self.files.forget(path)
            return
        self.open_in_background(path)

    @staticmethod
    def dropped(event) -> list[str]:
        """The results files (.json, .csv) a drag carries."""
        md = event.mimeData()
        if not md.hasUrls():
            return []
        return [u.toLocalFile() for u in md.urls()
                if u.isLocalFile() and Path(u.toLocalFile()).suffix.lower() in (".json", ".csv")]

    # --- save, clear -----------------------------------------------------------------

    def save(self, path: str | Path) -> bool:
        path = Path(path)
        try:
            n = self.files.save(path)
        except ResultsFileError as exc:
            dialogs.show_error(self.window, "Cannot save results", str(exc))
            return False
        self._status(f"Saved {n} results to {path.name}", 8000)
        return True

    def save_dialog(self) -> None:
        if not len(self.window.store):
            dialogs.show_error(self.window, "Nothing to save", "There are no results yet.")
            return
        start = Path(self.files.last_dir("results")) / "results.csv"
        path, selected = QFileDialog.getSaveFileName(self.window, "Save results", str(start),
                                                     RESULTS_FILTER)
        if not path:
            return
        if Path(path).suffix.lower() not in (".csv", ".json"):
            path += ".json" if "JSON" in selected else ".csv"
        self.files.remember_dir("results", path)
        self.save(path)

    def clear(self) -> None:
        if self.window.running:
            return
        self.files.clear()

    # --- charts export ---------------------------------------------------------------

    def export_charts(self, kinds: list[str], path: str | Path, width: int, height: int
                      ) -> list[Path]:
        """Save charts as PNG/SVG (by suffix) at ``width``×``height``; the written paths."""
        charts = self.window.charts
        charts.redraw()
        theme = ChartTheme.from_palette(QApplication.palette())
        out = []
        for kind, p in export_paths(path, kinds).items():
            out.append(export_chart(kind, charts.series, charts.options_now(), p,
                                    width, height, theme))
        return out

    def export_dialog(self) -> None:
        start = self.files.last_dir("export") or str(Path.home())
        dlg = ExportDialog(self.window.charts.current_kind, start, self.window)
        if dlg.exec() != ExportDialog.DialogCode.Accepted:
            return
        kinds, path, w, h = dlg.choice()
        try:
            written = self.export_charts(kinds, path, w, h)
        except (ValueError, OSError) as exc:
            dialogs.show_error(self.window, "Cannot export", str(exc))
            return
        self.files.remember_dir("export", path)
        self._status(f"Exported {', '.join(p.name for p in written)}", 8000)
