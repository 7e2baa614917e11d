"""GUI: the kernel source editor (gui/code_editor.py): gutter, problem marks and their
tooltips, go-to-line, syntax colours (code, comments, the TOML header), find, undo, and
the highlighter's speed.

Set ``MATMUL_LAB_SHOTS=FOLDER`` to keep the screenshots (``code_editor.png`` and
``code_editor_dark.png``: a real kernel file with a problem marked and the find bar open).
"""
import os
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from PySide6.QtCore import QEvent, QPoint, Qt  # noqa: E402
from PySide6.QtGui import QHelpEvent, QPalette, QTextCharFormat, QTextCursor, QTextFormat  # noqa: E402
from PySide6.QtWidgets import QApplication, QToolTip  # noqa: E402

from gui import code_editor  # noqa: E402
from gui.code_editor import (CodeEditor, EditorPane, FindBar, KernelHighlighter,  # noqa: E402
                             language_for)
from gui.theme import dark_palette  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

KERNEL = """\
/*
+++
name = "demo"
order = 3

[params]
block = [16, 8]
+++
*/
#include <cuda_runtime.h>
// a line comment
__global__ void matmul(const float* __restrict__ a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;  /* inline */
    __syncthreads();
}
"""


@pytest.fixture
def editor(qtbot):
    ed = CodeEditor(language="cuda")
    qtbot.addWidget(ed)
    ed.resize(700, 400)
    return ed


def _format_at(ed: CodeEditor, line: int, column: int) -> QTextCharFormat | None:
    """The highlighter's format over 1-based ``line``, 0-based ``column`` (None: plain)."""
    block = ed.document().findBlockByNumber(line - 1)
    ranges = block.layout().formats()
    for r in ranges:
        if r.start <= column < r.start + r.length:
            # A copy: the range's own format goes with the list.
            return QTextCharFormat(r.format)
    return None


def _colour_at(ed, line, column) -> str | None:
    fmt = _format_at(ed, line, column)
    return None if fmt is None else fmt.foreground().color().name()


def _col(ed, line, word) -> int:
    col = ed.document().findBlockByNumber(line - 1).text().index(word)
    return col


# -- helpers and gutter ---------------------------------------------------------------

def test_language_for():
    assert language_for("cuda/ladder/03_tiled_any.cu") == "cuda"
    assert language_for(Path("x/KERNEL.CU")) == "cuda"
    assert language_for("opencl/01_naive.cl") == "opencl"
    assert language_for("notes.txt") == "text"
    assert language_for("Makefile") == "text"


def test_gutter_width_grows_with_the_line_count(editor, qtbot):
    editor.setPlainText("\n".join(["x"] * 5))
    narrow = editor.line_number_area_width()
    assert editor.viewportMargins().left() == narrow
    editor.setPlainText("\n".join(["x"] * 1500))
    wide = editor.line_number_area_width()
    assert wide > narrow
    assert editor.viewportMargins().left() == wide
    digit = editor.fontMetrics().horizontalAdvance("9")
    assert wide - narrow == 2 * digit          # two digits more: 1500 against "05"


def test_editor_basics(editor):
    assert editor.lineWrapMode() == editor.LineWrapMode.NoWrap
    assert editor.font().fixedPitch() or editor.fontInfo().fixedPitch()
    space = editor.fontMetrics().horizontalAdvance(" ")
    assert editor.tabStopDistance() == pytest.approx(4 * space)


# -- problems -------------------------------------------------------------------------

def _wavy(ed):
    """{0-based block: underline colour} of the wavy-underlined extra selections."""
    return {s.cursor.blockNumber(): s.format.underlineColor().name()
            for s in ed.extraSelections()
            if s.format.underlineStyle() == QTextCharFormat.UnderlineStyle.WaveUnderline}


def test_problems_underline_their_lines_and_mark_the_gutter(editor):
    editor.setPlainText("\n".join(f"    line {i}" for i in range(1, 11)))
    problems = [(3, "error", "bad thing"), (5, "warning", "odd thing"),
                (None, "error", "whole file"), (99, "warning", "past the end")]
    editor.set_problems(problems)
    assert editor.problems() == problems
    assert editor.marked_lines() == {3: "error", 5: "warning"}
    wavy = _wavy(editor)
    assert set(wavy) == {2, 4}
    assert wavy[2] != wavy[4]                      # red for the error, amber for the warning
    under = next(s for s in editor.extraSelections() if s.cursor.blockNumber() == 2
                 and s.format.underlineStyle() == QTextCharFormat.UnderlineStyle.WaveUnderline)
    assert under.cursor.selectedText() == "line 3"   # the text, not the indent
    # The current-line highlight stays.
    assert any(s.format.property(QTextFormat.Property.FullWidthSelection)
               for s in editor.extraSelections())
    # A warning and an error on one line: the mark is the worse, the tooltip has both.
    editor.set_problems([(2, "warning", "first"), (2, "error", "second")])
    assert editor.marked_lines() == {2: "error"}
    assert editor.problem_text(2) == "first\nsecond"
    assert set(_wavy(editor)) == {1}
    editor.set_problems([])
    assert editor.marked_lines() == {} and _wavy(editor) == {}
    with pytest.raises(ValueError):
        editor.set_problems([(1, "fatal", "no such severity")])


def test_a_problem_past_the_end_is_marked_once_the_line_exists(editor):
    editor.setPlainText("a\nb")
    editor.set_problems([(4, "error", "later")])
    assert editor.marked_lines() == {}
    editor.appendPlainText("c\nd")
    assert editor.marked_lines() == {4: "error"}


def _tooltip_at_line(qtbot, ed, widget, line):
    """The tooltip shown for a hover over ``line`` of ``widget`` ("" for none)."""
    block = ed.document().findBlockByNumber(line - 1)
    y = ed.cursorRect(QTextCursor(block)).center().y()
    pos = QPoint(5, y)
    QToolTip.hideText()                            # it goes after a short delay
    qtbot.waitUntil(lambda: not QToolTip.isVisible())
    QApplication.sendEvent(widget, QHelpEvent(QEvent.Type.ToolTip, pos, widget.mapToGlobal(pos)))
    return QToolTip.text() if QToolTip.isVisible() else ""


def test_hovering_a_problem_line_shows_its_message(editor, qtbot):
    editor.setPlainText("\n".join(f"line {i}" for i in range(1, 11)))
    editor.set_problems([(3, "error", "ELEM is not defined")])
    editor.show()
    qtbot.waitExposed(editor)
    assert _tooltip_at_line(qtbot, editor, editor.viewport(), 3) == "ELEM is not defined"
    assert _tooltip_at_line(qtbot, editor, editor.viewport(), 4) == ""
    # The gutter's marker tells the same.
    assert _tooltip_at_line(qtbot, editor, editor._gutter, 3) == "ELEM is not defined"
    QToolTip.hideText()


def test_go_to_moves_the_cursor_and_focuses(editor, qtbot):
    editor.setPlainText("\n".join(f"line number {i}" for i in range(1, 301)))
    editor.show()
    qtbot.waitExposed(editor)
    editor.go_to(250, 6)
    cursor = editor.textCursor()
    assert (cursor.blockNumber(), cursor.positionInBlock()) == (249, 5)
    qtbot.waitUntil(editor.hasFocus)
    # Centred: the line is in view, away from the top.
    assert editor.firstVisibleBlock().blockNumber() > 200
    editor.go_to(10)
    assert (editor.textCursor().blockNumber(), editor.textCursor().positionInBlock()) == (9, 0)
    editor.go_to(9999, 9999)                       # clamped to the last line's end
    cursor = editor.textCursor()
    assert cursor.blockNumber() == 299 and cursor.atBlockEnd()


# -- highlighting ---------------------------------------------------------------------

def test_keywords_comments_and_header_keys_get_their_own_formats(editor):
    editor.setPlainText(KERNEL)
    hl = editor.highlighter
    keyword = _colour_at(editor, 12, 0)                         # __global__
    comment = _colour_at(editor, 11, 3)                         # // a line comment
    toml_key = _colour_at(editor, 3, 0)                         # name = "demo"
    toml_string = _colour_at(editor, 3, _col(editor, 3, "demo"))
    fence = _colour_at(editor, 2, 0)                            # +++
    block_comment = _colour_at(editor, 1, 0)                    # /*
    assert None not in (keyword, comment, toml_key, toml_string, fence)
    assert len({keyword, comment, toml_key, toml_string}) == 4
    assert keyword == hl.format_for("qualifier").foreground().color().name()
    assert comment == block_comment == hl.format_for("comment").foreground().color().name()
    assert toml_key == hl.format_for("toml_key").foreground().color().name()
    assert _format_at(editor, 12, 0).fontWeight() > _format_at(editor, 3, 0).fontWeight()
    assert _format_at(editor, 11, 3).fontItalic()
    # More of the map: a type, a CUDA built-in, an intrinsic, the preprocessor.
    colour = lambda name: hl.format_for(name).foreground().color().name()  # noqa: E731
    assert _colour_at(editor, 12, _col(editor, 12, "void")) == colour("type")
    assert _colour_at(editor, 14, _col(editor, 14, "blockIdx")) == colour("builtin")
    assert _colour_at(editor, 15, _col(editor, 15, "__syncthreads")) in {colour("function"),
                                                                          colour("builtin")}
    assert _colour_at(editor, 10, 0) == colour("preproc")
    assert _colour_at(editor, 14, _col(editor, 14, "/* inline")) == comment
    # A table header in the TOML, and the header's line states.
    assert _colour_at(editor, 6, 1) == colour("toml_table")
    assert _colour_at(editor, 7, _col(editor, 7, "16")) == colour("number")
    states = [editor.document().findBlockByNumber(i).userState() for i in range(9)]
    assert states == [KernelHighlighter.STATE_FIRST_COMMENT] + [KernelHighlighter.STATE_HEADER] * 6 \
        + [KernelHighlighter.STATE_COMMENT, KernelHighlighter.STATE_CODE]


def test_a_multi_line_comment_carries_its_state_across_lines(editor):
    editor.setPlainText("int a; /* opens here\n"
                        "   int still_comment = 1;\n"
                        "closes */ int b = 2;\n"
                        "int c; // /* not a comment start\n"
                        'const char* s = "/*"; int d;\n')
    doc = editor.document()
    states = [doc.findBlockByNumber(i).userState() for i in range(5)]
    assert states == [KernelHighlighter.STATE_COMMENT, KernelHighlighter.STATE_COMMENT,
                      KernelHighlighter.STATE_CODE, KernelHighlighter.STATE_CODE,
                      KernelHighlighter.STATE_CODE]
    comment = editor.highlighter.format_for("comment").foreground().color().name()
    type_ = editor.highlighter.format_for("type").foreground().color().name()
    assert _colour_at(editor, 1, 0) == type_
    assert _colour_at(editor, 2, _col(editor, 2, "int")) == comment   # inside the comment
    assert _colour_at(editor, 3, 0) == comment
    assert _colour_at(editor, 3, _col(editor, 3, "int")) == type_     # after the */
    assert _colour_at(editor, 5, _col(editor, 5, "int")) == type_     # "/*" in a string
    # Closing the comment on line 1 lets the next lines out again.
    cursor = QTextCursor(doc.findBlockByNumber(0))
    cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock)
    cursor.insertText(" */")
    assert doc.findBlockByNumber(1).userState() == KernelHighlighter.STATE_CODE
    assert _colour_at(editor, 2, _col(editor, 2, "int")) == type_


def test_only_the_first_comment_holds_a_header(editor):
    editor.setPlainText("int x;\n/*\n+++\nname = \"x\"\n+++\n*/\n")
    comment = editor.highlighter.format_for("comment").foreground().color().name()
    assert _colour_at(editor, 4, 0) == comment
    assert editor.document().findBlockByNumber(3).userState() == KernelHighlighter.STATE_COMMENT


def test_opencl_keywords_and_builtins(qtbot):
    ed = CodeEditor(language="opencl")
    qtbot.addWidget(ed)
    ed.setPlainText("__kernel void f(__global float* a, __local float4* t)\n"
                    "{ int i = get_global_id(0); barrier(CLK_LOCAL_MEM_FENCE); }\n")
    hl = ed.highlighter
    colour = lambda name: hl.format_for(name).foreground().color().name()  # noqa: E731
    assert _colour_at(ed, 1, 0) == colour("qualifier")
    assert _colour_at(ed, 1, _col(ed, 1, "__global")) == colour("qualifier")
    assert _colour_at(ed, 1, _col(ed, 1, "float4")) == colour("type")
    assert _colour_at(ed, 2, _col(ed, 2, "get_global_id")) == colour("builtin")
    assert _colour_at(ed, 2, _col(ed, 2, "CLK_LOCAL")) == colour("builtin")


def test_plain_text_gets_no_colours(qtbot):
    ed = CodeEditor(language="text")
    qtbot.addWidget(ed)
    ed.setPlainText("__global__ void f(); /* x */")
    assert ed.document().firstBlock().layout().formats() == []
    ed.set_language("cuda")
    assert _colour_at(ed, 1, 0) is not None


def test_the_colours_follow_a_dark_palette(editor, qtbot):
    editor.setPlainText(KERNEL)
    light = _colour_at(editor, 12, 0)
    assert not editor.highlighter.is_dark()
    editor.setPalette(dark_palette())
    assert editor.highlighter.is_dark()
    dark = _colour_at(editor, 12, 0)
    assert dark != light
    assert dark == code_editor.DARK_STYLE["qualifier"][0]


def test_highlighting_2000_lines_is_fast(editor):
    lines = []
    for i in range(2000):
        kind = i % 5
        lines.append(
            f"    float acc{i} = a[{i} * n + k] * b[k * n + {i}];  // step {i}" if kind == 0 else
            f"#define TILE_{i} ({i} * BLOCK)" if kind == 1 else
            f"__global__ void kernel_{i}(const float* __restrict__ a) {{ __syncthreads(); }}"
            if kind == 2 else
            f"/* comment {i} opens" if kind == 3 else f"   and closes {i} */ int x{i} = 0x{i:x};")
    editor.setPlainText("\n".join(lines))
    code_editor._lex_line.cache_clear()            # time the lexing, not the cache
    t0 = time.perf_counter()
    editor.highlighter.rehighlight()
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.0, elapsed
    assert editor.document().findBlockByNumber(1999).layout().formats()


# -- find -----------------------------------------------------------------------------

@pytest.fixture
def pane(qtbot):
    p = EditorPane(language="cuda")
    qtbot.addWidget(p)
    p.resize(700, 400)
    p.show()
    qtbot.waitExposed(p)
    return p


def _selection(ed):
    c = ed.textCursor()
    return c.blockNumber(), c.positionInBlock() - len(c.selectedText()), c.selectedText()


def test_find_next_previous_wraps_and_counts(pane, qtbot):
    ed, bar = pane.editor, pane.find_bar
    ed.setPlainText("foo bar\nFoo baz\nqux foo")
    assert not bar.isVisible()
    bar.open("foo")
    assert bar.isVisible()
    assert _selection(ed) == (0, 0, "foo")
    assert bar.status.text() == "1 of 3"
    assert bar.find_next() and _selection(ed) == (1, 0, "Foo")
    assert bar.status.text() == "2 of 3"
    assert bar.find_next() and _selection(ed) == (2, 4, "foo")
    assert bar.find_next() and _selection(ed) == (0, 0, "foo")          # wrapped
    assert bar.find_previous() and _selection(ed) == (2, 4, "foo")      # wrapped back
    assert bar.status.text() == "3 of 3"
    assert bar.find_previous() and _selection(ed) == (1, 0, "Foo")
    bar.case_box.setChecked(True)                  # "Foo" no longer matches
    assert bar.status.text().endswith("of 2")
    assert bar.find_next() and _selection(ed)[2] == "foo"
    bar.field.setText("nothing like it")
    assert not bar.find_next()
    assert bar.status.text() == "not found"


def test_find_bar_keys(pane, qtbot):
    ed, bar = pane.editor, pane.find_bar
    ed.setPlainText("alpha beta\nbeta gamma\nbeta")
    # Ctrl+F with a selection fills the field with it.
    cursor = ed.textCursor()
    cursor.setPosition(6)
    cursor.setPosition(10, QTextCursor.MoveMode.KeepAnchor)
    ed.setTextCursor(cursor)
    with qtbot.waitSignal(ed.find_requested) as sig:
        qtbot.keyClick(ed, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    assert sig.args == ["beta"]
    assert bar.isVisible() and bar.field.text() == "beta"
    assert bar.status.text() == "1 of 3"
    qtbot.keyClick(bar.field, Qt.Key.Key_Return)
    assert _selection(ed) == (1, 0, "beta")
    qtbot.keyClick(bar.field, Qt.Key.Key_Return)
    assert _selection(ed) == (2, 0, "beta")
    qtbot.keyClick(bar.field, Qt.Key.Key_Return, Qt.KeyboardModifier.ShiftModifier)
    assert _selection(ed) == (1, 0, "beta")
    # Typing searches as it goes.
    bar.field.clear()
    qtbot.keyClicks(bar.field, "gam")
    assert _selection(ed) == (1, 5, "gam")
    qtbot.keyClicks(bar.field, "x")
    assert bar.status.text() == "not found"
    with qtbot.waitSignal(bar.closed):
        qtbot.keyClick(bar.field, Qt.Key.Key_Escape)
    assert not bar.isVisible()
    # A selection over two lines is no search: the field keeps what it had.
    cursor.setPosition(0)
    cursor.setPosition(15, QTextCursor.MoveMode.KeepAnchor)
    ed.setTextCursor(cursor)
    ed.show_find()
    assert bar.isVisible() and bar.field.text() == "gamx"


def test_the_count_is_bounded(qtbot, monkeypatch):
    monkeypatch.setattr(code_editor, "MAX_COUNTED", 5)
    ed = CodeEditor()
    bar = FindBar(ed)
    qtbot.addWidget(ed)
    qtbot.addWidget(bar)
    ed.setPlainText("a " * 20)
    bar.open("a")
    assert bar.status.text() == "1 of 5+"
    ed.moveCursor(QTextCursor.MoveOperation.End)
    bar.find_previous()
    assert bar.status.text() == "5+ found"        # past the counted ones: no index


def test_a_find_bar_works_on_a_plain_editor_too(qtbot):
    ed = CodeEditor()
    bar = FindBar(ed)
    qtbot.addWidget(ed)
    qtbot.addWidget(bar)
    ed.setPlainText("one two one")
    bar.field.setText("one")
    assert bar.find_next() and bar.find_next()
    assert ed.textCursor().selectionStart() == 8


# -- editing --------------------------------------------------------------------------

def test_undo_and_redo_after_an_edit(pane, qtbot):
    ed = pane.editor
    ed.setPlainText("int a;")
    assert not ed.document().isUndoAvailable()
    ed.moveCursor(QTextCursor.MoveOperation.End)
    ed.setFocus()
    qtbot.keyClicks(ed, " int b;")
    assert ed.toPlainText() == "int a; int b;"
    assert ed.document().isUndoAvailable()
    qtbot.keyClick(ed, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert ed.toPlainText() == "int a;"
    ed.redo()
    assert ed.toPlainText() == "int a; int b;"
    ed.undo()
    assert ed.toPlainText() == "int a;"


def test_load_file_sets_language_and_an_unmodified_document(qtbot, tmp_path):
    pane = EditorPane()
    qtbot.addWidget(pane)
    pane.load_file(ROOT / "opencl" / "01_naive.cl")
    assert pane.editor.language() == "opencl"
    assert not pane.editor.document().isModified()
    assert not pane.editor.document().isUndoAvailable()
    assert pane.editor.toPlainText().startswith("/*\n+++")


# -- screenshots ----------------------------------------------------------------------

def _shot(qtbot, path: Path) -> None:
    pane = EditorPane()
    qtbot.addWidget(pane)
    pane.resize(900, 600)
    pane.load_file(ROOT / "cuda" / "ladder" / "03_tiled_any.cu")
    text = pane.editor.toPlainText().split("\n")
    line = next(i for i, t in enumerate(text, 1) if "__global__" in t)
    shared = next(i for i, t in enumerate(text, 1) if "Bs[BLOCK]" in t)
    pane.editor.set_problems([(line, "error", "identifier \"ELEM\" is undefined"),
                              (shared, "warning", "variable \"Bs\" was declared but never used")])
    pane.show()
    qtbot.waitExposed(pane)
    pane.editor.go_to(line, 1)
    pane.find_bar.open("BLOCK")
    qtbot.wait(50)
    pane.grab().save(str(path))
    assert path.stat().st_size > 0


def test_screenshots_in_light_and_dark(qtbot, shots):
    _shot(qtbot, shots / "code_editor.png")
    app = QApplication.instance()
    old = QPalette(app.palette())
    app.setPalette(dark_palette())                 # as MainWindow.set_dark(True) does
    try:
        _shot(qtbot, shots / "code_editor_dark.png")
    finally:
        app.setPalette(old)
