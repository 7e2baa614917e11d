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

import dataclasses

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel,
                               QPushButton, QTabWidget, QVBoxLayout, QWidget)

from engine.measure.backends import DeviceInfo

from .chart_data import (Series, best_per_variant, build_series, derived_peaks, peaks_by_model,
                         record_ceilings, shape_text, shapes_in)
from .chart_render import ChartOptions, render
from .chart_view import ChartView, SeriesLegend
from .results_store import ResultStore
from .theme import ChartTheme

#: Chart kinds in tab order, with tab titles.
CHARTS: dict[str, str] = {
    "runtime": "Runtime",
    "gflops": "GFLOP/s",
    "bandwidth": "Bandwidth",
    "efficiency": "GFLOP/s/W",
    "compare": "Compare",
    "roofline": "Roofline",
}
REDRAW_MS = 200
#: New curves a live redraw builds at most (the rest at the next ones): each costs a few
#: milliseconds of pyqtgraph work in the GUI thread, and a redraw must stay short.
LIVE_NEW_CURVES = 1


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
        #: Series labels the user hid (legend clicks); every chart hides them.
        self.hidden: set[str] = set()
        #: The device model the Roof figures belong to (None: the first device shown),
        #: and the FP32 peaks worked out from the records' % of peak, per model.
        self._peak_device: str | None = None
        self._derived: dict[str, float] = {}
        self._ceilings: dict[str, dict[str, float]] = {}
        #: The compare chart's verdicts against a compared file (see set_verdicts).
        self._verdicts: tuple[tuple[int, str, float], ...] = ()
        self._verdict_base = ""
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
            view.side = SeriesLegend()
            view.side.hide()
            view.side.toggled.connect(lambda label, on: self.set_hidden(label, not on))
            view.side.set_all.connect(lambda on, v=view: self.set_all_hidden(v, not on))
            view.legend_toggled.connect(lambda label: self.set_hidden(label, label not in self.hidden))
            page = QWidget()
            pl = QHBoxLayout(page)
            pl.setContentsMargins(0, 0, 0, 0)
            pl.setSpacing(0)
            pl.addWidget(view, 1)
            pl.addWidget(view.side)
            self.tabs.addTab(page, title)
        self.log_axes = QCheckBox("Log axes")
        self.log_axes.setChecked(True)
        self.error_bars = QCheckBox("Min–max bars")
        self.error_bars.setChecked(True)
        self.error_bars.setToolTip("Error bars from the fastest to the slowest timed launch")
        self.best_only = QCheckBox("Best per variant")
        self.best_only.setToolTip("Per variant, show only the parameter set that is fastest at the "
                                  "largest size measured")

        self.compare_size = QComboBox()
        self.compare_size.setMinimumContentsLength(6)
        self.compare_size.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.compare_metric = QComboBox()
        self.compare_metric.addItem("GFLOP/s", "gflops")
        self.compare_metric.addItem("Runtime (ms)", "runtime")
        compare_opts = QWidget()
        cl = QHBoxLayout(compare_opts)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(QLabel("Size"))
        cl.addWidget(self.compare_size)
        cl.addWidget(self.compare_metric)

        roof_tip = ("The roof: the device's FP32 peak and memory bandwidth (the device's own "
                    "estimates, the peak worked out from the results' % of peak, or your own figures)")
        self.peak_gflops = self._peak_spin(" GFLOP/s", "FP32 peak of the device (0: unknown).\n" + roof_tip)
        self.peak_gbps = self._peak_spin(" GB/s", "Memory bandwidth of the device (0: unknown).\n" + roof_tip)
        roof_opts = QWidget()
        rl = QHBoxLayout(roof_opts)
        rl.setContentsMargins(0, 0, 0, 0)
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
        bar.addWidget(self.best_only)
        for page in self.option_pages:
            bar.addWidget(page)
        bar.addSpacing(6)
        bar.addWidget(self.export_button)
        self.tabs.setCornerWidget(self._corner(bar), Qt.Corner.TopRightCorner)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)

        self.tabs.currentChanged.connect(self._tab_changed)
        self.best_only.toggled.connect(self._best_toggled)
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
        spin.setFixedWidth(spin.fontMetrics().horizontalAdvance("999,999" + suffix) + 20)
        spin.setRange(0, 1e7)
        spin.setDecimals(0)
        spin.setGroupSeparatorShown(True)
        spin.setSingleStep(100)
        spin.setSuffix(suffix)
        spin.setSpecialValueText("peak ?" if "FLOP" in suffix else "GB/s ?")
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
            peak_device=self._peak_device,
            derived_peaks=tuple(self._derived.items()),
            ceilings=tuple((d, what, v) for d, per in self._ceilings.items() for what, v in per.items()),
            hidden=frozenset(self.hidden),
            verdicts=self._verdicts,
            verdict_base=self._verdict_base,
        )

    def set_verdicts(self, verdicts: tuple[tuple[int, str, float], ...], base_name: str) -> None:
        """Colour the compare chart's bars by verdict against ``base_name``: (id(record),
        verdict, NEW/BASE) per paired record; ``()`` and "" turn it off."""
        self._verdicts, self._verdict_base = tuple(verdicts), base_name
        self._stale.add("compare")
        if self.current_kind == "compare":
            self._draw("compare")

    def set_device(self, info: DeviceInfo | None) -> None:
        """Take the roofline's ceilings from the device's estimates (0 when unknown)."""
        self._peak_device = info.name if info else None
        self.peak_gflops.setValue(info.peak_gflops_fp32 or 0 if info else 0)
        self.peak_gbps.setValue(info.peak_gbps or 0 if info else 0)
        self._fill_peak()

    def set_live_peaks(self, info: DeviceInfo) -> None:
        """The opened device's own estimates for a live run (kept where it knows nothing)."""
        if info.peak_gflops_fp32:
            self._peak_device = info.name
            self.peak_gflops.setValue(info.peak_gflops_fp32)
        if info.peak_gbps:
            self.peak_gbps.setValue(info.peak_gbps)

    def _fill_peak(self) -> None:
        """An unknown FP32 peak takes the one derived from the shown records' % of
        peak, for the first such device (others get their own roof in the chart)."""
        if self.peak_gflops.value() or not self._derived:
            return
        device = self._peak_device if self._peak_device in self._derived else next(iter(self._derived))
        self._peak_device = device
        self.peak_gflops.blockSignals(True)
        self.peak_gflops.setValue(round(self._derived[device]))
        self.peak_gflops.blockSignals(False)
        self.peak_gflops.setToolTip(f"FP32 peak of {device}: worked out from the results' % of peak "
                                    "(type your own figure to change it)")
        self._stale = set(CHARTS)

    # --- hiding curves and the best-per-variant filter ------------------------------------

    def set_hidden(self, label: str, hide: bool) -> None:
        """Hide or show one series (by label) in every chart."""
        if hide:
            self.hidden.add(label)
        else:
            self.hidden.discard(label)
        self._options_changed()

    def set_all_hidden(self, view: ChartView, hide: bool) -> None:
        labels = [e.label for e in view.entries]
        if hide:
            self.hidden.update(labels)
        else:
            self.hidden.difference_update(labels)
        self._options_changed()

    def _best_toggled(self, _on: bool) -> None:
        self._series_stale = True
        self._options_changed()

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
            self._draw(self.current_kind, LIVE_NEW_CURVES)

    def _refresh_series(self) -> None:
        if not self._series_stale:
            return
        self.series = build_series(self.store.records)
        if self.best_only.isChecked():
            self.series = best_per_variant(self.series)
        self._series_stale = False
        shown = (r for s in self.series for r in s.records)
        shown = list(shown)
        self._derived = peaks_by_model(derived_peaks(shown).items())
        self._ceilings = record_ceilings(shown)
        self._fill_peak()
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

    def _draw(self, kind: str, max_new_curves: int | None = None) -> None:
        self._refresh_series()
        opts = dataclasses.replace(self.options_now(), max_new_curves=max_new_curves)
        self.last[kind] = render(self.views[kind], kind, self.series, opts)
        if getattr(self.views[kind], "pending", False):
            self._stale.add(kind)          # more curves to build at the next redraw
        else:
            self._stale.discard(kind)

    def stop_updates(self) -> None:
        """Stop the redraw timer (the window is closing)."""
        self._timer.stop()

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
                "best": self.best_only.isChecked(),
                "tab": self.current_kind, "metric": self.compare_metric.currentData()}

    def set_options_state(self, state: dict) -> None:
        if not isinstance(state, dict):
            return
        self.log_axes.setChecked(bool(state.get("log", True)))
        self.error_bars.setChecked(bool(state.get("error_bars", True)))
        self.best_only.setChecked(bool(state.get("best", False)))
        i = self.compare_metric.findData(state.get("metric"))
        if i >= 0:
            self.compare_metric.setCurrentIndex(i)
        if state.get("tab") in CHARTS:
            self.set_current(state["tab"])

