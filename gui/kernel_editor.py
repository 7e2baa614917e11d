"""The kernel editor: write a kernel, compile it, read its errors and resources, run it.

A dock in the main window.  The loop it serves: edit → Compile (Ctrl+B: every parameter
combination built, each compiler message a row that jumps to its line, registers,
shared memory, spills and the largest block each build can launch) → Run (Ctrl+R:
verified and timed at the configured sizes next to the best ladder rung and the
library reference; the results join the charts and table like any other run) → edit.

Compiling runs ``python main.py check-kernel --stdin --json`` in a :class:`QProcess`:
the unsaved text is compiled, a compiler that crashes takes only that process, and the
window's event loop never waits (for a Triton ``.py`` file the check imports it in a
separate process, matches its kernel's signature to the header and compiles every
combination with Triton for the GPU architecture, no GPU needed).  The header is checked as you type
(:func:`engine.kernels.kernel_file.parse_header`, a few milliseconds).  A file changed on disk by
another editor is reloaded, recompiled and its last comparison run again.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QEvent, QFileSystemWatcher, QProcess, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QBrush, QColor, QKeySequence
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QHeaderView, QLabel, QLineEdit, QMenu,
                               QPlainTextEdit, QSplitter, QTableWidget, QTableWidgetItem,
                               QTabWidget, QToolBar, QToolButton, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from engine.kernels import registry
from engine.common.files import write_atomic
from engine.measure.kernel_check import CheckReport
from engine.kernels.sources import read_kernel_text
from engine.kernels.kernel_file import TRITON_SUFFIX, KernelFileError, parse_header
from engine.measure import triton_kernels
from engine.kernels.new_kernel import check_new_name, copy_text
from engine.results.records import RecordStatus
from engine.kernels.registry import params_to_str

from . import dialogs
from .code_editor import EditorPane, language_for

ROOT = Path(__file__).resolve().parent.parent
#: Typing pauses this long before the header is checked again.
HEADER_CHECK_MS = 300
#: A file changed on disk settles this long (an editor's save is several events).
DISK_SETTLE_MS = 300
SUFFIX_BACKEND = {".cu": "cuda", ".cl": "opencl", TRITON_SUFFIX: "cuda"}
KERNEL_FILTER = "Kernel files (*.cu *.cl *.py)"
SEVERITY_COLOR = {"error": "#d03030", "warning": "#c08000", "note": "#6080a0"}
#: Shape at which the header check evaluates the launch geometry of every combination.
PROBE_SHAPE = (1024, 1024, 1024)


@dataclass
class Problem:
    """One row of the Problems list: where, how bad, what."""

    source: str          # "header" or "compiler"
    line: int | None
    column: int | None
    severity: str
    message: str
    combos: str = ""
    path: str = ""


@dataclass
class EditorContext:
    """What the rest of the window decides for a compile or a run."""

    dtype: str = "float32"
    #: CUDA target (``sm_90``) of the chosen device; None: nvcc's default for the lab.
    arch: str | None = None
    #: The OpenCL device index the check builds on.
    device: int = 0
    #: Parameter values chosen for a variant in the variant tree: name → {param: values}.
    chosen_values: Callable[[str], dict[str, list[int]]] | None = None
    running: bool = False
    #: The backends that can run now (available, with a device); None: not known.
    backends: tuple[str, ...] | None = None


class NewKernelDialog(QDialog):
    """Pick a built-in kernel to start from and a name for the copy."""

    def __init__(self, backend: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle("New kernel from template")
        self.template = QComboBox()
        for v in registry.REGISTRY.values():
            if v.library or not v.headers:
                continue
            for h in v.headers:
                if backend in ("", h.backend):
                    lang = "triton" if h.is_triton else h.backend
                    self.template.addItem(f"{v.name} ({lang}) — {v.technique}",
                                          (v.name, h.path.suffix))
        self.name = QLineEdit("my_kernel")
        self.error = QLabel()
        self.error.setStyleSheet(f"color: {SEVERITY_COLOR['error']}")
        form = QFormLayout(self)
        form.addRow("Start from", self.template)
        form.addRow("Name", self.name)
        form.addRow(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def _accept(self) -> None:
        try:
            check_new_name(self.name.text().strip())
        except ValueError as exc:
            self.error.setText(str(exc))
            return
        self.accept()

    def choice(self) -> tuple[str, str, str]:
        """(template variant, file suffix, new name)."""
        variant, suffix = self.template.currentData()
        return variant, suffix, self.name.text().strip()


class KernelEditor(QWidget):
    """Edit, compile and run one kernel file.

    Parameters
    ----------
    folders
        The window's :class:`gui.kernel_folders.KernelFolders`: a saved file is read
        from there, and new files go to its user folder.
    context
        Called at each compile and run for the window's current choices.

    Signals
    -------
    run_requested(object)
        ``[(variant, params), ...]``: the kernel and its baselines, for the window to run
        with the configured sizes.
    compiled(object)
        The :class:`engine.measure.kernel_check.CheckReport` of a finished compile.
    log(str, str)
        ``(level, message)`` for the window's Log.
    """

    run_requested = Signal(object)
    compiled = Signal(object)
    log = Signal(str, str)

    def __init__(self, folders, context: Callable[[], EditorContext] | None = None, parent=None):
        super().__init__(parent)
        self.folders = folders
        self.context = context or EditorContext
        self.path: Path | None = None
        #: Where an untitled buffer will be saved (a new kernel's suggested file).
        self.suggested_path: Path | None = None
        self.report: CheckReport | None = None
        self.header_problems: list[Problem] = []
        self.compile_problems: list[Problem] = []
        #: Names of the baselines the last Run compared with (re-run on a disk change).
        self.last_run: list[str] | None = None
        self._disk_text: str | None = None
        self._process: QProcess | None = None
        self._compile_t0 = 0.0
        self._rerun_after_compile = False
        self._running_items: list | None = None    # the editor's run in flight
        self._missing_checks = 0                    # polls for a file renamed away
        self._build()
        self.watcher = QFileSystemWatcher(self)
        self.watcher.fileChanged.connect(lambda _p: self._disk_timer.start())
        self._disk_timer = QTimer(self)
        self._disk_timer.setSingleShot(True)
        self._disk_timer.setInterval(DISK_SETTLE_MS)
        self._disk_timer.timeout.connect(self._disk_changed)
        self._header_timer = QTimer(self)
        self._header_timer.setSingleShot(True)
        self._header_timer.setInterval(HEADER_CHECK_MS)
        self._header_timer.timeout.connect(self.check_header)
        self.editor.textChanged.connect(self._header_timer.start)
        self.editor.installEventFilter(self)
        self.editor.document().modificationChanged.connect(self._update_title)
        self._update_title()

    # --- construction --------------------------------------------------------------------

    def _build(self) -> None:
        self.pane = EditorPane()
        self.editor = self.pane.editor
        self.toolbar = QToolBar()
        self.toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)

        def action(text, slot, shortcut=None, tip=""):
            act = QAction(text, self)
            if shortcut:
                act.setShortcut(QKeySequence(shortcut))
            act.setToolTip(f"{tip} ({QKeySequence(shortcut).toString()})" if shortcut and tip else tip)
            act.triggered.connect(slot)
            return act

        self.new_action = action("New…", self.new_dialog, None,
                                 "A new kernel, copied from any built-in (header and all)")
        self.open_action = action("Open…", self.open_dialog, None,
                                  "Open a .cu, .cl or Triton .py kernel file")
        self.save_action = action("Save", self.save, None, "Save the kernel, Ctrl+S in the "
                                  "editor (new ones go to the user kernel folder)")
        self.save_as_action = action("Save as…", self.save_as_dialog)
        self.compile_action = action("Compile", lambda: self.compile(), "Ctrl+B",
                                     "Build every parameter combination; errors and resources below")
        self.run_action = action("Run", lambda: self.run(), "Ctrl+R",
                                 "Verify and time it at the configured sizes against the baselines")
        self.find_action = action("Find", lambda: self.editor.show_find(), None,
                                  "Find in the kernel (Ctrl+F; F3 for the next)")
        self.compare_button = QToolButton()
        self.compare_button.setText("Compare with")
        self.compare_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.compare_menu = QMenu(self.compare_button)
        self.compare_button.setMenu(self.compare_menu)
        self.compare_menu.aboutToShow.connect(self._fill_compare_menu)
        self._compare: set[str] | None = None        # None: the default baselines
        # The loop's actions first: a narrow dock hides the end of its toolbar.
        for act in (self.compile_action, self.run_action):
            self.toolbar.addAction(act)
        self.toolbar.addWidget(self.compare_button)
        self.toolbar.addSeparator()
        for act in (self.save_action, self.new_action, self.open_action, self.save_as_action,
                    self.find_action):
            self.toolbar.addAction(act)
        # In the window these shortcuts are window-wide (it adds the same actions to its
        # Kernel menu); alone, they work while the editor has focus.
        for act in (self.compile_action, self.run_action):
            act.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            self.addAction(act)

        self.title = QLabel()
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = QLabel("Open a kernel file or start a new one from a built-in.")
        self.status.setWordWrap(True)

        self.problems_view = QTreeWidget()
        self.problems_view.setHeaderLabels(["Where", "Problem", "Parameters"])
        self.problems_view.setRootIsDecorated(False)
        self.problems_view.setUniformRowHeights(True)
        self.problems_view.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.problems_view.header().setStretchLastSection(False)
        self.problems_view.header().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.problems_view.header().setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        self.problems_view.itemActivated.connect(self._problem_activated)
        self.problems_view.itemClicked.connect(self._problem_activated)
        self.resources = QTableWidget(0, 0)
        self.resources.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.resources.verticalHeader().setVisible(False)
        self.build_log = QPlainTextEdit()
        self.build_log.setReadOnly(True)
        self.build_log.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.problems_view, "Problems")
        self.tabs.addTab(self.resources, "Resources")
        self.tabs.addTab(self.build_log, "Build log")

        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.pane)
        split.addWidget(self.tabs)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setChildrenCollapsible(False)
        self.splitter = split
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.toolbar)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 4)
        layout.setSpacing(3)
        layout.addLayout(top)
        layout.addWidget(self.title)
        layout.addWidget(split, 1)
        layout.addWidget(self.status)

    def eventFilter(self, obj, event):  # noqa: N802 (Qt API)
        """Ctrl+S in the editor saves the kernel (the window's Ctrl+S saves results)."""
        if obj is self.editor and event.type() in (QEvent.Type.ShortcutOverride,
                                                   QEvent.Type.KeyPress):
            if event.matches(QKeySequence.StandardKey.Save):
                event.accept()
                if event.type() == QEvent.Type.KeyPress:
                    self.save()
                return True
        return super().eventFilter(obj, event)

    # --- the file --------------------------------------------------------------------

    @property
    def modified(self) -> bool:
        return self.editor.document().isModified()

    def display_path(self) -> Path:
        """The path messages name: the file, or where an untitled kernel will go."""
        return self.path or self.suggested_path or (self.folders.user_folder() / "untitled.cu")

    def backend(self) -> str:
        return SUFFIX_BACKEND.get(self.display_path().suffix, "cuda")

    def is_triton(self) -> bool:
        """A Triton kernel file (``.py``): checked by import, run through Triton."""
        return self.display_path().suffix == TRITON_SUFFIX

    def run_backend(self, ctx: EditorContext | None = None) -> str:
        """The backend Run uses: the file's own; a Triton kernel where no CUDA device can
        run runs through Triton's interpreter on the cpu backend (a check of its arithmetic
        at small sizes, not a speed)."""
        own = self.backend()
        if not self.is_triton():
            return own
        ctx = ctx or self.context()
        if ctx.backends is None or own in ctx.backends or "cpu" not in ctx.backends:
            return own
        return "cpu"

    def text(self) -> str:
        return self.editor.toPlainText()

    def _set_text(self, text: str) -> None:
        self.editor.setPlainText(text)
        self.editor.set_language(language_for(self.display_path()))
        self.editor.document().setModified(False)
        self.check_header()

    def open_file(self, path: str | Path) -> bool:
        """Open ``path`` (asking first about unsaved changes); False if it cannot be read."""
        path = Path(path)
        if not self.maybe_discard():
            return False
        try:
            # Guarded: a pipe, a device, a folder or a link loop is a message, never a hang.
            text = read_kernel_text(path)
        except KernelFileError as exc:
            dialogs.show_error(self, "Cannot open the kernel", str(exc))
            self.status.setText(f"Not opened: {exc}")
            return False
        self._watch(None)
        # Opened through a symbolic link: the editor works on the file it points to, so
        # Save replaces that file (the user's choice) and the link stays a link.
        self.path, self.suggested_path = Path(os.path.realpath(path)), None
        self._disk_text = text
        self.report, self.compile_problems, self.last_run = None, [], None
        self._set_text(text)
        self._watch(self.path)
        self.folders.add_file(self.path)
        self.folders.reload()
        self._show_report(None)
        self.status.setText(f"Opened {self.path.name}.")
        return True

    def new_from_template(self, variant: str, name: str, suffix: str | None = None) -> None:
        """An untitled kernel copied from ``variant`` and named ``name`` (saved into the
        user kernel folder on Save or Run)."""
        text = copy_text(variant, name, suffix)
        header = registry.get(variant).headers
        suffix = suffix or header[0].path.suffix
        self._watch(None)
        self.path = None
        self.suggested_path = self.folders.user_folder() / f"{name}{suffix}"
        self._disk_text = None
        self.report, self.compile_problems, self.last_run = None, [], None
        self._set_text(text)
        self.editor.document().setModified(True)
        self._show_report(None)
        self.status.setText(f"New kernel '{name}' from {variant}: Save puts it in "
                            f"{self.suggested_path.parent}.")

    def new_dialog(self) -> None:
        if not self.maybe_discard():
            return
        dlg = NewKernelDialog(self.backend() if self.path else "", self)
        if dlg.exec() == QDialog.DialogCode.Accepted:
            variant, suffix, name = dlg.choice()
            self.new_from_template(variant, name, suffix)

    def open_dialog(self) -> None:
        start = str(self.path.parent if self.path else self.folders.user_folder())
        path, _ = QFileDialog.getOpenFileName(self, "Open a kernel file", start,
                                              f"{KERNEL_FILTER};;All files (*)")
        if path:
            self.open_file(path)

    def save(self) -> bool:
        """Save to the file (an untitled kernel goes to its suggested path in the user
        folder, or asks where when that file exists; a built-in asks where: the lab's
        own files are not edited in place)."""
        if self.path is not None and registry.is_builtin_file(self.path):
            return self.save_as_dialog()
        if self.path is None:
            target = self.suggested_path
            if target is None or os.path.lexists(target):   # a dangling link is taken too
                return self.save_as_dialog()
            return self.save_to(target)
        return self.save_to(self.path)

    def save_as_dialog(self) -> bool:
        start = str(self.display_path())
        path, _ = QFileDialog.getSaveFileName(self, "Save the kernel", start, KERNEL_FILTER)
        # A name picked in the dialog (which asked before replacing it) may be a link:
        # the user chose it, so its target is written.
        return bool(path) and self.save_to(Path(path), follow_links=True)

    def save_to(self, path: Path, follow_links: bool = False) -> bool:
        """Write the editor's text to ``path`` whole or not at all (a full disk, a
        read-only folder leave the earlier file as it was, and the text stays here, still
        unsaved). A symbolic link is written through only with ``follow_links`` (the user
        picked it); otherwise it is refused, since its target may be any file."""
        text = self.text()
        self._watch(None)
        try:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise OSError(f"the folder {path.parent} cannot be made "
                              f"({exc.strerror or exc}).") from None
            written = write_atomic(path, text, str(path), OSError, follow_links=follow_links)
        except OSError as exc:
            why = str(exc)
            dialogs.show_error(self, "Cannot save the kernel", why)
            self.status.setText(f"Not saved: {why} Your text is still here, unsaved.")
            self.log.emit("error", f"kernel not saved: {why}")
            self._watch(self.path)
            return False
        self.path, self.suggested_path = Path(os.path.realpath(written)), None
        self._disk_text = text
        self.editor.document().setModified(False)
        self.editor.set_language(language_for(self.path))
        self._watch(self.path)
        self.folders.add_file(self.path)
        self.folders.reload()
        self.status.setText(f"Saved {self.path}.")
        self.log.emit("info", f"kernel saved: {self.path}")
        self._update_title()
        return True

    def maybe_discard(self) -> bool:
        """Whether the buffer may be replaced: saved, or the user chose to save or discard."""
        if not self.modified:
            return True
        answer = dialogs.ask(self, "Unsaved kernel",
                             f"{self.display_path().name} has changes that are not saved.",
                             ("Save", "Discard", "Cancel"), "Save", "Cancel")
        if answer == "Save":
            return self.save()
        return answer == "Discard"

    def _update_title(self, *_):
        where = _home_short(self.path) if self.path else (
            f"untitled (will be {_home_short(self.display_path())})")
        star = " •" if self.modified else ""
        lang = f"Triton, {self.backend()}" if self.is_triton() else self.backend()
        self.title.setText(f"{where}{star}   [{lang}]" if (self.path or self.suggested_path)
                           else "No kernel open")

    # --- watching the file -----------------------------------------------------------

    def _watch(self, path: Path | None) -> None:
        if self.watcher.files():
            self.watcher.removePaths(self.watcher.files())
        if path is not None and path.exists():
            self.watcher.addPath(str(path))

    def _disk_changed(self) -> None:
        """Another editor saved the file: take its text, compile, run the last comparison."""
        if self.path is None:
            return
        if not self.path.exists():   # a save by rename: the file comes back a moment later
            self._missing_checks += 1
            if self._missing_checks <= 10:
                QTimer.singleShot(DISK_SETTLE_MS, self._disk_changed)
            self.status.setText(f"{self.path.name} was removed or renamed on disk.")
            return
        self._missing_checks = 0
        self._watch(self.path)       # re-arm: a rename drops the watch
        try:
            text = read_kernel_text(self.path)   # replaced by a pipe or a device: no hang
        except KernelFileError as exc:
            self.status.setText(f"{self.path.name} changed on disk and cannot be read: "
                                f"{exc.message} The editor keeps its text.")
            self.log.emit("warning", f"kernel changed on disk and cannot be read: {exc}")
            return
        if text == self._disk_text or text == self.text():
            self._disk_text = text
            return
        self._disk_text = text
        if self.modified:
            self.status.setText(f"{self.path.name} changed on disk; your unsaved edits are kept "
                                "(Save overwrites it, Open reloads it).")
            self.log.emit("warning", f"kernel changed on disk while edited here: {self.path}")
            return
        pos = self.editor.textCursor().position()
        self._set_text(text)
        cursor = self.editor.textCursor()
        cursor.setPosition(min(pos, len(text)))
        self.editor.setTextCursor(cursor)
        self.folders.reload()
        self.log.emit("info", f"kernel reloaded from disk: {self.path}")
        self.status.setText(f"{self.path.name} changed on disk: reloaded, compiling"
                            + (", then running the last comparison." if self.last_run else "."))
        self._rerun_after_compile = self.last_run is not None
        self.compile()

    # --- the header, as you type -----------------------------------------------------

    def check_header(self) -> list[Problem]:
        """Check the header of the text in the editor; mark its problems."""
        self._header_timer.stop()
        problems: list[Problem] = []
        path = self.display_path()
        try:
            h = parse_header(path, self.text())
        except KernelFileError as exc:
            problems.append(Problem("header", exc.line, None, "error", exc.message, path=str(path)))
        else:
            problems.extend(self._header_sense(h, path))
        self.header_problems = problems
        self._show_problems()
        return problems

    def _header_sense(self, h, path: Path) -> list[Problem]:
        """What a well-formed header can still get wrong: a name a built-in has, a
        backend that is not the file's, geometry that fails for every combination."""
        out = []
        old = registry.REGISTRY.get(h.name)
        own = old is not None and any(_same(hh.path, path) for hh in old.headers)
        if own and old.role != "user":
            out.append(Problem("header", h.first_line, None, "note",
                               "a built-in kernel: Save as… keeps your changes as a kernel of "
                               "your own (rename it in the header)", path=str(path)))
        elif old is not None and old.role != "user":
            out.append(Problem("header", h.first_line, None, "error",
                               f"the name '{h.name}' is taken by a built-in variant; choose another",
                               path=str(path)))
        elif old is not None and self.path is not None and not any(
                _same(hh.path, self.path) for hh in old.headers if hh.backend == h.backend):
            where = ", ".join(str(hh.path) for hh in old.headers)
            out.append(Problem("header", h.first_line, None, "error",
                               f"the name '{h.name}' is taken by {where}", path=str(path)))
        want = SUFFIX_BACKEND.get(path.suffix)
        if want and h.backend != want:
            out.append(Problem("header", h.first_line, None, "error",
                               f"backend = \"{h.backend}\" in a {path.suffix} file (want \"{want}\")",
                               path=str(path)))
        m, n, k = PROBE_SHAPE
        v = registry.variant_from_headers([h])       # the registry's own checks, unsaved
        combos = v.combos()
        reasons = []
        for params in combos:
            try:
                reason = v.check(h.backend, params, m, n, k, h.dtypes[0])
                if reason is None:
                    h.shared_bytes(params)
            except Exception as exc:  # noqa: BLE001  (an expression of the user's failed)
                reason = f"{params_to_str(params) or 'defaults'}: {exc}"
                out.append(Problem("header", h.first_line, None, "warning", reason, path=str(path)))
                break
            if reason is not None:
                reasons.append(reason)
        if combos and len(reasons) == len(combos):
            out.append(Problem("header", h.first_line, None, "warning",
                               f"no parameter combination runs at {m}×{n}×{k}: {reasons[0]}",
                               path=str(path)))
        return out

    # --- compiling -------------------------------------------------------------------

    def compile_dtype(self, wanted: str) -> str:
        """The type a compile builds: the window's where the file takes it, else the file's
        first (a BF16 kernel checked while float32 is chosen is built in BF16, not refused)."""
        try:
            h = parse_header(self.display_path(), self.text())
        except KernelFileError:
            return wanted                      # check-kernel reports the header's problem
        return wanted if wanted in h.dtypes else h.dtypes[0]

    def compile(self) -> bool:
        """Build every parameter combination in a ``check-kernel`` process."""
        if not self.text().strip():
            return False
        if self._process is not None:
            self._process.kill()
            self._process.waitForFinished(2000)
        ctx = self.context()
        args = [str(ROOT / "main.py"), "check-kernel", str(self.display_path()), "--stdin",
                "--json", "--backend", self.backend(), "--dtype", self.compile_dtype(ctx.dtype)]
        if self.backend() == "cuda" and ctx.arch:
            args += ["--arch", ctx.arch]
        if self.backend() == "opencl":
            args += ["--device", str(ctx.device)]
        proc = QProcess(self)
        proc.setWorkingDirectory(str(ROOT))
        proc.finished.connect(lambda code, _status, p=proc: self._compiled(p, code))
        proc.errorOccurred.connect(lambda err, p=proc: self._compile_failed(p, err))
        self._process = proc
        self._compile_t0 = time.perf_counter()
        self.compile_action.setEnabled(False)
        self.status.setText(f"Checking {self.display_path().name} with Triton (import and "
                            "signature)…" if self.is_triton() else
                            f"Compiling {self.display_path().name} for {self.backend()}…")
        proc.start(sys.executable, args)
        proc.write(self.text().encode("utf-8"))
        proc.closeWriteChannel()
        return True

    def compiling(self) -> bool:
        return self._process is not None

    def _compile_failed(self, proc: QProcess, err) -> None:
        if proc is not self._process or err != QProcess.ProcessError.FailedToStart:
            return
        self._process = None
        self.compile_action.setEnabled(True)
        self.status.setText(f"Could not start the compile: {proc.errorString()}")

    def _compiled(self, proc: QProcess, code: int) -> None:
        if proc is not self._process:
            return            # a compile replaced by a newer one
        self._process = None
        self.compile_action.setEnabled(True)
        out = bytes(proc.readAllStandardOutput()).decode("utf-8", "replace")
        err = bytes(proc.readAllStandardError()).decode("utf-8", "replace")
        took = time.perf_counter() - self._compile_t0
        try:
            report = CheckReport.from_dict(json.loads(out))
        except (ValueError, KeyError, TypeError):
            self.report = None
            self.compile_problems = [Problem("compiler", None, None, "error",
                                             f"the compile check ended with code {code} and no "
                                             f"report: {(err or out).strip()[-500:]}")]
            self.build_log.setPlainText(out + err)
            self._show_problems()
            self.status.setText("The compile check failed; see the Build log.")
            self.tabs.setCurrentWidget(self.problems_view)
            return
        self._show_report(report)
        n_ok = sum(c.ok for c in report.combos)
        errors = sum(p.severity == "error" for p in self.compile_problems)
        if report.ok and self.is_triton():
            self.status.setText(f"Compiled {n_ok} combination(s) with Triton in {took:.1f} s"
                                + (f", {len(self.compile_problems)} warning(s)" if self.compile_problems
                                   else "") + ".")
        elif report.ok:
            self.status.setText(f"Compiled {n_ok} combination(s) in {took:.1f} s"
                                + (f", {len(self.compile_problems)} warning(s)" if self.compile_problems
                                   else "") + ".")
        else:
            self.status.setText(f"Check failed: {errors} error(s) ({took:.1f} s)." if self.is_triton()
                                else f"Compile failed: {errors} error(s); {n_ok} of "
                                f"{len(report.combos)} combination(s) built ({took:.1f} s).")
            self.tabs.setCurrentWidget(self.problems_view)
        self.compiled.emit(report)
        if self._rerun_after_compile:
            self._rerun_after_compile = False
            if report.ok and self.last_run is not None:
                self.run(self.last_run)

    def _show_report(self, report: CheckReport | None) -> None:
        self.report = report
        self.compile_problems = []
        if report is not None:
            if report.header_error:
                self.compile_problems.append(Problem("compiler", None, None, "error",
                                                     report.header_error))
            for d in report.diagnostics:
                combos = d.combos if isinstance(d.combos, list) else []
                shown = ("all" if report.combos and len(combos) == len(report.combos)
                         else ", ".join(combos[:4]) + (f" +{len(combos) - 4}" if len(combos) > 4 else ""))
                mine = _same(d.path, self.display_path()) if d.path else False
                self.compile_problems.append(Problem(
                    "compiler", d.line if mine else None, d.column if mine else None, d.severity,
                    d.message if mine or not d.path else f"{d.path}:{d.line}: {d.message}",
                    shown, d.path or ""))
            # A Triton check's problem is also its one diagnostic (at its line): once.
            said = {f"{d.path}:{d.line}: {d.message}" for d in report.diagnostics}
            if report.problem and report.problem not in said:
                self.compile_problems.append(Problem("compiler", None, None, "error",
                                                     report.problem))
            # Per-combination findings (too many threads for the registers, spills, too
            # much shared memory), one row each; "the build failed" adds nothing to the
            # compiler's own messages above.
            for c in report.combos:
                for text in c.problems:
                    severity, _, message = text.partition(": ")
                    if severity not in SEVERITY_COLOR:
                        severity, message = "warning", text
                    if message.startswith("the build failed") and report.diagnostics:
                        continue
                    self.compile_problems.append(Problem("compiler", None, None, severity,
                                                         message, c.label or "defaults"))
        self._fill_resources(report)
        self.build_log.setPlainText(report.text() if report is not None else "")
        self._show_problems()

    def _fill_resources(self, report: CheckReport | None) -> None:
        cols = [("parameters", lambda c: c.label or "defaults"),
                ("built", lambda c: "yes" if c.ok else "no")]
        if report is not None and self.is_triton():
            # Triton's shared memory is all requested at launch (dynamic).
            cols += [("registers", lambda c: c.registers),
                     ("shared (launch)", lambda c: _bytes(c.shared_dynamic)),
                     ("spills (st/ld)", lambda c: None if c.spill_stores is None
                      else f"{c.spill_stores}/{c.spill_loads}"),
                     ("block threads", lambda c: c.block_threads),
                     ("max threads", lambda c: c.max_threads)]
        elif report is not None and report.backend == "cuda":
            cols += [("registers", lambda c: c.registers),
                     ("shared static", lambda c: _bytes(c.shared_static)),
                     ("shared dynamic", lambda c: _bytes(c.shared_dynamic)),
                     ("spills (st/ld)", lambda c: None if c.spill_stores is None
                      else f"{c.spill_stores}/{c.spill_loads}"),
                     ("stack", lambda c: _bytes(c.stack)),
                     ("block threads", lambda c: c.block_threads),
                     ("max threads", lambda c: c.max_threads)]
        else:
            cols += [("local memory", lambda c: _bytes(c.shared_static)),
                     ("private memory", lambda c: _bytes(c.private_mem)),
                     ("block threads", lambda c: c.block_threads),
                     ("max work-group", lambda c: c.max_threads)]
        cols.append(("seconds", lambda c: f"{c.seconds:.1f}"))
        combos = report.combos if report is not None else []
        self.resources.clear()
        self.resources.setColumnCount(len(cols))
        self.resources.setRowCount(len(combos))
        self.resources.setHorizontalHeaderLabels([c[0] for c in cols])
        for r, combo in enumerate(combos):
            bad = (not combo.ok or bool(combo.problems))
            for col, (_, get) in enumerate(cols):
                val = get(combo)
                item = QTableWidgetItem("—" if val is None else str(val))
                if bad:
                    item.setForeground(QBrush(QColor(SEVERITY_COLOR["error" if not combo.ok
                                                                    else "warning"])))
                    if combo.problems:
                        item.setToolTip("\n".join(combo.problems))
                self.resources.setItem(r, col, item)
        self.resources.resizeColumnsToContents()

    # --- problems --------------------------------------------------------------------

    def problems(self) -> list[Problem]:
        return self.header_problems + self.compile_problems

    def _show_problems(self) -> None:
        self.problems_view.clear()
        for p in self.problems():
            where = (f"line {p.line}" + (f":{p.column}" if p.column else "")) if p.line else (
                "header" if p.source == "header" else "build")
            item = QTreeWidgetItem([where, p.message, p.combos])
            color = QColor(SEVERITY_COLOR.get(p.severity, SEVERITY_COLOR["note"]))
            item.setForeground(0, QBrush(color))
            item.setToolTip(1, p.message)
            item.setData(0, Qt.ItemDataRole.UserRole, (p.line, p.column))
            self.problems_view.addTopLevelItem(item)
        self.editor.set_problems([(p.line, p.severity, p.message) for p in self.problems()
                                  if p.line and p.severity in ("error", "warning")])
        n = len(self.problems())
        self.tabs.setTabText(0, f"Problems ({n})" if n else "Problems")

    def _problem_activated(self, item: QTreeWidgetItem, _col: int = 0) -> None:
        line, column = item.data(0, Qt.ItemDataRole.UserRole) or (None, None)
        if line:
            self.editor.go_to(int(line), int(column) if column else None)

    # --- running ---------------------------------------------------------------------

    def variant_name(self) -> str | None:
        try:
            return parse_header(self.display_path(), self.text()).name
        except KernelFileError:
            return None

    def default_baselines(self) -> list[str]:
        """The lab's own GEMM of the kernel's precision (its dispatch line; else the highest
        ladder rung) and the library reference of the kernel's arithmetic."""
        try:
            h = parse_header(self.display_path(), self.text())
        except KernelFileError:
            return []
        backend = self.run_backend()
        out = [registry.dispatch_for(backend, h.precision, h.kind)
               or registry.best_rung(backend, h.precision, h.kind),
               registry.reference_for(backend, h.precision, h.kind)]
        return [n for n in out if n and n != h.name]

    def baselines(self) -> list[str]:
        chosen = self.default_baselines() if self._compare is None else sorted(self._compare)
        return [n for n in chosen if n in registry.REGISTRY]

    def set_baselines(self, names) -> None:
        self._compare = set(names)

    def _fill_compare_menu(self) -> None:
        self.compare_menu.clear()
        backend, current = self.run_backend(), set(self.baselines())
        for v in registry.variants_for(backend):
            if v.name == self.variant_name() or v.role == "user" and not v.headers:
                continue
            act = self.compare_menu.addAction(v.name)
            act.setCheckable(True)
            act.setChecked(v.name in current)
            act.toggled.connect(lambda on, n=v.name: self._toggle_compare(n, on))
        self.compare_menu.addSeparator()
        self.compare_menu.addAction("Defaults (the lab's own GEMM and the library)",
                                    lambda: setattr(self, "_compare", None))

    def _toggle_compare(self, name: str, on: bool) -> None:
        chosen = set(self.baselines())
        (chosen.add if on else chosen.discard)(name)
        self._compare = chosen

    def run(self, baselines: list[str] | None = None) -> bool:
        """Save, register and ask the window to run the kernel against ``baselines``
        (default: :meth:`baselines`).  False when it cannot (a header problem, a run going)."""
        ctx = self.context()
        if ctx.running:
            self.status.setText("A run is going; Run again when it ends.")
            return False
        if any(p.severity == "error" for p in self.check_header()):
            self.status.setText("Fix the header first (see Problems).")
            self.tabs.setCurrentWidget(self.problems_view)
            return False
        if (self.modified or self.path is None) and not self.save():
            return False
        name = self.variant_name()
        v = registry.REGISTRY.get(name)
        if v is None or not any(_same(h.path, self.path) for h in v.headers):
            problem = self.folders.loaded.problem_of(self.path) if self.path else None
            self.status.setText(problem or f"{name} is not registered")
            return False
        backend = self.run_backend(ctx)
        why = triton_kernels.backend_problem(backend) if v.is_triton else None
        if why:
            self.status.setText(f"{name} cannot run on the {backend} backend: {why}")
            return False
        baselines = self.baselines() if baselines is None else [
            b for b in baselines if b in registry.REGISTRY]
        chosen = ctx.chosen_values(name) if ctx.chosen_values else {}
        if not chosen and backend == "cpu" and v.is_triton:
            # The interpreter runs each program in numpy (seconds a launch): the kernel's
            # default combination, not its whole space, unless the tree chose values.
            chosen = {k: [val] for k, val in v.default_params(ctx.arch).items()}
        items = [(name, p) for p in registry.iter_plan_params(
            v, {k: tuple(vals) for k, vals in chosen.items() if vals})]
        for b in baselines:
            bv = registry.get(b)
            if backend in bv.sources:
                items.append((b, bv.default_params(ctx.arch)))
        self.last_run = baselines
        self._running_items = items
        self.status.setText(f"Running {name} ({len(items) - len(baselines)} parameter set(s)) "
                            f"against {', '.join(baselines) or 'nothing'}…")
        self.run_requested.emit(items)
        return True


    def run_finished(self, recs) -> str:
        """After the editor's run: one line comparing the kernel with its baselines at the
        largest size (the best parameters of each), shown under the editor."""
        items, self._running_items = self._running_items, None
        if not items:
            return ""
        name = items[0][0]
        mine = [r for r in recs if r.variant == name]
        if not mine:
            return ""
        bad = [r for r in mine if r.status != RecordStatus.OK or r.passed is False]
        if bad:
            r = bad[0]
            why = r.error or f"wrong result (relative L2 error {r.rel_l2:.3g})"
            text = f"{name}: {len(bad)} of {len(mine)} run(s) did not pass — {why}"
            self.status.setText(text)
            return text
        size = max(r.m * r.n * r.k for r in mine)

        def best(variant):
            got = [r.gflops for r in recs if r.variant == variant and r.m * r.n * r.k == size
                   and r.status == RecordStatus.OK and r.passed is not False and r.gflops > 0]
            return max(got) if got else None

        top = next(r for r in mine if r.m * r.n * r.k == size)
        g = best(name)
        parts = [f"{name} at {top.m}×{top.n}×{top.k}: {g:,.1f} GFLOP/s, verified"]
        for b in dict.fromkeys(n for n, _ in items if n != name):
            gb = best(b)
            if gb:
                parts.append(f"{g / gb:.0%} of {b}")
        text = "; ".join(parts) + "."
        self.status.setText(text)
        return text


def _same(a, b) -> bool:
    """Whether two paths name one file (realpath: a loop of links is no error here, unlike
    Path.resolve, which raises RuntimeError)."""
    return os.path.realpath(a) == os.path.realpath(b)


def _home_short(path: Path) -> str:
    """``path`` with the home folder shown as ``~`` (a title that fits the dock)."""
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home):] if home not in ("", "/") and text.startswith(home + os.sep) else text


def _bytes(n) -> str | None:
    if n is None:
        return None
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"
