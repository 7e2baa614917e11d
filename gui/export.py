"""Charts to PNG and SVG at a chosen size, through pyqtgraph's exporters.

An export draws the chart afresh into an off-screen view of exactly the requested
size (the on-screen one keeps its size and zoom), using the same ``render`` function
as the live tab, then hands it to ``ImageExporter`` or ``SVGExporter``.
"""
from __future__ import annotations

import dataclasses

import sys
from contextlib import contextmanager
from pathlib import Path

from pyqtgraph.exporters import ImageExporter, SVGExporter
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QApplication, QComboBox, QDialog, QDialogButtonBox, QFileDialog,
                               QFormLayout, QHBoxLayout, QLineEdit, QSpinBox, QToolButton, QWidget)

from .chart_render import ChartOptions, render
from .chart_view import ChartView
from .charts import CHARTS
from .chart_data import Series
from .theme import ChartTheme

FORMATS = {"png": "PNG image (*.png)", "svg": "SVG vector image (*.svg)"}
DEFAULT_SIZE = (1600, 1000)


@contextmanager
def _svg_closed_path_fix():
    """Let pyqtgraph's SVG exporter read closed paths.

    With Qt ≥ 6.10, QSvgGenerator ends closed paths with a ``Z`` command, which
    pyqtgraph 0.14's ``correctCoordinates`` tries to split as ``x,y`` and fails
    (pyqtgraph issue #3495).  While exporting, the ``Z`` tokens are taken out before
    that function runs and put back after; every coordinate is still transformed by
    pyqtgraph itself.
    """
    module = sys.modules[SVGExporter.__module__]
    original = module.correctCoordinates

    def correct_coordinates(node, defs, item, options):
        closed = []
        for path in node.getElementsByTagName("path"):
            tokens = path.getAttribute("d").split()
            if any(t in ("Z", "z") for t in tokens):
                path.setAttribute("d", " ".join(t for t in tokens if t not in ("Z", "z")))
                closed.append(path)
        try:
            return original(node, defs, item, options)
        finally:
            for path in closed:
                path.setAttribute("d", path.getAttribute("d").rstrip() + " Z")

    module.correctCoordinates = correct_coordinates
    try:
        yield
    finally:
        module.correctCoordinates = original


def export_chart(kind: str, series: list[Series], options: ChartOptions, path: str | Path,
                 width: int, height: int, theme: ChartTheme | None = None) -> Path:
    """Draw chart ``kind`` at ``width``×``height`` pixels and save it to ``path``.

    The format follows the suffix: ``.png`` (ImageExporter) or ``.svg`` (SVGExporter).

    Raises
    ------
    ValueError
        For another suffix or a non-positive size.
    OSError
        When the file cannot be written.
    """
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"charts are saved as .png or .svg, not '{path.suffix or path.name}'")
    if width < 1 or height < 1:
        raise ValueError(f"the size must be positive, not {width}×{height}")
    view = ChartView(kind)
    try:
        if theme is not None:
            view.apply_theme(theme)
        # Shown off screen so that Qt lays the plot out at exactly this size.
        view.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
        view.resize(width, height)
        view.show()
        render(view, kind, series, dataclasses.replace(options, for_export=True))
        QApplication.processEvents()
        item = view.getPlotItem()
        if fmt == "png":
            exporter = ImageExporter(item)
            exporter.parameters()["width"] = width
            exporter.parameters()["height"] = height
            ok = exporter.export(str(path))
            if ok is False:
                raise OSError(f"could not write {path}")
        else:
            exporter = SVGExporter(item)
            with _svg_closed_path_fix():
                exporter.export(fileName=str(path))
            _set_svg_size(path, width, height)
        if not path.is_file():
            raise OSError(f"could not write {path}")
        return path
    finally:
        view.close()
        view.deleteLater()


def _set_svg_size(path: Path, width: int, height: int) -> None:
    """Give the SVG an intrinsic size (pyqtgraph writes only a viewBox), so that
    browsers and editors open it at the chosen size instead of stretching it."""
    text = path.read_text(encoding="utf-8")
    head, sep, rest = text.partition("<svg ")
    if sep and ' width="' not in rest.split(">", 1)[0]:
        path.write_text(f'{head}<svg width="{width}px" height="{height}px" {rest}', encoding="utf-8")


def export_paths(base: str | Path, kinds: list[str]) -> dict[str, Path]:
    """File per chart: ``base`` itself for one chart, ``base-<chart>.ext`` for several."""
    base = Path(base)
    if len(kinds) == 1:
        return {kinds[0]: base}
    return {k: base.with_name(f"{base.stem}-{k}{base.suffix}") for k in kinds}


class ExportDialog(QDialog):
    """Which chart(s), which format, what size, where."""

    def __init__(self, current_kind: str, start_dir: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Export chart")
        self.chart = QComboBox()
        for kind, title in CHARTS.items():
            self.chart.addItem(title, kind)
        self.chart.addItem("All charts (one file each)", "all")
        self.chart.setCurrentIndex(list(CHARTS).index(current_kind))
        self.format = QComboBox()
        for key, text in FORMATS.items():
            self.format.addItem(text, key)
        self.width_spin = QSpinBox()
        self.height_spin = QSpinBox()
        for spin, val in ((self.width_spin, DEFAULT_SIZE[0]), (self.height_spin, DEFAULT_SIZE[1])):
            spin.setRange(64, 16384)
            spin.setValue(val)
            spin.setSuffix(" px")
        size = QHBoxLayout()
        size.addWidget(self.width_spin)
        size.addWidget(self.height_spin)
        self.path = QLineEdit(str(Path(start_dir or ".") / f"{current_kind}.png"))
        browse = QToolButton()
        browse.setText("…")
        browse.clicked.connect(self._browse)
        where = QHBoxLayout()
        where.addWidget(self.path, 1)
        where.addWidget(browse)
        form = QFormLayout(self)
        form.addRow("Chart", self.chart)
        form.addRow("Format", self.format)
        form.addRow("Size (w × h)", size)
        form.addRow("File", where)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.format.currentIndexChanged.connect(self._format_changed)
        self.chart.currentIndexChanged.connect(self._chart_changed)
        self.resize(520, self.sizeHint().height())

    def _fmt(self) -> str:
        return self.format.currentData()

    def _format_changed(self, *_):
        self.path.setText(str(Path(self.path.text()).with_suffix("." + self._fmt())))

    def _chart_changed(self, *_):
        kind = self.chart.currentData()
        p = Path(self.path.text())
        self.path.setText(str(p.with_name(("charts" if kind == "all" else kind) + p.suffix)))

    def _browse(self):
        path, _ = QFileDialog.getSaveFileName(self, "Export chart to", self.path.text(),
                                              FORMATS[self._fmt()])
        if path:
            if Path(path).suffix.lower() != "." + self._fmt():
                path += "." + self._fmt()
            self.path.setText(path)

    def choice(self) -> tuple[list[str], Path, int, int]:
        """(chart kinds, path, width, height) as chosen."""
        kind = self.chart.currentData()
        kinds = list(CHARTS) if kind == "all" else [kind]
        path = Path(self.path.text()).with_suffix("." + self._fmt())
        return kinds, path, self.width_spin.value(), self.height_spin.value()
