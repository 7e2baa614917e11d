"""Generation and loading of input matrices for the matmul kernels.

Everything a user can get wrong about an input matrix (a missing file, a
typo in a CSV cell, a 1-D vector, NaNs, values that do not fit the chosen
dtype, ...) is reported as a :class:`MatrixInputError` whose ``str()`` is a
single, self-contained sentence that names the matrix, the file and the
problem.  Callers (the GUI, the CLI) show that message as-is and never need a
traceback.

Conventions used in messages
----------------------------
* Parse errors in text files give **1-based** ``row`` and ``column`` numbers,
  because that is how people count lines in an editor.
* Problems with values of an already-loaded array (NaN, non-integers, ...)
  give a **0-based** ``[row, column]`` index, because that is how the array is
  addressed in NumPy; the message says "0-based" explicitly.

This module is Qt-free; it depends only on NumPy (and SciPy, imported lazily,
for Matrix Market files).
"""

from __future__ import annotations

import csv
import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from collections.abc import Mapping

import numpy as np

from engine.common.dtypes import ELEMENT_NAMES, ElementType, TypeUnavailable, check_scale
from engine.inputs.errors import MatrixInputError
from engine.kernels.registry import gemm_bytes
from engine.common.units import format_bytes

__all__ = [
    "DTYPES",
    "DISTRIBUTIONS",
    "SUPPORTED_EXTENSIONS",
    "MatrixInputError",
    "generate",
    "generate_pair",
    "load_matrix",
    "load_pair",
    "load_pair_report",
    "LoadedPair",
    "check_device_fit",
    "matmul_bytes",
    "describe",
    "Operands",
    "generate_operands",
    "load_operands",
    "save_operands",
]


class _NumpyTypes(Mapping):
    """Type name → NumPy scalar type, for every :class:`ElementType`; the ml_dtypes ones
    are looked up on first use (KeyError where ml_dtypes is missing, said by
    :func:`_check_dtype`)."""

    def __getitem__(self, name):
        try:
            return ElementType(name).numpy_dtype.type
        except (ValueError, TypeUnavailable):
            raise KeyError(name) from None

    def __iter__(self):
        return iter(ELEMENT_NAMES)

    def __len__(self):
        return len(ELEMENT_NAMES)


DTYPES = _NumpyTypes()
DISTRIBUTIONS = ("uniform", "normal", "int")
SUPPORTED_EXTENSIONS = (".npy", ".npz", ".csv", ".txt", ".mtx")

_INT32 = np.iinfo(np.int32)
_TIMES = "\u00d7"  # multiplication sign, as in "127×61"
_ZERO_BASED = "(0-based [row, column])"

# Exceptions that third-party readers (np.load, zipfile, scipy.io) raise for
# corrupt or unexpected input.  They are translated into MatrixInputError
# at the reader boundary so that no traceback ever reaches the user.
_READER_ERRORS = (
    ValueError,
    EOFError,
    OSError,
    zipfile.BadZipFile,
    zlib.error,
    IndexError,
    KeyError,
    TypeError,
    OverflowError,
    RuntimeError,
    UnicodeDecodeError,
)


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def describe(arr) -> str:
    """Return a short human description such as ``"127×61 float32"``.

    Parameters
    ----------
    arr : array_like
        Any array; non-2-D shapes are described too (``"5 float64"``,
        ``"scalar int32"``, ``"2×3×4 float32"``).

    Returns
    -------
    str
    """
    arr = np.asarray(arr)
    shape = _TIMES.join(str(d) for d in arr.shape) if arr.ndim else "scalar"
    return f"{shape} {arr.dtype}"


def _shape_text(shape) -> str:
    """Format a shape as ``3×4`` (no dtype)."""
    return _TIMES.join(str(d) for d in shape) if len(shape) else "()"


_format_bytes = format_bytes    # kept for callers of the old name


def _detail(err: Exception) -> str:
    """An exception's text without trailing period, for "(...)" asides."""
    return str(err).strip().rstrip(".")


def _format_value(value) -> str:
    """Format one offending value compactly (``1.5``, ``3000000000``, ``nan``)."""
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        # Show 3000000000.0 as 3000000000: it reads as the integer it is.
        return str(int(value))
    return repr(value)


def _first_index(mask: np.ndarray) -> tuple[int, int]:
    """Return the first ``True`` position of a 2-D mask in row-major order."""
    flat = int(np.argmax(mask.ravel()))
    row, col = divmod(flat, mask.shape[1])
    return row, col


def _check_dtype(dtype) -> ElementType:
    """Map a dtype name to its :class:`ElementType` or raise MatrixInputError."""
    try:
        element = ElementType(dtype)
    except (ValueError, TypeError):
        choices = ", ".join(DTYPES)
        raise MatrixInputError(
            f"Unsupported dtype {dtype!r}; choose one of: {choices}."
        ) from None
    try:
        element.numpy_dtype
    except TypeUnavailable as exc:
        raise MatrixInputError(f"{element} cannot be used here: {exc}.") from None
    return element


def _check_positive_int(value, what: str) -> int:
    """Validate a matrix dimension given by the user."""
    # bool is an int subclass; True as "1 row" is almost surely a bug.
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise MatrixInputError(f"{what} must be a whole number, got {value!r}.")
    if value < 1:
        raise MatrixInputError(f"{what} must be at least 1, got {value}.")
    return int(value)


# ---------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------


#: The integer range drawn where a run names none: -8..8 (int32, and dist="int" for float
#: types), int8's whole range for int8.
DEFAULT_INT_RANGE = (-8, 8)


def integer_range(element: ElementType, low: int | None = None,
                  high: int | None = None) -> tuple[int, int]:
    """The inclusive range integers are drawn from for ``element``: ``low``/``high`` where
    given, else int8's whole range for int8 (-128..127: every value its tensor cores take)
    and :data:`DEFAULT_INT_RANGE` otherwise."""
    default = (-128, 127) if element is ElementType.INT8 else DEFAULT_INT_RANGE
    return (default[0] if low is None else low, default[1] if high is None else high)


def _check_generation_args(dtype: str, dist: str, seed, low, high) -> tuple[ElementType, int, int]:
    """Validate the non-shape arguments of :func:`generate`; return the type and the
    integer range (:func:`integer_range`: the type's own where ``low``/``high`` are None)."""
    target = _check_dtype(dtype)
    low, high = integer_range(target, low, high)
    if dist not in DISTRIBUTIONS:
        raise MatrixInputError(
            f"Unknown distribution {dist!r}; choose one of: {', '.join(DISTRIBUTIONS)}."
        )
    if seed is not None and (
        isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0
    ):
        raise MatrixInputError(
            f"The seed must be a non-negative whole number or None, got {seed!r}."
        )
    for what, value in (("low", low), ("high", high)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise MatrixInputError(f"{what} must be a whole number, got {value!r}.")
        # Keep the bounds in int32 for both dtypes so that one range means
        # the same thing whatever dtype is chosen.
        if not _INT32.min <= value <= _INT32.max:
            raise MatrixInputError(
                f"{what} = {value} is outside the int32 range "
                f"[{_INT32.min}, {_INT32.max}]."
            )
    if low > high:
        raise MatrixInputError(f"low ({low}) must not be greater than high ({high}).")
    if target is ElementType.INT8:
        limits = np.iinfo(np.int8)
        if low < limits.min or high > limits.max:
            raise MatrixInputError(
                f"int8 matrices hold whole numbers from {limits.min} to {limits.max}; the "
                f"range [{low}, {high}] does not fit."
            )
    # Integer draws are used for integer types whatever `dist` says, and for
    # dist="int"; [0, 0] could then only ever produce the zero matrix.
    if (target.is_integer or dist == "int") and low == high == 0:
        raise MatrixInputError(
            "The integer range [0, 0] only contains zero; widen low/high so the "
            "matrix is not all zeros."
        )
    return target, low, high


def _draw(
    rng: np.random.Generator,
    rows: int,
    cols: int,
    element: ElementType,
    dist: str,
    low: int,
    high: int,
) -> np.ndarray:
    """Draw one matrix from ``rng``; arguments are already validated. Half types are the
    float draws rounded to the type; FP8 draws are returned unrounded (in float64) for
    :func:`_to_float8` to scale into the type's range."""
    shape = (rows, cols)
    integers = element.is_integer or dist == "int"
    if integers:
        values = rng.integers(low, high, size=shape, endpoint=True, dtype=np.int64)
    elif dist == "uniform":
        values = rng.uniform(-1.0, 1.0, size=shape)
    else:  # "normal"
        values = rng.standard_normal(size=shape)
    if element.is_float8:
        out = np.ascontiguousarray(values, dtype=np.float64)
    else:
        out = np.ascontiguousarray(values, dtype=element.numpy_dtype)
    if not np.any(out.astype(np.float64) != 0):
        # A zero input makes every kernel look correct; force one nonzero
        # entry.  Deterministic (no redraw) so seeds stay reproducible.
        if integers:
            out[0, 0] = high if high != 0 else low
        else:
            out[0, 0] = 1
    return out


def generate(
    rows: int,
    cols: int,
    dtype: str,
    dist: str = "uniform",
    seed: int | None = 0,
    low: int | None = None,
    high: int | None = None,
) -> np.ndarray:
    """Generate a random ``rows × cols`` matrix.

    Parameters
    ----------
    rows, cols : int
        Shape; both must be at least 1.
    dtype : {"float32", "int32", "int8", ...}
        Element type of the result (any :class:`ElementType` name).
    dist : {"uniform", "normal", "int"}, default "uniform"
        ``"uniform"`` draws from U[-1, 1], ``"normal"`` from N(0, 1) and
        ``"int"`` draws integers in ``[low, high]`` (both inclusive).  With
        ``dtype="float32"`` and ``dist="int"`` the result holds
        integer-valued floats (handy for exact comparisons).  **For
        ``dtype="int32"`` and ``"int8"`` integers in ``[low, high]`` are
        always drawn, whatever ``dist`` says**, since U[-1, 1] or N(0, 1)
        truncated to integers would be almost all zeros.
    seed : int or None, default 0
        Seed for :func:`numpy.random.default_rng`; the same seed gives the
        same matrix.  ``None`` draws fresh entropy.
    low, high : int or None, default None
        Inclusive integer range (in the int32 range; for int8 in -128..127).
        None: -8 and 8, and int8's whole range -128..127 for int8
        (:func:`integer_range`).

    Returns
    -------
    numpy.ndarray
        C-contiguous array of the requested dtype that is never all zeros.

    Raises
    ------
    MatrixInputError
        For a bad shape, dtype, distribution, seed or range.
    """
    rows = _check_positive_int(rows, "The number of rows")
    cols = _check_positive_int(cols, "The number of columns")
    target, low, high = _check_generation_args(dtype, dist, seed, low, high)
    rng = np.random.default_rng(seed)
    out = _draw(rng, rows, cols, target, dist, low, high)
    return _to_float8(out, target)[0] if target.is_float8 else out


def generate_pair(
    m: int,
    n: int,
    k: int,
    dtype: str,
    dist: str = "uniform",
    seed: int | None = 0,
    low: int | None = None,
    high: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Generate the inputs of ``C = A @ B``: A is ``m × k`` and B is ``k × n``.

    Both matrices come from one random stream (A first, then B), so a seed
    fixes the pair and A never equals B by accident.  See :func:`generate`
    for the meaning of the other parameters.

    Returns
    -------
    tuple of numpy.ndarray
        ``(A, B)``, each C-contiguous of the requested dtype. For FP8 the scales
        are in :func:`generate_operands`' answer (which also unpacks as ``a, b``).
    """
    return generate_operands(m, n, k, dtype, dist, seed, low, high)


def generate_operands(
    m: int,
    n: int,
    k: int,
    dtype: str,
    dist: str = "uniform",
    seed: int | None = 0,
    low: int | None = None,
    high: int | None = None,
) -> "Operands":
    """:func:`generate_pair` with the FP8 scales: each FP8 matrix is its float draw
    divided by a per-tensor scale that maps its largest magnitude onto the type's largest
    finite value, rounded to the type (the scale recorded; 1 for other types)."""
    m = _check_positive_int(m, "m (rows of A)")
    n = _check_positive_int(n, "n (columns of B)")
    k = _check_positive_int(k, "k (columns of A, rows of B)")
    target, low, high = _check_generation_args(dtype, dist, seed, low, high)
    rng = np.random.default_rng(seed)
    a = _draw(rng, m, k, target, dist, low, high)
    b = _draw(rng, k, n, target, dist, low, high)
    if not target.is_float8:
        return Operands(a, b, target)
    (a8, sa), (b8, sb) = _to_float8(a, target), _to_float8(b, target)
    return Operands(a8, b8, target, sa, sb)


@dataclass(frozen=True, eq=False)
class Operands:
    """A and B of one run in their element type (B as K×N whatever layout the kernel
    reads), with FP8's per-tensor scales: the product meant is
    ``scale_a · scale_b · A @ B``. Unpacks as ``a, b`` like a pair."""

    a: np.ndarray
    b: np.ndarray
    element: ElementType
    scale_a: float = 1.0
    scale_b: float = 1.0
    #: What loading did to the values (rounded to the type, scaled into FP8's range), or "".
    note: str = ""

    def __iter__(self):
        return iter((self.a, self.b))

    def __getitem__(self, index):
        return (self.a, self.b)[index]

    def __len__(self) -> int:
        return 2


def _to_float8(values: np.ndarray, element: ElementType) -> tuple[np.ndarray, float]:
    """Finite float values → (FP8 matrix, scale) with ``values ≈ scale · matrix``: the
    largest magnitude lands on the type's largest finite value."""
    values = np.asarray(values, dtype=np.float64)
    amax = float(np.max(np.abs(values), initial=0.0))
    scale = check_scale(amax / element.max_finite if amax > 0 else 1.0, "the FP8 scale")
    out = np.ascontiguousarray(values / scale, dtype=element.numpy_dtype)
    return out, scale


# ---------------------------------------------------------------------------
# Device memory
# ---------------------------------------------------------------------------


def matmul_bytes(m: int, n: int, k: int, dtype: str) -> int:
    """Bytes needed on the device for A (m×k), B (k×n) and C (m×n)."""
    return gemm_bytes(m, n, k, _check_dtype(dtype).itemsize)


def check_device_fit(
    required_bytes: int, available_bytes: int, what: str = "the matrices"
) -> None:
    """Raise if ``required_bytes`` do not fit in ``available_bytes``.

    Parameters
    ----------
    required_bytes : int
        Memory the operation needs on the device.
    available_bytes : int
        Free memory on the device.
    what : str, default "the matrices"
        What needs the memory; it starts the message.

    Raises
    ------
    MatrixInputError
        With both sizes in MiB/GiB, e.g. "Not enough device memory for the
        matrices: 3.00 GiB needed but only 512.0 MiB free; ...".
    ValueError
        If a size is negative (a programming error, not a user error).
    """
    if required_bytes < 0 or available_bytes < 0:
        raise ValueError("byte counts must be non-negative")
    if required_bytes > available_bytes:
        raise MatrixInputError(
            f"Not enough device memory for {what}: {_format_bytes(required_bytes)} "
            f"needed but only {_format_bytes(available_bytes)} free; use smaller "
            f"matrices."
        )


# ---------------------------------------------------------------------------
# Validation and conversion of a loaded array
# ---------------------------------------------------------------------------


def _ml_float(arr: np.ndarray, element: ElementType | None, label: str) -> np.ndarray | None:
    """An ml_dtypes array (bfloat16, FP8) as float64, or None for other arrays. np.save
    writes those types as raw bytes ('V2', 'V1'): such bytes are read as the chosen type
    when its size matches; the file does not say which type they are."""
    if arr.dtype.kind != "V" or arr.dtype.fields is not None:
        return None
    if arr.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return arr.astype(np.float64)
    size = arr.dtype.itemsize
    if element is not None and element.is_low_precision and element.itemsize == size \
            and element is not ElementType.FLOAT16 and not element.is_integer:
        return arr.view(element.numpy_dtype).astype(np.float64)
    guess = {2: "bfloat16", 1: "float8_e4m3 or float8_e5m2"}.get(size)
    if guess:
        raise MatrixInputError(
            f"{label} holds {size}-byte values of a type the file does not name (an "
            f"ml_dtypes {guess} array saved with np.save?); choose {guess} as the type to "
            f"read it.")
    return None


def _check_kind(arr: np.ndarray, label: str) -> np.ndarray:
    """Refuse element types that are not real numbers; booleans become 0/1."""
    kind = arr.dtype.kind
    if kind == "b":
        return arr.astype(np.int8)  # True/False -> 1/0, then converted below
    if kind in "iuf":
        return arr
    if kind == "c":
        reason = f"holds complex numbers ({arr.dtype}), which are not supported"
    elif kind == "O":
        reason = (
            "holds Python objects (pickled data), which is refused for safety"
        )
    elif kind in "US":
        reason = f"holds text ({arr.dtype}), not numbers"
    elif kind in "mM":
        reason = f"holds dates or times ({arr.dtype}), not numbers"
    else:
        reason = f"has element type {arr.dtype}, which is not a numeric type"
    raise MatrixInputError(f"{label} {reason}.")


def _check_shape(arr: np.ndarray, label: str) -> None:
    """Require a 2-D array with at least one row and one column."""
    if arr.ndim == 0:
        raise MatrixInputError(
            f"{label} holds a single number (a 0-D array), not a 2-D matrix."
        )
    if arr.ndim == 1:
        raise MatrixInputError(
            f"{label} is a 1-D vector of length {arr.shape[0]}, not a 2-D matrix; "
            f"save it with shape 1{_TIMES}{arr.shape[0]} or {arr.shape[0]}{_TIMES}1."
        )
    if arr.ndim > 2:
        raise MatrixInputError(
            f"{label} is {arr.ndim}-D with shape {_shape_text(arr.shape)}, "
            f"not a 2-D matrix."
        )
    rows, cols = arr.shape
    if rows == 0 or cols == 0:
        missing = "rows" if rows == 0 else "columns"
        raise MatrixInputError(
            f"{label} is empty: its shape is {_shape_text(arr.shape)} (no {missing})."
        )


def _check_finite(arr: np.ndarray, label: str) -> None:
    """Refuse NaN and ±Inf, saying how many and where the first one is."""
    if arr.dtype.kind != "f":
        return
    bad = ~np.isfinite(arr)
    count = int(np.count_nonzero(bad))
    if count:
        row, col = _first_index(bad)
        raise MatrixInputError(
            f"{label} contains {count} NaN/Inf value{'s' if count > 1 else ''}; "
            f"the first is {_format_value(arr[row, col])} at [{row}, {col}] "
            f"{_ZERO_BASED}."
        )


def _to_integer(arr: np.ndarray, element: ElementType, label: str) -> np.ndarray:
    """Convert to an integer type (int32, int8), refusing fractional and out-of-range
    values, the first one named."""
    limits = np.iinfo(element.numpy_dtype)
    if arr.dtype.kind == "f":
        fractional = arr != np.trunc(arr)
        count = int(np.count_nonzero(fractional))
        if count:
            row, col = _first_index(fractional)
            raise MatrixInputError(
                f"{label} has {count} value{'s' if count > 1 else ''} that "
                f"{'are' if count > 1 else 'is'} not a whole number, e.g. "
                f"{_format_value(arr[row, col])} at [{row}, {col}] {_ZERO_BASED}; "
                f"{element} matrices need integer values."
            )
    # Bounds as the powers of two min and max + 1 (-2**31 and 2**31 for int32):
    # exactly representable in every float dtype (2**31 - 1 would round up to
    # 2**31 in float32 and let 2**31 slip through), and NumPy 2 compares Python
    # ints exactly against int/uint dtypes (no wrap-around).
    outside = (arr < int(limits.min)) | (arr >= int(limits.max) + 1)
    count = int(np.count_nonzero(outside))
    if count:
        row, col = _first_index(outside)
        raise MatrixInputError(
            f"{label} has {count} value{'s' if count > 1 else ''} outside the "
            f"{element} range [{limits.min}, {limits.max}], e.g. "
            f"{_format_value(arr[row, col])} at [{row}, {col}] {_ZERO_BASED}."
        )
    return np.ascontiguousarray(arr, dtype=element.numpy_dtype)


def _to_float32(arr: np.ndarray, label: str) -> np.ndarray:
    """Convert to float32, refusing finite values whose magnitude overflows."""
    # Casting is the exact overflow test (values just above the float32
    # maximum round down to it, larger ones become inf); silence NumPy's
    # warning because the condition is reported below as a clear error.
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(arr, dtype=np.float32)
    # The input is already known to be finite, so any inf is an overflow.
    overflow = np.isinf(out)
    count = int(np.count_nonzero(overflow))
    if count:
        row, col = _first_index(overflow)
        raise MatrixInputError(
            f"{label} has {count} value{'s' if count > 1 else ''} too large for "
            f"float32 (largest is about {np.finfo(np.float32).max:.4g}), e.g. "
            f"{_format_value(arr[row, col])} at [{row}, {col}] {_ZERO_BASED}."
        )
    return out


def _to_low_precision(arr: np.ndarray, element: ElementType, label: str,
                      notes: list[str] | None = None) -> np.ndarray:
    """Round finite values to a half type, refusing values that overflow it (the first
    one named): rounding to nearest turns them into Inf (float16) or NaN (FP8 e4m3)."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.ascontiguousarray(arr, dtype=element.numpy_dtype)
    overflow = ~np.isfinite(out.astype(np.float32))
    count = int(np.count_nonzero(overflow))
    if count:
        row, col = _first_index(overflow)
        raise MatrixInputError(
            f"{label} has {count} value{'s' if count > 1 else ''} too large for "
            f"{element} (largest is {element.max_finite:.6g}), the first "
            f"{_format_value(arr[row, col])} at [{row}, {col}] {_ZERO_BASED}."
        )
    if notes is not None:
        changed = int(np.count_nonzero(out.astype(np.float64) != arr))
        if changed:
            notes.append(f"{label}: {changed:,} of {arr.size:,} values rounded to {element} "
                         f"(to nearest; the reference uses the rounded values)")
    return out


def _to_matrix(raw, target: ElementType, label: str,
               notes: list[str] | None = None) -> np.ndarray:
    """Validate a raw loaded array and convert it to ``target``; values a half or FP8
    type cannot hold exactly are rounded (said in ``notes``), those it cannot hold at all
    refused. Integer types (int32, int8) take whole numbers in their range only, never
    rounded. FP8 files hold the FP8 values themselves: their scale is 1, or the one an
    .npz stores next to them (:func:`load_operands`)."""
    arr = np.asarray(raw)
    ml = _ml_float(arr, target, label)
    arr = _check_kind(arr if ml is None else ml, label)
    _check_shape(arr, label)
    _check_finite(arr, label)
    if target.is_integer:
        return _to_integer(arr, target, label)
    if target is ElementType.FLOAT32:
        return _to_float32(arr, label)
    return _to_low_precision(arr, target, label, notes)


# ---------------------------------------------------------------------------
# File checks
# ---------------------------------------------------------------------------


def _check_file(path, name: str) -> Path:
    """Check that ``path`` is an existing, readable file with a known extension."""
    if path is None or str(path).strip() == "":
        raise MatrixInputError(f"{name}: no file was given.")
    p = Path(path)
    label = f"{name}: {p.name}"
    from engine.common.files import check_regular_file  # noqa: PLC0415
    from engine.common.host_memory import host_available_bytes  # noqa: PLC0415
    from engine.inputs.memory import HOST_SHARE  # noqa: PLC0415
    # Half the usable memory: the file's bytes and the converted matrix live at once.
    check_regular_file(p, label, MatrixInputError,
                       max_bytes=int(host_available_bytes() * HOST_SHARE) // 2)
    ext = p.suffix.lower()
    if ext not in SUPPORTED_EXTENSIONS:
        shown = f"'{p.suffix}'" if p.suffix else "no extension"
        raise MatrixInputError(
            f"{label} has {shown}; supported file types are "
            f"{', '.join(SUPPORTED_EXTENSIONS)}."
        )
    # Probe by opening: os.access is unreliable (root, ACLs, network drives).
    try:
        with open(p, "rb"):
            pass
    except PermissionError:
        raise MatrixInputError(
            f"{label} cannot be read: permission denied."
        ) from None
    except OSError as err:
        raise MatrixInputError(
            f"{label} cannot be read: {err.strerror or err}."
        ) from None
    return p


# ---------------------------------------------------------------------------
# CSV / TXT
# ---------------------------------------------------------------------------


def _split_line(line: str, ext: str) -> list[str]:
    """Split one data line into cells (comma for .csv; comma or blanks for .txt)."""
    if ext == ".txt" and "," not in line:
        return line.split()
    if '"' in line or "'" in line:
        # Only pay for the csv module when quoting may be involved.
        return [cell.strip() for cell in next(csv.reader([line], delimiter=","))]
    return [cell.strip() for cell in line.split(",")]


def _parse_cell(cell: str, where: str, col: int, ncols: int, ext: str) -> float:
    """Parse one cell or raise MatrixInputError naming its row and column."""
    if cell == "":
        hint = " (is there a trailing comma?)" if col == ncols else ""
        raise MatrixInputError(f"{where}, column {col} is empty{hint}.")
    try:
        return float(cell)
    except ValueError:
        hint = ""
        if ext == ".csv" and any(ch in cell for ch in " \t;"):
            hint = " (values in a .csv file must be separated by commas)"
        raise MatrixInputError(
            f"{where}, column {col}: {cell!r} is not a number{hint}."
        ) from None


def _parse_row(cells: list[str], where: str, ext: str) -> list[float]:
    """Parse a row quickly, falling back to cell-by-cell to locate an error."""
    try:
        return [float(cell) for cell in cells]
    except ValueError:
        pass
    ncols = len(cells)
    return [_parse_cell(c, where, i, ncols, ext) for i, c in enumerate(cells, 1)]


def _read_text(path: Path, ext: str, label: str) -> np.ndarray:
    """Read a .csv/.txt matrix, reporting problems by 1-based row/column."""
    try:
        # utf-8-sig drops the byte-order mark that Excel puts in CSV exports.
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise MatrixInputError(
            f"{label} is not a UTF-8 text file (undecodable byte at offset "
            f"{err.start}); is it really a {ext} file?"
        ) from None
    rows: list[list[float]] = []
    expected = 0
    for line_no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        row_no = len(rows) + 1
        # Blank/comment lines shift line numbers; give both when they differ.
        where = f"{label}, row {row_no}" + (
            f" (line {line_no})" if line_no != row_no else ""
        )
        cells = _split_line(stripped, ext)
        if rows and len(cells) != expected:
            raise MatrixInputError(
                f"{where} has {len(cells)} column{'s' if len(cells) != 1 else ''} "
                f"but row 1 has {expected}; every row needs the same number of "
                f"columns."
            )
        expected = len(cells)
        rows.append(_parse_row(cells, where, ext))
    if not rows:
        raise MatrixInputError(
            f"{label} is empty: it has no data rows (only blank or '#' comment "
            f"lines, if any)."
        )
    return np.array(rows, dtype=np.float64)


# ---------------------------------------------------------------------------
# NumPy .npy / .npz
# ---------------------------------------------------------------------------

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")


def _sniff(path: Path) -> bytes:
    """Return the first bytes of a file, used to tell .npy from .npz."""
    with open(path, "rb") as fh:
        return fh.read(6)


def _numpy_error(label: str, err: Exception) -> MatrixInputError:
    """Translate an exception from np.load / NpzFile access."""
    text = str(err)
    if "allow_pickle" in text or "pickled" in text or "Object arrays" in text:
        return MatrixInputError(
            f"{label} holds Python objects (pickled data), which is refused for "
            f"safety; save plain numeric arrays instead."
        )
    if "'<f1'" in text or "'>f1'" in text:
        return MatrixInputError(
            f"{label} holds 1-byte floats that NumPy cannot read back (an ml_dtypes FP8 "
            f"array saved with np.save); save it as raw bytes (arr.view('V1')) and choose "
            f"its FP8 type to read it.")
    detail = f" ({_detail(err)})" if text else ""
    return MatrixInputError(
        f"{label} is truncated or corrupt and could not be read{detail}."
    )


def _read_npy(path: Path, label: str) -> np.ndarray:
    """Load a .npy file without ever unpickling."""
    head = _sniff(path)
    if not head.startswith(_NPY_MAGIC):
        # Without this check np.load would try to unpickle the bytes and
        # then complain about pickles, which misleads for a plain bad file.
        if head.startswith(_ZIP_MAGICS):
            why = "it is a zip archive; rename it to .npz"
        else:
            why = "it lacks the .npy header; it is corrupt or another format"
        raise MatrixInputError(f"{label} is not a valid NumPy .npy file: {why}.")
    try:
        return np.load(path, allow_pickle=False)
    except _READER_ERRORS as err:
        raise _numpy_error(label, err) from None


def _open_npz(path: Path, label: str):
    """Open an .npz archive (lazily; members are read on access)."""
    head = _sniff(path)
    if not head.startswith(_ZIP_MAGICS):
        raise MatrixInputError(
            f"{label} is not a valid NumPy .npz file (not a zip archive); it may "
            f"be truncated, corrupt, or a different format."
        )
    try:
        npz = np.load(path, allow_pickle=False)
    except _READER_ERRORS as err:
        raise _numpy_error(label, err) from None
    if not isinstance(npz, np.lib.npyio.NpzFile):  # defensive: magic said zip
        raise MatrixInputError(f"{label} is not a valid NumPy .npz file.")
    return npz


def _npz_member(npz, key: str, label: str) -> np.ndarray:
    """Read one array of an open archive, translating corruption errors."""
    try:
        return npz[key]
    except _READER_ERRORS as err:
        raise _numpy_error(label, err) from None


def _npz_listing(npz) -> str:
    """Names of the arrays in an archive, for messages."""
    return ", ".join(repr(f) for f in npz.files) or "no arrays"


def _pick_npz_key(npz, npz_key, name: str, label: str) -> str:
    """Choose which array of an archive to load for matrix ``name``."""
    files = list(npz.files)
    if not files:
        raise MatrixInputError(f"{label} is an .npz archive with no arrays in it.")
    if npz_key is None:
        if name in files:  # exact match wins over a case-insensitive one
            return name
        by_lower = {f.lower(): f for f in files}
        if name.lower() in by_lower:
            return by_lower[name.lower()]
        if len(files) == 1:
            return files[0]
        raise MatrixInputError(
            f"{label} holds {len(files)} arrays ({_npz_listing(npz)}) and none "
            f"is named {name.lower()!r}; choose one with npz_key."
        )
    if isinstance(npz_key, (int, np.integer)) and not isinstance(npz_key, bool):
        if not 0 <= npz_key < len(files):
            raise MatrixInputError(
                f"{label} has no array number {npz_key}: it holds {len(files)} "
                f"array{'s' if len(files) != 1 else ''} ({_npz_listing(npz)}), "
                f"numbered from 0."
            )
        return files[npz_key]
    key = str(npz_key)
    key = key[:-4] if key.endswith(".npy") else key  # accept the zip member name
    if key not in files:
        raise MatrixInputError(
            f"{label} has no array named {key!r}; it holds {_npz_listing(npz)}."
        )
    return key


def _read_npz(path: Path, label: str, name: str, npz_key) -> tuple[np.ndarray, str]:
    """Load one array of an .npz archive; returns it and a refined label."""
    with _open_npz(path, label) as npz:
        key = _pick_npz_key(npz, npz_key, name, label)
        member_label = f"{label}, array {key!r}"
        return _npz_member(npz, key, member_label), member_label


# ---------------------------------------------------------------------------
# Matrix Market
# ---------------------------------------------------------------------------


def _read_mtx(path: Path, label: str) -> np.ndarray:
    """Load a Matrix Market file as a dense array (sparse is densified)."""
    import scipy.io  # lazy: SciPy is only needed for .mtx files

    try:
        field = scipy.io.mminfo(str(path))[4]
    except _READER_ERRORS as err:
        raise MatrixInputError(
            f"{label} has a malformed Matrix Market header ({_detail(err)})."
        ) from None
    if field == "complex":
        raise MatrixInputError(
            f"{label} holds complex numbers (Matrix Market field 'complex'), "
            f"which are not supported."
        )
    try:
        data = scipy.io.mmread(str(path))
    except _READER_ERRORS as err:
        raise MatrixInputError(
            f"{label} could not be read as a Matrix Market file ({_detail(err)})."
        ) from None
    # Coordinate files come back sparse; 'pattern' entries come back as 1.
    if hasattr(data, "toarray"):
        data = data.toarray()
    return np.asarray(data)


# ---------------------------------------------------------------------------
# Public loaders
# ---------------------------------------------------------------------------


def _read_raw(path: Path, name: str, npz_key) -> tuple[np.ndarray, str]:
    """Dispatch on the extension; return the raw array and its label."""
    label = f"{name}: {path.name}"
    ext = path.suffix.lower()
    if npz_key is not None and ext != ".npz":
        raise MatrixInputError(
            f"{label}: an array name/number (npz_key) only applies to .npz files."
        )
    if ext in (".csv", ".txt"):
        return _read_text(path, ext, label), label
    if ext == ".npy":
        return _read_npy(path, label), label
    if ext == ".npz":
        return _read_npz(path, label, name, npz_key)
    return _read_mtx(path, label), label


def _guard_memory(func, label: str):
    """Run ``func()``, turning MemoryError into a user-facing message."""
    try:
        return func()
    except MemoryError:
        raise MatrixInputError(
            f"{label} is too large to load into memory."
        ) from None


def load_matrix(
    path,
    dtype: str,
    name: str = "A",
    npz_key: str | int | None = None,
) -> np.ndarray:
    """Load a 2-D matrix from a file and convert it to ``dtype``.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy``, ``.npz``, ``.csv``, ``.txt`` or ``.mtx`` file.
        ``.csv`` is comma-separated; ``.txt`` may use commas or blanks.  In
        both, blank lines and lines starting with ``#`` are ignored.
    dtype : {"float32", "int32", "int8", ...}
        Element type of the result.  int32 and int8 refuse non-integral and
        out-of-range values (int8: outside -128..127); float32 refuses values
        that overflow it; half and FP8 types round.  Booleans are accepted as 0/1.
    name : str, default "A"
        Name of the matrix; starts every error message.
    npz_key : str or int, optional
        For ``.npz`` files: the array name or its 0-based position.  By
        default the array named like ``name`` (case-insensitive, e.g. "a"),
        else the only array.

    Returns
    -------
    numpy.ndarray
        A C-contiguous 2-D array of the requested dtype.

    Raises
    ------
    MatrixInputError
        For every problem with the file or its contents; the message names
        the matrix, the file and the problem.
    """
    target = _check_dtype(dtype)
    p = _check_file(path, name)
    label = f"{name}: {p.name}"

    def work():
        raw, raw_label = _read_raw(p, name, npz_key)
        return _to_matrix(raw, target, raw_label)

    return _guard_memory(work, label)


def _npz_pair_keys(npz, label: str) -> tuple[str, str]:
    """Keys of A and B in an archive holding both: the arrays named a and b (either case),
    else the only two arrays, in file order. Anything else is refused with what the
    archive holds: taking the first two of x, y, z would multiply what nobody chose."""
    files = [f for f in npz.files if f not in _NPZ_META]
    by_lower: dict[str, list[str]] = {}
    for f in files:
        by_lower.setdefault(f.lower(), []).append(f)
    for name in ("a", "b"):
        if len(by_lower.get(name, [])) > 1:
            raise MatrixInputError(
                f"{label} holds both {' and '.join(repr(f) for f in by_lower[name])}; "
                f"it is not clear which is {name.upper()}. Keep one of them, or choose "
                f"A and B as separate files."
            )
    if "a" in by_lower and "b" in by_lower:
        return by_lower["a"][0], by_lower["b"][0]
    if len(files) == 2:
        return files[0], files[1]
    count = len(files)
    raise MatrixInputError(
        f"{label} holds {count} array{'s' if count != 1 else ''} ({_npz_listing(npz)}), "
        f"but A and B were both to be taken from it; it needs arrays named 'a' and 'b' "
        f"(or exactly two arrays, A first), or choose a separate file for B."
    )


@dataclass(frozen=True)
class LoadedPair:
    """A and B as :func:`load_pair_report` read them, each with where it came from
    (``A: data.npz, array 'x'``); ``note`` says which arrays of one .npz became A and B."""

    a: np.ndarray
    b: np.ndarray
    a_label: str
    b_label: str
    note: str = ""


def _load_pair_from_npz(path, target: ElementType, notes: list[str] | None = None,
                        scales: dict[str, float] | None = None) -> LoadedPair:
    """Load A and B from a single .npz archive."""
    p = _check_file(path, "A")
    if p.suffix.lower() != ".npz":
        raise MatrixInputError(
            f"B: no file was given; B can only be omitted when A's file is an "
            f".npz holding both matrices, but it is {p.name}."
        )
    label = p.name

    def work():
        with _open_npz(p, f"A: {label}") as npz:
            key_a, key_b = _npz_pair_keys(npz, f"B: {label}")
            la = f"A: {label}, array {key_a!r}"
            lb = f"B: {label}, array {key_b!r}"
            _check_npz_type(npz, target, label)
            a = _to_matrix(_npz_member(npz, key_a, la), target, la, notes)
            b = _to_matrix(_npz_member(npz, key_b, lb), target, lb, notes)
            if scales is not None:
                scales.update(_npz_scales(npz, label))
            return LoadedPair(a, b, la, lb, f"A is array {key_a!r} and B is array {key_b!r} "
                                            f"of {label}")

    return _guard_memory(work, f"A/B: {label}")


def load_pair(path_a, path_b, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Load A and B for ``C = A @ B`` and check that their shapes agree.

    Parameters
    ----------
    path_a : str or os.PathLike
        File of A (see :func:`load_matrix` for formats).
    path_b : str or os.PathLike or None
        File of B.  ``None`` when ``path_a`` is an ``.npz`` holding both:
        the arrays named "a"/"b" (either case), else its only two arrays
        in file order (A first); any other archive is refused, naming
        the arrays it holds.
    dtype : {"float32", "int32", "int8", ...}
        Element type of both results.

    Returns
    -------
    tuple of numpy.ndarray
        ``(A, B)``, C-contiguous, of the requested dtype.

    Raises
    ------
    MatrixInputError
        For any problem with either file, or if A's column count differs
        from B's row count.
    """
    pair = load_pair_report(path_a, path_b, dtype)
    return pair.a, pair.b


def load_pair_report(path_a, path_b, dtype: str) -> LoadedPair:
    """:func:`load_pair`, with where A and B came from (the file, and the array of an
    .npz), for a caller that says what it loaded."""
    target = _check_dtype(dtype)
    if path_b is None:
        pair = _load_pair_from_npz(path_a, target)
    else:
        pair = LoadedPair(load_matrix(path_a, dtype, name="A"),
                          load_matrix(path_b, dtype, name="B"),
                          f"A: {Path(path_a).name}", f"B: {Path(path_b).name}")
    a, b = pair.a, pair.b
    if a.shape[1] != b.shape[0]:
        raise MatrixInputError(
            f"A is {_shape_text(a.shape)} but B is {_shape_text(b.shape)}: "
            f"A's columns ({a.shape[1]}) must equal B's rows ({b.shape[0]})."
        )
    return pair


# ---------------------------------------------------------------------------
# Typed operands: half precision and FP8 (scales), files in these types
# ---------------------------------------------------------------------------

#: Members of an .npz written by :func:`save_operands` that are not matrices: the type's
#: name (np.save keeps ml_dtypes types only as raw bytes) and FP8's per-tensor scales.
_NPZ_META = ("dtype", "scale_a", "scale_b")


def _check_npz_type(npz, target: ElementType, label: str) -> None:
    """Refuse an archive whose ``dtype`` member names another type than the chosen one:
    its raw bytes would be read as the wrong type."""
    if "dtype" not in npz.files:
        return
    try:
        named = str(np.asarray(npz["dtype"]).reshape(-1)[0])
    except (*_READER_ERRORS, IndexError):
        raise MatrixInputError(f"{label}: its 'dtype' member is not a type name.") from None
    if named != str(target):
        raise MatrixInputError(
            f"{label} holds {named} matrices (its 'dtype' member), but {target} was chosen; "
            f"choose {named} to read it.")


def _npz_scales(npz, label: str) -> dict[str, float]:
    """The FP8 scales an archive stores (``scale_a``, ``scale_b``), each checked."""
    out = {}
    for key in ("scale_a", "scale_b"):
        if key not in npz.files:
            continue
        value = np.asarray(_npz_member(npz, key, f"{label}, array {key!r}"))
        if value.size != 1 or value.dtype.kind not in "iuf":
            raise MatrixInputError(f"{label}: {key} must be one number, not {describe(value)}.")
        try:
            out[key] = check_scale(value.reshape(-1)[0], f"{key}")
        except ValueError as exc:
            raise MatrixInputError(f"{label}: {exc}.") from None
    return out


def load_operands(path_a, path_b, dtype, scale_a=None, scale_b=None) -> Operands:
    """A and B for a run in ``dtype`` (any :class:`ElementType` name): :func:`load_pair`
    for every type, with the rounding said in ``note`` and FP8's scales from the
    arguments, else from an .npz holding both (``scale_a``/``scale_b``), else 1.
    A scale of zero, NaN or Inf is refused."""
    target = _check_dtype(dtype)
    notes: list[str] = []
    scales: dict[str, float] = {}
    if path_b is None:
        pair = _guard_memory(lambda: _load_pair_from_npz(path_a, target, notes, scales),
                             f"A/B: {Path(str(path_a)).name}")
    else:
        def one(path, name):
            p = _check_file(path, name)
            label = f"{name}: {p.name}"

            def work():
                if p.suffix.lower() == ".npz":
                    with _open_npz(p, label) as npz:
                        _check_npz_type(npz, target, label)
                raw, raw_label = _read_raw(p, name, None)
                return _to_matrix(raw, target, raw_label, notes)
            return _guard_memory(work, label)
        pair = LoadedPair(one(path_a, "A"), one(path_b, "B"),
                          f"A: {Path(path_a).name}", f"B: {Path(path_b).name}")
    a, b = pair.a, pair.b
    if a.shape[1] != b.shape[0]:
        raise MatrixInputError(
            f"A is {_shape_text(a.shape)} but B is {_shape_text(b.shape)}: "
            f"A's columns ({a.shape[1]}) must equal B's rows ({b.shape[0]})."
        )
    sa, sb = scales.get("scale_a", 1.0), scales.get("scale_b", 1.0)
    try:
        if scale_a is not None:
            sa = check_scale(scale_a, "scale_a")
        if scale_b is not None:
            sb = check_scale(scale_b, "scale_b")
    except ValueError as exc:
        raise MatrixInputError(f"{exc}.") from None
    if not target.is_float8 and (sa, sb) != (1.0, 1.0):
        raise MatrixInputError(f"per-tensor scales apply to FP8 inputs only, not {target}.")
    note = "; ".join(([pair.note] if pair.note else []) + notes)
    return Operands(a, b, target, sa, sb, note)


def save_operands(path, ops: Operands) -> None:
    """Write A and B (and the type's name, and FP8's scales) to an .npz that
    :func:`load_operands` reads back exactly; a .npy path gets A alone."""
    p = Path(path)
    if p.suffix.lower() == ".npy":
        np.save(p, _raw_bytes(ops.a))
        return
    if p.suffix.lower() != ".npz":
        raise MatrixInputError(f"{p.name}: operands are saved as .npz (or A alone as .npy).")
    meta = {"dtype": np.array(str(ops.element))}
    if ops.element.is_float8:
        meta.update(scale_a=np.float64(ops.scale_a), scale_b=np.float64(ops.scale_b))
    np.savez(p, a=_raw_bytes(ops.a), b=_raw_bytes(ops.b), **meta)


def _raw_bytes(arr: np.ndarray) -> np.ndarray:
    """An ml_dtypes array as raw bytes ('V1', 'V2'): np.load cannot read the descriptor
    np.save writes for some of them (float8_e5m2's '<f1'); the reader views them back."""
    ml_types = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
    return arr.view(f"V{arr.dtype.itemsize}") if arr.dtype.name in ml_types else arr
