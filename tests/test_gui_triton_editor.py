"""GUI: Triton kernel files (``.py``) in the kernel editor and the variant tree (issue 40).

A Triton kernel opened in the editor is coloured as Python with its header as TOML, its
header is checked as you type, Ctrl+B imports it in a separate process and puts a syntax
error on its line, Run goes to the cuda backend or, without a CUDA device, to Triton's
interpreter on the cpu backend; the New kernel dialog offers the Triton built-ins; the
variant tree marks .py kernels unavailable, with the reason, where this Python cannot run
them (Triton missing; on CUDA, the torch its driver needs).

Set ``MATMUL_LAB_SHOTS=FOLDER`` to keep the editor's screenshot (``editor_triton.png``).
"""
import importlib.util
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QTextCharFormat, QTextCursor  # noqa: E402

from engine.kernels import registry  # noqa: E402
from engine.kernels.new_kernel import make_copy  # noqa: E402
from engine.kernels.user_kernels import user_kernel_dir  # noqa: E402
from gui.code_editor import KernelHighlighter  # noqa: E402
from gui.kernel_editor import EditorContext, KernelEditor, NewKernelDialog  # noqa: E402
from gui.kernel_folders import KernelFolders  # noqa: E402
from gui.settings import AppSettings  # noqa: E402
from gui.variant_tree import INFO_COL, UNAVAILABLE, VariantTree  # noqa: E402

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                  reason="Triton is not installed (requirements-triton.txt)")
COMPILE_MS = 120_000
BUILTIN = "triton_grouped_fp32"


def _without(monkeypatch, *modules: str) -> None:
    """This Python as if ``modules`` were not installed (find_spec says None)."""
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in modules else real(name, *a))


@pytest.fixture
def editor(qtbot, gui_settings):
    """A kernel editor on its own, with a context that says which backends can run."""
    backends = {"now": ("cpu", "opencl")}
    ed = KernelEditor(KernelFolders(AppSettings(gui_settings)),
                      lambda: EditorContext(backends=backends["now"]))
    ed.backends = backends
    qtbot.addWidget(ed)
    ed.resize(1000, 700)
    return ed


@pytest.fixture
def triton_file():
    """A copy of the FP32 Triton rung in the user kernel folder."""
    return make_copy(BUILTIN, user_kernel_dir() / "my_triton.py")


def _line_of(text: str, needle: str) -> int:
    return next(i for i, t in enumerate(text.split("\n"), 1) if needle in t)


def _colour_at(ed, line: int, column: int) -> str | None:
    """The highlighter's colour over 1-based ``line``, 0-based ``column`` (None: plain)."""
    block = ed.document().findBlockByNumber(line - 1)
    for r in block.layout().formats():
        if r.start <= column < r.start + r.length:
            return QTextCharFormat(r.format).foreground().color().name()
    return None


def _replace_line(ed, line: int, text: str) -> None:
    """Replace ``line`` (1-based) with ``text`` as a user would (undoable)."""
    cursor = QTextCursor(ed.editor.document().findBlockByNumber(line - 1))
    cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
    ed.editor.setTextCursor(cursor)
    ed.editor.insertPlainText(text)


def test_a_py_kernel_opens_as_python_with_its_header_as_toml(editor, triton_file):
    assert editor.open_file(triton_file)
    code = editor.editor
    assert code.language() == "python"
    assert editor.backend() == "cuda" and editor.is_triton()
    hl = code.highlighter
    colour = lambda name: hl.format_for(name).foreground().color().name()  # noqa: E731
    text = editor.text()
    d = _line_of(text, "def matmul(")
    assert _colour_at(code, d, 0) == colour("keyword")                     # def
    assert _colour_at(code, d, 4) == colour("function")                    # matmul
    imp = _line_of(text, "import triton")
    assert _colour_at(code, imp, 0) == colour("keyword")
    comment = _line_of(text, "# Grouped ordering")
    assert _colour_at(code, comment, text.split("\n")[comment - 1].index("#")) == colour("comment")
    name = _line_of(text, 'name = "my_triton"')
    assert _colour_at(code, name, 0) == colour("toml_key")
    assert _colour_at(code, _line_of(text, "[params]"), 1) == colour("toml_table")
    # The header's lines carry the header state; the code after the docstring is code.
    state = lambda line: code.document().findBlockByNumber(line - 1).userState()  # noqa: E731
    assert state(1) == KernelHighlighter.STATE_FIRST_COMMENT
    assert state(name) == KernelHighlighter.STATE_HEADER
    assert state(d) == KernelHighlighter.STATE_CODE
    # A keyword inside the header's TOML or the docstring is not a Python keyword.
    for_line = _line_of(text, "for k0 in range")
    assert _colour_at(code, for_line, text.split("\n")[for_line - 1].index("for")) == colour("keyword")
    assert editor.header_problems == [] and not code.marked_lines()


def test_a_header_error_is_marked_on_its_line_as_you_type(editor, triton_file, qtbot):
    editor.open_file(triton_file)
    line = _line_of(editor.text(), "block_k = [")
    _replace_line(editor, line, "block_k = [32, 16,")
    qtbot.waitUntil(lambda: bool(editor.header_problems), timeout=5000)
    errors = [p for p in editor.header_problems if p.severity == "error"]
    assert errors and errors[0].line is not None
    assert editor.editor.marked_lines().get(errors[0].line) == "error"
    # A Triton header takes no launch.block: said at its line.
    editor.editor.undo()
    editor.check_header()
    assert not editor.editor.marked_lines()
    grid = _line_of(editor.text(), "grid = [")
    _replace_line(editor, grid, editor.text().split("\n")[grid - 1] + '\nblock = ["128", "1"]')
    problems = editor.check_header()
    assert any("launch.block is not for Triton" in p.message for p in problems), problems
    assert all(p.line for p in problems if p.severity == "error")


@needs_triton
def test_ctrl_b_puts_a_syntax_error_on_its_line(editor, triton_file, qtbot):
    editor.open_file(triton_file)
    editor.show()
    line = _line_of(editor.text(), "pid = tl.program_id(0)")
    _replace_line(editor, line, "    pid = tl.program_id(0")
    editor.activateWindow()
    qtbot.waitUntil(editor.isActiveWindow)          # Ctrl+B is the editor's while focused
    editor.editor.setFocus()
    with qtbot.waitSignal(editor.compiled, timeout=COMPILE_MS) as done:
        qtbot.keyClick(editor.editor, Qt.Key.Key_B, Qt.KeyboardModifier.ControlModifier)
        assert editor.compiling()               # the key started the check
    report = done.args[0]
    assert not report.ok
    rows = [p for p in editor.compile_problems if p.severity == "error"]
    # Python names the line where the unclosed bracket opens; the problem is said once.
    assert [p.line for p in rows] == [line], rows
    assert "never closed" in rows[0].message
    assert editor.editor.marked_lines().get(line) == "error"
    assert "Check failed: 1 error" in editor.status.text()
    # Fixed, and the space narrowed to four combinations (compiling Triton's 216 takes
    # minutes on two cores): every combination compiled by Triton for sm_90, its
    # registers and shared memory in the Resources tab.
    _replace_line(editor, line, "    pid = tl.program_id(0)")
    for pname, values in (("block_m", "[64, 32]"), ("block_n", "[64]"), ("block_k", "[32]"),
                          ("group_m", "[8]"), ("num_warps", "[4, 8]"), ("num_stages", "[3]")):
        _replace_line(editor, _line_of(editor.text(), f"{pname} = ["), f"{pname} = {values}")
    with qtbot.waitSignal(editor.compiled, timeout=COMPILE_MS) as done:
        editor.compile_action.trigger()
    assert done.args[0].ok, done.args[0].text()
    assert not editor.editor.marked_lines()
    assert "Compiled 4 combination(s) with Triton" in editor.status.text()
    assert editor.resources.rowCount() == len(done.args[0].combos) == 4
    headers = [editor.resources.horizontalHeaderItem(c).text()
               for c in range(editor.resources.columnCount())]
    regs, smem = headers.index("registers"), headers.index("shared (launch)")
    for r in range(4):
        assert 0 < int(editor.resources.item(r, regs).text()) <= 255
        assert editor.resources.item(r, smem).text()


@needs_triton
def test_a_wrong_signature_is_marked_at_the_kernel(editor, triton_file, qtbot):
    editor.open_file(triton_file)
    line = _line_of(editor.text(), "GROUP_M: tl.constexpr):")
    _replace_line(editor, line, "           GROUP_M: tl.constexpr, EXTRA: tl.constexpr):")
    with qtbot.waitSignal(editor.compiled, timeout=COMPILE_MS):
        editor.compile_action.trigger()
    rows = [p for p in editor.compile_problems if p.severity == "error"]
    assert len(rows) == 1 and rows[0].line == _line_of(editor.text(), "def matmul(")
    assert "EXTRA" in rows[0].message


def test_run_goes_to_the_interpreter_without_a_cuda_device(editor, triton_file, monkeypatch):
    editor.open_file(triton_file)
    assert editor.run_backend() == "cpu"            # the context lists no cuda backend
    editor.backends["now"] = ("cuda", "cpu")
    assert editor.run_backend() == "cuda"
    editor.backends["now"] = ("cpu",)
    asked = []
    editor.run_requested.connect(asked.append)
    if importlib.util.find_spec("triton") is not None:
        assert editor.run()
        items = asked[-1]
        assert items[0][0] == "my_triton"
        assert "cpu_numpy" in [n for n, _ in items]          # the cpu backend's baseline
        assert all("cpu" in registry.get(n).sources for n, _ in items)
    # Without Triton, Run says why and asks for nothing.
    _without(monkeypatch, "triton")
    n = len(asked)
    assert not editor.run()
    assert len(asked) == n and "Triton is not installed" in editor.status.text()


def test_new_kernel_offers_the_triton_templates(editor, qtbot):
    dlg = NewKernelDialog("")
    qtbot.addWidget(dlg)
    labels = [dlg.template.itemText(i) for i in range(dlg.template.count())]
    assert any(t.startswith(f"{BUILTIN} (triton)") for t in labels), labels
    i = next(i for i, t in enumerate(labels) if t.startswith(f"{BUILTIN} (triton)"))
    dlg.template.setCurrentIndex(i)
    dlg.name.setText("mine_t")
    assert dlg.choice() == (BUILTIN, ".py", "mine_t")
    editor.new_from_template(BUILTIN, "mine_t", ".py")
    assert editor.display_path().suffix == ".py" and editor.editor.language() == "python"
    assert 'name = "mine_t"' in editor.text()
    assert not [p for p in editor.check_header() if p.severity == "error"]
    assert editor.save() and editor.path.name == "mine_t.py"
    assert "mine_t" in registry.REGISTRY and registry.get("mine_t").is_triton


def _row(tree: VariantTree, name: str):
    return next(it for it in tree._top_items() if it.data(0, Qt.ItemDataRole.UserRole) == name)


def test_the_tree_marks_py_kernels_unavailable_without_triton(qtbot, monkeypatch):
    tree = VariantTree()
    qtbot.addWidget(tree)
    _without(monkeypatch, "triton")
    tree.set_backend("cpu")
    mark = tree.mark(BUILTIN)
    assert mark.startswith(f"{UNAVAILABLE}: Triton is not installed"), mark
    row = _row(tree, BUILTIN)
    assert row.text(INFO_COL) == mark                  # in place of the technique
    assert "Triton is not installed" in row.toolTip(INFO_COL)
    assert row.foreground(INFO_COL).color().name() != tree.palette().text().color().name()
    assert tree.mark("cpu_numpy") == ""                 # the rest is unchanged
    # On CUDA the same, and without torch (Triton's CUDA driver needs it) even with Triton.
    tree.set_backend("cuda")
    assert tree.mark(BUILTIN).startswith(f"{UNAVAILABLE}: Triton is not installed")
    assert tree.mark("cublas_fp32") == ""
    monkeypatch.undo()
    if importlib.util.find_spec("triton") is None:
        return
    _without(monkeypatch, "torch")
    tree.set_backend("cuda")
    assert "needs torch" in tree.mark(BUILTIN)
    tree.set_backend("cpu")                             # the interpreter needs no torch
    assert tree.mark(BUILTIN) == ""
    assert _row(tree, BUILTIN).text(INFO_COL) == registry.get(BUILTIN).technique


@needs_triton
def test_screenshot_of_the_editor_with_a_triton_kernel(editor, triton_file, qtbot, shots,
                                                       monkeypatch):
    """The editor at 1280x800 on a Triton kernel whose Ctrl+B found a syntax error: Python
    colours, the header as TOML, the error underlined on its line and listed below."""
    monkeypatch.setenv("HOME", str(triton_file.parent.parent))     # the title shows ~/...
    editor.open_file(triton_file)
    assert editor.title.text().startswith("~/kernels/my_triton.py") and "Triton" in editor.title.text()
    editor.resize(1280, 800)
    editor.show()
    line = _line_of(editor.text(), "tiles_n = tl.cdiv(N, BLOCK_N)")
    _replace_line(editor, line, "    tiles_n = tl.cdiv(N, BLOCK_N")
    with qtbot.waitSignal(editor.compiled, timeout=COMPILE_MS):
        editor.compile_action.trigger()
    assert editor.editor.marked_lines() == {line: "error"}
    editor.editor.verticalScrollBar().setValue(12)     # [params] to the error in view
    qtbot.wait(50)
    img = editor.grab()
    assert (img.width(), img.height()) == (1280, 800)
    assert img.save(str(shots / "editor_triton.png"))


@needs_triton
def test_run_in_the_window_verifies_through_the_interpreter(qtbot, make_window, configure,
                                                            triton_file):
    """No CUDA device here: the editor's Run switches to the cpu backend, runs the kernel
    (its default combination) through Triton's interpreter next to cpu_numpy, verified."""
    win = configure(make_window(), "cpu", ("cpu_numpy",), "17x13x29", repeats=1)
    if win.statuses.get("cuda") is not None and win.statuses["cuda"].available:
        pytest.skip("a CUDA device is here: Run goes to the GPU")
    win.config.select("opencl" if "opencl" in win.statuses else "cpu", 0)
    assert win.open_kernel(triton_file)
    ed = win.kernel_editor
    assert ed.run_backend() == "cpu"
    with qtbot.waitSignal(win.controller.finished, timeout=180_000) as done:
        ed.run_action.trigger()
    assert not done.args[0].cancelled
    assert win.config.backend_name() == "cpu"
    mine = [r for r in win.store.records if r.variant == "my_triton"]
    assert len(mine) == 1 and mine[0].status == "ok" and mine[0].passed, mine
    assert mine[0].timing_mode == "interpreter"
    assert any(r.variant == "cpu_numpy" for r in win.store.records)
    assert "Triton's interpreter" in win.log.plain_text()
    assert "my_triton at 17×13×29" in ed.status.text()


def test_python_strings_that_span_lines_carry_their_state(qtbot):
    from gui.code_editor import CodeEditor
    code = CodeEditor(language="python")
    qtbot.addWidget(code)
    code.setPlainText("# no docstring yet\n"
                      "x = r'''one\n"
                      "+++ not a fence\n"
                      "'''  # closed\n"
                      "y = 'a\"\"\"b'  # \"\"\" in a string or a comment opens nothing\n"
                      "def f():\n")
    hl = code.highlighter
    colour = lambda name: hl.format_for(name).foreground().color().name()  # noqa: E731
    state = lambda line: code.document().findBlockByNumber(line - 1).userState()  # noqa: E731
    assert state(2) == KernelHighlighter.STATE_COMMENT | KernelHighlighter.PY_SINGLE_QUOTES
    assert _colour_at(code, 2, 4) == _colour_at(code, 3, 0) == colour("string")   # r''' and body
    assert [state(n) for n in (4, 5, 6)] == [KernelHighlighter.STATE_CODE] * 3
    assert _colour_at(code, 4, 6) == colour("comment")
    assert _colour_at(code, 6, 0) == colour("keyword")
