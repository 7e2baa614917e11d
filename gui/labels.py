"""Labels for text the app does not choose: error messages, file paths, device reasons.

A plain QLabel asks for the width of its longest word; one long path in an error message
("A: a_very_long_name….npy was not found (looked for /home/…)") then widens the
Configure panel past the window, and a one-line label cut by its layout loses the end
of the message.  :class:`WrapLabel` wraps at word boundaries and, where a word is wider
than the label, anywhere; :class:`ElidedLabel` keeps one line and ends it with "…",
the full text in its tooltip.  Both keep :meth:`QLabel.text` the full, unmodified text.
"""
from __future__ import annotations

from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtGui import QAction, QGuiApplication, QPainter, QPalette, QTextLayout, QTextOption
from PySide6.QtWidgets import QLabel, QSizePolicy

#: A wrapped label never asks for less than this many average characters of width.
MIN_WRAP_CHARS = 12
#: Nor for more than this many for its preferred width (it wraps beyond).
PREFERRED_WRAP_CHARS = 40


class WrapLabel(QLabel):
    """Plain text wrapped to the label's width, breaking inside a word only when the word
    alone is wider than the label.  Right-click copies the text."""

    def __init__(self, text: str = "", parent=None):
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setWordWrap(True)
        # QLabel's own text control would select text that this class paints elsewhere.
        self.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction)
        size_policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        size_policy.setHeightForWidth(True)
        self.setSizePolicy(size_policy)
        copy = QAction("Copy", self)
        copy.triggered.connect(lambda: QGuiApplication.clipboard().setText(self.text()))
        self.addAction(copy)
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
        self.setText(text)

    def _layout(self, width: int) -> tuple[QTextLayout, float]:
        """The text laid out at ``width`` pixels, and its height."""
        # QTextLayout breaks lines only at U+2028, not at "\n".
        layout = QTextLayout(self.text().replace("\n", "\u2028"), self.font())
        option = QTextOption(self.alignment())
        option.setWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        layout.setTextOption(option)
        layout.beginLayout()
        y = 0.0
        while True:
            line = layout.createLine()
            if not line.isValid():
                break
            line.setLineWidth(max(1, width))
            line.setPosition(QPointF(0, y))
            y += line.height()
        layout.endLayout()
        return layout, y

    def _frame(self) -> tuple[int, int]:
        """Horizontal and vertical space that is not text (margins, frame)."""
        m = self.contentsMargins()
        return (m.left() + m.right() + 2 * self.margin(),
                m.top() + m.bottom() + 2 * self.margin())

    def hasHeightForWidth(self) -> bool:  # noqa: N802 (Qt API)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 (Qt API)
        dx, dy = self._frame()
        if not self.text():
            return dy
        return int(self._layout(width - dx)[1] + 0.999) + dy

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        dx, dy = self._frame()
        width = self.fontMetrics().averageCharWidth() * MIN_WRAP_CHARS + dx
        return QSize(width, self.fontMetrics().height() + dy if self.text() else dy)

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        dx, _ = self._frame()
        natural = max((self.fontMetrics().horizontalAdvance(line)
                       for line in self.text().split("\n")), default=0)
        width = min(natural, self.fontMetrics().averageCharWidth() * PREFERRED_WRAP_CHARS) + dx
        width = max(width, self.minimumSizeHint().width())
        return QSize(width, self.heightForWidth(width))

    def paintEvent(self, event):  # noqa: N802 (Qt API)
        rect = self.contentsRect().adjusted(self.margin(), self.margin(),
                                            -self.margin(), -self.margin())
        layout, height = self._layout(rect.width())
        top = rect.top()
        if self.alignment() & Qt.AlignmentFlag.AlignVCenter:
            top += max(0, (rect.height() - height) / 2)
        painter = QPainter(self)
        group = QPalette.ColorGroup.Active if self.isEnabled() else QPalette.ColorGroup.Disabled
        painter.setPen(self.palette().color(group, self.foregroundRole()))
        layout.draw(painter, QPointF(rect.left(), top))


class ElidedLabel(QLabel):
    """One line of plain text, ended with "…" where it does not fit; the tooltip then
    holds the whole text (set again by each :meth:`setText`; a later
    :meth:`setToolTip` replaces it)."""

    def __init__(self, text: str = "", parent=None):
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802 (Qt API)
        super().setText(text)
        self.setToolTip(text)

    def _one_line(self) -> str:
        return " ".join(self.text().split())

    def shown_text(self) -> str:
        """What is painted: the text, or its start and "…" when it is too long."""
        rect = self.contentsRect()
        width = rect.width() - 2 * self.margin()
        return self.fontMetrics().elidedText(self._one_line(), Qt.TextElideMode.ElideRight,
                                             max(0, width))

    def is_elided(self) -> bool:
        return self.shown_text() != self._one_line()

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        return QSize(self.fontMetrics().horizontalAdvance("…") * 4, super().minimumSizeHint().height())

    def paintEvent(self, event):  # noqa: N802 (Qt API)
        painter = QPainter(self)
        rect = self.contentsRect().adjusted(self.margin(), self.margin(),
                                            -self.margin(), -self.margin())
        self.style().drawItemText(painter, rect,
                                  Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                                  self.palette(), self.isEnabled(), self.shown_text(),
                                  self.foregroundRole())
