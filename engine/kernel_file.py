"""Kernel files that describe themselves: the header format, its parser, and discovery.

A kernel is one ``.cu`` (CUDA) or ``.cl`` (OpenCL) file. Its first comment holds a TOML
block between two lines of ``+++``::

    /*
    +++
    name = "tiled_any"
    title = "Shared-memory tiles with bounds-checked, zero-filled loads: any M, N, K."
    source = "seed 003: matMul_SharedMem with guarded tile loads"
    role = "seed"
    order = 3

    [params]                  # name = allowed values; the first is the default
    block = [16, 8, 32]

    [[constraints]]           # every check must hold; the first that fails says why
    check = "block * block <= 1024"
    reason = "block={block} is {block * block} threads per block (at most 1024)"

    [launch]
    grid = ["cdiv(N, block)", "cdiv(M, block)"]    # blocks in x, y
    block = ["block", "block"]                     # threads per block in x, y
    +++
    */

Keys (top level): ``name`` (required), ``title`` (one line: what the kernel does
differently; required), ``source`` (where the technique comes from; required),
``role`` (``baseline``, ``seed``, ``rung``, ``experiment`` or ``user``), ``order`` (its place
in the ladder as taught), ``backend`` (from the extension if left out), ``entry``
(default ``matmul``), ``kind`` (``gemm``: C = A·B, or ``aat``: C = A·Aᵀ), ``dtypes``
(default both), ``precision`` (``fp32`` or ``tf32``: the verification tolerance),
``arch_suffix`` (CUDA: ``"a"`` for sm_90a-only instructions such as wgmma).

Tables: ``[params]``; ``[derived]`` (names computed in order from the parameters, M, N,
K and ``SMS``, usable by every expression below); ``[chosen]`` (parameter = expression: the
value the shape picks for a parameter that a run leaves to it, see below); ``[[constraints]]`` (``check``, ``reason``; a
reason may quote values as ``{name}``); ``[launch]`` (``grid``, ``block``, and ``shared``:
bytes of dynamic shared memory, from the parameters only; CUDA: ``workspace``, bytes of
device memory the kernel gets as a last argument, ``matmul(A, B, C, M, N, K, workspace)``,
from the parameters and the shape, see below); ``[prepass]`` (a kernel run
before the main one in the same timed region, and not at all when its grid has no
blocks: ``entry``, ``grid``, ``block``, ``scratch`` bytes, and optional
``[[prepass.tensor_maps]]`` with ``at`` (byte offset of the maps in the scratch),
``base`` (``'a'``, ``'b'``, ``'c'``, the output, or ``'scratch'``), ``offset``, ``dims``,
``stride``, ``box``, ``elem``, ``"float32"`` (the default: copied as is) or ``"tf32"``
(the copy engine rounds every float to TF32, to nearest even, as it lands in shared
memory), and ``swizzle``, the shared-memory swizzle span in bytes, 128 (the default), 64 or
32 (the box's inner extent must not exceed it): TMA descriptors the backend encodes; a map
from ``'c'`` serves TMA stores of the result); ``[model]`` (``flops`` and
``bytes``, where they differ from the kind's defaults; ``itemsize`` is a name there);
``[defaults.sm_XY]`` (default parameters on one GPU architecture, see below).

The workspace (``launch.workspace``, CUDA kernels): a buffer of that many bytes, zero when the
backend allocates it or hands it from one kernel build to another; a kernel that keeps
counters there (a parallel split-K's per-tile arrival counts) must leave them zero when it
ends, so that the next launch of the same build finds them so. Where the expression is 0 the
kernel gets a null pointer. It lives beside the inputs for as long as they do (one per
device), and is not part of the FLOP or byte models.

Parameters chosen by the shape: where one value of a parameter is right for a shape and the
others only cost (whether C goes through shared memory by K, split-K of a last partial wave
only where the tiles make more than a wave), ``[chosen]`` says how the shape picks it::

    [chosen]
    crows = "1 if K <= 3072 else 0"

A run may leave such a parameter to the shape (the value ``auto``, :data:`engine.registry.AUTO`:
what the app ticks and what ``bench`` sweeps unless ``--params`` names the parameter); the
engine then runs the expression's value at each shape, and the record says which. Named
values still run as named (a constraint may refuse them with its reason).

Defaults per architecture: a parameter's default is the first value of its list, the
same on every GPU, unless a ``[defaults]`` table names a better one for the device's
architecture (its CUDA compute capability)::

    [defaults.sm_90]          # H100, H200: compute capability 9.0
    bk = 16
    [defaults.sm_8x]          # every 8.x GPU (8.0, 8.6, 8.9), where no sm_8Y table says otherwise
    bk = 8

Keys are ``sm_XY`` (compute capability X.Y, e.g. ``sm_90``, ``sm_86``, ``sm_120``) or
``sm_Xx`` (every X.Y); values must be values the parameter's list offers. The tables
are looked up by :meth:`engine.registry.Variant.default_params`: ``sm_Xx`` first, then
``sm_XY`` over it (the most specific wins, parameter by parameter); parameters no
table names keep their first value. Only the defaults change: the space searched, and
what a run with explicit parameters does, stay as they were.

``SMS`` is the device's multiprocessor count (CUDA SMs, OpenCL compute units) where the
launch is worked out for a device, so that a grid can be sized to waves (a persistent
grid, a split of the last wave); where no device is known (checking a file, listing
skips) it is :data:`DEFAULT_SMS`, an H100/H200 SXM's 132.

Expressions are Python-like integer arithmetic (``+ - * // % **``, comparisons, ``and or
not``, ``x if c else y``), with ``cdiv(a, b)``, ``roundup(a, b)``, ``min``, ``max``, and
the names above, evaluated by ``simpleeval`` (never ``eval``). Every problem is reported
with the file and the line: a malformed header, an unknown key or name, an expression
that does not parse; a value-dependent failure (division by zero, a non-integer block
count) makes that combination a skip with the reason.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import re
import string
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

from simpleeval import InvalidExpression, SimpleEval

#: ``SMS`` where no device is known (an H100/H200 SXM's multiprocessor count).
DEFAULT_SMS = 132

#: A header's fences, each alone on its line.
FENCE = "+++"
BACKEND_OF_SUFFIX = {".cu": "cuda", ".cl": "opencl"}
ROLES = ("baseline", "seed", "rung", "experiment", "user")
KINDS = ("gemm", "aat")
PRECISIONS = ("fp32", "tf32")
DTYPES = ("float32", "int32")
TOP_KEYS = {"name", "title", "source", "role", "order", "backend", "entry", "kind", "dtypes",
            "precision", "arch_suffix", "params", "derived", "chosen", "constraints", "launch",
            "prepass", "model", "defaults"}
LAUNCH_KEYS = {"grid", "block", "shared", "workspace"}
PREPASS_KEYS = {"entry", "grid", "block", "scratch", "tensor_maps"}
MAP_KEYS = {"at", "base", "offset", "dims", "stride", "box", "elem", "swizzle"}
#: Element types of a tensor map: "float32" copies floats as they are; "tf32" has TMA round
#: each one to TF32 (to nearest, ties to even; the low 13 mantissa bits cleared) on the way.
MAP_ELEMS = ("float32", "tf32")
#: Whose device address a tensor map starts from: the inputs A or B, the output C (TMA
#: stores of the result), or the scratch.
MAP_BASES = ("a", "b", "c", "scratch")
#: Shared-memory swizzle spans (bytes) a tensor map may ask for: 16-byte chunk c of row r
#: of a box lands at chunk c ^ (r % (span / 16)) of its span.
MAP_SWIZZLES = (128, 64, 32)
MODEL_KEYS = {"flops", "bytes"}
CONSTRAINT_KEYS = {"check", "reason"}
SHAPE_NAMES = ("M", "N", "K")
#: Names the device fills in (see ``SMS`` above).
DEVICE_NAMES = ("SMS",)
NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*$")
#: A ``[defaults]`` key: ``sm_XY`` (compute capability X.Y) or ``sm_Xx`` (every X.Y).
ARCH_RE = re.compile(r"^sm_(\d+)(\d|x)$")

FUNCTIONS: dict[str, Callable] = {
    "cdiv": lambda a, b: -(-a // b),
    "roundup": lambda a, b: -(-a // b) * b,
    "min": min,
    "max": max,
}


class KernelFileError(ValueError):
    """A kernel file that cannot be used: ``path:line: message``."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path, self.line, self.message = Path(path), line, message
        where = f"{self.path}:{line}" if line else str(self.path)
        super().__init__(f"{where}: {message}")


class ExpressionError(ValueError):
    """An expression failed for particular values (division by zero, a non-integer)."""


# --- expressions ---------------------------------------------------------------------

@dataclass(frozen=True)
class Expr:
    """One header expression, parsed once; ``where`` names it in messages."""

    text: str
    where: str
    tree: Any = dataclasses.field(compare=False, repr=False)

    def names(self) -> set[str]:
        return {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name)}

    def __call__(self, env: Mapping[str, Any]) -> Any:
        ev = SimpleEval(functions=FUNCTIONS, names=env)
        try:
            return ev.eval(self.text, previously_parsed=self.tree)
        except ZeroDivisionError:
            raise ExpressionError(f"{self.where}: division by zero in '{self.text}'") from None
        except (InvalidExpression, ArithmeticError, TypeError, ValueError) as exc:
            raise ExpressionError(f"{self.where}: '{self.text}' failed: {exc}") from None

    def integer(self, env: Mapping[str, Any]) -> int:
        v = self(env)
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                return int(v)
            raise ExpressionError(f"{self.where}: '{self.text}' is {v!r}, not a whole number "
                                  f"(write // for integer division)")
        return v


def _parse_expr(value: Any, where: str, line: int | None, path: Path) -> Expr:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise KernelFileError(path, line, f"{where} must be an expression in quotes or a number, "
                                          f"not {value!r}")
    text = str(value)
    try:
        tree = SimpleEval().parse(text)
    except SyntaxError as exc:
        raise KernelFileError(path, line, f"{where}: '{text}' does not parse: {exc.msg}") from None
    return Expr(text, where, tree)


class Env(dict):
    """Names for one evaluation: parameters, M, N, K, then derived names on first use."""

    def __init__(self, base: Mapping[str, Any], derived: Mapping[str, Expr]):
        super().__init__(base)
        self._derived = derived

    def __missing__(self, key: str):
        expr = self._derived.get(key)
        if expr is None:
            raise KeyError(key)
        self[key] = value = expr(self)
        return value


# --- the parsed header ------------------------------------------------------------------

@dataclass(frozen=True)
class TensorMap:
    """One TMA descriptor of a pre-pass, as expressions: the backend encodes it."""

    base: Expr          # MAP_BASES: whose device address the map starts from
    offset: Expr        # bytes from that address
    dims: tuple[Expr, Expr]
    stride: Expr        # bytes between rows
    box: tuple[Expr, Expr]
    elem: str = "float32"   # MAP_ELEMS: "tf32" has TMA round to TF32 as it copies
    swizzle: int = 128      # MAP_SWIZZLES: bytes of the shared-memory swizzle span


class MapSpec(NamedTuple):
    """One tensor map evaluated at a shape: what ``encode_tensor_map_2d`` encodes."""

    base: str           # MAP_BASES
    offset: int         # bytes from the base's device address
    dim0: int           # elements per row
    dim1: int           # rows
    stride: int         # bytes between rows
    box0: int
    box1: int
    elem: str
    swizzle: int


@dataclass(frozen=True)
class Prepass:
    """A kernel launched before the variant's own on every launch (same timed region):
    ``entry(A, B, scratch, M, N, K)``, then ``matmul(A, scratch, C, M, N, K)``."""

    entry: str
    grid: tuple[Expr, Expr]
    block: tuple[Expr, Expr]
    scratch: Expr
    maps_at: Expr | None = None
    maps: tuple[TensorMap, ...] = ()
    derived: Mapping[str, Expr] = dataclasses.field(default_factory=dict)

    def _env(self, params, m, n, k, sms: int | None = None) -> Env:
        return Env({**params, "M": m, "N": n, "K": k, "SMS": sms or DEFAULT_SMS}, self.derived)

    def geometry(self, params, m: int, n: int, k: int, sms: int | None = None):
        env = self._env(params, m, n, k, sms)
        return ((self.grid[0].integer(env), self.grid[1].integer(env)),
                (self.block[0].integer(env), self.block[1].integer(env)))

    def scratch_bytes(self, params, m: int, n: int, k: int) -> int:
        return self.scratch.integer(self._env(params, m, n, k))

    def tensor_maps(self, params, m: int, n: int, k: int):
        """(byte offset of the maps in the scratch, [MapSpec, ...]), or None when the
        pre-pass has no tensor maps."""
        if not self.maps:
            return None
        env = self._env(params, m, n, k)
        out = []
        for t in self.maps:
            base = t.base(env)
            if base not in MAP_BASES:
                raise ExpressionError(f"{t.base.where}: base must be "
                                      f"{', '.join(map(repr, MAP_BASES[:-1]))} or "
                                      f"{MAP_BASES[-1]!r}, not {base!r}")
            box0 = t.box[0].integer(env)
            if box0 * 4 > t.swizzle:
                raise ExpressionError(f"{t.box[0].where}: an inner box of {box0} floats is wider "
                                      f"than the map's {t.swizzle}-byte swizzle span")
            out.append(MapSpec(base, t.offset.integer(env), t.dims[0].integer(env),
                               t.dims[1].integer(env), t.stride.integer(env), box0,
                               t.box[1].integer(env), t.elem, t.swizzle))
        return self.maps_at.integer(env), out


@dataclass(frozen=True)
class Constraint:
    check: Expr
    reason: str
    #: The reason cut into (text, field) pieces, each ``{field}`` parsed once.
    parts: tuple[tuple[str, Expr | None], ...] = ()

    def reason_for(self, env: Mapping[str, Any]) -> str:
        """The reason with its ``{expression}`` fields filled in."""
        return "".join(text + ("" if e is None else str(e(env))) for text, e in self.parts)


@dataclass(eq=False)        # identity: the geometry cache keys on the header
class KernelHeader:
    """What a kernel file says about itself (see the module docstring)."""

    path: Path
    backend: str
    name: str
    title: str
    source: str
    role: str
    order: int | None
    entry: str
    kind: str
    dtypes: tuple[str, ...]
    precision: str
    arch_suffix: str
    space: dict[str, tuple[int, ...]]
    derived: dict[str, Expr]
    constraints: list[Constraint]
    grid: tuple[Expr, Expr]
    block: tuple[Expr, Expr]
    shared: Expr | None
    prepass: Prepass | None
    flops: Expr | None
    bytes: Expr | None
    #: Line of the header's first TOML line in the file (1-based), for messages.
    first_line: int = 1
    #: The whole file as read: the source a backend compiles, so that a file replaced
    #: or being rewritten after registration cannot change (or break) a running sweep.
    text: str = dataclasses.field(default="", repr=False)
    #: ``[defaults]``: architecture (``sm_90``, ``sm_9x``) → parameter → default there.
    arch_defaults: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    #: ``launch.workspace``: bytes of the kernel's workspace argument (CUDA), or None.
    workspace: Expr | None = None
    #: ``[chosen]``: parameter → the expression that picks its value from the shape.
    chosen: dict[str, Expr] = dataclasses.field(default_factory=dict)

    def semantics(self) -> tuple:
        """What must agree between the .cu and .cl files of one variant."""
        return (self.kind, self.dtypes, self.precision, self.entry,
                tuple((k, v) for k, v in self.space.items()),
                tuple((k, e.text) for k, e in self.derived.items()),
                tuple((c.check.text, c.reason) for c in self.constraints),
                tuple(e.text for e in self.grid), tuple(e.text for e in self.block),
                self.flops.text if self.flops else None, self.bytes.text if self.bytes else None,
                self.workspace.text if self.workspace else None,
                tuple((k, e.text) for k, e in self.chosen.items()))

    # --- evaluation (the registry's Variant calls these) -------------------------------

    def env(self, params, m: int = 0, n: int = 0, k: int = 0, **more) -> Env:
        return Env({**params, "M": m, "N": n, "K": k, "SMS": DEFAULT_SMS, **more}, self.derived)

    @functools.lru_cache(maxsize=4096)  # noqa: B019  (headers live as long as the registry)
    def _geometry(self, params_key: tuple, m: int, n: int, k: int, sms: int):
        env = self.env(dict(params_key), m, n, k, SMS=sms)
        return ((self.grid[0].integer(env), self.grid[1].integer(env)),
                (self.block[0].integer(env), self.block[1].integer(env)))

    def geometry(self, params, m: int, n: int, k: int, sms: int | None = None):
        """((grid x, y), (block x, y)) at a shape; ``sms``: the device's multiprocessor
        count (``SMS`` in the expressions; :data:`DEFAULT_SMS` when None)."""
        return self._geometry(tuple(sorted(params.items())), m, n, k, sms or DEFAULT_SMS)

    def constraint(self, params, m: int, n: int, k: int, dtype: str) -> str | None:
        env = self.env(params, m, n, k)
        try:
            for c in self.constraints:
                if not c.check(env):
                    return c.reason_for(env)
            self.geometry(params, m, n, k)   # a geometry that cannot be computed is a skip
            self.workspace_bytes(params, m, n, k)   # as is a workspace that cannot
        except ExpressionError as exc:
            return str(exc)
        return None

    def shared_bytes(self, params) -> int:
        return self.shared.integer(self.env(params)) if self.shared is not None else 0

    def workspace_bytes(self, params, m: int, n: int, k: int, sms: int | None = None) -> int:
        """Bytes of the workspace argument at a shape (0: none; see ``launch.workspace``)."""
        if self.workspace is None:
            return 0
        nbytes = self.workspace.integer(self.env(params, m, n, k, SMS=sms or DEFAULT_SMS))
        if nbytes < 0:
            raise ExpressionError(f"{self.workspace.where}: {nbytes} bytes (must be ≥ 0)")
        return nbytes


# --- reading a file ------------------------------------------------------------------------

def header_block(text: str, path: Path) -> tuple[str, int]:
    """The TOML between the fences of the file's first comment, and its first line."""
    start = text.find("/*")
    lead = text[:start] if start >= 0 else text
    if start < 0 or lead.strip():
        raise KernelFileError(path, 1, "no kernel header: the file must start with a /* ... */ "
                                       f"comment holding a TOML block between two '{FENCE}' lines")
    end = text.find("*/", start)
    if end < 0:
        raise KernelFileError(path, text.count("\n", 0, start) + 1, "the first comment never ends (*/)")
    lines = text[start + 2:end].split("\n")
    first = text.count("\n", 0, start) + 1          # file line of lines[0]
    fences = [i for i, line in enumerate(lines) if line.strip() == FENCE]
    if len(fences) < 2:
        raise KernelFileError(path, first, f"no kernel header: the first comment needs a TOML block "
                                           f"between two lines of '{FENCE}'")
    a, b = fences[0], fences[1]
    return "\n".join(lines[a + 1:b]), first + a + 1


def _line_of(block: str, first_line: int, *keys: str) -> int:
    """The file line where ``keys`` (a table, then a key in it) is written, else the start."""
    lines = block.split("\n")
    start = 0
    if len(keys) > 1:
        table = re.compile(r"^\s*\[\[?\s*" + re.escape(".".join(keys[:-1])) + r"\s*\]\]?")
        for i, line in enumerate(lines):
            if table.match(line):
                start = i
                break
    key = re.compile(r"^\s*\[*\s*" + re.escape(keys[-1]) + r"\b")
    for i in range(start, len(lines)):
        if key.match(lines[i]):
            return first_line + i
    return first_line + start


def parse_header(path: Path | str, text: str | None = None) -> KernelHeader:
    """Read and check one kernel file's header; raises :class:`KernelFileError`."""
    path = Path(path)
    if text is None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise KernelFileError(path, None, f"cannot read it: {exc}") from None
    block, first = header_block(text, path)
    try:
        data = tomllib.loads(block)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        line = first + int(m.group(1)) - 1 if m else first
        raise KernelFileError(path, line, f"the header is not valid TOML: "
                                          f"{re.sub(r' ?[(]at line.*[)]', '', msg)}") from None
    header = _build(path, data, block, first)
    header.text = text
    return header


def _build(path: Path, data: dict, block: str, first: int) -> KernelHeader:
    def err(message: str, *keys: str):
        raise KernelFileError(path, _line_of(block, first, *keys) if keys else first, message)

    def unknown(got: Mapping, allowed: set, where: str, *keys: str):
        extra = sorted(set(got) - allowed)
        if extra:
            err(f"unknown key '{extra[0]}' in {where} (known: {', '.join(sorted(allowed))})",
                *keys, extra[0])

    unknown(data, TOP_KEYS, "the header")
    for key in ("name", "title", "source"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            err(f"'{key}' is required (a string)", key)
    name = data["name"]
    if not NAME_RE.match(name):
        err(f"name '{name}' must be lower-case letters, digits and _ (it is a command-line name)",
            "name")
    backend = data.get("backend", BACKEND_OF_SUFFIX.get(path.suffix))
    if backend not in ("cuda", "opencl"):
        err(f"backend must be cuda or opencl (or the file end in .cu or .cl), not {backend!r}",
            "backend")
    role = data.get("role", "user")
    if role not in ROLES:
        err(f"role must be one of {', '.join(ROLES)}, not {role!r}", "role")
    order = data.get("order")
    if order is not None and (isinstance(order, bool) or not isinstance(order, int)):
        err(f"order must be a whole number, not {order!r}", "order")
    kind = data.get("kind", "gemm")
    if kind not in KINDS:
        err(f"kind must be gemm or aat, not {kind!r}", "kind")
    dtypes = data.get("dtypes", list(DTYPES))
    if (not isinstance(dtypes, list) or not dtypes or any(d not in DTYPES for d in dtypes)):
        err(f"dtypes must be a list of {', '.join(DTYPES)}, not {dtypes!r}", "dtypes")
    precision = data.get("precision", "fp32")
    if precision not in PRECISIONS:
        err(f"precision must be fp32 or tf32, not {precision!r}", "precision")
    entry = data.get("entry", "matmul")
    suffix = data.get("arch_suffix", "")
    for key, val in (("entry", entry), ("arch_suffix", suffix)):
        if not isinstance(val, str):
            err(f"{key} must be a string, not {val!r}", key)

    params = data.get("params", {})
    if not isinstance(params, dict):
        err("[params] must be a table: name = [values]", "params")
    space: dict[str, tuple[int, ...]] = {}
    for pname, vals in params.items():
        if not NAME_RE.match(pname) or pname.upper() in ("M", "N", "K", "ELEM", "ACC"):
            err(f"parameter name '{pname}' must be lower-case and not M, N, K, ELEM or ACC",
                "params", pname)
        if isinstance(vals, int) and not isinstance(vals, bool):
            vals = [vals]
        if (not isinstance(vals, list) or not vals
                or any(isinstance(v, bool) or not isinstance(v, int) for v in vals)):
            err(f"parameter '{pname}' must list whole numbers, the default first: {pname} = [16, 8]",
                "params", pname)
        if len(set(vals)) != len(vals):
            err(f"parameter '{pname}' lists a value twice: {vals}", "params", pname)
        space[pname] = tuple(vals)

    arch_defaults = _arch_defaults(data.get("defaults", {}), space, err, block)

    known = set(space) | set(SHAPE_NAMES) | set(DEVICE_NAMES)

    def expr(value, where: str, *keys: str, names: set[str] | None = None) -> Expr:
        e = _parse_expr(value, where, _line_of(block, first, *keys), path)
        allowed = known if names is None else names
        missing = sorted(e.names() - allowed - set(FUNCTIONS))
        if missing:
            err(f"{where}: unknown name '{missing[0]}' in '{e.text}' "
                f"(known: {', '.join(sorted(allowed))})", *keys)
        return e

    derived_raw = data.get("derived", {})
    if not isinstance(derived_raw, dict):
        err("[derived] must be a table: name = \"expression\"", "derived")
    derived: dict[str, Expr] = {}
    for dname, val in derived_raw.items():
        if not NAME_RE.match(dname) or dname in known:
            err(f"derived name '{dname}' must be new and lower-case", "derived", dname)
        derived[dname] = expr(val, f"derived.{dname}", "derived", dname)
        known.add(dname)

    chosen_raw = data.get("chosen", {})
    if not isinstance(chosen_raw, dict):
        err("[chosen] must be a table: parameter = \"expression\"", "chosen")
    chosen: dict[str, Expr] = {}
    for cname, val in chosen_raw.items():
        if cname not in space:
            err(f"[chosen] names '{cname}', which is not in [params]", "chosen", cname)
        chosen[cname] = expr(val, f"chosen.{cname}", "chosen", cname)

    constraints = []
    raw = data.get("constraints", [])
    if not isinstance(raw, list):
        err("constraints must be [[constraints]] tables with check and reason", "constraints")
    for i, c in enumerate(raw):
        if not isinstance(c, dict):
            err("each [[constraints]] needs check and reason", "constraints")
        unknown(c, CONSTRAINT_KEYS, "[[constraints]]", "constraints")
        if "check" not in c or not isinstance(c.get("reason"), str):
            err("each [[constraints]] needs check (an expression) and reason (a text)",
                "constraints")
        chk = expr(c["check"], f"constraints[{i}].check", "constraints", "check")
        parts = tuple((text, None if fld is None else
                       expr(fld, f"constraints[{i}].reason", "constraints", "reason"))
                      for text, fld, _spec, _conv in string.Formatter().parse(c["reason"]))
        constraints.append(Constraint(chk, c["reason"], parts))

    launch = data.get("launch")
    if not isinstance(launch, dict):
        err("[launch] is required: grid = [x, y] and block = [x, y]", "launch")
    unknown(launch, LAUNCH_KEYS, "[launch]", "launch")

    def pair(value, where: str, *keys: str, names=None) -> tuple[Expr, Expr]:
        if not isinstance(value, list) or len(value) != 2:
            err(f"{where} must be two expressions [x, y]", *keys)
        return (expr(value[0], f"{where}[0]", *keys, names=names),
                expr(value[1], f"{where}[1]", *keys, names=names))

    grid = pair(launch.get("grid"), "launch.grid", "launch", "grid")
    block_ = pair(launch.get("block"), "launch.block", "launch", "block")
    shared = None
    if "shared" in launch:
        shared = expr(launch["shared"], "launch.shared", "launch", "shared")
        shape_bound = _uses_shape(shared, derived)
        if shape_bound:
            err(f"launch.shared may depend on the parameters only, not {shape_bound}",
                "launch", "shared")

    workspace = None
    if "workspace" in launch:
        if backend != "cuda":
            err("launch.workspace is for CUDA kernels only", "launch", "workspace")
        workspace = expr(launch["workspace"], "launch.workspace", "launch", "workspace")

    prepass = None
    if "prepass" in data:
        pre = data["prepass"]
        if not isinstance(pre, dict):
            err("[prepass] must be a table", "prepass")
        unknown(pre, PREPASS_KEYS, "[prepass]", "prepass")
        if not isinstance(pre.get("entry"), str):
            err("prepass.entry is required (the pre-pass kernel's name)", "prepass", "entry")
        maps = []
        maps_at = None
        for j, t in enumerate(pre.get("tensor_maps", [])):
            if not isinstance(t, dict):
                err("each [[prepass.tensor_maps]] must be a table", "prepass")
            unknown(t, MAP_KEYS, "[[prepass.tensor_maps]]", "prepass", "tensor_maps")
            missing = sorted(MAP_KEYS - {"at", "elem", "swizzle"} - set(t))
            if missing:
                err(f"prepass.tensor_maps[{j}] needs {', '.join(missing)}", "prepass", "tensor_maps")
            w = f"prepass.tensor_maps[{j}]"
            if "at" in t:
                maps_at = expr(t["at"], f"{w}.at", "prepass", "at")
            elem = t.get("elem", "float32")
            if elem not in MAP_ELEMS:
                err(f"{w}.elem must be one of {', '.join(map(repr, MAP_ELEMS))}, not {elem!r}",
                    "prepass", "elem")
            swizzle = t.get("swizzle", 128)
            if type(swizzle) is not int or swizzle not in MAP_SWIZZLES:
                err(f"{w}.swizzle must be one of {', '.join(map(str, MAP_SWIZZLES))} (bytes), "
                    f"not {swizzle!r}", "prepass", "swizzle")
            maps.append(TensorMap(expr(t["base"], f"{w}.base", "prepass", "base"),
                                  expr(t["offset"], f"{w}.offset", "prepass", "offset"),
                                  pair(t["dims"], f"{w}.dims", "prepass", "dims"),
                                  expr(t["stride"], f"{w}.stride", "prepass", "stride"),
                                  pair(t["box"], f"{w}.box", "prepass", "box"), elem, swizzle))
        if maps and maps_at is None:
            err("prepass.tensor_maps: the first map needs 'at' (byte offset of the maps in "
                "the scratch)", "prepass", "tensor_maps")
        prepass = Prepass(pre["entry"], pair(pre.get("grid"), "prepass.grid", "prepass", "grid"),
                          pair(pre.get("block"), "prepass.block", "prepass", "block"),
                          expr(pre.get("scratch", 0), "prepass.scratch", "prepass", "scratch"),
                          maps_at, tuple(maps), derived)

    model = data.get("model", {})
    if not isinstance(model, dict):
        err("[model] must be a table with flops and/or bytes", "model")
    unknown(model, MODEL_KEYS, "[model]", "model")
    shape_names = set(SHAPE_NAMES)
    flops = expr(model["flops"], "model.flops", "model", "flops", names=shape_names) \
        if "flops" in model else None
    bytes_ = expr(model["bytes"], "model.bytes", "model", "bytes",
                  names=shape_names | {"itemsize"}) if "bytes" in model else None

    return KernelHeader(path, backend, name, data["title"].strip(), data["source"].strip(), role,
                        order, entry, kind, tuple(dtypes), precision, suffix, space, derived,
                        constraints, grid, block_, shared, prepass, flops, bytes_, first,
                        arch_defaults=arch_defaults, workspace=workspace, chosen=chosen)


def _arch_defaults(raw: Any, space: Mapping[str, tuple[int, ...]], err: Callable,
                   block: str) -> dict[str, dict[str, int]]:
    """The ``[defaults]`` tables, checked: architecture keys, known parameters, and
    values the parameter offers (each problem reported at its line)."""
    def table_written(arch: str) -> bool:      # [defaults.sm_90] rather than sm_90 = {...}
        return re.search(r"(?m)^\s*\[\s*defaults\s*\.\s*" + re.escape(arch) + r"\s*\]", block) is not None

    def where(arch: str, pname: str | None = None) -> tuple[str, ...]:
        if table_written(arch):
            return ("defaults", arch, pname) if pname else (f"defaults.{arch}",)
        return ("defaults", arch)

    if not isinstance(raw, dict):
        err("[defaults] must hold one table per architecture: [defaults.sm_90] with "
            "name = value lines", "defaults")
    out: dict[str, dict[str, int]] = {}
    for arch, table in raw.items():
        if not ARCH_RE.match(arch):
            err(f"[defaults]: '{arch}' is not an architecture: write sm_XY for compute "
                "capability X.Y (sm_90) or sm_Xx for every X.Y (sm_9x)", *where(arch))
        if not isinstance(table, dict):
            err(f"defaults.{arch} must be a table of parameter = value: [defaults.{arch}]",
                *where(arch))
        chosen: dict[str, int] = {}
        for pname, val in table.items():
            if pname not in space:
                known = ", ".join(space) or "none"
                err(f"defaults.{arch}: '{pname}' is not a parameter of this kernel "
                    f"(parameters: {known})", *where(arch, pname))
            if isinstance(val, bool) or not isinstance(val, int):
                err(f"defaults.{arch}.{pname} must be one whole number, not {val!r}",
                    *where(arch, pname))
            if val not in space[pname]:
                err(f"defaults.{arch}.{pname} = {val} is not one of {pname}'s values "
                    f"{list(space[pname])}", *where(arch, pname))
            chosen[pname] = val
        out[arch] = chosen
    return out


def _uses_shape(e: Expr, derived: Mapping[str, Expr], seen=None) -> str:
    """The shape or device name (M, N, K or SMS) ``e`` depends on, through derived names
    too; '' if none."""
    seen = seen or set()
    for name in e.names():
        if name in SHAPE_NAMES or name in DEVICE_NAMES:
            return name
        if name in derived and name not in seen:
            seen.add(name)
            got = _uses_shape(derived[name], derived, seen)
            if got:
                return got
    return ""
