"""The application entry point: ``gui.app.main(argv)``.

``main.py`` calls :func:`main` with the arguments after the program name.  The
window itself is :class:`gui.main_window.MainWindow` (re-exported here).
"""
from __future__ import annotations

import argparse
import sys

from PySide6.QtWidgets import QApplication

from .main_window import MainWindow
from .settings import APPLICATION, ORGANIZATION, default_settings, ini_settings

__all__ = ["MainWindow", "main"]


def _parse_args(args: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="matmul-lab", description="GPU matrix-multiplication kernel lab")
    p.add_argument("files", nargs="*", help="results files (.json/.csv) to open")
    p.add_argument("--settings", metavar="FILE.ini",
                   help="keep settings in this ini file instead of the user's store")
    p.add_argument("--dark", action="store_true", help="start with the dark palette")
    return p.parse_args(args)


def main(argv: list[str] | None = None) -> int:
    """Run the app and return the event loop's exit code.

    ``argv`` are the command-line arguments *after* the program name (``main.py``
    passes ``sys.argv[1:]``): results files to open, ``--settings FILE.ini``,
    ``--dark``, and Qt's own options (``-platform``, ``-style``, ...).  An existing
    QApplication is reused.  Closing the window, also mid-run, returns 0.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    ours, qt_args = _split_qt_args(args)
    opts = _parse_args(ours)
    app = QApplication.instance()
    if app is None:
        QApplication.setOrganizationName(ORGANIZATION)
        QApplication.setApplicationName(APPLICATION)
        app = QApplication([sys.argv[0] if sys.argv and sys.argv[0] else "matmul-lab"] + qt_args)
    settings = ini_settings(opts.settings) if opts.settings else default_settings()
    window = MainWindow(settings)
    if opts.dark:
        window.dark_action.setChecked(True)
    window.show()
    for f in opts.files:
        # Read off the GUI thread; a file that cannot be read (missing, a folder, a pipe,
        # not a results file) gives a dialog in the running app, never a failed start.
        window.open_results_in_background(f)
    code = app.exec()
    window.shutdown()  # no-op after a normal close; covers app.quit() from elsewhere
    return int(code)


def _split_qt_args(args: list[str]) -> tuple[list[str], list[str]]:
    """Our options go to argparse; Qt's own (-platform, -style, ...) stay for Qt."""
    with_value = {"-platform", "-style", "-stylesheet", "-qwindowgeometry", "-qwindowtitle",
                  "-display", "-geometry", "-platformtheme", "-plugin"}
    ours, qt = [], []
    it = iter(args)
    for a in it:
        if a in with_value:
            qt.extend([a, next(it, "")])
        elif a in ("-reverse", "-widgetcount"):
            qt.append(a)
        else:
            ours.append(a)
    return ours, qt
