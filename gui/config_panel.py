"""The Configure panel: everything a sweep needs, built from the engine's own tables.

Backends come from :func:`engine.backends.probe_all`, variants and their parameter
spaces from :data:`engine.registry.REGISTRY`, size presets from
:data:`engine.sizes.PRESETS`, dtypes from :data:`engine.registry.DTYPES` and
distributions from :data:`engine.matrices.DISTRIBUTIONS`; nothing is listed twice.
:meth:`ConfigPanel.build_plan` turns the widgets into an :class:`engine.runner.Plan`.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout,
                               QGroupBox, QHBoxLayout, QLabel, QPushButton, QRadioButton,
                               QSpinBox, QVBoxLayout, QWidget)

from engine import registry
from engine.backends import BACKENDS, BackendStatus, DeviceInfo
from engine.runner import Plan

from .matrix_inputs import MatrixInputs
from .sizes_editor import SizesEditor
from .variant_tree import VariantTree

#: Preferred backend when the saved one is not available here.
BACKEND_PREFERENCE = ("cuda", "opencl", "cpu")
MODES = (("hot", "Hot — back-to-back launches"), ("cold", "Cold — caches flushed before each launch"))


def _group(title: str, *widgets_or_layouts) -> QGroupBox:
    box = QGroupBox(title)
    layout = QVBoxLayout(box)
    layout.setContentsMargins(8, 6, 8, 8)
    layout.setSpacing(6)
    for w in widgets_or_layouts:
        if isinstance(w, QWidget):
            layout.addWidget(w)
        else:
            layout.addLayout(w)
    return box


class ConfigPanel(QWidget):
    """All run settings.

    Signals
    -------
    changed()
        Any setting changed (the window re-checks whether Run is possible).
    device_changed(str, int)
        Backend or device changed: ``(backend, index)``.
    """

    changed = Signal()
    device_changed = Signal(str, int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.statuses: dict[str, BackendStatus] = {}
        self._pending_device: int | None = None
        self._build()
        self._connect()
        self._set_backend_items({})
        self._backend_chosen()

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        self.backend = QComboBox()
        self.backend.setObjectName("backendCombo")
        self.device = QComboBox()
        self.device.setObjectName("deviceCombo")
        self.device.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.device.setMinimumContentsLength(12)
        self.device_note = QLabel("Probing backends…")
        self.device_note.setObjectName("hint")
        self.device_note.setWordWrap(True)
        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Backend", self.backend)
        form.addRow("Device", self.device)
        target = _group("Target", form, self.device_note)

        self.variants = VariantTree()
        self.variants.setMinimumHeight(170)
        self.all_button = QPushButton("All")
        self.none_button = QPushButton("None")
        for b in (self.all_button, self.none_button):
            b.setObjectName("smallButton")
            b.setFlat(True)
        self.variant_hint = QLabel()
        self.variant_hint.setObjectName("hint")
        row = QHBoxLayout()
        row.addWidget(self.variant_hint, 1)
        row.addWidget(self.all_button)
        row.addWidget(self.none_button)
        kernels = _group("Variants", self.variants, row)

        self.sizes = SizesEditor()
        self.sizes_note = QLabel("Sizes come from the matrix files.")
        self.sizes_note.setObjectName("hint")
        self.sizes_note.setVisible(False)
        sizes = _group("Sizes", self.sizes, self.sizes_note)

        self.dtype = QComboBox()
        self.dtype.addItems(registry.DTYPES)
        self.mode = QComboBox()
        for key, text in MODES:
            self.mode.addItem(key, key)
            self.mode.setItemData(self.mode.count() - 1, text, Qt.ItemDataRole.ToolTipRole)
        self.mode.setToolTip("hot: launches back to back (data in cache); cold: caches "
                             "flushed before each timed launch")
        self.warmup = QSpinBox()
        self.warmup.setRange(0, 10_000)
        self.warmup.setValue(3)
        self.warmup.setToolTip("Untimed launches before timing")
        self.repeats_radio = QRadioButton("Repeats")
        self.budget_radio = QRadioButton("Budget")
        self.budget_radio.setToolTip("Time each item for this long (at least 3 launches)")
        timing_group = QButtonGroup(self)
        timing_group.addButton(self.repeats_radio)
        timing_group.addButton(self.budget_radio)
        self.repeats_radio.setChecked(True)
        self.repeats = QSpinBox()
        self.repeats.setRange(1, 100_000)
        self.repeats.setValue(20)
        self.budget = QDoubleSpinBox()
        self.budget.setRange(0.01, 3600.0)
        self.budget.setDecimals(2)
        self.budget.setSingleStep(0.1)
        self.budget.setValue(0.5)
        self.budget.setSuffix(" s")
        self.verify = QCheckBox("Verify results")
        self.verify.setChecked(True)
        self.verify.setToolTip("Compare each kernel's C against a reference before timing")
        self.autotune = QCheckBox("Autotune")
        self.autotune.setToolTip(
            "Search each checked variant's checked parameter values at every size and report "
            "only the fastest verified one. Winners are remembered per device, variant, dtype "
            "and shape (autotune cache), so a second run only re-times them.")
        mform = QFormLayout()
        mform.setContentsMargins(0, 0, 0, 0)
        mform.setHorizontalSpacing(8)
        r1 = QHBoxLayout()
        r1.addWidget(self.dtype, 1)
        r1.addWidget(QLabel("Mode"))
        r1.addWidget(self.mode, 1)
        mform.addRow("Type", r1)
        r2 = QHBoxLayout()
        r2.addWidget(self.warmup, 1)
        r2.addWidget(self.verify)
        r2.addWidget(self.autotune)
        mform.addRow("Warm-up", r2)
        r3 = QHBoxLayout()
        r3.addWidget(self.repeats_radio)
        r3.addWidget(self.repeats, 1)
        r3.addWidget(self.budget_radio)
        r3.addWidget(self.budget, 1)
        mform.addRow("Timing", r3)
        measure = _group("Measurement", mform)

        self.inputs = MatrixInputs()
        inputs = _group("Inputs", self.inputs)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.setSpacing(8)
        for box in (target, kernels, sizes, measure, inputs):
            layout.addWidget(box)
        layout.setStretchFactor(kernels, 1)

    def _connect(self) -> None:
        self.backend.currentIndexChanged.connect(self._backend_chosen)
        self.device.currentIndexChanged.connect(self._device_chosen)
        self.variants.choice_changed.connect(self._changed)
        self.all_button.clicked.connect(lambda: self.variants.set_all(True))
        self.none_button.clicked.connect(lambda: self.variants.set_all(False))
        self.sizes.changed.connect(self._changed)
        self.dtype.currentTextChanged.connect(self.inputs.set_dtype)
        self.dtype.currentTextChanged.connect(self._changed)
        for sig in (self.mode.currentIndexChanged, self.warmup.valueChanged,
                    self.repeats.valueChanged, self.budget.valueChanged,
                    self.repeats_radio.toggled, self.verify.toggled, self.autotune.toggled):
            sig.connect(self._changed)
        self.inputs.changed.connect(self._inputs_changed)

    # --- backends and devices ------------------------------------------------------------

    def _set_backend_items(self, statuses: dict[str, BackendStatus]) -> None:
        current = self.backend.currentData() or ""
        self.backend.blockSignals(True)
        self.backend.clear()
        for name in BACKENDS:
            st = statuses.get(name)
            text = name if st is None or st.available else f"{name} — unavailable"
            self.backend.addItem(text, name)
            i = self.backend.count() - 1
            if st is not None:
                if not st.available:
                    self.backend.model().item(i).setEnabled(False)
                self.backend.setItemData(i, st.reason or f"{len(st.devices)} device(s)",
                                         Qt.ItemDataRole.ToolTipRole)
        idx = self.backend.findData(current)
        self.backend.setCurrentIndex(idx if idx >= 0 else 0)
        self.backend.blockSignals(False)

    def set_statuses(self, statuses: dict[str, BackendStatus]) -> None:
        """Backends probed: offer the available ones, keeping the saved choice if usable."""
        self.statuses = dict(statuses)
        wanted = self.backend.currentData()
        self._set_backend_items(statuses)
        if not (statuses.get(wanted) and statuses[wanted].available):
            wanted = next((b for b in BACKEND_PREFERENCE
                           if statuses.get(b) and statuses[b].available), wanted)
        self.backend.blockSignals(True)
        self.backend.setCurrentIndex(max(0, self.backend.findData(wanted)))
        self.backend.blockSignals(False)
        self._backend_chosen()

    def _backend_chosen(self, *_) -> None:
        name = self.backend.currentData() or BACKENDS[0]
        if self.variants.backend != name:
            self.variants.set_backend(name)
        st = self.statuses.get(name)
        self.device.blockSignals(True)
        self.device.clear()
        if st is not None:
            for d in st.devices:
                self.device.addItem(f"{d.index}: {d.name}", d.index)
                self.device.setItemData(self.device.count() - 1, d.name, Qt.ItemDataRole.ToolTipRole)
        want = self._pending_device if self._pending_device is not None else 0
        idx = self.device.findData(want)
        self.device.setCurrentIndex(idx if idx >= 0 else 0)
        self.device.blockSignals(False)
        if st is not None:
            self._pending_device = None
        self._device_chosen()

    def _device_chosen(self, *_) -> None:
        name = self.backend.currentData() or ""
        st = self.statuses.get(name)
        if not self.statuses:
            self.device_note.setText("Probing backends…")
        elif st is None or not st.available:
            self.device_note.setText(f"{name} is unavailable: {st.reason if st else 'not probed'}")
        else:
            info = self.device_info()
            self.device_note.setText(_device_summary(info) if info else "No device.")
        self.device_changed.emit(name, self.device_index())
        self._changed()

    def backend_name(self) -> str:
        return self.backend.currentData() or ""

    def device_index(self) -> int:
        d = self.device.currentData()
        return int(d) if d is not None else 0

    def device_info(self) -> DeviceInfo | None:
        st = self.statuses.get(self.backend_name())
        if st is None:
            return None
        return next((d for d in st.devices if d.index == self.device_index()), None)

    def select(self, backend: str, index: int = 0) -> None:
        """Choose a backend and device (e.g. from the device panel or a test)."""
        self._pending_device = index
        i = self.backend.findData(backend)
        if i >= 0:
            if i == self.backend.currentIndex():
                self._backend_chosen()
            else:
                self.backend.setCurrentIndex(i)

    # --- inputs ------------------------------------------------------------------------

    def _inputs_changed(self) -> None:
        files = self.inputs.mode == "files"
        self.sizes.setEnabled(not files)
        self.sizes_note.setVisible(files)
        if files and self.verify.isEnabled():
            # Loaded files exist to be verified against; remember the user's own choice
            # for random inputs and force verification while files are in use.
            self._saved_verify = self.verify.isChecked()
            self.verify.setChecked(True)
        elif not files and not self.verify.isEnabled():
            self.verify.setChecked(self._saved_verify)
        self.verify.setEnabled(not files)
        self.autotune.setEnabled(not files)  # autotuning searches sizes, not loaded matrices
        self._changed()

    # --- validity and the plan ----------------------------------------------------------

    def _changed(self, *_) -> None:
        self.variant_hint.setText(self._variant_summary())
        self.changed.emit()

    def _variant_summary(self) -> str:
        names = self.variants.checked_variants()
        items = len(self.variants.plan_items()) if names else 0
        return f"{len(names)} variant{'s' if len(names) != 1 else ''}, {items} parameter set{'s' if items != 1 else ''}"

    def problems(self) -> list[str]:
        """Why Run cannot start now (empty list: it can)."""
        out: list[str] = []
        if not self.statuses:
            return ["Probing backends…"]
        st = self.statuses.get(self.backend_name())
        if st is None or not st.available:
            out.append(f"The {self.backend_name()} backend is unavailable.")
        elif not st.devices:
            out.append(f"The {self.backend_name()} backend has no device.")
        out.extend(self.variants.problems())
        if self.inputs.mode == "files":
            out.extend(self.inputs.problems())
        elif self.sizes.error():
            out.append("Sizes: " + self.sizes.error())
        return out

    def run_count(self) -> int:
        items = len(self.variants.plan_items()) if self.variants.checked_variants() else 0
        shapes = 1 if self.inputs.mode == "files" else len(self.sizes.shapes())
        return items * shapes

    def build_plan(self) -> Plan:
        """The sweep these settings describe.

        Raises
        ------
        ValueError
            When :meth:`problems` is not empty; the message lists them.
        """
        problems = self.problems()
        if problems:
            raise ValueError("\n".join(problems))
        files = self.inputs.matrices()
        plan = Plan(
            backend=self.backend_name(),
            items=self.variants.plan_items(),
            shapes=[] if files is not None else self.sizes.shapes(),
            dtype=self.dtype.currentText(),
            device=self.device_index(),
            warmup=self.warmup.value(),
            repeats=self.repeats.value(),
            time_budget_s=self.budget.value() if self.budget_radio.isChecked() else None,
            cold=self.mode.currentData() == "cold",
            verify=True if files is not None else self.verify.isChecked(),
            seed=self.inputs.seed.value(),
            dist=self.inputs.dist.currentText(),
            matrices=files,
            autotune=files is None and self.autotune.isChecked(),
        )
        plan.validate()
        return plan

    def set_running(self, running: bool) -> None:
        """Freeze everything a running sweep depends on."""
        for child in self.findChildren(QGroupBox):
            child.setEnabled(not running)

    # --- persistence ---------------------------------------------------------------------

    def state(self) -> dict:
        return {
            "backend": self.backend_name(),
            "device": self.device_index(),
            "variants": self.variants.state(),
            "sizes": self.sizes.text.text(),
            "dtype": self.dtype.currentText(),
            "mode": self.mode.currentData(),
            "warmup": self.warmup.value(),
            "repeats": self.repeats.value(),
            "use_budget": self.budget_radio.isChecked(),
            "budget_s": self.budget.value(),
            "verify": self.verify.isChecked() if self.inputs.mode != "files" else self._saved_verify,
            "autotune": self.autotune.isChecked(),
            "inputs": self.inputs.state(),
        }

    _saved_verify = True

    def set_state(self, state: dict) -> None:
        """Restore :meth:`state`; anything unknown or malformed keeps its default."""
        if not isinstance(state, dict) or not state:
            return

        def get(key, kind, default=None):
            val = state.get(key, default)
            try:
                return kind(val) if val is not None else default
            except (TypeError, ValueError):
                return default

        self.variants.set_state(state.get("variants", {}))
        backend = state.get("backend")
        if backend in BACKENDS:
            self.select(backend, get("device", int, 0) or 0)
        if isinstance(state.get("sizes"), str):
            self.sizes.set_text(state["sizes"])
        if state.get("dtype") in registry.DTYPES:
            self.dtype.setCurrentText(state["dtype"])
        i = self.mode.findData(state.get("mode"))
        if i >= 0:
            self.mode.setCurrentIndex(i)
        if get("warmup", int) is not None:
            self.warmup.setValue(get("warmup", int))
        if get("repeats", int) is not None:
            self.repeats.setValue(get("repeats", int))
        if get("budget_s", float) is not None:
            self.budget.setValue(get("budget_s", float))
        (self.budget_radio if state.get("use_budget") else self.repeats_radio).setChecked(True)
        self._saved_verify = bool(state.get("verify", True))
        self.verify.setChecked(self._saved_verify)
        self.autotune.setChecked(bool(state.get("autotune", False)))
        self.inputs.set_state(state.get("inputs", {}))
        self._changed()


def _device_summary(info: DeviceInfo) -> str:
    bits = []
    if info.compute_units:
        bits.append(f"{info.compute_units} compute units")
    if info.memory_bytes:
        bits.append(f"{info.memory_bytes / 2**30:.1f} GiB")
    if info.compute_capability:
        bits.append(f"CC {info.compute_capability}")
    bits.append(f"peak ≈ {info.peak_gflops_fp32:,.0f} GFLOP/s" if info.peak_gflops_fp32
                else "peak FP32 unknown")
    if info.peak_gbps:
        bits.append(f"≈ {info.peak_gbps:,.0f} GB/s")
    return " · ".join(bits)
