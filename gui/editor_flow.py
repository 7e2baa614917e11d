"""The kernel-editor flow: showing the editor dock, what the editor needs to know of the
window's configuration, and the editor's Run (its kernel on its backend).

:class:`EditorFlow` drives the :class:`~gui.kernel_editor.KernelEditor` and its dock,
which the window lays out; the editor's Run comes back to the window as
:attr:`EditorFlow.run_requested`.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from engine.common.dtypes import ElementType

from . import dialogs
from .kernel_editor import EditorContext

if TYPE_CHECKING:
    from .main_window import MainWindow


class EditorFlow(QObject):
    """Signals
    -------
    run_requested(list)
        Run these ``(variant, params)`` items with the configured sizes (the chosen
        backend is the kernel's by now).
    """

    run_requested = Signal(object)

    def __init__(self, window: MainWindow):
        super().__init__(window)
        self.window = window
        self.editor = window.kernel_editor
        self.dock = window.editor_dock
        self.editor.run_requested.connect(self._run)
        self.editor.log.connect(window.log.append)

    def wrap(self, slot: Callable) -> Callable:
        """``slot`` of the kernel editor, with its dock shown first."""
        def call():
            self.show()
            return slot()
        return call

    def show(self) -> None:
        """Show the editor dock, wide enough to read code the first time."""
        first = not self.dock.isVisible() and not self.dock.isFloating()
        self.dock.show()
        self.dock.raise_()
        if first:
            QTimer.singleShot(0, self._widen)   # once the dock is laid out

    def _widen(self) -> None:
        want = int(self.window.width() * 0.46)
        if self.dock.isVisible() and self.dock.width() < want - 20:
            self.window.resizeDocks([self.dock], [want], Qt.Orientation.Horizontal)

    def context(self) -> EditorContext:
        """The window's configuration as the editor needs it (dtype, arch, device)."""
        config = self.window.config
        backend = config.backend_name()
        info = config.device_info()
        cc = info.compute_capability if info is not None and backend == "cuda" else None
        return EditorContext(
            dtype=config.dtype.currentText(),
            arch=f"sm_{cc.replace('.', '')}" if cc else None,
            device=config.device_index() if backend == "opencl" else 0,
            chosen_values=lambda name: (config.variants.chosen_values(name)
                                        if name in config.variants.variant_names() else {}),
            running=self.window.running or self.window.closing,
            backends=(tuple(name for name, st in self.window.statuses.items()
                            if st.available and st.devices) if self.window.statuses else None))

    def open_kernel(self, path: str | Path) -> bool:
        """Open a kernel file in the editor (shown)."""
        self.show()
        return self.editor.open_file(path)

    def run_finished(self, recs) -> None:
        """A run ended: the editor says how its kernel did."""
        said = self.editor.run_finished(recs)
        if said:
            self.window.log.append("info", said)

    def _run(self, items) -> None:
        """The editor's Run: its kernel and baselines with the configured sizes, on the
        kernel's backend (switching to it when another one is chosen; a Triton kernel
        without a CUDA device runs through Triton's interpreter on the cpu backend)."""
        win = self.window
        backend = self.editor.run_backend()
        if backend != self.editor.backend():
            win.log.append("info", f"no {self.editor.backend()} device: the Triton kernel runs "
                                   f"through Triton's interpreter on the {backend} backend, a "
                                   "check of its arithmetic at small sizes; its times are no "
                                   "kernel's")
        if win.config.backend_name() != backend:
            st = win.statuses.get(backend)
            if st is None or not st.available or not st.devices:
                dialogs.show_error(win, "Cannot run the kernel",
                                   f"The kernel is a {backend} kernel, and the {backend} backend "
                                   f"is unavailable: {st.reason if st else 'not probed yet'}")
                return
            win.config.select(backend, 0)
            win.log.append("info", f"switched to the {backend} backend to run the kernel")
        if not self._choose_a_type_it_takes():
            return
        self.run_requested.emit(items)

    def _choose_a_type_it_takes(self) -> bool:
        """The window's input type, or one the kernel takes where it does not take that one
        (as Compile builds it): a BF16 file run while float32 is chosen runs in BF16, said in
        the log, instead of a skip. False (said in a dialog) where the backend cannot run the
        kernel's type."""
        win, config = self.window, self.window.config
        wanted = config.dtype.currentText()
        dtype = self.editor.compile_dtype(wanted)
        if dtype == wanted:
            return True
        index = config.dtype.findText(dtype)
        why = config.type_refusal(ElementType(dtype)) if index >= 0 else f"the window has no type {dtype}"
        if why:
            dialogs.show_error(win, "Cannot run the kernel",
                               f"The kernel takes {dtype}, not {wanted}, and {dtype} cannot run "
                               f"here: {why}")
            return False
        config.dtype.setCurrentIndex(index)
        win.log.append("info", f"the kernel does not take {wanted}: switched the input type "
                               f"to {dtype} to run it")
        return True
