"""GUI: the layout at 1280×800 holds whatever text the app is handed (long file names,
long errors): the Configure panel stays inside the window, nothing is clipped, and the
run bar's message ends with "…" and keeps the whole text in its tooltip.

Set ``MATMUL_LAB_SHOTS=FOLDER`` to keep the screenshots (the README's
``assets/layout_*.png`` come from here).
"""
import os
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
from PySide6.QtCore import QPoint  # noqa: E402
from PySide6.QtWidgets import (QAbstractButton, QComboBox, QLabel, QLineEdit,  # noqa: E402
                               QSpinBox, QWidget)

from gui.labels import ElidedLabel, WrapLabel  # noqa: E402

LONG = "measurements_from_the_cluster_run_of_" + "x" * 90


def _show_inputs(qtbot, win):
    """Scroll the Configure panel to its Inputs box, as a user would."""
    scroll = win.config_dock.widget()
    bar = scroll.verticalScrollBar()
    bar.setValue(bar.maximum())
    qtbot.wait(50)
    return scroll


def _assert_panel_inside(win):
    """The panel fits its scroll area beside the scroll bar, and every control shown is
    whole within the area's width."""
    scroll = win.config_dock.widget()
    viewport = scroll.viewport()
    bar = scroll.verticalScrollBar()
    assert win.width() <= 1280 and win.config_dock.width() < 600
    assert win.config.width() <= viewport.width()
    if bar.isVisible():
        # The bar sits right of the panel, not over it.
        assert viewport.mapTo(scroll, QPoint(viewport.width(), 0)).x() <= bar.mapTo(scroll, QPoint(0, 0)).x()
    kinds = (QAbstractButton, QLineEdit, QComboBox, QSpinBox, QLabel)
    for w in win.config.findChildren(QWidget):
        if isinstance(w, kinds) and w.isVisibleTo(win.config) and w.width() > 0:
            right = w.mapTo(viewport, QPoint(w.width(), 0)).x()
            assert right <= viewport.width(), (type(w).__name__, w.objectName(), right,
                                               viewport.width())


def test_files_mode_at_1280x800_keeps_the_configure_panel_whole(qtbot, make_window, tmp_path,
                                                                 shots, error_dialogs):
    folder = tmp_path / "matrices_of_the_weekly_regression_run"
    folder.mkdir()
    np.save(folder / f"A_{LONG}.npy", np.ones((300, 200), dtype=np.float32))
    np.save(folder / f"B_{LONG}.npy", np.ones((200, 120), dtype=np.float32))
    win = make_window()
    win.resize(1280, 800)
    inputs = win.config.inputs
    inputs.set_files(folder / f"A_{LONG}.npy", folder / f"B_{LONG}.npy")
    qtbot.waitUntil(lambda: inputs.status == "ready", timeout=15_000)
    _show_inputs(qtbot, win)
    _assert_panel_inside(win)
    assert "A 300×200" in inputs.shapes_label.text()
    win.grab().save(str(shots / "layout_files_mode.png"))
    assert error_dialogs == []


def test_a_long_error_wraps_in_the_panel_and_is_elided_in_the_run_bar(qtbot, make_window,
                                                                      tmp_path, shots,
                                                                      error_dialogs):
    win = make_window()
    win.resize(1280, 800)
    inputs = win.config.inputs
    # A folder that exists nowhere (the screenshot names no path of the test machine).
    missing = Path("/nonexistent/lab-data/results_of_last_week") / f"A_{LONG}.npy"
    inputs.set_files(missing, None)
    assert inputs.status == "error"
    qtbot.wait(50)
    _show_inputs(qtbot, win)
    _assert_panel_inside(win)
    # The whole message, unchanged, wrapped over several lines inside the panel.
    label = inputs.shapes_label
    assert label.text() == inputs.error_text and LONG in label.text()
    assert label.height() >= 3 * label.fontMetrics().height()
    # The run bar: one line ending in "…", the whole message in the tooltip, and the
    # file actions right of it still there.
    status = win.run_bar.status
    assert status.text().startswith("Fix the matrix files: A: A_measurements")
    assert status.is_elided() and status.shown_text().endswith("…")
    assert LONG in status.toolTip()
    assert status.geometry().right() <= win.run_bar.width()
    for act in (win.open_action, win.save_action, win.clear_action):
        button = win.run_toolbar.widgetForAction(act)
        assert button.isVisible() and button.geometry().right() <= win.run_toolbar.width()
    win.grab().save(str(shots / "layout_long_error.png"))
    assert len(error_dialogs) == 1


def test_a_long_sizes_error_does_not_widen_the_panel(qtbot, make_window):
    win = make_window()
    win.config.sizes.set_text("9" * 400)
    assert win.config.sizes.error()
    qtbot.wait(50)
    _assert_panel_inside(win)


def test_wrap_label_breaks_a_long_word_and_asks_for_little_width(qtbot):
    label = WrapLabel("short words then " + "y" * 300)
    qtbot.addWidget(label)
    one_line = label.fontMetrics().height()
    assert label.minimumSizeHint().width() < 200
    assert label.heightForWidth(200) > 4 * one_line       # the long word is broken up
    assert label.heightForWidth(4000) <= 2 * one_line
    label.setText("")
    assert label.heightForWidth(200) <= 2


def test_elided_label_keeps_its_text(qtbot):
    label = ElidedLabel("a" * 500)
    qtbot.addWidget(label)
    label.resize(100, 20)
    assert label.is_elided() and label.text() == "a" * 500 and label.toolTip() == "a" * 500
    label.setText("ok")
    assert not label.is_elided() and label.toolTip() == "ok"


def test_an_overlay_scroll_bar_does_not_cover_the_panel(qtbot):
    """Styles whose scroll bars overlap the view (overlay scroll bars): the viewport
    keeps the overlap free, so the bar never covers the panel's right edge."""
    from PySide6.QtWidgets import QProxyStyle, QStyle

    from gui.config_panel import ConfigPanel
    from gui.main_window import PanelScroll

    class OverlayBars(QProxyStyle):
        def pixelMetric(self, metric, option=None, widget=None):
            if metric == QStyle.PixelMetric.PM_ScrollView_ScrollBarOverlap:
                return 14
            return super().pixelMetric(metric, option, widget)

    panel = ConfigPanel()
    scroll = PanelScroll(panel)
    qtbot.addWidget(scroll)
    style = OverlayBars("Fusion")
    scroll.verticalScrollBar().setStyle(style)     # the bar's style decides the overlap
    scroll._fit()
    scroll.resize(450, 500)
    scroll.show()
    qtbot.waitExposed(scroll)
    bar = scroll.verticalScrollBar()
    assert bar.isVisible()
    right = panel.mapTo(scroll, QPoint(panel.width(), 0)).x()
    assert right <= bar.mapTo(scroll, QPoint(0, 0)).x()
    panel.shutdown()
