"""The plot widget every chart draws into: axes that read plainly in log mode, a
legend that moves out of the data's way, a hover tip, and palette-following colours."""
from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg

from .hover import HoverTip
from .theme import ChartTheme

pg.setConfigOptions(antialias=True)


def plain_number(x: float) -> str:
    """``0.05``, ``20``, ``4096``, ``1.2e+06``: what a reader expects on an axis."""
    if x == 0:
        return "0"
    if 1e-3 <= abs(x) < 1e6:
        return f"{x:.4g}"
    return f"{x:.2g}"


class PlainLogAxis(pg.AxisItem):
    """An axis whose log-mode labels read ``20`` and ``0.5`` rather than ``2·10¹``."""

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph API)
        out = []
        for v in values:
            x = 10 ** float(v) * scale
            mantissa = x / 10 ** math.floor(math.log10(x)) if x > 0 else 0
            # Label 1-2-5 steps only; the other minor ticks stay as unlabelled lines.
            out.append(plain_number(x) if any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5)) else "")
        return out


class ChartView(pg.PlotWidget):
    """A PlotWidget with a legend, a hover tip and palette-following colours."""

    def __init__(self, kind: str, parent=None):
        super().__init__(parent, axisItems={"bottom": PlainLogAxis("bottom"),
                                            "left": PlainLogAxis("left")})
        self.kind = kind
        self.theme = ChartTheme.from_palette()
        plot = self.getPlotItem()
        plot.showGrid(x=True, y=True, alpha=0.18)
        self.legend = plot.addLegend(offset=(8, 8), labelTextSize="8.5pt", verSpacing=-4)
        self.hover = HoverTip(self)
        self.placeholder = pg.TextItem(anchor=(0.5, 0.5))
        #: Items of the current drawing by series label, and what they were drawn for:
        #: a render with the same signature only updates their data.
        self.items: dict[str, tuple] = {}
        self.signature: tuple | None = None
        self.apply_theme(self.theme)

    def apply_theme(self, theme: ChartTheme) -> None:
        self.theme = theme
        self.signature = None  # items carry the old colours: rebuild on the next render
        self.setBackground(theme.background)
        plot = self.getPlotItem()
        for name in ("left", "bottom", "right", "top"):
            axis = plot.getAxis(name)
            axis.enableAutoSIPrefix(False)  # "GB/s (x0.001)" reads worse than 0.0004
            axis.setPen(pg.mkPen(theme.muted))
            axis.setTextPen(pg.mkPen(theme.foreground))
        plot.titleLabel.setAttr("color", theme.foreground.name())
        self.legend.setBrush(pg.mkBrush(theme.legend_background))
        self.legend.setPen(pg.mkPen(theme.muted))
        self.legend.setLabelTextColor(theme.foreground)
        self.hover.apply_theme(theme)
        self.placeholder.setColor(theme.muted)

    def reset(self) -> pg.PlotItem:
        """Empty the plot for a redraw, keeping the user's zoom if they zoomed."""
        plot = self.getPlotItem()
        plot.clear()
        self.items.clear()
        self.signature = None
        self.legend.clear()
        self.legend.show()
        self.hover.clear()
        self.hover.attach()
        plot.setTitle(None)
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            axis.setLogMode(False)
            axis.setTicks(None)  # back to automatic ticks after the bar view's labels
        plot.getAxis("left").setWidth(None)
        plot.getViewBox().invertY(False)
        return plot

    def place_legend(self, xs, ys, extent_y=None) -> None:
        """Put the legend in the corner of the view that hides the fewest points.

        ``xs``/``ys`` are the points, in view coordinates; ``extent_y`` anything else
        that stretches the y range (error bars).  While the view auto-ranges (the user
        has not zoomed) its range is computed from these, since pyqtgraph only
        updates the range when it next paints.
        """
        xs, ys = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        ok = np.isfinite(xs) & np.isfinite(ys)
        xs, ys = xs[ok], ys[ok]
        ext = np.concatenate([ys, np.asarray(extent_y if extent_y is not None else [], dtype=float)])
        ext = ext[np.isfinite(ext)]
        vb = self.getPlotItem().getViewBox()
        (x0, x1), (y0, y1) = vb.viewRange()
        auto_x, auto_y = vb.autoRangeEnabled()
        if xs.size:
            if auto_x:
                x0, x1 = xs.min(), xs.max()
                x0, x1 = x0 - 0.05 * (x1 - x0), x1 + 0.05 * (x1 - x0)
            if auto_y:
                y0, y1 = ext.min(), ext.max()
                y0, y1 = y0 - 0.05 * (y1 - y0), y1 + 0.05 * (y1 - y0)
        best = (0.0, 0.0)
        if xs.size and x1 > x0 and y1 > y0 and vb.width() > 0 and vb.height() > 0:
            rect = self.legend.boundingRect()
            w = (rect.width() + 16) / vb.width()
            h = (rect.height() + 16) / vb.height()
            fx = (xs - x0) / (x1 - x0)
            fy = (y1 - ys) / (y1 - y0)  # 0 at the top
            if vb.yInverted():
                fy = 1 - fy
            counts = {}
            for cx, cy in ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (1.0, 1.0)):
                in_x = fx <= w if cx == 0 else fx >= 1 - w
                in_y = fy <= h if cy == 0 else fy >= 1 - h
                counts[(cx, cy)] = int(np.count_nonzero(in_x & in_y))
            best = min(counts, key=lambda c: (counts[c], c[1], c[0]))  # ties: top, then left
        cx, cy = best
        self.legend.anchor(itemPos=(cx, cy), parentPos=(cx, cy),
                           offset=(8 if cx == 0 else -8, 8 if cy == 0 else -8))

    def set_labels(self, bottom: str, left: str) -> None:
        color = self.theme.foreground.name()
        plot = self.getPlotItem()
        plot.setLabel("bottom", bottom, color=color)
        plot.setLabel("left", left, color=color)

    def show_placeholder(self, text: str) -> None:
        plot = self.getPlotItem()
        self.placeholder.setText(text)
        plot.addItem(self.placeholder, ignoreBounds=True)
        (x0, x1), (y0, y1) = plot.getViewBox().viewRange()
        self.placeholder.setPos((x0 + x1) / 2, (y0 + y1) / 2)
