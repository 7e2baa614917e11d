"""Kernel files that describe themselves: the header format, its parser, and discovery.

A kernel is one ``.cu`` (CUDA) or ``.cl`` (OpenCL) file whose first comment holds a TOML
block between two lines of ``+++``: name, title, parameters, constraints, launch geometry,
FLOP and byte models. The format, every key, the expressions and the limits a header
must keep are described once, in ``docs/kernel-format.md``; this module parses and checks
a header (:func:`parse_header`), evaluates its expressions within those limits
(:class:`Expr`: bounded integers, never ``eval``) and reports every problem as a
:class:`KernelFileError` (``file:line: message``, short, control characters shown).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import math
import operator
import re
import string
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

from simpleeval import InvalidExpression, SimpleEval

from engine.common.files import read_text
from engine.common.terminal import visible

#: ``SMS`` where no device is known (an H100/H200 SXM's multiprocessor count).
DEFAULT_SMS = 132

#: A header's fences, each alone on its line.
FENCE = "+++"
BACKEND_OF_SUFFIX = {".cu": "cuda", ".cl": "opencl", ".py": "cuda"}
#: Suffix of a Triton kernel file: its header is the module docstring's TOML block, and it
#: runs on CUDA devices through Triton (and on the CPU through Triton's interpreter).
TRITON_SUFFIX = ".py"
#: Triton's launch options that a ``.py`` header may list in [params]: passed to the launch,
#: not to the kernel as ``tl.constexpr`` (threads per block = 32 * num_warps).
TRITON_LAUNCH_PARAMS = ("num_warps", "num_stages")
#: Threads per block of a Triton launch that names no num_warps (Triton's default 4 warps).
TRITON_DEFAULT_THREADS = 128
ROLES = ("baseline", "seed", "rung", "experiment", "user")
KINDS = ("gemm", "aat")
#: "half": 16-bit float inputs (float16 or bfloat16, by the run's type) on tensor cores with
#: FP32 accumulation; the record's arithmetic (fp16, bf16) follows the run's type.
#: "fp8": FP8 inputs (e4m3 or e5m2, by the run's type) with per-tensor scales on tensor cores.
#: "int8": int8 inputs on tensor cores, products summed in int32 (exact), C in int32.
PRECISIONS = ("fp32", "tf32", "half", "fp8", "int8")
DTYPES = ("float32", "int32")
#: 16-bit float types a CUDA C kernel file may declare (ELEM = __half / __nv_bfloat16, OUT
#: = float or ELEM: engine.kernels.registry.Variant.defines); a file declares these or DTYPES,
#: not both (its code and its precision differ). A Triton file may declare them too (its
#: pointers are typed at the launch: engine.measure.triton_kernels).
HALF_DTYPES = ("float16", "bfloat16")
#: FP8 types a CUDA C or Triton kernel file may declare (ELEM = __nv_fp8_e4m3 / __nv_fp8_e5m2,
#: OUT = float or __nv_bfloat16; the kernel takes the per-tensor scales' product as an argument).
FP8_DTYPES = ("float8_e4m3", "float8_e5m2")
#: int8 for CUDA C kernel files only (ELEM = signed char, ACC = OUT = int: C is int32); a file
#: declares it alone, with precision "int8".
INT8_DTYPES = ("int8",)
KERNEL_DTYPES = DTYPES + HALF_DTYPES + FP8_DTYPES + INT8_DTYPES
#: B's layouts a kernel file may take (engine.common.dtypes.Layout): "kn", B as K×N
#: row-major, every kernel; "nk", B as N×K (a CUDA C kernel is built with B_NK = 1, a Triton
#: kernel is handed B's strides as N×K: stride_bk = 1, stride_bn = K).
LAYOUTS = ("kn", "nk")
TOP_KEYS = {"name", "title", "summary", "source", "role", "order", "newcomer", "backend", "entry", "kind",
            "dtypes", "precision", "arch_suffix", "params", "derived", "chosen", "constraints",
            "launch", "prepass", "model", "defaults", "descriptions", "layouts"}
LAUNCH_KEYS = {"grid", "block", "shared", "workspace"}
PREPASS_KEYS = {"entry", "grid", "block", "scratch", "tensor_maps", "when", "maps_in"}
#: Where the main kernel finds the pre-pass's tensor maps: in the scratch at ``at``, or as its
#: first arguments (128 bytes each, in order: ``const __grid_constant__`` 64-byte-aligned
#: structs, read by TMA from the launch's parameter space with no fence).
MAPS_IN = ("scratch", "params")
MAP_KEYS = {"at", "base", "offset", "dims", "stride", "box", "elem", "swizzle"}
#: Element types of a tensor map: "float32" copies floats as they are; "tf32" has TMA round
#: each one to TF32 (to nearest, ties to even; the low 13 mantissa bits cleared) on the way.
#: "b16" and "b8" copy 16-bit (FP16, BF16) and 8-bit (FP8, int8) words as they are.
MAP_ELEMS = ("float32", "tf32", "b16", "b8")
#: Bytes of one element of each map element type.
MAP_ELEM_BYTES = {"float32": 4, "tf32": 4, "b16": 2, "b8": 1}
#: Whose device address a tensor map starts from: the inputs A or B, the output C (TMA
#: stores of the result), or the scratch.
MAP_BASES = ("a", "b", "c", "scratch")
#: Shared-memory swizzle spans (bytes) a tensor map may ask for: 16-byte chunk c of row r
#: of a box lands at chunk c ^ (r % (span / 16)) of its span.
MAP_SWIZZLES = (128, 64, 32)
MODEL_KEYS = {"flops", "bytes"}
CONSTRAINT_KEYS = {"check", "reason"}
SHAPE_NAMES = ("M", "N", "K")
#: The run's names only a pre-pass's expressions see, with the values they have where no
#: run sets them: ``NK``, 1 where the run has B as N×K (layout nk), else 0; ``OB``, the bytes
#: of one element of C (2 for a 16-bit C, else 4).
PREPASS_DEFAULTS = {"NK": 0, "OB": 4}
PREPASS_NAMES = tuple(PREPASS_DEFAULTS)
#: Names the device or the run fills in: ``SMS`` (see above) and the pre-pass's.
DEVICE_NAMES = ("SMS",) + PREPASS_NAMES
NAME_RE = re.compile(r"^[a-z_][a-z0-9_]*\Z")
#: A kernel's entry point (and a pre-pass's): a C identifier.
ENTRY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
#: A ``[defaults]`` key: ``sm_XY`` (compute capability X.Y) or ``sm_Xx`` (every X.Y).
ARCH_RE = re.compile(r"^sm_(\d+)(\d|x)\Z")

# --- limits (the module docstring lists them, and what the built-ins use) ------------------

KERNEL_FILE_LIMIT = 4 * 1024**2
MAX_HEADER_CHARS = 64 * 1024
MAX_PARAMS = 16
MAX_VALUES = 32
MAX_COMBOS = 4096
MAX_PARAM_VALUE = 2**31 - 1
MAX_DERIVED = 128
MAX_CONSTRAINTS = 64
MAX_TENSOR_MAPS = 8
MAX_ARCH_TABLES = 32
MAX_NAME_CHARS = 64
MAX_TEXT_CHARS = 2000
#: A title: one line that a row of the variant tree and ``bench --list`` show whole; the
#: longer story goes to ``summary`` (docs/kernel-format.md, "Titles and descriptions").
MAX_TITLE_CHARS = 100
#: A parameter's description: one line, for a tooltip and ``bench --list``.
MAX_DESCRIPTION_CHARS = 200
MAX_REASON_CHARS = 1000
MAX_EXPR_CHARS = 1000
MAX_EXPR_NODES = 400
MAX_EXPR_DEPTH = 40
MAX_HEADER_NODES = 2000
INT_LIMIT = 2**63
MAX_STRING_CHARS = 1000
MODEL_FACTOR = 16
MAX_MESSAGE_CHARS = 300
#: How much of an expression a message quotes.
QUOTE_CHARS = 80


def _cdiv(a, b):
    return -(-a // b)


def _roundup(a, b):
    return -(-a // b) * b


FUNCTIONS: dict[str, Callable] = {
    "cdiv": _cdiv,
    "roundup": _roundup,
    "min": min,
    "max": max,
}

_SURROGATE = re.compile("[\ud800-\udfff]")


def _hidden(ch: str) -> bool:
    """Whether ``ch`` is shown by its escape (:func:`engine.common.terminal.visible`: a control
    character, a line separator, a direction override; here also a lone surrogate, what
    an undecodable byte of a file name becomes)."""
    return visible(ch) != ch or bool(_SURROGATE.match(ch))


def shown_text(text: Any, limit: int | None = None) -> str:
    """``text`` as it can be shown anywhere: :func:`engine.common.terminal.visible` (control
    characters as escapes, so a terminal or a window shows what the text holds and nothing
    in it acts), lone surrogates as ``\\udcff`` (they cannot be printed), cut in the
    middle (``…``) to ``limit`` characters."""
    text = str(text)
    if limit is not None and len(text) > 4 * limit:      # escaping only what may be shown
        text = text[:2 * limit] + "\u2026" + text[-2 * limit:]
    text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", visible(text))
    if limit is not None and len(text) > limit:
        head = max(limit * 2 // 3, 1)
        tail = max(limit - head - 1, 0)
        text = text[:head] + "\u2026" + (text[len(text) - tail:] if tail else "")
    return text


def _quote(text: str) -> str:
    return "'" + shown_text(text, QUOTE_CHARS) + "'"


class KernelFileError(ValueError):
    """A kernel file that cannot be used: ``path:line: message`` (the message short and
    printable, see :func:`shown_text`)."""

    def __init__(self, path: Path | str, line: int | None, message: str):
        self.path, self.line = Path(path), line
        self.message = shown_text(message, MAX_MESSAGE_CHARS)
        shown_path = shown_text(self.path)
        where = f"{shown_path}:{line}" if line else shown_path
        super().__init__(f"{where}: {self.message}")


class ExpressionError(ValueError):
    """An expression failed for particular values (division by zero, a non-integer, a
    value past the limits)."""


# --- expressions ---------------------------------------------------------------------

class _PastLimit(ArithmeticError):
    """A value an expression would compute is past :data:`INT_LIMIT` or
    :data:`MAX_STRING_CHARS` (raised before it is computed where it could be huge)."""


def _fit(v: Any) -> Any:
    """``v`` if it lies within the limits, else :class:`_PastLimit`."""
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int):
        if -INT_LIMIT <= v <= INT_LIMIT:
            return v
        raise _PastLimit("a whole number past ±2^63")
    if isinstance(v, float):
        if math.isfinite(v) and abs(v) <= INT_LIMIT:
            return v
        raise _PastLimit("a number past ±2^63")
    if isinstance(v, str):
        if len(v) <= MAX_STRING_CHARS:
            return v
        raise _PastLimit(f"a text longer than {MAX_STRING_CHARS} characters")
    if isinstance(v, complex):      # (-8) ** (1 / 2)
        raise TypeError("the result is not a real number")
    return v


def _checked(f: Callable) -> Callable:
    def op(*args):
        return _fit(f(*args))
    return op


def _pow(a, b):
    # Checked before computing: 9 ** 4000000 alone is 1.5 MB of digits, and each squaring
    # of it in a derived name doubles that.
    if (isinstance(a, int) and isinstance(b, int) and not isinstance(b, bool) and b > 1
            and abs(a) > 1 and b * (abs(a).bit_length() - 1) > 64):
        raise _PastLimit("a whole number past ±2^63")
    return _fit(a ** b)


def _mult(a, b):
    for s, n in ((a, b), (b, a)):
        if isinstance(s, str) and isinstance(n, int) and len(s) * n > MAX_STRING_CHARS:
            raise _PastLimit(f"a text longer than {MAX_STRING_CHARS} characters")
    return _fit(a * b)


def _add(a, b):
    if isinstance(a, str) and isinstance(b, str) and len(a) + len(b) > MAX_STRING_CHARS:
        raise _PastLimit(f"a text longer than {MAX_STRING_CHARS} characters")
    return _fit(a + b)


def _mod(a, b):
    if isinstance(a, str):          # text % value is printf formatting: '%999999999d' % 1
        raise TypeError("% of a text (formatting) is not arithmetic")
    return _fit(a % b)


def _lshift(a, b):
    if isinstance(a, int) and isinstance(b, int) and a and b > 64:
        raise _PastLimit("a whole number past ±2^63")
    return _fit(a << b)


#: The operators an expression may use, each checked against the limits.
_OPERATORS: dict[type, Callable] = {
    ast.Add: _add, ast.Sub: _checked(operator.sub), ast.Mult: _mult,
    ast.Div: _checked(operator.truediv), ast.FloorDiv: _checked(operator.floordiv),
    ast.Mod: _mod, ast.Pow: _pow, ast.LShift: _lshift, ast.RShift: _checked(operator.rshift),
    ast.BitAnd: _checked(operator.and_), ast.BitOr: _checked(operator.or_),
    ast.BitXor: _checked(operator.xor),
    ast.USub: _checked(operator.neg), ast.UAdd: _checked(operator.pos),
    ast.Invert: _checked(operator.invert), ast.Not: operator.not_,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_BOUNDED_FUNCTIONS = {name: _checked(f) for name, f in FUNCTIONS.items()}
#: Syntax an expression may hold: arithmetic, comparisons, and/or/not, x if c else y,
#: names and calls of FUNCTIONS. No attributes, subscripts, keywords, literals of lists.
_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp,
          ast.Call, ast.Name, ast.Load, ast.Constant, ast.And, ast.Or, *_OPERATORS)


@dataclass(frozen=True)
class Expr:
    """One header expression, parsed (and checked against the limits) once; ``where``
    names it in messages."""

    text: str
    where: str
    tree: Any = dataclasses.field(compare=False, repr=False)
    _names: frozenset = dataclasses.field(default=frozenset(), compare=False, repr=False)
    #: Syntax nodes: what one evaluation costs (a header's total is bounded).
    size: int = dataclasses.field(default=0, compare=False, repr=False)

    def __post_init__(self):
        nodes = list(ast.walk(self.tree))
        object.__setattr__(self, "_names", frozenset(
            n.id for n in nodes if isinstance(n, ast.Name)))
        object.__setattr__(self, "size", len(nodes))

    def names(self) -> set[str]:
        return set(self._names)

    def __call__(self, env: Mapping[str, Any]) -> Any:
        ev = SimpleEval(operators=_OPERATORS, functions=_BOUNDED_FUNCTIONS, names=env)
        try:
            return _fit(ev.eval(self.text, previously_parsed=self.tree))
        except ExpressionError:     # a derived name's own failure, already saying where
            raise
        except ZeroDivisionError:
            raise ExpressionError(f"{self.where}: division by zero in {_quote(self.text)}") from None
        except _PastLimit as exc:
            raise ExpressionError(f"{self.where}: {_quote(self.text)} reaches {exc} (an "
                                  "expression's values are kept within ±2^63)") from None
        except (InvalidExpression, ArithmeticError, TypeError, ValueError, RecursionError) as exc:
            raise ExpressionError(f"{self.where}: {_quote(self.text)} failed: "
                                  f"{shown_text(exc, 120)}") from None

    def integer(self, env: Mapping[str, Any]) -> int:
        v = self(env)
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                return int(v)
            raise ExpressionError(f"{self.where}: {_quote(self.text)} is "
                                  f"{shown_text(repr(v), 40)}, not a whole number "
                                  f"(write // for integer division)")
        return v


def _syntax_problem(tree: ast.AST) -> str | None:
    """Why a parsed expression is refused (syntax outside :data:`_NODES`, too many nodes or
    levels, a number past the limits), or None."""
    count = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_EXPR_NODES:
            return f"it has more than {MAX_EXPR_NODES} parts"
        if depth > MAX_EXPR_DEPTH:
            return f"it nests more than {MAX_EXPR_DEPTH} levels deep"
        if not isinstance(node, _NODES):
            return f"{type(node).__name__} is not arithmetic this format takes"
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str):
                pass
            elif not isinstance(v, int):
                return f"{shown_text(repr(v), 40)} is not a whole number or a text in quotes"
            elif abs(v) > INT_LIMIT:
                return "a number in it is past ±2^63"
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                return f"only {', '.join(FUNCTIONS)} can be called"
            if node.keywords:
                return "a call takes no keywords"
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return None


def _parse_expr(value: Any, where: str, line: int | None | Callable[[], int | None],
                path: Path) -> Expr:
    def problem(message: str) -> KernelFileError:
        return KernelFileError(path, line() if callable(line) else line, f"{where}: {message}")

    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise problem(f"must be an expression in quotes or a number, not "
                      f"{shown_text(repr(value), 40)}")
    if isinstance(value, int) and abs(value) > INT_LIMIT:
        raise problem("a number past ±2^63")
    text = str(value)
    if len(text) > MAX_EXPR_CHARS:
        raise problem(f"the expression is {len(text)} characters long (at most {MAX_EXPR_CHARS})")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise problem(f"{_quote(text)} does not parse: {shown_text(exc.msg, 80)}") from None
    except (ValueError, RecursionError, MemoryError) as exc:     # a NUL; nesting
        raise problem(f"{_quote(text)} does not parse: "
                      f"{shown_text(exc, 80) or type(exc).__name__}") from None
    why = _syntax_problem(tree)
    if why:
        raise problem(f"{_quote(text)} is refused: {why}")
    return Expr(text, where, tree.body)


def _needs(key: str, derived: Mapping[str, Expr]) -> list[str]:
    """The derived names ``key`` depends on (itself included), in file order."""
    need: set[str] = set()
    todo = [key]
    while todo:
        name = todo.pop()
        if name in need or name not in derived:
            continue
        need.add(name)
        todo.extend(derived[name].names())
    order = {name: i for i, name in enumerate(derived)}
    return sorted(need, key=order.__getitem__)


class Env(dict):
    """Names for one evaluation: parameters, M, N, K, then derived names on first use."""

    def __init__(self, base: Mapping[str, Any], derived: Mapping[str, Expr]):
        super().__init__(base)
        self._derived = derived
        self._failed: dict[str, ExpressionError] = {}

    def __missing__(self, key: str):
        if key in self._failed:
            raise self._failed[key]
        if key not in self._derived:
            raise KeyError(key)
        # What ``key`` needs is worked out first, earliest first, so that no derived
        # name's evaluation nests inside another's (128 chained names would recurse past
        # Python's stack). A failure is kept and raised only where it is used, as before.
        for name in _needs(key, self._derived):
            if name in self._failed or dict.__contains__(self, name):
                continue
            try:
                dict.__setitem__(self, name, self._derived[name](self))
            except ExpressionError as exc:
                self._failed[name] = exc
        return self[key]


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
    #: Whether the pre-pass runs at all (parameters and shape); where it does not, the main
    #: kernel gets B itself, as a file without a pre-pass does. None: always.
    when: Expr | None = None
    #: "scratch": the maps lie in the scratch at ``maps_at``; "params": they are the main
    #: kernel's first arguments (MAPS_IN).
    maps_in: str = "scratch"

    def _env(self, params, m, n, k, sms: int | None = None) -> Env:
        return Env({**PREPASS_DEFAULTS, **params, "M": m, "N": n, "K": k, "SMS": sms or DEFAULT_SMS},
                   self.derived)

    def applies(self, params, m: int, n: int, k: int) -> bool:
        """Whether this pre-pass runs (and the main kernel reads the scratch instead of B)."""
        return self.when is None or bool(self.when(self._env(params, m, n, k)))

    def geometry(self, params, m: int, n: int, k: int, sms: int | None = None):
        env = self._env(params, m, n, k, sms)
        return ((self.grid[0].integer(env), self.grid[1].integer(env)),
                (self.block[0].integer(env), self.block[1].integer(env)))

    def scratch_bytes(self, params, m: int, n: int, k: int) -> int:
        return self.scratch.integer(self._env(params, m, n, k))

    def tensor_maps(self, params, m: int, n: int, k: int):
        """(byte offset of the maps in the scratch, [MapSpec, ...]), or None when the
        pre-pass has no tensor maps. With ``maps_in = "params"`` the offset is None: the maps
        are the main kernel's first arguments."""
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
            if box0 * MAP_ELEM_BYTES[t.elem] > t.swizzle:
                raise ExpressionError(f"{t.box[0].where}: an inner box of {box0} {t.elem} elements "
                                      f"is wider than the map's {t.swizzle}-byte swizzle span")
            out.append(MapSpec(base, t.offset.integer(env), t.dims[0].integer(env),
                               t.dims[1].integer(env), t.stride.integer(env), box0,
                               t.box[1].integer(env), t.elem, t.swizzle))
        return (self.maps_at.integer(env) if self.maps_in == "scratch" else None), out


@dataclass(frozen=True)
class Constraint:
    check: Expr
    reason: str
    #: The reason cut into (text, field) pieces, each ``{field}`` parsed once.
    parts: tuple[tuple[str, Expr | None], ...] = ()

    def reason_for(self, env: Mapping[str, Any]) -> str:
        """The reason with its ``{expression}`` fields filled in (at most
        :data:`MAX_REASON_CHARS` characters: each field may be a long text)."""
        return shown_text("".join(text + ("" if e is None else str(e(env)))
                                  for text, e in self.parts), MAX_REASON_CHARS)


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
    #: ``newcomer = true``: ticked in the window on this file's backend before the user
    #: chooses (a short first run; see engine.kernels.registry.ticked_by_default).
    newcomer: bool = False
    #: ``summary``: the longer story behind the one-line title, shown on demand.
    summary: str = ""
    #: ``[descriptions]``: parameter → what it sets, in one line.
    descriptions: dict[str, str] = dataclasses.field(default_factory=dict)
    #: ``layouts``: B's layouts the kernel takes ("kn" always; "nk": built with B_NK = 1).
    layouts: tuple[str, ...] = ("kn",)

    @property
    def is_triton(self) -> bool:
        """A ``.py`` file: a ``@triton.jit`` kernel (engine.measure.triton_kernels runs it)."""
        return self.path.suffix == TRITON_SUFFIX

    def semantics(self) -> tuple:
        """What must agree between the .cu and .cl files of one variant."""
        return (self.kind, self.dtypes, self.layouts, self.precision, self.entry,
                tuple((k, v) for k, v in self.space.items()),
                tuple((k, e.text) for k, e in self.derived.items()),
                tuple((c.check.text, c.reason) for c in self.constraints),
                tuple(e.text for e in self.grid), tuple(e.text for e in self.block),
                self.flops.text if self.flops else None, self.bytes.text if self.bytes else None,
                self.workspace.text if self.workspace else None,
                tuple((k, e.text) for k, e in self.chosen.items()))

    # --- evaluation (the registry's Variant calls these) -------------------------------

    def env(self, params, m: int = 0, n: int = 0, k: int = 0, **more) -> Env:
        return Env({**PREPASS_DEFAULTS, **params, "M": m, "N": n, "K": k, "SMS": DEFAULT_SMS, **more},
                   self.derived)

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

def _docstring_block(text: str, path: Path) -> tuple[str, int]:
    """A ``.py`` file's header: the TOML between the fences of its module docstring (found
    by reading the text, never by running it: a listing imports no user code)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines) and (not lines[i].strip() or lines[i].lstrip().startswith("#")):
        i += 1      # a shebang, an encoding line, comments and blank lines may come first
    m = re.match(r'\s*[rR]?("""|\'\'\')', lines[i]) if i < len(lines) else None
    if m is None:
        raise KernelFileError(path, i + 1, "no kernel header: a Triton kernel file must start "
                                           "with a module docstring holding a TOML block "
                                           f"between two '{FENCE}' lines")
    quote = m.group(1)
    body = [lines[i][m.end():]]
    j = i
    while quote not in body[-1]:
        j += 1
        if j >= len(lines):
            raise KernelFileError(path, i + 1, f"the module docstring never ends ({quote})")
        body.append(lines[j])
    body[-1] = body[-1][:body[-1].index(quote)]
    fences = [n for n, line in enumerate(body) if line.strip() == FENCE]
    if len(fences) < 2:
        raise KernelFileError(path, i + 1, "no kernel header: the module docstring needs a "
                                           f"TOML block between two lines of '{FENCE}'")
    a, b = fences[0], fences[1]
    block = "\n".join(body[a + 1:b])
    if len(block) > MAX_HEADER_CHARS:
        raise KernelFileError(path, i + 1 + a, f"the header is {len(block):,} characters long "
                                               f"(at most {MAX_HEADER_CHARS:,})")
    return block, i + 1 + a + 1


def header_block(text: str, path: Path) -> tuple[str, int]:
    """The TOML between the fences of the file's first comment (a ``.py`` file's module
    docstring), and its first line."""
    if Path(path).suffix == TRITON_SUFFIX:
        return _docstring_block(text, path)
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
    block = "\n".join(lines[a + 1:b])
    if len(block) > MAX_HEADER_CHARS:
        raise KernelFileError(path, first + a, f"the header is {len(block):,} characters long "
                                               f"(at most {MAX_HEADER_CHARS:,})")
    return block, first + a + 1


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


#: tomllib's words for a key or table given twice (it says where only sometimes).
_TWICE = re.compile(r"^(Cannot overwrite a value|Cannot declare|Cannot mutate)")
_TABLE_LINE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY_LINE = re.compile(r"^\s*([A-Za-z0-9_\-\"'. ]+?)\s*=")


def _key_text(key: str) -> str:
    return re.sub(r"\s*\.\s*", ".", key.strip())


def _written_twice(block: str, first: int) -> tuple[int, str]:
    """Where a header gives a key (or a table) a second time, and a sentence that names it
    and the line of the first one."""
    lines = block.split("\n")

    def twice_within(k: int) -> bool:       # the first k lines already hold both
        try:
            tomllib.loads("\n".join(lines[:k]))
        except tomllib.TOMLDecodeError as exc:
            return bool(_TWICE.match(str(exc)))
        except (RecursionError, ValueError):
            return False
        return False

    # Cutting the text never makes a duplicate, so the shortest prefix that holds one ends
    # at the second writing: a binary search over the lines finds it.
    lo, hi = 1, len(lines)
    while lo < hi:
        mid = (lo + hi) // 2
        if twice_within(mid):
            hi = mid
        else:
            lo = mid + 1
    at = lo - 1
    for i in range(at, -1, -1):             # a value over several lines: where it starts
        if _TABLE_LINE.match(lines[i]) or _KEY_LINE.match(lines[i]):
            at = i
            break
    table_m = _TABLE_LINE.match(lines[at])
    if table_m:
        name = _key_text(table_m.group(1))
        earlier = next((i for i in range(at) if (m := _TABLE_LINE.match(lines[i]))
                        and _key_text(m.group(1)) == name), None)
        said = f"the table [{name}] is written twice"
    else:
        key_m = _KEY_LINE.match(lines[at])
        name = _key_text(key_m.group(1)) if key_m else "a key"
        table = next((_key_text(m.group(1)) for i in range(at, -1, -1)
                      if (m := _TABLE_LINE.match(lines[i]))), None)
        earlier, current = None, None
        for i in range(at):
            if (m := _TABLE_LINE.match(lines[i])):
                current = _key_text(m.group(1))
            elif (m := _KEY_LINE.match(lines[i])) and current == table and (
                    _key_text(m.group(1)) == name or name.startswith(_key_text(m.group(1)) + ".")
                    or _key_text(m.group(1)).startswith(name + ".")):
                earlier = i
                break
        said = f"'{name}' is written twice" + (f" in [{table}]" if table else "")
    if earlier is not None:
        said += f" (first at line {first + earlier})"
    return first + at, said + "; keep one"


def _header_data(block: str, first: int, path: Path) -> dict:
    """The header's TOML as data; every problem a :class:`KernelFileError` at its line."""
    try:
        return tomllib.loads(block)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        if _TWICE.match(msg):
            line, said = _written_twice(block, first)
            raise KernelFileError(path, line, said) from None
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        line = first + int(m.group(1)) - 1 if m else first
        raise KernelFileError(path, line, f"the header is not valid TOML: "
                                          f"{re.sub(r' ?[(]at (line|end).*[)]', '', msg)}") from None
    except RecursionError:
        raise KernelFileError(path, first, "the header nests arrays or tables too deeply") from None
    except ValueError:               # a number of thousands of digits
        raise KernelFileError(path, first, "the header holds a number of thousands of digits "
                                           "(numbers stay within ±2^63)") from None


def _check_values(data: dict, block: str, first: int, path: Path) -> None:
    """Every text of the header printable on one line, every number within ±2^63."""
    stack: list[tuple[tuple[str, ...], Any]] = [((k,), v) for k, v in data.items()]
    while stack:
        keys, v = stack.pop()
        named = [k for k in keys if k]
        where = ".".join(named)
        line = (lambda named=named: _line_of(block, first, *named[:2]))
        if isinstance(v, dict):
            stack.extend(((*keys, k), x) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend(((*keys, ""), x) for x in v)
        elif isinstance(v, str):
            bad = next((ch for ch in v if ch != "\t" and _hidden(ch)), None)
            if bad is not None:
                raise KernelFileError(path, line(), f"{where} holds the control "
                                      f"character {ascii(bad)[1:-1]}: header texts are plain, "
                                      "one line each")
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT_LIMIT:
            raise KernelFileError(path, line(), f"{where}: a number past ±2^63")
        for k in (v if isinstance(v, dict) else ()):
            bad = next((ch for ch in k if _hidden(ch)), None)
            if bad is not None:
                raise KernelFileError(path, line(), f"a key in {where} holds the control "
                                      f"character {ascii(bad)[1:-1]}")


class _Unreadable(Exception):
    """What :func:`engine.common.files.read_text` raises here, to become a KernelFileError."""


def parse_header(path: Path | str, text: str | None = None) -> KernelHeader:
    """Read and check one kernel file's header; raises :class:`KernelFileError` (and
    nothing else) for anything wrong with it."""
    path = Path(path)
    if text is None:
        try:
            text = read_text(path, "the file", _Unreadable, KERNEL_FILE_LIMIT)
        except _Unreadable as exc:
            raise KernelFileError(path, None, str(exc)) from None
    elif len(text) > KERNEL_FILE_LIMIT:
        raise KernelFileError(path, None, f"the text is {len(text):,} characters long, more "
                                          f"than a kernel file may be ({KERNEL_FILE_LIMIT:,})")
    block, first = header_block(text, path)
    data = _header_data(block, first, path)
    _check_values(data, block, first, path)
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
    if not NAME_RE.match(name) or len(name) > MAX_NAME_CHARS:
        err(f"name '{name}' must be lower-case letters, digits and _, at most {MAX_NAME_CHARS} "
            "(it is a command-line name)", "name")
    summary = data.get("summary", "")
    if not isinstance(summary, str):
        err("'summary' must be a string (the longer story behind the title)", "summary")
    for key in ("title", "source", "summary"):
        if len(data.get(key, "")) > MAX_TEXT_CHARS:
            err(f"'{key}' is {len(data[key]):,} characters long (at most {MAX_TEXT_CHARS:,})", key)
    backend = data.get("backend", BACKEND_OF_SUFFIX.get(path.suffix))
    triton = path.suffix == TRITON_SUFFIX
    if triton and backend != "cuda":
        err(f"a Triton kernel (.py) runs on CUDA devices: backend = \"cuda\" or none, not "
            f"{backend!r}", "backend")
    if backend not in ("cuda", "opencl"):
        err(f"backend must be cuda or opencl (or the file end in .cu or .cl), not {backend!r}",
            "backend")
    role = data.get("role", "user")
    if role not in ROLES:
        err(f"role must be one of {', '.join(ROLES)}, not {role!r}", "role")
    title = data["title"].strip()
    if len(title) > MAX_TITLE_CHARS:
        err(f"'title' is {len(title)} characters long (at most {MAX_TITLE_CHARS}: one line); "
            "move the longer story to 'summary'", "title")
    order = data.get("order")
    if order is not None and (isinstance(order, bool) or not isinstance(order, int)):
        err(f"order must be a whole number, not {order!r}", "order")
    newcomer = data.get("newcomer", False)
    if not isinstance(newcomer, bool):
        err(f"newcomer must be true or false, not {newcomer!r}", "newcomer")
    kind = data.get("kind", "gemm")
    if kind not in KINDS:
        err(f"kind must be gemm or aat, not {kind!r}", "kind")
    layouts = data.get("layouts", ["kn"])
    if (not isinstance(layouts, list) or "kn" not in layouts
            or any(x not in LAYOUTS for x in layouts) or len(set(layouts)) != len(layouts)):
        err(f"layouts must list \"kn\" (B as K×N, every kernel) and may add \"nk\" (B as "
            f"N×K: built with B_NK = 1, or a Triton kernel's B strides), not {layouts!r}",
            "layouts")
    dtypes = data.get("dtypes", ["float32"] if triton else list(DTYPES))
    if (not isinstance(dtypes, list) or not dtypes or any(d not in KERNEL_DTYPES for d in dtypes)):
        err(f"dtypes must be a list of {', '.join(KERNEL_DTYPES)}, not {dtypes!r}", "dtypes")
    if triton and isinstance(dtypes, list) and "int32" in dtypes:   # a wrapping int32 GEMM
        err(f"a Triton kernel's dtypes are float32, float16/bfloat16 or float8_e4m3/"
            f"float8_e5m2 (tl.dot multiplies no int32), not {dtypes!r}", "dtypes")
    int8 = [d for d in dtypes if d in INT8_DTYPES]
    if int8 and (triton or backend != "cuda"):
        # the lab launches no int8 Triton kernel, and no OpenCL kernel takes int8
        err("int8 is for CUDA C kernels (.cu) only: the lab runs no OpenCL or Triton kernel "
            "in int8", "dtypes")
    if int8 and len(int8) != len(dtypes):
        err(f"dtypes mixes int8 with {', '.join(d for d in dtypes if d not in int8)}: an int8 "
            "kernel file takes int8 only (int32 C, its own code)", "dtypes")
    half = [d for d in dtypes if d in HALF_DTYPES]
    if half and len(half) != len(dtypes):
        err(f"dtypes mixes 16-bit types with {', '.join(d for d in dtypes if d not in half)}: a "
            "kernel file takes float16/bfloat16 (tensor cores, FP32 accumulation), FP8 or "
            "float32/int32, one kind only", "dtypes")
    if half and backend != "cuda":
        err(f"{', '.join(half)} are for CUDA C kernels (OpenCL C has no bfloat16, and the "
            "lab's OpenCL devices no cl_khr_fp16)", "dtypes")
    fp8 = [d for d in dtypes if d in FP8_DTYPES]
    if fp8 and len(fp8) != len(dtypes):
        err(f"dtypes mixes FP8 types with {', '.join(d for d in dtypes if d not in fp8)}: an "
            "FP8 kernel file takes float8_e4m3/float8_e5m2 only", "dtypes")
    if fp8 and backend != "cuda":
        err(f"{', '.join(fp8)} are for CUDA C kernels (OpenCL C has no FP8 type)", "dtypes")
    precision = data.get("precision", "half" if half else "fp8" if fp8 else "int8" if int8 else "fp32")
    if precision not in PRECISIONS:
        err(f"precision must be fp32, tf32, half, fp8 or int8, not {precision!r}", "precision")
    elif (precision == "int8") != bool(int8):
        err(f"precision \"int8\" goes with dtypes [\"int8\"] and only with it "
            f"(here precision {precision!r}, dtypes {dtypes!r})", "precision")
    elif (precision == "fp8") != bool(fp8):
        err(f"precision \"fp8\" goes with dtypes float8_e4m3/float8_e5m2 and only with them "
            f"(here precision {precision!r}, dtypes {dtypes!r})", "precision")
    elif (precision == "half") != bool(half):
        err(f"precision \"half\" goes with dtypes float16/bfloat16 and only with them "
            f"(here precision {precision!r}, dtypes {dtypes!r})", "precision")
    entry = data.get("entry", "matmul")
    suffix = data.get("arch_suffix", "")
    for key, val in (("entry", entry), ("arch_suffix", suffix)):
        if not isinstance(val, str):
            err(f"{key} must be a string, not {val!r}", key)
    if not ENTRY_RE.match(entry) or len(entry) > MAX_NAME_CHARS:
        err(f"entry '{entry}' must be the kernel function's name (a C identifier)", "entry")
    if not re.fullmatch(r"[a-z]?", suffix):
        err(f"arch_suffix must be one letter (\"a\" for sm_90a), not '{suffix}'", "arch_suffix")
    if suffix and (backend != "cuda" or triton):
        err("arch_suffix is for CUDA C kernels only (OpenCL and Triton pick their own target)",
            "arch_suffix")

    params = data.get("params", {})
    if not isinstance(params, dict):
        err("[params] must be a table: name = [values]", "params")
    if len(params) > MAX_PARAMS:
        err(f"[params] has {len(params)} parameters (at most {MAX_PARAMS})", "params")
    space: dict[str, tuple[int, ...]] = {}
    combos = 1
    for pname, vals in params.items():
        if (not NAME_RE.match(pname) or pname.upper() in ("M", "N", "K", "ELEM", "ACC")
                or pname in FUNCTIONS or len(pname) > MAX_NAME_CHARS):
            err(f"parameter name '{pname}' must be lower-case and not M, N, K, ELEM, ACC or "
                f"a function's name ({', '.join(FUNCTIONS)})", "params", pname)
        if isinstance(vals, int) and not isinstance(vals, bool):
            vals = [vals]
        if (not isinstance(vals, list) or not vals
                or any(isinstance(v, bool) or not isinstance(v, int) for v in vals)):
            err(f"parameter '{pname}' must list whole numbers, the default first: {pname} = [16, 8]",
                "params", pname)
        if len(vals) > MAX_VALUES:
            err(f"parameter '{pname}' lists {len(vals)} values (at most {MAX_VALUES})",
                "params", pname)
        bad = next((v for v in vals if not 0 <= v <= MAX_PARAM_VALUE), None)
        if bad is not None:
            err(f"parameter '{pname}' lists {bad}: values are whole numbers from 0 to "
                f"{MAX_PARAM_VALUE} (they become C int constants)", "params", pname)
        if len(set(vals)) != len(vals):
            err(f"parameter '{pname}' lists a value twice: {vals}", "params", pname)
        space[pname] = tuple(vals)
        combos *= len(vals)
        if combos > MAX_COMBOS:
            err(f"the parameters make more than {MAX_COMBOS} combinations (up to '{pname}': "
                f"{' x '.join(str(len(v)) for v in space.values())}); list fewer values",
                "params", pname)

    arch_defaults = _arch_defaults(data.get("defaults", {}), space, err, block)

    known = set(space) | set(SHAPE_NAMES) | set(DEVICE_NAMES)
    nodes = [0]

    def expr(value, where: str, *keys: str, names: set[str] | None = None) -> Expr:
        # The line is looked for only for a message: done for every expression, the search
        # would cost (expressions x header lines).
        e = _parse_expr(value, where, lambda: _line_of(block, first, *keys), path)
        # One check of a combination evaluates each expression at most once: the total
        # bounds its cost (a checker tries every combination at many shapes).
        nodes[0] += e.size
        if nodes[0] > MAX_HEADER_NODES:
            err(f"{where}: the header's expressions have more than {MAX_HEADER_NODES} parts "
                "in all; write fewer or shorter ones", *keys)
        allowed = known if names is None else names
        missing = sorted(e.names() - allowed - set(FUNCTIONS))
        if missing:
            err(f"{where}: unknown name '{missing[0]}' in {_quote(e.text)} "
                f"(known: {', '.join(sorted(allowed))})", *keys)
        return e

    derived_raw = data.get("derived", {})
    if not isinstance(derived_raw, dict):
        err("[derived] must be a table: name = \"expression\"", "derived")
    if len(derived_raw) > MAX_DERIVED:
        err(f"[derived] has {len(derived_raw)} names (at most {MAX_DERIVED})", "derived")
    derived: dict[str, Expr] = {}
    for dname, val in derived_raw.items():
        if (not NAME_RE.match(dname) or dname in known or dname in FUNCTIONS
                or len(dname) > MAX_NAME_CHARS):
            err(f"derived name '{dname}' must be new, lower-case and not a function's name", "derived", dname)
        derived[dname] = expr(val, f"derived.{dname}", "derived", dname)
        known.add(dname)

    def prepass_names_refused(e: Expr, where: str, *keys: str) -> Expr:
        """NK and OB are filled in for the pre-pass alone: anywhere else they are refused."""
        name = uses_shape(e, derived, names=PREPASS_NAMES)
        if name:
            err(f"{where}: {name} is a name of the pre-pass's expressions only (B's layout, C's "
                "element bytes: the launch, constraints and [chosen] hold for every run)", *keys)
        return e

    chosen_raw = data.get("chosen", {})
    if not isinstance(chosen_raw, dict):
        err("[chosen] must be a table: parameter = \"expression\"", "chosen")
    chosen: dict[str, Expr] = {}
    for cname, val in chosen_raw.items():
        if cname not in space:
            err(f"[chosen] names '{cname}', which is not in [params]", "chosen", cname)
        chosen[cname] = prepass_names_refused(expr(val, f"chosen.{cname}", "chosen", cname),
                                              f"chosen.{cname}", "chosen", cname)

    constraints = []
    raw = data.get("constraints", [])
    if not isinstance(raw, list):
        err("constraints must be [[constraints]] tables with check and reason", "constraints")
    if len(raw) > MAX_CONSTRAINTS:
        err(f"the header has {len(raw)} [[constraints]] (at most {MAX_CONSTRAINTS})",
            "constraints")
    for i, c in enumerate(raw):
        if not isinstance(c, dict):
            err("each [[constraints]] needs check and reason", "constraints")
        unknown(c, CONSTRAINT_KEYS, "[[constraints]]", "constraints")
        if "check" not in c or not isinstance(c.get("reason"), str):
            err("each [[constraints]] needs check (an expression) and reason (a text)",
                "constraints")
        if len(c["reason"]) > MAX_REASON_CHARS:
            err(f"constraints[{i}].reason is {len(c['reason']):,} characters long (at most "
                f"{MAX_REASON_CHARS:,})", "constraints", "reason")
        chk = prepass_names_refused(expr(c["check"], f"constraints[{i}].check", "constraints", "check"),
                                    f"constraints[{i}].check", "constraints", "check")
        try:
            pieces = list(string.Formatter().parse(c["reason"]))
        except ValueError:
            err(f"constraints[{i}].reason: a '{{' or '}}' without its pair (write {{{{ or }}}} "
                "for a brace itself; {expression} quotes a value)", "constraints", "reason")
        parts = tuple((text, None if fld is None else
                       expr(fld, f"constraints[{i}].reason", "constraints", "reason"))
                      for text, fld, _spec, _conv in pieces)
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
    for i, g in enumerate(grid):
        prepass_names_refused(g, f"launch.grid[{i}]", "launch", "grid")
    if triton:
        # Triton sizes its blocks itself: 32 threads per warp of num_warps (a launch option).
        if "block" in launch:
            err("launch.block is not for Triton kernels: list num_warps in [params] (threads "
                "per block = 32 * num_warps)", "launch", "block")
        threads = "32 * num_warps" if "num_warps" in space else str(TRITON_DEFAULT_THREADS)
        block_ = (expr(threads, "launch.block[0]", "launch"), expr(1, "launch.block[1]", "launch"))
        if "prepass" in data:
            err("[prepass] is for CUDA C kernels only", "prepass")
    else:
        block_ = pair(launch.get("block"), "launch.block", "launch", "block")
        for i, b in enumerate(block_):
            prepass_names_refused(b, f"launch.block[{i}]", "launch", "block")
    shared = None
    if "shared" in launch:
        shared = expr(launch["shared"], "launch.shared", "launch", "shared")
        shape_bound = uses_shape(shared, derived)
        if shape_bound:
            err(f"launch.shared may depend on the parameters only, not {shape_bound}",
                "launch", "shared")
        if backend != "cuda" or triton:     # OpenCL and Triton size their shared memory themselves
            err("launch.shared is for CUDA kernels only (an OpenCL kernel declares its "
                "__local memory)", "launch", "shared")

    workspace = None
    if "workspace" in launch:
        if backend != "cuda" or triton:
            err("launch.workspace is for CUDA C kernels only", "launch", "workspace")
        workspace = prepass_names_refused(
            expr(launch["workspace"], "launch.workspace", "launch", "workspace"),
            "launch.workspace", "launch", "workspace")

    prepass = None
    if "prepass" in data:
        pre = data["prepass"]
        if backend != "cuda":     # the OpenCL backend runs no pre-pass: refused, not dropped
            err("[prepass] is for CUDA kernels only (the OpenCL backend runs no pre-pass)",
                "prepass")
        if not isinstance(pre, dict):
            err("[prepass] must be a table", "prepass")
        unknown(pre, PREPASS_KEYS, "[prepass]", "prepass")
        if not isinstance(pre.get("entry"), str) or not ENTRY_RE.match(pre["entry"]):
            err("prepass.entry is required (the pre-pass kernel's name)", "prepass", "entry")
        maps = []
        maps_at = None
        raw_maps = pre.get("tensor_maps", [])
        if not isinstance(raw_maps, list):
            err("prepass.tensor_maps must be [[prepass.tensor_maps]] tables", "prepass")
        if len(raw_maps) > MAX_TENSOR_MAPS:
            err(f"[prepass] has {len(raw_maps)} tensor maps (at most {MAX_TENSOR_MAPS})",
                "prepass", "tensor_maps")
        for j, t in enumerate(raw_maps):
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
        maps_in = pre.get("maps_in", "scratch")
        if maps_in not in MAPS_IN:
            err(f"prepass.maps_in must be {' or '.join(map(repr, MAPS_IN))}, not {maps_in!r}",
                "prepass", "maps_in")
        if maps_in == "params" and not maps:
            err("prepass.maps_in = 'params' needs [[prepass.tensor_maps]]", "prepass", "maps_in")
        if maps_in == "params" and maps_at is not None:
            err("prepass.tensor_maps: 'at' places maps in the scratch; with maps_in = 'params' "
                "they are the kernel's first arguments (leave 'at' out)", "prepass", "at")
        if maps and maps_at is None and maps_in == "scratch":
            err("prepass.tensor_maps: the first map needs 'at' (byte offset of the maps in "
                "the scratch)", "prepass", "tensor_maps")
        prepass = Prepass(pre["entry"], pair(pre.get("grid"), "prepass.grid", "prepass", "grid"),
                          pair(pre.get("block"), "prepass.block", "prepass", "block"),
                          expr(pre.get("scratch", 0), "prepass.scratch", "prepass", "scratch"),
                          maps_at, tuple(maps), derived,
                          expr(pre["when"], "prepass.when", "prepass", "when")
                          if "when" in pre else None, maps_in)

    model = data.get("model", {})
    if not isinstance(model, dict):
        err("[model] must be a table with flops and/or bytes", "model")
    unknown(model, MODEL_KEYS, "[model]", "model")
    shape_names = set(SHAPE_NAMES)
    flops = expr(model["flops"], "model.flops", "model", "flops", names=shape_names) \
        if "flops" in model else None
    bytes_ = expr(model["bytes"], "model.bytes", "model", "bytes",
                  names=shape_names | {"itemsize"}) if "bytes" in model else None

    descriptions = data.get("descriptions", {})
    if not isinstance(descriptions, dict):
        err("[descriptions] must be a table: parameter = \"what it sets, in one line\"",
            "descriptions")
    for pname, text in descriptions.items():
        if pname not in space:
            err(f"[descriptions] names '{pname}', which is not a parameter "
                f"({', '.join(space) or 'the file has none'})", "descriptions", pname)
        if not isinstance(text, str) or not text.strip():
            err(f"descriptions.{pname} must be a non-empty string", "descriptions", pname)
        if len(text) > MAX_DESCRIPTION_CHARS:
            err(f"descriptions.{pname} is {len(text)} characters long (at most "
                f"{MAX_DESCRIPTION_CHARS}: one line; the longer story goes in 'summary')",
                "descriptions", pname)

    return KernelHeader(path, backend, name, data["title"].strip(), data["source"].strip(), role,
                        order, entry, kind, tuple(dtypes), precision, suffix, space, derived,
                        constraints, grid, block_, shared, prepass, flops, bytes_, first,
                        arch_defaults=arch_defaults, workspace=workspace, chosen=chosen,
                        newcomer=newcomer, summary=summary.strip(),
                        descriptions={k: v.strip() for k, v in descriptions.items()},
                        layouts=tuple(layouts))


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
    if len(raw) > MAX_ARCH_TABLES:
        err(f"[defaults] has {len(raw)} architectures (at most {MAX_ARCH_TABLES})", "defaults")
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


def uses_shape(e: Expr, derived: Mapping[str, Expr], seen=None,
               names: tuple[str, ...] = SHAPE_NAMES + DEVICE_NAMES) -> str:
    """The shape or device name (M, N, K, SMS, NK or OB; or one of ``names``) ``e`` depends
    on, through derived names too; '' if none."""
    seen = seen or set()
    for name in e.names():
        if name in names:
            return name
        if name in derived and name not in seen:
            seen.add(name)
            got = uses_shape(derived[name], derived, seen, names)
            if got:
                return got
    return ""
