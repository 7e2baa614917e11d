"""``python main.py new-kernel --from VARIANT PATH``: an editable copy of a kernel file.

The copy keeps the original's code and header, renamed (``name`` from the file name
unless ``--name`` says otherwise) and with ``role = "user"``, so it runs next to the
original: ``python main.py bench --kernel PATH --variants VARIANT``. Any helper header
the original includes (``cuda/common.cuh``) is found through the include path the
backend passes, so the copy compiles wherever it is written.
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


def make_copy(variant: str, path: Path, name: str | None = None, force: bool = False) -> Path:
    """Write ``variant``'s kernel file to ``path`` as a user kernel named ``name``."""
    v = registry.get(variant)
    if v.library or not v.headers:
        raise ValueError(f"{variant} is a library reference ({v.sources}), not a kernel file")
    want = {".cu": "cuda", ".cl": "opencl"}.get(path.suffix)
    header = next((h for h in v.headers if h.backend == want), None) if want else v.headers[0]
    if header is None:
        raise ValueError(f"{variant} has no {want} kernel (it has {', '.join(v.sources)})")
    if not path.suffix:
        path = path.with_suffix(header.path.suffix)
    elif path.suffix != header.path.suffix:
        raise ValueError(f"{path.name}: a {header.backend} kernel file ends in {header.path.suffix}")
    name = name or re.sub(r"[^a-z0-9_]", "_", path.stem.lower()).strip("_")
    if not NAME_RE.match(name or ""):
        raise ValueError(f"'{name}' is not a kernel name (lower-case letters, digits and _)")
    if name in registry.REGISTRY:
        raise ValueError(f"the name '{name}' is taken by a built-in variant; choose another "
                         "with --name")
    if path.exists() and not force:
        raise ValueError(f"{path} exists (--force to replace it)")
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
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
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
