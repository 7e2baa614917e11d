"""The element types the lab speaks, and what each one means for a run.

A run's numbers are described by a :class:`TypeSpec`: the input type of A and B, the
output type of C (FP16/BF16: FP32 or the input type; FP8: BF16 or FP32), and B's layout
(K×N row-major, or N×K "transposed"). FP8 inputs carry per-tensor scales
(C = scale_a · scale_b · A₈·B₈, as cuBLASLt computes it). Accumulation is FP32 for every
floating-point type and wrapping int32 for int32 and int8 (int8 products summed in int32 on
the tensor cores, exact; C is int32).

The half-precision and FP8 types come from ``ml_dtypes`` (imported on first use: without
it the app starts and names what is missing). Their unit roundoff ``u`` (half the
distance from 1 to the next number) feeds the tolerance in ``engine.measure.verify``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import numpy as np


class ElementType(StrEnum):
    """An input (or output) element type, by the name records and the CLI use."""

    FLOAT32 = "float32"
    INT32 = "int32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT8_E4M3 = "float8_e4m3"     # ml_dtypes' float8_e4m3fn: no Inf, max 448
    FLOAT8_E5M2 = "float8_e5m2"
    INT8 = "int8"                   # tensor cores' int8 · int8 summed in int32, C in int32

    @property
    def is_float8(self) -> bool:
        return self in (ElementType.FLOAT8_E4M3, ElementType.FLOAT8_E5M2)

    @property
    def is_low_precision(self) -> bool:
        """One of the types the tensor-core ladder (issue 39) adds."""
        return self not in (ElementType.FLOAT32, ElementType.INT32)

    @property
    def is_integer(self) -> bool:
        """Exact arithmetic (wrapping modulo 2³²): verified for equality, no tolerance."""
        return self in (ElementType.INT32, ElementType.INT8)

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype (ml_dtypes' for bfloat16 and FP8); raises :class:`TypeUnavailable`
        where ml_dtypes is not installed."""
        if self is ElementType.FLOAT32:
            return np.dtype(np.float32)
        if self is ElementType.INT32:
            return np.dtype(np.int32)
        if self is ElementType.INT8:
            return np.dtype(np.int8)
        if self is ElementType.FLOAT16:
            return np.dtype(np.float16)
        ml = _ml_dtypes()
        return np.dtype({ElementType.BFLOAT16: ml.bfloat16,
                         ElementType.FLOAT8_E4M3: ml.float8_e4m3fn,
                         ElementType.FLOAT8_E5M2: ml.float8_e5m2}[self])

    @property
    def itemsize(self) -> int:
        return {ElementType.FLOAT8_E4M3: 1, ElementType.FLOAT8_E5M2: 1, ElementType.INT8: 1,
                ElementType.FLOAT16: 2, ElementType.BFLOAT16: 2}.get(self, 4)

    @property
    def mantissa_bits(self) -> int:
        """Explicit mantissa bits (float32 23, float16 10, bfloat16 7, e4m3 3, e5m2 2)."""
        return {ElementType.FLOAT32: 23, ElementType.FLOAT16: 10, ElementType.BFLOAT16: 7,
                ElementType.FLOAT8_E4M3: 3, ElementType.FLOAT8_E5M2: 2}.get(self, 0)

    @property
    def unit_roundoff(self) -> float:
        """u = 2^-(mantissa bits + 1): the largest relative error of rounding to nearest
        (0 for int32 and int8, which are exact modulo 2³²)."""
        return 0.0 if self.is_integer else 2.0 ** -(self.mantissa_bits + 1)

    @property
    def max_finite(self) -> float:
        """The largest finite value (values above it overflow the type)."""
        if self.is_integer:
            return float(np.iinfo(self.numpy_dtype).max)
        if self is ElementType.FLOAT32:
            return float(np.finfo(np.float32).max)
        if self is ElementType.FLOAT16:
            return float(np.finfo(np.float16).max)
        return float(_ml_dtypes().finfo(self.numpy_dtype).max)

    @property
    def accumulator(self) -> "ElementType":
        """What the products are summed in: FP32 for every float type, int32 for int32 and
        int8."""
        return ElementType.INT32 if self.is_integer else ElementType.FLOAT32

    @property
    def output_choices(self) -> tuple["ElementType", ...]:
        """The output types a run may choose, the default first."""
        if self in (ElementType.FLOAT16, ElementType.BFLOAT16):
            return (ElementType.FLOAT32, self)
        if self.is_float8:
            return (ElementType.BFLOAT16, ElementType.FLOAT32)
        if self is ElementType.INT8:
            return (ElementType.INT32,)     # the int32 sums as they are, never narrowed
        return (self,)

    @property
    def description(self) -> str:
        return {ElementType.FLOAT32: "FP32 (or TF32 on tensor cores), FP32 accumulation",
                ElementType.INT32: "int32, wrapping modulo 2³²",
                ElementType.FLOAT16: "FP16 inputs, FP32 accumulation",
                ElementType.BFLOAT16: "BF16 inputs, FP32 accumulation",
                ElementType.FLOAT8_E4M3: "FP8 e4m3 inputs with per-tensor scales, FP32 accumulation",
                ElementType.FLOAT8_E5M2: "FP8 e5m2 inputs with per-tensor scales, FP32 accumulation",
                ElementType.INT8: "int8 inputs, int32 accumulation (exact)",
                }[self]


#: Every type, in the order pickers list them.
ELEMENT_NAMES: tuple[str, ...] = tuple(t.value for t in ElementType)
#: The exact types (int32, int8): verified for equality, their records say "exact".
INTEGER_NAMES: tuple[str, ...] = tuple(t.value for t in ElementType if t.is_integer)


class Layout(StrEnum):
    """How B is stored: ``kn`` K×N row-major (the lab's kernels), ``nk`` N×K row-major
    ("transposed": what FP8 wgmma wants and most frameworks' weights are)."""

    KN = "kn"
    NK = "nk"

    @property
    def description(self) -> str:
        return "B as K×N (row-major)" if self is Layout.KN else "B as N×K (transposed)"


class TypeUnavailable(RuntimeError):
    """A type whose library (ml_dtypes) is not installed; the message says so."""


def _ml_dtypes():
    try:
        import ml_dtypes  # noqa: PLC0415  (optional until a half/FP8 type is chosen)
    except ImportError:
        raise TypeUnavailable("bfloat16 and FP8 need the ml_dtypes package "
                              "(pip install ml_dtypes)") from None
    return ml_dtypes


def unavailable_reason(element: ElementType) -> str | None:
    """Why ``element`` cannot be used on this host (ml_dtypes missing), or None."""
    try:
        element.numpy_dtype
    except TypeUnavailable as exc:
        return str(exc)
    return None


def parse_element(name) -> ElementType:
    """The :class:`ElementType` named ``name`` (e4m3/e5m2 and float8_e4m3fn accepted);
    ValueError listing the choices otherwise."""
    if isinstance(name, ElementType):
        return name
    text = str(name).strip().lower()
    text = {"float8_e4m3fn": "float8_e4m3", "e4m3": "float8_e4m3", "e5m2": "float8_e5m2",
            "fp16": "float16", "half": "float16", "bf16": "bfloat16", "fp32": "float32"
            }.get(text, text)
    try:
        return ElementType(text)
    except ValueError:
        raise ValueError(f"unknown element type {name!r}; choose one of: "
                         f"{', '.join(ELEMENT_NAMES)}") from None


@dataclass(frozen=True)
class TypeSpec:
    """The numbers of one run: input type, output type and B's layout."""

    element: ElementType = ElementType.FLOAT32
    output: ElementType | None = None      # None: the element's default output
    layout: Layout = Layout.KN

    def __post_init__(self):
        object.__setattr__(self, "element", parse_element(self.element))
        out = self.element.output_choices[0] if self.output in (None, "") \
            else parse_element(self.output)
        if out not in self.element.output_choices:
            raise ValueError(f"{self.element} cannot write {out}; its output is one of "
                             f"{', '.join(self.element.output_choices)}")
        object.__setattr__(self, "output", out)
        try:
            object.__setattr__(self, "layout", Layout(self.layout))
        except ValueError:
            raise ValueError(f"layout must be kn (B as K×N) or nk (B as N×K), "
                             f"not {self.layout!r}") from None

    @property
    def accumulator(self) -> ElementType:
        return self.element.accumulator

    @property
    def out_dtype(self) -> str | None:
        """C's type as a :class:`~engine.run.runner.Plan` names it: None where it is the
        input type's default."""
        return None if self.output is self.element.output_choices[0] else str(self.output)

    @property
    def label(self) -> str:
        """``bfloat16 → float32, B N×K`` (the layout only where it is not the default)."""
        text = str(self.element) if self.output is self.element else f"{self.element} → {self.output}"
        return text + (", B N×K" if self.layout is Layout.NK else "")


def check_scale(value, what: str) -> float:
    """``value`` as a float when it is a usable FP8 per-tensor scale (finite, positive);
    ValueError naming ``what`` otherwise (a zero scale multiplies everything to zero, a
    NaN or Inf one poisons every element)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if math.isnan(v) or math.isinf(v) or v == 0.0:
        raise ValueError(f"{what} is {v!r}; an FP8 scale must be finite and nonzero")
    if v < 0:
        raise ValueError(f"{what} is {v!r}; an FP8 scale must be positive")
    return v


def backend_refusal(backend: str, element: ElementType, *, opencl_fp16: bool | None = None,
                    library: str | None = None) -> str | None:
    """Why ``backend`` cannot run ``element`` (a kernel of it, or a library line), or None.
    Never a silent run in another type: a type a backend lacks is a skip with this reason.
    ``opencl_fp16``: whether the OpenCL device has cl_khr_fp16 (None: not known here)."""
    element = parse_element(element)
    if not element.is_low_precision:
        return None
    missing = unavailable_reason(element)
    if missing:
        return missing
    if backend == "cpu":
        return None
    if backend == "opencl":
        if element is ElementType.FLOAT16:
            if opencl_fp16 is False:
                return "this OpenCL device lacks cl_khr_fp16 (PoCL on a CPU has none), so no kernel runs in float16"
            return "no OpenCL kernel of the lab is built for float16 yet (it needs cl_khr_fp16)"
        if element is ElementType.INT8:
            # OpenCL C has char, but the seeds' int32 kernels would read its bytes as ints
            return ("no OpenCL kernel of the lab takes int8 (its int8 GEMM is a CUDA tensor-core "
                    "kernel); it is never run as int32")
        return f"OpenCL C has no {element} type; no OpenCL kernel takes it"
    if backend == "cuda":
        return None     # the kernel files and library lines that declare the type take it
    return f"the {backend} backend does not take {element}"
