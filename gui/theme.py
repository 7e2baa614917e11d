"""Colours: series colours that stay put, and chart colours that follow the palette.

Series colours come from a hash of the kernel label (variant and parameters), so a
kernel keeps its colour across runs, files and restarts; a second file of the same
kernel is told apart by line style, not colour.  Red is kept out of the series
palette because it means "failed verification" everywhere in the app.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Iterable

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

#: Ten clearly different colours that read on white and on near-black (the
#: category-10 set with its red swapped for gold: red means "failed").
SERIES_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#17becf", "#8c564b",
    "#e377c2", "#bcbd22", "#7f7f7f", "#f2b701",
)
FAILED_COLOR = "#e3242b"
#: Line styles by source (live run, first file, second file, ...).
SOURCE_STYLES = (Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine,
                 Qt.PenStyle.DashDotLine, Qt.PenStyle.DashDotDotLine)
SOURCE_SYMBOLS = ("o", "t", "s", "d", "p", "h")


def stable_index(text: str, modulo: int) -> int:
    """A hash of ``text`` that is the same in every process (unlike ``hash``)."""
    return zlib.crc32(text.encode("utf-8")) % modulo


def assign_colors(labels: Iterable[str]) -> dict[str, QColor]:
    """Colour per label: its hashed slot, or the next free one on a collision.

    Labels are resolved in sorted order so that the same set of labels always gets
    the same colours, whichever order the results arrived in.
    """
    out: dict[str, QColor] = {}
    taken: set[int] = set()
    n = len(SERIES_COLORS)
    for label in sorted(set(labels)):
        slot = stable_index(label, n)
        for step in range(n):
            cand = (slot + step) % n
            if cand not in taken or len(taken) >= n:
                slot = cand
                break
        taken.add(slot)
        out[label] = QColor(SERIES_COLORS[slot])
    return out


def is_dark(palette: QPalette | None = None) -> bool:
    """Whether the palette's window colour is dark (a dark system theme)."""
    palette = palette or QApplication.palette()
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


@dataclass(frozen=True)
class ChartTheme:
    """The colours a chart needs, taken from a QPalette."""

    background: QColor
    foreground: QColor
    muted: QColor
    legend_background: QColor
    ceiling: QColor

    @classmethod
    def from_palette(cls, palette: QPalette | None = None) -> "ChartTheme":
        palette = palette or QApplication.palette()
        base = palette.color(QPalette.ColorRole.Base)
        text = palette.color(QPalette.ColorRole.Text)
        muted = QColor(text)
        muted.setAlpha(150)
        legend = QColor(base)
        legend.setAlpha(215)
        ceiling = QColor("#c0c0c0" if is_dark(palette) else "#505050")
        return cls(base, text, muted, legend, ceiling)


def failed_row_colors(palette: QPalette | None = None) -> tuple[QColor, QColor]:
    """Background and text colour of a table row whose verification failed."""
    if is_dark(palette):
        return QColor("#6b1a1d"), QColor("#ffe5e5")
    return QColor("#ffd6d6"), QColor("#5c0000")


def dark_palette() -> QPalette:
    """A dark Fusion palette, for trying the dark look where the OS has none."""
    p = QPalette()
    # Base a shade lighter than Window: Fusion draws check-box and frame outlines a
    # shade darker than Window, which would vanish on a darker Base.
    window, base, text = QColor("#2b2d30"), QColor("#33363a"), QColor("#dfe1e5")
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
        p.setColor(group, QPalette.ColorRole.Window, window)
        p.setColor(group, QPalette.ColorRole.WindowText, text)
        p.setColor(group, QPalette.ColorRole.Base, base)
        p.setColor(group, QPalette.ColorRole.AlternateBase, QColor("#3a3d42"))
        p.setColor(group, QPalette.ColorRole.Text, text)
        p.setColor(group, QPalette.ColorRole.Button, QColor("#3e4146"))
        p.setColor(group, QPalette.ColorRole.ButtonText, text)
        p.setColor(group, QPalette.ColorRole.Highlight, QColor("#3574f0"))
        p.setColor(group, QPalette.ColorRole.HighlightedText, QColor("#ffffff"))
        p.setColor(group, QPalette.ColorRole.ToolTipBase, QColor("#3c3f41"))
        p.setColor(group, QPalette.ColorRole.ToolTipText, text)
        p.setColor(group, QPalette.ColorRole.PlaceholderText, QColor("#8c8f94"))
        p.setColor(group, QPalette.ColorRole.Link, QColor("#6ea8ff"))
        p.setColor(group, QPalette.ColorRole.Mid, QColor("#46494d"))
        p.setColor(group, QPalette.ColorRole.Midlight, QColor("#3c3f41"))
        p.setColor(group, QPalette.ColorRole.Dark, QColor("#1a1b1e"))
    disabled = QColor("#7a7d82")
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text,
                 QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Base, QColor("#2e3034"))
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Window, window)
    p.setColor(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Button, QColor("#333538"))
    return p
