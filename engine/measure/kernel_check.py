"""Check a kernel file without running it: the engine side of the editor's *Compile* button.

:func:`check_kernel` compiles one kernel file (or the editor's unsaved text) for every
parameter combination of its header's space, exactly as the backend would (the same
options: :func:`engine.measure.backends.cuda.nvcc_options`, :func:`engine.measure.backends.opencl.opencl_options`),
and returns a :class:`CheckReport`: per combination the resources the compiler reports
and whether a launch of the header's block size could work, and the compiler's messages
as :class:`Diagnostic` s (file, line, column, severity), grouped over the combinations
they occurred in. Nothing here needs a GPU: CUDA builds are plain ``nvcc`` processes for
a target architecture (``sm_90`` unless told), OpenCL builds go to any OpenCL device
(PoCL on the CPU will do).

No user file makes it raise: a bad header, a missing compiler, no OpenCL device, a
timeout all end up in the report (``header_error``, ``problem``, a combination's
``problems``).

The command line (``python main.py check-kernel PATH``) is :func:`run_check_kernel`;
``--json`` prints :meth:`CheckReport.to_dict` and nothing else on stdout, which is what
the GUI reads.
"""
from __future__ import annotations

import os
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from engine.kernels.kernel_file import (BACKEND_OF_SUFFIX, ExpressionError, KernelFileError,
                                        uses_shape, parse_header, shown_text)
from engine.kernels.sources import check_includes, check_kernel_text, read_kernel_text, working_dirs
from engine.common.dtypes import ELEMENT_NAMES
from engine.kernels.registry import Variant, params_to_str, variant_from_headers

#: The architecture CUDA kernels are checked for when none is named (the lab's H100/H200).
DEFAULT_ARCH = "sm_90"
#: Seconds one build may take before it is stopped (a problem of that combination).
DEFAULT_TIMEOUT_S = 120.0
#: The longest ``--timeout`` (a day): more is a typing mistake.
MAX_TIMEOUT_S = 86400.0
#: The most builds ``--workers`` may run at once: each is an nvcc or a compiler thread of
#: hundreds of MB; more than this is a typing mistake, not a faster check.
MAX_WORKERS = 64
#: The highest ``--device`` index taken (a device that does not exist is said by the check).
MAX_DEVICE = 1023

# --- CUDA's register file (every architecture from sm_50 to sm_120) ----------------------
REGISTERS_PER_SM = 64 * 1024       # 32-bit registers per SM (also the most one block may use)
REGISTER_UNIT = 256                # registers are given to a warp in units of 256
SM_PARTITIONS = 4                  # an SM's register file is four partitions of 16K
WARP_SIZE = 32
MAX_BLOCK_THREADS = 1024

#: Shared memory one block may use (static + dynamic, with the opt-in above 48 KB), bytes,
#: by architecture (CUDA C Programming Guide, "Technical Specifications per Compute
#: Capability"); an architecture not listed is not checked.
SHARED_PER_BLOCK = {"sm_70": 96 * 1024, "sm_72": 96 * 1024, "sm_75": 64 * 1024,
                    "sm_80": 163 * 1024, "sm_86": 99 * 1024, "sm_87": 163 * 1024,
                    "sm_89": 99 * 1024, "sm_90": 227 * 1024, "sm_100": 227 * 1024,
                    "sm_103": 227 * 1024, "sm_120": 99 * 1024, "sm_121": 99 * 1024}

#: Square shapes tried, in order, to find one where a combination's constraints hold, so
#: that its launch geometry (the block size) can be evaluated.
PROBE_SIZES = (1024, 4096, 2048, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1, 8192,
               3072, 1536, 768, 384, 192, 96, 48, 24, 12, 6, 3, 1000, 999, 127)

#: After the squares: M and N from a vector to large, odd and even (and each parameter value
#: and one less, for tiles meant for M or N up to their height or N % 4 != 0), K short, mid
#: and long. Class constraints (M or N <= 64, N % 4 != 0) and values the shape picks (a split
#: only for few tiles and a long K, or for a last partial wave of many) find a shape there.
EDGE_SIZES = (1, 16, 61, 64, 127, 1000, 1001, 4095, 4096)
EDGE_KS = (1024, 8192, 61)
#: Values past this are no side tried (a tile's code, e.g. ffma_regdb's tile = 64128).
MAX_PROBE_SIDE = 16384

SEVERITIES = ("error", "warning", "note")


def max_threads_for_registers(registers: int) -> int:
    """Most threads per block a CUDA kernel using ``registers`` registers per thread can
    launch with (more is "too many resources requested for launch").

    The register-file rule: a warp gets ``roundup(registers × 32, 256)`` registers; each
    of the SM's four partitions holds 16K of its 64K registers and whole warps, so a block
    has at most ``4 × floor(16384 / per_warp)`` warps (64K / per_warp rounded down to a
    multiple of 4), and never more than 1024 threads::

        per_warp    = roundup(registers * 32, 256)
        max_threads = min(1024, 32 * 4 * (16384 // per_warp))

    e.g. 32 registers → 1024, 80 → 768, 128 → 512, 168 → 384, 255 → 256 (the values
    ``cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)`` gives on an H100).
    """
    if registers <= 0:
        return MAX_BLOCK_THREADS
    per_warp = -(-registers * WARP_SIZE // REGISTER_UNIT) * REGISTER_UNIT
    warps = SM_PARTITIONS * ((REGISTERS_PER_SM // SM_PARTITIONS) // per_warp)
    return min(MAX_BLOCK_THREADS, warps * WARP_SIZE)


# --- reading kernel files and what they include -------------------------------------------


# --- the report -------------------------------------------------------------------------

@dataclass
class Diagnostic:
    """One compiler message.

    Parameters
    ----------
    path
        The file it is about: the kernel file as the user knows it (never the temporary
        copy the compiler saw), or another file (an included header) under its own path.
    line, column
        1-based; None where the compiler gave none (ptxas works on PTX, not the source).
    severity
        ``"error"``, ``"warning"`` or ``"note"``.
    message
        The compiler's words (nvcc's warning number appended as ``[#177-D]``).
    combos
        Labels of the parameter combinations whose build said it.
    """

    path: str
    line: int | None
    column: int | None
    severity: str
    message: str
    combos: list[str] = field(default_factory=list)

    def key(self) -> tuple:
        return (self.path, self.line, self.column, self.severity, self.message)

    def location(self) -> str:
        """``path:line:col`` (as much of it as is known)."""
        out = self.path
        if self.line is not None:
            out += f":{self.line}" + (f":{self.column}" if self.column is not None else "")
        return out

    def text(self, total: int | None = None) -> str:
        """``path:line:col: severity: message`` and, unless every one of ``total``
        combinations said it, which ones did."""
        out = f"{self.location()}: {self.severity}: {self.message}"
        if self.combos and (total is None or len(self.combos) < total):
            out += f"  [{'; '.join(self.combos)}]"
        return shown_text(out)        # a terminal shows the file's name and text literally


@dataclass
class ComboReport:
    """One parameter combination's build.

    Parameters
    ----------
    params, label
        The combination and its short name (``block=16,wpt=4``; ``default`` if the kernel
        has no parameters).
    ok
        It compiled and a launch of the header's block size can work (a skipped
        combination is ok too).
    registers, shared_static, spill_stores, spill_loads, stack, cmem
        CUDA, from ``ptxas -v``: registers per thread, static shared memory bytes per
        block, spill bytes, the stack frame bytes per thread, constant memory bytes (the
        entry's banks plus the module's ``__constant__`` data). For OpenCL,
        ``shared_static`` is ``CL_KERNEL_LOCAL_MEM_SIZE``; the others are None.
    shared_dynamic
        Bytes of dynamic shared memory the header's ``launch.shared`` asks for (CUDA).
    private_mem
        OpenCL: ``CL_KERNEL_PRIVATE_MEM_SIZE`` (bytes per work-item).
    max_threads
        Most threads per block: CUDA from the register count
        (:func:`max_threads_for_registers`), OpenCL ``CL_KERNEL_WORK_GROUP_SIZE``.
    block_threads
        Threads per block of the header's launch geometry (at ``shape``).
    shape
        The (M, N, K) the geometry was evaluated at: the first of :data:`PROBE_SIZES`
        (square) whose constraints hold.
    skipped
        Why the combination was not built: the header's constraints hold at no shape
        tried, so the lab never runs it.
    problems
        What is wrong or suspicious, in words (launch limits, spills, a build that failed
        or timed out).
    log
        The compiler's output (temporary paths replaced by the kernel's).
    seconds
        Wall time of the build.
    """

    params: dict[str, int]
    label: str
    ok: bool = False
    built: bool = False
    registers: int | None = None
    shared_static: int | None = None
    shared_dynamic: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    stack: int | None = None
    cmem: int | None = None
    private_mem: int | None = None
    max_threads: int | None = None
    block_threads: int | None = None
    shape: tuple[int, int, int] | None = None
    skipped: str | None = None
    problems: list[str] = field(default_factory=list)
    log: str = ""
    seconds: float = 0.0


@dataclass
class CheckReport:
    """What :func:`check_kernel` found.

    Parameters
    ----------
    path
        The kernel file as reported (``display_path`` or ``path``).
    backend
        ``"cuda"`` or ``"opencl"`` (``""`` when the file could not tell).
    target
        What it was built for: the CUDA architecture (``sm_90``, ``sm_90a``) or the
        OpenCL device's name.
    dtype
        The element type the defines were made for.
    layout
        B's layout built (``kn``: K×N, ``nk``: N×K).
    header_error
        The header's problem (``path:line: message``); then nothing was built and
        ``diagnostics`` holds it at its line.
    problem
        Why nothing could be built though the header is fine (no nvcc, no OpenCL device,
        a dtype or backend the kernel does not have).
    diagnostics
        Compiler messages, grouped over combinations, in file order.
    combos
        One :class:`ComboReport` per combination checked.
    seconds
        Wall time of the whole check.
    """

    path: str
    backend: str
    target: str
    dtype: str
    layout: str = "kn"
    header_error: str | None = None
    problem: str | None = None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    combos: list[ComboReport] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Every combination compiled and fits the launch limits (spills are only warned of)."""
        return (self.header_error is None and self.problem is None
                and all(c.ok for c in self.combos))

    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity == "error"]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (``ok`` included); :meth:`from_dict` reads it back."""
        d = asdict(self)
        d["ok"] = self.ok
        for c in d["combos"]:
            c["shape"] = list(c["shape"]) if c["shape"] is not None else None
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CheckReport:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["diagnostics"] = [Diagnostic(**_known(Diagnostic, x)) for x in d.get("diagnostics", [])]
        combos = []
        for x in d.get("combos", []):
            c = ComboReport(**_known(ComboReport, x))
            c.params = {str(k): int(v) for k, v in c.params.items()}
            c.shape = tuple(c.shape) if c.shape is not None else None
            c.problems = list(c.problems)
            combos.append(c)
        kw["combos"] = combos
        return cls(**kw)

    def text(self) -> str:
        """A plain multi-line report: a line of what was checked, a table of combinations ×
        resources, then the diagnostics as ``path:line:col: severity: message``. What
        came from the user (file names, the kernel's text in messages) is printed literally:
        control characters are shown as escapes (:func:`engine.kernels.kernel_file.shown_text`)."""
        built = sum(c.built for c in self.combos)
        head = (f"{shown_text(self.path)}: {self.backend or '?'} kernel"
                f"{', ' + self.dtype if self.dtype else ''}{', B N×K' if self.layout == 'nk' else ''}"
                f"{', for ' + shown_text(self.target) if self.target else ''}: ")
        if self.header_error:
            return head + "header error\n" + _shown_lines(self.header_error)
        if self.problem:
            head += "not checked\n" + _shown_lines(self.problem)
        else:
            failed = sum(not c.ok for c in self.combos)
            skipped = sum(c.skipped is not None for c in self.combos)
            head += (f"{'OK' if self.ok else 'FAILED'}: {built} of {len(self.combos)} "
                     f"combination(s) built" + (f", {failed} failed" if failed else "")
                     + (f", {skipped} skipped" if skipped else "") + f" in {self.seconds:.1f} s")
        lines = [head]
        if self.combos and not self.problem:
            lines += [""] + _table(self.combos, self.backend)
        probs = [(c.label, p) for c in self.combos for p in c.problems]
        if probs:
            lines += ["", "Problems:"] + [f"  {label}: {shown_text(p)}" for label, p in probs]
        if self.diagnostics:
            total = len([c for c in self.combos if c.skipped is None]) or None
            lines += ["", "Diagnostics:"] + [d.text(total) for d in self.diagnostics]
        return "\n".join(lines)


def _shown_lines(text: str) -> str:
    """A message of several lines, each shown literally (:func:`shown_text`)."""
    return "\n".join(shown_text(line) for line in text.split("\n"))


def _known(cls, d: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def _table(combos: list[ComboReport], backend: str) -> list[str]:
    def num(x) -> str:
        return "—" if x is None else str(x)

    if backend == "opencl":
        cols = ["combination", "status", "local B", "private B", "max wg", "block", "time"]
        rows = [[c.label, _status(c), num(c.shared_static), num(c.private_mem),
                 num(c.max_threads), num(c.block_threads), f"{c.seconds:.1f}s"] for c in combos]
    else:
        cols = ["combination", "status", "regs", "smem B", "dyn smem B", "spill st/ld",
                "stack B", "cmem B", "max thr", "block", "time"]
        rows = [[c.label, _status(c), num(c.registers), num(c.shared_static),
                 num(c.shared_dynamic),
                 "—" if c.spill_stores is None else f"{c.spill_stores}/{c.spill_loads}",
                 num(c.stack), num(c.cmem), num(c.max_threads), num(c.block_threads),
                 f"{c.seconds:.1f}s"] for c in combos]
    widths = [max(len(r[i]) for r in [cols, *rows]) for i in range(len(cols))]
    fmt = lambda r: "  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip()  # noqa: E731
    return [fmt(cols), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]


def _status(c: ComboReport) -> str:
    if c.skipped is not None:
        return "skipped"
    if not c.ok:
        return "FAILED"
    return "ok" if not c.problems else "warning"


# --- compiler output -------------------------------------------------------------------------

#: nvcc's front end (cudafe/cicc): ``file(LINE): error: msg``, ``file(LINE): warning #177-D: msg``.
_NVCC_DIAG = re.compile(r"^(?P<file>\S.*?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|"
                        r"warning|remark|note)(?: #(?P<num>[\w-]+))?: (?P<msg>.*)$")
#: clang/gcc (the preprocessor, PoCL): ``file:LINE:COL: error: msg``; PoCL also writes
#: ``error: file:LINE:COL: msg``.
_CLANG_DIAG = re.compile(r"^(?:(?P<pre>fatal error|error|warning|note): )?(?P<file>[^\s:][^:]*):"
                         r"(?P<line>\d+):(?:(?P<col>\d+):)? (?:(?P<sev>fatal error|error|warning|"
                         r"note): )?(?P<msg>.*)$")
#: The tools' own messages: ``ptxas /tmp/x.ptx, line 29; error   : msg``, ``nvcc fatal : msg``.
_TOOL_DIAG = re.compile(r"^(?P<tool>ptxas|nvcc|nvlink|cicc|cudafe\+\+|fatbinary)\b[^:;]*?"
                        r"(?:, line \d+;)?\s*(?P<sev>error|warning|fatal)\s*:\s*(?P<msg>.*)$")
_CARET = re.compile(r"^\s*\^")


def _severity(word: str) -> str:
    word = word or "error"
    if "error" in word or word == "fatal":
        return "error"
    return "note" if word in ("remark", "note") else word


def parse_diagnostics(log: str, kernel_path: str, source_lines: Sequence[str] = ()
                      ) -> list[Diagnostic]:
    """Compiler messages of one build's ``log`` (paths already the user's).

    Understands nvcc/cudafe (``file(LINE): error: msg``, its column taken from the caret
    line nvcc prints under the echoed source line, when that echo is the file's line),
    clang/gcc/PoCL (``file:LINE:COL: error: msg`` and ``error: file:LINE:COL: msg``) and
    the tools' own (``ptxas ... error : msg``: no source line). ``kernel_path`` names the
    kernel file for tool messages; ``source_lines`` are its lines (for the columns).
    """
    out: list[Diagnostic] = []
    lines = log.splitlines()
    tool_errors = 0
    for i, text in enumerate(lines):
        m = _NVCC_DIAG.match(text)
        if m:
            msg = m["msg"].strip() + (f" [#{m['num']}]" if m["num"] else "")
            line = int(m["line"])
            col = None
            if (m["file"] == kernel_path and i + 2 < len(lines) and _CARET.match(lines[i + 2])
                    and 0 < line <= len(source_lines)):
                echo, src = lines[i + 1], source_lines[line - 1].replace("\t", " ")
                if echo[:2] == "  " and echo[2:].rstrip() == src.rstrip():
                    col = lines[i + 2].index("^") - 1
            out.append(Diagnostic(m["file"], line, col, _severity(m["sev"]), msg))
            continue
        m = _CLANG_DIAG.match(text)
        if m and (m["pre"] or m["sev"]):
            out.append(Diagnostic(m["file"], int(m["line"]), int(m["col"]) if m["col"] else None,
                                  _severity(m["pre"] or m["sev"]), m["msg"].strip()))
            continue
        m = _TOOL_DIAG.match(text)
        if m:
            sev = _severity(m["sev"])
            msg = m["msg"].strip()
            if m["sev"] == "fatal" and m["tool"] == "ptxas" and tool_errors:
                continue                  # "Ptx assembly aborted due to errors": said already
            if sev == "error":
                tool_errors += 1
            out.append(Diagnostic(kernel_path, None, None, sev, f"{m['tool']}: {msg}"))
    return out


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")


def parse_ptxas(log: str) -> dict[str, dict[str, int | str]]:
    """``-Xptxas -v`` output → ``{entry: {arch, registers, shared, stack, spill_stores,
    spill_loads, cmem}}``, one dict per entry function (names as ptxas prints them:
    ``matmul`` for ``extern "C"``, mangled otherwise). ``cmem`` adds the entry's constant
    banks and the module's (``__constant__`` data, on the ``gmem`` line)."""
    entries: dict[str, dict] = {}
    module_cmem = 0
    current = props = None
    for line in log.splitlines():
        if "ptxas" not in line and props is None:
            continue
        m = _ENTRY.search(line)
        if m:
            current = entries.setdefault(m[1], {"arch": m[2], "registers": 0, "shared": 0,
                                                "stack": 0, "spill_stores": 0,
                                                "spill_loads": 0, "cmem": 0})
            props = None
            continue
        m = _PROPS.search(line)
        if m:
            props = m[1]
            continue
        m = _FRAME.search(line)
        if m:
            if props is not None and props in entries:
                e = entries[props]
                e["stack"], e["spill_stores"], e["spill_loads"] = map(int, m.groups())
            props = None
            continue
        if "bytes gmem" in line:
            module_cmem += sum(map(int, _CMEM.findall(line)))
            continue
        m = _USED.search(line)
        if m and current is not None:
            current["registers"] = int(m[1])
            s = _SMEM.search(line)
            current["shared"] = int(s[1]) if s else 0
            current["cmem"] = sum(map(int, _CMEM.findall(line)))
    for e in entries.values():
        e["cmem"] += module_cmem
    return entries


def _entry_stats(entries: Mapping[str, dict], name: str) -> dict | None:
    """The ptxas numbers of the entry called ``name`` (``extern "C"`` or C++-mangled)."""
    if name in entries:
        return entries[name]
    mangled = re.compile(rf"^_Z{len(name)}{re.escape(name)}")
    return next((e for n, e in entries.items() if mangled.match(n)), None)


# --- planning ------------------------------------------------------------------------------

def combo_label(params: Mapping[str, int]) -> str:
    return params_to_str(params) or "default"


def side_values(variant: Variant, params: Mapping[str, int]) -> set[int]:
    """Sizes a combination's class constraints may be met at: its parameter values, and the
    values of the derived names that do not depend on the shape (ffma_regdb's tile = 80128
    is bm = 80, a tile for M up to 80), those up to :data:`MAX_PROBE_SIDE`."""
    values = {int(v) for v in params.values()}
    header = variant.headers[0] if variant.headers else None
    if header is not None:
        env = header.env(dict(params))
        for name, e in header.derived.items():
            if uses_shape(e, header.derived):
                continue
            try:
                values.add(e.integer(env))
            except Exception:        # a value-dependent failure: no side from it
                pass
    return {v for v in values if 1 < v <= MAX_PROBE_SIDE}


def never_met(variant: Variant, params: Mapping[str, int]) -> str | None:
    """The reason of a constraint no shape can meet: one whose check reads no shape or
    device name (through derived names neither) and fails for these parameters."""
    header = variant.headers[0] if variant.headers else None
    if header is None:
        return None
    env = header.env(dict(params))
    for c in header.constraints:
        if uses_shape(c.check, header.derived):
            continue
        try:
            if not c.check(env):
                return c.reason_for(env)
        except ExpressionError:
            continue
    return None


def probe_shapes(params: Mapping[str, int], sides_from: Iterable[int] = ()
                 ) -> Iterator[tuple[int, int, int]]:
    """The shapes tried, in order, for one combination: :data:`PROBE_SIZES` squares, then
    every (M, N) of :data:`EDGE_SIZES` and the combination's values (and each less one) at
    each K of :data:`EDGE_KS`; ``sides_from``: more such values (:func:`side_values`)."""
    for size in PROBE_SIZES:
        yield size, size, size
    values = {int(v) for v in [*params.values(), *sides_from] if 1 < int(v) <= MAX_PROBE_SIDE}
    sides = sorted(set(EDGE_SIZES) | values | {v - 1 for v in values})
    for k in EDGE_KS:
        for m in sides:
            for n in sides:
                yield m, n, k


def _plan(variant: Variant, backend: str, dtype: str,
          combos: Iterable[Mapping[str, int]] | None, layout: str = "kn") -> list[ComboReport]:
    """A report per combination, with its launch geometry; skipped ones say why."""
    out = []
    for given in (variant.combos() if combos is None else combos):
        params = {**variant.default_params(), **{str(k): int(v) for k, v in given.items()}}
        rep = ComboReport(params=params, label=combo_label(params))
        out.append(rep)
        bad = next((f"'{k}' is not a parameter of {variant.name} "
                    f"(it has {', '.join(variant.space) or 'none'})" for k in params
                    if k not in variant.space), None)
        bad = bad or next((f"{k}={v} is not in the parameter space {tuple(variant.space[k])}"
                           for k, v in params.items() if v not in variant.space[k]), None)
        if bad:
            rep.problems.append("error: " + bad)
            continue
        never = never_met(variant, params)
        if never is not None:     # no shape can help: not worth trying them all
            rep.skipped = f"no shape satisfies the header ({never})"
            rep.ok = True
            continue
        first_reason = None
        for shape in probe_shapes(params, side_values(variant, params)):
            why = variant.check(backend, params, *shape, dtype, layout)
            if why is None:
                (_g, (bx, by)) = variant.geometry(params, *shape)
                rep.shape, rep.block_threads = shape, bx * by
                break
            first_reason = first_reason or why
        else:
            rep.skipped = (f"no shape tried satisfies the header (at {PROBE_SIZES[0]}³: "
                           f"{first_reason})")
            rep.ok = True
            continue
        if variant.dynamic_shared is not None:
            try:
                rep.shared_dynamic = int(variant.dynamic_shared(params))
            except ExpressionError as exc:
                rep.problems.append(f"error: {exc}")
    return out


# --- building ------------------------------------------------------------------------------

@dataclass
class _Build:
    """What one combination's build left: whether it worked, its log (paths already the
    user's) and ``note``, why it failed where the compiler's log does not say (nvcc did not
    run or timed out, no such entry)."""

    ok: bool
    log: str = ""
    note: str | None = None


def _rename(text: str, names: Iterable[str], shown: str) -> str:
    for n in sorted(set(names), key=len, reverse=True):
        if n and n != shown:
            text = text.replace(n, shown)
    return text


def _check_cuda(variant: Variant, plan: list[ComboReport], report: CheckReport, source: Path,
                shown: str, arch: str, dtype: str, extra: list[str], workers: int,
                timeout: float, layout: str = "kn") -> list[tuple[ComboReport, _Build]]:
    from engine.measure.backends.base import BackendError, BuildError  # noqa: PLC0415
    from engine.measure.backends.cuda import find_nvcc, nvcc_cubin, nvcc_options, target_arch  # noqa: PLC0415

    base = arch[:-1] if variant.arch_suffix and arch.endswith(variant.arch_suffix) else arch
    report.target = arch
    try:
        find_nvcc()
    except BackendError as exc:
        report.problem = str(exc)
        return []
    try:
        target = target_arch(variant, base)
    except BackendError:
        report.problem = (f"{variant.name} needs sm_90{variant.arch_suffix} (its header's "
                          f"arch_suffix = \"{variant.arch_suffix}\"), not {arch}: check it "
                          f"for sm_90")
        return []
    report.target = target
    names = (str(source), str(source.resolve()))

    def build(rep: ComboReport) -> _Build:
        t0 = time.perf_counter()
        try:
            _cubin, log = nvcc_cubin(source, nvcc_options(variant, rep.params, dtype, None, layout)
                                     + extra, target, timeout=timeout)
            result = _Build(True, log)
        except BuildError as exc:
            result = _Build(False, str(exc).partition("\n")[2] or str(exc))
        except BackendError as exc:            # nvcc did not run, or timed out
            result = _Build(False, "", str(exc))
        rep.seconds = time.perf_counter() - t0
        result.log = _rename(result.log, names, shown)
        return result

    todo = [r for r in plan if r.skipped is None and not r.problems]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(build, todo))
    limit = SHARED_PER_BLOCK.get(base)
    for rep, res in zip(todo, results):
        rep.log = res.log
        if not res.ok:
            continue
        rep.built = True
        stats = parse_ptxas(res.log)
        main = _entry_stats(stats, variant.entry)
        if main is None:
            res.ok, res.note = False, (f"ptxas reported no entry function '{variant.entry}' "
                                       f"(found: {', '.join(stats) or 'none'})")
            continue
        _take_ptxas_stats(rep, main, limit, base)
        pre = variant.prepass
        pstats = _entry_stats(stats, pre.entry) if pre is not None else None
        if pre is not None and pstats is None:
            rep.problems.append(f"error: ptxas reported no pre-pass entry '{pre.entry}'")
        elif pstats is not None and rep.shape is not None:
            try:
                (_g, (bx, by)) = pre.geometry(rep.params, *rep.shape)
                pre.tensor_maps(rep.params, *rep.shape)   # bases, swizzle spans and boxes
            except ExpressionError as exc:
                rep.problems.append(f"error: {exc}")
            else:
                most = max_threads_for_registers(pstats["registers"])
                if bx * by > most:
                    rep.problems.append(
                        f"error: the pre-pass '{pre.entry}' block of {bx * by} threads is more "
                        f"than its {pstats['registers']} registers/thread allow ({most})")
                if pstats["spill_stores"] or pstats["spill_loads"]:
                    rep.problems.append(f"warning: the pre-pass '{pre.entry}' spills "
                                        f"({pstats['spill_stores']} B stores, "
                                        f"{pstats['spill_loads']} B loads)")
    return list(zip(todo, results))


def _take_ptxas_stats(rep: ComboReport, stats: Mapping, limit: int | None, arch: str) -> None:
    """``rep`` filled from one entry's ``ptxas -v`` figures (:func:`parse_ptxas`), with the
    problems they show: a block too large for its registers, shared memory over the
    architecture's ``limit``, spills."""
    rep.registers, rep.shared_static = stats["registers"], stats["shared"]
    rep.stack, rep.cmem = stats["stack"], stats["cmem"]
    rep.spill_stores, rep.spill_loads = stats["spill_stores"], stats["spill_loads"]
    rep.max_threads = max_threads_for_registers(rep.registers)
    if rep.block_threads is not None and rep.block_threads > rep.max_threads:
        rep.problems.append(
            f"error: a block of {rep.block_threads} threads needs more registers than an SM "
            f"has ({rep.registers} registers/thread allow at most {rep.max_threads} threads): "
            f"the launch would fail with 'too many resources requested for launch'")
    shared = rep.shared_static + (rep.shared_dynamic or 0)
    if limit is not None and shared > limit:
        rep.problems.append(f"error: {shared} B of shared memory per block "
                            f"({rep.shared_static} static + {rep.shared_dynamic or 0} dynamic) "
                            f"is more than {arch} allows ({limit} B)")
    if rep.spill_stores or rep.spill_loads:
        rep.problems.append(f"warning: registers spill to local memory ({rep.spill_stores} B "
                            f"stores, {rep.spill_loads} B loads per thread)")


def _check_opencl(variant: Variant, plan: list[ComboReport], report: CheckReport, text: str,
                  shown: str, device: int, dtype: str, workers: int
                  ) -> list[tuple[ComboReport, _Build]]:
    from engine.measure.backends.base import BackendError, BuildError  # noqa: PLC0415
    from engine.measure.backends.opencl import (_all_devices, _device_info, _import_cl,
                                                build_program, kernel_limits, opencl_options)  # noqa: PLC0415

    try:
        cl = _import_cl()
        devs = _all_devices(cl)
        if not 0 <= device < len(devs):
            raise BackendError(f"OpenCL device {device} does not exist (found {len(devs)})")
        dev = devs[device]
        report.target = _device_info(cl, dev, device).name
        ctx = cl.Context([dev])
        local_limit = int(dev.local_mem_size)
    except BackendError as exc:
        report.problem = str(exc)
        return []
    except Exception as exc:  # noqa: BLE001  (a broken ICD: say so, never raise)
        report.problem = f"OpenCL cannot be used: {exc}"
        return []
    path = Path(shown)

    def build(rep: ComboReport) -> _Build:
        t0 = time.perf_counter()
        try:
            prog, log = build_program(cl, ctx, dev, text, opencl_options(variant, rep.params, dtype),
                                      path)
            try:
                kern = getattr(prog, variant.entry)
            except (AttributeError, cl.Error):
                return _Build(False, log, f"the program has no kernel '{variant.entry}'")
            local, private, max_wg = kernel_limits(cl, kern, dev)
            rep.shared_static, rep.private_mem, rep.max_threads = local, private, max_wg
            return _Build(True, log)
        except BuildError as exc:
            return _Build(False, str(exc).partition("\n")[2] or str(exc))
        except Exception as exc:  # noqa: BLE001  (the OpenCL runtime's own failure)
            return _Build(False, "", f"OpenCL failed: {exc}")
        finally:
            rep.seconds = time.perf_counter() - t0

    todo = [r for r in plan if r.skipped is None and not r.problems]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        results = list(pool.map(build, todo))
    for rep, res in zip(todo, results):
        rep.log = res.log
        if not res.ok:
            continue
        rep.built = True
        if rep.block_threads is not None and rep.max_threads and rep.block_threads > rep.max_threads:
            rep.problems.append(f"error: a work-group of {rep.block_threads} work-items is more "
                                f"than this kernel allows on {report.target} ({rep.max_threads})")
        if rep.shared_static is not None and rep.shared_static > local_limit:
            rep.problems.append(f"error: {rep.shared_static} B of local memory is more than the "
                                f"device has ({local_limit} B)")
    return list(zip(todo, results))


def _group(results: list[tuple[ComboReport, _Build]], shown: str, source_lines: list[str]
           ) -> list[Diagnostic]:
    """Every build's diagnostics, identical ones merged (their combinations listed)."""
    grouped: dict[tuple, Diagnostic] = {}
    for rep, res in results:
        found = parse_diagnostics(res.log, shown, source_lines)
        if not res.ok and not any(d.severity == "error" for d in found):
            why = res.note or next((ln.strip() for ln in res.log.splitlines() if ln.strip()),
                                   "the build failed")
            found.append(Diagnostic(shown, None, None, "error", why))
        for d in found:
            g = grouped.setdefault(d.key(), d)
            if rep.label not in g.combos:
                g.combos.append(rep.label)
        if not res.ok:
            rep.ok = False
            rep.problems.insert(0, "error: " + (res.note or "the build failed (see diagnostics)"))
        else:
            rep.ok = not any(p.startswith("error:") for p in rep.problems)
    rank = {"error": 0, "warning": 1, "note": 2}
    return sorted(grouped.values(),
                  key=lambda d: (d.path != shown, d.path, d.line is None, d.line or 0,
                                 d.column or 0, rank.get(d.severity, 3)))


# --- the check ---------------------------------------------------------------------------------

def _copy_name(shown: Path, backend: str) -> str:
    """The file name of the copy a build compiles: the kernel's own when it is plain (the
    compilers' messages then read as the user's), else ``kernel``; the backend's suffix."""
    suffix = ".cu" if backend == "cuda" else ".cl"
    stem = shown.stem if shown.suffix == suffix else shown.name
    return (stem if re.fullmatch(r"[\w.+-]{1,100}", stem, re.ASCII) else "kernel") + suffix


def default_workers() -> int:
    """Parallel builds: one per core, at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def check_kernel(path: str | Path, text: str | None = None, backend: str | None = None,
                 dtype: str | None = None, arch: str | None = None, device: int = 0,
                 display_path: str | Path | None = None,
                 combos: Iterable[Mapping[str, int]] | None = None,
                 workers: int | None = None, timeout: float = DEFAULT_TIMEOUT_S,
                 layout: str = "kn") -> CheckReport:
    """Compile a kernel file for every combination of its parameter space and report.

    Parameters
    ----------
    path
        The kernel file (``.cu`` or ``.cl`` with a header, :mod:`engine.kernels.kernel_file`).
    text
        The file's text as the editor holds it (unsaved); it is written to a temporary
        folder under the same file name and compiled there, and every message names
        ``display_path or path`` instead. CUDA builds then also search ``path``'s folder
        for includes, as they would the saved file's.
    backend
        ``"cuda"`` or ``"opencl"``; by default the file's own (its suffix or header).
    dtype
        an input type (:data:`engine.common.dtypes.ELEMENT_NAMES`) the kernel's header lists:
        the defines built, or a Triton kernel's pointer types (C in the type's default
        output: float32 for 16-bit inputs, bfloat16 for FP8, int32 for int8); default the
        header's first.
    arch
        CUDA target (default :data:`DEFAULT_ARCH`, ``sm_90``); a kernel whose header says
        ``arch_suffix = "a"`` is built for ``sm_90a``, as the backend does.
    device
        OpenCL: the device's index over all platforms (as ``bench --device`` counts).
    display_path
        The path messages and the report name (default ``path``).
    combos
        Only these combinations (dicts of parameter values; a parameter left out takes
        its default); default every combination of the space.
    workers
        Builds at once (default :func:`default_workers`: min(4, cores)).
    timeout
        Seconds one nvcc build may take.
    layout
        B's layout built (``kn`` or ``nk``, one the header lists): ``B_NK`` for CUDA C, the
        unit stride a Triton kernel is specialized on.

    Returns
    -------
    CheckReport
        Never raises for a bad file or a missing tool: see ``header_error`` and ``problem``.
    """
    t0 = time.perf_counter()
    path = Path(path)
    shown_path = Path(display_path) if display_path else path
    shown = str(shown_path)
    report = CheckReport(path=shown, backend=backend or BACKEND_OF_SUFFIX.get(shown_path.suffix, ""),
                         target="", dtype=dtype or "", layout=layout)
    try:
        return _check(report, path, shown_path, text, backend, dtype, arch, device, combos,
                      workers or default_workers(), timeout, layout)
    except Exception as exc:  # noqa: BLE001  (a bug of ours must not take the editor down)
        report.problem = f"the check itself failed: {type(exc).__name__}: {exc}"
        return report
    finally:
        report.seconds = time.perf_counter() - t0


def _check(report: CheckReport, path: Path, shown_path: Path, text: str | None,
           backend: str | None, dtype: str | None, arch: str | None, device: int, combos,
           workers: int, timeout: float, layout: str = "kn") -> CheckReport:
    shown = str(shown_path)
    try:
        text = read_kernel_text(path, shown_path) if text is None else check_kernel_text(
            text, shown_path)
        header = parse_header(shown_path, text)
        variant = variant_from_headers([header], role="user")
    except KernelFileError as exc:
        report.header_error = str(exc)
        report.diagnostics = [Diagnostic(str(exc.path), exc.line, None, "error", exc.message)]
        return report
    if backend is None:
        backend = header.backend
    report.backend = backend
    if backend != header.backend:
        report.problem = (f"{shown_path.name} is a {header.backend} kernel, not {backend} "
                          f"(the file's suffix or its header's 'backend' says so)")
        return report
    if dtype is None:          # the header's first type (a half or FP8 file has no float32)
        dtype = report.dtype = variant.dtypes[0]
    if dtype not in ELEMENT_NAMES or dtype not in variant.dtypes:
        report.problem = (f"{variant.name} does not support {dtype} (its dtypes: "
                          f"{', '.join(variant.dtypes)})")
        return report
    if layout not in variant.layouts:
        report.problem = (f"{variant.name} takes B as K×N only (its layouts: "
                          f"{', '.join(variant.layouts)}), not {layout}")
        return report
    report.combos = plan = _plan(variant, backend, dtype, combos, layout)
    for rep in plan:
        if rep.problems and rep.skipped is None:
            rep.ok = False                      # a combination not in the space
    if header.is_triton:
        return _check_triton(report, variant, shown_path, text, timeout, arch or DEFAULT_ARCH,
                             dtype, workers, layout)
    # What the file includes is checked before any compiler opens it (a pipe would hold a
    # build until its timeout, for ever in OpenCL); includes resolve as the builds do: from
    # the file's folder, then the lab's cuda/ (CUDA) or the working folder (OpenCL).
    home = Path(os.path.realpath(path)).parent
    try:
        if backend == "cuda":
            from engine.kernels.registry import ROOT  # noqa: PLC0415
            check_includes(text, shown_path, home, [ROOT / "cuda"])
        else:
            check_includes(text, shown_path, home, working_dirs())
    except KernelFileError as exc:
        report.problem = "nothing was built: a file it includes cannot be read (see Diagnostics)"
        report.diagnostics = [Diagnostic(str(exc.path), exc.line, None, "error", exc.message)]
        return report
    source_lines = text.split("\n")
    with tempfile.TemporaryDirectory(prefix="matmul-lab-check-") as tmp:
        # The text read and checked above is the text built (the editor's buffer, or the
        # file as read once): a copy of the same name, its includes found as from the file's
        # folder, so no compiler opens the user's path again (it may have become a pipe).
        source = Path(tmp) / _copy_name(shown_path, backend)
        source.write_text(text, encoding="utf-8")
        extra = [f"-I{home}"] if home.is_dir() else []
        if backend == "cuda":
            results = _check_cuda(variant, plan, report, source, shown, arch or DEFAULT_ARCH,
                                  dtype, extra, workers, timeout, layout)
        else:
            results = _check_opencl(variant, plan, report, text, shown, device, dtype, workers)
    if report.problem:
        return report
    report.diagnostics = _group(results, shown, source_lines)
    return report


def _check_triton(report: CheckReport, variant: Variant, shown_path: Path, text: str,
                  timeout: float, arch: str, dtype: str, workers: int,
                  layout: str = "kn") -> CheckReport:
    """A Triton kernel file (.py): the header (above), the file imported in a separate
    process (an exception, sys.exit or an endless loop there is a message at its line),
    the kernel found and its signature matched to the header; then every combination
    compiled by Triton for ``arch`` in child processes (no GPU needed), with ``ptxas -v``
    on its PTX for registers and spills and Triton's shared memory, a compile error at its
    line of the file. Pointers typed by ``dtype`` (C in its default output), specialized as
    Triton specializes a launch at sizes that are multiples of 16 in ``layout``
    (triton_kernels.aligned_specialization)."""
    from engine.measure import triton_kernels as tk  # noqa: PLC0415  (optional part)
    cc = int(re.sub(r"\D", "", arch) or 90)
    report.target = f"Triton for sm_{cc}{'a' if cc >= 90 else ''}"
    probe = tk.probe_file(shown_path, text, variant, min(timeout, tk.IMPORT_TIMEOUT_S))
    if not probe.ok:
        report.problem = probe.problem
        m = re.match(r"^(.*?):(\d+): (.*)$", probe.problem, re.S)
        if m:
            report.diagnostics = [Diagnostic(m.group(1), int(m.group(2)), None, "error", m.group(3))]
        return report
    todo = [r for r in report.combos if r.skipped is None and not r.problems]
    built = tk.compile_combos(shown_path, text, variant, [r.params for r in todo], dtype, cc,
                              workers, timeout * max(1, len(todo)), layout=layout)
    shown = str(shown_path)
    grouped: dict[tuple, Diagnostic] = {}
    for rep, res in zip(todo, built):
        rep.seconds = res.seconds
        if res.error is not None:
            rep.ok = False
            rep.problems.append("error: " + res.error)
            d = Diagnostic(shown, res.line, None, "error", res.error)
            g = grouped.setdefault(d.key(), d)
            g.combos.append(rep.label)
            continue
        rep.built = True
        rep.log = res.ptxas
        entries = parse_ptxas(res.ptxas)
        stats = _entry_stats(entries, res.name) or next(iter(entries.values()), None)
        rep.shared_dynamic, rep.block_threads = res.shared, res.threads
        if stats is not None:
            _take_ptxas_stats(rep, stats, SHARED_PER_BLOCK.get(f"sm_{cc}"), f"sm_{cc}")
        rep.ok = not any(p.startswith("error:") for p in rep.problems)
    report.diagnostics = sorted(grouped.values(), key=lambda d: (d.line is None, d.line or 0))
    return report


# --- the command line ------------------------------------------------------------------------


