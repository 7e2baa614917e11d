"""User-facing error dialogs that never block the event loop.

Every module reports a problem through :func:`show_error` (called as
``dialogs.show_error``), so tests can monkeypatch this one function to capture the
messages.  The box is window-modal but opened with ``open()``: the event loop, the
running sweep and the charts keep going while it is shown.
"""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget


def show_error(parent: QWidget | None, title: str, text: str, details: str = "") -> QMessageBox:
    """Show ``text`` (verbatim) in a warning box and return at once.

    Parameters
    ----------
    parent
        The window the box belongs to.
    title
        Short summary, e.g. "Cannot load matrix B".
    text
        The message, shown as plain text (file names may contain '<').
    details
        Optional longer text behind a "Show Details…" button.
    """
    box = QMessageBox(QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.Ok, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    if details:
        box.setDetailedText(details)
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.setWindowModality(Qt.WindowModality.WindowModal)
    box.open()
    return box
