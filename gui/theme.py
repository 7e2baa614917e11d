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

#: Twenty-one clearly different colours that read on white and on near-black: the
#: category-10 set (its red swapped for gold: red means "failed") and eleven more of
#: middling lightness.  Past 21 curves a colour comes round again with another marker.
SERIES_COLORS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#17becf", "#8c564b",
    "#e377c2", "#bcbd22", "#7f7f7f", "#f2b701",
    "#3b5bdb", "#0ca678", "#ae3ec9", "#a0522d", "#66a80f", "#1098ad",
    "#845ef7", "#d9480f", "#74c0fc", "#b197fc", "#e599f7",
)
FAILED_COLOR = "#e3242b"
#: A comparison's verdicts (File ▸ Compare with…), by Verdict value: slower in orange, as
#: red already means "failed verification"; same in grey, so that changes stand out.
VERDICT_COLORS = {"faster": "#2f9e44", "slower": "#f76707", "same": "#909296", "failed": FAILED_COLOR}
#: Line styles by source (live run, first file, second file, ...).
SOURCE_STYLES = (Qt.PenStyle.SolidLine, Qt.PenStyle.DashLine, Qt.PenStyle.DotLine,
                 Qt.PenStyle.DashDotLine, Qt.PenStyle.DashDotDotLine)
SOURCE_SYMBOLS = ("o", "t", "s", "d", "p", "h", "star", "t1", "+")
#: Dash patterns of the cuBLAS reference lines, by source.
REFERENCE_STYLES = (Qt.PenStyle.DashLine, Qt.PenStyle.DashDotLine, Qt.PenStyle.DotLine)


def is_reference(variant: str) -> bool:
    """Library references (cuBLAS) are the bar to beat: drawn as reference lines, not as
    contenders. The registry's role says which; a name it does not know (a results file
    from elsewhere) is a reference when it is a cuBLAS line."""
    from engine.kernels import registry  # noqa: PLC0415
    v = registry.REGISTRY.get(variant)
    return v.role == "reference" if v is not None else variant.lower().startswith("cublas")


def stable_index(text: str, modulo: int) -> int:
    """A hash of ``text`` that is the same in every process (unlike ``hash``)."""
    return zlib.crc32(text.encode("utf-8")) % modulo


def assign_styles(labels: Iterable[str]) -> dict[str, tuple[QColor, int]]:
    """Colour and style round per label: its hashed colour slot, or the next free one.

    Up to ten labels draw on the first ten (most distinct) colours.  Once every colour is taken, the next round starts (round 1, 2, ...); the charts
    give each round another marker, so two curves never look the same.  Labels are
    resolved in sorted order so that the same set of labels always gets the same
    styles, whichever order the results arrived in.
    """
    out: dict[str, tuple[QColor, int]] = {}
    taken: set[tuple[int, int]] = set()
    labels = sorted(set(labels))
    # Up to ten curves take the ten most distinct colours only.
    n = len(SERIES_COLORS) if len(labels) > 10 else 10
    for label in labels:
        start = stable_index(label, n)
        rnd = len(taken) // n
        slot = next((start + step) % n for step in range(n) if ((start + step) % n, rnd) not in taken)
        taken.add((slot, rnd))
        out[label] = (QColor(SERIES_COLORS[slot]), rnd)
    return out


def assign_colors(labels: Iterable[str]) -> dict[str, QColor]:
    """Colour per label (see :func:`assign_styles`)."""
    return {k: c for k, (c, _) in assign_styles(labels).items()}


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
