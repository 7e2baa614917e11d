"""The variant registry: every kernel the lab can run, described once.

The GUI and the command line build their choices from :data:`REGISTRY`; the runner
asks each :class:`Variant` for its launch geometry, its compile-time defines, whether
a parameter combination is valid for a shape (and why not), and its FLOP and byte
models.

Conventions shared by every kernel file (``cuda/*.cu``, ``opencl/*.cl``):

* row-major storage; ``A`` is M×K, ``B`` is K×N, ``C`` is M×N (``aat`` kernels: C = A·Aᵀ,
  ``A`` is M×K and ``C`` is M×M);
* compile-time constants arrive as defines: ``ELEM`` (element type; not ``T``, which
  CUDA's own headers use as a template parameter name), ``ACC`` (accumulator
  type: ``float``, or ``unsigned`` for int32 so that overflow wraps modulo 2³²
  with defined behaviour; ``int`` for int8, whose tensor cores sum in int32), ``OUT``
  (C's type, for the tensor-core types) and the variant's own parameters (upper-case names);
* the entry point is called ``matmul`` with arguments ``(A, B, C, M, N, K)``, or
  ``(A, C, M, K)`` for ``aat`` kernels;
* thread x runs along columns of C (so neighbouring threads touch neighbouring
  addresses) and y along rows.
"""
from __future__ import annotations

import dataclasses
import itertools
import os
import re
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from engine.common.dtypes import ElementType
from engine.common.files import read_text
from engine.kernels import dispatch_table
from engine.kernels.kernel_file import (ARCH_RE, FP8_DTYPES, HALF_DTYPES, INT8_DTYPES, KERNEL_DTYPES,
                                        KERNEL_FILE_LIMIT, MODEL_FACTOR, ExpressionError, Expr, KernelFileError,
                                        KernelHeader, Prepass, parse_header, shown_text)

ROOT = Path(__file__).resolve().parents[2]
DTYPES = ("float32", "int32")
ITEMSIZE = {"float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3": 1,
            "float8_e5m2": 1, "int8": 1}

Params = Mapping[str, int]

#: A parameter value that leaves the choice to the shape: the header's ``[chosen]``
#: expression gives the value at each shape (:meth:`Variant.resolve`). Written ``auto``.
AUTO = -1
#: CUDA's launch limits (every architecture the lab builds for).
CUDA_MAX_THREADS = 1024
CUDA_MAX_GRID_X = 2**31 - 1
CUDA_MAX_GRID_Y = 65535
#: ``(grid_x, grid_y), (block_x, block_y)``: blocks in the grid, threads per block.
Geometry = tuple[tuple[int, int], tuple[int, int]]


def cdiv(a: int, b: int) -> int:
    """Ceiling division for positive integers."""
    return -(-a // b)


def gemm_flops(m: int, n: int, k: int) -> int:
    """Floating-point (or integer) operations of C = A·B: one multiply and one add per term."""
    return 2 * m * n * k


#: The CUDA C type of each tensor-core element type: a kernel file's ``ELEM`` (the inputs),
#: ``OUT`` (C) and ``ACC`` (the sums). ``signed char`` is int8_t without an include (plain
#: ``char`` may be unsigned).
TENSOR_CORE_C_TYPE = {"float32": "float", "int32": "int", "float16": "__half",
                      "bfloat16": "__nv_bfloat16", "float8_e4m3": "__nv_fp8_e4m3",
                      "float8_e5m2": "__nv_fp8_e5m2", "int8": "signed char"}


def io_bytes(v: "Variant", m: int, n: int, k: int, dtype: str, out_dtype: str | None = None) -> int:
    """Bytes a run of ``v`` moves at a shape: its byte model at the input type's size, C
    counted at its own type's size where the output type differs (16-bit inputs with FP32
    C: (M·K + K·N)·2 + M·N·4)."""
    size = ITEMSIZE.get(dtype, 4)
    out_size = ITEMSIZE.get(out_dtype or dtype, size)
    return v.bytes_moved(m, n, k, size) + v.effective_n(m, n) * m * (out_size - size)


def gemm_bytes(m: int, n: int, k: int, itemsize: int) -> int:
    """Fewest bytes a GEMM must move: A and B read once, C written once."""
    return (m * k + k * n + m * n) * itemsize


def aat_flops(m: int, n: int, k: int) -> int:
    """C = A·Aᵀ computed in full (both triangles), as the seed's kernels do."""
    return 2 * m * m * k


def aat_bytes(m: int, n: int, k: int, itemsize: int) -> int:
    """A read once, the M×M result written once."""
    return (m * k + m * m) * itemsize


def arch_name(arch: str | None) -> str | None:
    """A GPU architecture as ``[defaults]`` tables name it: ``"9.0"`` (a compute
    capability, as :class:`~engine.measure.backends.base.DeviceInfo` gives it), ``"sm_90"``,
    ``"sm_90a"`` or ``"compute_90"`` → ``"sm_90"``; None for None or anything else."""
    if not arch:
        return None
    text = str(arch).strip().lower()
    m = re.fullmatch(r"(\d+)\.(\d)[a-z]?", text)
    if m:
        return f"sm_{m[1]}{m[2]}"
    m = re.fullmatch(r"(?:sm|compute)_(\d+\d)[a-z]?", text)
    return f"sm_{m[1]}" if m else None


@dataclass(frozen=True)
class Variant:
    """One kernel the lab can run.

    Built from a kernel file's header (:mod:`engine.kernels.kernel_file`; the .cu and .cl files
    of one name make one variant) or, for library references, from :data:`REFERENCES`.

    Parameters
    ----------
    name
        Registry key, used on the command line (``--variants``) and in records.
    technique
        One line for the GUI's list: what the kernel does differently.
    seed
        Where the technique comes from (a seed document or a public reference).
    sources
        Backend name → kernel file (relative to the repository root, or absolute for a
        user's kernel), or the library routine of a reference.
    space
        Parameter name → the values the registry offers, first one the default (unless
        ``arch_defaults`` names another for the device's architecture).
    geometry
        ``(params, m, n, k) -> ((grid_x, grid_y), (block_x, block_y))``.
    constraint
        ``(params, m, n, k, dtype) -> reason or None``; a reason means the
        combination is skipped and the reason shown.
    kind
        ``"gemm"`` (C = A·B) or ``"aat"`` (C = A·Aᵀ, B unused, N = M).
    role
        ``baseline`` (speed-ups are over it), ``seed``, ``reference`` (a library line the
        kernels are a percentage of), ``rung`` (the ladder), ``experiment`` (kept, tested,
        not in default sweeps) or ``user`` (a kernel file of the user's).
    """

    name: str
    technique: str
    seed: str
    sources: Mapping[str, str]
    space: Mapping[str, tuple[int, ...]]
    geometry: Callable[[Params, int, int, int], Geometry]
    constraint: Callable[[Params, int, int, int, str], str | None] = lambda p, m, n, k, d: None
    kind: str = "gemm"
    dtypes: tuple[str, ...] = DTYPES
    #: B's layouts it takes (engine.common.dtypes.Layout values): "kn" always; "nk" B as N×K
    layouts: tuple[str, ...] = ("kn",)
    flops: Callable[[int, int, int], int] = gemm_flops
    bytes_moved: Callable[[int, int, int, int], int] = gemm_bytes
    entry: str = "matmul"
    #: Set for library reference lines (e.g. ``"cublas"``): the backend calls the
    #: library instead of compiling ``sources``; ``sources`` then names the routine.
    library: str | None = None
    #: Arithmetic the result is checked against: "fp32" or "tf32" (looser tolerance).
    precision: str = "fp32"
    role: str = "seed"
    #: Place in the ladder as taught (kernel files' ``order``).
    order: int | None = None
    #: CUDA: bytes of dynamic shared memory for a parameter set (None: none).
    dynamic_shared: Callable[[Params], int] | None = None
    #: CUDA: "a" for kernels that need the exact architecture (sm_90a: wgmma, setmaxnreg).
    arch_suffix: str = ""
    #: CUDA: a kernel launched before this one in the same timed region (a pre-pass).
    prepass: Prepass | None = None
    #: CUDA: ``(params, m, n, k, sms) -> bytes`` of the kernel's workspace argument (a
    #: header's ``launch.workspace``); None: the kernel takes no such argument.
    workspace: Callable[..., int] | None = None
    #: The kernel files' headers this variant was built from (none for references).
    headers: tuple[KernelHeader, ...] = ()
    #: ``[defaults]`` of the kernel files: architecture (``sm_90``, ``sm_9x``) → the
    #: parameters whose default differs there (see :meth:`default_params`).
    arch_defaults: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: Backends on which the window ticks this variant before the user chooses (the kernel
    #: files' ``newcomer = true``; see :func:`ticked_by_default`).
    newcomer: frozenset[str] = frozenset()
    #: The longer story behind the one-line ``technique`` (the files' ``summary``).
    summary: str = ""
    #: Parameter → what it sets, in one line (the files' ``[descriptions]``; the window's
    #: tooltips, ``bench --list``).
    descriptions: Mapping[str, str] = field(default_factory=dict)
    #: A dispatch variant's table (role ``dispatch``): it runs the kernel the table picks
    #: at each shape (:func:`route`); None for a kernel or a library line.
    dispatch: dispatch_table.DispatchTable | None = None

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(self.sources)

    @property
    def is_triton(self) -> bool:
        """A ``@triton.jit`` kernel (a ``.py`` file): CUDA through Triton, and on the cpu
        backend through Triton's interpreter."""
        return any(h.is_triton for h in self.headers)

    def source_path(self, backend: str) -> Path:
        return ROOT / self.sources[backend]

    def source_text(self, backend: str) -> str:
        """The kernel file of ``backend`` as it was when registered (read now if the
        variant has no header that kept it)."""
        path = self.source_path(backend)
        h = next((h for h in self.headers if h.backend == backend), None)
        if h is not None and h.text and resolved(h.path) == resolved(path):
            return h.text
        return read_text(path, f"the kernel file {path}", OSError, KERNEL_FILE_LIMIT)

    def launch_geometry(self, params: Params, m: int, n: int, k: int,
                        sms: int | None = None) -> Geometry:
        """:attr:`geometry` on a device of ``sms`` multiprocessors (a kernel file's ``SMS``;
        None: :data:`engine.kernels.kernel_file.DEFAULT_SMS`). References and hand-built variants
        take no device count."""
        if self.headers:
            return self.geometry(params, m, n, k, sms=sms)
        return self.geometry(params, m, n, k)

    def workspace_bytes(self, params: Params, m: int, n: int, k: int,
                        sms: int | None = None) -> int:
        """Bytes of the workspace the kernel takes at a shape (0 where it takes none)."""
        return self.workspace(params, m, n, k, sms) if self.workspace is not None else 0

    def combos(self) -> list[dict[str, int]]:
        """Every combination of the declared parameter space, in declaration order."""
        names = list(self.space)
        return [dict(zip(names, vals)) for vals in itertools.product(*(self.space[n] for n in names))]

    def default_params(self, arch: str | None = None) -> dict[str, int]:
        """The parameters a run uses when none are chosen: the first value of each, with
        the kernel file's ``[defaults]`` for ``arch`` over them (``"sm_90"`` or a compute
        capability ``"9.0"``; None: the portable first values)."""
        out = {name: vals[0] for name, vals in self.space.items()}
        out.update(self.arch_overrides(arch))
        return out

    def arch_overrides(self, arch: str | None) -> dict[str, int]:
        """The defaults that differ on ``arch``: its ``sm_Xx`` table, then its ``sm_XY``
        table over it (the most specific wins); empty when none applies."""
        name = arch_name(arch)
        if name is None or not self.arch_defaults:
            return {}
        major = ARCH_RE.match(name)[1]
        out: dict[str, int] = {}
        for key in (f"sm_{major}x", name):
            out.update(self.arch_defaults.get(key, {}))
        return {k: v for k, v in out.items() if v in self.space.get(k, ())}

    def output_shape(self, m: int, n: int, k: int) -> tuple[int, int]:
        return (m, m) if self.kind == "aat" else (m, n)

    def effective_n(self, m: int, n: int) -> int:
        """The N a record reports: aat kernels produce an M×M result whatever N was asked."""
        return m if self.kind == "aat" else n

    def defines(self, params: Params, dtype: str, out_dtype: str | None = None,
                layout: str = "kn") -> dict[str, str]:
        """Compile-time constants for this parameter choice and dtype: ``ELEM`` (the input
        type), ``ACC`` (what products are summed in) and, for the tensor-core types, ``OUT``
        (C's type: ``out_dtype`` among the input type's output choices, the first when None:
        float32 or the input type, BF16 or FP32 for FP8, int32 for int8)."""
        left = [name for name, v in params.items() if v == AUTO]
        if left:      # a build needs the shape's value: Variant.resolve first
            raise ValueError(f"{self.name}: {', '.join(left)} left to the shape (auto) "
                             "has no value until resolved at a shape")
        if dtype in HALF_DTYPES + FP8_DTYPES + INT8_DTYPES:
            if dtype not in self.dtypes:     # never a float32 kernel built for half words
                raise ValueError(f"{self.name}: its file takes {', '.join(self.dtypes)}, "
                                 f"not {dtype}")
            element = ElementType(dtype)
            choices = [str(t) for t in element.output_choices]     # the default first
            out = out_dtype or choices[0]
            if out not in choices:
                raise ValueError(f"{self.name}: {dtype} inputs write C as "
                                 f"{' or '.join(choices)}, not {out}")
            d = {"ELEM": TENSOR_CORE_C_TYPE[dtype],
                 "ACC": TENSOR_CORE_C_TYPE[str(element.accumulator)],
                 "OUT": TENSOR_CORE_C_TYPE[out]}
            d.update({name.upper(): str(int(v)) for name, v in params.items()})
            return self._with_layout(d, layout)
        if dtype not in DTYPES:      # FP8 needs kernels of its own
            raise ValueError(f"{self.name}: no kernel file builds for {dtype} (it takes "
                             f"{', '.join(KERNEL_DTYPES)})")
        d = {"ELEM": "float" if dtype == "float32" else "int",
             "ACC": "float" if dtype == "float32" else "unsigned"}
        d.update({name.upper(): str(int(v)) for name, v in params.items()})
        return self._with_layout(d, layout)

    def _with_layout(self, d: dict[str, str], layout: str) -> dict[str, str]:
        """``B_NK = 1`` for B as N×K (only then: a K×N build's defines stay as they were)."""
        if layout == "kn":
            return d
        if layout not in self.layouts:
            raise ValueError(f"{self.name} takes B as K×N only (layout kn), not {layout}")
        return {**d, "B_NK": "1"}

    @property
    def chosen(self) -> Mapping[str, Any]:
        """Parameters the shape picks when a run leaves them to it (``[chosen]`` of the
        kernel file): name → expression."""
        return self.headers[0].chosen if self.headers else {}

    def resolve(self, params: Params, m: int, n: int, k: int) -> dict[str, int]:
        """``params`` with every :data:`AUTO` value of a chosen parameter replaced by the
        value its ``[chosen]`` expression gives at the shape (M, N, K; SMS as the
        constraints see it). Other values, and parameters no expression picks, stay.
        Expressions are worked out in the file's order, each seeing the values chosen above
        it (``crows = "1 if bcopy == 2 and K <= 3072 else 0"`` below ``bcopy``'s rule)."""
        out = dict(params)
        pending = [name for name in self.chosen if out.get(name) == AUTO]
        for name in pending:
            env = self.headers[0].env(out, m, n, k)
            try:
                out[name] = int(self.chosen[name](env))
            except Exception:          # left auto: check says the expression gave no value
                pass
        return out

    def check(self, backend: str, params: Params, m: int, n: int, k: int, dtype: str,
              layout: str = "kn") -> str | None:
        """Why this run cannot happen, or None if it can (values left to the shape,
        :data:`AUTO`, are first resolved at ``m``, ``n``, ``k``)."""
        params = self.resolve(params, m, n, k)
        if backend not in self.sources:
            return f"{self.name} has no {backend} kernel"
        if dtype not in self.dtypes:
            return f"{self.name} does not support {dtype}"
        if layout not in self.layouts:
            return f"{self.name} takes B as K×N only (layout kn), not N×K"
        for name, val in params.items():
            if name not in self.space:
                return f"{self.name} has no parameter '{name}'"
            if val == AUTO:       # still auto after resolve: nothing picks it, or it failed
                if name not in self.chosen:
                    return f"{name} of {self.name} is not chosen by the shape (its file has no [chosen] {name})"
                return f"[chosen] {name} = \"{self.chosen[name].text}\" gives no value at {m}×{n}×{k}"
            if val not in self.space[name]:
                return f"{name}={val} is not in {self.name}'s parameter space {tuple(self.space[name])}"
        missing = set(self.space) - set(params)
        if missing:
            return f"missing parameter(s) {', '.join(sorted(missing))}"
        if min(m, n, k) < 1:
            return "every dimension must be at least 1"
        n_out = self.effective_n(m, n)
        if max(m * k, k * n, m * n_out) >= 2**31:
            return "a matrix with 2³¹ or more elements overflows the kernels' 32-bit indices"
        why = self.constraint(params, m, n, k, dtype)
        if why is None and self.headers:
            why = self._launch_problem(backend, params, m, n, k)
        return why

    def _launch_problem(self, backend: str, params: Params, m: int, n: int, k: int) -> str | None:
        """A launch no device takes (a kernel file's geometry): zero or negative sizes, and
        for CUDA more than 1024 threads per block or a grid past its limits."""
        (gx, gy), (bx, by) = self.geometry(params, m, n, k)
        if backend == "cpu" and self.is_triton and m * n * k > INTERPRETER_MAX_WORK:
            return (f"Triton's interpreter (the cpu backend) runs at most M·N·K = "
                    f"{INTERPRETER_MAX_WORK:,} ({m}×{n}×{k} is {m * n * k:,}): it is a check "
                    "of the kernel's arithmetic, not a speed")
        if min(gx, gy, bx, by) < 1:
            return f"the launch geometry grid ({gx}, {gy}), block ({bx}, {by}) has an empty side"
        if backend == "cuda":
            if bx * by > CUDA_MAX_THREADS:
                return (f"block ({bx}, {by}) is {bx * by} threads: a CUDA block has at most "
                        f"{CUDA_MAX_THREADS}")
            if gx > CUDA_MAX_GRID_X or gy > CUDA_MAX_GRID_Y:
                return (f"grid ({gx}, {gy}) is past CUDA's limits ({CUDA_MAX_GRID_X}, "
                        f"{CUDA_MAX_GRID_Y})")
        return None

    def label(self, params: Params) -> str:
        """Short display name, e.g. ``tiled[block=16]``."""
        return kernel_label(self.name, params)


def value_text(value: int) -> str:
    """A parameter value as written: ``auto`` for :data:`AUTO`, else the number."""
    return "auto" if value == AUTO else str(value)


def value_from_text(text: str) -> int:
    """Inverse of :func:`value_text`."""
    text = text.strip()
    return AUTO if text.lower() == "auto" else int(text)


def kernel_label(name: str, params: Params) -> str:
    """``tiled[block=16]`` (``name`` alone without parameters; :data:`AUTO` as ``auto``)."""
    return f"{name}[{params_to_str(params)}]" if params else name


def params_to_str(params: Params) -> str:
    """``{'ts': 32, 'wpt': 4}`` → ``'ts=32,wpt=4'`` (stable order; :data:`AUTO` as ``auto``)."""
    return ",".join(f"{k}={value_text(params[k])}" for k in params)


def params_from_str(text: str) -> dict[str, int]:
    """Inverse of :func:`params_to_str`; empty text gives ``{}``."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        key, _, val = part.partition("=")
        out[key.strip()] = value_from_text(val)
    return out


# --- library references (real code, not kernel files) ---------------------------------

def _one_launch(p: Params, m: int, n: int, k: int) -> Geometry:
    return (1, 1), (1, 1)               # the library (or numpy) picks its own


#: cuBLASLt's int8 GEMM in its regular (non-COL32) data order wants K, the leading dimension
#: of A and B in the TN form, a multiple of 4: cuBLASLt 13.1 on an H200 refused K = 1, 2, 3,
#: 6, 18, 253 and 254 with NOT_SUPPORTED, and ran K = 4 and 20, and any M and N (1, 3, 61,
#: 62, 63, 127), exactly.
CUBLASLT_INT8_MULTIPLE = 4


def cublaslt_int8_problem(m: int, n: int, k: int) -> str | None:
    """Why cuBLASLt's int8 GEMM cannot take M×N×K (its dimension rule), or None: such a
    shape is skipped with the reason, never run wrong."""
    if k % CUBLASLT_INT8_MULTIPLE == 0:
        return None
    return (f"cuBLASLt's int8 GEMM needs K (the leading dimension of A and B) to be a "
            f"multiple of {CUBLASLT_INT8_MULTIPLE}; here K = {k}")


#: Lines every kernel is compared with: cuBLAS (through nvmath-python on the engine's
#: context; skipped with the reason where nvmath or cuBLAS is missing) and the host's
#: numpy. ``sources`` names the routine.
REFERENCES: tuple[Variant, ...] = (
    Variant(name="cpu_numpy",
            technique="numpy.matmul on the host: the CPU row of the seed tables",
            summary="BLAS for float32; numpy's own loop for int32; int8 through float64 BLAS "
                    "(every sum exact), wrapped to int32.",
            seed="seed 000: the CPU row of the timing table",
            sources={"cpu": "numpy.matmul"}, space={}, geometry=_one_launch, role="seed",
            order=8, newcomer=frozenset({"cpu"}),
            # half and FP8 inputs: upcast to FP32 and multiplied there; int8 exactly
            # (engine.measure.backends.cpu)
            dtypes=DTYPES + HALF_DTYPES + FP8_DTYPES + INT8_DTYPES,
            layouts=("kn", "nk")),
    Variant(name="cublas_fp32",
            technique="cuBLAS SGEMM, strict FP32 (gemmEx, CUBLAS_COMPUTE_32F)",
            summary="Default math (strict FP32), called through nvmath-python on the engine's "
                    "own context and buffers.",
            seed="issue 4: the cuBLAS reference line", sources={"cuda": "gemmEx:32F"}, space={},
            geometry=_one_launch, dtypes=("float32",), layouts=("kn", "nk"), library="cublas",
            role="reference"),
    Variant(name="cublas_tf32",
            technique="cuBLAS with TF32 tensor cores (gemmEx, CUBLAS_COMPUTE_32F_FAST_TF32)",
            summary="FP32 storage and accumulation; the multiplies in TF32 on the tensor cores.",
            seed="issue 4: the cuBLAS reference line", sources={"cuda": "gemmEx:32F_FAST_TF32"},
            space={}, geometry=_one_launch, dtypes=("float32",), layouts=("kn", "nk"),
            library="cublas", precision="tf32", role="reference"),
    Variant(name="cublas_half",
            technique="cuBLAS FP16/BF16 on tensor cores (gemmEx, CUBLAS_COMPUTE_32F)",
            summary="A and B in the run's 16-bit type, FP32 accumulation, C in FP32 or the "
                    "input type (the run's output type); through nvmath-python on the "
                    "engine's own context and buffers.",
            seed="issue 39: cuBLAS reference lines per precision", sources={"cuda": "gemmEx:32F"},
            space={}, geometry=_one_launch, dtypes=HALF_DTYPES, layouts=("kn", "nk"),
            library="cublas", precision="half", role="reference"),
    Variant(name="cublaslt_fp8",
            technique="cuBLASLt FP8 GEMM on tensor cores (cublasLtMatmul, per-tensor scales)",
            summary="A and B in e4m3 (or one of them e5m2), B stored N×K (the TN form FP8 "
                    "takes), scales as device pointers, FP32 accumulation, C in BF16 or FP32; "
                    "through nvmath-python on the engine's own context and buffers.",
            seed="issue 39: cuBLASLt's FP8 reference line", sources={"cuda": "cublasLtMatmul:fp8"},
            space={}, geometry=_one_launch, dtypes=FP8_DTYPES, layouts=("kn", "nk"),
            constraint=lambda p, m, n, k, d: ("cuBLASLt multiplies no e5m2 by e5m2 (one operand "
                                              "must be e4m3)") if d == "float8_e5m2" else None,
            library="cublaslt", precision="fp8", role="reference"),
    Variant(name="cublaslt_int8",
            technique="cuBLASLt int8 GEMM on tensor cores (cublasLtMatmul, int32 sums and C)",
            summary="A and B in int8, B stored N×K (the TN form cuBLASLt's int8 GEMM takes), "
                    "CUBLAS_COMPUTE_32I with int32 alpha = 1 and beta = 0, C in int32: exact; "
                    "through nvmath-python on the engine's own context and buffers.",
            seed="issue 39: cuBLASLt's int8 reference line", sources={"cuda": "cublasLtMatmul:int8"},
            space={}, geometry=_one_launch, dtypes=INT8_DTYPES, layouts=("kn", "nk"),
            constraint=lambda p, m, n, k, d: cublaslt_int8_problem(m, n, k),
            library="cublaslt", precision="int8", role="reference"),
)


# --- kernel files ------------------------------------------------------------------------

#: Folders of the built-in kernels (``experiments``: kept and tested, not in default sweeps).
BUILTIN_DIRS = ("cuda/ladder", "cuda/lab", "cuda/experiments", "opencl", "opencl/experiments",
                "triton")
KERNEL_SUFFIXES = (".cu", ".cl", ".py")
#: The largest M·N·K a Triton kernel runs through Triton's interpreter on the cpu backend:
#: the interpreter runs each program's block operations in numpy, some seconds at this size.
INTERPRETER_MAX_WORK = 96**3


def resolved(path: Path | str) -> Path:
    """``path`` with its links followed as far as they go: never an error, even for a loop
    of links (``Path.resolve`` raises RuntimeError there), so one strange file in a folder
    cannot stop a listing."""
    try:
        return Path(os.path.realpath(path))
    except (OSError, ValueError):
        return Path(os.path.abspath(path))


def _model_count(e: Expr, env: Mapping[str, int], kind_count: int, what: str) -> int:
    """``[model]``'s ``flops`` or ``bytes`` at a shape, refused (ExpressionError) where it
    cannot be a count: below 1, or more than MODEL_FACTOR times ``kind_count``."""
    got = e.integer(env)
    shape = f"{env['M']}×{env['N']}×{env['K']}"
    if got < 1:
        raise ExpressionError(f"{e.where} = \"{shown_text(e.text, 60)}\" gives {got:,} at "
                              f"{shape}: a count of {what} must be at least 1")
    if got > MODEL_FACTOR * kind_count:
        raise ExpressionError(f"{e.where} = \"{shown_text(e.text, 60)}\" gives {got:,} at "
                              f"{shape}, more than {MODEL_FACTOR} times the {what} such a "
                              f"product can take ({kind_count:,}): not a count to report")
    return got


def _model(first: KernelHeader):
    """``(flops, bytes_moved, problem)`` of a header: the kind's counts where ``[model]``
    says nothing; ``problem(m, n, k, dtype)`` says why the model's counts are refused at a
    shape (a skip), and the counts are 0 there (no count: such an item never runs)."""
    kind_flops, kind_bytes = ((aat_flops, aat_bytes) if first.kind == "aat"
                              else (gemm_flops, gemm_bytes))
    fe, be = first.flops, first.bytes

    def flops_checked(m, n, k):
        if fe is None:
            return kind_flops(m, n, k)
        return _model_count(fe, {"M": m, "N": n, "K": k}, kind_flops(m, n, k), "operations")

    def bytes_checked(m, n, k, itemsize):
        if be is None:
            return kind_bytes(m, n, k, itemsize)
        # the most: both operands of every multiply read from memory, and the result
        limit = kind_flops(m, n, k) * itemsize + kind_bytes(m, n, k, itemsize)
        return _model_count(be, {"M": m, "N": n, "K": k, "itemsize": itemsize}, limit,
                            "bytes moved")

    def flops(m, n, k):
        try:
            return flops_checked(m, n, k)
        except ExpressionError:
            return 0

    def nbytes(m, n, k, itemsize):
        try:
            return bytes_checked(m, n, k, itemsize)
        except ExpressionError:
            return 0

    def problem(m, n, k, dtype) -> str | None:
        if fe is None and be is None:
            return None
        n_eff = m if first.kind == "aat" else n
        try:
            flops_checked(m, n_eff, k)
            bytes_checked(m, n_eff, k, ITEMSIZE.get(dtype, 4))
        except ExpressionError as exc:
            return str(exc)
        return None

    return flops, nbytes, problem


def variant_from_headers(headers: list[KernelHeader], role: str | None = None) -> Variant:
    """One variant from the headers of its files (one per backend; they must agree)."""
    first = next((h for h in headers if h.backend == "cuda"), headers[0])
    for h in headers:
        if h.semantics() != first.semantics():
            raise KernelFileError(h.path, h.first_line,
                                  f"'{h.name}' is also described by {first.path.name}, "
                                  "differently: its params, constraints, launch and model must match")
    def rel(p: Path) -> str:
        try:
            return str(resolved(p).relative_to(ROOT))
        except ValueError:
            return str(resolved(p))
    flops, nbytes, model_problem = _model(first)

    def constraint(params, m, n, k, dtype):
        return first.constraint(params, m, n, k, dtype) or model_problem(m, n, k, dtype)

    sources = {h.backend: rel(h.path) for h in headers}
    if first.is_triton:      # Triton's interpreter runs it on the host too
        sources["cpu"] = rel(first.path)
    return Variant(
        name=first.name, technique=first.title, seed=first.source,
        sources=sources, space=dict(first.space),
        geometry=first.geometry, constraint=constraint, kind=first.kind,
        dtypes=first.dtypes, layouts=first.layouts, flops=flops, bytes_moved=nbytes, entry=first.entry,
        precision=first.precision, role=role or first.role, order=first.order,
        dynamic_shared=first.shared_bytes if first.shared is not None else None,
        arch_suffix=first.arch_suffix, prepass=first.prepass, headers=tuple(headers),
        workspace=first.workspace_bytes if first.workspace is not None else None,
        arch_defaults=_merged_defaults(headers, first),
        newcomer=frozenset(h.backend for h in headers if h.newcomer),
        summary=next((h.summary for h in headers if h.summary), ""),
        descriptions={k: v for h in reversed(headers) for k, v in h.descriptions.items()})


def _merged_defaults(headers: list[KernelHeader], first: KernelHeader) -> dict[str, dict[str, int]]:
    """The ``[defaults]`` of a variant's files: the CUDA file's win where both name one."""
    out: dict[str, dict[str, int]] = {}
    for h in [*(h for h in headers if h is not first), first]:
        for arch, table in h.arch_defaults.items():
            out.setdefault(arch, {}).update(table)
    return out


def read_kernel_files(paths: list[Path], role: str | None = None,
                      texts: Mapping[str, str] | None = None
                      ) -> tuple[list[Variant], list[KernelFileError]]:
    """Variants of the kernel files ``paths`` (same-named .cu and .cl files make one),
    and the problems of the files that could not be used (each with its file and line).
    ``texts``: path → the file's text as a run read it (not read again)."""
    problems: list[KernelFileError] = []
    by_name: dict[str, list[KernelHeader]] = {}
    for path in paths:
        try:
            h = parse_header(path, (texts or {}).get(str(path)))
        except KernelFileError as exc:
            problems.append(exc)
            continue
        except Exception as exc:  # noqa: BLE001  (a bug of the parser stops this file only)
            problems.append(_unexpected(path, exc))
            continue
        group = by_name.setdefault(h.name, [])
        clash = next((g for g in group if g.backend == h.backend), None)
        if clash is not None:
            problems.append(KernelFileError(path, h.first_line,
                                            f"name '{h.name}' is taken by {clash.path}"))
            continue
        group.append(h)
    out = []
    for headers in by_name.values():
        try:
            out.append(variant_from_headers(headers, role))
        except KernelFileError as exc:
            problems.append(exc)
            out.append(variant_from_headers(headers[:1], role))
        except Exception as exc:  # noqa: BLE001  (as above: these files only)
            problems.extend(_unexpected(h.path, exc) for h in headers)
    return out, problems


def _unexpected(path: Path, exc: BaseException) -> KernelFileError:
    """A failure no check foresaw, as the file's own problem (one short line)."""
    what = shown_text(exc, 120)
    return KernelFileError(path, None, f"could not be read: {type(exc).__name__}"
                                       + (f": {what}" if what else ""))


def kernel_files_in(folder: Path) -> list[Path]:
    """The ``.cu`` and ``.cl`` entries directly in ``folder``, sorted (none if it is
    missing or cannot be listed). Whatever they are (a folder named ``x.cu``, a pipe, a
    link that leads nowhere): the reader says what is wrong with each, rather than a kernel
    file vanishing without a word. Hidden names (``.#x.cu``: an editor's lock) are left out."""
    try:
        return sorted(p for p in Path(folder).iterdir()
                      if p.suffix in KERNEL_SUFFIXES and not p.name.startswith(".")
                      and p.name != "__init__.py")
    except (OSError, ValueError):
        return []


_ROLE_RANK = {"baseline": 0, "seed": 0, "dispatch": 1, "reference": 1, "rung": 2, "experiment": 3,
              "user": 4}


def _sort_key(v: Variant) -> tuple:
    order = v.order if v.order is not None else 10**6
    return (_ROLE_RANK.get(v.role, 4), 0 if v.role != "reference" else 1, order, v.name)


REGISTRY: dict[str, Variant] = {}
#: Problems of built-in kernel files (a test asserts there are none).
BUILTIN_PROBLEMS: list[str] = []


def _load_builtins() -> None:
    found, problems = read_kernel_files([p for d in BUILTIN_DIRS for p in kernel_files_in(ROOT / d)])
    tables, bad = dispatch_table.builtin_tables(ROOT)
    BUILTIN_PROBLEMS[:] = map(str, [*problems, *bad])
    for v in sorted([*REFERENCES, *found, *map(dispatch_variant, tables)], key=_sort_key):
        REGISTRY[v.name] = v
    for v in [v for v in REGISTRY.values() if v.dispatch is not None]:
        REGISTRY[v.name] = _checked_table(v)


# --- dispatch variants: the lab's own GEMM (engine.kernels.dispatch_table) --------------------

def dispatch_variant(table: dispatch_table.DispatchTable) -> Variant:
    """The variant of role ``dispatch`` of a table: no kernel of its own; its constraint is
    the picked kernel's at the shape (or the table's problem: listed, never run)."""
    def constraint(params, m, n, k, dtype):
        try:
            r = route(table.name, m, n, k)
        except dispatch_table.DispatchError as exc:
            return str(exc)
        why = get(r.variant).check(table.backend, r.params, m, n, k, dtype)
        return f"{kernel_label(r.variant, r.params)} (its pick): {why}" if why else None

    return Variant(name=table.name, technique=table.title or f"the lab's own {table.precision} GEMM",
                   seed=f"the dispatch table {_rel(table.path)}", sources={table.backend: _rel(table.path)},
                   space={}, geometry=_one_launch, constraint=constraint, dtypes=table.dtypes,
                   layouts=table.layouts, precision=table.precision, role="dispatch",
                   summary=table.summary, dispatch=table)


def _rel(path: Path) -> str:
    try:
        return str(resolved(path).relative_to(ROOT))
    except ValueError:
        return str(path)


def _checked_table(v: Variant) -> Variant:
    """``v`` with its table marked unusable where a rule names no kernel of its backend (or
    another dispatch line) or a parameter that kernel lacks."""
    t = v.dispatch
    for rule in () if t.problem else t.rules:
        target = REGISTRY.get(rule.variant)
        if target is None or target.dispatch is not None or t.backend not in target.sources:
            why = f"'{rule.variant}' is no {t.backend} kernel"
        elif set(t.dtypes) - set(target.dtypes) or set(t.layouts) - set(target.layouts):
            # the line promises every type and layout at every shape: each pick must take them
            lacks = sorted(set(t.dtypes) - set(target.dtypes)) or \
                [f"B as {'N×K' if x == 'nk' else 'K×N'}" for x in sorted(set(t.layouts) - set(target.layouts))]
            why = f"{rule.variant} does not take {', '.join(lacks)}, which [{t.name}] promises"
        else:
            # a number is checked here; an expression's value where it is routed (route())
            why = next((f"{rule.variant} has no parameter '{p}'" if p not in target.space else
                        f"{p}={x} is not among {rule.variant}'s values {tuple(target.space[p])}"
                        for p, x in rule.params.items() if p not in target.space
                        or (isinstance(x, int) and x not in target.space[p])), None)
        if why:
            bad = dataclasses.replace(t, problem=f"{rule.where}: {why}")
            return dataclasses.replace(v, dispatch=bad)
    return v


def route(name: str, m: int, n: int, k: int, sms: int | None = None,
          arch: str | None = None) -> dispatch_table.Route:
    """The kernel and parameters the dispatch variant ``name`` runs at M×N×K (``sms``,
    ``arch``: the device's, where known): the first rule that applies, the parameters it
    leaves out at the kernel's [chosen] value there, else its default for ``arch``.
    DispatchError says why there is none."""
    table = get(name).dispatch
    if table is None:
        raise dispatch_table.DispatchError(f"{name} is not a dispatch variant")
    rule = table.rule_at(m, n, k, sms)
    target = REGISTRY.get(rule.variant)
    if target is None or target.dispatch is not None:
        raise dispatch_table.DispatchError(f"{rule.where}: '{rule.variant}' is no kernel")
    values = rule.values(m, n, k, sms)
    for p, x in values.items():
        if x not in target.space.get(p, ()):
            raise dispatch_table.DispatchError(
                f"{rule.where}: {p} = \"{getattr(rule.params[p], 'text', x)}\" gives {x} at {m}×{n}×{k}, not among "
                f"{rule.variant}'s values {tuple(target.space.get(p, ()))}")
    params = target.default_params(arch)
    params.update({p: AUTO for p in target.chosen})
    params.update(values)
    return dispatch_table.Route(target.name, target.resolve(params, m, n, k), rule)


def concrete(name: str, params: Params, m: int, n: int, k: int, sms: int | None = None,
             arch: str | None = None, dtype: str | None = None,
             layout: str = "kn") -> tuple[str, dict[str, int]]:
    """What an item runs at a shape: ``(name, params)`` with the values left to the shape
    resolved, or, for a dispatch variant, the kernel its table picks (itself where the table
    picks none, or where the line does not take ``dtype`` or ``layout``: its check says
    why; its pick may take types the line does not promise)."""
    v = get(name)
    if v.dispatch is None:
        return name, v.resolve(params, m, n, k)
    if (dtype is not None and dtype not in v.dtypes) or layout not in v.layouts:
        return name, dict(params)
    try:
        r = route(name, m, n, k, sms, arch)
    except dispatch_table.DispatchError:
        return name, dict(params)
    return r.variant, dict(r.params)


def is_builtin_file(path: Path | str) -> bool:
    """Whether ``path`` is one of the lab's own kernel files (never a user kernel)."""
    folder = Path(path).resolve().parent
    return any(folder == (ROOT / d).resolve() for d in BUILTIN_DIRS)


def register(v: Variant) -> Variant:
    if v.name in REGISTRY:
        raise ValueError(f"variant {v.name} registered twice")
    REGISTRY[v.name] = v
    return v


def load_kernel_files(paths, role: str = "user", texts: Mapping[str, str] | None = None
                      ) -> tuple[list[str], list[str]]:
    """Register the user's kernel files (or every kernel file of a folder among ``paths``).

    Returns the names registered and the problems (``path:line: message``). A file read
    again replaces its own earlier variant; a name that a built-in (or another file)
    already has is refused.
    """
    names, errors = register_kernel_files(paths, role, texts)
    return names, [str(e) for e in errors]


def register_kernel_files(paths, role: str = "user", texts: Mapping[str, str] | None = None
                          ) -> tuple[list[str], list[KernelFileError]]:
    """:func:`load_kernel_files` with each problem a :class:`KernelFileError` (its
    ``path``, ``line`` and ``message`` apart, for a window that shows them by file).
    ``texts`` (path → text, as a run read the files): those files are not read again."""
    files: list[Path] = []
    for p in map(Path, paths):
        # a folder named x.cu is a kernel file that cannot be read (and says so), not a folder
        files.extend(kernel_files_in(p) if str(p) not in (texts or {}) and p.is_dir()
                     and p.suffix not in KERNEL_SUFFIXES else [p])
    found, problems = read_kernel_files(files, role, texts)
    names = []
    for v in found:
        old = REGISTRY.get(v.name)
        mine = {resolved(h.path) for h in v.headers}
        if old is not None and not ({resolved(h.path) for h in old.headers} & mine):
            where = ", ".join(sorted(str(Path(s)) for s in old.sources.values()))
            problems.append(KernelFileError(v.headers[0].path, v.headers[0].first_line,
                                            f"the name '{v.name}' is taken by {where}; give "
                                            "the kernel another name"))
            continue
        REGISTRY[v.name] = v
        names.append(v.name)
    return names, problems


def variants_for(backend: str) -> list[Variant]:
    """Variants that have a kernel for ``backend``, in registry order."""
    return [v for v in REGISTRY.values() if backend in v.sources]


def default_variants(backend: str) -> list[Variant]:
    """What a sweep runs when no variant is named: all but the experiments (and on the cpu
    backend no Triton kernel: its interpreter runs only small shapes, when named)."""
    return [v for v in variants_for(backend) if v.role != "experiment"
            and not (backend == "cpu" and v.is_triton)]


class Ticks(str, Enum):
    """Which variants the window ticks before the user chooses one way or the other."""

    #: A short first run: the kernel files' ``newcomer = true`` on the backend, the
    #: library lines, a dispatch line and the user's own kernels (:data:`NEWCOMER_ROLES`).
    NEWCOMER = "newcomer"
    #: Every variant but the experiments: what settings saved before the newcomer
    #: defaults saw, so that their choices stay as they were.
    ALL = "all"


#: Roles ticked at first start whatever the kernel files say: the library lines (cuBLAS),
#: a dispatch line (one variant per precision that picks kernel and parameters by shape)
#: and the user's own kernel files.
NEWCOMER_ROLES = ("reference", "dispatch", "user")


def takes_scale(variant: "Variant") -> bool:
    """An FP8 kernel (its file declares FP8 types) takes scale_a·scale_b, a float, after
    M, N, K: the CUDA C entry's argument and the Triton kernel's ``scale`` alike."""
    return any(d in FP8_DTYPES for d in variant.dtypes)


def ticked_by_default(v: Variant, backend: str, ticks: Ticks = Ticks.NEWCOMER,
                      arch: str | None = None, dtype: str = "float32") -> bool:
    """Whether the window ticks ``v`` on ``backend`` before the user chooses: with
    :attr:`Ticks.NEWCOMER` a variant of :data:`NEWCOMER_ROLES` or one whose file on
    ``backend`` says ``newcomer = true``, unless it cannot build for the device's
    architecture ``arch`` (wgmma on a GPU other than sm_90: a skip, not a curve) or does
    not take the run's input type ``dtype`` (BF16 chosen: the FP32 lines would be skips,
    the 16-bit dispatch line and cuBLAS's are the run)."""
    if v.role == "experiment":
        return False
    if ticks is Ticks.ALL:
        return True
    if not builds_for(v, arch) or dtype not in v.dtypes:
        return False
    return v.role in NEWCOMER_ROLES or backend in v.newcomer


def builds_for(v: Variant, arch: str | None) -> bool:
    """Whether ``v`` builds for a CUDA device of ``arch`` (None: not known, taken as yes):
    a kernel with an ``arch_suffix`` (sm_90a: wgmma) only for sm_90, as
    :func:`engine.measure.backends.cuda.target_arch` builds it."""
    return not v.arch_suffix or arch_name(arch) in (None, "sm_90")


def get(name: str) -> Variant:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown variant '{name}'; known: {', '.join(REGISTRY)}") from None


def role_of(name: str) -> str:
    """A variant's role; ``user`` for a name the registry does not know (a results file's)."""
    v = REGISTRY.get(name)
    return v.role if v is not None else "user"


def baseline_name() -> str:
    """The variant speed-ups are measured against (the ``baseline`` role: naive)."""
    return next((v.name for v in REGISTRY.values() if v.role == "baseline"), "naive")


def references_by_precision() -> dict[str, str]:
    """precision → the library reference line of that arithmetic (``fp32`` → cublas_fp32)."""
    out: dict[str, str] = {}
    for v in REGISTRY.values():
        if v.role == "reference":
            out.setdefault(v.precision, v.name)
    return out


def best_rung(backend: str, precision: str = "fp32", kind: str = "gemm") -> str | None:
    """The highest rung of ``precision`` for problems of ``kind`` taught on ``backend``
    (the seeds' best where the backend has no ladder): what a new kernel is compared
    with by default."""
    for roles in (("rung",), ("seed",), ("baseline",)):
        # the Triton rungs stand beside the ladder ("what a Triton user gets"), not atop it
        pool = [v for v in variants_for(backend) if v.role in roles and v.precision == precision
                and v.kind == kind and not v.is_triton]
        if pool:
            return max(pool, key=lambda v: (v.order if v.order is not None else -1, v.name)).name
    return None


def dispatch_for(backend: str, precision: str = "fp32", kind: str = "gemm") -> str | None:
    """The lab's own GEMM of ``precision`` on ``backend`` (its dispatch line), if any."""
    return next((v.name for v in variants_for(backend) if v.role == "dispatch"
                 and v.precision == precision and v.kind == kind), None)


def reference_for(backend: str, precision: str = "fp32", kind: str = "gemm") -> str | None:
    """The library line of ``precision`` on ``backend`` (cuBLAS on CUDA), if any."""
    return next((v.name for v in variants_for(backend) if v.role == "reference"
                 and v.precision == precision and v.kind == kind), None)


def ladder_names(include_experiments: bool = False) -> list[str]:
    """The ladder's rungs in the order they are taught (and the experiments, if asked)."""
    roles = ("rung", "experiment") if include_experiments else ("rung",)
    return [v.name for v in sorted((v for v in REGISTRY.values() if v.role in roles
                                    and not v.is_triton), key=_sort_key)]


def iter_plan_params(variant: Variant, overrides: Mapping[str, tuple[int, ...]] | None = None
                     ) -> Iterator[dict[str, int]]:
    """Combinations of ``variant``'s space, with ``overrides`` restricting named parameters.

    A parameter the shape picks (``[chosen]``) and ``overrides`` does not name is left to
    the shape (:data:`AUTO`), not swept. Values in ``overrides`` that are not in the space
    are kept, so that :meth:`Variant.check` reports them as skipped with a reason.
    """
    overrides = overrides or {}
    names = list(variant.space)
    pools = [tuple(overrides[n]) if n in overrides
             else (AUTO,) if n in variant.chosen else tuple(variant.space[n]) for n in names]
    for vals in itertools.product(*pools):
        yield dict(zip(names, vals))


_load_builtins()
