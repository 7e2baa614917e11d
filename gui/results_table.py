"""The results table: one row per record, sortable, red where verification failed,
copyable as TSV (Ctrl+C, or the context menu)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QSortFilterProxyModel, Qt, QTimer
from PySide6.QtGui import QAction, QColor, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QApplication, QHeaderView, QMenu, QTableView

from engine.results.compare import Pair
from engine.results.derived import lab_best
from engine.results.records import RecordStatus, ResultRecord
from engine.kernels.registry import params_to_str

from .chart_data import rate_text
from .results_store import ResultStore, source_name
from .theme import VERDICT_COLORS, failed_row_colors, is_dark

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
#: How long after new rows the "Lab best" column is brought up to date (one pass over the
#: records, not one per arriving row).
LAB_BEST_DELAY_MS = 250
_DISPLAY = Qt.ItemDataRole.DisplayRole
_ALIGN = Qt.ItemDataRole.TextAlignmentRole
_NUMBER_ALIGNMENT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


def _num(fmt: str) -> Callable[[Any], str]:
    def f(v):
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return ""
        return format(v, fmt)
    return f


def _rate(v) -> str:
    return rate_text(v) if isinstance(v, float) and math.isfinite(v) else ""


def _passed(r: ResultRecord) -> str:
    return {True: "pass", False: "FAIL", None: ""}[r.passed]


@dataclass(frozen=True)
class Column:
    title: str
    value: Callable[[ResultRecord], Any]
    text: Callable[[Any], str] = str
    numeric: bool = False
    tip: str = ""
    #: The value depends on the other rows too: ``value(record, model)``.
    of_all: bool = False


COLUMNS: list[Column] = [
    # What was run, then how it went, then the details: the first screenful answers
    # "which kernel, how fast, and is it right".
    Column("Source", source_name, tip="The run or results file the row came from"),
    Column("Variant", lambda r: r.variant),
    Column("Params", lambda r: params_to_str(r.params)),
    Column("M", lambda r: r.m, numeric=True),
    Column("N", lambda r: r.n, numeric=True),
    Column("K", lambda r: r.k, numeric=True),
    Column("Status", lambda r: r.status),
    Column("Median ms", lambda r: r.median_ms, _num(".4g"), True),
    # File ▸ Compare with… (gui.compare_flow): shown only while a comparison is on.
    Column("vs base", lambda r, model: model.compared(r).ratio, _num(".3f"), True,
           "Median time over the compared file's (NEW/BASE): below 1 is faster", of_all=True),
    Column("Verdict", lambda r, model: model.verdict_text(r), of_all=True,
           tip="FASTER or SLOWER only beyond both the threshold and the two records' combined "
               "noise, else SAME (the rule of 'main.py compare')"),
    Column("GFLOP/s", lambda r: r.gflops, _rate, True),
    Column("GB/s", lambda r: r.gbps, _rate, True),
    Column("× naive", lambda r: r.speedup_vs_naive, _num(".2f"), True, "Speed-up over the naive kernel"),
    Column("Verified", _passed),
    Column("Rel-L2", lambda r: r.rel_l2, _num(".2e"), True, "Relative L2 error against the reference"),
    Column("Max abs", lambda r: r.max_abs, _num(".2e"), True, "Largest absolute error"),
    Column("Min ms", lambda r: r.min_ms, _num(".4g"), True),
    Column("Max ms", lambda r: r.max_ms, _num(".4g"), True),
    Column("Runs", lambda r: r.repeats, numeric=True, tip="Timed launches"),
    Column("% peak", lambda r: r.pct_of_peak, _num(".1f"), True,
           "Share of the device's peak for the row's arithmetic (FP32 SIMT, int32, or the tensor "
           "cores of TF32, FP16/BF16, FP8 or int8)"),
    Column("% cuBLAS", lambda r: r.pct_of_cublas, _num(".1f"), True,
           "Speed relative to the best cuBLAS run of the same shape"),
    # NVML's conditions of the timed loop (cuda with nvidia-ml-py; empty elsewhere)
    Column("Throttled", lambda r: ("▲ " + ", ".join(r.throttle)) if r.throttled else "",
           tip="▲: timed under a power or thermal cap (NVML's clock-event reasons); the record "
               "is kept and flagged: its clocks were held down, compare it with care"),
    Column("SM MHz", lambda r: r.sm_clock_median_mhz, _num(".0f"), True,
           "Median SM clock over the timed launches (NVML, sampled every 10 ms)"),
    Column("W", lambda r: r.power_w, _num(".0f"), True,
           "Mean board power over the timed launches (NVML's energy counter)"),
    Column("GFLOP/s/W", lambda r: r.gflops_per_watt, _rate, True,
           "GFLOP per joule: the work of one launch over its energy (loops of 0.25 s or more)"),
    Column("Lab best", lambda r, model: model.lab_best_mark(r), of_all=True,
           tip="★: the fastest verified kernel of the lab at this shape and precision (what "
               "dispatching by shape, as cuBLAS does, would run), beside cuBLAS"),
    Column("Ran", lambda r: r.dispatched_to,
           tip="A dispatch line's row (the lab's own GEMM): the kernel and parameters its table picked here"),
    Column("dtype", lambda r: r.dtype),
    Column("Mode", lambda r: r.mode),
    Column("Backend", lambda r: r.backend),
    Column("Device", lambda r: r.device_label(), tip="The device's model and its index on its host"),
    Column("Host", lambda r: r.host, tip="The machine the row ran on"),
    Column("Error / note", lambda r: r.error),
]


SOURCE_COLUMN = [c.title for c in COLUMNS].index("Source")
HOST_COLUMN = [c.title for c in COLUMNS].index("Host")
COMPARE_COLUMNS = tuple([c.title for c in COLUMNS].index(t) for t in ("vs base", "Verdict"))
#: What a row without a comparison shows (no pair: NaN ratio, no verdict).
_NO_PAIR = SimpleNamespace(ratio=math.nan, verdict=None)


class ResultsModel(QAbstractTableModel):
    """A table view of a :class:`ResultStore` (no copy of the records)."""

    def __init__(self, store: ResultStore, parent=None):
        super().__init__(parent)
        self.store = store
        #: Each row's cell texts, formatted once (a repaint asks for every visible cell
        #: several times; formatting them each time was most of the table's paint).
        self._texts: dict[int, list[str]] = {}
        #: id(record) → "★ FP32" / "★ TF32" for the lab best rows; None: to work out again
        self._lab: dict[int, str] | None = None
        # Rows arrive one by one in a sweep: the lab best is worked out again once they pause.
        self._lab_timer = QTimer(self)
        self._lab_timer.setSingleShot(True)
        self._lab_timer.setInterval(LAB_BEST_DELAY_MS)
        self._lab_timer.timeout.connect(self._lab_changed)
        #: id(record) → its pair against a compared file; None: no comparison on.
        self.comparison: dict[int, Pair] | None = None
        store.rows_appended.connect(self._appended)
        store.reset.connect(self._reset)
        store.values_changed.connect(self._values_changed)

    def _appended(self, first: int, count: int) -> None:
        # The store already holds the rows; announce them after the fact.
        self.beginInsertRows(QModelIndex(), first, first + count - 1)
        self.endInsertRows()
        if self._lab is not None and not self._lab_timer.isActive():
            self._lab_timer.start()

    def _reset(self) -> None:
        self.beginResetModel()
        self._texts.clear()
        self._lab = None
        self.endResetModel()

    def _lab_changed(self) -> None:
        """A new row may take the lab best from another: the column is worked out again."""
        before = self._lab
        self._lab = None
        if before is not None and before != self.lab_marks() and self.rowCount():
            col = next(i for i, c in enumerate(COLUMNS) if c.title == "Lab best")
            for row in range(self.rowCount()):
                self._texts.pop(row, None)
            self.dataChanged.emit(self.index(0, col), self.index(self.rowCount() - 1, col))

    def lab_marks(self) -> dict[int, str]:
        if self._lab is None:
            marks: dict[int, list[str]] = {}
            for key, r in lab_best(self.store.records).items():
                marks.setdefault(id(r), []).append(key[-1].upper())
            self._lab = {i: "★ " + ", ".join(sorted(ps)) for i, ps in marks.items()}
        return self._lab

    def lab_best_mark(self, rec: ResultRecord) -> str:
        return self.lab_marks().get(id(rec), "")

    def compared(self, rec: ResultRecord):
        return (self.comparison or {}).get(id(rec), _NO_PAIR)

    def verdict_text(self, rec: ResultRecord) -> str:
        if self.comparison is None:
            return ""
        pair = self.comparison.get(id(rec))
        return pair.verdict.name if pair is not None else "not in base"

    def set_comparison(self, pairs: dict[int, Pair] | None) -> None:
        """Pairs against a compared file by id(record), or None (no comparison)."""
        self.comparison = pairs
        self._values_changed()

    def _values_changed(self) -> None:
        self._texts.clear()
        self._lab = None
        if self.rowCount():
            self.dataChanged.emit(self.index(0, 0), self.index(self.rowCount() - 1, len(COLUMNS) - 1))

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 (Qt API)
        return 0 if parent.isValid() else len(self.store)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(COLUMNS)

    def record(self, row: int) -> ResultRecord:
        return self.store.records[row]

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(COLUMNS):
            col = COLUMNS[section]
            if role == Qt.ItemDataRole.DisplayRole:
                return col.title
            if role == Qt.ItemDataRole.ToolTipRole and col.tip:
                return col.tip
        return super().headerData(section, orientation, role)

    def data(self, index: QModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row = index.row()
        rec = self.store.records[row]
        if role == _DISPLAY:
            texts = self._texts.get(row)
            if texts is None:
                texts = self._texts[row] = [c.text(c.value(rec, self) if c.of_all else c.value(rec))
                                            for c in COLUMNS]
            return texts[index.column()]
        col = COLUMNS[index.column()]
        if role == _ALIGN:
            return _NUMBER_ALIGNMENT if col.numeric else None
        if role == SORT_ROLE:
            v = col.value(rec, self) if col.of_all else col.value(rec)
            if col.numeric:
                v = float(v) if v is not None else math.inf
                return math.inf if not math.isfinite(v) else v  # blanks sort last (ascending)
            return str(v)
        if (role == Qt.ItemDataRole.ForegroundRole and col.title == "Verdict"
                and self.compared(rec).verdict in VERDICT_COLORS):
            return QColor(VERDICT_COLORS[self.compared(rec).verdict])
        if role == Qt.ItemDataRole.BackgroundRole and rec.status == RecordStatus.FAILED:
            return failed_row_colors()[0]
        if role == Qt.ItemDataRole.ForegroundRole:
            if rec.status == RecordStatus.FAILED:
                return failed_row_colors()[1]
            if rec.status == RecordStatus.ERROR:
                return QColor("#ff8a65" if is_dark() else "#b23c00")
            if rec.status == RecordStatus.SKIPPED:
                return QColor("#8c8f94")
        if role == Qt.ItemDataRole.ToolTipRole and rec.error:
            return rec.error
        return None


class ResultsTable(QTableView):
    """Sortable view of the results with TSV copy."""

    def __init__(self, store: ResultStore, parent=None):
        super().__init__(parent)
        self.model_ = ResultsModel(store, self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model_)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setDynamicSortFilter(True)
        self.setModel(self.proxy)
        self.setSortingEnabled(True)
        self.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # arrival order until a header is clicked
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setAlternatingRowColors(True)
        self.setWordWrap(False)
        self.setShowGrid(False)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        header.setHighlightSections(False)
        self._size_columns()
        self.copy_action = QAction("Copy as TSV", self)
        self.copy_action.setShortcut(QKeySequence.StandardKey.Copy)
        self.copy_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.copy_action.triggered.connect(self.copy_selection)
        self.addAction(self.copy_action)
        self.copy_all_action = QAction("Copy all rows as TSV", self)
        self.copy_all_action.triggered.connect(lambda: self.copy_tsv(all_rows=True))
        self.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.customContextMenuRequested.connect(self._menu)
        self.model_.rowsInserted.connect(self._rows_inserted)
        store.changed.connect(self._sources_changed)
        self._sources_changed()

    def _size_columns(self) -> None:
        fm = self.fontMetrics()
        for i, col in enumerate(COLUMNS):
            sample = {"Variant": "aat_coalesced", "Params": "ts=32,wpt=4", "Source": "this session",
                      "Device": "a device name of some length #0", "Host": "a host name",
                      "Status": "unverified", "Ran": "ffma_wide[bm=256,bk=16,tailk=8]",
                      "Median ms": "0.0000", "Verdict": "not in base", "GFLOP/s": "10,000.0", "GB/s": "0.00000", "Rel-L2": "0.00e-00",
                      "Max abs": "0.00e-00"}.get(col.title, "")
            width = max(fm.horizontalAdvance(col.title), fm.horizontalAdvance(sample)) + 18
            self.setColumnWidth(i, max(width, 40))

    def _sources_changed(self) -> None:
        # The Source and Host columns only earn their width once there is something to
        # tell apart.
        recs = self.model_.store.records
        self.setColumnHidden(SOURCE_COLUMN, len(self.model_.store.sources()) <= 1)
        self.setColumnHidden(HOST_COLUMN, len({r.host for r in recs}) <= 1)
        for col in COMPARE_COLUMNS:
            self.setColumnHidden(col, self.model_.comparison is None)

    def set_comparison(self, pairs: dict[int, Pair] | None) -> None:
        """Show each row's ratio and verdict against a compared file (None: hide them)."""
        self.model_.set_comparison(pairs)
        self._sources_changed()

    def _rows_inserted(self, *_):
        # Follow a live run unless the user scrolled away from the bottom.
        bar = self.verticalScrollBar()
        if bar.value() >= bar.maximum() - 2 * self.verticalHeader().defaultSectionSize():
            self.scrollToBottom()

    def _menu(self, pos) -> None:
        menu = QMenu(self)
        menu.addAction(self.copy_action)
        menu.addAction(self.copy_all_action)
        menu.exec(self.viewport().mapToGlobal(pos))

    def copy_selection(self) -> None:
        self.copy_tsv(all_rows=not self.selectionModel().hasSelection())

    def tsv(self, all_rows: bool = True) -> str:
        """Header plus rows in the on-screen order, tab-separated."""
        header = self.horizontalHeader()
        cols = [header.logicalIndex(v) for v in range(header.count())
                if not header.isSectionHidden(header.logicalIndex(v))]
        if all_rows:
            rows = range(self.proxy.rowCount())
        else:
            rows = sorted({i.row() for i in self.selectionModel().selectedIndexes()})
        lines = ["\t".join(COLUMNS[c].title for c in cols)]
        for r in rows:
            cells = [str(self.proxy.index(r, c).data() or "") for c in cols]
            lines.append("\t".join(c.replace("\t", " ").replace("\n", " ") for c in cells))
        return "\n".join(lines) + "\n"

    def copy_tsv(self, all_rows: bool = True) -> str:
        text = self.tsv(all_rows)
        QApplication.clipboard().setText(text)
        return text
