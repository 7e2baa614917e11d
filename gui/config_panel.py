"""The Configure panel: everything a sweep needs, built from the engine's own tables.

Backends come from :func:`engine.measure.backends.probe_all`, variants and their parameter
spaces (with the defaults of the chosen CUDA device's architecture, its kernel files'
``[defaults]``) from :data:`engine.kernels.registry.REGISTRY`, size presets from
:data:`engine.inputs.sizes.PRESETS`, dtypes from :data:`engine.kernels.registry.DTYPES` and
distributions from :data:`engine.inputs.matrices.DISTRIBUTIONS`; nothing is listed twice.
:meth:`ConfigPanel.build_plan` turns the widgets into an :class:`engine.run.runner.Plan`.
"""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout,
                               QGroupBox, QHBoxLayout, QLabel, QPushButton, QRadioButton,
                               QSpinBox, QVBoxLayout, QWidget)

from engine.common.dtypes import ELEMENT_NAMES, ElementType, Layout, backend_refusal
from engine.kernels import registry, user_kernels
from engine.measure.backends import BACKENDS, BackendStatus, DeviceInfo
from engine.results.records import ResultRecord
from engine.run.runner import BUDGET_RANGE, REPEATS_RANGE, WARMUP_RANGE, Plan
from engine.measure.timing import NOISE_DEFAULT_PCT, NOISE_PCT_RANGE, NoiseStop
from engine.measure.conditions import ClockMode

from .device_picker import DevicePicker
from .labels import WrapLabel
from .matrix_inputs import MatrixInputs
from .run_controller import RunTarget
from .sizes_editor import SizesEditor
from .variant_tree import VariantTree

#: Preferred backend when the saved one is not available here.
BACKEND_PREFERENCE = ("cuda", "opencl", "cpu")
MODES = (("hot", "Hot — back-to-back launches"), ("cold", "Cold — caches flushed before each launch"))
#: The Clocks choice: bench's --lock-clocks (none, base, max).
CLOCK_CHOICES = ((ClockMode.NONE, "As the driver sets them"),
                 (ClockMode.BASE, "Locked at the base clock"),
                 (ClockMode.MAX, "Locked at the highest clock"))


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
        Backend or devices changed: ``(backend, index of the first chosen device)``.
    """

    changed = Signal()
    device_changed = Signal(str, int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.statuses: dict[str, BackendStatus] = {}
        #: Devices to check once the backend's devices are known (restored settings).
        self._pending_devices: list[int] | None = None
        self._picker_backend = ""
        self._build()
        self._connect()
        self._set_backend_items({})
        self._backend_chosen()

    # --- layout ------------------------------------------------------------------------

    def _build(self) -> None:
        self.backend = QComboBox()
        self.backend.setObjectName("backendCombo")
        self.picker = DevicePicker(self)
        self.device_note = WrapLabel("Probing backends…")  # device names, unavailability reasons
        self.device_note.setObjectName("hint")
        form = QFormLayout()
        form.setContentsMargins(0, 0, 0, 0)
        form.setVerticalSpacing(4)
        form.addRow("Backend", self.backend)
        form.addRow("Devices", self.picker.checks)
        form.addRow("Several", self.picker.mode_row)
        form.addRow("Cluster", self.picker.ray_row)
        form.addRow("", self.picker.ray_note)
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
        self.dtype.setObjectName("dtypeCombo")
        self.dtype.addItems(ELEMENT_NAMES)      # each one's reason, per backend: _refresh_types
        self.out_dtype = QComboBox()
        self.out_dtype.setObjectName("outDtypeCombo")
        self.out_dtype.setToolTip("The type of C: FP16/BF16 inputs write FP32 or their own type; "
                                  "FP8 inputs write BF16 or FP32; int8 inputs write int32")
        self.layout_b = QComboBox()
        self.layout_b.setObjectName("layoutCombo")
        for lay, short in ((Layout.KN, "B K×N"), (Layout.NK, "B N×K")):
            self.layout_b.addItem(short, lay.value)
        self.layout_b.setToolTip("B's layout in memory: K×N row-major, or N×K (transposed: what "
                                 "FP8 tensor cores and most frameworks' weights use); kernels "
                                 "that take only K×N are marked and skipped")
        self.mode = QComboBox()
        for key, text in MODES:
            self.mode.addItem(key, key)
            self.mode.setItemData(self.mode.count() - 1, text, Qt.ItemDataRole.ToolTipRole)
        self.mode.setToolTip("hot: launches back to back (data in cache); cold: caches "
                             "flushed before each timed launch")
        self.warmup = QSpinBox()
        self.warmup.setRange(*WARMUP_RANGE)
        self.warmup.setValue(3)
        self.warmup.setToolTip("Untimed launches before timing")
        self.repeats_radio = QRadioButton("Repeats")
        self.budget_radio = QRadioButton("Budget")
        self.budget_radio.setToolTip("Time each item for this long (at least 3 launches)")
        timing_group = QButtonGroup(self)
        timing_group.addButton(self.repeats_radio)
        timing_group.addButton(self.budget_radio)
        rule = NoiseStop()
        self.noise_radio = QRadioButton("Noise <")
        self.noise_radio.setToolTip(
            "Time each item until the relative standard error of the mean of its launch times "
            f"is below this ({rule.min_s:g} s at least, {rule.max_s:g} s at most; "
            "bench --until-noise)")
        timing_group.addButton(self.noise_radio)
        self.repeats_radio.setChecked(True)
        self.repeats = QSpinBox()
        self.repeats.setRange(*REPEATS_RANGE)
        self.repeats.setValue(20)
        self.budget = QDoubleSpinBox()
        self.budget.setRange(*BUDGET_RANGE)
        self.budget.setDecimals(2)
        self.budget.setSingleStep(0.1)
        self.budget.setValue(0.5)
        self.budget.setSuffix(" s")
        self.noise = QDoubleSpinBox()
        self.noise.setRange(*NOISE_PCT_RANGE)
        self.noise.setDecimals(2)
        self.noise.setSingleStep(0.1)
        self.noise.setValue(NOISE_DEFAULT_PCT)
        self.noise.setSuffix(" %")
        self.clocks = QComboBox()
        for clock_mode, text in CLOCK_CHOICES:
            self.clocks.addItem(text, clock_mode.value)
        self.clocks.setToolTip(
            "Lock the NVIDIA GPUs' SM clock for the run (base or highest clock; bench "
            "--lock-clocks), restored at its end, on Cancel and when the window closes. "
            "The driver allows it to root only: a refusal is said in the Log and the run "
            "goes on unlocked.")
        self.verify = QCheckBox("Verify results")
        self.verify.setChecked(True)
        self.verify.setToolTip("Compare each kernel's C against a reference before timing")
        self.autotune = QCheckBox("Autotune")
        self.autotune.setToolTip(
            "Search each checked variant's checked parameter values at every size and report "
            "only the fastest verified one. Winners are remembered per device, variant, dtype "
            "and shape (autotune cache), so a second run only re-times them.")
        self.guess = QCheckBox("Guess")
        self.guess.setToolTip(
            "With Autotune: time only the parameters that searched shapes of the same class "
            "(size buckets and 4-alignment of N and K) liked best, and the device's defaults, "
            "instead of the whole space. A shape searched before takes its own winner. "
            "Guesses are not stored.")
        self.guess.setEnabled(False)
        self.autotune.toggled.connect(lambda on: self.guess.setEnabled(on and self.autotune.isEnabled()))
        mform = QFormLayout()
        mform.setContentsMargins(0, 0, 0, 0)
        mform.setHorizontalSpacing(8)
        r1 = QHBoxLayout()
        r1.addWidget(self.dtype, 1)
        r1.addWidget(QLabel("→"))
        r1.addWidget(self.out_dtype, 1)
        r1.addWidget(self.layout_b, 1)
        r1.addWidget(QLabel("Mode"))
        r1.addWidget(self.mode, 1)
        mform.addRow("Type", r1)
        r2 = QHBoxLayout()
        r2.addWidget(self.warmup, 1)
        r2.addWidget(self.verify)
        r2.addWidget(self.autotune)
        r2.addWidget(self.guess)
        mform.addRow("Warm-up", r2)
        r3 = QHBoxLayout()
        r3.addWidget(self.repeats_radio)
        r3.addWidget(self.repeats, 1)
        r3.addWidget(self.budget_radio)
        r3.addWidget(self.budget, 1)
        mform.addRow("Timing", r3)
        # the noise rule on a row of its own: three choices on one row widen the panel
        r3b = QHBoxLayout()
        r3b.addWidget(self.noise_radio)
        r3b.addWidget(self.noise, 1)
        mform.addRow("", r3b)
        mform.addRow("Clocks", self.clocks)
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
        self.picker.changed.connect(self._device_chosen)
        self.variants.choice_changed.connect(self._changed)
        self.all_button.clicked.connect(lambda: self.variants.set_all(True))
        self.none_button.clicked.connect(lambda: self.variants.set_all(False))
        self.sizes.changed.connect(self._changed)
        self.dtype.currentTextChanged.connect(self.inputs.set_dtype)
        self.dtype.currentTextChanged.connect(self._changed)
        self.dtype.currentTextChanged.connect(self._refresh_outputs)
        self.out_dtype.currentTextChanged.connect(self._changed)
        self.layout_b.currentIndexChanged.connect(self._changed)
        self._refresh_outputs()
        for sig in (self.mode.currentIndexChanged, self.warmup.valueChanged,
                    self.repeats.valueChanged, self.budget.valueChanged,
                    self.noise.valueChanged, self.repeats_radio.toggled, self.noise_radio.toggled, self.verify.toggled, self.autotune.toggled,
                    self.guess.toggled, self.clocks.currentIndexChanged):
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
        if self._pending_devices is not None:
            want = self._pending_devices
        elif self._picker_backend == name:
            want = self.picker.devices() or [0]     # re-probed: keep the choice
        else:
            want = [0]
        self._picker_backend = name
        self.picker.blockSignals(True)
        self.picker.set_devices(list(st.devices) if st is not None else [], want)
        self.picker.blockSignals(False)
        if st is not None:
            self._pending_devices = None
        self._refresh_types()
        self._device_chosen()

    def type_refusal(self, element: ElementType) -> str | None:
        """Why the chosen backend (and its first device) cannot run ``element``, or None."""
        name = self.backend.currentData() or BACKENDS[0]
        st = self.statuses.get(name)
        fp16 = None
        if name == "opencl" and st is not None and st.devices:
            fp16 = st.devices[0].extra.get("cl_khr_fp16")
        return backend_refusal(name, element, opencl_fp16=fp16)

    def _refresh_types(self) -> None:
        """Every type stays listed; one the backend cannot run is greyed with the reason
        (never run in another type), and a choice that became impossible goes to float32."""
        model = self.dtype.model()
        for i, name in enumerate(ELEMENT_NAMES):
            element = ElementType(name)
            why = self.type_refusal(element)
            model.item(i).setEnabled(why is None)
            self.dtype.setItemData(i, f"{element.description}" + (f" — {why}" if why else ""),
                                   Qt.ItemDataRole.ToolTipRole)
        if not model.item(self.dtype.currentIndex()).isEnabled():
            self.dtype.setCurrentText("float32")
        self._refresh_outputs()
        self._refresh_layouts()

    def _refresh_layouts(self) -> None:
        """B as N×K is greyed, with the reason, on a backend none of whose kernels takes it
        (OpenCL); a choice that became impossible goes back to K×N."""
        opencl = (self.backend.currentData() or BACKENDS[0]) == "opencl"
        i = self.layout_b.findData(Layout.NK.value)
        self.layout_b.model().item(i).setEnabled(not opencl)
        self.layout_b.setItemData(i, Layout.NK.description + (
            " — no OpenCL kernel takes it yet" if opencl else
            ": the cpu backend, cuBLAS and the kernels whose header lists it"),
            Qt.ItemDataRole.ToolTipRole)
        if opencl and self.layout_b.currentData() == Layout.NK.value:
            self.layout_b.setCurrentIndex(self.layout_b.findData(Layout.KN.value))

    def _refresh_outputs(self, *_) -> None:
        try:
            choices = ElementType(self.dtype.currentText()).output_choices
        except ValueError:
            return
        kept = self.out_dtype.currentText()
        self.out_dtype.blockSignals(True)
        self.out_dtype.clear()
        self.out_dtype.addItems([str(c) for c in choices])
        if kept in [str(c) for c in choices]:
            self.out_dtype.setCurrentText(kept)
        self.out_dtype.setEnabled(len(choices) > 1)
        self.out_dtype.blockSignals(False)

    def _device_chosen(self, *_) -> None:
        name = self.backend.currentData() or ""
        st = self.statuses.get(name)
        if not self.statuses:
            self.device_note.setText("Probing backends…")
        elif st is None or not st.available:
            self.device_note.setText(f"{name} is unavailable: {st.reason if st else 'not probed'}")
        elif self.picker.ray_chosen():
            how = ("each runs everything" if self.picker.mode() == "compare"
                   else "they share the work")
            per = "per GPU" if name == "cuda" else "per worker slot"
            self.device_note.setText(f"The Ray cluster's {name} engines ({per}) run it: {how}")
        else:
            infos = self.devices_info()
            if len(infos) > 1:
                self.device_note.setText(_devices_summary(infos, self.picker.mode()))
            else:
                self.device_note.setText(_device_summary(infos[0]) if infos else "No device.")
        self.variants.set_arch(self.device_arch())
        self.device_changed.emit(name, self.device_index())
        self._changed()

    def backend_name(self) -> str:
        return self.backend.currentData() or ""

    def device_indices(self) -> list[int]:
        """The chosen devices of the backend (at least one once probed)."""
        return self.picker.devices() or ([] if self.picker.checks.boxes else [0])

    def device_index(self) -> int:
        """The first chosen device (the one whose figures the roofline takes)."""
        chosen = self.device_indices()
        return chosen[0] if chosen else 0

    def devices_info(self) -> list[DeviceInfo]:
        st = self.statuses.get(self.backend_name())
        if st is None:
            return []
        chosen = self.device_indices()
        return [d for d in st.devices if d.index in chosen]

    def device_info(self) -> DeviceInfo | None:
        """The first chosen device's properties (None before probing)."""
        infos = self.devices_info()
        return infos[0] if infos else None

    def device_arch(self) -> str | None:
        """The first chosen device's architecture (``sm_90``) when it is a CUDA device,
        whose ``[defaults]`` the parameter choices start from; None elsewhere."""
        info = self.device_info()
        if info is None or self.backend_name() != "cuda":
            return None
        return registry.arch_name(info.compute_capability)

    def select(self, backend: str, index: int = 0) -> None:
        """Choose a backend and one device (e.g. from the device panel or a test)."""
        self.select_devices(backend, [index])

    def select_devices(self, backend: str, indices: list[int], mode: str | None = None) -> None:
        """Choose a backend, several of its devices, and how they share a run."""
        if mode is not None:
            self.picker.set_mode(mode)
        self._pending_devices = list(indices)
        i = self.backend.findData(backend)
        if i >= 0:
            if i == self.backend.currentIndex():
                self._backend_chosen()
            else:
                self.backend.setCurrentIndex(i)

    def set_ray_status(self, available: bool, reason: str) -> None:
        """Whether the Ray cluster choice can be offered (and why not)."""
        self.picker.set_ray_status(available, reason)

    def target(self) -> RunTarget:
        """Where the configured run goes: the chosen devices, or the Ray cluster."""
        return RunTarget(self.backend_name(), tuple(self.device_indices()), self.picker.mode(),
                         self.picker.address())

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
        self.guess.setEnabled(not files and self.autotune.isChecked())
        self._changed()

    # --- validity and the plan ----------------------------------------------------------

    def _changed(self, *_) -> None:
        # the tree marks what fits none of the sizes a run would take
        self.variants.set_context(self.run_shapes(), self.dtype.currentText(),
                                  self.layout_b.currentData() or Layout.KN.value)
        self.variant_hint.setText(self._variant_summary())
        self.changed.emit()

    def run_shapes(self) -> list[tuple[int, int, int]]:
        """The sizes a run would take: the loaded matrices' one, or the sizes (none while
        either is not known yet)."""
        if self.inputs.mode == "files":
            shape = self.inputs.shape()
            return [shape] if shape is not None else []
        return [] if self.sizes.error() else self.sizes.shapes()

    def _variant_summary(self) -> str:
        names = self.variants.checked_variants()
        items = len(self.variants.plan_items()) if names else 0
        return f"{len(names)} variant{'s' if len(names) != 1 else ''}, {items} parameter set{'s' if items != 1 else ''}"

    def problems(self, with_variants: bool = True) -> list[str]:
        """Why Run cannot start now (empty list: it can); ``with_variants=False`` leaves
        out the variant tree's (a run whose items come from elsewhere)."""
        out: list[str] = []
        if not self.statuses:
            return ["Probing backends…"]
        st = self.statuses.get(self.backend_name())
        if st is None or not st.available:
            out.append(f"The {self.backend_name()} backend is unavailable.")
        elif not st.devices:
            out.append(f"The {self.backend_name()} backend has no device.")
        out.extend(self.picker.problems())
        if with_variants:
            out.extend(self.variants.problems())
        if self.inputs.mode == "files":
            out.extend(self.inputs.problems())
        elif self.sizes.error():
            out.append("Sizes: " + self.sizes.error())
        return out

    def run_count(self) -> int:
        """Runs of the configured sweep: the (item, size) pairs that fit (a run leaves the
        others out), per device when comparing (a Ray cluster's devices are not known
        before it runs: counted once)."""
        shapes = self.run_shapes()
        if shapes:
            runs = self.variants.fitting_runs()
        else:
            items = len(self.variants.plan_items()) if self.variants.checked_variants() else 0
            runs = items * (1 if self.inputs.mode == "files" else 0)
        copies = 1
        if self.picker.mode() == "compare" and not self.picker.ray_chosen():
            copies = max(1, len(self.device_indices()))
        return runs * copies

    def build_plan(self, items: list[tuple[str, dict[str, int]]] | None = None) -> Plan:
        """The sweep these settings describe (``items``: these variants and parameters
        instead of the tree's, as the kernel editor's Run asks).

        Raises
        ------
        ValueError
            When :meth:`problems` is not empty; the message lists them.
        """
        problems = self.problems(with_variants=items is None)
        if problems:
            raise ValueError("\n".join(problems))
        files = self.inputs.matrices()
        items = self.variants.plan_items() if items is None else items
        plan = Plan(
            backend=self.backend_name(),
            items=items,
            shapes=[] if files is not None else self.sizes.shapes(),
            dtype=self.dtype.currentText(),
            out_dtype=self.out_dtype.currentText() or None,
            layout=self.layout_b.currentData() or Layout.KN.value,
            device=self.device_index(),
            warmup=self.warmup.value(),
            repeats=self.repeats.value(),
            time_budget_s=self.budget.value() if self.budget_radio.isChecked() else None,
            until_noise=NoiseStop(self.noise.value()) if self.noise_radio.isChecked() else None,
            cold=self.mode.currentData() == "cold",
            verify=True if files is not None else self.verify.isChecked(),
            seed=self.inputs.seed.value(),
            dist=self.inputs.dist.currentText(),
            matrices=files,
            autotune=files is None and self.autotune.isChecked(),
            tune="guess" if self.guess.isChecked() else "search",
            kernel_files=user_kernels.kernel_files_of(n for n, _ in items),
            only_fitting=True,
        )
        plan.validate()
        return plan

    def clock_mode(self) -> ClockMode:
        """The Clocks choice: what the window's run does with the GPU clocks."""
        return ClockMode(self.clocks.currentData() or ClockMode.NONE.value)

    def set_running(self, running: bool) -> None:
        """Freeze everything a running sweep depends on."""
        for child in self.findChildren(QGroupBox):
            child.setEnabled(not running)

    def show_verification(self, recs: list[ResultRecord]) -> None:
        """After a run: how loaded matrices fared (the Inputs box says it)."""
        self.inputs.show_verification(recs)

    def shutdown(self) -> None:
        """Stop background work (a matrix file still loading)."""
        self.inputs.shutdown()

    # --- persistence ---------------------------------------------------------------------

    def state(self) -> dict:
        return {
            "backend": self.backend_name(),
            "device": self.device_index(),
            **self.picker.state(),
            "variants": self.variants.state(),
            "sizes": self.sizes.text.text(),
            "dtype": self.dtype.currentText(),
            "out_dtype": self.out_dtype.currentText(),
            "layout": self.layout_b.currentData(),
            "mode": self.mode.currentData(),
            "warmup": self.warmup.value(),
            "repeats": self.repeats.value(),
            "use_budget": self.budget_radio.isChecked(),
            "budget_s": self.budget.value(),
            "use_noise": self.noise_radio.isChecked(),
            "noise_pct": self.noise.value(),
            "clock_lock": self.clock_mode().value,
            "verify": self.verify.isChecked() if self.inputs.mode != "files" else self._saved_verify,
            "autotune": self.autotune.isChecked(),
            "guess": self.guess.isChecked(),
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
        self.picker.set_mode(state.get("device_mode", "compare"))
        self.picker.set_ray_state(bool(state.get("ray", False)),
                                  str(state.get("ray_address") or ""))
        backend = state.get("backend")
        if backend in BACKENDS:
            devices = state.get("devices")
            if not (isinstance(devices, list) and devices
                    and all(isinstance(d, int) for d in devices)):
                devices = [get("device", int, 0) or 0]   # settings from before several devices
            self.select_devices(backend, devices)
        if isinstance(state.get("sizes"), str):
            self.sizes.set_text(state["sizes"])
        if state.get("dtype") in ELEMENT_NAMES:
            self.dtype.setCurrentText(state["dtype"])
        if state.get("out_dtype") in ELEMENT_NAMES:
            self.out_dtype.setCurrentText(state["out_dtype"])
        i = self.layout_b.findData(state.get("layout"))
        if i >= 0 and self.layout_b.model().item(i).isEnabled():
            self.layout_b.setCurrentIndex(i)
        i = self.mode.findData(state.get("mode"))
        if i >= 0:
            self.mode.setCurrentIndex(i)
        if get("warmup", int) is not None:
            self.warmup.setValue(get("warmup", int))
        if get("repeats", int) is not None:
            self.repeats.setValue(get("repeats", int))
        if get("budget_s", float) is not None:
            self.budget.setValue(get("budget_s", float))
        if get("noise_pct", float) is not None:
            self.noise.setValue(get("noise_pct", float))
        (self.noise_radio if state.get("use_noise") is True else self.budget_radio
         if state.get("use_budget") else self.repeats_radio).setChecked(True)
        i = self.clocks.findData(state.get("clock_lock"))
        if i >= 0:
            self.clocks.setCurrentIndex(i)
        self._saved_verify = bool(state.get("verify", True))
        self.verify.setChecked(self._saved_verify)
        self.autotune.setChecked(bool(state.get("autotune", False)))
        self.guess.setChecked(bool(state.get("guess", False)))
        self.inputs.set_state(state.get("inputs", {}))
        self._changed()


def _devices_summary(infos: list[DeviceInfo], mode: str) -> str:
    """``2 devices (2 × NVIDIA H200) · each runs everything``."""
    counts: dict[str, int] = {}
    for d in infos:
        counts[d.name] = counts.get(d.name, 0) + 1
    names = ", ".join(f"{n} × {name}" if n > 1 else name for name, n in counts.items())
    how = "each runs everything" if mode == "compare" else "they share the work"
    return f"{len(infos)} devices ({names}) · {how}"


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
