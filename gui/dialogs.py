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


def ask(parent: QWidget | None, title: str, text: str, choices: tuple[str, ...],
        default: str, escape: str) -> str:
    """Ask a question and wait for the answer: the chosen button's text.

    Every question the app asks goes through this one function, so tests monkeypatch it
    to answer without a dialog.  Unlike :func:`show_error` it waits (a nested event loop):
    the app asks only where nothing can go on before the answer (e.g. at start).

    Parameters
    ----------
    choices
        The buttons' texts, in order.
    default
        The button Enter presses.
    escape
        What closing the box (Escape, the title bar's close button) answers.
    """
    box = QMessageBox(QMessageBox.Icon.Question, title, text, QMessageBox.StandardButton.NoButton,
                      parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    buttons = {}
    for choice in choices:
        role = (QMessageBox.ButtonRole.RejectRole if choice == escape
                else QMessageBox.ButtonRole.AcceptRole if choice == default
                else QMessageBox.ButtonRole.DestructiveRole)
        buttons[choice] = box.addButton(choice, role)
    box.setDefaultButton(buttons[default])
    box.setEscapeButton(buttons[escape])
    box.exec()
    clicked = box.clickedButton()
    return next((c for c, b in buttons.items() if b is clicked), escape)


def choose(parent: QWidget | None, title: str, text: str, items: list[str],
           default: str) -> str | None:
    """Ask for one of ``items`` and wait for the answer (None: cancelled).

    Like :func:`ask`, the one function tests monkeypatch to answer without a dialog.
    """
    from PySide6.QtWidgets import QInputDialog  # noqa: PLC0415

    current = items.index(default) if default in items else 0
    picked, ok = QInputDialog.getItem(parent, title, text, items, current, False)
    return picked if ok else None
