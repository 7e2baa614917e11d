"""A source editor for kernel files: CUDA (``.cu``), OpenCL (``.cl``) and Triton (``.py``).

:class:`CodeEditor` is a :class:`QPlainTextEdit` with a line-number gutter, a
highlighted current line, a monospace font and no line wrap.  It marks problems (a
header that does not parse, a compiler message) with a wavy underline, a dot in the
gutter and the message as a tooltip, and :meth:`CodeEditor.go_to` jumps to a line.

:class:`KernelHighlighter` colours the code with pygments' C-family lexers (Python's for a
Triton file) and the kernel header (the TOML between two ``+++`` lines in the file's first
comment, a ``.py`` file's module docstring, see :mod:`engine.kernels.kernel_file`) with
pygments' TOML lexer.

:class:`EditorPane` puts an editor and its :class:`FindBar` (Ctrl+F) together.

Colours follow the widget's palette: each colour set has a light and a dark variant,
chosen by the lightness of the palette's Base colour, so both the desktop's palette and
the app's dark one (:func:`gui.theme.dark_palette`) read well.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from pygments.lexers import TOMLLexer
from pygments.lexers.c_cpp import CLexer
from pygments.lexers.c_like import CudaLexer
from pygments.lexers.python import PythonLexer
from pygments.token import (Comment, Keyword, Name, Number, Operator, String, Token,
                            _TokenType)
from PySide6.QtCore import QEvent, QRect, QSize, Qt, Signal
from PySide6.QtGui import (QColor, QFont, QFontDatabase, QKeySequence, QPainter, QPalette,
                           QShortcut, QSyntaxHighlighter, QTextCharFormat, QTextCursor,
                           QTextDocument, QTextFormat)
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit,
                               QPushButton, QTextEdit, QToolTip, QVBoxLayout, QWidget)

from engine.kernels.sources import read_kernel_text

#: A problem to mark: (1-based line or None for the whole file, severity, message).
Problem = tuple["int | None", str, str]
SEVERITIES = ("error", "warning")
#: The header's fences, as :mod:`engine.kernels.kernel_file` reads them (alone on a line).
FENCE = "+++"
LANGUAGES = ("cuda", "opencl", "python", "text")
_LANGUAGE_OF_SUFFIX = {".cu": "cuda", ".cuh": "cuda", ".cl": "opencl", ".py": "python"}


def language_for(path: str | Path) -> str:
    """The editor language of a file, from its suffix.

    Parameters
    ----------
    path : str or Path
        The file's path; only its suffix is looked at (case-insensitively).

    Returns
    -------
    str
        ``'cuda'`` for ``.cu``/``.cuh``, ``'opencl'`` for ``.cl``, ``'python'`` for a
        Triton ``.py`` file, else ``'text'``.
    """
    return _LANGUAGE_OF_SUFFIX.get(Path(path).suffix.lower(), "text")


def _is_dark(palette: QPalette) -> bool:
    """Whether text is drawn on a dark background: the Base colour, not Window, is what
    an editor paints behind its text."""
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def _blend(a: QColor, b: QColor, t: float) -> QColor:
    """``a`` moved a fraction ``t`` towards ``b`` (opaque), for tints of the base colour."""
    return QColor(round(a.red() + (b.red() - a.red()) * t),
                  round(a.green() + (b.green() - a.green()) * t),
                  round(a.blue() + (b.blue() - a.blue()) * t))


# --------------------------------------------------------------------------------------
# Lexers
# --------------------------------------------------------------------------------------

class _KernelCudaLexer(CudaLexer):
    """pygments' CUDA lexer, plus the intrinsics and qualifiers the kernels here use that
    it does not know (it stops at ``__syncthreads`` and friends)."""

    name = "CUDA (kernels)"
    aliases: list[str] = []
    filenames: list[str] = []
    extra_qualifiers = {"__launch_bounds__", "__align__", "__cluster_dims__", "__grid_constant__",
                        "__noinline__", "__host__"}
    extra_builtins = {
        "__ldg", "__ldcg", "__ldca", "__ldcs", "__stcg", "__stcs", "__stwb", "__syncwarp",
        "__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
        "__ballot_sync", "__any_sync", "__all_sync", "__activemask", "__trap", "__nanosleep",
        "__cvta_generic_to_shared", "__fmaf_rn", "__fdividef", "__float_as_uint",
        "__uint_as_float", "__popc", "__clz", "__ffs", "atomicAdd", "atomicSub", "atomicExch",
        "atomicMin", "atomicMax", "atomicCAS", "atomicAnd", "atomicOr", "atomicXor",
    }

    def get_tokens_unprocessed(self, text, stack=("root",)):
        for index, token, value in super().get_tokens_unprocessed(text, stack):
            if token is Name:
                if value in self.extra_qualifiers:
                    token = Keyword.Reserved
                elif value in self.extra_builtins:
                    token = Name.Builtin
            yield index, token, value


def _opencl_vector_types() -> set[str]:
    scalars = ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half",
               "float", "double")
    return {f"{s}{n}" for s in scalars for n in (2, 3, 4, 8, 16)} | {
        "uchar", "ushort", "uint", "ulong", "half", "size_t", "ptrdiff_t", "event_t"}


class _OpenCLLexer(CLexer):
    """pygments' C lexer with OpenCL C's address-space qualifiers, vector types and
    work-item built-ins (pygments has no OpenCL lexer of its own)."""

    name = "OpenCL C"
    aliases: list[str] = []
    filenames: list[str] = []
    qualifiers = {"__kernel", "kernel", "__global", "global", "__local", "local", "__constant",
                  "constant", "__private", "private", "__read_only", "read_only",
                  "__write_only", "write_only", "__read_write", "read_write", "__attribute__"}
    types = _opencl_vector_types()
    builtins = {
        "get_work_dim", "get_global_size", "get_global_id", "get_local_size",
        "get_enqueued_local_size", "get_local_id", "get_num_groups", "get_group_id",
        "get_global_offset", "get_global_linear_id", "get_local_linear_id", "barrier",
        "work_group_barrier", "mem_fence", "read_mem_fence", "write_mem_fence",
        "async_work_group_copy", "async_work_group_strided_copy", "wait_group_events",
        "prefetch", "mad", "fma", "reqd_work_group_size", "work_group_size_hint",
        "CLK_LOCAL_MEM_FENCE", "CLK_GLOBAL_MEM_FENCE", "atomic_add", "atomic_inc",
        "atomic_xchg", "atomic_cmpxchg",
    } | {f"{op}{n}" for op in ("vload", "vstore") for n in (2, 3, 4, 8, 16)}

    def get_tokens_unprocessed(self, text, stack=("root",)):
        for index, token, value in super().get_tokens_unprocessed(text, stack):
            if token is Name:
                if value in self.qualifiers:
                    token = Keyword.Reserved
                elif value in self.types:
                    token = Keyword.Type
                elif value in self.builtins:
                    token = Name.Builtin
            yield index, token, value


@lru_cache(maxsize=None)
def _lexer(language: str):
    """One lexer per language, made once: building a RegexLexer compiles its rules."""
    return {"cuda": _KernelCudaLexer, "opencl": _OpenCLLexer, "python": PythonLexer,
            "toml": TOMLLexer}[language](
        stripnl=False, ensurenl=False)


#: pygments token types -> the highlighter's format names; a token takes the entry of
#: its nearest listed ancestor, and one with none stays in the plain text colour.
_CODE_CATEGORIES: dict[_TokenType, str | None] = {
    Keyword: "keyword",
    Keyword.Reserved: "qualifier",       # CUDA __global__ ..., OpenCL __kernel ...
    Keyword.Type: "type",
    Keyword.Constant: "constant",
    Name.Builtin: "builtin",
    Name.Function: "function",
    Name.Constant: "constant",
    Name.Decorator: "qualifier",         # Python's @triton.jit
    String: "string",
    Number: "number",
    Comment: "comment",
    Comment.Preproc: "preproc",
    Comment.PreprocFile: "string",       # the <file.h> of an #include
    Operator: "operator",
    Operator.Word: "keyword",
}
_TOML_CATEGORIES: dict[_TokenType, str | None] = {
    Name: "toml_key",
    Keyword: "toml_table",               # [params], [[constraints]]
    Keyword.Constant: "constant",        # true, false
    String: "string",
    Number: "number",
    Comment: "comment",
    Operator: "operator",
}


def _category(ttype: _TokenType, table: dict[_TokenType, str | None]) -> str | None:
    while ttype is not Token:
        if ttype in table:
            return table[ttype]
        ttype = ttype.parent
    return None


@lru_cache(maxsize=16384)
def _lex_line(language: str, text: str) -> tuple[tuple[int, int, str], ...]:
    """The coloured runs ``(start, length, format name)`` of one line of code or TOML.

    Cached by text: a file repeats many lines (``}``, ``#endif``, blank ones), and a
    palette switch re-highlights every line without lexing it again.
    """
    toml = language == "toml"
    table = _TOML_CATEGORIES if toml else _CODE_CATEGORIES
    # pygments' C rules end a // comment and a preprocessor line at a newline: give
    # the line its newline back, and clip the runs to the line afterwards.
    tokens = list(_lexer(language).get_tokens_unprocessed(text + "\n"))
    runs: list[list] = []
    for i, (index, ttype, value) in enumerate(tokens):
        cat = _category(ttype, table)
        if not toml and ttype is Name:
            # pygments marks a function name only in a whole declaration on one line;
            # a name followed by "(" is a call or a definition either way.
            nxt = next((t for t in tokens[i + 1:] if not t[2].isspace()), None)
            if nxt is not None and nxt[2].startswith("("):
                cat = "function"
        if cat is None:
            continue
        if runs and runs[-1][2] == cat and runs[-1][0] + runs[-1][1] == index:
            runs[-1][1] += len(value)       # one setFormat per run, not per token
        else:
            runs.append([index, len(value), cat])
    end = len(text)
    return tuple((s, min(n, end - s), c) for s, n, c in runs if s < end)


def _triple_open(text: str, pos: int) -> int:
    """Index of the next triple quote at or after ``pos`` that opens a Python string (its
    ``r``/``b``/``f``/``u`` prefix included), or -1. One inside a one-line string or after
    ``#`` opens nothing."""
    i, n = pos, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            return -1
        if c in "\"'":
            if text.startswith(c * 3, i):
                word = i
                while word > pos and (text[word - 1].isalnum() or text[word - 1] == "_"):
                    word -= 1
                prefix = text[word:i]
                return word if len(prefix) <= 2 and set(prefix) <= set("rRbBfFuU") else i
            i += 1
            while i < n and text[i] != c:      # a one-line string: skip to its end
                i += 2 if text[i] == "\\" else 1
        i += 1
    return -1


def _triple_close(text: str, pos: int, quote: str) -> int:
    """Index of the ``quote`` at or after ``pos`` that ends a triple-quoted string (not
    escaped by a backslash), or -1."""
    i = text.find(quote, pos)
    while i >= 0:
        slashes = len(text[pos:i]) - len(text[pos:i].rstrip("\\"))
        if slashes % 2 == 0:
            return i
        i = text.find(quote, i + 1)
    return -1


def _comment_open(text: str, pos: int) -> int:
    """Index of the next ``/*`` at or after ``pos`` that opens a comment, or -1.

    A ``/*`` inside a string or character literal or after ``//`` opens nothing.
    """
    idx = text.find("/*", pos)
    if idx < 0:
        return -1
    before = text[pos:idx]
    if '"' not in before and "'" not in before and "//" not in before:
        return idx                       # the common case, without a character loop
    quote = None
    i, n = pos, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "/" and i + 1 < n:
            if text[i + 1] == "/":
                return -1
            if text[i + 1] == "*":
                return i
        i += 1
    return -1


# --------------------------------------------------------------------------------------
# Highlighter
# --------------------------------------------------------------------------------------

#: (colour, bold, italic) per format name, on a light and on a dark background.
LIGHT_STYLE = {
    "keyword": ("#0033b3", True, False),
    "qualifier": ("#9b2393", True, False),
    "type": ("#00798a", False, False),
    "builtin": ("#871094", False, False),
    "function": ("#795e26", False, False),
    "string": ("#067d17", False, False),
    "number": ("#1750eb", False, False),
    "constant": ("#1750eb", False, False),
    "comment": ("#6a737d", False, True),
    "preproc": ("#8a5a00", False, False),
    "operator": ("#4d5866", False, False),
    "toml_key": ("#a0431c", False, False),
    "toml_table": ("#0033b3", True, False),
    "fence": ("#6a737d", True, False),
}
DARK_STYLE = {
    "keyword": ("#e0914f", True, False),
    "qualifier": ("#e08bd6", True, False),
    "type": ("#4ec9b0", False, False),
    "builtin": ("#c3a6f0", False, False),
    "function": ("#ffc66d", False, False),
    "string": ("#98c379", False, False),
    "number": ("#79b8ff", False, False),
    "constant": ("#79b8ff", False, False),
    "comment": ("#959ba3", False, True),
    "preproc": ("#d6c25a", False, False),
    "operator": ("#b9c2cc", False, False),
    "toml_key": ("#9cdcfe", False, False),
    "toml_table": ("#e0914f", True, False),
    "fence": ("#959ba3", True, False),
}


class KernelHighlighter(QSyntaxHighlighter):
    """Syntax colours for a CUDA or OpenCL kernel file and its TOML header.

    QSyntaxHighlighter sees one line (block) at a time; what carries over from one line
    to the next is the block state:

    ``STATE_START``  only blank lines so far: a ``/*`` here opens the file's first comment
    ``STATE_CODE``   code
    ``STATE_COMMENT`` inside a ``/* */`` comment
    ``STATE_HEADER`` inside the header, between the two ``+++`` fences
    ``STATE_FIRST_COMMENT`` inside the first comment, before its opening fence

    Comments are split off by hand (they may span lines, which a per-line lexer cannot
    see); the code between them is lexed by pygments line by line, header lines by its
    TOML lexer.

    Python (a Triton ``.py`` file) is split the same way at its triple-quoted strings: the
    module docstring plays the first comment's part (``STATE_FIRST_COMMENT``, then
    ``STATE_HEADER``, then ``STATE_DOC`` for its prose after the header), any other one is
    ``STATE_COMMENT`` coloured as a string; ``PY_SINGLE_QUOTES`` is added to the state
    inside a ''' string.

    Parameters
    ----------
    document : QTextDocument
        The document to colour.
    language : str
        ``'cuda'``, ``'opencl'``, ``'python'`` or ``'text'`` (no colours).
    dark : bool
        Use the colours meant for a dark background.
    """

    STATE_START = -1                 # Qt's own "no state" for a block not yet seen
    STATE_CODE = 0
    STATE_COMMENT = 1
    STATE_HEADER = 2
    STATE_FIRST_COMMENT = 3
    STATE_DOC = 4                    # Python: the module docstring after its header
    PY_SINGLE_QUOTES = 8             # Python: the string opened with ''', not """

    def __init__(self, document: QTextDocument, language: str = "cuda", dark: bool = False):
        self._language = language if language in LANGUAGES else "text"
        self._dark = dark
        self._formats = self._make_formats(dark)
        super().__init__(document)

    # -- settings --------------------------------------------------------------------

    def language(self) -> str:
        """``'cuda'``, ``'opencl'`` or ``'text'``."""
        return self._language

    def set_language(self, language: str) -> None:
        """Lex as ``language`` from now on, and re-colour the document."""
        language = language if language in LANGUAGES else "text"
        if language != self._language:
            self._language = language
            self.rehighlight()

    def is_dark(self) -> bool:
        """Whether the colours are the ones for a dark background."""
        return self._dark

    def set_dark(self, dark: bool) -> None:
        """Switch between the light-background and the dark-background colours."""
        if dark != self._dark:
            self._dark = dark
            self._formats = self._make_formats(dark)
            self.rehighlight()

    def format_for(self, name: str) -> QTextCharFormat:
        """The format of a format name (``'keyword'``, ``'comment'``, ``'toml_key'``...)."""
        return QTextCharFormat(self._formats[name])

    @staticmethod
    def _make_formats(dark: bool) -> dict[str, QTextCharFormat]:
        formats = {}
        for name, (colour, bold, italic) in (DARK_STYLE if dark else LIGHT_STYLE).items():
            fmt = QTextCharFormat()
            fmt.setForeground(QColor(colour))
            if bold:
                fmt.setFontWeight(QFont.Weight.Bold)
            if italic:
                fmt.setFontItalic(True)
            formats[name] = fmt
        return formats

    # -- highlighting ----------------------------------------------------------------

    def highlightBlock(self, text: str) -> None:  # noqa: N802 (Qt API)
        if self._language == "text":
            self.setCurrentBlockState(self.STATE_CODE)
            return
        if self._language == "python":
            self._highlight_python(text)
            return
        state = self.previousBlockState()
        if state not in (self.STATE_CODE, self.STATE_COMMENT, self.STATE_HEADER,
                         self.STATE_FIRST_COMMENT):
            state = self.STATE_START
        fmt = self._formats
        pos, n = 0, len(text)
        while pos < n:
            if state in (self.STATE_COMMENT, self.STATE_HEADER, self.STATE_FIRST_COMMENT):
                end = text.find("*/", pos)
                stop = n if end < 0 else end
                piece = text[pos:stop]
                after = state
                if piece.strip() == FENCE and state != self.STATE_COMMENT:
                    # The first fence opens the header, the second closes it; any later
                    # "+++" is just comment, as for the parser.
                    self.setFormat(pos, stop - pos, fmt["fence"])
                    after = self.STATE_HEADER if state == self.STATE_FIRST_COMMENT \
                        else self.STATE_COMMENT
                elif state == self.STATE_HEADER:
                    self._apply_runs(pos, _lex_line("toml", piece))
                else:
                    self.setFormat(pos, stop - pos, fmt["comment"])
                if end < 0:
                    state = after
                    break
                self.setFormat(end, 2, fmt["comment"])
                pos, state = end + 2, self.STATE_CODE
            else:
                start = _comment_open(text, pos)
                stop = n if start < 0 else start
                code = text[pos:stop]
                if state == self.STATE_START and code.strip():
                    state = self.STATE_CODE          # code before any comment: no header
                if code:
                    self._apply_runs(pos, _lex_line(self._language, code))
                if start < 0:
                    break
                self.setFormat(start, 2, fmt["comment"])
                state = self.STATE_FIRST_COMMENT if state == self.STATE_START \
                    else self.STATE_COMMENT
                pos = start + 2
        self.setCurrentBlockState(state)

    def _highlight_python(self, text: str) -> None:
        """One line of a Python file: code lexed by pygments, triple-quoted strings split
        off by hand (they span lines), the module docstring's header as TOML."""
        prev = self.previousBlockState()
        quote = "'''" if prev >= 0 and prev & self.PY_SINGLE_QUOTES else '"""'
        state = prev & ~self.PY_SINGLE_QUOTES if prev >= 0 else self.STATE_START
        in_string = (self.STATE_COMMENT, self.STATE_HEADER, self.STATE_FIRST_COMMENT,
                     self.STATE_DOC)
        if state not in (self.STATE_CODE, *in_string):
            state = self.STATE_START
        fmt = self._formats
        pos, n = 0, len(text)
        while pos < n:
            if state in in_string:
                end = _triple_close(text, pos, quote)
                stop = n if end < 0 else end
                piece = text[pos:stop]
                after = state
                if piece.strip() == FENCE and state in (self.STATE_FIRST_COMMENT,
                                                        self.STATE_HEADER):
                    self.setFormat(pos, stop - pos, fmt["fence"])
                    after = self.STATE_HEADER if state == self.STATE_FIRST_COMMENT \
                        else self.STATE_DOC
                elif state == self.STATE_HEADER:
                    self._apply_runs(pos, _lex_line("toml", piece))
                else:       # the module docstring's prose reads as a comment, as in C
                    self.setFormat(pos, stop - pos,
                                   fmt["string" if state == self.STATE_COMMENT else "comment"])
                if end < 0:
                    state = after
                    break
                self.setFormat(end, 3, fmt["string" if state == self.STATE_COMMENT
                                           else "comment"])
                pos, state = end + 3, self.STATE_CODE
            else:
                start = _triple_open(text, pos)
                stop = n if start < 0 else start
                code = text[pos:stop]
                if state == self.STATE_START and code.strip() \
                        and not code.lstrip().startswith("#"):
                    state = self.STATE_CODE      # code before a docstring: no header
                if code:
                    self._apply_runs(pos, _lex_line("python", code))
                if start < 0:
                    break
                opening = start
                while text[opening] not in "\"'":        # past an r/b/f/u prefix
                    opening += 1
                quote = text[opening:opening + 3]
                first = state == self.STATE_START
                self.setFormat(start, opening + 3 - start, fmt["comment" if first else "string"])
                state = self.STATE_FIRST_COMMENT if first else self.STATE_COMMENT
                pos = opening + 3
        single = quote == "'''" and state not in (self.STATE_START, self.STATE_CODE)
        self.setCurrentBlockState(state | (self.PY_SINGLE_QUOTES if single else 0))

    def _apply_runs(self, offset: int, runs: Iterable[tuple[int, int, str]]) -> None:
        fmt = self._formats
        for start, length, name in runs:
            self.setFormat(offset + start, length, fmt[name])


# --------------------------------------------------------------------------------------
# Editor
# --------------------------------------------------------------------------------------

#: Problem colours (error, warning) on a light and on a dark background.
_PROBLEM_COLORS = {False: {"error": "#e3242b", "warning": "#d48806"},
                   True: {"error": "#ff6b6b", "warning": "#f0b429"}}


class _LineNumberArea(QWidget):
    """The gutter: line numbers and problem markers, painted by the editor."""

    def __init__(self, editor: "CodeEditor"):
        super().__init__(editor)
        self._editor = editor

    def sizeHint(self) -> QSize:  # noqa: N802 (Qt API)
        return QSize(self._editor.line_number_area_width(), 0)

    def paintEvent(self, event):  # noqa: N802 (Qt API)
        self._editor._paint_gutter(event)

    def event(self, event):
        if event.type() == QEvent.Type.ToolTip:
            line = self._editor._line_at_y(event.pos().y())
            self._editor._show_problem_tooltip(line, event.globalPos(), self)
            return True
        return super().event(event)

    def mousePressEvent(self, event):  # noqa: N802 (Qt API)
        # A click on a line number puts the cursor on that line, as most editors do.
        line = self._editor._line_at_y(event.pos().y())
        if line is not None:
            self._editor.go_to(line)


class CodeEditor(QPlainTextEdit):
    """A plain-text editor for kernel source: gutter, problems, syntax colours.

    Parameters
    ----------
    parent : QWidget, optional
    language : str
        ``'cuda'``, ``'opencl'``, ``'python'`` or ``'text'``; see :meth:`set_language`.

    Signals
    -------
    find_requested(str)
        Ctrl+F (or :meth:`show_find`): the text to search for (the selection, or "").
    problems_changed()
        :meth:`set_problems` changed the marked problems.
    """

    find_requested = Signal(str)
    problems_changed = Signal()

    def __init__(self, parent: QWidget | None = None, language: str = "text"):
        super().__init__(parent)
        self._problems: list[Problem] = []
        self._marks: dict[int, str] = {}          # line -> worst severity
        self._messages: dict[int, list[str]] = {}
        self._find_bar: FindBar | None = None
        self._gutter = _LineNumberArea(self)
        self.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.highlighter = KernelHighlighter(self.document(), language, _is_dark(self.palette()))
        self.blockCountChanged.connect(self._block_count_changed)
        self.updateRequest.connect(self._update_gutter)
        self.cursorPositionChanged.connect(self._update_extra_selections)
        self._apply_font_metrics()
        self._update_gutter_width()
        self._update_extra_selections()

    # -- content ---------------------------------------------------------------------

    def language(self) -> str:
        """The language the highlighter lexes: ``'cuda'``, ``'opencl'``, ``'python'`` or ``'text'``."""
        return self.highlighter.language()

    def set_language(self, language: str) -> None:
        """Colour the text as ``language`` (``'cuda'``, ``'opencl'``, ``'python'``; anything else: none)."""
        self.highlighter.set_language(language)

    def load_file(self, path: str | Path) -> None:
        """Show a file's text (UTF-8), coloured by its suffix, as an unmodified document
        with an empty undo history. A file that is no kernel text (a pipe, a device, a
        folder, a link loop, a huge, binary or non-UTF-8 file) raises
        :class:`engine.kernels.kernel_file.KernelFileError` and leaves the editor as it was."""
        path = Path(path)
        text = read_kernel_text(path)        # first: a failure changes nothing here
        self.set_language(language_for(path))
        self.setPlainText(text)
        self.document().setModified(False)

    # -- fonts and gutter ------------------------------------------------------------

    def _apply_font_metrics(self) -> None:
        # Tab stops of four spaces in the editor's own font; the gutter uses the same
        # font so that its numbers sit on the text's lines.
        self.setTabStopDistance(self.fontMetrics().horizontalAdvance(" ") * 4)
        self._gutter.setFont(self.font())

    def line_number_area_width(self) -> int:
        """The gutter's width in pixels: a marker column plus the digits of the last
        line number (at least two, so that it does not jump at line 10)."""
        digits = max(2, len(str(max(1, self.blockCount()))))
        fm = self.fontMetrics()
        return self._marker_size() + 6 + fm.horizontalAdvance("9") * digits + 8

    def _marker_size(self) -> int:
        return max(6, round(self.fontMetrics().height() * 0.55))

    def _update_gutter_width(self, _count: int = 0) -> None:
        self.setViewportMargins(self.line_number_area_width(), 0, 0, 0)

    def _block_count_changed(self, _count: int) -> None:
        self._update_gutter_width()
        # Lines came or went: problems that now fall inside (or outside) the text.
        self._remark()

    def _update_gutter(self, rect: QRect, dy: int) -> None:
        if dy:
            self._gutter.scroll(0, dy)
        else:
            self._gutter.update(0, rect.y(), self._gutter.width(), rect.height())
        if rect.contains(self.viewport().rect()):
            self._update_gutter_width()

    def resizeEvent(self, event):  # noqa: N802 (Qt API)
        super().resizeEvent(event)
        cr = self.contentsRect()
        self._gutter.setGeometry(QRect(cr.left(), cr.top(), self.line_number_area_width(),
                                       cr.height()))

    def changeEvent(self, event):  # noqa: N802 (Qt API)
        super().changeEvent(event)
        kind = event.type()
        if kind in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            # Light <-> dark: syntax colours, line tint and markers all follow.
            self.highlighter.set_dark(_is_dark(self.palette()))
            self._update_extra_selections()
            self._gutter.update()
        elif kind == QEvent.Type.FontChange:
            self._apply_font_metrics()
            self._update_gutter_width()

    def _paint_gutter(self, event) -> None:
        pal = self.palette()
        dark = _is_dark(pal)
        painter = QPainter(self._gutter)
        base = pal.color(QPalette.ColorRole.Base)
        painter.fillRect(event.rect(), _blend(base, pal.color(QPalette.ColorRole.Text), 0.05))
        width = self._gutter.width()
        painter.setPen(_blend(base, pal.color(QPalette.ColorRole.Text), 0.18))
        painter.drawLine(width - 1, event.rect().top(), width - 1, event.rect().bottom())
        muted = _blend(base, pal.color(QPalette.ColorRole.Text), 0.5)
        strong = pal.color(QPalette.ColorRole.Text)
        current = self.textCursor().blockNumber()
        marker = self._marker_size()
        fm = self.fontMetrics()
        block = self.firstVisibleBlock()
        number = block.blockNumber()
        top = round(self.blockBoundingGeometry(block).translated(self.contentOffset()).top())
        bottom = top + round(self.blockBoundingRect(block).height())
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        while block.isValid() and top <= event.rect().bottom():
            if block.isVisible() and bottom >= event.rect().top():
                line = number + 1
                severity = self._marks.get(line)
                if severity is not None:
                    painter.setPen(Qt.PenStyle.NoPen)
                    painter.setBrush(QColor(_PROBLEM_COLORS[dark][severity]))
                    y = top + (fm.height() - marker) / 2
                    painter.drawEllipse(3, round(y), marker, marker)
                painter.setPen(strong if number == current else muted)
                painter.drawText(0, top, width - 6, fm.height(),
                                 Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                                 str(line))
            block = block.next()
            top = bottom
            bottom = top + round(self.blockBoundingRect(block).height())
            number += 1
        painter.end()

    def _line_at_y(self, y: int) -> int | None:
        """The 1-based line drawn at viewport (or gutter) height ``y``, or None below the
        last line."""
        block = self.firstVisibleBlock()
        top = self.blockBoundingGeometry(block).translated(self.contentOffset()).top()
        while block.isValid():
            bottom = top + self.blockBoundingRect(block).height()
            if block.isVisible() and top <= y < bottom:
                return block.blockNumber() + 1
            if top > y:
                return None
            block = block.next()
            top = bottom
        return None

    # -- current line and problems ---------------------------------------------------

    def set_problems(self, problems: Iterable[Sequence]) -> None:
        """Mark problems: a wavy underline over each line's text (red for errors, amber
        for warnings), a dot in the gutter and the message as the line's tooltip.

        Parameters
        ----------
        problems : iterable of (line, severity, message)
            ``line`` is 1-based, or None for a problem of the whole file (kept in
            :meth:`problems`, not marked); ``severity`` is ``'error'`` or ``'warning'``.
            Replaces the problems set before; lines past the end are not marked.
        """
        checked: list[Problem] = []
        for line, severity, message in problems:
            if severity not in SEVERITIES:
                raise ValueError(f"severity must be one of {SEVERITIES}, not {severity!r}")
            checked.append((None if line is None else int(line), severity, str(message)))
        self._problems = checked
        self._remark()
        self.problems_changed.emit()

    def problems(self) -> list[Problem]:
        """The problems given to :meth:`set_problems`, as (line, severity, message)."""
        return list(self._problems)

    def marked_lines(self) -> dict[int, str]:
        """Lines marked in the gutter: 1-based line -> ``'error'`` or ``'warning'`` (the
        worse of the line's problems)."""
        return dict(self._marks)

    def problem_text(self, line: int | None) -> str:
        """The tooltip of a line: its problems' messages, one a line ("" for none)."""
        return "\n".join(self._messages.get(line, [])) if line is not None else ""

    def _remark(self) -> None:
        count = self.blockCount()
        self._marks, self._messages = {}, {}
        for line, severity, message in self._problems:
            if line is None or not 1 <= line <= count:
                continue
            self._messages.setdefault(line, []).append(message)
            if self._marks.get(line) != "error":
                self._marks[line] = severity
        self._update_extra_selections()
        self._gutter.update()

    def _update_extra_selections(self) -> None:
        pal = self.palette()
        dark = _is_dark(pal)
        base = pal.color(QPalette.ColorRole.Base)
        selections = []
        if not self.isReadOnly():
            current = QTextEdit.ExtraSelection()
            current.format.setBackground(
                _blend(base, pal.color(QPalette.ColorRole.Highlight), 0.16 if dark else 0.10))
            current.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
            current.cursor = QTextCursor(self.textCursor())
            current.cursor.clearSelection()
            selections.append(current)
        doc = self.document()
        for line, severity in self._marks.items():
            block = doc.findBlockByNumber(line - 1)
            text = block.text()
            indent = len(text) - len(text.lstrip())
            colour = QColor(_PROBLEM_COLORS[dark][severity])
            sel = QTextEdit.ExtraSelection()
            sel.format.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
            sel.format.setUnderlineColor(colour)
            # A faint tint under the text too: at small font sizes the wave alone is
            # easy to miss.
            sel.format.setBackground(_blend(base, colour, 0.18 if dark else 0.10))
            cursor = QTextCursor(block)
            cursor.setPosition(block.position() + indent)
            cursor.setPosition(block.position() + len(text), QTextCursor.MoveMode.KeepAnchor)
            sel.cursor = cursor
            selections.append(sel)
        self.setExtraSelections(selections)
        self._gutter.update()    # the current line's number is drawn stronger

    def viewportEvent(self, event):  # noqa: N802 (Qt API)
        if event.type() == QEvent.Type.ToolTip:
            line = self._line_at_y(event.pos().y())
            self._show_problem_tooltip(line, event.globalPos(), self.viewport())
            return True
        return super().viewportEvent(event)

    def _show_problem_tooltip(self, line: int | None, global_pos, widget: QWidget) -> None:
        text = self.problem_text(line)
        if text:
            QToolTip.showText(global_pos, text, widget)
        else:
            QToolTip.hideText()

    # -- navigation ------------------------------------------------------------------

    def go_to(self, line: int, column: int | None = None) -> None:
        """Put the cursor on a line (and column), centre it in view and focus the editor.

        Parameters
        ----------
        line : int
            1-based line, clamped to the document.
        column : int, optional
            1-based column, clamped to the line; the line's start when left out.
        """
        block = self.document().findBlockByNumber(max(1, min(line, self.blockCount())) - 1)
        offset = 0 if column is None else max(0, min(column - 1, block.length() - 1))
        cursor = QTextCursor(block)
        cursor.setPosition(block.position() + offset)
        self.setTextCursor(cursor)
        self.centerCursor()
        self.setFocus(Qt.FocusReason.OtherFocusReason)

    def set_find_bar(self, bar: "FindBar | None") -> None:
        """The find bar that :meth:`show_find` opens (:class:`EditorPane` sets it)."""
        self._find_bar = bar

    def show_find(self) -> None:
        """Open the find bar (Ctrl+F), filled with the selected text when it is on one
        line; emits :attr:`find_requested` either way."""
        selected = self.textCursor().selectedText()
        # Qt writes a line break in a selection as U+2029: such a selection is no search.
        text = "" if "\u2029" in selected else selected
        if self._find_bar is not None:
            self._find_bar.open(text)
        self.find_requested.emit(text)

    def keyPressEvent(self, event):  # noqa: N802 (Qt API)
        if event.matches(QKeySequence.StandardKey.Find):
            self.show_find()
            return
        super().keyPressEvent(event)


# --------------------------------------------------------------------------------------
# Find
# --------------------------------------------------------------------------------------

#: The find bar counts at most this many matches ("n of 9999+").
MAX_COUNTED = 9999


class FindBar(QWidget):
    """Search an editor's text: a field, Next/Previous, case sensitivity, "n of m".

    Enter finds the next match, Shift+Enter the previous one, Escape hides the bar (and
    gives the focus back to the editor).  Searching wraps around the document's end.

    Parameters
    ----------
    editor : CodeEditor or QPlainTextEdit
    parent : QWidget, optional

    Signals
    -------
    closed()
        The bar was hidden by Escape or :meth:`close_bar`.
    """

    closed = Signal()

    def __init__(self, editor: QPlainTextEdit, parent: QWidget | None = None):
        super().__init__(parent)
        self._editor = editor
        self.field = QLineEdit()
        self.field.setPlaceholderText("Find")
        self.field.setClearButtonEnabled(True)
        self.previous_button = QPushButton("Previous")
        self.next_button = QPushButton("Next")
        self.case_box = QCheckBox("Match case")
        self.status = QLabel("")
        self.status.setMinimumWidth(self.status.fontMetrics().horizontalAdvance("9999 of 9999") + 8)
        self.close_button = QPushButton("✕")
        self.close_button.setFlat(True)
        self.close_button.setToolTip("Close (Esc)")
        self.close_button.setFixedWidth(self.close_button.fontMetrics().horizontalAdvance("✕") + 16)
        # The buttons leave the keyboard focus in the field, where typing goes on.
        for button in (self.previous_button, self.next_button, self.close_button):
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.case_box.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        row = QHBoxLayout(self)
        row.setContentsMargins(4, 2, 4, 2)
        row.addWidget(self.field, 1)
        row.addWidget(self.previous_button)
        row.addWidget(self.next_button)
        row.addWidget(self.case_box)
        row.addWidget(self.status)
        row.addWidget(self.close_button)
        self.next_button.clicked.connect(self.find_next)
        self.previous_button.clicked.connect(self.find_previous)
        self.close_button.clicked.connect(self.close_bar)
        self.case_box.toggled.connect(self._search_again)
        self.field.textEdited.connect(self._search_again)
        self.field.installEventFilter(self)
        escape = QShortcut(QKeySequence(Qt.Key.Key_Escape), self)
        escape.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        escape.activated.connect(self.close_bar)

    def open(self, text: str = "") -> None:
        """Show the bar and focus its field; a non-empty ``text`` replaces the search and
        is searched for from the cursor on."""
        self.show()
        if text:
            self.field.setText(text)
            self._search_again()
        else:
            self._update_status()
        self.field.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.field.selectAll()

    def close_bar(self) -> None:
        """Hide the bar and give the keyboard focus back to the editor."""
        self.hide()
        self._editor.setFocus(Qt.FocusReason.OtherFocusReason)
        self.closed.emit()

    def find_next(self) -> bool:
        """Select the next match after the cursor, wrapping at the end; False if none."""
        return self._find(backward=False)

    def find_previous(self) -> bool:
        """Select the previous match before the cursor, wrapping at the start."""
        return self._find(backward=True)

    def _flags(self, backward: bool = False) -> QTextDocument.FindFlag:
        flags = QTextDocument.FindFlag(0)
        if self.case_box.isChecked():
            flags |= QTextDocument.FindFlag.FindCaseSensitively
        if backward:
            flags |= QTextDocument.FindFlag.FindBackward
        return flags

    def _find(self, backward: bool, cursor: QTextCursor | None = None) -> bool:
        text = self.field.text()
        if not text:
            self._update_status()
            return False
        doc = self._editor.document()
        flags = self._flags(backward)
        found = doc.find(text, cursor if cursor is not None else self._editor.textCursor(), flags)
        if found.isNull():
            # Wrap around: on from the other end of the document.
            start = QTextCursor(doc)
            if backward:
                start.movePosition(QTextCursor.MoveOperation.End)
            found = doc.find(text, start, flags)
        if found.isNull():
            self._update_status()
            return False
        self._editor.setTextCursor(found)
        self._editor.ensureCursorVisible()
        self._update_status()
        return True

    def _search_again(self, *_args) -> None:
        """The search changed (typing, case): look again from the current match's start,
        so that a match that still fits stays where it is."""
        cursor = QTextCursor(self._editor.textCursor())
        cursor.setPosition(cursor.selectionStart())
        if not self._find(backward=False, cursor=cursor):
            # Nothing found: drop the old selection, which no longer matches.
            plain = self._editor.textCursor()
            plain.clearSelection()
            self._editor.setTextCursor(plain)

    def match_positions(self, limit: int | None = None) -> list[int]:
        """Start positions of the matches of the search in the document, in order.

        Parameters
        ----------
        limit : int, optional
            Stop after this many (counting is a search of the whole document).
        """
        text = self.field.text()
        if not text:
            return []
        doc = self._editor.document()
        flags = self._flags()
        positions: list[int] = []
        cursor = doc.find(text, 0, flags)
        while not cursor.isNull() and (limit is None or len(positions) < limit):
            positions.append(cursor.selectionStart())
            cursor = doc.find(text, cursor, flags)
        return positions

    def _update_status(self) -> None:
        if not self.field.text():
            self.status.setText("")
            return
        # Counted again on every step (the text may have changed), so bounded: one
        # letter in a long file must not make typing slow.
        positions = self.match_positions(MAX_COUNTED + 1)
        if not positions:
            self.status.setText("not found")
            return
        total = f"{MAX_COUNTED}+" if len(positions) > MAX_COUNTED else str(len(positions))
        cursor = self._editor.textCursor()
        here = cursor.selectionStart() if cursor.hasSelection() else -1
        if here in positions[:MAX_COUNTED]:
            self.status.setText(f"{positions.index(here) + 1} of {total}")
        else:
            self.status.setText(f"{total} found")

    def eventFilter(self, watched, event):  # noqa: N802 (Qt API)
        if watched is self.field and event.type() == QEvent.Type.KeyPress:
            key = event.key()
            if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
                if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                    self.find_previous()
                else:
                    self.find_next()
                return True
            if key == Qt.Key.Key_Escape:
                self.close_bar()
                return True
        return super().eventFilter(watched, event)


class EditorPane(QWidget):
    """A :class:`CodeEditor` with its :class:`FindBar` below it (hidden until Ctrl+F).

    Attributes
    ----------
    editor : CodeEditor
    find_bar : FindBar
    """

    def __init__(self, parent: QWidget | None = None, language: str = "text"):
        super().__init__(parent)
        self.editor = CodeEditor(self, language)
        self.find_bar = FindBar(self.editor, self)
        self.find_bar.hide()
        self.editor.set_find_bar(self.find_bar)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.editor, 1)
        layout.addWidget(self.find_bar)
        # F3 / Shift+F3 (or the platform's keys) step through matches from anywhere in
        # the pane, once there is something to find.
        for keys, step in ((QKeySequence.StandardKey.FindNext, self.find_bar.find_next),
                           (QKeySequence.StandardKey.FindPrevious, self.find_bar.find_previous)):
            shortcut = QShortcut(QKeySequence(keys), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(step)

    def load_file(self, path: str | Path) -> None:
        """Show a kernel file in the editor (see :meth:`CodeEditor.load_file`)."""
        self.editor.load_file(path)
