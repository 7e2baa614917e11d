"""The plot widget every chart draws into: axes that read plainly in log mode, a
legend that moves out of the data's way, a hover tip, and palette-following colours."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from pyqtgraph.graphicsItems.LegendItem import ItemSample
from pyqtgraph.graphicsItems.ScatterPlotItem import drawSymbol
from PySide6.QtCore import QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QIcon, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (QGraphicsItem, QHBoxLayout, QLabel, QListWidget, QListWidgetItem,
                               QPushButton, QVBoxLayout, QWidget)

from .hover import HoverTip
from .theme import ChartTheme

pg.setConfigOptions(antialias=True)
_PIXMAP_CACHE = QGraphicsItem.CacheMode.DeviceCoordinateCache

#: Up to this many entries the legend sits inside the plot; past it, in the list at
#: the plot's right (on screen) or in several columns (exported images).
INLINE_LEGEND_MAX = 8
LEGEND_FONT_PT = 8.0
LEGEND_TEXT_MAX_PX = 250
LEGEND_ROW_PX = 15


def plain_number(x: float) -> str:
    """``0.05``, ``20``, ``4096``, ``500000``: what a reader expects on an axis."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    if abs(x) >= 1 and abs(x - round(x)) < 1e-9 * abs(x) and abs(x) < 1e9:
        return f"{int(round(x))}"
    if 1e-4 <= abs(x) < 1e9:
        return f"{x:.4g}" if abs(x) >= 1e-3 else f"{x:.6f}".rstrip("0")
    return f"{x:.3g}"


class PlainLogAxis(pg.AxisItem):
    """An axis whose log-mode labels read ``20`` and ``0.5`` rather than ``2·10¹``,
    and which may show its values in another unit (``unit_factor``: 1e-3 shows
    GFLOP/s data as TFLOP/s) without changing the data or the view coordinates."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.unit_factor = 1.0

    def set_unit_factor(self, factor: float) -> None:
        if factor != self.unit_factor:
            self.unit_factor = factor
            self.picture = None
            self.update()

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph API)
        if self.logMode:
            return self.logTickStrings(values, scale, spacing)
        f = scale * self.unit_factor
        places = max(0, math.ceil(-math.log10(spacing * f))) if spacing > 0 else 0
        return [plain_number(round(v * f, places)) if places < 6 else plain_number(v * f) for v in values]

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph API)
        out = []
        for v in values:
            x = 10 ** float(v) * scale * self.unit_factor
            e = math.floor(math.log10(x)) if x > 0 else 0
            mantissa = x / 10 ** e if x > 0 else 0
            # Label 1-2-5 steps only; the other minor ticks stay as unlabelled lines.
            nice = next((m for m in (1, 2, 5, 10) if abs(mantissa - m) < 1e-6 * m), None)
            out.append(plain_number(nice * 10.0 ** e) if nice else "")
        return out


class ScrollViewBox(pg.ViewBox):
    """A ViewBox whose mouse wheel may scroll (pan) vertically instead of zooming:
    the bar view scrolls through many bars."""

    wheel_scrolls = False

    def wheelEvent(self, ev, axis=None):  # noqa: N802 (Qt API)
        if not self.wheel_scrolls:
            return super().wheelEvent(ev, axis)
        delta = ev.delta() if hasattr(ev, "delta") else ev.angleDelta().y()
        self.translateBy(y=(-1 if self.yInverted() else 1) * 3 * delta / 120.0)
        ev.accept()


@dataclass
class LegendEntry:
    """One legend row: the series label it stands for, its text, its tooltip and the
    plot item whose pen and symbol the sample copies."""

    label: str
    text: str
    tip: str
    item: pg.GraphicsObject


def _item_style(item) -> tuple:
    """(pen, symbol, symbol size, symbol pen, symbol brush) of a plot item."""
    opts = item.opts
    if isinstance(item, pg.PlotDataItem):
        sc = item.scatter.opts
        return (pg.mkPen(opts["pen"]), opts.get("symbol"), min(sc.get("size", 7), 9),
                pg.mkPen(sc.get("pen")), pg.mkBrush(sc.get("brush")))
    return (None, opts.get("symbol"), min(opts.get("size", 7), 9), pg.mkPen(opts.get("pen")),
            pg.mkBrush(opts.get("brush")))


def paint_sample(p: QPainter, item, rect: QRectF, dim: bool) -> None:
    """A short stretch of the item's line with its marker in the middle."""
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    if dim:
        p.setOpacity(0.25)
    pen, symbol, size, spen, sbrush = _item_style(item)
    cy = rect.center().y()
    if pen is not None and pen.style() != Qt.PenStyle.NoPen:
        pen = QPen(pen)
        pen.setWidthF(min(pen.widthF(), 2.5))
        p.setPen(pen)
        p.drawLine(QPointF(rect.left() + 1, cy), QPointF(rect.right() - 1, cy))
    if symbol is not None:
        p.translate(rect.center())
        drawSymbol(p, symbol, size, spen, sbrush)
        p.translate(-rect.center())
    p.setOpacity(1.0)


class CompactSample(ItemSample):
    """A legend sample 26×13 px (pyqtgraph's is 20×20): rows sit closer together.
    A click asks the view to hide or show the curve (``sigClicked``)."""

    W, H = 26, 13

    def __init__(self, item):
        super().__init__(item)
        self.setFixedWidth(self.W)
        self.setFixedHeight(self.H)

    def boundingRect(self):  # noqa: N802 (Qt API)
        return QRectF(0, 0, self.W, self.H)

    def paint(self, p, *args):
        paint_sample(p, self.item, QRectF(0, 0, self.W, self.H), not self.item.isVisible())

    def mouseClickEvent(self, event):  # noqa: N802 (pyqtgraph API)
        if event.button() == Qt.MouseButton.LeftButton:
            event.accept()
            self.sigClicked.emit(self.item)


#: Item data role: whether a legend row's icon was drawn dimmed (None: not drawn yet).
_ICON_STATE = Qt.ItemDataRole.UserRole + 1


def sample_icon(item, dim: bool = False) -> QIcon:
    pm = QPixmap(QSize(28, 14))
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    paint_sample(p, item, QRectF(0, 0, 28, 14), dim)
    p.end()
    return QIcon(pm)


class SeriesLegend(QWidget):
    """The legend beside the plot when it has many entries: one checkable row per
    curve (its line and marker, its name; the full name as tooltip), scrollable.

    Signals
    -------
    toggled(str, bool)
        A row was checked (shown) or unchecked (hidden): the series label.
    set_all(bool)
        All (True) or None (False) was pressed.
    """

    toggled = Signal(str, bool)
    set_all = Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.title = QLabel()
        self.title.setObjectName("hint")
        self.list = QListWidget()
        self.list.setUniformItemSizes(True)
        self.list.setIconSize(QSize(28, 14))
        self.list.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setSpacing(0)
        font = QFont(self.list.font())
        font.setPointSizeF(max(7.0, font.pointSizeF() - 1))
        self.list.setFont(font)
        self.list.setStyleSheet("QListWidget::item { padding: 0px 2px; }")
        self.all_button = QPushButton("All")
        self.none_button = QPushButton("None")
        for b in (self.all_button, self.none_button):
            b.setFlat(True)
            b.setFixedHeight(b.sizeHint().height() - 6)
        self.all_button.setToolTip("Show every curve")
        self.none_button.setToolTip("Hide every curve (then tick the ones to compare)")
        head = QHBoxLayout()
        head.setContentsMargins(2, 0, 0, 0)
        head.addWidget(self.title, 1)
        head.addWidget(self.all_button)
        head.addWidget(self.none_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 2, 2)
        layout.setSpacing(1)
        layout.addLayout(head)
        layout.addWidget(self.list)
        layout.addStretch(1)
        self.setFixedWidth(LEGEND_TEXT_MAX_PX)
        self.entries: list[LegendEntry] = []
        self.list.itemChanged.connect(self._changed)
        self.all_button.clicked.connect(lambda: self.set_all.emit(True))
        self.none_button.clicked.connect(lambda: self.set_all.emit(False))

    def set_entries(self, entries: list[LegendEntry], hidden) -> None:
        self.list.blockSignals(True)
        self.list.clear()
        self.entries = list(entries)
        for e in entries:
            it = QListWidgetItem(e.text)
            it.setToolTip(e.tip)
            it.setData(Qt.ItemDataRole.UserRole, e.label)
            it.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
            self.list.addItem(it)
        self.list.blockSignals(False)
        self.sync(hidden)
        # As tall as its rows (the list scrolls once they outgrow the plot's height).
        self.list.doItemsLayout()
        row = max(self.list.sizeHintForRow(0), self.list.visualItemRect(self.list.item(0)).height()
                  if self.list.count() else 0, 1)
        self.list.setMaximumHeight(max(1, self.list.count()) * row + 2 * self.list.frameWidth() + 4)

    def sync(self, hidden) -> None:
        """Tick the shown curves, untick (and dim) the hidden ones."""
        self.list.blockSignals(True)
        for i, e in enumerate(self.entries):
            it = self.list.item(i)
            off = e.label in hidden
            state = Qt.CheckState.Unchecked if off else Qt.CheckState.Checked
            # Only rows whose state changed get a new icon: painting icons for every row
            # on every redraw of a sweep is what made long legends slow.
            if it.data(_ICON_STATE) != off:
                it.setCheckState(state)
                it.setIcon(sample_icon(e.item, off))
                it.setData(_ICON_STATE, off)
        self.list.blockSignals(False)
        n = len(self.entries)
        shown = sum(e.label not in hidden for e in self.entries)
        self.title.setText(f"{n} curves" if shown == n else f"{shown} of {n} curves shown")

    def labels(self) -> list[str]:
        return [e.label for e in self.entries]

    def _changed(self, item: QListWidgetItem) -> None:
        self.toggled.emit(item.data(Qt.ItemDataRole.UserRole),
                          item.checkState() == Qt.CheckState.Checked)


class ChartView(pg.PlotWidget):
    """A PlotWidget with a legend, a hover tip and palette-following colours.

    Signals
    -------
    legend_toggled(str)
        A legend sample or name was clicked: hide or show that series (by label).
    """

    legend_toggled = Signal(str)

    def __init__(self, kind: str, parent=None):
        super().__init__(parent, viewBox=ScrollViewBox(),
                         axisItems={"bottom": PlainLogAxis("bottom"), "left": PlainLogAxis("left")})
        self.kind = kind
        self.theme = ChartTheme.from_palette()
        plot = self.getPlotItem()
        plot.showGrid(x=True, y=True, alpha=0.18)
        self.legend = plot.addLegend(offset=(8, 8), labelTextSize=f"{LEGEND_FONT_PT}pt",
                                     verSpacing=-5, horSpacing=4, sampleType=CompactSample)
        self.legend.layout.setContentsMargins(4, 2, 4, 2)
        self.legend.sigSampleClicked.connect(self._sample_clicked)
        # The axes (their ticks, text and the grid) and the legend's rows repaint from a
        # pixmap until they change: a repaint for a new point or table row redrew all
        # their text, about 40% of a chart's paint (a GPU machine's window stalled on it).
        for name in ("left", "bottom"):
            plot.getAxis(name).setCacheMode(_PIXMAP_CACHE)
        self.legend.setCacheMode(_PIXMAP_CACHE)
        #: The list beside the plot for many entries (the chart tabs set it; an
        #: exported view has none and uses columns instead).
        self.side: SeriesLegend | None = None
        self.entries: list[LegendEntry] = []
        self.hover = HoverTip(self)
        self.placeholder = pg.TextItem(anchor=(0.5, 0.5))
        #: Items of the current drawing by series label, and what they were drawn for:
        #: a render with the same signature only updates their data.
        self.items: dict[str, tuple] = {}
        #: What each curve was last given (its points), so unchanged curves are skipped.
        self.drawn: dict[str, tuple] = {}
        #: The value unit the axis shows, e.g. ("ms", 1.0); None until a chart sets it.
        self.unit: tuple | None = None
        #: The last drawing left curves to build (a live chart builds a few per redraw).
        self.pending = False
        self.signature: tuple | None = None
        self.framed = False   # the range was set for an empty frame, not by the user
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
        self.drawn.clear()
        self.unit = None          # the value axis is back to its base unit
        self.signature = None
        self.legend.clear()
        self.legend.show()
        self.entries = []
        if self.side is not None:
            self.side.hide()
        self.hover.clear()
        self.hover.attach()
        plot.setTitle(None)
        for name in ("left", "bottom"):
            axis = plot.getAxis(name)
            axis.setLogMode(False)
            axis.setTicks(None)  # back to automatic ticks after the bar view's labels
            axis.set_unit_factor(1.0)
        plot.getAxis("left").setWidth(None)
        vb = plot.getViewBox()
        if self.framed:
            # The empty frame fixed the range; data should be auto-ranged again.
            self.framed = False
            vb.enableAutoRange()
        vb.invertY(False)
        vb.wheel_scrolls = False
        vb.setLimits(xMin=-1e307, xMax=1e307, yMin=-1e307, yMax=1e307)
        vb.setMouseEnabled(x=True, y=True)
        return plot

    # --- legend ----------------------------------------------------------------------

    @property
    def legend_in_side(self) -> bool:
        """Whether the entries are listed beside the plot rather than inside it."""
        return self.side is not None and len(self.entries) > INLINE_LEGEND_MAX

    def set_legend(self, entries: list[LegendEntry], hidden=frozenset()) -> None:
        """Fill the legend: inside the plot (compact, in columns when long) or, for
        many entries on screen, in the scrollable list beside it."""
        before = self.entries
        n_old = len(before)
        if (0 < n_old < len(entries) <= INLINE_LEGEND_MAX and self.legend.isVisible()
                and [(e.label, e.text, id(e.item)) for e in entries[:n_old]]
                == [(e.label, e.text, id(e.item)) for e in before]
                and self.legend_columns(len(entries)) == self.legend_columns(n_old)):
            # A sweep reached new curves: add their rows only (re-laying out every row of
            # the legend is most of what a new curve would cost).
            self.entries = list(entries)
            self._add_legend_rows(entries[n_old:])
            return
        self.legend.clear()
        self.entries = list(entries)
        if not entries:
            self.legend.hide()
            if self.side is not None:
                self.side.hide()
            return
        if self.legend_in_side:
            self.legend.hide()
            self.side.set_entries(entries, hidden)
            self.side.show()
            return
        if self.side is not None:
            self.side.hide()
        # Columns first: re-flowing a filled legend leaves its rows stretched.
        self.legend.setColumnCount(self.legend_columns(len(entries)))
        self._add_legend_rows(entries)
        self.legend.show()

    def _add_legend_rows(self, entries: list[LegendEntry]) -> None:
        font = QFont(self.font())
        font.setPointSizeF(LEGEND_FONT_PT)
        fm = QFontMetrics(font)
        for e in entries:
            text = fm.elidedText(e.text, Qt.TextElideMode.ElideMiddle, LEGEND_TEXT_MAX_PX)
            self.legend.addItem(e.item, _escape(text))
            sample, label = self.legend.items[-1]
            label.setToolTip(e.tip)
            sample.setToolTip(e.tip + "\n(click to hide or show)")
            label.item.setCacheMode(_PIXMAP_CACHE)
            sample.setCacheMode(_PIXMAP_CACHE)
            label.mouseClickEvent = (lambda ev, item=e.item: self._label_clicked(ev, item))
            # A grid row may stretch its items; the rows of a legend should not.
            label.setMaximumHeight(label.preferredHeight())
        self.legend.layout.activate()
        self.legend.updateSize()

    def legend_columns(self, n: int) -> int:
        """Columns for ``n`` inline entries: as many as keep the legend to about half
        the plot's height."""
        height = self.getPlotItem().getViewBox().height() or (self.height() - 80)
        rows = max(4, int(0.5 * max(height, 120) / LEGEND_ROW_PX))
        return max(1, math.ceil(n / rows))

    def sync_legend(self, hidden) -> None:
        """Show which curves are hidden (dimmed samples, unticked rows)."""
        for sample, _ in self.legend.items:
            sample.update()
        if self.legend_in_side:
            self.side.sync(hidden)

    def _sample_clicked(self, item) -> None:
        label = next((e.label for e in self.entries if e.item is item), None)
        if label is not None:
            self.legend_toggled.emit(label)

    def _label_clicked(self, ev, item) -> None:
        if ev.button() == Qt.MouseButton.LeftButton:
            ev.accept()
            self._sample_clicked(item)

    def place_legend(self, xs, ys, extent_y=None) -> None:
        """Put the legend in the corner of the view that hides the fewest points.

        ``xs``/``ys`` are the points, in view coordinates; ``extent_y`` anything else
        that stretches the y range (error bars).  While the view auto-ranges (the user
        has not zoomed) its range is computed from these, since pyqtgraph only
        updates the range when it next paints.
        """
        if not self.legend.isVisible() or not self.legend.items:
            return
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


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
