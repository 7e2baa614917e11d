"""Where A and B come from: random (distribution, seed) or files, loaded off the GUI thread.

Files are read by :func:`engine.inputs.matrices.load_matrix` / :func:`load_pair` on a
background thread (a large ``.mtx`` can take seconds); the result comes back as a
queued signal.  What can be told without reading (a missing file, a folder, a named
pipe, a device) is refused at once, in the GUI thread.  Any problem becomes a dialog
naming the file and the problem, in the engine's words, and the panel stays usable.
"""
from __future__ import annotations

import itertools
import threading
from pathlib import Path

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QButtonGroup, QComboBox, QFileDialog, QFormLayout, QGridLayout,
                               QHBoxLayout, QLabel, QLineEdit, QRadioButton, QSpinBox,
                               QToolButton, QVBoxLayout, QWidget)

from engine.inputs import matrices
from engine.common.files import check_regular_file
from engine.results.records import ResultRecord

from . import dialogs
from .labels import WrapLabel

FILE_FILTER = ("Matrices (" + " ".join(f"*{e}" for e in matrices.SUPPORTED_EXTENSIONS) + ")"
               ";;All files (*)")


def supported(path: str | Path) -> bool:
    return Path(path).suffix.lower() in matrices.SUPPORTED_EXTENSIONS


def _npz_array_count(path: str) -> int:
    try:
        with np.load(path, allow_pickle=False) as z:
            return len(z.files)
    except Exception:  # noqa: BLE001  (load_matrix will name the real problem)
        return 0


def _refusal(a_path: str, b_path: str) -> str:
    """The engine's message for a named file that cannot be read at all (missing, a
    folder, a pipe, a device, a loop of links), found with ``stat`` alone; else ''."""
    for name, path in (("A", a_path), ("B", b_path)):
        if path:
            try:
                check_regular_file(Path(path), f"{name}: {Path(path).name}",
                                   matrices.MatrixInputError)
            except matrices.MatrixInputError as exc:
                return str(exc)
    return ""


def load_inputs(a_path: str, b_path: str, dtype: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Load what the two fields name, as the engine would (runs off the GUI thread).

    A ``.npz`` for A with two or more arrays and no B file gives both matrices.

    Raises
    ------
    engine.inputs.matrices.MatrixInputError
        Any problem with a file or with the pair's shapes.
    """
    if a_path and b_path:
        return matrices.load_pair(a_path, b_path, dtype)
    if a_path:
        if Path(a_path).suffix.lower() == ".npz" and _npz_array_count(a_path) >= 2:
            return matrices.load_pair(a_path, None, dtype)
        return matrices.load_matrix(a_path, dtype, name="A"), None
    if b_path:
        return None, matrices.load_matrix(b_path, dtype, name="B")
    return None, None


class MatrixInputs(QWidget):
    """Random inputs or A/B files (dialogs and drag & drop), with their shapes shown.

    Signals
    -------
    changed()
        Mode, files or load state changed: the run's validity may have changed.
    """

    changed = Signal()
    #: Internal: a loader thread's (generation, (A, B) or None, error text).
    _load_done = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.dtype = "float32"
        self.status = "empty"          # empty | loading | ready | error
        self.error_text = ""
        self._a: np.ndarray | None = None
        self._b: np.ndarray | None = None
        self._generation = itertools.count(1)
        self._current = 0
        self._last_dir = ""
        self._requested: tuple[str, str, str] | None = None
        self.setAcceptDrops(True)
        self._build()
        self._load_done.connect(lambda outcome: self._loaded(*outcome))
        self._mode_changed()

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        self.random_radio = QRadioButton("Random")
        self.files_radio = QRadioButton("Files A, B")
        self.files_radio.setToolTip("Verify every selected variant on your own matrices "
                                    "(drop files here). Sizes then come from the files.")
        group = QButtonGroup(self)
        group.addButton(self.random_radio)
        group.addButton(self.files_radio)
        self.random_radio.setChecked(True)
        modes = QHBoxLayout()
        modes.addWidget(self.random_radio)
        modes.addWidget(self.files_radio)
        modes.addStretch(1)

        self.dist = QComboBox()
        self.dist.addItems(matrices.DISTRIBUTIONS)
        self.dist.setToolTip("uniform: U[-1, 1]; normal: N(0, 1); int: integers in [-8, 8] "
                             "(int32 always draws integers in [-8, 8], int8 in [-128, 127])")
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setToolTip("Same seed, same matrices")
        self.random_box = QWidget()
        rform = QFormLayout(self.random_box)
        rform.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.dist, 1)
        row.addWidget(QLabel("seed"))
        row.addWidget(self.seed, 1)
        rform.addRow("Distribution", row)

        self.a_edit, self.a_browse = self._file_row("A")
        self.b_edit, self.b_browse = self._file_row("B")
        # Shapes or the loader's message, which names files: wrapped anywhere a long
        # path needs, so it never widens the panel.
        self.shapes_label = WrapLabel()
        self.shapes_label.setObjectName("matrixShapes")
        self.verify_label = QLabel()
        self.verify_label.setWordWrap(True)
        self.verify_label.setVisible(False)
        self.files_box = QWidget()
        grid = QGridLayout(self.files_box)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(6)
        grid.setVerticalSpacing(4)
        for r, (name, edit, browse) in enumerate((("A", self.a_edit, self.a_browse),
                                                   ("B", self.b_edit, self.b_browse))):
            grid.addWidget(QLabel(name), r, 0)
            grid.addWidget(edit, r, 1)
            grid.addWidget(browse, r, 2)
        grid.addWidget(self.shapes_label, 2, 0, 1, 3)
        grid.addWidget(self.verify_label, 3, 0, 1, 3)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(modes)
        layout.addWidget(self.random_box)
        layout.addWidget(self.files_box)

        self.files_radio.toggled.connect(self._mode_changed)
        self.a_browse.clicked.connect(lambda: self._browse(self.a_edit, "A"))
        self.b_browse.clicked.connect(lambda: self._browse(self.b_edit, "B"))
        self.a_edit.editingFinished.connect(self._paths_edited)
        self.b_edit.editingFinished.connect(self._paths_edited)

    def _file_row(self, name: str) -> tuple[QLineEdit, QToolButton]:
        edit = QLineEdit()
        edit.setPlaceholderText(f"{name}: .npy .npz .csv .txt .mtx — browse or drop")
        edit.setAcceptDrops(False)  # drops land on the panel, which knows A from B
        edit.setClearButtonEnabled(True)
        browse = QToolButton()
        browse.setText("…")
        browse.setToolTip(f"Choose the file of {name}")
        return edit, browse

    # --- modes and files ------------------------------------------------------------

    @property
    def mode(self) -> str:
        return "files" if self.files_radio.isChecked() else "random"

    def set_mode(self, mode: str) -> None:
        (self.files_radio if mode == "files" else self.random_radio).setChecked(True)

    def _mode_changed(self, *_):
        files = self.mode == "files"
        self.random_box.setVisible(not files)
        self.files_box.setVisible(files)
        if files:
            self.reload()  # no-op unless the fields changed since the last load
        self._update_label()
        self.changed.emit()

    def _browse(self, edit: QLineEdit, name: str) -> None:
        start = edit.text() or self._last_dir
        path, _ = QFileDialog.getOpenFileName(self, f"Choose matrix {name}", start, FILE_FILTER)
        if path:
            edit.setText(path)
            self._requested = None  # a deliberate choice reloads even the same file
            self._paths_edited()

    def _paths_edited(self) -> None:
        for edit in (self.a_edit, self.b_edit):
            if edit.text():
                self._last_dir = str(Path(edit.text()).parent)
        self.reload()

    def set_files(self, a_path: str | Path | None, b_path: str | Path | None = None) -> None:
        """Use these files (None or '' leaves a field empty) and load them."""
        self.a_edit.setText(str(a_path) if a_path else "")
        self.b_edit.setText(str(b_path) if b_path else "")
        self._requested = None  # a deliberate choice reloads even the same files
        self.set_mode("files")  # loads when this switches to files mode...
        self._paths_edited()    # ...and otherwise here

    def set_dtype(self, dtype: str) -> None:
        """Files are converted on load (int32 and int8 refuse fractions and values out of
        their range), so reload on a change."""
        if dtype != self.dtype:
            self.dtype = dtype
            if self.mode == "files":
                self.reload()

    # --- loading -----------------------------------------------------------------------

    def reload(self, force: bool = False) -> None:
        """Load the named files unless they (and the dtype) are what was last loaded."""
        a_path, b_path = self.a_edit.text().strip(), self.b_edit.text().strip()
        key = (a_path, b_path, self.dtype)
        if key == self._requested and not force:
            return
        self._requested = key
        self._current = next(self._generation)
        self._a = self._b = None
        self.verify_label.setVisible(False)
        if not a_path and not b_path:
            self.status, self.error_text = "empty", ""
            self._update_label()
            self.changed.emit()
            return
        refused = _refusal(a_path, b_path)
        if refused:
            # Stat says it all (a pipe would block a reader forever): no thread, no wait.
            self._loaded(self._current, None, refused)
            return
        self.status, self.error_text = "loading", ""
        self._update_label()
        self.changed.emit()
        gen, dtype = self._current, self.dtype
        # A daemon thread per load: a read that never returns (a file swapped for a pipe
        # after the check, a hung network mount) holds neither later loads nor the exit.
        threading.Thread(target=self._load_in_thread, args=(gen, a_path, b_path, dtype),
                         daemon=True, name=f"matrix-loader-{gen}").start()

    def _load_in_thread(self, gen: int, a_path: str, b_path: str, dtype: str) -> None:
        try:
            outcome = (gen, load_inputs(a_path, b_path, dtype), "")
        except matrices.MatrixInputError as exc:
            outcome = (gen, None, str(exc))
        except Exception as exc:  # noqa: BLE001  (a reader failure is a message, never a crash)
            outcome = (gen, None, f"Unexpected error while loading: {type(exc).__name__}: {exc}")
        # Hand over to the GUI thread through a queued signal, unless the files changed
        # meanwhile or the panel shut down (it may be gone).
        if gen != self._current:
            return
        try:
            self._load_done.emit(outcome)
        except RuntimeError:
            pass

    def _loaded(self, gen: int, pair, error: str) -> None:
        if gen != self._current:
            return  # the files changed while this one was loading
        if error:
            self.status, self.error_text = "error", error
            self._update_label()
            self.changed.emit()
            dialogs.show_error(self.window(), "Cannot use these matrices", error)
            return
        self._a, self._b = pair
        self.status = "ready" if self._a is not None else "error"
        self.error_text = "" if self._a is not None else "Choose a file for A too."
        self._update_label()
        self.changed.emit()

    def _update_label(self) -> None:
        self.shapes_label.setProperty("invalid", self.status == "error")
        self.shapes_label.style().unpolish(self.shapes_label)
        self.shapes_label.style().polish(self.shapes_label)
        if self.status == "empty":
            text = "Choose A and B (or one .npz holding both); B left empty means B = Aᵀ."
        elif self.status == "loading":
            text = "Loading…"
        elif self.status == "error":
            text = self.error_text
        else:
            a, b = self._a, self._b
            bt = "B = Aᵀ" if b is None else f"B {matrices.describe(b)}"
            n = a.shape[0] if b is None else b.shape[1]
            text = f"A {matrices.describe(a)} · {bt} → C {a.shape[0]}×{n}"
        self.shapes_label.setText(text)

    # --- queries for the run -------------------------------------------------------------

    def problems(self) -> list[str]:
        if self.mode != "files":
            return []
        if self.status == "empty":
            return ["Choose the matrix files (A and B)."]
        if self.status == "loading":
            return ["Loading the matrix files…"]
        if self.status == "error":
            return ["Fix the matrix files: " + self.error_text.split("\n")[0]]
        return []

    def matrices(self) -> tuple[np.ndarray, np.ndarray | None] | None:
        """(A, B or None) when files are in use and loaded, else None."""
        if self.mode == "files" and self.status == "ready":
            return self._a, self._b
        return None

    def shape(self) -> tuple[int, int, int] | None:
        pair = self.matrices()
        if pair is None:
            return None
        a, b = pair
        return a.shape[0], (a.shape[0] if b is None else b.shape[1]), a.shape[1]

    def show_verification(self, recs: list[ResultRecord]) -> None:
        """One line under the files: how the last run on them went."""
        checked = [r for r in recs if r.passed is not None]
        if self.mode != "files" or not checked:
            self.verify_label.setVisible(False)
            return
        bad = [r for r in checked if not r.passed]
        text = f"Last run on these files: {len(checked) - len(bad)} passed"
        if bad:
            text += f", <span style='color:#e3242b'><b>{len(bad)} failed</b></span> ({', '.join(r.label() for r in bad)})"
        self.verify_label.setText(text + " — rel-L2 and max-abs per variant in Results.")
        self.verify_label.setVisible(True)

    # --- drag and drop ---------------------------------------------------------------

    def _dropped_paths(self, event) -> list[str]:
        md = event.mimeData()
        if not md.hasUrls():
            return []
        return [u.toLocalFile() for u in md.urls() if u.isLocalFile() and supported(u.toLocalFile())]

    def dragEnterEvent(self, event):  # noqa: N802 (Qt API)
        if self._dropped_paths(event) and self.isEnabled():
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event):  # noqa: N802
        self.dragEnterEvent(event)

    def dropEvent(self, event):  # noqa: N802
        paths = self._dropped_paths(event)
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        if len(paths) >= 2:
            self.set_files(paths[0], paths[1])
            return
        # One file: the field under the pointer, else A when empty, else B.
        pos = event.position().toPoint()
        target = self.childAt(pos)
        if target in (self.b_edit, self.b_browse) or (target not in (self.a_edit, self.a_browse)
                                                      and self.a_edit.text()):
            self.set_files(self.a_edit.text(), paths[0])
        else:
            self.set_files(paths[0], self.b_edit.text())

    # --- persistence and shutdown -------------------------------------------------------

    def state(self) -> dict:
        return {"mode": self.mode, "dist": self.dist.currentText(), "seed": self.seed.value(),
                "a": self.a_edit.text(), "b": self.b_edit.text()}

    def set_state(self, state: dict) -> None:
        if not isinstance(state, dict):
            return
        if state.get("dist") in matrices.DISTRIBUTIONS:
            self.dist.setCurrentText(state["dist"])
        try:
            self.seed.setValue(int(state.get("seed", 0)))
        except (TypeError, ValueError):
            pass
        self.a_edit.setText(str(state.get("a") or ""))
        self.b_edit.setText(str(state.get("b") or ""))
        # Random mode on restore when the files are gone: no error dialog at startup.
        files = state.get("mode") == "files" and all(
            not p or Path(p).is_file() for p in (self.a_edit.text(), self.b_edit.text()))
        self.set_mode("files" if files else "random")

    def shutdown(self) -> None:
        """Loads still running are forgotten (their threads end on their own)."""
        self._current = -1
