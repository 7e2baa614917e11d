"""The main window.

Layout: a *Configure* dock on the left (target, variants, sizes, measurement,
inputs); a run toolbar on top (Run, Cancel, progress, current item, ETA); charts in
the middle; results, log and devices in tabs below.

The window keeps the layout and wires widgets and actions to their owners:
:class:`RunController` (engines, runs, progress, cancel, faults, shutdown; its signals
arrive queued in the GUI thread, so no slot here ever waits on a device),
:class:`ResultsFiles` (the live run's records and their journal), and three flows:
:class:`ProfileFlow` (the Profile action), :class:`EditorFlow` (the kernel editor and its
Run) and :class:`ResultsFlow` (open, save, recent files, export).

Nothing the user hands the window stops it: results files are read on threads of their
own (a named pipe is refused at once), settings are checked field by field (a bad one
takes its default and says so in the Log), and results of a session that crashed or
was killed are offered back at the next start (:mod:`gui.journal`).
"""
from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import QEvent, QSettings, Qt, QTimer
from PySide6.QtGui import QAction, QKeySequence, QPalette
from PySide6.QtWidgets import (QApplication, QDockWidget, QFileDialog, QLabel, QMainWindow,
                               QMessageBox, QScrollArea, QSizePolicy, QSplitter, QStyle,
                               QTabWidget, QToolBar, QToolButton, QWidget)

from engine.measure.backends import BackendStatus
from engine.results.records import RecordStatus, ResultRecord
from engine.run.runner import Event

from . import dialogs
from .charts import ChartsPanel
from .compare_flow import CompareFlow
from .config_panel import ConfigPanel
from .device_panel import DevicePanel, backend_line
from .editor_flow import EditorFlow
from .journal import discard, scan_journals
from .kernel_editor import KernelEditor
from .kernel_folders import KernelFolders
from .log_panel import LogPanel
from .profile_flow import PROFILE_TIP, ProfileFlow
from .profile_runner import ProfileRunner
from .profile_view import ProfileView
from .results_files import ResultsFiles
from .results_flow import ResultsFlow
from .results_store import ResultStore
from .results_table import ResultsTable
from .run_bar import RunBar, format_duration
from .run_controller import ClusterFactory, EngineFactory, RunController
from .settings import APPLICATION, AppSettings, default_settings
from .theme import dark_palette

#: A close ends the engines within this time whatever they are doing (they are killed
#: when they do not stop), so the window is gone within it.
CLOSE_DEADLINE_MS = 4_500

STYLE_SHEET = """
QLineEdit[invalid="true"] { border: 1px solid #e3242b; border-radius: 3px; padding: 2px 3px; }
QLabel[invalid="true"] { color: #e3242b; }
QLabel#hint { color: palette(placeholder-text); }
QLabel#panelTitle { font-weight: 600; padding: 2px 0; }
QPushButton#runButton { font-weight: 600; padding: 4px 16px; }
QGroupBox { margin-top: 1.2em; }
QGroupBox::title { subcontrol-origin: margin; left: 6px; padding: 0 3px; }
QToolBar { spacing: 6px; }
"""


class PanelScroll(QScrollArea):
    """Scrolls a tall panel vertically and stays as wide as the panel needs.

    The panel's minimum width changes after construction (style sheet, fonts, the
    devices found), and the vertical scroll bar takes width of its own; a fixed minimum
    would clip the right edge of every row.  Styles whose scroll bars overlap the view
    (overlay scroll bars) would draw the bar over the panel's right edge: there the
    viewport keeps a margin as wide as the overlap.
    """

    def __init__(self, panel: QWidget):
        super().__init__()
        self.setWidget(panel)
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        panel.installEventFilter(self)
        self._fit()

    def _fit(self) -> None:
        bar = self.verticalScrollBar()
        margin = max(0, bar.style().pixelMetric(QStyle.PixelMetric.PM_ScrollView_ScrollBarOverlap,
                                                None, bar))
        if self.viewportMargins().right() != margin:
            self.setViewportMargins(0, 0, margin, 0)
        self.setMinimumWidth(self.widget().minimumSizeHint().width() + bar.sizeHint().width() + 6)

    def eventFilter(self, obj, event):  # noqa: N802 (Qt API)
        if obj is self.widget() and event.type() in (QEvent.Type.LayoutRequest,
                                                     QEvent.Type.Show):
            self._fit()
        return False


class MainWindow(QMainWindow):
    """The lab's window.

    Parameters
    ----------
    settings
        Where configuration, geometry and recent files live; by default the user's
        store.  Tests pass an ini file in a temporary directory.
    engine_factory
        Makes one device's engine, ``factory(backend, index)``; by default each device
        gets its own process (:class:`engine.run.process.ProcessEngine`).  Tests pass
        :class:`engine.run.engines.LocalEngine` for speed.
    cluster_factory
        Makes a Ray cluster's engines, ``factory(address, backend)``.
    """

    def __init__(self, settings: QSettings | None = None,
                 engine_factory: EngineFactory | None = None,
                 cluster_factory: ClusterFactory | None = None):
        super().__init__()
        self.settings = AppSettings(settings if settings is not None else default_settings())
        self.store = ResultStore(self)
        self.files = ResultsFiles(self.store, self.settings, self)
        self.controller = RunController(engine_factory, cluster_factory, self)
        self.statuses: dict[str, BackendStatus] = {}
        #: (available, reason) of Ray clusters once checked (after the backends).
        self.ray_status: tuple[bool, str] | None = None
        self._closing = False
        self._force_close = False
        self._settings_saved = False
        self._shut_down = False
        self._restyling = False
        self._palette_key: tuple | None = None
        self._run_t0 = 0.0
        #: The run's autotune cache problems (engine.run.autotune.CacheProblem), for its summary.
        self._run_cache_problems: list = []
        self.setWindowTitle(APPLICATION)
        self.setAcceptDrops(True)
        self.setDockNestingEnabled(True)
        self.kernel_folders = KernelFolders(self.settings, self)
        self._said_problems: set[str] = set()    # user-kernel problems already logged
        self._build()
        self.profile_flow = ProfileFlow(self, self._start_plan)
        self.editor_flow = EditorFlow(self)
        self.results_flow = ResultsFlow(self)
        self.compare_flow = CompareFlow(self)
        self._build_actions()
        self._connect()
        self.kernel_folders.reload()   # before the saved choices name user kernels
        self._restore()
        self._refresh_ready()
        self.controller.probe()
        # Once the window is up and the event loop runs (not inside the constructor); a
        # child timer, so that a window destroyed first is never asked.
        self._offer_timer = QTimer(self)
        self._offer_timer.setSingleShot(True)
        self._offer_timer.timeout.connect(self.offer_restore)
        self._offer_timer.start(0)

    @property
    def running(self) -> bool:
        """Whether a run is going (from Run until its finished event is handled)."""
        return self.controller.running

    @property
    def closing(self) -> bool:
        """The window is closing (or closed): no dialogs, no new work."""
        return self._closing or self._shut_down

    @property
    def profiler(self) -> ProfileRunner:
        """The Profile flow's runner (Nsight Compute off the GUI thread)."""
        return self.profile_flow.runner

    # --- construction --------------------------------------------------------------------

    def _build(self) -> None:
        self.setStyleSheet(STYLE_SHEET)
        pal = QApplication.palette()
        self._palette_key = tuple(pal.color(role).rgba() for role in (
            QPalette.ColorRole.Window, QPalette.ColorRole.Base, QPalette.ColorRole.Text))
        self.config = ConfigPanel()
        scroll = PanelScroll(self.config)
        self.config_dock = QDockWidget("Configure", self)
        self.config_dock.setObjectName("configureDock")
        self.config_dock.setWidget(scroll)
        self.config_dock.setFeatures(QDockWidget.DockWidgetFeature.DockWidgetMovable
                                     | QDockWidget.DockWidgetFeature.DockWidgetFloatable
                                     | QDockWidget.DockWidgetFeature.DockWidgetClosable)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.config_dock)

        self.kernel_editor = KernelEditor(self.kernel_folders, lambda: self.editor_flow.context())
        self.editor_dock = QDockWidget("Kernel editor", self)
        self.editor_dock.setObjectName("kernelEditorDock")
        self.editor_dock.setWidget(self.kernel_editor)
        self.editor_dock.setFeatures(self.config_dock.features())
        # A tab beside Configure: code needs the width, and the charts stay in view.
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.editor_dock)
        self.tabifyDockWidget(self.config_dock, self.editor_dock)
        self.config_dock.raise_()
        self.editor_dock.hide()        # until a kernel is opened or started

        self.charts = ChartsPanel(self.store)
        self.table = ResultsTable(self.store)
        self.log = LogPanel()
        self.devices = DevicePanel()
        self.profile_view = ProfileView(self.store)
        self.bottom_tabs = QTabWidget()
        self.bottom_tabs.setDocumentMode(True)
        self.bottom_tabs.addTab(self.table, "Results")
        self.bottom_tabs.addTab(self.profile_view, "Profile")
        self.bottom_tabs.addTab(self.log, "Log")
        self.bottom_tabs.addTab(self.devices, "Devices")
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.setObjectName("centralSplitter")
        self.splitter.addWidget(self.charts)
        self.splitter.addWidget(self.bottom_tabs)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        self.splitter.setChildrenCollapsible(False)
        self.setCentralWidget(self.splitter)

        self.run_bar = RunBar()
        self.run_toolbar = QToolBar("Run")
        self.run_toolbar.setObjectName("runToolbar")
        self.run_toolbar.setMovable(False)
        self.run_toolbar.addWidget(self.run_bar)
        self.run_bar.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.run_toolbar)

        self.backend_button = QToolButton()
        self.backend_button.setAutoRaise(True)
        self.backend_button.setText("Probing backends…")
        self.backend_button.clicked.connect(lambda: self.bottom_tabs.setCurrentWidget(self.devices))
        self.statusBar().addPermanentWidget(self.backend_button)
        self.count_label = QLabel()
        self.statusBar().addPermanentWidget(self.count_label)

    def _action(self, text: str, slot, shortcut=None, icon=None, tip: str = "") -> QAction:
        act = QAction(text, self)
        if icon is not None:
            act.setIcon(self.style().standardIcon(icon))
        if shortcut is not None:
            act.setShortcut(QKeySequence(shortcut))
        if tip:
            act.setToolTip(tip)
            act.setStatusTip(tip)
        act.triggered.connect(slot)
        self.addAction(act)  # shortcuts work whichever widget has focus
        return act

    def _build_actions(self) -> None:
        SP = QStyle.StandardPixmap
        self.open_action = self._action("&Open results…", self.results_flow.open_dialog, QKeySequence.StandardKey.Open,
                                        SP.SP_DialogOpenButton, "Open a results file (.json/.csv); "
                                        "opening several overlays them")
        self.save_action = self._action("&Save results…", self.results_flow.save_dialog, QKeySequence.StandardKey.Save,
                                        SP.SP_DialogSaveButton, "Save every shown result to .csv or .json")
        self.export_action = self._action("&Export chart…", self.results_flow.export_dialog, "Ctrl+E", None,
                                          "Save charts as PNG or SVG at a chosen size")
        self.copy_action = self._action("Copy results as TSV", lambda: self.table.copy_tsv(all_rows=True),
                                        "Ctrl+Shift+C")
        self.quit_action = self._action("&Quit", self.close, QKeySequence.StandardKey.Quit)
        self.run_action = self._action("&Run", lambda: self.start_run(), "F5", SP.SP_MediaPlay)
        self.cancel_action = self._action("&Cancel", self.cancel_run, "Esc", SP.SP_MediaStop)
        self.profile_action = self._action(
            "&Profile…", lambda: self.start_profile(), "Ctrl+Shift+P", None, PROFILE_TIP)
        self.clear_action = self._action("C&lear results", self.clear_results, None,
                                         SP.SP_DialogResetButton, "Remove every shown result")
        self.keep_runs_action = QAction("&Keep previous runs", self, checkable=True)
        self.keep_runs_action.setToolTip("Keep the previous run's curves (as 'run N') "
                                         "instead of replacing them")
        self.dark_action = QAction("&Dark palette", self, checkable=True)
        self.dark_action.setToolTip("Use a dark palette even where the desktop has none")
        self.dark_action.toggled.connect(self.set_dark)

        menu = self.menuBar().addMenu("&File")
        menu.addAction(self.open_action)
        self.recent_menu = menu.addMenu("Open &recent")
        menu.addAction(self.save_action)
        menu.addAction(self.export_action)
        menu.addSeparator()
        self.compare_action = self._action("Co&mpare with…", self.compare_flow.choose, None, None,
                                           "Compare the shown results with a results file: ratio and "
                                           "verdict columns, compare chart bars by verdict")
        self.clear_compare_action = self._action("Clear co&mparison", self.compare_flow.clear)
        self.clear_compare_action.setEnabled(False)
        self.compare_flow.changed.connect(
            lambda: self.clear_compare_action.setEnabled(self.compare_flow.active))
        menu.addAction(self.compare_action)
        menu.addAction(self.compare_flow.threshold_action)
        menu.addAction(self.clear_compare_action)
        menu.addSeparator()
        self.add_folder_action = self._action("Add &kernel folder…", self.add_kernel_folder_dialog,
                                              None, None, "Read the kernel files of a folder as "
                                              "user kernels (the user kernel folder is always read)")
        menu.addAction(self.add_folder_action)
        menu.addSeparator()
        menu.addAction(self.copy_action)
        menu.addSeparator()
        menu.addAction(self.quit_action)
        menu = self.menuBar().addMenu("&Run")
        menu.addAction(self.run_action)
        menu.addAction(self.profile_action)
        menu.addAction(self.cancel_action)
        menu.addSeparator()
        menu.addAction(self.keep_runs_action)
        menu.addAction(self.clear_action)
        ed = self.kernel_editor
        menu = self.menuBar().addMenu("&Kernel")
        self.new_kernel_action = self._action("&New kernel from template…", self.editor_flow.wrap(ed.new_dialog),
                                              None, None, "Copy any built-in kernel (header and "
                                              "all) into an editable kernel of your own")
        self.open_kernel_action = self._action("&Open kernel…", self.editor_flow.wrap(ed.open_dialog),
                                               "Ctrl+Shift+O", None, "Open a .cu or .cl kernel file")
        menu.addAction(self.new_kernel_action)
        menu.addAction(self.open_kernel_action)
        menu.addSeparator()
        # The editor's own actions (one action per shortcut: two would be ambiguous).
        for act in (ed.compile_action, ed.run_action):
            act.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            act.triggered.connect(lambda *_: self.editor_flow.show())
            menu.addAction(act)
            self.addAction(act)
        menu.addSeparator()
        menu.addAction(self.editor_dock.toggleViewAction())
        menu = self.menuBar().addMenu("&View")
        menu.addAction(self.config_dock.toggleViewAction())
        menu.addAction(self.dark_action)
        menu = self.menuBar().addMenu("&Help")
        menu.addAction(self._action("&About", self.about))
        self.results_flow.rebuild_recent_menu()

        # One toolbar row: the run controls take the free width, file actions sit right.
        self.run_toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.run_toolbar.addSeparator()
        for act in (self.profile_action, self.open_action, self.save_action, self.clear_action):
            self.run_toolbar.addAction(act)

    def _connect(self) -> None:
        self.run_bar.run_button.clicked.connect(lambda: self.start_run())
        self.run_bar.cancel_button.clicked.connect(self.cancel_run)
        self.config.changed.connect(self._refresh_ready)
        self.config.device_changed.connect(self._device_changed)
        self.devices.device_activated.connect(self.config.select)
        self.charts.export_requested.connect(self.results_flow.export_dialog)
        self.controller.backends_probed.connect(self._backends_probed)
        self.controller.probe_failed.connect(self._probe_failed)
        self.controller.ray_probed.connect(self._ray_probed)
        self.controller.started.connect(self._run_started)
        self.controller.progress.connect(self._run_progress)
        self.controller.log.connect(self.log.append)
        self.controller.result.connect(self._run_result)
        self.controller.cache_problem.connect(self._run_cache_problems.append)
        self.controller.finished.connect(self._run_finished)
        self.controller.closed.connect(self._engines_closed)
        self.profile_flow.running_changed.connect(self._set_running)
        self.kernel_folders.changed.connect(self._user_kernels_changed)
        self.editor_flow.run_requested.connect(self.start_run)
        # The journal was prepared before this connection: a folder it cannot write is
        # said now, at start, not only when the first result is lost to it.
        if getattr(self.files.journal, "problem", None):
            self.log.append("warning", self.files.journal.problem)
        self.store.changed.connect(self._store_changed)
        self.log.errors_changed.connect(self._log_errors)

    # --- settings ------------------------------------------------------------------------

    def _restore(self) -> None:
        """Apply the saved settings; each one that is unusable keeps its default and
        gets a line in the Log (:class:`gui.settings.AppSettings` checks them)."""
        s = self.settings
        geometry = s.geometry()
        restored = geometry is not None and self.restoreGeometry(geometry)
        if geometry is not None and not restored:
            s.report_layout_problem("window/geometry", "is not a window geometry Qt can restore")
        if not restored or not self._geometry_fits():
            self.resize(1280, 800)
        state = s.window_state()
        if state is not None and not self.restoreState(state):
            s.report_layout_problem("window/state", "is not a dock layout Qt can restore")
            state = None
        if state is None:
            self.resizeDocks([self.config_dock], [400], Qt.Orientation.Horizontal)
        splitter = s.splitter_state()
        if splitter is not None and not self.splitter.restoreState(splitter):
            s.report_layout_problem("window/splitter", "is not a splitter layout Qt can restore")
            splitter = None
        if splitter is None:
            self.splitter.setSizes([470, 250])
        try:
            self.config.set_state(s.load_config())
        except Exception as exc:  # noqa: BLE001  (checked already; a last line of defence)
            s.problems.append(f"settings: the saved configuration could not be applied "
                              f"({type(exc).__name__}: {exc}); some fields keep their default")
        self.charts.set_options_state(s.chart_options())
        self.keep_runs_action.setChecked(s.flag("run/keep_previous", False))
        self.dark_action.setChecked(s.flag("view/dark", False))
        # Checked now, so that their problems are logged with the others.
        s.recent_files()
        s.last_dir("results")
        s.last_dir("export")
        for line in s.problems:
            self.log.append("warning", line)
        s.on_problem = lambda line: self.log.append("warning", line)

    def _geometry_fits(self) -> bool:
        """Whether the restored size is one a window can have (a hand-edited geometry can
        say 1×1 or 100000×100000 and still be well-formed)."""
        screen = self.screen().availableGeometry() if self.screen() is not None else None
        limit = max(4 * screen.width(), 4 * screen.height(), 8192) if screen is not None else 16384
        ok = 200 <= self.width() <= limit and 150 <= self.height() <= limit
        if not ok:
            self.settings.report_layout_problem(
                "window/geometry", f"gives a {self.width()}×{self.height()} window")
        return ok

    def save_settings(self) -> None:
        """Write configuration, layout and chart options to the QSettings store."""
        self._settings_saved = True
        self.settings.save_config(self.config.state())
        self.settings.save_window(self.saveGeometry(), self.saveState(), self.splitter.saveState())
        self.settings.save_chart_options(self.charts.options_state())
        self.settings.set_value("run/keep_previous", self.keep_runs_action.isChecked())
        self.settings.set_value("view/dark", self.dark_action.isChecked())
        self.settings.sync()

    # --- results of a session that did not close ---------------------------------------

    def offer_restore(self) -> int:
        """Offer the results journaled by sessions that crashed or were killed; the
        number of records restored.  Called once the window is up; "Not now" keeps them
        for the next start, "Discard" deletes them."""
        if self._closing or self._shut_down:
            return 0
        scan = scan_journals()
        for bad in scan.unreadable:      # set aside, never deleted: say where it went
            self.log.append("warning", bad.message())
        orphans = scan.orphans
        if not orphans:
            return 0
        count = sum(len(o.records) for o in orphans)
        when = ", ".join(o.when() for o in orphans)
        sessions = "A session" if len(orphans) == 1 else f"{len(orphans)} sessions"
        text = (f"{sessions} of Matmul Lab ({when}) ended without closing: a crash, or the "
                f"app was killed. {count} result{'s' if count != 1 else ''} had not been "
                "saved.\n\nRestore them? They are shown as \u201crestored session\u201d "
                "next to this session's results.")
        answer = dialogs.ask(self, "Restore results?", text, ("Restore", "Discard", "Not now"),
                             default="Restore", escape="Not now")
        if self._closing or self._shut_down:
            return 0          # the window closed while the question was open: ask next time
        if answer == "Restore":
            added = self.files.restore(orphans)
            damaged = sum(o.skipped for o in orphans)
            self.log.append("info", f"restored {len(added)} results of {sessions.lower()} that "
                                    f"did not close ({when})"
                            + (f"; {damaged} damaged journal line(s) skipped" if damaged else ""))
            return len(added)
        if answer == "Discard":
            for o in orphans:
                discard(o.path)
            self.log.append("info", f"discarded {count} unsaved results of {sessions.lower()} "
                                    "that did not close")
        return 0

    # --- backends ----------------------------------------------------------------------

    def _backends_probed(self, statuses: dict[str, BackendStatus]) -> None:
        self.statuses = dict(statuses)
        self.config.set_statuses(statuses)
        self.devices.set_statuses(statuses)
        self.devices.show_device(self.config.device_info())
        marks = []
        for name, st in statuses.items():
            marks.append(f"{name} {'✓' if st.available else '✗'}")
            self.log.append("info" if st.available else "warning", backend_line(st))
        self.backend_button.setText("Backends: " + "  ".join(marks))
        self.backend_button.setToolTip("\n".join(backend_line(st) for st in statuses.values())
                                       + "\n\nClick for devices")
        self._refresh_ready()

    def _ray_probed(self, available: bool, reason: str) -> None:
        self.ray_status = (available, reason)
        self.config.set_ray_status(available, reason)
        self.log.append("info", "ray: available (Ray cluster in the Target box)" if available
                        else f"ray: unavailable — {reason}")

    def _probe_failed(self, text: str) -> None:
        self.log.append("error", f"probing backends failed: {text}")
        self.backend_button.setText("Backends: probe failed")
        dialogs.show_error(self, "Cannot probe backends", text)

    def backends_ready(self) -> bool:
        return bool(self.statuses)

    def _device_changed(self, backend: str, index: int) -> None:
        info = self.config.device_info()
        self.devices.show_device(info)
        self.charts.set_device(info)

    # --- running -------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """A run or a profile is in progress."""
        return self.running or self.profile_flow.busy

    def _refresh_ready(self) -> None:
        self.run_bar.set_ready(self.config.problems(), self.config.run_count())
        self.run_action.setEnabled(not self.busy and not self.config.problems())
        self.profile_flow.refresh(idle=not self.busy and not self.config.problems())

    def start_profile(self, shape: tuple[int, int, int] | None = None) -> bool:
        """Profile the chosen variants at one size (:meth:`ProfileFlow.start`)."""
        if self.busy or self._closing:
            return False
        return self.profile_flow.start(shape)

    def start_run(self, items: list[tuple[str, dict[str, int]]] | None = None) -> bool:
        """Start the configured sweep (``items``: these variants and parameters instead of
        the variant tree's); False (and a message) if it cannot start."""
        if self.running or self._closing:
            return False
        try:
            plan = self.config.build_plan(items)
        except ValueError as exc:
            dialogs.show_error(self, "Cannot run", str(exc))
            return False
        return self._start_plan(plan)

    def _start_plan(self, plan) -> bool:
        target = self.config.target()
        self.files.begin_run(self.keep_runs_action.isChecked())
        self._run_t0 = time.perf_counter()
        self._run_cache_problems.clear()
        what = f"{len(plan.items)} parameter set(s) × " + (
            "the loaded matrices" if plan.matrices is not None else f"{len(plan.shapes)} size(s)")
        self.log.append("info", f"run: {what} on {target.describe()}, {plan.dtype}, "
                                f"{'cold' if plan.cold else 'hot'}, warm-up {plan.warmup}, "
                                + (f"budget {plan.time_budget_s} s" if plan.time_budget_s
                                   else f"{plan.repeats} repeats"))
        # The clock lock is held by this process (the controller), not by an engine.
        lock_devices = self.config.devices_info() if target.ray_address is None else []
        if not self.controller.start(plan, target, self.config.clock_mode(), lock_devices):
            return False
        self.files.run_settings(plan.time_budget_s, self.controller.clock_lock_text)
        self._set_running(True)
        return True

    def cancel_run(self) -> None:
        if self.running:
            self.profile_flow.timing_cancelled()
            self.controller.cancel()
            self.run_bar.cancelling()
        elif self.profile_flow.cancel():
            self.run_bar.cancelling()

    def _set_running(self, running: bool) -> None:
        self.kernel_folders.hold(running)   # a sweep's variants stay as they started
        self.config.set_running(running)
        self.run_bar.set_running(running)
        self.run_action.setEnabled(not running)
        self.profile_action.setEnabled(not running)
        self.cancel_action.setEnabled(running)
        self.clear_action.setEnabled(not running)
        self.keep_runs_action.setEnabled(not running)
        if not running:
            self._refresh_ready()

    def _run_started(self, ev: Event) -> None:
        devices = ev.devices or ([ev.device] if ev.device is not None else [])
        if len(devices) == 1:
            where = devices[0].name
        elif devices:
            where = f"{len(devices)} devices ({self.controller.target.mode})"
        else:
            where = "the device"
        self.run_bar.started(ev.total, where)
        self.files.run_devices(devices)    # a saved file's environment block names them
        if devices:
            # The opened device may know more than the probe did; keep user-typed peaks
            # where it knows nothing.
            self.charts.set_live_peaks(devices[0])

    def _run_progress(self, ev: Event) -> None:
        self.run_bar.progressed(ev.done, ev.total, ev.current, ev.eta_s)

    def _run_result(self, rec: ResultRecord) -> None:
        self.files.add_live(rec)
        self.run_bar.result_in(len(self.files.live_records))

    def _run_finished(self, ev: Event) -> None:
        self._set_running(False)
        # The engine's final copies carry speed-ups over naive and % of cuBLAS.
        recs = self.files.finish_run(ev.records)
        counts = {s: sum(r.status == s for r in recs)
                  for s in (RecordStatus.FAILED, RecordStatus.ERROR, RecordStatus.SKIPPED)}
        took = format_duration(time.perf_counter() - self._run_t0)
        if ev.cancelled:
            text = f"Cancelled: kept {len(recs)} result{'s' if len(recs) != 1 else ''}"
        elif not ev.started:
            text = f"Did not run: {ev.message}"
        else:
            text = f"Finished {len(recs)} runs in {took}"
        extras = [f"{n} {s}" for s, n in counts.items() if n]
        if extras:
            text += " (" + ", ".join(extras) + ")"
        if any(p.lost for p in self._run_cache_problems):
            text += "; the autotune results were not cached (see the Log)"
        self.run_bar.finished(text)
        self.statusBar().showMessage(text, 10_000)
        self.log.append("error" if counts[RecordStatus.FAILED] or counts[RecordStatus.ERROR] else "info", text)
        self.config.show_verification(recs)
        self.editor_flow.run_finished(recs)
        if not ev.started and not ev.cancelled and not self._closing:
            dialogs.show_error(self, "The run could not start", ev.message or "unknown reason")
        if counts[RecordStatus.FAILED] or counts[RecordStatus.ERROR]:
            self.bottom_tabs.setCurrentWidget(self.table)
        self.profile_flow.timing_finished(recs, ev.started and not ev.cancelled
                                          and not self._closing)

    # --- the user's kernels ---------------------------------------------------------------

    def open_kernel(self, path: str | Path) -> bool:
        """Open a kernel file in the editor (shown)."""
        return self.editor_flow.open_kernel(path)

    def _user_kernels_changed(self, loaded) -> None:
        problems = self.kernel_folders.problems()
        self.config.variants.set_user_kernels(self.kernel_folders.folders(), problems)
        for problem in loaded.problems:
            if problem not in self._said_problems:
                self.log.append("error", f"user kernel not usable: {problem}")
        self._said_problems = set(loaded.problems)
        self._refresh_ready()

    def add_kernel_folder(self, folder: str | Path) -> None:
        loaded = self.kernel_folders.add_folder(folder)
        self.log.append("info", f"kernel folder {folder}: {len(loaded.names)} user kernel(s) in all")

    def add_kernel_folder_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder of kernel files",
                                                  self.settings.last_dir("kernels"))
        if folder:
            self.settings.set_last_dir("kernels", folder)
            self.add_kernel_folder(folder)

    # --- results files -------------------------------------------------------------------

    def open_results(self, path: str | Path) -> bool:
        """Read a results file now (:meth:`ResultsFlow.open`)."""
        return self.results_flow.open(path)

    def open_results_in_background(self, path: str | Path) -> bool:
        """Open a results file on a thread of its own (:meth:`ResultsFlow.open_in_background`)."""
        return self.results_flow.open_in_background(path)

    def save_results(self, path: str | Path) -> bool:
        return self.results_flow.save(path)

    def clear_results(self) -> None:
        self.results_flow.clear()

    def export_charts(self, kinds: list[str], path: str | Path, width: int, height: int) -> list[Path]:
        """Save charts as PNG/SVG (:meth:`ResultsFlow.export_charts`)."""
        return self.results_flow.export_charts(kinds, path, width, height)

    # --- misc ------------------------------------------------------------------------

    def _store_changed(self) -> None:
        n = len(self.store)
        self.bottom_tabs.setTabText(0, f"Results ({n})" if n else "Results")
        sources = self.files.file_sources()
        self.count_label.setText(f"{n} results" + (f" · {len(sources)} file(s)" if sources else ""))
        self.setWindowTitle(f"{APPLICATION} — {n} results" if n else APPLICATION)

    def _log_errors(self, n: int) -> None:
        self.bottom_tabs.setTabText(1, f"Log ({n} error{'s' if n != 1 else ''})" if n else "Log")

    def set_dark(self, on: bool) -> None:
        """Switch between the desktop's palette and a dark one."""
        # An empty QPalette resolves entirely to the platform's: the desktop's theme.
        QApplication.setPalette(dark_palette() if on else QPalette())
        self._follow_palette()  # now, not when the palette events come round

    def changeEvent(self, event):  # noqa: N802 (Qt API)
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._follow_palette()
        super().changeEvent(event)

    def _follow_palette(self) -> None:
        """Re-style the window when the application palette really changed.

        Widgets polished by a style sheet keep the palette they were polished with;
        re-applying the sheet lets the whole window follow a light/dark switch of the
        desktop (or of the View menu).  The palette key stops the re-styling's own
        palette events from starting another round.
        """
        pal = QApplication.palette()
        key = tuple(pal.color(role).rgba() for role in (QPalette.ColorRole.Window, QPalette.ColorRole.Base,
                                                         QPalette.ColorRole.Text))
        if key == self._palette_key or self._restyling:
            return
        self._palette_key = key
        self._restyling = True
        try:
            self.setStyleSheet("")
            self.setStyleSheet(STYLE_SHEET)
        finally:
            self._restyling = False
        self.charts.retheme()

    def about(self) -> None:
        QMessageBox.about(self, f"About {APPLICATION}",
                          f"<b>{APPLICATION}</b><br>A desktop lab for GPU matrix-multiplication "
                          "kernels: run variants, watch them race, verify them on your matrices.")

    # --- drag and drop of results files -------------------------------------------------

    def dragEnterEvent(self, event):  # noqa: N802 (Qt API)
        if self.results_flow.dropped(event):
            event.acceptProposedAction()

    def dropEvent(self, event):  # noqa: N802
        for p in self.results_flow.dropped(event):
            self.results_flow.open_in_background(p)
        event.acceptProposedAction()

    # --- lifecycle ---------------------------------------------------------------------

    def closeEvent(self, event):  # noqa: N802 (Qt API)
        """Close without freezing: cancel the run, close the engines on a worker thread,
        and close for real once they are closed (or ended, after a deadline)."""
        if not (self._closing or self._shut_down or self._force_close) \
                and not self.kernel_editor.maybe_discard():
            event.ignore()             # the user kept the unsaved kernel
            return
        if self._shut_down or self._force_close or self.controller.is_closed:
            self.shutdown(wait=not self._force_close)
            event.accept()
            return
        self.profile_flow.stop(3.0)    # its ncu is killed; the thread ends at once
        if not self._closing and self.controller.idle():
            self.shutdown()            # nothing to wait for
            event.accept()
            return
        if not self._closing:
            self._closing = True
            self.save_settings()       # now, while every widget is as the user left it
            self.run_bar.say("Stopping the run and closing…" if self.running else "Closing…")
            self.controller.close_async()
            QTimer.singleShot(CLOSE_DEADLINE_MS, self._close_anyway)
        event.ignore()                 # _engines_closed closes again

    def _engines_closed(self) -> None:
        if self._closing:
            self.close()

    def _close_anyway(self) -> None:
        """The engines did not close in time: end them and close."""
        if self._shut_down:
            return
        self.controller.kill_all()
        self._force_close = True
        self.close()

    def shutdown(self, wait: bool = True) -> bool:
        """Save settings, stop the timers and background loads, close every engine
        (blocking for a few seconds at most; engines that do not stop are killed).
        ``wait`` False: the engines were ended already, do not wait for the closing.
        True when everything ended cleanly.  Idempotent."""
        if self._shut_down:
            return True
        self._shut_down = True
        try:
            if not self._settings_saved:
                self.save_settings()
        finally:
            self.files.close()     # a clean close: the journal is done
            self.charts.stop_updates()
            self.config.shutdown()
            if self.dark_action.isChecked():
                QApplication.setPalette(QPalette())
        return self.controller.close() if wait else False

