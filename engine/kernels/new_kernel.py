"""``python main.py new-kernel --from VARIANT PATH``: an editable copy of a kernel file.

The copy keeps the original's code and header, renamed (``name`` from the file name
unless ``--name`` says otherwise) and with ``role = "user"``, so it runs next to the
original: ``python main.py bench --kernel PATH --variants VARIANT``. Any helper header
the original includes (``cuda/lab_ptx.cuh``) is found through the include path the
backend passes (``-I`` of the repo's ``cuda/``), so the copy compiles wherever it is
written.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from engine.kernels import registry
from engine.common.files import write_atomic
from engine.kernels.sources import read_kernel_text
from engine.kernels.kernel_file import FENCE, NAME_RE, KernelHeader, parse_header, shown_text


class NewKernelError(ValueError):
    """A new kernel that cannot be made: a name, a path or a write, in words."""


def template_header(variant: str, suffix: str | None = None):
    """The header of ``variant``'s kernel file for ``suffix`` (``.cu``/``.cl``; None: its first)."""
    v = registry.get(variant)
    if v.library or not v.headers:
        raise ValueError(f"{variant} is a library reference ({v.sources}), not a kernel file")
    want = {".cu": "cuda", ".cl": "opencl"}.get(suffix or "")
    header = next((h for h in v.headers if h.backend == want), None) if want else v.headers[0]
    if header is None:
        raise ValueError(f"{variant} has no {want} kernel (it has {', '.join(v.sources)})")
    return header


def check_new_name(name: str) -> None:
    """Raise ValueError unless ``name`` can name a new user kernel."""
    # fullmatch: NAME_RE's "$" would let a trailing newline through into the header's TOML.
    if not NAME_RE.fullmatch(name or ""):
        raise ValueError(f"'{shown_text(name or '')}' is not a kernel name (lower-case letters, "
                         "digits and _, not starting with a digit)")
    old = registry.REGISTRY.get(name)
    if old is not None and old.role != "user":
        raise ValueError(f"the name '{name}' is taken by a built-in variant; choose another")


def copy_text(variant: str, name: str, suffix: str | None = None) -> str:
    """``variant``'s kernel file as the text of a user kernel named ``name``: the same
    code and header, with ``role = "user"`` and no place in the ladder."""
    header = template_header(variant, suffix)
    check_new_name(name)
    lines = read_kernel_text(header.path).split("\n")
    start = header.first_line - 1                       # the header's first TOML line
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == FENCE)
    body = []
    for line in lines[start:end]:
        if re.match(r"\s*(role|order|newcomer)\s*=", line):
            continue                                    # a user kernel is no rung of the ladder
        if re.match(r"\s*name\s*=", line):
            body += [f'name = "{name}"', f"# Copied from {variant} ({header.path.name}): edit freely.",
                     'role = "user"']
            continue
        body.append(line)
    lines[start:end] = body
    return "\n".join(lines)


def name_from_path(path: Path) -> str:
    """A kernel name from a file name: ``My-Tiled.cu`` → ``my_tiled``."""
    return re.sub(r"[^a-z0-9_]", "_", path.stem.lower()).strip("_")


def check_new_path(text: str) -> Path:
    """``text`` (as typed) as the path of a new kernel file, or :class:`NewKernelError`:
    empty, a folder (it ends in ``/`` or is one), or a file name with control characters
    or bytes that are no text (a name every later listing would show garbled)."""
    if not text or not text.strip():
        raise NewKernelError("the path is empty: give the new kernel file's name (e.g. "
                             "my_kernel.cu)")
    if text.endswith(("/", os.sep)) or os.path.isdir(text):
        raise NewKernelError(f"{shown_text(text)} is a folder: give the new file's name in it "
                             f"(e.g. {shown_text(os.path.join(text, 'my_kernel.cu'))})")
    name = os.path.basename(text)
    odd = next((ch for ch in name if shown_text(ch) != ch), None)
    if odd is not None:
        raise NewKernelError(f"the file name {shown_text(name)} holds {shown_text(odd)}, a control "
                             "character, a direction mark or a byte that is not text; choose a "
                             "plain name")
    return Path(text)


def _missing_folder(folder: Path) -> str | None:
    """Why ``folder`` cannot be made: the first part of it that exists and is not a folder."""
    for part in [folder, *folder.parents]:
        if os.path.lexists(part):
            return None if part.is_dir() else f"{part} is not a folder"
    return None


def _prepare(variant: str, path: Path, name: str | None, force: bool
             ) -> tuple[Path, str, KernelHeader]:
    """(the file to write, its text, its header), every check done before anything is written."""
    header = template_header(variant, Path(path).suffix or None)
    if not path.suffix:
        path = path.with_suffix(header.path.suffix)
    elif path.suffix != header.path.suffix:
        raise ValueError(f"{shown_text(path.name)}: a {header.backend} kernel file ends in "
                         f"{header.path.suffix}")
    if name is None:
        name = name_from_path(path)
        if not NAME_RE.fullmatch(name):
            raise NewKernelError(f"no kernel name can be made from the file name "
                                 f"{shown_text(path.name)} (lower-case letters, digits and _, not "
                                 "starting with a digit): give one with --name")
    try:
        check_new_name(name)
    except ValueError as exc:
        raise ValueError(f"{exc} with --name" if "taken" in str(exc) else str(exc)) from None
    if os.path.lexists(path) and not force:       # a dangling link exists too
        raise NewKernelError(f"{shown_text(str(path))} exists (--force to replace it)")
    text = copy_text(variant, name, path.suffix)
    new = parse_header(path, text)                      # the copy must read back
    return path, text, new


def make_copy(variant: str, path: Path, name: str | None = None, force: bool = False) -> Path:
    """Write ``variant``'s kernel file to ``path`` as a user kernel named ``name``.

    The file is written whole or not at all (:func:`engine.common.files.write_atomic`); with
    ``force`` a regular file is replaced, but a symbolic link is refused, never written
    through (its target is some other file of the user's), and so are folders, pipes and
    devices."""
    return _make_copy(variant, Path(path), name, force)[0]


def _make_copy(variant: str, path: Path, name: str | None, force: bool
               ) -> tuple[Path, KernelHeader]:
    path, text, header = _prepare(variant, path, name, force)
    why = _missing_folder(path.parent)
    if why:
        raise NewKernelError(f"the folder {shown_text(str(path.parent))} cannot be made: {shown_text(why)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NewKernelError(f"the folder {shown_text(str(path.parent))} cannot be made: "
                             f"{exc.strerror or exc}") from None
    write_atomic(path, text, shown_text(str(path)), NewKernelError)
    return path, header


