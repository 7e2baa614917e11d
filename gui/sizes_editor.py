"""Problem sizes: the engine's presets plus free text, checked as you type.

The text accepts whatever :func:`engine.inputs.sizes.parse_sizes` accepts (``256,512``,
``128:4096:x2``, ``64:256:64``, ``127x253x61``); a parse error is shown inline, in
the engine's own words, and the field is framed in red.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QLineEdit, QVBoxLayout, QWidget

from engine.inputs.sizes import PRESETS, Shape, SizeSpecError, format_shape, parse_sizes

from .labels import WrapLabel

CUSTOM = "Custom"


def shapes_to_text(shapes: list[Shape]) -> str:
    return ", ".join(format_shape(s) for s in shapes)


def summarize(shapes: list[Shape], limit: int = 6) -> str:
    """``"6 sizes: 128, 256, …, 4096"``."""
    names = [format_shape(s) for s in shapes]
    if len(names) > limit:
        names = names[:limit - 2] + ["…", names[-1]]
    return f"{len(shapes)} size{'s' if len(shapes) != 1 else ''}: {', '.join(names)}"


class SizesEditor(QWidget):
    """Preset picker and size text with inline validation.

    Signals
    -------
    changed()
        The text (and so the validity) changed.
    """

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.preset = QComboBox()
        self.preset.addItem(CUSTOM)
        for name, shapes in PRESETS.items():
            self.preset.addItem(name)
            self.preset.setItemData(self.preset.count() - 1, shapes_to_text(shapes),
                                    Qt.ItemDataRole.ToolTipRole)
        self.text = QLineEdit()
        self.text.setObjectName("sizesText")
        self.text.setPlaceholderText("e.g. 256,512  ·  128:4096:x2  ·  64:256:64  ·  127x253x61")
        self.text.setToolTip("Sizes: n (square n×n×n), MxNxK (C is M×N, inner dimension K), "
                             "start:stop:xF (geometric) or start:stop:step, separated by commas")
        self.message = WrapLabel()   # the parse error quotes what was typed, however long
        self.message.setObjectName("sizesMessage")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.preset)
        layout.addWidget(self.text)
        layout.addWidget(self.message)
        self._error = ""
        self._shapes: list[Shape] = []
        self._syncing = False
        self.preset.currentTextChanged.connect(self._preset_chosen)
        self.text.textChanged.connect(self._text_changed)
        self.set_text(shapes_to_text(PRESETS["powers of two 128–4096"]))

    def _preset_chosen(self, name: str) -> None:
        if self._syncing or name not in PRESETS:
            return
        self._syncing = True
        try:
            self.text.setText(shapes_to_text(PRESETS[name]))
        finally:
            self._syncing = False
        self._validate()

    def _text_changed(self, _text: str) -> None:
        self._validate()
        if not self._syncing:
            self._sync_preset()

    def _sync_preset(self) -> None:
        """Show the preset whose sizes equal the text, or "Custom"."""
        name = next((n for n, s in PRESETS.items() if not self._error and s == self._shapes), CUSTOM)
        self._syncing = True
        try:
            self.preset.setCurrentText(name)
        finally:
            self._syncing = False

    def _validate(self) -> None:
        try:
            self._shapes, self._error = parse_sizes(self.text.text()), ""
        except SizeSpecError as exc:
            self._shapes, self._error = [], str(exc)
        bad = bool(self._error)
        # A dynamic property drives the red frame from the window's style sheet.
        self.text.setProperty("invalid", bad)
        self.text.style().unpolish(self.text)
        self.text.style().polish(self.text)
        self.message.setProperty("invalid", bad)
        self.message.style().unpolish(self.message)
        self.message.style().polish(self.message)
        self.message.setText(self._error if bad else summarize(self._shapes))
        self.changed.emit()

    # --- API ---------------------------------------------------------------------------

    def set_text(self, text: str) -> None:
        self.text.setText(text)
        self._validate()
        self._sync_preset()

    def shapes(self) -> list[Shape]:
        """The parsed shapes (empty when the text is invalid)."""
        return list(self._shapes)

    def error(self) -> str:
        """The parse error, or '' when the text is valid."""
        return self._error
