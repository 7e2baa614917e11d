"""Backends and devices: which are usable here, why the others are not, and the
properties of the chosen device (name, compute units, memory, clocks, compute
capability, peak FP32 and bandwidth estimates)."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QSplitter,
                               QTableWidget, QTableWidgetItem, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from engine.backends import BACKENDS, BackendStatus, DeviceInfo

OK_COLOR, NO_COLOR = QColor("#2e9d4f"), QColor("#d0453a")


def backend_line(status: BackendStatus) -> str:
    """``"opencl: 1 device"`` or ``"cuda: unavailable — pycuda is not installed"``."""
    if status.available:
        n = len(status.devices)
        return f"{status.name}: {n} device{'s' if n != 1 else ''}"
    return f"{status.name}: unavailable — {status.reason or 'no reason given'}"


def device_rows(info: DeviceInfo) -> list[tuple[str, str]]:
    """The engine's property rows plus anything extra the backend reported."""
    rows = list(info.rows())
    rows.insert(0, ("Backend", f"{info.backend} (device {info.index})"))
    for key, val in sorted(info.extra.items()):
        rows.append((key.replace("_", " ").capitalize(), str(val)))
    return rows


class DevicePanel(QWidget):
    """Backend status tree on the left, device properties on the right.

    Signals
    -------
    device_activated(str, int)
        The user double-clicked a device: (backend, index).
    """

    device_activated = Signal(str, int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.statuses: dict[str, BackendStatus] = {}
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Backend / device", "Status"])
        self.tree.setRootIsDecorated(True)
        self.tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(True)
        self.tree.setWordWrap(True)
        self.table = QTableWidget(0, 2)
        self.table.horizontalHeader().setVisible(False)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(True)
        self.table.setShowGrid(False)
        self.table.setAlternatingRowColors(True)
        self.title = QLabel("Device")
        self.title.setObjectName("panelTitle")
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.title)
        rl.addWidget(self.table)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.tree)
        split.addWidget(right)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        self.tree.currentItemChanged.connect(self._current_changed)
        self.tree.itemDoubleClicked.connect(self._double_clicked)
        self._probing()

    def _probing(self) -> None:
        self.tree.clear()
        for name in BACKENDS:
            QTreeWidgetItem(self.tree, [name, "probing…"])

    def set_statuses(self, statuses: dict[str, BackendStatus]) -> None:
        self.statuses = dict(statuses)
        self.tree.clear()
        for name, st in statuses.items():
            top = QTreeWidgetItem(self.tree, [name, "available" if st.available else st.reason])
            top.setForeground(1, OK_COLOR if st.available else NO_COLOR)
            top.setToolTip(1, backend_line(st) + (f"\n{st.versions}" if st.versions else ""))
            top.setData(0, Qt.ItemDataRole.UserRole, (name, None))
            for d in st.devices:
                child = QTreeWidgetItem(top, [f"{d.index}: {d.name}", _short_specs(d)])
                child.setData(0, Qt.ItemDataRole.UserRole, (name, d.index))
                child.setToolTip(0, d.name)
            top.setExpanded(True)

    def show_device(self, info: DeviceInfo | None) -> None:
        """Fill the property table (``None``: nothing chosen)."""
        self.table.setRowCount(0)
        if info is None:
            self.title.setText("Device")
            return
        self.title.setText(f"{info.name}")
        rows = device_rows(info)
        self.table.setRowCount(len(rows))
        for r, (label, value) in enumerate(rows):
            key = QTableWidgetItem(label)
            key.setForeground(self.palette().placeholderText())
            self.table.setItem(r, 0, key)
            self.table.setItem(r, 1, QTableWidgetItem(value))
        self.table.resizeRowsToContents()

    def device(self, backend: str, index: int) -> DeviceInfo | None:
        st = self.statuses.get(backend)
        if st is None:
            return None
        return next((d for d in st.devices if d.index == index), None)

    def _current_changed(self, item, _prev) -> None:
        if item is None:
            return
        backend, index = item.data(0, Qt.ItemDataRole.UserRole) or (None, None)
        if index is not None:
            self.show_device(self.device(backend, index))

    def _double_clicked(self, item, _col) -> None:
        backend, index = item.data(0, Qt.ItemDataRole.UserRole) or (None, None)
        if index is not None:
            self.device_activated.emit(backend, index)


def _short_specs(d: DeviceInfo) -> str:
    bits = []
    if d.compute_units:
        bits.append(f"{d.compute_units} CUs")
    if d.memory_bytes:
        bits.append(f"{d.memory_bytes / 2**30:.0f} GiB")
    if d.peak_gflops_fp32:
        bits.append(f"~{d.peak_gflops_fp32:,.0f} GFLOP/s")
    if d.peak_gbps:
        bits.append(f"~{d.peak_gbps:,.0f} GB/s")
    return " · ".join(bits)
