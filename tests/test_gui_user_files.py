"""GUI: files the user hands the window (matrices, results, command-line arguments) are
read only when they are regular files, off the GUI thread; none can hang or stop it."""
import os
import threading
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from engine.results import records  # noqa: E402
from engine.results.records import ResultRecord  # noqa: E402

needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")


def _records(n: int) -> list[ResultRecord]:
    return [ResultRecord(backend="cpu", device="CPU", variant="cpu_numpy", params={}, m=32 * i,
                         n=32 * i, k=32 * i, dtype="float32", median_ms=0.05 * i, status="ok")
            for i in range(1, n + 1)]


def _good_results(tmp_path, name="good.json", n=3):
    path = tmp_path / name
    records.save(_records(n), path)
    return path


@needs_fifo
def test_a_named_pipe_as_results_file_is_refused_at_once(qtbot, make_window, tmp_path,
                                                          error_dialogs):
    pipe = tmp_path / "results.json"
    os.mkfifo(pipe)
    win = make_window()
    t0 = time.perf_counter()
    assert not win.open_results_in_background(pipe)
    assert time.perf_counter() - t0 < 1.0
    assert error_dialogs and "named pipe" in error_dialogs[-1][1]
    assert not win.files.loading
    assert not win.open_results(pipe)                   # the waiting way says the same
    assert "named pipe" in error_dialogs[-1][1]
    # Later loads work.
    assert win.open_results_in_background(_good_results(tmp_path))
    qtbot.waitUntil(lambda: len(win.store) == 3, timeout=10_000)


@needs_fifo
def test_a_named_pipe_as_matrix_is_refused_at_once(qtbot, make_window, tmp_path, error_dialogs):
    pipe = tmp_path / "a.npy"
    os.mkfifo(pipe)
    np.save(tmp_path / "b.npy", np.ones((4, 4), dtype=np.float32))
    win = make_window()
    inputs = win.config.inputs
    inputs.set_files(pipe, tmp_path / "b.npy")
    # No "Loading…": refused before any thread is involved.
    assert inputs.status == "error"
    assert "named pipe" in inputs.error_text and "a.npy" in inputs.error_text
    assert error_dialogs and "named pipe" in error_dialogs[-1][1]
    assert win.run_bar.status.text().startswith("Fix the matrix files")
    inputs.set_files(tmp_path / "b.npy", pipe)           # as B too
    assert inputs.status == "error" and "B: a.npy is a named pipe" in inputs.error_text
    inputs.set_files(tmp_path / "b.npy", tmp_path / "b.npy")
    qtbot.waitUntil(lambda: inputs.status == "ready", timeout=15_000)
    assert inputs.shape() == (4, 4, 4)


def test_a_read_that_never_returns_holds_neither_later_loads_nor_the_exit(
        qtbot, make_window, tmp_path, monkeypatch, error_dialogs):
    """A file that passes the check but whose read hangs (a pipe swapped in after it, a
    hung network mount): later files load, and the window closes."""
    import gui.matrix_inputs
    import gui.results_files

    stuck = tmp_path / "stuck.json"
    stuck.write_text("[]")
    np.save(tmp_path / "stuck.npy", np.ones((2, 2), dtype=np.float32))
    np.save(tmp_path / "good.npy", np.ones((3, 3), dtype=np.float32))
    release = threading.Event()
    real_results, real_matrices = gui.results_files.read_results_file, gui.matrix_inputs.load_inputs

    def read_results_file(path):
        if path.name == "stuck.json":
            release.wait(60)
        return real_results(path)

    def load_inputs(a_path, b_path, dtype):
        if a_path.endswith("stuck.npy"):
            release.wait(60)
        return real_matrices(a_path, b_path, dtype)

    monkeypatch.setattr(gui.results_files, "read_results_file", read_results_file)
    monkeypatch.setattr(gui.matrix_inputs, "load_inputs", load_inputs)
    win = make_window()
    assert win.open_results_in_background(stuck)
    assert win.open_results_in_background(_good_results(tmp_path))
    qtbot.waitUntil(lambda: len(win.store) == 3, timeout=10_000)
    assert [p.name for p in win.files.loading.values()] == ["stuck.json"]
    inputs = win.config.inputs
    inputs.set_files(tmp_path / "stuck.npy", None)
    qtbot.wait(100)
    assert inputs.status == "loading"
    inputs.set_files(tmp_path / "good.npy", None)       # the next choice does not wait
    qtbot.waitUntil(lambda: inputs.status == "ready", timeout=10_000)
    assert inputs.shape() == (3, 3, 3)
    t0 = time.perf_counter()
    win.close()
    qtbot.waitUntil(lambda: not win.isVisible(), timeout=6_000)
    assert time.perf_counter() - t0 < 5.0
    release.set()                  # the thread ends on its own; nothing reaches the window
    qtbot.wait(100)
    assert error_dialogs == []


def test_some_bad_records_load_the_good_ones_and_the_log_says_which(qtbot, make_window, tmp_path,
                                                                    error_dialogs):
    rows = [records.to_dict(r) for r in _records(4)]
    rows[1]["m"] = 0
    rows[3]["dtype"] = "float128"
    rows.append("not a record")
    path = tmp_path / "mixed.json"
    import json
    path.write_text(json.dumps(rows))
    win = make_window()
    assert win.open_results_in_background(path)
    qtbot.waitUntil(lambda: len(win.store) == 2, timeout=10_000)
    log = win.log.plain_text()
    assert "mixed.json: skipped 3 records: record 2: field 'm' is 0, not a whole number" in log
    assert "record 4: field 'dtype' is 'float128'" in log and "record 5: not a record" in log
    assert "3 skipped" in win.statusBar().currentMessage()
    assert error_dialogs == []


def test_a_file_of_only_bad_records_gives_a_clear_dialog(qtbot, make_window, tmp_path,
                                                         error_dialogs):
    path = tmp_path / "bad.csv"
    path.write_text("backend,variant,params,m,n,k,dtype\ncpu,cpu_numpy,,-1,2,3,float32\n"
                    "cpu,cpu_numpy,,1,2,3,complex\n")
    win = make_window()
    assert win.open_results_in_background(path)
    qtbot.waitUntil(lambda: bool(error_dialogs), timeout=10_000)
    title, text = error_dialogs[-1]
    assert title == "Cannot open results"
    assert "bad.csv" in text and "no valid record" in text and "field 'm' is '-1'" in text
    assert len(win.store) == 0 and not win.files.loading


@needs_fifo
def test_a_recent_file_that_became_a_pipe_says_so(qtbot, make_window, tmp_path, error_dialogs):
    path = _good_results(tmp_path, "was_good.json")
    win = make_window()
    assert win.open_results(path)
    win.clear_results()
    path.unlink()
    os.mkfifo(path)
    recent = [a for a in win.recent_menu.actions() if a.text() == "was_good.json"]
    recent[0].trigger()
    assert "named pipe" in error_dialogs[-1][1]
    assert str(path) in win.settings.recent_files()       # still there: it exists
    path.unlink()
    recent = [a for a in win.recent_menu.actions() if a.text() == "was_good.json"]
    recent[0].trigger()
    assert "no longer exists" in error_dialogs[-1][1]
    assert str(path) not in win.settings.recent_files()


def test_bad_files_on_the_command_line_start_the_app_and_show_each_error(
        qtbot, tmp_path, error_dialogs, questions):
    """``python main.py FILE...`` with a corrupt file, a pipe, a folder and a missing file
    next to a good one: the app starts, says what is wrong with each, shows the good one,
    and exits 0 when closed."""
    import main as entry
    from gui.app import MainWindow

    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('[{"backend": "cpu", "m": ')
    folder = tmp_path / "folder.json"
    folder.mkdir()
    bad = [corrupt, folder, tmp_path / "missing.csv"]
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.json")
        bad.append(tmp_path / "pipe.json")
    good = _good_results(tmp_path)
    seen = {}

    def check_then_close():
        wins = [w for w in QApplication.topLevelWidgets()
                if isinstance(w, MainWindow) and w.isVisible()]
        win = wins[0] if wins else None
        if win is None or win.files.loading or len(win.store) < 3:
            if time.perf_counter() - seen.setdefault("t0", time.perf_counter()) < 20:
                QTimer.singleShot(20, check_then_close)
                return
        seen["win"] = win
        seen["store"] = len(win.store) if win is not None else None
        if win is not None:
            win.close()

    QTimer.singleShot(0, check_then_close)
    code = entry.main(["--settings", str(tmp_path / "app.ini"), *map(str, bad), str(good)])
    assert code == 0
    assert seen["store"] == 3
    texts = [text for title, text in error_dialogs if title == "Cannot open results"]
    assert len(texts) == len(bad)
    for path in bad:
        assert any(path.name in t for t in texts), (path.name, texts)
    joined = "\n".join(texts)
    assert "not a results file" in joined and "is a directory" in joined
    assert "was not found" in joined
    if hasattr(os, "mkfifo"):
        assert "named pipe" in joined
