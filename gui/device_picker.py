"""Where a run goes: one or several devices of the backend, or a Ray cluster.

One device checked is the plain case.  With several, the run either compares them
(every device runs every item) or shares the work (idle devices take the next task);
see :mod:`engine.run.dispatch`.  "Ray cluster" sends the run to every GPU worker of a
cluster (``local`` starts one on this machine); it is offered only where
:func:`engine.run.cluster.ray_status` says Ray can be used, and says why not otherwise.
"""
from __future__ import annotations

from PySide6.QtCore import QObject, QSize, Qt, Signal
from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QFrame, QHBoxLayout, QLabel, QLineEdit,
                               QRadioButton, QScrollArea, QSizePolicy, QStyle, QStyleOptionButton,
                               QVBoxLayout, QWidget)

from engine.measure.backends import DeviceInfo

from .labels import WrapLabel

#: Rows of devices shown before the list scrolls.
VISIBLE_DEVICE_ROWS = 4
MODE_TEXT = {"compare": "Compare devices", "share": "Share the work"}
MODE_TIPS = {
    "compare": "Every chosen device runs every item; charts and table show them side by side",
    "share": "The chosen devices split the items between them: one table, sooner",
}
DEFAULT_RAY_ADDRESS = "local"


class ElidedCheckBox(QCheckBox):
    """A checkbox whose label is shortened with '…' to the width it gets (device names
    are long: 'pthread-skylake-avx512-AMD EPYC 7B13'), the full text in its tooltip."""

    def __init__(self, text: str, parent=None):
        super().__init__(text, parent)
        self.full_text = text
        self.setToolTip(text)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)

    def minimumSizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        return QSize(self.fontMetrics().horizontalAdvance("0: …") + 24, super().sizeHint().height())

    def resizeEvent(self, event):  # noqa: N802
        opt = QStyleOptionButton()
        self.initStyleOption(opt)
        indicator = self.style().subElementRect(QStyle.SubElement.SE_CheckBoxContents, opt, self).left()
        room = max(10, self.width() - indicator - 4)
        self.setText(self.fontMetrics().elidedText(self.full_text, Qt.TextElideMode.ElideRight, room))
        super().resizeEvent(event)


class DeviceChecks(QScrollArea):
    """A checkbox per device, scrolling past :data:`VISIBLE_DEVICE_ROWS` rows.

    Signals
    -------
    changed()
        A box was checked or unchecked (by the user or by :meth:`set_checked`).
    """

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("deviceChecks")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self._inner = QWidget()
        # The group box shows through: no band of another shade behind the boxes.
        self._inner.setObjectName("deviceChecksInner")
        self.setStyleSheet("QScrollArea#deviceChecks, QWidget#deviceChecksInner "
                           "{ background: transparent; }")
        self.viewport().setAutoFillBackground(False)
        self._layout = QVBoxLayout(self._inner)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2)
        self.setWidget(self._inner)
        #: index → its checkbox, in the backend's order.
        self.boxes: dict[int, QCheckBox] = {}
        self.empty = QLabel("No device")
        self.empty.setObjectName("hint")
        self._layout.addWidget(self.empty)

    def set_devices(self, devices: list[DeviceInfo], checked: list[int]) -> None:
        """One box per device; ``checked`` ones ticked (the first device if none is)."""
        for box in self.boxes.values():
            self._layout.removeWidget(box)
            box.hide()                  # now: deleteLater() leaves it painted until then
            box.deleteLater()
        self.boxes = {}
        wanted = [i for i in checked if any(d.index == i for d in devices)]
        if not wanted and devices:
            wanted = [devices[0].index]
        for d in devices:
            box = ElidedCheckBox(f"{d.index}: {d.name}")
            box.setChecked(d.index in wanted)
            box.toggled.connect(self.changed)
            self._layout.addWidget(box)
            self.boxes[d.index] = box
        self.empty.setVisible(not devices)
        self._fit_height()
        self.changed.emit()

    def _fit_height(self) -> None:
        rows = max(1, min(len(self.boxes), VISIBLE_DEVICE_ROWS))
        row_h = max((b.sizeHint().height() for b in self.boxes.values()),
                    default=self.empty.sizeHint().height())
        self.setFixedHeight(rows * row_h + (rows - 1) * self._layout.spacing() + 2)

    def checked(self) -> list[int]:
        return [i for i, b in self.boxes.items() if b.isChecked()]

    def set_checked(self, indices: list[int]) -> None:
        for i, b in self.boxes.items():
            b.blockSignals(True)
            b.setChecked(i in indices)
            b.blockSignals(False)
        self.changed.emit()


class DevicePicker(QObject):
    """Devices of the chosen backend, how several share a run, and the Ray option.

    Not a widget itself: its rows (:attr:`checks`, :attr:`mode_row`, :attr:`ray_row`,
    :attr:`ray_note`) go into the owner's form, so they line up with its other rows.

    Signals
    -------
    changed()
        Devices, mode, or the Ray choice changed.
    """

    changed = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.checks = DeviceChecks()
        self.mode_buttons: dict[str, QRadioButton] = {}
        group = QButtonGroup(self)
        mode_row = QHBoxLayout()
        mode_row.setContentsMargins(0, 0, 0, 0)
        for key, text in MODE_TEXT.items():
            b = QRadioButton(text)
            b.setToolTip(MODE_TIPS[key])
            group.addButton(b)
            mode_row.addWidget(b)
            self.mode_buttons[key] = b
        mode_row.addStretch(1)
        self.mode_buttons["compare"].setChecked(True)
        self.mode_row = QWidget()
        self.mode_row.setLayout(mode_row)

        self.ray_check = QCheckBox("Ray cluster")
        self.ray_check.setEnabled(False)
        self.ray_check.setToolTip("Checking whether Ray can be used…")
        self.ray_address = QLineEdit(DEFAULT_RAY_ADDRESS)
        self.ray_address.setPlaceholderText("address, or local")
        self.ray_address.setToolTip("The cluster's address (ray://host:10001, host:6379), or "
                                    "'local' to start a cluster on this machine")
        ray_row = QHBoxLayout()
        ray_row.setContentsMargins(0, 0, 0, 0)
        ray_row.addWidget(self.ray_check)
        ray_row.addWidget(self.ray_address, 1)
        self.ray_row = QWidget()
        self.ray_row.setLayout(ray_row)
        self.ray_note = WrapLabel()   # Ray's reason may quote a long import error
        self.ray_note.setObjectName("hint")
        self.ray_note.setVisible(False)
        self.ray_available = False
        self.ray_reason = "checking whether Ray can be used…"
        #: The user's Ray choice, kept while Ray is unavailable (the box is then unticked).
        self._ray_wanted = False

        self.checks.changed.connect(self._refresh)
        for b in self.mode_buttons.values():
            b.toggled.connect(self._refresh)
        self.ray_check.toggled.connect(self._ray_toggled)
        self.ray_address.textChanged.connect(self._refresh)
        self._refresh()

    # --- devices -------------------------------------------------------------------

    def set_devices(self, devices: list[DeviceInfo], checked: list[int]) -> None:
        self.checks.set_devices(devices, checked)

    def devices(self) -> list[int]:
        """The checked device indices, in the backend's order."""
        return self.checks.checked()

    def set_checked(self, indices: list[int]) -> None:
        self.checks.set_checked(indices)

    # --- mode ----------------------------------------------------------------------

    def mode(self) -> str:
        return next(k for k, b in self.mode_buttons.items() if b.isChecked())

    def set_mode(self, mode: str) -> None:
        if mode in self.mode_buttons:
            self.mode_buttons[mode].setChecked(True)

    def several(self) -> bool:
        """Whether the run may go to more than one device (the mode matters)."""
        return self.ray_chosen() or len(self.devices()) > 1

    # --- Ray -----------------------------------------------------------------------

    def set_ray_status(self, available: bool, reason: str) -> None:
        """Offer Ray, or show it disabled with the reason."""
        self.ray_available, self.ray_reason = available, reason
        self.ray_check.blockSignals(True)
        self.ray_check.setChecked(available and self._ray_wanted)
        self.ray_check.blockSignals(False)
        self._refresh()

    def _ray_toggled(self, on: bool) -> None:
        if self.ray_available:
            self._ray_wanted = on
        self._refresh()

    def ray_chosen(self) -> bool:
        return self.ray_available and self.ray_check.isChecked()

    def address(self) -> str | None:
        """The Ray cluster address when Ray is chosen, else None (this machine's devices)."""
        return self.ray_address.text().strip() if self.ray_chosen() else None

    # --- state ---------------------------------------------------------------------

    def _refresh(self, *_) -> None:
        ray = self.ray_chosen()
        self.checks.setEnabled(not ray)
        self.mode_row.setEnabled(self.several())
        self.ray_check.setEnabled(self.ray_available)
        self.ray_address.setEnabled(ray)
        self.ray_address.setVisible(self.ray_available)
        self.ray_check.setToolTip(("Run on every engine of a Ray cluster: one per GPU for cuda, one per "
                                   "worker slot for cpu and opencl") if self.ray_available
                                  else f"Ray is unavailable: {self.ray_reason}")
        self.ray_note.setText(f"Ray: {self.ray_reason}")
        self.ray_note.setToolTip(self.ray_reason)
        self.ray_note.setVisible(not self.ray_available)
        self.changed.emit()

    def problems(self) -> list[str]:
        if self.ray_chosen():
            return [] if self.address() else ["Give the Ray cluster's address (or 'local')."]
        if self.checks.boxes and not self.devices():
            return ["Choose at least one device."]
        return []

    def state(self) -> dict:
        return {"devices": self.devices(), "device_mode": self.mode(),
                "ray": self._ray_wanted, "ray_address": self.ray_address.text().strip()}

    def set_ray_state(self, on: bool, address: str) -> None:
        """Restore the Ray choice (it takes effect once Ray turns out to be available)."""
        if address:
            self.ray_address.setText(address)
        self._ray_wanted = bool(on)
        self.ray_check.blockSignals(True)
        self.ray_check.setChecked(self.ray_available and self._ray_wanted)
        self.ray_check.blockSignals(False)
        self._refresh()
