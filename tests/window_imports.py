"""Run by test_gui_run.py in a fresh interpreter: start the window, then feed it GPU
records as a sweep would and draw every chart; print the modules imported meanwhile.

An import in the middle of a sweep runs in the GUI thread and holds the window (numpy
imports ``numpy.ma`` on a first ``np.median``: 60-90 ms on a GPU machine).
"""
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    os.environ["QT_QPA_PLATFORM"] = "offscreen"
    data = tempfile.mkdtemp(prefix="matmul-lab-imports-")
    os.environ["MATMUL_LAB_DATA"] = data
    from PySide6.QtWidgets import QApplication

    app = QApplication(["window_imports"])
    from gui.charts import CHARTS
    from gui.main_window import MainWindow
    from gui.results_files import read_results
    from gui.settings import ini_settings

    win = MainWindow(ini_settings(Path(data) / "settings.ini"))
    win.resize(1280, 800)
    win.show()
    end = time.monotonic() + 60
    while not (win.backends_ready() and win.ray_status is not None) and time.monotonic() < end:
        app.processEvents()
        time.sleep(0.01)
    records, _ = read_results(Path(sys.argv[1]))
    before = set(sys.modules)
    win.files.begin_run(False)
    for rec in records:
        rec.source = ""
        win.files.add_live(rec)
        for kind in CHARTS:
            win.charts.set_current(kind)
            app.processEvents()
    win.files.finish_run(None)
    app.processEvents()
    print("RECORDS", len(win.store.records))
    print("IMPORTED", " ".join(sorted(set(sys.modules) - before)))
    win.shutdown()
