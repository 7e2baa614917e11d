"""``python main.py new-kernel``: an editable copy of a kernel file (the library:
:mod:`engine.kernels.new_kernel`)."""
from __future__ import annotations

import shlex
import sys
from typing import Sequence

from cli.args import Parser
from cli.exits import EXIT_BAD_INPUT, EXIT_OK
from engine.kernels.kernel_file import shown_text
from engine.kernels.new_kernel import _make_copy, check_new_path

def run_new_kernel(argv: Sequence[str]) -> int:
    ap = Parser(prog="main.py new-kernel", description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="source", required=True, metavar="VARIANT",
                    help="the built-in variant to start from (python main.py bench --list)")
    ap.add_argument("path", help="where to write it (.cu for CUDA, .cl for OpenCL)")
    ap.add_argument("--name", default=None, help="the new kernel's name (default: from the file name)")
    ap.add_argument("--force", action="store_true",
                    help="replace an existing file (never through a symbolic link)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:              # argparse printed why
        return EXIT_OK if exc.code == 0 else EXIT_BAD_INPUT
    try:
        out, h = _make_copy(args.source, check_new_path(args.path), args.name, force=args.force)
    except (KeyError, ValueError) as exc:           # KernelFileError, NewKernelError too
        msg = exc.args[0] if isinstance(exc, KeyError) else str(exc)
        print(f"error: {shown_text(str(msg))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    command = shown_text(shlex.quote(str(out)))        # pasted into a shell as it is shown
    print(f"wrote {shown_text(str(out))} (kernel '{h.name}', from {args.source}); run it with:\n"
          f"  python main.py bench --backend {h.backend} --kernel {command} --variants {args.source}")
    return EXIT_OK
