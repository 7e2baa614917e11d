"""Run and Cancel, the progress bar ("i of n"), the current item and the ETA."""
from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QProgressBar, QPushButton, QSizePolicy,
                               QStyle, QWidget)


def format_duration(seconds: float | None) -> str:
    """``"42 s"``, ``"3 min 05 s"``, ``"1 h 02 min"``; '' when unknown."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return ""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


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
        self.status = QLabel()
        self.status.setObjectName("runStatus")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
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
            self.progress.setFormat("%v of %m")
            self.status.setProperty("invalid", False)
            self.status.style().polish(self.status)
            self.progress.setRange(0, 0)  # busy until the engine says how many
            self.status.setText("Starting…")

    def started(self, total: int, where: str) -> None:
        self.progress.setFormat("%v of %m")
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(0)
        self.status.setText(f"{total} runs on {where}")

    def progressed(self, done: int, total: int, current: str, eta_s: float | None) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        eta = format_duration(eta_s)
        text = f"Running {min(done + 1, total)} of {total}: {current}"
        self.status.setText(text + (f"   ·   ETA {eta}" if eta else ""))
        self.status.setToolTip(text)

    def result_in(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)

    def finished(self, text: str) -> None:
        self.set_running(False)
        if self.progress.maximum() == 0:
            self.progress.setRange(0, 1)
        self.status.setText(text)
        self.status.setToolTip(text)
