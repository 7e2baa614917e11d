"""GUI: verifying kernels on A and B loaded from files; bad files give a dialog."""
import math
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl  # noqa: E402
from PySide6.QtGui import QDropEvent  # noqa: E402

from gui.dialogs import show_error as REAL_SHOW_ERROR  # noqa: E402  (before any test patches it)


def wait_loaded(qtbot, win):
    qtbot.waitUntil(lambda: win.config.inputs.status in ("ready", "error"), timeout=15_000)
    return win.config.inputs.status


@pytest.fixture
def win(make_window, configure):
    return configure(make_window(), "opencl", ("naive", "tiled_any"), "32",
                     params={("naive", "block"): [16], ("tiled_any", "block"): [16, 8]})


def write_mtx(path, m):
    rows, cols = m.shape
    lines = ["%%MatrixMarket matrix array real general", f"{rows} {cols}"]
    lines += [repr(float(v)) for v in m.T.ravel()]  # array format is column-major
    path.write_text("\n".join(lines) + "\n")


def test_good_files_verify_every_selected_variant(qtbot, win, tmp_path, error_dialogs):
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (40, 24)).astype(np.float32)
    b = rng.uniform(-1, 1, (24, 33)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.savetxt(tmp_path / "b.csv", b, delimiter=",")
    inputs = win.config.inputs
    inputs.set_files(tmp_path / "a.npy", tmp_path / "b.csv")
    assert wait_loaded(qtbot, win) == "ready"
    assert "A 40×24 float32" in inputs.shapes_label.text() and "B 24×33" in inputs.shapes_label.text()
    assert not win.config.sizes.isEnabled()  # the files decide the shape
    assert not win.config.verify.isEnabled() and win.config.verify.isChecked()
    assert win.run_bar.status.text() == "Ready: 3 runs"

    with qtbot.waitSignal(win.controller.finished, timeout=60_000):
        qtbot.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    recs = win.store.records
    assert [(r.m, r.n, r.k) for r in recs] == [(40, 33, 24)] * 3
    assert {r.label() for r in recs} == {"naive[block=16]", "tiled_any[block=8]", "tiled_any[block=16]"}
    for r in recs:
        assert r.passed is True and r.status == "ok"
        assert math.isfinite(r.rel_l2) and r.rel_l2 < 1e-4 and math.isfinite(r.max_abs)
    headers = [win.table.model().headerData(c, Qt.Orientation.Horizontal)
               for c in range(win.table.model().columnCount())]
    verified = headers.index("Verified")
    assert {win.table.model().index(i, verified).data() for i in range(3)} == {"pass"}
    assert "3 passed" in inputs.verify_label.text()
    assert error_dialogs == []
    # Back to random inputs: the sizes return, and the user's verify choice with them.
    inputs.set_mode("random")
    assert win.config.sizes.isEnabled() and win.config.verify.isEnabled()


@pytest.mark.parametrize("kind", ["mtx", "npz", "txt", "a_only"])
def test_other_formats_load(qtbot, win, tmp_path, kind, error_dialogs):
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    b = np.arange(20, dtype=np.float32).reshape(4, 5) / 7
    inputs = win.config.inputs
    if kind == "mtx":
        write_mtx(tmp_path / "a.mtx", a)
        write_mtx(tmp_path / "b.mtx", b)
        inputs.set_files(tmp_path / "a.mtx", tmp_path / "b.mtx")
    elif kind == "npz":
        np.savez(tmp_path / "ab.npz", a=a, b=b)
        inputs.set_files(tmp_path / "ab.npz", None)
    elif kind == "txt":
        np.savetxt(tmp_path / "a.txt", a)
        np.savetxt(tmp_path / "b.txt", b)
        inputs.set_files(tmp_path / "a.txt", tmp_path / "b.txt")
    else:
        np.save(tmp_path / "a.npy", a)
        inputs.set_files(tmp_path / "a.npy", None)
    assert wait_loaded(qtbot, win) == "ready", inputs.error_text
    got_a, got_b = inputs.matrices()
    assert np.array_equal(got_a, a)
    if kind == "a_only":
        assert got_b is None and "B = Aᵀ" in inputs.shapes_label.text()
        assert inputs.shape() == (3, 3, 4)
    else:
        assert np.allclose(got_b, b)
        assert inputs.shape() == (3, 5, 4)
    assert error_dialogs == []


def test_bad_files_give_a_dialog_and_the_app_stays_usable(qtbot, win, tmp_path, error_dialogs):
    inputs = win.config.inputs
    good = np.ones((4, 4), dtype=np.float32)
    np.save(tmp_path / "good.npy", good)
    (tmp_path / "text.csv").write_text("1,2,3\n4,five,6\n")
    np.save(tmp_path / "b_wrong.npy", np.ones((6, 3), dtype=np.float32))
    np.save(tmp_path / "whole.npy", np.ones((50, 50), dtype=np.float32))
    data = (tmp_path / "whole.npy").read_bytes()
    (tmp_path / "truncated.npy").write_bytes(data[: len(data) // 2])

    cases = [
        (("text.csv", "good.npy"), ["text.csv", "five"]),
        (("good.npy", "b_wrong.npy"), ["A is 4×4", "B is 6×3"]),
        (("truncated.npy", "good.npy"), ["truncated.npy"]),
    ]
    for (fa, fb), words in cases:
        inputs.set_files(tmp_path / fa, tmp_path / fb)
        assert wait_loaded(qtbot, win) == "error"
        title, text = error_dialogs[-1]
        for w in words:
            assert w in text, (w, text)
        assert inputs.error_text == text and text in inputs.shapes_label.text()
        assert not win.run_bar.run_button.isEnabled()
        assert win.run_bar.status.text().startswith("Fix the matrix files")
    assert len(error_dialogs) == 3

    # Still usable: fix the files and run, or go back to random inputs and run.
    inputs.set_files(tmp_path / "good.npy", tmp_path / "good.npy")
    assert wait_loaded(qtbot, win) == "ready"
    assert win.run_bar.run_button.isEnabled()
    inputs.set_mode("random")
    with qtbot.waitSignal(win.controller.finished, timeout=60_000):
        assert win.start_run()
    assert len(win.store) == 3 and all(r.passed for r in win.store.records)


def test_an_error_dialog_is_a_real_non_blocking_message_box(qtbot, make_window, tmp_path, monkeypatch):
    """Without the capture fixture's patch: a QMessageBox opens and the loop goes on."""
    import gui.dialogs
    from PySide6.QtWidgets import QApplication, QMessageBox

    win = make_window()
    monkeypatch.setattr(gui.dialogs, "show_error", REAL_SHOW_ERROR)
    (tmp_path / "bad.csv").write_text("x\n")
    win.config.inputs.set_files(tmp_path / "bad.csv", None)
    qtbot.waitUntil(lambda: any(isinstance(w, QMessageBox) and w.isVisible()
                                for w in QApplication.topLevelWidgets()), timeout=15_000)
    box = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QMessageBox) and w.isVisible())
    assert "bad.csv" in box.text()
    qtbot.wait(50)  # the event loop runs while the box is open
    box.accept()


def test_drop_files_onto_the_inputs(qtbot, win, tmp_path, error_dialogs):
    a = np.ones((5, 7), dtype=np.float32)
    b = np.ones((7, 2), dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(tmp_path / "a.npy")), QUrl.fromLocalFile(str(tmp_path / "b.npy"))])
    inputs = win.config.inputs
    event = QDropEvent(QPointF(5, 5), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    inputs.dropEvent(event)
    assert inputs.mode == "files"
    assert wait_loaded(qtbot, win) == "ready"
    assert inputs.shape() == (5, 2, 7)
