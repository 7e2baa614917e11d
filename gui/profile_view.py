"""The Profile view: hardware counters of profiled records, variants side by side.

A table (a row per curated metric, a column per profiled record of one shape) and a bar
chart of the metric selected in it, with a line saying what the metric means and which
technique moves it (:mod:`engine.profile.metrics`). The records come from the shared
:class:`gui.results_store.ResultStore` — a profile is part of a record (``profile``), so
saved and reopened results show here too. The raw ``.ncu-rep`` of a column opens in
Nsight Compute's own GUI where it is installed.
"""
from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QFont
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel,
                               QPushButton, QSizePolicy, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from engine.profile import metrics as pm
from engine.results.records import ProfileData, ResultRecord, is_valid, profile_data
from engine.inputs.sizes import format_shape

from . import theme
from .results_store import ResultStore

EMPTY_TEXT = ("No profile yet. Choose variants and one size, then Run ▸ Profile "
              "(cuda backend and Nsight Compute's ncu needed): each kernel's launch is "
              "profiled once and its hardware counters appear here.")


def find_ncu_ui() -> str | None:
    """Nsight Compute's GUI (``ncu-ui``) beside ``ncu`` or on PATH, or None."""
    found = shutil.which("ncu-ui")
    if found:
        return found
    from engine.profile.nsight import find_ncu  # noqa: PLC0415

    ncu = find_ncu()
    if ncu:
        beside = Path(ncu).with_name("ncu-ui")
        if beside.is_file():
            return str(beside)
    return None


def short_labels(recs: list[ResultRecord]) -> list[str]:
    """Labels for a chart axis: the variant's name, with only the parameters that tell
    apart several columns of one variant."""
    out = []
    for r in recs:
        same = [o for o in recs if o.variant == r.variant and o is not r]
        differ = [k for k in r.params if any(o.params.get(k) != r.params[k] for o in same)]
        out.append(r.variant + (f"[{','.join(f'{k}={r.params[k]}' for k in differ)}]"
                                if differ else ""))
    return out


def header_text(rec: ResultRecord) -> str:
    """A column header: the variant, then its parameters on lines of about 20 characters."""
    lines, line = [rec.variant], ""
    for part in (f"{k}={v}" for k, v in rec.params.items()):
        if line and len(line) + len(part) > 20:
            lines.append(line)
            line = ""
        line = f"{line},{part}" if line else part
    if line:
        lines.append(line)
    return "\n".join(lines)


def profiled(records: list[ResultRecord]) -> list[ResultRecord]:
    """The records with counters, the latest profile of each item kept. A record with a
    field of the wrong type or shape (a profile that is no mapping, say) is not shown:
    files are checked when read, but the view must not fail on any record it is given."""
    latest: dict[tuple, ResultRecord] = {}
    for r in records:
        # Cheap test first: this runs on every store change, over every record.
        if isinstance(r.profile, dict) and r.profile.get("counters") and is_valid(r) \
                and profile_data(r).counters:
            latest[(r.source, r.device_key(), r.label(), r.m, r.n, r.k, r.dtype)] = r
    return list(latest.values())


class ProfileView(QWidget):
    """Counters of profiled records of one shape: table, bar chart, explanation.

    Signals
    -------
    open_report_failed(str)
        Opening a report in Nsight Compute failed; the text says why.
    """

    open_report_failed = Signal(str)

    def __init__(self, store: ResultStore, parent: QWidget | None = None):
        super().__init__(parent)
        self.store = store
        self.metrics = pm.METRICS
        self._columns: list[ResultRecord] = []
        self._data: list[ProfileData] = []      # the columns' profiles, typed
        self._profiled: list[ResultRecord] = []
        self._shapes: list[tuple] = []
        self._build()
        store.changed.connect(self.refresh)
        self.refresh()

    # --- construction ----------------------------------------------------------------

    def _build(self) -> None:
        top = QHBoxLayout()
        top.addWidget(QLabel("Shape:"))
        self.shape_combo = QComboBox()
        self.shape_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.shape_combo.currentIndexChanged.connect(self._fill)
        top.addWidget(self.shape_combo)
        self.info = QLabel()
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # A long device or tool name must not widen the window: the label gives way.
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        top.addWidget(self.info, 1)
        self.open_button = QPushButton("Open in Nsight Compute")
        self.open_button.setToolTip("Open the selected column's .ncu-rep report in Nsight "
                                    "Compute's own GUI (ncu-ui)")
        self.open_button.clicked.connect(self.open_selected_report)
        top.addWidget(self.open_button)
        self.folder_button = QPushButton("Show reports")
        self.folder_button.setToolTip("Open the folder holding the .ncu-rep reports and their CSV")
        self.folder_button.clicked.connect(self.show_report_folder)
        top.addWidget(self.folder_button)

        self.empty = QLabel(EMPTY_TEXT)
        self.empty.setWordWrap(True)
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)

        self.table = QTableWidget(0, 0)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setMaximumSectionSize(180)   # tooltips hold the rest
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.currentCellChanged.connect(self._cell_changed)

        self.plot = pg.PlotWidget()
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.getViewBox().setMouseEnabled(False, False)
        self.explain = QLabel()
        self.explain.setWordWrap(True)
        self.explain.setTextFormat(Qt.TextFormat.RichText)
        self.explain.setMinimumHeight(48)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.plot, 1)
        rl.addWidget(self.explain)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.table)
        self.splitter.addWidget(right)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setChildrenCollapsible(False)
        self._split_set = False

        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.empty, 1)
        lay.addWidget(self.splitter, 1)

    def resizeEvent(self, event):  # noqa: N802 (Qt API)
        super().resizeEvent(event)
        if not self._split_set and self.width() > 200:
            # The table gets the larger share the first time there is a width to share.
            self.splitter.setSizes([int(self.width() * 0.58), int(self.width() * 0.42)])
            self._split_set = True

    # --- data ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the store: the shapes that have profiles, then the chosen shape."""
        recs = self._profiled = profiled(self.store.records)
        shapes = list(dict.fromkeys((r.m, r.n, r.k, r.dtype) for r in reversed(recs)))
        current = self._shapes[self.shape_combo.currentIndex()] \
            if 0 <= self.shape_combo.currentIndex() < len(self._shapes) else None
        self._shapes = shapes
        self.shape_combo.blockSignals(True)
        self.shape_combo.clear()
        for m, n, k, dtype in shapes:
            self.shape_combo.addItem(f"{format_shape((m, n, k))} {dtype}")
        if current in shapes:
            self.shape_combo.setCurrentIndex(shapes.index(current))
        self.shape_combo.blockSignals(False)
        self._fill()

    def set_availability(self, ok: bool, why: str) -> None:
        """Say under the empty view why Profile cannot run here (nothing when it can)."""
        self.empty.setText(EMPTY_TEXT + ("" if ok or not why else f"\n\nNot available now: {why}."))

    def columns(self) -> list[ResultRecord]:
        """The records shown, in column order."""
        return list(self._columns)

    def show_shape(self, m: int, n: int, k: int, dtype: str) -> bool:
        """Show the profiles of this shape; False when there are none."""
        key = (m, n, k, dtype)
        if key not in self._shapes:
            return False
        self.shape_combo.setCurrentIndex(self._shapes.index(key))
        return True

    def _fill(self, *_) -> None:
        idx = self.shape_combo.currentIndex()
        shape = self._shapes[idx] if 0 <= idx < len(self._shapes) else None
        recs = [r for r in self._profiled if (r.m, r.n, r.k, r.dtype) == shape]
        self._columns = recs
        self._data = data = [profile_data(r) for r in recs]
        has = bool(recs)
        self.empty.setVisible(not has)
        self.splitter.setVisible(has)
        for w in (self.shape_combo, self.open_button, self.folder_button):
            w.setEnabled(has)
        self.open_button.setEnabled(has and find_ncu_ui() is not None)
        if not has:
            self.open_button.setToolTip("Nsight Compute's GUI (ncu-ui) opens the reports")
            self.info.clear()
            self.table.setRowCount(0)
            self.table.setColumnCount(0)
            self.plot.clear()
            self.explain.clear()
            return
        row = max(self.table.currentRow(), 0)
        col = max(self.table.currentColumn(), 0)
        tools = sorted({d.tool for d in data} - {""})
        devices = sorted({r.device_label() for r in recs})
        self.info.setText(f"{', '.join(devices)} · {', '.join(tools) or 'ncu'} · one launch "
                          f"each, caches flushed per pass")
        self.info.setToolTip(self.info.text())
        self.table.blockSignals(True)
        self.table.clear()
        self.table.setRowCount(len(self.metrics))
        self.table.setColumnCount(len(recs))
        self.table.setHorizontalHeaderLabels([header_text(r) for r in recs])
        self.table.setVerticalHeaderLabels([m.label for m in self.metrics])
        for i, metric in enumerate(self.metrics):
            head = self.table.verticalHeaderItem(i)
            head.setToolTip(f"{metric.meaning}\nMoved by: {metric.technique}")
            for j, d in enumerate(data):
                item = QTableWidgetItem(pm.value_text(metric, d.counters, stalls=1))
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                item.setToolTip(self._cell_tip(metric, d))
                self.table.setItem(i, j, item)
        for j, (rec, d) in enumerate(zip(recs, data)):
            head = self.table.horizontalHeaderItem(j)
            head.setToolTip("\n".join([rec.label(), rec.device_label()]
                                      + [f"kernel {k.get('name', '?')}" for k in d.kernels]
                                      + ([f"report {d.report}"] if d.report else [])))
        self.table.blockSignals(False)
        self.table.setCurrentCell(min(row, len(self.metrics) - 1), min(col, len(recs) - 1))
        self._draw(self.metrics[min(row, len(self.metrics) - 1)])

    @staticmethod
    def _cell_tip(metric: pm.Metric, d: ProfileData) -> str:
        if d.error:
            return f"profile failed: {d.error}"
        if metric.key == "top_stalls":
            stalls = pm.top_stalls(d.counters, 6)
            return "\n".join(f"{r}: {v:.2f} warps/issue — {pm.STALL_REASONS.get(r, '')}"
                             for r, v in stalls) or "no stall measured"
        return metric.meaning

    def _cell_changed(self, row: int, _col: int, *_):
        if 0 <= row < len(self.metrics):
            self._draw(self.metrics[row])

    def selected_metric(self) -> pm.Metric:
        row = self.table.currentRow()
        return self.metrics[row] if 0 <= row < len(self.metrics) else self.metrics[0]

    def select_metric(self, key: str) -> None:
        """Select the row of metric ``key`` (its bars are drawn)."""
        keys = [m.key for m in self.metrics]
        self.table.setCurrentCell(keys.index(key), max(self.table.currentColumn(), 0))

    # --- chart -----------------------------------------------------------------------

    def bar_values(self, metric: pm.Metric | None = None) -> dict[str, float]:
        """What the chart draws for ``metric`` (the selected one): label → value."""
        metric = metric or self.selected_metric()
        return {r.label(): pm.value_of(metric, d.counters)
                for r, d in zip(self._columns, self._data)}

    def _draw(self, metric: pm.Metric) -> None:
        th = theme.ChartTheme.from_palette(self.palette())
        self.plot.clear()
        self.plot.setBackground(th.background)
        plot = self.plot.getPlotItem()
        vb = plot.getViewBox()
        vb.invertY(True)
        recs = self._columns
        data = self._data
        values = np.array([pm.value_of(metric, d.counters) for d in data], dtype=float)
        finite = np.where(np.isfinite(values), values, 0.0)
        colors = theme.assign_colors(r.variant for r in recs)
        ys = np.arange(len(recs), dtype=float)
        brushes = [pg.mkBrush(colors[r.variant]) for r in recs]
        plot.addItem(pg.BarGraphItem(x0=np.zeros(len(recs)), y=ys, height=0.7, width=finite,
                                     brushes=brushes, pens=[pg.mkPen(c.color().darker(130))
                                                            for c in brushes]))
        left = plot.getAxis("left")
        left.setTicks([[(float(y), text) for y, text in zip(ys, short_labels(recs))]])
        for name in ("left", "bottom"):
            ax = plot.getAxis(name)
            ax.setPen(th.foreground)
            ax.setTextPen(th.foreground)
        unit = f" ({metric.unit})" if metric.unit else ""
        what = "blocks/SM of the limiting resource" if metric.key == "occupancy_limiter" else \
            "warps stalled per issue, largest reason" if metric.key == "top_stalls" else ""
        plot.setTitle(f"{metric.label}{unit}" + (f" — {what}" if what else ""),
                      color=th.foreground.name(), size="10pt")
        vmax = float(finite.max()) if len(finite) and finite.max() > 0 else 1.0
        font = QFont(self.font())
        font.setPointSizeF(8.0)
        for y, d, val in zip(ys, data, values):
            text = pm.value_text(metric, d.counters, stalls=1) \
                if math.isfinite(val) else "not measured"
            label = pg.TextItem(text, anchor=(0, 0.5), color=th.foreground)
            label.setFont(font)
            label.setPos(max(val, 0.0) if math.isfinite(val) else 0.0, y)
            plot.addItem(label)
        vb.setXRange(0, vmax * 1.5, padding=0)     # room for the value texts
        vb.setYRange(-0.6, len(recs) - 0.4, padding=0)
        self.explain.setText(f"<b>{metric.label}</b>: {_html(metric.meaning)}<br>"
                             f"<b>Moved by</b>: {_html(metric.technique)}")

    # --- reports ---------------------------------------------------------------------

    def _selected_report(self) -> str:
        col = self.table.currentColumn()
        return self._data[col].report if 0 <= col < len(self._data) else ""

    def open_selected_report(self) -> bool:
        report = self._selected_report()
        ui = find_ncu_ui()
        if not report or not Path(report).is_file():
            self.open_report_failed.emit(f"no report file for this column ({report or 'none kept'})")
            return False
        if ui is None:
            self.open_report_failed.emit("Nsight Compute's GUI (ncu-ui) was not found; the "
                                         f"report is {report}")
            return False
        try:
            subprocess.Popen([ui, report], start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except OSError as exc:
            self.open_report_failed.emit(f"ncu-ui could not start: {exc}")
            return False
        return True

    def show_report_folder(self) -> bool:
        report = self._selected_report()
        if not report or not Path(report).parent.is_dir():
            self.open_report_failed.emit("the reports' folder no longer exists")
            return False
        return QDesktopServices.openUrl(QUrl.fromLocalFile(str(Path(report).parent)))


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
