"""Triton kernel files (``.py``): loading them, checking their signature, launching them.

A ``.py`` kernel file is Python that runs: it is executed only when a backend builds one
of its kernels or ``check-kernel`` checks it (a listing reads its header as text), and only
for files of the built-in folders and the kernel folders the user chose. Every execution
first runs in a child process (:func:`probe_file`, bounded by a timeout), so that a syntax
error, an import error, an exception, an endless loop or ``sys.exit`` at import costs that
child and comes back as one ``file:line: message``; only a file whose import finished there
is executed in the engine's process.

The kernel's signature (docs/triton.md): the positional arguments of its ``kind``
(``A, B, C, M, N, K`` for ``gemm``; ``A, C, M, K`` for ``aat``), for a header with
``precision = "fp8"`` then ``scale`` (a float: scale_a·scale_b, C = scale·A·B, as the CUDA
FP8 kernels take it after K), then the row and column strides of each matrix in elements
(``stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn``; ``aat``: A's and
C's), then the header's parameters upper-case as ``tl.constexpr`` (``block_m`` →
``BLOCK_M``); ``num_warps`` and ``num_stages`` are Triton's launch options, not arguments.
A and B point to the run's input type (Triton's fp32, fp16, bf16, fp8e4nv, fp8e5),
C to its output type (:class:`engine.common.dtypes.TypeSpec`: 16-bit inputs write float32
or their own type, FP8 inputs bfloat16 or float32), so a kernel stores
``acc.to(C.dtype.element_ty)``. B as N×K (layout ``nk``) comes as the same pointer with
``stride_bk = 1, stride_bn = K``: the kernel reads B through its strides, so one kernel
serves both layouts its header lists.

Two ways to run one:

* CUDA (:class:`GpuTritonKernel`): compiled by Triton for the open device and launched by
  Triton's launcher on the engine's own context, stream and buffers (pointers, no copies;
  Triton loads its module into the context current on the thread, which is the engine's).
* the cpu backend (:class:`InterpretedTritonKernel`): Triton's interpreter
  (``TRITON_INTERPRET=1``: every program's block operations in numpy) on the host arrays
  themselves. It checks the arithmetic at small shapes; its times mean nothing.
"""
from __future__ import annotations

import importlib.util
import json
import linecache
import os
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.common.dtypes import ElementType, TypeSpec
from engine.kernels.kernel_file import TRITON_LAUNCH_PARAMS, shown_text
from engine.kernels.registry import Variant, takes_scale

#: Seconds the child that imports a kernel file may take (an import that never ends).
IMPORT_TIMEOUT_S = 60.0
#: What :func:`probe_file`'s child prints before its JSON report (whatever the file prints
#: is left out).
REPORT_MARK = "@@matmul-lab-triton-probe@@"
#: The environment variable that makes ``@triton.jit`` build interpreted functions; read
#: when Triton is imported, so a process runs either interpreted or compiled kernels.
INTERPRET_ENV = "TRITON_INTERPRET"

_STRIDES = {"gemm": ("stride_am", "stride_ak", "stride_bk", "stride_bn", "stride_cm", "stride_cn"),
            "aat": ("stride_am", "stride_ak", "stride_cm", "stride_cn")}
_POSITIONAL = {"gemm": ("A", "B", "C", "M", "N", "K"), "aat": ("A", "C", "M", "K")}
#: The FP8 kernels' float argument after the sizes: scale_a·scale_b.
SCALE_ARG = "scale"


class TritonError(RuntimeError):
    """A Triton kernel file that cannot be run here: ``file:line: message`` where the
    problem has a line."""


def unavailable() -> str | None:
    """Why Triton kernels cannot run in this Python (None where Triton is installed)."""
    if importlib.util.find_spec("triton") is None:
        return ("Triton is not installed (pip install -r requirements-triton.txt); .py "
                "kernels need it")
    return None


def backend_problem(backend: str) -> str | None:
    """Why ``.py`` kernels cannot run on ``backend`` in this Python, or None (read without
    importing Triton: the variant tree asks as it lists them)."""
    why = unavailable()
    if why:
        return why
    if backend == "cuda":
        # Triton's GPU driver asks torch for the device and stream when it starts.
        if importlib.util.find_spec("torch") is None:
            return ("Triton's CUDA driver needs torch (a CUDA build), which is not installed; "
                    "the cpu backend runs .py kernels through Triton's interpreter")
        if os.environ.get(INTERPRET_ENV) == "1":
            return (f"{INTERPRET_ENV}=1 is set for the app: Triton would interpret the kernel "
                    "on the host; start the app without it to run .py kernels on the GPU")
        return None
    if backend == "cpu":
        return None
    return f"the {backend} backend runs no Triton kernels (cuda, or cpu through the interpreter)"


def scale_args(variant: Variant, scale: float) -> tuple[float, ...]:
    """What follows the sizes in a launch: FP8's scale_a·scale_b, rounded to the float32 a
    GPU is handed (a Python float: Triton passes it as fp32); nothing for other kernels."""
    return (float(np.float32(scale)),) if takes_scale(variant) else ()


def expected_arguments(variant: Variant) -> tuple[list[str], list[str]]:
    """(the positional arguments a kernel of ``variant.kind`` takes, as named in the docs;
    the ``tl.constexpr`` names its header's parameters give)."""
    scale = [SCALE_ARG] if takes_scale(variant) else []
    positional = [*_POSITIONAL[variant.kind], *scale, *_STRIDES[variant.kind]]
    constants = [p.upper() for p in variant.space if p not in TRITON_LAUNCH_PARAMS]
    return positional, constants


def signature_problem(variant: Variant, arg_names: list[str], constexprs: list[str]) -> str | None:
    """Why a kernel with these arguments (``constexprs``: those annotated ``tl.constexpr``)
    cannot be launched as ``variant``'s header says, or None."""
    positional, constants = expected_arguments(variant)
    plain = [a for a in arg_names if a not in constexprs]
    if len(plain) != len(positional):
        return (f"kind = \"{variant.kind}\" launches {variant.entry}({', '.join(positional)}, "
                f"then the parameters as tl.constexpr): {len(positional)} plain arguments, "
                f"but '{variant.entry}' takes {len(plain)} ({', '.join(plain) or 'none'})")
    if arg_names[:len(plain)] != plain:
        return f"'{variant.entry}' must take its plain arguments first, then the tl.constexpr ones"
    missing = [c for c in constants if c not in constexprs]
    if missing:
        return (f"'{variant.entry}' has no tl.constexpr argument {missing[0]} (the header's "
                f"parameter {missing[0].lower()}); it takes {', '.join(constexprs) or 'none'}")
    extra = [c for c in constexprs if c not in constants]
    if extra:
        return (f"'{variant.entry}' takes tl.constexpr {extra[0]}, which no [params] entry "
                f"gives (add {extra[0].lower()} = [...] to the header)")
    return None


# --- the import, first in a child process ------------------------------------------------

_CHILD = r'''
import json, os, sys, traceback
path, entry, mark = sys.argv[1], sys.argv[2], sys.argv[3]
text = sys.stdin.read()
out = {"ok": False}
def where(tb):
    frames = [f for f in traceback.extract_tb(tb) if f.filename == path]
    return frames[-1].lineno if frames else None
try:
    code = compile(text, path, "exec")
    import linecache
    linecache.cache[path] = (len(text), None, text.splitlines(True), path)
    ns = {"__name__": "matmul_lab_kernel", "__file__": path}
    exec(code, ns)
    fn = ns.get(entry)
    if fn is None:
        out.update(problem="no_entry", names=sorted(k for k, v in ns.items()
                   if type(v).__name__ in ("JITFunction", "InterpretedFunction")))
    elif type(fn).__name__ not in ("JITFunction", "InterpretedFunction"):
        out.update(problem="not_jit", what=type(fn).__name__)
    else:
        ann = getattr(getattr(fn, "fn", None), "__annotations__", {})
        out.update(ok=True, args=list(fn.arg_names),
                   constexprs=[a for a in fn.arg_names if "constexpr" in str(ann.get(a, ""))])
except SyntaxError as exc:
    out.update(problem="syntax", line=exc.lineno, message=f"{exc.msg}")
except SystemExit as exc:
    out.update(problem="exit", line=where(exc.__traceback__), message=f"sys.exit({exc.code!r})")
except BaseException as exc:
    out.update(problem="raised", line=where(exc.__traceback__),
               message=f"{type(exc).__name__}: {exc}")
sys.stdout.flush()
os.write(1, ("\n" + mark + json.dumps(out) + "\n").encode())
os._exit(0)
'''


@dataclass
class ProbeReport:
    """What importing a kernel file in a child process found."""

    ok: bool
    #: ``file:line: message`` when not ok.
    problem: str = ""
    arg_names: list[str] = field(default_factory=list)
    constexprs: list[str] = field(default_factory=list)
    line: int | None = None


def entry_line(text: str, entry: str) -> int:
    """The line of ``def entry(`` in a Python file, else 1."""
    for i, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith(f"def {entry}(") or line.lstrip().startswith(f"def {entry} ("):
            return i
    return 1


def probe_file(path: Path | str, text: str, variant: Variant,
               timeout_s: float = IMPORT_TIMEOUT_S) -> ProbeReport:
    """Import ``text`` (the file ``path`` as registered) in a child process with Triton's
    interpreter on (no GPU needed), find ``variant.entry`` and check its signature; every
    failure is a :class:`ProbeReport` with ``file:line: message``."""
    shown = shown_text(path)
    why = unavailable()
    if why:
        return ProbeReport(False, f"{shown}: {why}")
    env = {**os.environ, INTERPRET_ENV: "1"}
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(path), variant.entry, REPORT_MARK],
                              input=text, capture_output=True, text=True, timeout=timeout_s,
                              env=env, errors="replace")
    except subprocess.TimeoutExpired:
        return ProbeReport(False, f"{shown}:1: importing the file did not finish in "
                                  f"{timeout_s:g} s (an endless loop at import?); it was stopped")
    except OSError as exc:
        return ProbeReport(False, f"{shown}: the import check could not start: {exc}")
    report_text = done.stdout.rpartition(REPORT_MARK)[2].strip() if REPORT_MARK in done.stdout else ""
    try:
        got = json.loads(report_text.splitlines()[0]) if report_text else None
    except (json.JSONDecodeError, IndexError):
        got = None
    if got is None:     # the child died before reporting: a crash in native code, a kill
        tail = shown_text(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "", 160)
        return ProbeReport(False, f"{shown}:1: importing the file ended its process "
                                  f"(exit {done.returncode}){': ' + tail if tail else ''}")
    line = got.get("line")
    at = f"{shown}:{line or 1}"
    kind = got.get("problem")
    if kind == "syntax":
        return ProbeReport(False, f"{at}: syntax error: {shown_text(got['message'], 160)}", line=line)
    if kind in ("raised", "exit"):
        said = "called" if kind == "exit" else "raised"
        return ProbeReport(False, f"{at}: importing the file {said} "
                                  f"{shown_text(got['message'], 200)}", line=line)
    eline = entry_line(text, variant.entry)
    if kind == "no_entry":
        names = ", ".join(got.get("names", [])) or "no @triton.jit function at all"
        return ProbeReport(False, f"{shown}:{eline}: the file defines no @triton.jit kernel named "
                                  f"'{variant.entry}' (it defines: {names})", line=eline)
    if kind == "not_jit":
        return ProbeReport(False, f"{shown}:{eline}: '{variant.entry}' is a {got.get('what')}, "
                                  "not a @triton.jit kernel", line=eline)
    wrong = signature_problem(variant, got["args"], got["constexprs"])
    if wrong:
        return ProbeReport(False, f"{shown}:{eline}: {wrong}", got["args"], got["constexprs"], eline)
    return ProbeReport(True, "", got["args"], got["constexprs"])


# --- compiling every combination ahead of a GPU (check-kernel) --------------------------

_COMPILE_CHILD = r"""
import json, os, subprocess, sys, tempfile, traceback
path, entry, mark, cc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
job = json.loads(sys.stdin.readline())
text = sys.stdin.read()
import linecache
linecache.cache[path] = (len(text), None, text.splitlines(True), path)
ns = {"__name__": "matmul_lab_kernel", "__file__": path}
exec(compile(text, path, "exec"), ns)
fn = ns[entry]
import triton
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource
ptxas = get_ptxas(cc).path
arch = "sm_%d%s" % (cc, "a" if cc >= 90 else "")
out = []
import time
for combo in job["combos"]:
    res = {}
    t0 = time.perf_counter()
    try:
        # the launch's specialization: arguments equal to 1 are constants, multiples of 16
        # carry Triton's divisibility attribute (what JITFunction marks per call)
        attrs = {(fn.arg_names.index(a),): [["tt.divisibility", 16]] for a in job["multiples_of_16"]}
        source = ASTSource(fn, job["signature"], constexprs={**job["ones"], **combo["constants"]},
                           attrs=attrs)
        k = triton.compile(source,
                           target=GPUTarget("cuda", cc, 32), options=combo["options"])
        res.update(shared=int(k.metadata.shared), threads=32 * int(k.metadata.num_warps))
        with tempfile.TemporaryDirectory() as d:
            ptx = os.path.join(d, "kernel.ptx")
            with open(ptx, "w") as f:
                f.write(k.asm["ptx"])
            done = subprocess.run([ptxas, "-arch=" + arch, "-v", ptx, "-o", os.path.join(d, "k.cubin")],
                                  capture_output=True, text=True, timeout=300)
            res["ptxas"] = done.stdout + done.stderr
            res["name"] = k.metadata.name
    except Exception as exc:
        node = getattr(exc, "node", None)
        line = getattr(node, "lineno", None)
        if line is not None:
            line += fn.starting_line_number   # Triton numbers nodes from there
        else:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == path]
            line = frames[-1].lineno if frames else None
        said = [t for t in str(exc).strip().splitlines() if t.strip()]
        res.update(error=(said[-1] if said else type(exc).__name__), line=line)
    res["seconds"] = time.perf_counter() - t0
    out.append(res)
sys.stdout.flush()
os.write(1, ("\n" + mark + json.dumps(out) + "\n").encode())
os._exit(0)
"""

#: Triton's pointer type of each element type (the launch hands ``_DevicePointer``s typed
#: by these names without the ``*``).
POINTER = {"float32": "*fp32", "float16": "*fp16", "bfloat16": "*bf16", "int32": "*i32",
           "float8_e4m3": "*fp8e4nv", "float8_e5m2": "*fp8e5"}


@dataclass
class CompiledCombo:
    """One parameter combination compiled by Triton for a GPU architecture (no GPU needed):
    ``ptxas`` is ``ptxas -v``'s report on Triton's PTX (registers, spills), ``shared`` the
    shared memory Triton asks for at launch, ``threads`` per block; or ``error`` at
    ``line`` of the file."""

    shared: int | None = None
    threads: int | None = None
    ptxas: str = ""
    name: str = ""
    error: str | None = None
    line: int | None = None
    seconds: float = 0.0


def signature(variant: Variant, dtype: str = "float32", output: str | None = None) -> dict[str, str]:
    """Triton's signature of the kernel as the backends launch it: the header's kind's
    pointers (A and B in ``dtype``, C in ``output``, by default the input type's default
    output: None is the input type's default, :class:`TypeSpec`), FP8's ``scale`` as fp32, 32-bit sizes and strides, the
    parameters as constexprs."""
    types = TypeSpec(dtype, output)
    positional, consts = expected_arguments(variant)
    sig = {}
    for name in positional:
        if name in ("A", "B"):
            sig[name] = POINTER[str(types.element)]
        elif name == "C":
            sig[name] = POINTER[str(types.output)]
        elif name == SCALE_ARG:
            sig[name] = "fp32"
        else:
            sig[name] = "i32"
    sig.update({s: "i32" for s in _STRIDES[variant.kind]})
    sig.update({c: "constexpr" for c in consts})
    return sig


@dataclass(frozen=True)
class Specialization:
    """How Triton specializes one class of launches (``JITFunction`` does it per call): the
    integer arguments equal to 1 become constants, and the pointers and integers that are
    multiples of 16 (16-byte aligned addresses) carry a divisibility attribute, which
    lets it vectorize loads and pipeline them with cp.async."""

    #: Arguments equal to 1 (the unit strides of the layout): constexpr 1 in the signature.
    ones: tuple[str, ...]
    #: Arguments marked divisible by 16.
    multiples_of_16: tuple[str, ...]


def aligned_specialization(variant: Variant, layout: str = "kn") -> Specialization:
    """The class of a launch at sizes that are multiples of 16 on the engine's (aligned)
    buffers: what ``check-kernel`` compiles, since one compile per class of arguments
    cannot cover every shape (at other sizes Triton compiles the masked loads narrower)."""
    ones = unit_strides(variant, layout)
    positional, _consts = expected_arguments(variant)
    multiples = tuple(a for a in positional if a != SCALE_ARG and a not in ones)
    return Specialization(ones=ones, multiples_of_16=multiples)


def compile_combos(path: Path | str, text: str, variant: Variant, combos: list[dict],
                   dtype: str = "float32", cc: int = 90, workers: int = 1,
                   timeout_s: float = 600.0, output: str | None = None,
                   layout: str = "kn") -> list[CompiledCombo]:
    """Compile each parameter combination of a kernel file (already imported safely by
    :func:`probe_file`) with Triton for ``sm_{cc}``, in ``workers`` child processes (the
    file is code: an exception, a crash or a hang costs a child), in the types and layout
    given and the specialization of an aligned launch (:func:`aligned_specialization`).
    One result per combo."""
    special = aligned_specialization(variant, layout)
    sig = signature(variant, dtype, output)
    sig.update({a: "constexpr" for a in special.ones})
    jobs = [{"constants": constants(variant, c), "options": launch_options(c)} for c in combos]
    workers = max(1, min(workers, len(jobs)))
    slices = [list(range(i, len(jobs), workers)) for i in range(workers)]
    env = {k: v for k, v in os.environ.items() if k != INTERPRET_ENV}
    procs = []
    for idx in slices:
        payload = json.dumps({"signature": sig, "ones": {a: 1 for a in special.ones},
                              "multiples_of_16": list(special.multiples_of_16),
                              "combos": [jobs[i] for i in idx]}) + "\n" + text
        p = subprocess.Popen([sys.executable, "-c", _COMPILE_CHILD, str(path), variant.entry,
                              REPORT_MARK, str(cc)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, errors="replace")
        procs.append((idx, p, payload))
    results: list[CompiledCombo | None] = [None] * len(jobs)
    for idx, p, payload in procs:
        try:
            stdout, stderr = p.communicate(payload, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            for i in idx:
                results[i] = CompiledCombo(error=f"Triton's compile did not finish in {timeout_s:g} s; it was stopped")
            continue
        got = None
        if REPORT_MARK in stdout:
            try:
                got = json.loads(stdout.rpartition(REPORT_MARK)[2].strip().splitlines()[0])
            except (json.JSONDecodeError, IndexError):
                got = None
        if got is None or len(got) != len(idx):
            tail = shown_text(stderr.strip().splitlines()[-1] if stderr.strip() else "", 200)
            for i in idx:
                results[i] = CompiledCombo(error=f"the compile ended its process (exit {p.returncode})"
                                                 f"{': ' + tail if tail else ''}")
            continue
        for i, r in zip(idx, got):
            results[i] = CompiledCombo(**{k: r[k] for k in ("shared", "threads", "ptxas", "name",
                                                             "error", "line", "seconds") if k in r})
    return [r or CompiledCombo(error="not compiled") for r in results]


def load_entry(path: Path | str, text: str, entry: str) -> Any:
    """Execute the kernel file in this process (after :func:`probe_file` passed) and return
    its ``@triton.jit`` function. Triton reads a kernel's source through ``linecache``: the
    text as registered is put there under the file's name, so the file on disk may change."""
    name = str(path)
    linecache.cache[name] = (len(text), None, text.splitlines(True), name)
    ns: dict[str, Any] = {"__name__": "matmul_lab_kernel", "__file__": name}
    try:
        exec(compile(text, name, "exec"), ns)   # noqa: S102  (a kernel file the user chose)
    except BaseException as exc:               # SystemExit too: it must not end the engine
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == name]
        line = frames[-1].lineno if frames else 1
        raise TritonError(f"{shown_text(name)}:{line}: importing the file raised "
                          f"{type(exc).__name__}: {shown_text(exc, 200)}") from None
    return ns[entry]


def strides(variant: Variant, m: int, n: int, k: int, layout: str = "kn") -> tuple[int, ...]:
    """The strides in elements, in the signature's order: every matrix row-major, B as
    K×N (``kn``) or as N×K (``nk``: stride_bk = 1, stride_bn = K)."""
    if variant.kind == "aat":
        return (k, 1, m, 1)
    b_strides = (1, k) if layout == "nk" else (n, 1)
    return (k, 1, *b_strides, n, 1)


def unit_strides(variant: Variant, layout: str = "kn") -> tuple[str, ...]:
    """The stride arguments that are 1 in every launch of ``layout`` (Triton makes them
    constants, which tells it the contiguous axis of each matrix)."""
    if variant.kind == "aat":
        return ("stride_ak", "stride_cn")
    return ("stride_ak", "stride_bk" if layout == "nk" else "stride_bn", "stride_cn")


def constants(variant: Variant, params) -> dict[str, int]:
    """The header's parameters as the kernel's ``tl.constexpr`` keyword arguments."""
    return {p.upper(): int(v) for p, v in params.items() if p not in TRITON_LAUNCH_PARAMS}


def launch_options(params) -> dict[str, int]:
    """``num_warps`` and ``num_stages`` where the header lists them."""
    return {p: int(v) for p, v in params.items() if p in TRITON_LAUNCH_PARAMS}


# --- the interpreter (cpu backend) --------------------------------------------------------

def interpreter_problem() -> str | None:
    """Why Triton's interpreter cannot run in this process, or None. It must be chosen
    before Triton is imported (``@triton.jit`` reads it then): the cpu backend sets it when
    it opens, in its own engine process."""
    why = unavailable()
    if why:
        return why
    if "triton" in sys.modules and os.environ.get(INTERPRET_ENV) != "1":
        return ("Triton was imported in this process for the GPU; its interpreter needs a "
                "process of its own (run the cpu backend in an engine process)")
    return None


def interpreter_type_problem(dtype: str) -> str | None:
    """Why Triton's interpreter cannot run a kernel on ``dtype`` inputs, or None.

    Triton 3.6's interpreter runs float32 and float16 as numpy does, and FP8 (e4m3, e5m2)
    by widening both operands of ``tl.dot`` to float16 exactly. It holds bfloat16 as its raw
    16-bit words (numpy has no bfloat16) and multiplies and adds them as those integers in
    ``tl.dot`` and in arithmetic: a wrong C, which verification would blame on the kernel.
    """
    if ElementType(dtype) is ElementType.BFLOAT16:
        return ("Triton's interpreter (the cpu backend) cannot run bfloat16 inputs: Triton "
                "3.6 holds bfloat16 as raw 16-bit words and its tl.dot multiplies them as "
                "integers (a wrong C); run bfloat16 on the cuda backend, or float16 here")
    return None


def use_interpreter() -> None:
    """Choose Triton's interpreter for this process (before Triton is imported)."""
    if "triton" not in sys.modules:
        os.environ[INTERPRET_ENV] = "1"


class _HostPointer:
    """A host array as Triton takes a pointer argument: ``data_ptr()`` and ``dtype``."""

    def __init__(self, array: np.ndarray):
        self.array = array
        self.dtype = array.dtype

    def data_ptr(self) -> int:
        return self.array.ctypes.data


def _patch_numpy_scalars(interpreter) -> None:
    """Triton 3.6's interpreter turns a scalar argument into ``int(array of one)``, which
    numpy 2.4 refuses (a loop ``range(0, K, BLOCK_K)`` fails): the same, through ``item()``."""
    if getattr(interpreter, "_matmul_lab_patched", False):
        return
    original = interpreter._patch_lang_tensor

    def patched(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interpreter._patch_lang_tensor = patched
    interpreter._matmul_lab_patched = True


class InterpretedTritonKernel:
    """A Triton kernel run by the interpreter on host arrays: A and B in the run's input
    type (B as N×K for ``layout`` nk, read through its strides), C in its output type."""

    def __init__(self, variant: Variant, params, fn: Any, layout: str = "kn"):
        from triton.runtime import interpreter  # noqa: PLC0415  (optional, lazily)
        if type(fn).__name__ != "InterpretedFunction":
            raise TritonError(f"{variant.name}: Triton was not imported in interpreter mode")
        _patch_numpy_scalars(interpreter)

        class _OnHost(interpreter.GridExecutor):
            # The interpreter copies device tensors to the host and back around a launch;
            # these arrays are host memory already, read and written where they lie.
            def _init_args_hst(self, args_dev, kwargs):
                return args_dev, kwargs

            def _restore_args_dev(self, args_dev, args_hst, kwargs, kwargs_hst):
                return None

        self.variant, self.params, self.fn, self.layout = variant, dict(params), fn, layout
        self._executor = _OnHost
        self._constants = constants(variant, params)

    def __call__(self, a: np.ndarray, b: np.ndarray | None, c: np.ndarray,
                 m: int, n: int, k: int, scale: float = 1.0) -> None:
        (gx, gy), _ = self.variant.launch_geometry(self.params, m, n, k)
        run = self._executor(self.fn.fn, self.fn.arg_names, (gx, gy, 1))
        mats = (a, c) if self.variant.kind == "aat" else (a, b, c)
        dims = (m, k) if self.variant.kind == "aat" else (m, n, k)
        try:
            run(*map(_HostPointer, mats), *dims, *scale_args(self.variant, scale),
                *strides(self.variant, m, n, k, self.layout), **self._constants)
        except Exception as exc:  # noqa: BLE001  (the kernel's own failure, at its line)
            raise TritonError(_kernel_failure(self.variant, exc)) from None


def _kernel_failure(variant: Variant, exc: BaseException) -> str:
    """``file:line: message`` of an exception raised inside a kernel's code."""
    path = str(variant.headers[0].path) if variant.headers else variant.name
    cause = exc.__cause__ or exc
    frames = [f for f in traceback.extract_tb(cause.__traceback__) if f.filename == path]
    line = frames[-1].lineno if frames else 1
    return f"{shown_text(path)}:{line}: the kernel failed: {type(cause).__name__}: {shown_text(cause, 200)}"


# --- CUDA (the cuda backend) --------------------------------------------------------------

class _DevicePointer:
    """A device address as Triton takes a pointer argument (no tensor library: the
    engine's own pycuda buffers, handed over as their addresses); ``dtype`` is the element
    type's name as Triton spells it (``fp16``, ``bf16``, ``fp8e4nv``: :data:`POINTER`)."""

    def __init__(self, address: int, element: str = "float32"):
        self.address, self.dtype = int(address), POINTER[element].lstrip("*")

    def data_ptr(self) -> int:
        return self.address


class GpuTritonKernel:
    """A Triton kernel compiled for the open CUDA device and launched by Triton's launcher.

    Triton specializes a compiled kernel on its integer arguments (a 1 becomes a constant,
    a multiple of 16 lets it vectorize) and on 16-byte aligned pointers, so one compiled
    kernel per such class of arguments is kept (:meth:`_compiled`, by ``JITFunction.warmup``).
    Each launch is the compiled kernel's own launcher (``CompiledKernel[grid](...,
    stream=)``), not the JIT's dispatch (which asks torch for the current stream). Triton
    loads its module into the context current on this thread (the engine's pycuda context)
    and launches on the stream handle given, so the kernel reads and writes the engine's
    buffers in place.
    """

    def __init__(self, variant: Variant, params, fn: Any, types: TypeSpec | None = None):
        self.variant, self.params, self.fn = variant, dict(params), fn
        #: A's and B's type, C's type and B's layout of the launches (one compiled kernel
        #: serves one of each: Triton specializes on the pointers' types and the unit strides).
        self.types = types if types is not None else TypeSpec()
        self._constants = constants(variant, params)
        self._by_class: dict[tuple, Any] = {}
        self.registers = self.spills = self.shared_bytes = None

    def _args(self, pointers: tuple[int, ...], m, n, k, scale: float) -> tuple:
        dims = (m, k) if self.variant.kind == "aat" else (m, n, k)
        inputs, out = str(self.types.element), str(self.types.output)
        typed = [_DevicePointer(p, inputs) for p in pointers[:-1]] + [_DevicePointer(pointers[-1], out)]
        return (*typed, *dims, *scale_args(self.variant, scale),
                *strides(self.variant, m, n, k, str(self.types.layout)))

    def _compiled(self, args: tuple, grid: tuple[int, int, int]) -> Any:
        # Triton's classes: aligned pointers, integers equal to 1 or multiples of 16 (a float
        # is not specialized)
        key = tuple((a.data_ptr() % 16 == 0) if isinstance(a, _DevicePointer)
                    else "float" if isinstance(a, float) else (a == 1, a % 16 == 0) for a in args)
        got = self._by_class.get(key)
        if got is None:
            try:
                got = self.fn.warmup(*args, grid=grid, **self._constants,
                                     **launch_options(self.params))
                got._init_handles()
            except Exception as exc:  # noqa: BLE001  (Triton's compile errors name the line)
                raise TritonError(_kernel_failure(self.variant, exc)) from None
            self._by_class[key] = got
            self.registers = getattr(got, "n_regs", None)
            self.spills = getattr(got, "n_spills", None)
            self.shared_bytes = getattr(got.metadata, "shared", None)
        return got

    def launch(self, pointers: tuple[int, ...], m: int, n: int, k: int, stream_handle: int,
               scale: float = 1.0) -> None:
        """One launch on the matrices at ``pointers`` (A, B, C; ``aat``: A, C); ``scale``
        (scale_a·scale_b) goes to FP8 kernels only."""
        (gx, gy), _ = self.variant.launch_geometry(self.params, m, n, k)
        args = self._args(pointers, m, n, k, scale)
        compiled = self._compiled(args, (gx, gy, 1))
        # the launcher takes every argument in the signature's order, the constants too
        consts = [self._constants[name] for name in self.fn.arg_names if name in self._constants]
        compiled[(gx, gy, 1)](*args, *consts, stream=stream_handle)
