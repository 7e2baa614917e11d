"""User text on a terminal, printed as the user wrote it.

File names, kernel titles, variant names and error messages quoting them go to a terminal
through rich, which reads ``[bold]`` as markup and ``:smile:`` as an emoji, and a terminal
obeys the escape codes in them (``\\x1b[2J`` clears the screen, ``\\r`` overwrites the
line, U+202E turns the rest of the line around). Everything the command line prints goes
through one of these:

* :func:`visible` makes control characters visible (``\\x1b``, ``\\r``, ``\\u202e``):
  for plain ``print`` and for messages of other tools (argparse).
* :func:`literal` is :func:`visible` escaped for rich markup: the form to put user text
  into a rich string or a table cell.
* :func:`console` makes the rich console they are printed on: emoji codes are left as
  text (rich has no escape for them, so they are off for the whole console).
"""
from __future__ import annotations

import re

#: Characters shown by their escape: C0 and C1 controls, DEL, the line and paragraph
#: separators, the bidirectional overrides and isolates that reorder what a line shows,
#: and lone surrogates (bytes of a file name that are not UTF-8: they cannot be printed).
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069"
                     "\ufeff\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _shown(match: re.Match) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object, keep_newlines: bool = False) -> str:
    """``text`` (any object, as ``str()``) with every control character written as its
    escape: ``"a\\x1b[2Jb"`` → ``a\\x1b[2Jb`` with a literal backslash. With
    ``keep_newlines`` a newline stays a line break (messages of several lines); a lone
    ``\\r`` never does."""
    text = str(text)
    if keep_newlines:
        return "\n".join(_HIDDEN.sub(_shown, line) for line in text.split("\n"))
    return _HIDDEN.sub(_shown, text)


def literal(text: object, keep_newlines: bool = False) -> str:
    """``text`` for a rich markup string or table cell: control characters visible
    (:func:`visible`) and square brackets escaped, so it prints as written on a
    :func:`console` (emoji off)."""
    from rich.markup import escape  # noqa: PLC0415  (rich loads only for terminal output)

    shown = visible(text, keep_newlines)
    # Backslashes at the end would escape whatever tag follows ("[/red]"), and rich's own
    # remedy doubles them where nothing follows: write them doubled before an empty tag,
    # which shows each once in any context.
    body = shown.rstrip("\\")
    trailing = len(shown) - len(body)
    return escape(body) + ("\\" * (2 * trailing) + "[dim][/dim]" if trailing else "")


def console(stderr: bool = False, pipe_width: int | None = 160):
    """A rich console for the command line: emoji codes printed as text, no highlighting
    of numbers and names inside user text. Written to a pipe or a log file, it is
    ``pipe_width`` columns wide (None: rich's 80), so tables are not squeezed."""
    from rich.console import Console  # noqa: PLC0415

    con = Console(stderr=stderr, emoji=False, highlight=False)
    if pipe_width is not None and not con.is_terminal:
        con = Console(stderr=stderr, emoji=False, highlight=False, width=pipe_width)
    return con
