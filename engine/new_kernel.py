"""``python main.py new-kernel --from VARIANT PATH``: an editable copy of a kernel file.

The copy keeps the original's code and header, renamed (``name`` from the file name
unless ``--name`` says otherwise) and with ``role = "user"``, so it runs next to the
original: ``python main.py bench --kernel PATH --variants VARIANT``. Any helper header
the original includes (``cuda/lab_ptx.cuh``) is found through the include path the
backend passes (``-I`` of the repo's ``cuda/``), so the copy compiles wherever it is
written.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Sequence

from . import registry
from .cli import EXIT_BAD_INPUT, EXIT_OK
from .kernel_file import FENCE, NAME_RE, KernelFileError, parse_header


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
    if not NAME_RE.match(name or ""):
        raise ValueError(f"'{name}' is not a kernel name (lower-case letters, digits and _)")
    old = registry.REGISTRY.get(name)
    if old is not None and old.role != "user":
        raise ValueError(f"the name '{name}' is taken by a built-in variant; choose another")


def copy_text(variant: str, name: str, suffix: str | None = None) -> str:
    """``variant``'s kernel file as the text of a user kernel named ``name``: the same
    code and header, with ``role = "user"`` and no place in the ladder."""
    header = template_header(variant, suffix)
    check_new_name(name)
    lines = header.path.read_text(encoding="utf-8").split("\n")
    start = header.first_line - 1                       # the header's first TOML line
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == FENCE)
    body = []
    for line in lines[start:end]:
        if re.match(r"\s*(role|order)\s*=", line):
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


def make_copy(variant: str, path: Path, name: str | None = None, force: bool = False) -> Path:
    """Write ``variant``'s kernel file to ``path`` as a user kernel named ``name``."""
    header = template_header(variant, Path(path).suffix or None)
    if not path.suffix:
        path = path.with_suffix(header.path.suffix)
    elif path.suffix != header.path.suffix:
        raise ValueError(f"{path.name}: a {header.backend} kernel file ends in {header.path.suffix}")
    name = name or name_from_path(path)
    try:
        check_new_name(name)
    except ValueError as exc:
        raise ValueError(f"{exc} with --name" if "taken" in str(exc) else str(exc)) from None
    if path.exists() and not force:
        raise ValueError(f"{path} exists (--force to replace it)")
    text = copy_text(variant, name, path.suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    parse_header(path)                                  # the copy must read back
    return path


def run_new_kernel(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="main.py new-kernel", description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="source", required=True, metavar="VARIANT",
                    help="the built-in variant to start from (python main.py bench --list)")
    ap.add_argument("path", help="where to write it (.cu for CUDA, .cl for OpenCL)")
    ap.add_argument("--name", default=None, help="the new kernel's name (default: from the file name)")
    ap.add_argument("--force", action="store_true", help="replace an existing file")
    args = ap.parse_args(argv)
    try:
        out = make_copy(args.source, Path(args.path), args.name, force=args.force)
    except (KeyError, ValueError, KernelFileError, OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) else str(exc)
        print(f"error: {msg}", file=sys.stderr)
        return EXIT_BAD_INPUT
    h = parse_header(out)
    print(f"wrote {out} (kernel '{h.name}', from {args.source}); run it with:\n"
          f"  python main.py bench --backend {h.backend} --kernel {out} --variants {args.source}")
    return EXIT_OK
