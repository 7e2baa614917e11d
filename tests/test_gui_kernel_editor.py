"""GUI: the kernel editor and the user's kernels in the window (OpenCL on PoCL, as in CI).

What a kernel author does: a kernel of their own appears in the variant tree under its
heading; they open it, break it, compile (Ctrl+B), click the error to jump to its
line, fix it, compile again (a resource row per combination), run it (Ctrl+R) next to
the best rung and see its curve; the header is checked as they type; a file edited in
another editor is reloaded, recompiled and rerun; unsaved work is never dropped
silently.
"""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QTextCursor  # noqa: E402

from engine.kernels import registry  # noqa: E402
from engine.kernels.new_kernel import make_copy  # noqa: E402
from engine.kernels.user_kernels import user_kernel_dir  # noqa: E402
from tests.helpers import require_backend  # noqa: E402

COMPILE_MS = 180_000
RUN_MS = 180_000


@pytest.fixture
def user_kernel(tmp_path):
    """A copy of tiled_any's OpenCL kernel in the user kernel folder."""
    require_backend("opencl")
    return make_copy("tiled_any", user_kernel_dir() / "my_tiled.cl")


def _window(make_window, configure):
    return configure(make_window(), "opencl", ("naive",), "33,47",
                     params={("naive", "block"): [16]})


def _line_of(editor, needle: str) -> int:
    return next(i for i, t in enumerate(editor.text().split("\n"), 1) if needle in t)


def _type_at_end_of_line(editor, line: int, text: str) -> None:
    """Type ``text`` at the end of ``line`` (1-based) as a user would (undoable)."""
    doc = editor.editor.document()
    cursor = QTextCursor(doc.findBlockByNumber(line - 1))
    cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock)
    editor.editor.setTextCursor(cursor)
    editor.editor.insertPlainText(text)


def _compile(qtbot, ed):
    with qtbot.waitSignal(ed.compiled, timeout=COMPILE_MS) as done:
        ed.compile_action.trigger()
    return done.args[0]


@pytest.mark.slow
def test_user_kernels_appear_under_their_heading_and_bad_files_say_why(qtbot, make_window, configure,
                                                                        user_kernel):
    bad = user_kernel.parent / "broken.cl"
    bad.write_text("/*\n+++\nname = \"broken\"\ngird = 1\n+++\n*/\n")
    win = _window(make_window, configure)
    tree = win.config.variants
    assert "User kernels" in tree.headings()
    assert "my_tiled" in tree.variant_names()
    names = tree.variant_names()
    assert names.index("my_tiled") > names.index("wpt")        # after the built-ins
    rows = dict(tree.problem_rows())
    assert str(bad) in rows and "line 4" in rows[str(bad)] and "gird" in rows[str(bad)]
    assert any("broken.cl:4" in line for line in win.log.plain_text().split("\n"))
    # A file added to the folder while the window is open appears (the folder is watched).
    make_copy("wpt", user_kernel.parent / "my_wpt.cl")
    qtbot.waitUntil(lambda: "my_wpt" in tree.variant_names(), timeout=10_000)
    # A folder added in the window: its kernels join, and the folder is remembered.
    other = user_kernel.parent.parent / "elsewhere"
    make_copy("naive", other / "my_naive.cl")
    win.add_kernel_folder(other)
    assert "my_naive" in tree.variant_names()
    assert str(other.resolve()) in win.settings.kernel_folders()


@pytest.mark.slow
def test_edit_compile_jump_fix_run_and_see_the_curve(qtbot, make_window, configure, user_kernel):
    win = _window(make_window, configure)
    assert win.open_kernel(user_kernel)
    ed = win.kernel_editor
    assert win.editor_dock.isVisible()
    assert ed.problems() == []

    # Break a line of the kernel body: a missing semicolon.
    broken = _line_of(ed, "const int tx = get_local_id(0);")
    _type_at_end_of_line(ed, broken, " oops")
    assert ed.modified
    report = _compile(qtbot, ed)
    assert not report.ok
    errors = [p for p in ed.problems() if p.severity == "error" and p.line]
    assert errors and errors[0].line in (broken, broken + 1), [(p.line, p.message) for p in errors]
    assert errors[0].combos == "all"                       # one error, every combination
    assert errors[0].line in ed.editor.marked_lines()
    assert "Compile failed" in ed.status.text()

    # Click the error: the cursor goes to its line.
    row = next(i for i in range(ed.problems_view.topLevelItemCount())
               if ed.problems_view.topLevelItem(i).text(0).startswith(f"line {errors[0].line}"))
    item = ed.problems_view.topLevelItem(row)
    rect = ed.problems_view.visualItemRect(item)
    ed.editor.go_to(1)
    qtbot.mouseClick(ed.problems_view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert ed.editor.textCursor().blockNumber() + 1 == errors[0].line

    # Fix it (undo the typing), compile again: a resource row per parameter combination.
    while ed.modified and ed.editor.document().isUndoAvailable():
        ed.editor.undo()
    assert "oops" not in ed.text()
    report = _compile(qtbot, ed)
    assert report.ok, report.text()
    v = registry.get("my_tiled")
    assert ed.resources.rowCount() == len(v.combos())
    headers = [ed.resources.horizontalHeaderItem(c).text() for c in range(ed.resources.columnCount())]
    assert "max work-group" in headers
    col = headers.index("max work-group")
    assert all(int(ed.resources.item(r, col).text()) > 0 for r in range(ed.resources.rowCount()))
    assert not [p for p in ed.problems() if p.severity == "error"]

    # Run: the kernel and its default baseline (the lab's own OpenCL GEMM) join the charts.
    assert ed.default_baselines() == ["lab_opencl"]
    with qtbot.waitSignal(win.controller.finished, timeout=RUN_MS) as done:
        ed.run_action.trigger()
    assert not done.args[0].cancelled
    recs = win.store.records
    mine = [r for r in recs if r.variant == "my_tiled"]
    assert mine and all(r.status == "ok" and r.passed for r in mine)
    assert {r.m for r in mine} == {33, 47}
    assert any(r.variant == "lab_opencl" for r in recs)
    curves = win.charts.curves("gflops")
    assert any(label.startswith("my_tiled") for label in curves), list(curves)
    assert any(label.startswith("lab_opencl") for label in curves), list(curves)
    assert "my_tiled at 47×47×47" in ed.status.text() and "of lab_opencl" in ed.status.text()


def test_a_kernel_with_wrong_results_is_caught_and_the_app_goes_on(qtbot, make_window, configure,
                                                                   user_kernel):
    win = _window(make_window, configure)
    win.open_kernel(user_kernel)
    ed = win.kernel_editor
    line = _line_of(ed, "C[row * N + col] = (ELEM)acc;")
    cursor = QTextCursor(ed.editor.document().findBlockByNumber(line - 1))
    cursor.select(QTextCursor.SelectionType.LineUnderCursor)
    cursor.insertText("        C[row * N + col] = (ELEM)(acc * 1.001f);")   # 0.1 % off
    with qtbot.waitSignal(win.controller.finished, timeout=RUN_MS):
        assert ed.run()                                  # saves first
    mine = [r for r in win.store.records if r.variant == "my_tiled"]
    assert mine and all(r.status == "failed" and r.passed is False for r in mine)
    assert "did not pass" in ed.status.text() and "wrong result" in ed.status.text()
    assert any(r.variant == "lab_opencl" and r.passed for r in win.store.records)   # kept
    assert win.run_bar.run_button.isEnabled()


@pytest.mark.slow
def test_the_header_is_checked_as_you_type(qtbot, make_window, configure, user_kernel):
    win = _window(make_window, configure)
    win.open_kernel(user_kernel)
    ed = win.kernel_editor
    line = _line_of(ed, "[launch]")
    _type_at_end_of_line(ed, line, "\ncolour = 3")
    qtbot.waitUntil(lambda: any(p.source == "header" for p in ed.problems()), timeout=5_000)
    p = next(p for p in ed.problems() if p.source == "header")
    assert p.line == line + 1 and "colour" in p.message and p.severity == "error"
    assert line + 1 in ed.editor.marked_lines()
    ed.editor.undo()
    qtbot.waitUntil(lambda: not ed.problems(), timeout=5_000)
    # A built-in's name is refused before anything is saved or run.
    name_line = _line_of(ed, 'name = "my_tiled"')
    cursor = QTextCursor(ed.editor.document().findBlockByNumber(name_line - 1))
    cursor.select(QTextCursor.SelectionType.LineUnderCursor)
    cursor.insertText('name = "wpt"')
    qtbot.waitUntil(lambda: any("taken by a built-in" in p.message for p in ed.problems()),
                    timeout=5_000)
    assert ed.run() is False                             # nothing saved, nothing run
    assert user_kernel.read_text().count('name = "my_tiled"') == 1


def test_a_new_kernel_from_a_template_is_saved_into_the_user_folder(qtbot, make_window, configure):
    require_backend("opencl")
    win = _window(make_window, configure)
    ed = win.kernel_editor
    ed.new_from_template("wpt", "fresh_wpt", ".cl")
    assert ed.modified and ed.path is None
    assert 'name = "fresh_wpt"' in ed.text() and 'role = "user"' in ed.text()
    assert ed.save()
    assert ed.path == (user_kernel_dir() / "fresh_wpt.cl").resolve()
    assert "fresh_wpt" in win.config.variants.variant_names()
    assert registry.get("fresh_wpt").role == "user"


@pytest.mark.slow
def test_a_file_changed_on_disk_is_reloaded_recompiled_and_rerun(qtbot, make_window, configure,
                                                                 user_kernel):
    win = _window(make_window, configure)
    win.open_kernel(user_kernel)
    ed = win.kernel_editor
    ed.set_baselines([])
    with qtbot.waitSignal(win.controller.finished, timeout=RUN_MS):
        assert ed.run()
    first = len([r for r in win.store.records if r.variant == "my_tiled"])
    assert first
    # Another editor saves a change: a comment line.
    text = user_kernel.read_text()
    with qtbot.waitSignal(ed.compiled, timeout=COMPILE_MS):
        user_kernel.write_text(text.replace("const int tx", "/* tuned elsewhere */ const int tx", 1))
    assert "tuned elsewhere" in ed.text() and not ed.modified
    with qtbot.waitSignal(win.controller.finished, timeout=RUN_MS):
        pass
    assert any(r.variant == "my_tiled" for r in win.store.records)
    log = win.log.plain_text()
    assert "reloaded from disk" in log
    assert log.count("run: ") == 2, log                 # the comparison ran again


def test_unsaved_changes_are_asked_about_on_close(qtbot, make_window, configure, user_kernel,
                                                   questions):
    win = _window(make_window, configure)
    win.open_kernel(user_kernel)
    win.kernel_editor.editor.insertPlainText("// an edit\n")
    questions.answer = "Cancel"
    win.close()
    assert win.isVisible() and questions.asked and questions.asked[-1][0] == "Unsaved kernel"
    questions.answer = "Save"
    win.close()
    qtbot.waitUntil(lambda: not win.isVisible(), timeout=10_000)
    assert user_kernel.read_text().startswith("// an edit") or "// an edit" in user_kernel.read_text()


def test_a_builtin_opened_in_the_editor_stays_a_builtin(qtbot, make_window, configure):
    require_backend("opencl")
    from engine.kernels.registry import ROOT
    win = _window(make_window, configure)
    assert win.open_kernel(ROOT / "opencl" / "03_tiled_any.cl")
    ed = win.kernel_editor
    assert registry.get("tiled_any").role == "seed"
    assert [p.severity for p in ed.problems()] == ["note"]      # no error for its own name
    assert "tiled_any" not in [n for n, v in registry.REGISTRY.items() if v.role == "user"]
    with qtbot.waitSignal(win.controller.finished, timeout=RUN_MS):
        assert ed.run()                                          # runs the built-in itself
    assert any(r.variant == "tiled_any" and r.passed for r in win.store.records)


def test_compile_builds_a_kernel_in_a_type_it_takes(make_window, configure):
    """Ctrl+B on a 16-bit or FP8 file while float32 is chosen builds it in the file's first
    type (not refused as 'does not support float32'); in the window's type where the file
    takes it."""
    from engine.kernels.registry import ROOT
    win = _window(make_window, configure)
    ed = win.kernel_editor if win.open_kernel(ROOT / "cuda" / "ladder" / "30_half_wmma.cu") else None
    assert ed is not None
    assert ed.compile_dtype("float32") == "float16"
    assert ed.compile_dtype("bfloat16") == "bfloat16"
    assert win.open_kernel(ROOT / "cuda" / "ladder" / "33_fp8_wgmma.cu")
    assert win.kernel_editor.compile_dtype("float32") == "float8_e4m3"
    assert win.open_kernel(ROOT / "cuda" / "ladder" / "02_tiled.cu")
    assert win.kernel_editor.compile_dtype("int32") == "int32"
    assert win.kernel_editor.compile_dtype("float32") == "float32"
