"""The source a run builds: a kernel file and the files it ``#include``\\ s, read once.

A run reads its user kernel files when it starts (:func:`read_kernel_source`) and carries
the texts to every engine (:attr:`engine.run.runner.Plan.kernel_sources`): an engine started
later, or restarted after a fault, registers and builds those texts, never the files as
they are by then. A file edited during the run is noticed (:meth:`KernelSource.changed`)
and said on the records; the run goes on with the version it started with.

A build sees the included files through a staging folder (:func:`staged`): the texts
laid out as they were, relative to the kernel and to each other, in a private temporary
folder that is the build's include path; the compiler's messages are mapped back to the
user's paths (:meth:`Staged.user_paths`), so that an error inside an included file names
that file and its line.
"""
from __future__ import annotations

import os
import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from engine.common import files
from engine.common.files import TEXT_FILE_LIMIT, read_bytes, read_text
from engine.kernels.kernel_file import KERNEL_FILE_LIMIT, KernelFileError

#: ``#include "name"`` or ``#include <name>`` at the start of a line.
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*(?:"([^"\n]+)"|<([^>\n]+)>)', re.MULTILINE)
#: At most this many included files are read for one kernel (a header library that
#: includes itself in circles, or thousands of headers, is cut off there).
MAX_INCLUDES = 256
#: At most this many bytes of included text are read for one kernel.
MAX_INCLUDE_BYTES = 4 * TEXT_FILE_LIMIT


class SourceError(ValueError):
    """A kernel file that cannot be read (the message names it and says why); ``path`` and
    ``line`` say where, when it is an ``#include`` (``path:line: message``)."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        self.message, self.path, self.line = message, path, line
        super().__init__(f"{path}:{line}: {message}" if path and line else message)


@dataclass(frozen=True)
class Unreadable:
    """A kernel file a run could not read when it started (or a file it includes)."""

    path: str
    #: ``path: why`` or ``includer:line: why``, in the user's words.
    problem: str


def _stamp(path: str) -> tuple[int, int] | None:
    """(mtime in ns, size) of ``path``, or None where it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_mtime_ns, st.st_size


@dataclass(frozen=True)
class SourceFile:
    """One file as read: its absolute path (as a compiler names it) and its text."""

    path: str
    text: str
    #: (mtime in ns, size) when read: a file whose stamp is the same is not read again to
    #: tell whether it changed.
    stamp: tuple[int, int] | None = None

    def changed(self) -> bool:
        """Whether the file on disk now differs from :attr:`text` (or is gone)."""
        now = _stamp(self.path)
        if now is not None and now == self.stamp:
            return False
        try:
            return read_text(self.path, self.path, SourceError) != self.text
        except SourceError:
            return True


@dataclass(frozen=True)
class KernelSource:
    """A kernel file and the files it includes, as a run read them when it started."""

    main: SourceFile
    includes: tuple[SourceFile, ...] = ()

    @property
    def path(self) -> str:
        return self.main.path

    @property
    def text(self) -> str:
        return self.main.text

    def changed(self) -> list[str]:
        """The files (this one, its includes) that differ on disk now from what was read."""
        return [f.path for f in (self.main, *self.includes) if f.changed()]


def _read(path: str, label: str | None = None) -> SourceFile:
    stamp = _stamp(path)
    return SourceFile(path, read_text(path, label or f"the kernel file {path}", SourceError),
                      stamp)


def _exists(path: str) -> bool:
    try:
        return os.path.lexists(path)
    except (OSError, ValueError):          # a NUL or an over-long name: nothing to open
        return False


def find_includes(path: str | Path, text: str,
                  extra_dirs: tuple[str | Path, ...] = ()) -> tuple[SourceFile, ...]:
    """The files ``text`` (the kernel at ``path``) includes, and those they include, read
    now: a quoted name is looked up beside the file that includes it, then in the
    kernel's folder (a build's include path); ``<name>`` in the kernel's folder only.
    Those are returned (a build stages them). Names found only in ``extra_dirs`` (the
    lab's own ``cuda/``, a compiler's working folder) and absolute names are checked but
    not returned: the compiler opens them where they are. Names found nowhere (system
    headers) are left to the compiler. A name found that is no readable text file (a
    pipe, a folder, a loop of links) is a :class:`SourceError` at the ``#include``'s file
    and line: a compiler would wait for ever on the pipe, or fail without saying which."""
    main = os.path.abspath(path)
    folder = os.path.dirname(main)
    found: dict[str, SourceFile] = {}
    checked: set[str] = set()
    total = 0
    todo = [(main, text, True)]
    while todo:
        current, body, staging = todo.pop(0)
        for m in INCLUDE.finditer(body):
            name = m.group(1) or m.group(2)
            spelled = m.group(0).split("include", 1)[1].strip()
            line = body.count("\n", 0, m.start()) + 1
            if os.path.isabs(name):
                dirs, staged_here = [""], False
            else:
                dirs = ([os.path.dirname(current)] if m.group(1) else []) + [folder]
                staged_here = staging
            candidates = [(os.path.normpath(os.path.join(d, name)), staged_here)
                          for d in dict.fromkeys(dirs)]
            candidates += [(os.path.normpath(os.path.join(str(d), name)), False)
                           for d in extra_dirs if not os.path.isabs(name)]
            for candidate, keep in candidates:
                if candidate == main or candidate in found or candidate in checked:
                    break
                if len(found) + len(checked) >= MAX_INCLUDES or total >= MAX_INCLUDE_BYTES:
                    return tuple(found.values())
                if not _exists(candidate):
                    continue
                label = f"#include {spelled} ({candidate})"
                try:     # a file only checked may be in any encoding: only its includes matter
                    f = _read(candidate, label) if keep else SourceFile(candidate, read_bytes(
                        candidate, label, SourceError).decode("utf-8", "replace"))
                except SourceError as exc:
                    raise SourceError(str(exc), current, line) from None
                total += len(f.text)
                if keep:
                    found[candidate] = f
                else:
                    checked.add(candidate)
                todo.append((candidate, f.text, keep))
                break
    return tuple(found.values())


def read_kernel_source(path: str | Path) -> KernelSource:
    """The kernel file at ``path`` and its includes, read now; raises :class:`SourceError`
    when the kernel file, or a file it includes, cannot be read (:func:`find_includes`)."""
    main = _read(os.path.abspath(path))
    return KernelSource(main, find_includes(main.path, main.text))


#: The sources registered in this process from a run's texts, by path (see
#: :func:`includes_of`).
_REGISTERED: dict[str, KernelSource] = {}


def remember(source: KernelSource) -> None:
    """Note that ``source`` was registered here: its builds use its includes as read."""
    _REGISTERED[source.path] = source


def includes_of(path: str | Path, text: str) -> tuple[SourceFile, ...]:
    """The includes a build of ``text`` (the kernel at ``path``) sees: those read with it
    when a run registered that very text here, else the files as they are now (a kernel
    registered without a run: the editor's check, the lab's own kernels)."""
    known = _REGISTERED.get(os.path.abspath(path))
    if known is not None and known.text == text:
        return known.includes
    return find_includes(path, text)


@dataclass(frozen=True)
class Staged:
    """A kernel's text and includes written out for one build."""

    #: The kernel's folder as staged: the build's include path.
    folder: Path
    #: The kernel's text as staged (a compiler that reads a file compiles this one).
    main: Path
    #: (staged path, the user's path), longest staged path first.
    names: tuple[tuple[str, str], ...]

    def user_paths(self, log: str) -> str:
        """``log`` with every staged path replaced by the user's own."""
        for staged_path, user_path in self.names:
            log = log.replace(staged_path, user_path)
        return log

    def user_path(self, name: str) -> str | None:
        """The user's path of a staged file name, or None when ``name`` is not one."""
        return next((u for s, u in self.names if s == name), None)


@contextmanager
def staged(path: str | Path, text: str, includes: tuple[SourceFile, ...]) -> Iterator[Staged]:
    """The kernel ``text`` (of ``path``) and its ``includes`` written into a private
    temporary folder, laid out as they are around the kernel's folder (``../common/x.h``
    stays one folder up), for the time of one build; removed afterwards."""
    main = os.path.abspath(path)
    folder = os.path.dirname(main)
    rels = [os.path.relpath(f.path, folder) for f in includes]
    # The staged tree mirrors the kernel's folder from as many levels up as the includes
    # reach, keeping those folders' names, so that each relative name resolves as it did.
    ups = max((_ups(r) for r in rels), default=0)
    parts = Path(folder).parts
    tail = parts[max(1, len(parts) - ups):] if ups else ()
    with tempfile.TemporaryDirectory(prefix="matmul-lab-src-") as tmp:
        root = Path(tmp)
        staged_folder = root.joinpath("src", *tail)
        staged_folder.mkdir(parents=True)
        names = [(str(staged_folder / os.path.basename(main)), main)]
        (staged_folder / os.path.basename(main)).write_text(text, encoding="utf-8")
        for f, rel in zip(includes, rels):
            target = Path(os.path.normpath(staged_folder / rel))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(f.text, encoding="utf-8")
            names.append((str(target), f.path))
        names.append((str(staged_folder), folder))
        names.sort(key=lambda pair: len(pair[0]), reverse=True)
        yield Staged(staged_folder, staged_folder / os.path.basename(main), tuple(names))


def _ups(rel: str) -> int:
    """How many folders up a normalised relative path starts (``../../x`` → 2)."""
    n = 0
    for part in Path(rel).parts:
        if part != "..":
            break
        n += 1
    return n


# --- reading a kernel file and checking its includes (the backends, the checker, the editor)
class _Refused(ValueError):
    """A file or an option refused: engine.common.files' message before it is placed at a file
    and line, or the command line's."""


def read_kernel_text(path: str | Path, shown: str | Path | None = None) -> str:
    """The text of the kernel file at ``path``, or :class:`KernelFileError` naming ``shown``
    (default ``path``): through :func:`engine.common.files.read_text`, so a pipe, a device, a
    folder, a loop of links, a huge file or text that is not UTF-8 is a message, never a
    hang; a NUL byte (a binary file) is one too."""
    shown = Path(shown if shown is not None else path)
    try:
        text = files.read_text(path, "the file", _Refused, KERNEL_FILE_LIMIT)
    except _Refused as exc:
        raise KernelFileError(shown, None, str(exc)) from None
    return check_kernel_text(text, shown)


def check_kernel_text(text: str, shown: str | Path) -> str:
    """``text`` if it can be a kernel's source, else :class:`KernelFileError`: a NUL byte
    means a binary file, which no compiler reads as source."""
    nul = text.find("\0")
    if nul >= 0:
        raise KernelFileError(Path(shown), text.count("\n", 0, nul) + 1,
                              "a NUL byte: this is a binary file, not a kernel's source text")
    return text


def check_includes(text: str, shown: str | Path, folder: Path | None,
                   include_dirs: Sequence[Path] = ()) -> None:
    """Raise :class:`KernelFileError` (``file:line`` of the ``#include``) when a file the
    compiler would open for one of ``text``'s includes, or theirs, is not a readable
    regular file: a compiler opening a named pipe waits for ever, a device never ends, a
    link loop or a folder fails without saying which include.

    ``text`` is the kernel ``shown`` (in messages) whose folder is ``folder`` (None:
    ``shown``'s); names are looked for as :func:`find_includes` does (the one
    scanner of includes, which the builds use too), then in ``include_dirs``."""
    main = os.path.join(folder, os.path.basename(shown)) if folder is not None else str(shown)
    main = os.path.abspath(main)
    try:
        find_includes(main, text, tuple(include_dirs))
    except SourceError as exc:
        where = shown if exc.path in (None, main) else exc.path
        raise KernelFileError(Path(where), exc.line, exc.message) from None


def working_dirs() -> list[Path]:
    """The process's working folder, where an OpenCL compiler may also look for a quoted
    include of a program built from memory; none when it was removed (a Ray worker's)."""
    try:
        return [Path.cwd()]
    except OSError:
        return []
