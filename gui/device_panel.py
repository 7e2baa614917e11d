"""Backends and devices: which are usable here, why the others are not, and the
properties of the chosen device (name, compute units, memory, clocks, compute
capability, peak FP32 and bandwidth estimates)."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QSplitter,
                               QTableWidget, QTableWidgetItem, QTreeWidget, QTreeWidgetItem,
                               QVBoxLayout, QWidget)

from engine.measure.backends import BACKENDS, BackendStatus, DeviceInfo
from engine.results.environment import Environment

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


#: The tree's role for the "Run info" rows (not a backend).
RUN_INFO = "__run_info__"


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
        #: Opened results files' environment blocks, by source: the "Run info" rows.
        self.run_infos: dict[str, Environment] = {}
        self.tree = QTreeWidget()
        self.tree.setHeaderHidden(True)
        self.tree.setColumnCount(1)
        self.tree.setRootIsDecorated(True)
        self.tree.setWordWrap(True)
        self.tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)
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
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        self.tree.currentItemChanged.connect(self._current_changed)
        self.tree.itemDoubleClicked.connect(self._double_clicked)
        self._probing()

    def _probing(self) -> None:
        self.tree.clear()
        for name in BACKENDS:
            QTreeWidgetItem(self.tree, [f"{name} — probing…"])

    def set_statuses(self, statuses: dict[str, BackendStatus]) -> None:
        """One row per backend (green: usable, red: not), its devices or the reason below."""
        self.statuses = dict(statuses)
        self.tree.clear()
        for name, st in statuses.items():
            n = len(st.devices)
            head = (f"● {name} — available, {n} device{'s' if n != 1 else ''}" if st.available
                    else f"● {name} — unavailable")
            top = QTreeWidgetItem(self.tree, [head])
            top.setForeground(0, OK_COLOR if st.available else NO_COLOR)
            top.setToolTip(0, backend_line(st) + (f"\n{st.versions}" if st.versions else ""))
            top.setData(0, Qt.ItemDataRole.UserRole, (name, None))
            if not st.available:
                why = QTreeWidgetItem(top, [st.reason or "no reason given"])
                why.setToolTip(0, st.reason)
                why.setForeground(0, self.palette().placeholderText())
                why.setData(0, Qt.ItemDataRole.UserRole, (name, None))
            for d in st.devices:
                specs = _short_specs(d)
                child = QTreeWidgetItem(top, [f"{d.index}: {d.name}" + (f"  ({specs})" if specs else "")])
                child.setData(0, Qt.ItemDataRole.UserRole, (name, d.index))
                child.setToolTip(0, f"{d.name}\n{specs}\nDouble-click to use this device")
            top.setExpanded(True)
        self._add_run_infos()

    def set_run_infos(self, infos: dict[str, Environment]) -> None:
        """The environment blocks of the opened results files: a "Run info" branch whose
        rows show where and how each file's numbers were taken."""
        self.run_infos = dict(infos)
        for i in reversed(range(self.tree.topLevelItemCount())):
            top = self.tree.topLevelItem(i)
            if (top.data(0, Qt.ItemDataRole.UserRole) or (None,))[0] == RUN_INFO:
                self.tree.takeTopLevelItem(i)
        self._add_run_infos()

    def _add_run_infos(self) -> None:
        if not self.run_infos:
            return
        top = QTreeWidgetItem(self.tree, ["Run info of opened results files"])
        top.setData(0, Qt.ItemDataRole.UserRole, (RUN_INFO, None))
        for source, env in self.run_infos.items():
            child = QTreeWidgetItem(top, [source + ("" if env.app_version else " (an older file: none)")])
            child.setData(0, Qt.ItemDataRole.UserRole, (RUN_INFO, source))
            child.setToolTip(0, "Where and how this file's numbers were taken")
        top.setExpanded(True)

    def show_run_info(self, source: str) -> None:
        env = self.run_infos.get(source)
        if env is None:
            return
        rows = env.rows() or [("Run info", "this file has none (saved before results files carried it)")]
        self._fill(f"Run info: {source}", rows)

    def status_text(self, name: str) -> str:
        """The tree's text for backend ``name`` and the line below it (tests, a11y)."""
        for i in range(self.tree.topLevelItemCount()):
            top = self.tree.topLevelItem(i)
            if (top.data(0, Qt.ItemDataRole.UserRole) or (None,))[0] == name:
                below = [top.child(j).text(0) for j in range(top.childCount())]
                return "\n".join([top.text(0)] + below)
        return ""

    def show_device(self, info: DeviceInfo | None) -> None:
        """Fill the property table (``None``: nothing chosen)."""
        self.table.setRowCount(0)
        if info is None:
            self.title.setText("Device")
            return
        self._fill(info.name, device_rows(info))

    def show_backend(self, name: str) -> None:
        """A backend's status: why it is unavailable, or what it found."""
        st = self.statuses.get(name)
        if st is None:
            return
        rows = [("Status", "available" if st.available else "unavailable"),
                ("Devices", str(len(st.devices)))]
        if st.reason:
            rows.append(("Reason", st.reason))
        if st.versions:
            rows.append(("Versions", st.versions))
        self._fill(f"{name} backend", rows)

    def _fill(self, title: str, rows: list[tuple[str, str]]) -> None:
        self.title.setText(title)
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
        if backend == RUN_INFO:
            if index is not None:
                self.show_run_info(index)
        elif index is not None:
            self.show_device(self.device(backend, index))
        elif backend is not None:
            self.show_backend(backend)

    def _double_clicked(self, item, _col) -> None:
        backend, index = item.data(0, Qt.ItemDataRole.UserRole) or (None, None)
        if index is not None and backend != RUN_INFO:
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
