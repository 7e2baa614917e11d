"""Values on hover: the nearest point (or the bar under the pointer) gets a tooltip.

Works in view coordinates, so it is the same for linear and log axes (the charts
plot log10 values themselves and keep the readable text per point).
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF

from .theme import ChartTheme

PICK_RADIUS_PX = 14


class HoverTip(QObject):
    """Shows the text of the point nearest the mouse within :data:`PICK_RADIUS_PX`."""

    def __init__(self, view: pg.PlotWidget):
        super().__init__(view)
        self.plot = view.getPlotItem()
        self.vb = self.plot.getViewBox()
        self._x = np.empty(0)
        self._y = np.empty(0)
        self._texts: list[str] = []
        self._boxes: list[tuple[float, float, float, float, str]] = []
        self.label = pg.TextItem(anchor=(0, 1))
        self.label.setZValue(1000)
        self.marker = pg.ScatterPlotItem(size=16, symbol="o")
        self.marker.setZValue(999)
        self.apply_theme(ChartTheme.from_palette())
        view.scene().sigMouseMoved.connect(self._moved)
        self.attach()

    def apply_theme(self, theme: ChartTheme) -> None:
        self.label.fill = pg.mkBrush(theme.legend_background)
        self.label.border = pg.mkPen(theme.muted)
        self.label.setColor(theme.foreground)
        self.marker.setPen(pg.mkPen(theme.foreground, width=1.5))
        self.marker.setBrush(pg.mkBrush(None))

    def attach(self) -> None:
        """Re-add the tip after ``plot.clear()`` removed it."""
        for item in (self.label, self.marker):
            if item.scene() is None:
                self.plot.addItem(item, ignoreBounds=True)
        self.hide()

    def clear(self) -> None:
        self._x, self._y, self._texts, self._boxes = np.empty(0), np.empty(0), [], []
        self.hide()

    def add_points(self, x, y, texts: list[str]) -> None:
        self._x = np.concatenate([self._x, np.asarray(x, dtype=float)])
        self._y = np.concatenate([self._y, np.asarray(y, dtype=float)])
        self._texts.extend(texts)

    def add_box(self, x0: float, x1: float, y0: float, y1: float, text: str) -> None:
        """A rectangle (a bar) that shows ``text`` anywhere inside it."""
        self._boxes.append((min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1), text))

    def hide(self) -> None:
        self.label.hide()
        self.marker.hide()

    def pick(self, view_pos: QPointF) -> tuple[float, float, str] | None:
        """The point or bar under ``view_pos`` (view coordinates), if any."""
        for x0, x1, y0, y1, text in self._boxes:
            if x0 <= view_pos.x() <= x1 and y0 <= view_pos.y() <= y1:
                return x1, (y0 + y1) / 2, text
        if not self._texts:
            return None
        px, py = self.vb.viewPixelSize()
        if not px or not py:
            return None
        d2 = ((self._x - view_pos.x()) / px) ** 2 + ((self._y - view_pos.y()) / py) ** 2
        d2 = np.where(np.isfinite(d2), d2, np.inf)
        i = int(np.argmin(d2))
        if d2[i] > PICK_RADIUS_PX ** 2:
            return None
        return float(self._x[i]), float(self._y[i]), self._texts[i]

    def _moved(self, scene_pos: QPointF) -> None:
        if not self.vb.sceneBoundingRect().contains(scene_pos):
            self.hide()
            return
        hit = self.pick(self.vb.mapSceneToView(scene_pos))
        if hit is None:
            self.hide()
            return
        x, y, text = hit
        self.label.setHtml(f"<div style='margin:3px'>{text}</div>")
        # Open the tip towards the middle of the view so it never leaves the plot.
        (vx0, vx1), (vy0, vy1) = self.vb.viewRange()
        inverted = self.vb.yInverted()
        right = x > (vx0 + vx1) / 2
        low = (y < (vy0 + vy1) / 2) != inverted
        self.label.setAnchor((1.0 if right else 0.0, 1.0 if low else 0.0))
        self.label.setPos(x, y)
        self.label.show()
        if self._boxes and any(b[4] == text for b in self._boxes):
            self.marker.hide()
        else:
            self.marker.setData([x], [y])
            self.marker.show()
