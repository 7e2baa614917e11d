"""``python main.py check-kernel``: compile a kernel file for every parameter
combination without running it (the library: :mod:`engine.measure.kernel_check`)."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Sequence

from cli.args import Number, Parser, WholeNumber
from cli.exits import EXIT_BAD_INPUT, EXIT_OK
from engine.common.units import format_bytes
from engine.kernels.kernel_file import KERNEL_FILE_LIMIT, KernelFileError, shown_text
from engine.common.dtypes import ELEMENT_NAMES
from engine.kernels.sources import _Refused, check_kernel_text, read_kernel_text
from engine.measure.kernel_check import (DEFAULT_ARCH, DEFAULT_TIMEOUT_S, MAX_DEVICE, MAX_TIMEOUT_S,
                                         MAX_WORKERS, check_kernel)

def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="main.py check-kernel",
        description="Compile a kernel file for every parameter combination of its header, "
                    "without running it: registers, shared memory, spills and launch limits "
                    "per combination, and the compiler's messages at their lines. Exit 0 when "
                    "every combination compiles, 2 otherwise.")
    p.add_argument("path", help="the kernel file (.cu, .cl or a Triton .py); with --stdin, the name its "
                                "messages use")
    p.add_argument("--backend", choices=("cuda", "opencl"), default=None,
                   help="default: the file's own (its suffix or header)")
    p.add_argument("--dtype", choices=ELEMENT_NAMES, default=None,
                   help="the input type built (default: the first of those the kernel's header lists)")
    p.add_argument("--layout", choices=("kn", "nk"), default="kn",
                   help="B's layout built (default kn, B as K×N; nk: B as N×K, where the header "
                        "lists it)")
    p.add_argument("--arch", default=None,
                   help=f"CUDA target architecture (default {DEFAULT_ARCH}; sm_90a for "
                        "wgmma kernels)")
    p.add_argument("--device", type=WholeNumber(0, MAX_DEVICE, "device index"), default=0,
                   help="OpenCL device index (over all platforms, as bench --list shows)")
    p.add_argument("--display-path", default=None, metavar="P",
                   help="the path messages name (default PATH)")
    p.add_argument("--stdin", action="store_true",
                   help="read the kernel's text from standard input (an editor's unsaved buffer)")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON (and nothing else) on standard output")
    p.add_argument("--workers", type=WholeNumber(1, MAX_WORKERS), default=None,
                   help=f"builds at once, 1 to {MAX_WORKERS} (default min(4, cores))")
    p.add_argument("--timeout", type=Number(0, MAX_TIMEOUT_S), default=DEFAULT_TIMEOUT_S,
                   help="seconds one build may take")
    return p


def _check_options(args) -> None:
    """Refuse option values that would be used in silence as something else (the numbers
    are checked as argparse reads them: :mod:`cli.args`)."""
    if args.arch is not None and not re.fullmatch(r"sm_\d+[a-z]?", args.arch):
        raise _Refused(f"--arch must look like sm_90 or sm_90a, not '{shown_text(args.arch, 40)}'")
    if not args.path.strip():
        raise _Refused("PATH is empty: name the kernel file (.cu or .cl)")
    if args.display_path is not None and not args.display_path.strip():
        raise _Refused("--display-path is empty: give the path messages should name")


def _read_stdin(shown: str) -> str:
    """The kernel's text from standard input (bounded, UTF-8, no NUL bytes)."""
    if sys.stdin is None:
        raise _Refused("--stdin: there is no standard input to read")
    limit = KERNEL_FILE_LIMIT
    stream = getattr(sys.stdin, "buffer", sys.stdin)    # bytes, unless a text stream stands in
    try:
        data = stream.read(limit + 1)
    except OSError as exc:
        raise _Refused(f"--stdin: standard input cannot be read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise _Refused(f"--stdin: the text is more than {format_bytes(limit)}; it is "
                       "not a kernel")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise KernelFileError(Path(shown), line, f"the text is not UTF-8 (byte {exc.start})") from None
    return check_kernel_text(text, shown)


def run_check_kernel(argv: Sequence[str]) -> int:
    """``python main.py check-kernel``; returns the exit code (0 ok, 2 not)."""

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_OK if exc.code == 0 else EXIT_BAD_INPUT
    try:
        _check_options(args)
        # The file is read here, once, so that a path that cannot be a kernel file (a pipe,
        # a device, a folder, a loop of links, a huge or binary file) is one line and exit 2;
        # the check compiles this text. --json keeps such problems in its report (the GUI's).
        text = (_read_stdin(args.display_path or args.path) if args.stdin
                else None if args.json else read_kernel_text(args.path))
    except (_Refused, KernelFileError) as exc:
        print(f"error: {shown_text(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    kwargs = dict(text=text, backend=args.backend, dtype=args.dtype, arch=args.arch,
                  device=args.device, display_path=args.display_path, workers=args.workers,
                  timeout=args.timeout, layout=args.layout)
    if args.json:
        # stdout is the JSON alone: whatever a compiler library prints goes to stderr.
        sys.stdout.flush()
        saved = os.dup(1)
        try:
            os.dup2(2, 1)
            report = check_kernel(args.path, **kwargs)
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        print(json.dumps(report.to_dict(), indent=1))
    else:
        report = check_kernel(args.path, **kwargs)
        print(report.text())              # shown_text(): the user's names and text, literally
    return EXIT_OK if report.ok else EXIT_BAD_INPUT
