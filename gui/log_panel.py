"""The log: each compile's resource report, uploads, skips and errors, verbatim.

Text is inserted as plain text (never HTML) so compiler output with ``<`` and ``&``
reads exactly as the compiler printed it.
"""
from __future__ import annotations

import time

from PySide6.QtCore import Signal
from PySide6.QtGui import QColor, QFontDatabase, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton,
                               QVBoxLayout, QWidget)

from .theme import is_dark

MAX_LINES = 20_000


class LogPanel(QWidget):
    """A read-only, monospace log with coloured levels.

    Signals
    -------
    errors_changed(int)
        Errors logged since the last clear (the window shows it on the tab).
    """

    errors_changed = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(MAX_LINES)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.wrap = QCheckBox("Wrap")
        self.wrap.toggled.connect(lambda on: self.text.setLineWrapMode(
            QPlainTextEdit.LineWrapMode.WidgetWidth if on else QPlainTextEdit.LineWrapMode.NoWrap))
        self.count_label = QLabel()
        self.count_label.setObjectName("hint")
        clear = QPushButton("Clear")
        clear.clicked.connect(self.clear)
        bar = QHBoxLayout()
        bar.setContentsMargins(0, 0, 0, 0)
        bar.addWidget(self.count_label, 1)
        bar.addWidget(self.wrap)
        bar.addWidget(clear)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.text, 1)
        layout.addLayout(bar)
        self.errors = 0
        self.warnings = 0
        self._update_count()

    def _format(self, level: str) -> QTextCharFormat:
        fmt = QTextCharFormat()
        dark = is_dark(self.palette())
        if level == "error":
            fmt.setForeground(QColor("#ff6b6b" if dark else "#c0151c"))
        elif level == "warning":
            fmt.setForeground(QColor("#f0b454" if dark else "#9a5b00"))
        elif level == "muted":
            fmt.setForeground(self.palette().placeholderText())
        return fmt

    def append(self, level: str, message: str) -> None:
        """Add ``message`` exactly as given, prefixed with the time and level."""
        cursor = QTextCursor(self.text.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        at_end = self.text.verticalScrollBar().value() >= self.text.verticalScrollBar().maximum() - 4
        if not self.text.document().isEmpty():
            cursor.insertBlock()
        cursor.insertText(time.strftime("%H:%M:%S "), self._format("muted"))
        tag = {"error": "ERROR ", "warning": "WARN  "}.get(level, "")
        cursor.insertText(tag + message.rstrip("\n"), self._format(level))
        if at_end:
            self.text.verticalScrollBar().setValue(self.text.verticalScrollBar().maximum())
        if level == "error":
            self.errors += 1
            self.errors_changed.emit(self.errors)
        elif level == "warning":
            self.warnings += 1
        self._update_count()

    def clear(self) -> None:
        self.text.clear()
        self.errors = self.warnings = 0
        self.errors_changed.emit(0)
        self._update_count()

    def plain_text(self) -> str:
        return self.text.toPlainText()

    def _update_count(self) -> None:
        lines = self.text.document().blockCount() if not self.text.document().isEmpty() else 0
        def n(count: int, word: str) -> str:
            return f"{count} {word}{'' if count == 1 else 's'}"
        self.count_label.setText(f"{n(lines, 'line')} · {n(self.errors, 'error')} · "
                                 f"{n(self.warnings, 'warning')}")
