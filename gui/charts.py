"""Live charts (pyqtgraph): runtime, GFLOP/s and bandwidth against size, a bar view
comparing variants at one size, and a roofline.

Drawing follows the ScopeFoundry pattern: results land in the shared
:class:`gui.results_store.ResultStore` as they arrive, which only marks the charts
stale; a QTimer redraws the visible chart a few times a second.  A burst of results
therefore costs one redraw, and the event loop stays responsive during a sweep.

Drawing is in :mod:`gui.chart_render` (shared with the exporter) and the plot widget
in :mod:`gui.chart_view`; this module holds the tabs, their options and the timer.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel,
                               QPushButton, QTabWidget, QVBoxLayout, QWidget)

from engine.backends import DeviceInfo

from .chart_data import Series, build_series, shape_text, shapes_in
from .chart_render import ChartOptions, render
from .chart_view import ChartView
from .results_store import ResultStore
from .theme import ChartTheme

#: Chart kinds in tab order, with tab titles.
CHARTS: dict[str, str] = {
    "runtime": "Runtime",
    "gflops": "GFLOP/s",
    "bandwidth": "Bandwidth",
    "compare": "Compare",
    "roofline": "Roofline",
}
REDRAW_MS = 200


class ChartsPanel(QWidget):
    """The chart tabs, their options, and a timer that redraws what went stale.

    Signals
    -------
    export_requested()
        The Export button was pressed (the window shows the export dialog).
    """

    export_requested = Signal()

    def __init__(self, store: ResultStore, parent=None):
        super().__init__(parent)
        self.store = store
        self.series: list[Series] = []
        self._series_stale = True
        self._stale: set[str] = set(CHARTS)
        self.last: dict[str, object] = {}
        self._compare_choice: list[int] | None = None   # a size picked by the user
        self._build()
        store.changed.connect(self.mark_stale)
        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_MS)
        self._timer.timeout.connect(self._tick)
        self._timer.start()

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.views: dict[str, ChartView] = {}
        for kind, title in CHARTS.items():
            view = ChartView(kind)
            self.views[kind] = view
            self.tabs.addTab(view, title)
        self.log_axes = QCheckBox("Log axes")
        self.log_axes.setChecked(True)
        self.error_bars = QCheckBox("Min–max bars")
        self.error_bars.setChecked(True)
        self.error_bars.setToolTip("Error bars from the fastest to the slowest timed launch")

        self.compare_size = QComboBox()
        self.compare_size.setMinimumContentsLength(10)
        self.compare_metric = QComboBox()
        self.compare_metric.addItem("GFLOP/s", "gflops")
        self.compare_metric.addItem("Runtime (ms)", "runtime")
        compare_opts = QWidget()
        cl = QHBoxLayout(compare_opts)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(QLabel("Size"))
        cl.addWidget(self.compare_size)
        cl.addWidget(self.compare_metric)

        self.peak_gflops = self._peak_spin(" GFLOP/s", "FP32 peak of the device (0: unknown)")
        self.peak_gbps = self._peak_spin(" GB/s", "Memory bandwidth of the device (0: unknown)")
        roof_opts = QWidget()
        rl = QHBoxLayout(roof_opts)
        rl.setContentsMargins(0, 0, 0, 0)
        roof_label = QLabel("Roof")
        roof_label.setToolTip("The device's FP32 peak and memory bandwidth (estimates from the "
                              "device, or your own figures)")
        rl.addWidget(roof_label)
        rl.addWidget(self.peak_gflops)
        rl.addWidget(self.peak_gbps)

        self.axis_opts = QWidget()
        al = QHBoxLayout(self.axis_opts)
        al.setContentsMargins(0, 0, 0, 0)
        al.addWidget(self.log_axes)
        al.addWidget(self.error_bars)
        # Shown one at a time; plain show/hide (not a QStackedWidget) so that the corner
        # only takes the width of the options on display and leaves room for the tabs.
        self.option_pages = [self.axis_opts, compare_opts, roof_opts]
        self.export_button = QPushButton("Export…")
        self.export_button.setToolTip("Save this chart (or all) as PNG or SVG at a chosen size")
        bar = QHBoxLayout()
        bar.setContentsMargins(4, 0, 4, 0)
        for page in self.option_pages:
            bar.addWidget(page)
        bar.addSpacing(12)
        bar.addWidget(self.export_button)
        self.tabs.setCornerWidget(self._corner(bar), Qt.Corner.TopRightCorner)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)

        self.tabs.currentChanged.connect(self._tab_changed)
        for sig in (self.log_axes.toggled, self.error_bars.toggled,
                    self.compare_size.currentIndexChanged, self.compare_metric.currentIndexChanged,
                    self.peak_gflops.valueChanged, self.peak_gbps.valueChanged):
            sig.connect(self._options_changed)
        self.compare_size.activated.connect(self._compare_picked)  # user action only
        self.export_button.clicked.connect(self.export_requested)
        self._tab_changed(0)

    @staticmethod
    def _corner(layout) -> QWidget:
        w = QWidget()
        w.setLayout(layout)
        return w

    @staticmethod
    def _peak_spin(suffix: str, tip: str) -> QDoubleSpinBox:
        spin = QDoubleSpinBox()
        spin.setFixedWidth(spin.fontMetrics().horizontalAdvance("9,999,999" + suffix) + 28)
        spin.setRange(0, 1e7)
        spin.setDecimals(0)
        spin.setGroupSeparatorShown(True)
        spin.setSingleStep(100)
        spin.setSuffix(suffix)
        spin.setSpecialValueText("unknown")
        spin.setToolTip(tip)
        spin.setKeyboardTracking(False)
        return spin

    # --- state -------------------------------------------------------------------------

    @property
    def current_kind(self) -> str:
        return list(CHARTS)[self.tabs.currentIndex()]

    def set_current(self, kind: str) -> None:
        self.tabs.setCurrentIndex(list(CHARTS).index(kind))

    def options_now(self) -> ChartOptions:
        shape = self.compare_size.currentData()
        return ChartOptions(
            log_axes=self.log_axes.isChecked(),
            error_bars=self.error_bars.isChecked(),
            compare_shape=tuple(shape) if shape else None,
            compare_metric=self.compare_metric.currentData() or "gflops",
            peak_gflops=self.peak_gflops.value() or None,
            peak_gbps=self.peak_gbps.value() or None,
        )

    def set_device(self, info: DeviceInfo | None) -> None:
        """Take the roofline's ceilings from the device's estimates (0 when unknown)."""
        self.peak_gflops.setValue(info.peak_gflops_fp32 or 0 if info else 0)
        self.peak_gbps.setValue(info.peak_gbps or 0 if info else 0)

    # --- redrawing -----------------------------------------------------------------------

    def mark_stale(self) -> None:
        self._series_stale = True
        self._stale = set(CHARTS)

    def _compare_picked(self, index: int) -> None:
        self._compare_choice = self.compare_size.itemData(index)

    def _options_changed(self, *_) -> None:
        self._stale = set(CHARTS)
        self._draw(self.current_kind)

    def _tab_changed(self, index: int) -> None:
        kind = list(CHARTS)[index]
        shown = {"compare": 1, "roofline": 2}.get(kind, 0)
        for i, page in enumerate(self.option_pages):
            page.setVisible(i == shown)
        if kind in self._stale:
            self._draw(kind)

    def _tick(self) -> None:
        if self.current_kind in self._stale and self.isVisible():
            self._draw(self.current_kind)

    def _refresh_series(self) -> None:
        if not self._series_stale:
            return
        self.series = build_series(self.store.records)
        self._series_stale = False
        # Keep a size the user picked while it still exists; otherwise follow the
        # largest size shown (which grows during a sweep).
        shapes = shapes_in(self.series)
        chosen = self._compare_choice
        self.compare_size.blockSignals(True)
        self.compare_size.clear()
        for sh in shapes:
            self.compare_size.addItem(shape_text(sh), list(sh))
        idx = self.compare_size.findData(chosen) if chosen else -1
        self.compare_size.setCurrentIndex(idx if idx >= 0 else self.compare_size.count() - 1)
        self.compare_size.blockSignals(False)

    def _draw(self, kind: str) -> None:
        self._refresh_series()
        self.last[kind] = render(self.views[kind], kind, self.series, self.options_now())
        self._stale.discard(kind)

    def redraw(self, kind: str | None = None) -> None:
        """Draw now: one chart, or every chart (tests, exports, screenshots)."""
        for k in ([kind] if kind else list(CHARTS)):
            self._draw(k)

    def curves(self, kind: str):
        """What the last drawing of ``kind`` showed (drawing it first if stale)."""
        if kind in self._stale or kind not in self.last:
            self._draw(kind)
        return self.last[kind]

    def retheme(self) -> None:
        theme = ChartTheme.from_palette(self.palette())
        for view in self.views.values():
            view.apply_theme(theme)
        self._stale = set(CHARTS)
        self._draw(self.current_kind)

    def changeEvent(self, event):  # noqa: N802 (Qt API)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self.retheme()
        super().changeEvent(event)

    def options_state(self) -> dict:
        return {"log": self.log_axes.isChecked(), "error_bars": self.error_bars.isChecked(),
                "tab": self.current_kind, "metric": self.compare_metric.currentData()}

    def set_options_state(self, state: dict) -> None:
        if not isinstance(state, dict):
            return
        self.log_axes.setChecked(bool(state.get("log", True)))
        self.error_bars.setChecked(bool(state.get("error_bars", True)))
        i = self.compare_metric.findData(state.get("metric"))
        if i >= 0:
            self.compare_metric.setCurrentIndex(i)
        if state.get("tab") in CHARTS:
            self.set_current(state["tab"])

