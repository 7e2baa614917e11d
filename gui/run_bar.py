"""Run and Cancel, the progress bar ("i of n"), the current item and the ETA."""
from __future__ import annotations

import math

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QPushButton, QStyle, QWidget

from .labels import ElidedLabel


#: The progress bar is brought up to date at most this often during a run: QProgressBar
#: repaints the window synchronously whenever its text changes, which would cost one full
#: paint per result.
PROGRESS_REFRESH_MS = 100


#: Beyond this an estimate says only that it is long (a sweep of months is a mistake).
LONGEST_SHOWN_S = 100 * 86400


def format_duration(seconds: float | None) -> str:
    """``"42 s"``, ``"3 min 05 s"``, ``"1 h 02 min"``, ``"2 d 07 h"``; '' when unknown;
    ``"over 100 days"`` beyond :data:`LONGEST_SHOWN_S`."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return ""
    if seconds >= LONGEST_SHOWN_S:
        return f"over {LONGEST_SHOWN_S // 86400} days"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    return f"{s // 86400} d {s % 86400 // 3600:02d} h"


class RunBar(QWidget):
    """The run controls; the window connects the buttons and feeds the progress."""

    def __init__(self, parent=None):
        super().__init__(parent)
        style = self.style()
        self.run_button = QPushButton(style.standardIcon(QStyle.StandardPixmap.SP_MediaPlay), "Run")
        self.run_button.setObjectName("runButton")
        self.run_button.setToolTip("Run the configured sweep (F5)")
        self.cancel_button = QPushButton(style.standardIcon(QStyle.StandardPixmap.SP_MediaStop), "Cancel")
        self.cancel_button.setToolTip("Stop before the next launch; finished results are kept (Esc)")
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat("")  # "i of n" once a sweep has started
        self.progress.setTextVisible(True)
        self.progress.setFixedWidth(170)
        # Messages name files and devices: one line, "…" where it does not fit, the whole
        # message in the tooltip.
        self.status = ElidedLabel()
        self.status.setObjectName("runStatus")
        self.status.setMinimumWidth(120)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.setSpacing(8)
        layout.addWidget(self.run_button)
        layout.addWidget(self.cancel_button)
        layout.addWidget(self.progress)
        layout.addWidget(self.status, 1)
        self.running = False
        self._problem = False
        self._pending: tuple[int, int] | None = None     # (value, maximum) not shown yet
        self._refresh = QTimer(self)
        self._refresh.setSingleShot(True)
        self._refresh.setInterval(PROGRESS_REFRESH_MS)
        self._refresh.timeout.connect(self._show_progress)

    def _set_progress(self, value: int, maximum: int) -> None:
        """Show ``value`` of ``maximum`` within :data:`PROGRESS_REFRESH_MS`."""
        self._pending = (value, max(maximum, 1))
        if not self._refresh.isActive():
            self._refresh.start()

    def _show_progress(self) -> None:
        if self._pending is not None:
            value, maximum = self._pending
            self._pending = None
            if self.progress.maximum() != maximum or self.progress.minimum() != 0:
                self.progress.setRange(0, maximum)
            self.progress.setValue(value)

    def _target_maximum(self) -> int:
        return self._pending[1] if self._pending is not None else self.progress.maximum()

    def set_ready(self, problems: list[str], runs: int) -> None:
        """Between runs: enable Run when nothing is wrong, else say what is."""
        if self.running:
            return
        self._problem = bool(problems)
        self.run_button.setEnabled(not problems)
        self.status.setProperty("invalid", bool(problems))
        self.status.style().unpolish(self.status)
        self.status.style().polish(self.status)
        if problems:
            self.status.setText(problems[0])
            self.status.setToolTip("\n".join(problems))
        else:
            self.status.setText(f"Ready: {runs} run{'s' if runs != 1 else ''}")
            self.status.setToolTip("")

    def set_running(self, running: bool) -> None:
        self.running = running
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        if running:
            self._pending = None
            self._refresh.stop()
            self.progress.setFormat("%v of %m")
            self.status.setProperty("invalid", False)
            self.status.style().polish(self.status)
            self.progress.setRange(0, 0)  # busy until the engine says how many
            self.status.setText("Starting…")

    def started(self, total: int, where: str) -> None:
        self._pending = None
        self.progress.setFormat("%v of %m")
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(0)
        self.status.setText(f"{total} runs on {where}")

    def progressed(self, done: int, total: int, current: str, eta_s: float | None) -> None:
        self._set_progress(done, total)
        eta = format_duration(eta_s)
        # The ETA before the item's name: a long name is cut at the end ("…"), never the ETA.
        text = (f"Running {min(done + 1, total)} of {total}" + (f" · ETA {eta}" if eta else "")
                + f": {current}")
        self.status.setText(text)
        self.status.setToolTip(text)

    def result_in(self, done: int, total: int | None = None) -> None:
        """``done`` results are in (of ``total``, or of the total the run announced)."""
        self._set_progress(done, total if total is not None else self._target_maximum())

    def cancelling(self) -> None:
        """Cancel was pressed: say so, and do not offer it twice."""
        self.cancel_button.setEnabled(False)
        self.status.setText("Cancelling after the current launch…")

    def say(self, text: str) -> None:
        """A one-off status line (e.g. while the window closes)."""
        self.status.setText(text)
        self.status.setToolTip(text)

    def finished(self, text: str) -> None:
        self._refresh.stop()
        self._show_progress()
        self.set_running(False)
        if self.progress.maximum() == 0:
            self.progress.setRange(0, 1)
        self.status.setText(text)
        self.status.setToolTip(text)
