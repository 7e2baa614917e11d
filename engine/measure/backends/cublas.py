"""cuBLAS reference lines for the cuda backend, through nvmath-python's raw bindings.

The handle is created lazily on the engine thread, inside the pycuda context that the
cuda backend made current there (cuBLAS uses the runtime API, which adopts the current
driver context), and destroyed by :meth:`CublasGemm.close` before that context is
popped. Matrices stay in pycuda's device buffers: only their addresses are passed.

Row-major ``C = A·B`` through column-major cuBLAS: a row-major M×N matrix is a
column-major N×M one, so we ask for ``Cᵀ = Bᵀ·Aᵀ``: gemmEx with (m, n, k) = (N, M, K),
B first (ld N), then A (ld K), C with ld N, no transposes.

Routines (``Variant.sources["cuda"]`` when ``Variant.library == "cublas"``):

* ``gemmEx:32F``            strict FP32 (CUBLAS_COMPUTE_32F, default math mode);
* ``gemmEx:32F_FAST_TF32``  TF32 tensor cores, FP32 accumulate and storage.

cuBLASLt's lines (``Variant.library == "cublaslt"``; :class:`CublasLt`): FP8
(``cublasLtMatmul:fp8``) and int8 (``cublasLtMatmul:int8``: CUDA_R_8I inputs,
CUBLAS_COMPUTE_32I, int32 alpha/beta and C), both in the TN form (B as N×K).

The data types follow the run (:func:`data_types`): float32 everywhere, or A and B in
FP16/BF16 (CUDA_R_16F / CUDA_R_16BF) with C in FP32 or the input type. With 16-bit inputs
``gemmEx:32F`` is cuBLAS's FP16/BF16 GEMM on tensor cores with FP32 accumulation (the
compute type CUBLAS_COMPUTE_32F; alpha and beta stay float32), as cuBLAS documents for
gemmEx.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.common.dtypes import ElementType
from engine.measure.backends.base import BackendError

#: cudaDataType_t values (library_types.h): CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF
CUDA_R_32F = 0
CUDA_R_16F = 2
CUDA_R_16BF = 14
#: The cudaDataType_t of each element type a cuBLAS line takes.
DATA_TYPE = {"float32": CUDA_R_32F, "float16": CUDA_R_16F, "bfloat16": CUDA_R_16BF}


def data_types(dtype: str, out_dtype: str | None = None) -> tuple[int, int]:
    """(A and B's cudaDataType_t, C's) for ``dtype`` inputs and C in ``out_dtype`` (None:
    the input type); BackendError for a pair gemmEx with FP32 compute does not take."""
    out = out_dtype or dtype
    if dtype not in DATA_TYPE or out not in (dtype, "float32"):
        raise BackendError(f"no cuBLAS gemmEx line here takes {dtype} inputs with a {out} C")
    return DATA_TYPE[dtype], DATA_TYPE[out]


class LibraryUnavailable(BackendError):
    """The library is not installed or cannot load here: the run is skipped, not failed."""

    skip = True


def _import_binding(name: str, what: str, library: str):
    """nvmath-python's raw bindings ``nvmath.bindings.<name>``; LibraryUnavailable (a skip)
    where nvmath or the library is missing."""
    import importlib  # noqa: PLC0415
    try:
        return importlib.import_module(f"nvmath.bindings.{name}")
    except ImportError as exc:
        raise LibraryUnavailable(f"{what} needs nvmath-python (nvmath.bindings.{name}): {exc}") from None
    except Exception as exc:  # noqa: BLE001  (libcublas missing, wrong CUDA, ...)
        raise LibraryUnavailable(f"{library} cannot load: {exc}") from None


def _import_cublas():
    return _import_binding("cublas", "cuBLAS reference", "cuBLAS")


class CublasGemm:
    """One cuBLAS handle, made on first use in the current (pycuda) context."""

    ROUTINES = ("gemmEx:32F", "gemmEx:32F_FAST_TF32")

    def __init__(self):
        self.lib = None
        self.handle = None
        self._alpha = np.ones(1, dtype=np.float32)
        self._beta = np.zeros(1, dtype=np.float32)
        self.version = None

    def ensure(self):
        if self.handle is None:
            lib = _import_cublas()
            try:
                handle = lib.create()
            except Exception as exc:  # noqa: BLE001
                raise LibraryUnavailable(f"cublasCreate failed: {exc}") from None
            try:
                lib.set_stream(handle, 0)  # the legacy default stream, as pycuda's events
                lib.set_math_mode(handle, int(lib.Math.DEFAULT_MATH))
                self.version = lib.get_version(handle)
            except Exception as exc:  # noqa: BLE001
                lib.destroy(handle)
                raise BackendError(f"configuring the cuBLAS handle failed: {exc}") from None
            self.lib, self.handle = lib, handle
        return self

    def compute_type(self, routine: str) -> int:
        if routine not in self.ROUTINES:
            raise BackendError(f"unknown cuBLAS routine '{routine}' (known: {', '.join(self.ROUTINES)})")
        ct = self.lib.ComputeType
        return int(ct.COMPUTE_32F_FAST_TF32 if routine.endswith("TF32") else ct.COMPUTE_32F)

    def gemm(self, routine: str, a_ptr: int, b_ptr: int, c_ptr: int, m: int, n: int, k: int,
             ab_type: int = CUDA_R_32F, c_type: int = CUDA_R_32F, b_nk: bool = False) -> None:
        """Row-major C (m×n) = A (m×k) · B (k×n) on the default stream; A and B of
        ``ab_type``, C of ``c_type`` (:func:`data_types`), float32 unless said. ``b_nk``: B
        is stored N×K (row-major), which column-major cuBLAS reads as Bᵀ's transpose."""
        lib = self.lib
        op_n = int(lib.Operation.N)
        # Cᵀ (n×m) = Bᵀ·Aᵀ column-major: B K×N row-major is Bᵀ as it lies (op N, ld n);
        # B N×K row-major is B column-major, transposed by cuBLAS (op T, ld k)
        op_b, ldb = (int(lib.Operation.T), k) if b_nk else (op_n, n)
        try:
            lib.gemm_ex(self.handle, op_b, op_n, n, m, k,
                        self._alpha.ctypes.data, int(b_ptr), ab_type, ldb,
                        int(a_ptr), ab_type, k,
                        self._beta.ctypes.data, int(c_ptr), c_type, n,
                        self.compute_type(routine), int(lib.GemmAlgo.DEFAULT))
        except BackendError:
            raise
        except Exception as exc:  # noqa: BLE001  (cuBLASError with the status name)
            raise BackendError(f"cublasGemmEx ({routine}) failed: {exc}") from None

    def describe(self, routine: str, ab_type: int = CUDA_R_32F, c_type: int = CUDA_R_32F) -> str:
        ver = f"cuBLAS {self.version}" if self.version else "cuBLAS"
        names = {v: k for k, v in DATA_TYPE.items()}
        types = "" if (ab_type, c_type) == (CUDA_R_32F, CUDA_R_32F) else \
            f", A and B {names.get(ab_type, ab_type)}, C {names.get(c_type, c_type)}"
        return (f"{ver} gemmEx, compute type {routine.split(':', 1)[1]}{types}, "
                "row-major via Cᵀ = Bᵀ·Aᵀ")

    def close(self) -> None:
        if self.handle is not None:
            try:
                self.lib.destroy(self.handle)
            finally:
                self.handle = None


# --- cuBLASLt's FP8 and int8 GEMMs --------------------------------------------------------

#: cudaDataType_t of the FP8 inputs (library_types.h: CUDA_R_8F_E4M3, CUDA_R_8F_E5M2)
FP8_DATA_TYPE = {"float8_e4m3": 28, "float8_e5m2": 29}
#: cudaDataType_t CUDA_R_8I (int8 A and B) and CUDA_R_32I (int32 C, alpha and beta)
CUDA_R_8I = 3
CUDA_R_32I = 10
#: cublasComputeType_t CUBLAS_COMPUTE_32F and CUBLAS_COMPUTE_32I
COMPUTE_32F = 68
COMPUTE_32I = 72
#: Workspace cuBLASLt may use (its heuristics are asked for algorithms within it).
LT_WORKSPACE_BYTES = 32 * 2**20


@dataclass(frozen=True)
class LtTypes:
    """The types of one cuBLASLt GEMM: A and B's and C's cudaDataType_t, the compute type and
    alpha and beta's type (the descriptor's scale type)."""

    ab: int
    c: int
    compute: int = COMPUTE_32F
    scale: int = CUDA_R_32F

    @property
    def integer(self) -> bool:
        """int32 sums, alpha and beta (int8 inputs)."""
        return self.compute == COMPUTE_32I

    @property
    def family(self) -> str:
        return "int8" if self.integer else "FP8"


#: cudaDataType_t of every type cuBLASLt's lines read or write.
LT_DATA_TYPE = {**DATA_TYPE, **FP8_DATA_TYPE, "int8": CUDA_R_8I, "int32": CUDA_R_32I}


def lt_types(dtype: str, out_dtype: str | None = None) -> LtTypes:
    """The cuBLASLt types of a run of ``dtype`` inputs with C in ``out_dtype`` (None: the
    input type's default): FP8 with FP32 sums, C in BF16 or FP32; int8 with int32 sums,
    alpha and beta, C in int32 (the types' own output choices). BackendError for any other
    pair: never run in another type."""
    if dtype not in FP8_DATA_TYPE and dtype != "int8":
        raise BackendError(f"no cuBLASLt line here takes {dtype} inputs")
    element = ElementType(dtype)
    choices = [str(t) for t in element.output_choices]      # the default first
    out = out_dtype or choices[0]
    family = "int8" if element.is_integer else "FP8"
    if out not in choices:
        raise BackendError(f"cuBLASLt's {family} line writes C as {' or '.join(choices)}, "
                           f"not {out}")
    sums = (COMPUTE_32I, CUDA_R_32I) if element.is_integer else (COMPUTE_32F, CUDA_R_32F)
    return LtTypes(LT_DATA_TYPE[dtype], LT_DATA_TYPE[out], *sums)


#: Names of the cudaDataType_t values the lines use, for their descriptions.
_TYPE_NAMES = {v: k for k, v in LT_DATA_TYPE.items()}


class NoLtAlgorithm(BackendError):
    """cuBLASLt offers no algorithm for this problem in these types: a skip, saying so."""

    skip = True


class CublasLt:
    """cuBLASLt's GEMM (``cublasLtMatmul``) on the engine's buffers, for the FP8 and int8
    lines: one handle, made on first use in the current (pycuda) context, and per problem
    (shape and :class:`LtTypes`) a descriptor, matrix layouts and the heuristic's algorithm,
    made once.

    Row-major C (M×N) = alpha·A (M×K)·B with B stored N×K, as column-major cuBLASLt sees
    it: D (N×M, ld N) = op(Bᵀ) · A with the first operand our B (K×N column-major, ld K,
    TRANSA = T) and the second our A (K×M column-major, ld K, TRANSB = N): the "TN" form
    both FP8 and int8 (in the regular, non-COL32 order) require; beta is 0.

    FP8: alpha is the scales' product (on an H200 every algorithm cuBLASLt 13 offered failed
    with NOT_SUPPORTED once the operands' scale pointers were set, and ran without them);
    FP32 accumulation (CUBLAS_COMPUTE_32F) without fast accumulation; D in BF16 or FP32, C
    the same. int8: CUBLAS_COMPUTE_32I with int32 alpha = 1 and beta = 0, D and C in int32:
    exact (the sums wrap modulo 2³² as the lab's int32 kernels do)."""

    def __init__(self):
        self.lib = None
        self.handle = None
        self.version = None
        self._alpha = np.ones(1, dtype=np.float32)
        self._beta = np.zeros(1, dtype=np.float32)
        self._alpha_int = np.ones(1, dtype=np.int32)      # int8: C = 1·A·B + 0·C, in int32
        self._beta_int = np.zeros(1, dtype=np.int32)
        self._plans: dict[tuple, tuple] = {}

    def ensure(self):
        if self.handle is None:
            lib = _import_binding("cublasLt", "cuBLASLt's FP8 and int8 lines", "cuBLASLt")
            try:
                self.handle = lib.create()
                self.version = lib.get_version()
            except Exception as exc:  # noqa: BLE001
                raise LibraryUnavailable(f"cublasLtCreate failed: {exc}") from None
            self.lib = lib
        return self

    def _set(self, setter, obj, attr, value: np.ndarray) -> None:
        setter(obj, int(attr), value.ctypes.data, value.nbytes)

    def _plan(self, m: int, n: int, k: int, types: LtTypes, workspace_bytes: int) -> tuple:
        key = (m, n, k, types, workspace_bytes)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        lib = self.lib
        desc = lib.matmul_desc_create(types.compute, types.scale)
        made = [(lib.matmul_desc_destroy, desc)]
        try:
            attr = lib.MatmulDescAttribute
            # cublasOperation_t: CUBLAS_OP_N = 0, CUBLAS_OP_T = 1
            self._set(lib.matmul_desc_set_attribute, desc, attr.TRANSA, np.array([1], dtype=np.int32))
            self._set(lib.matmul_desc_set_attribute, desc, attr.TRANSB, np.array([0], dtype=np.int32))
            a_l = lib.matrix_layout_create(types.ab, k, n, k)
            made.append((lib.matrix_layout_destroy, a_l))
            b_l = lib.matrix_layout_create(types.ab, k, m, k)
            made.append((lib.matrix_layout_destroy, b_l))
            c_l = lib.matrix_layout_create(types.c, n, m, n)
            made.append((lib.matrix_layout_destroy, c_l))
            pref = lib.matmul_preference_create()
            made.append((lib.matmul_preference_destroy, pref))
            self._set(lib.matmul_preference_set_attribute, pref,
                      lib.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
                      np.array([workspace_bytes], dtype=np.uint64))
            found = lib.MatmulHeuristicResult(1)
            count = np.zeros(1, dtype=np.int32)
            lib.matmul_algo_get_heuristic(self.handle, desc, a_l, b_l, c_l, c_l, pref, 1,
                                          found.ptr, count.ctypes.data)
        except Exception as exc:  # noqa: BLE001
            for destroy, obj in reversed(made):
                destroy(obj)
            raise NoLtAlgorithm(f"cuBLASLt offers no {types.family} GEMM for {m}×{n}×{k}: {exc}") from None
        if int(count[0]) == 0:
            for destroy, obj in reversed(made):
                destroy(obj)
            raise NoLtAlgorithm(f"cuBLASLt's heuristic found no {types.family} algorithm for {m}×{n}×{k}")
        plan = self._plans[key] = (desc, a_l, b_l, c_l, found, made)
        return plan

    def gemm(self, a_ptr: int, b_ptr: int, c_ptr: int, m: int, n: int, k: int, types: LtTypes,
             scale: float, workspace: int, workspace_bytes: int) -> None:
        """Row-major C = scale·A·B (FP8: scale = scale_a·scale_b; int8: 1), B stored N×K,
        on the default stream."""
        desc, a_l, b_l, c_l, found, _made = self._plan(m, n, k, types, workspace_bytes)
        if types.integer:
            if scale != 1.0:      # an int32 alpha cannot carry FP8's scales: never dropped
                raise BackendError(f"cuBLASLt's int8 line takes no scale (got {scale})")
            alpha, beta = self._alpha_int, self._beta_int
        else:
            self._alpha[0] = scale
            alpha, beta = self._alpha, self._beta
        try:
            self.lib.matmul(self.handle, desc, alpha.ctypes.data, int(b_ptr), a_l,
                            int(a_ptr), b_l, beta.ctypes.data, int(c_ptr), c_l,
                            int(c_ptr), c_l, found.ptr, int(workspace), workspace_bytes, 0)
        except Exception as exc:  # noqa: BLE001
            raise BackendError(f"cublasLtMatmul ({types.family}) failed: {exc}") from None

    def describe(self, types: LtTypes) -> str:
        ver = f"cuBLASLt {self.version}" if self.version else "cuBLASLt"
        ab, c = _TYPE_NAMES.get(types.ab, types.ab), _TYPE_NAMES.get(types.c, types.c)
        if types.integer:
            return (f"{ver} matmul, A and B {ab}, C {c}, int32 accumulation (COMPUTE_32I, "
                    "alpha 1, beta 0), TN (B as N×K)")
        return (f"{ver} matmul, A and B {ab}, alpha = their scales' product, "
                f"C {c}, FP32 accumulation, TN (B as N×K)")

    def close(self) -> None:
        for *_objs, made in self._plans.values():
            for destroy, obj in reversed(made):
                try:
                    destroy(obj)
                except Exception:  # noqa: BLE001
                    pass
        self._plans = {}
        if self.handle is not None:
            try:
                self.lib.destroy(self.handle)
            finally:
                self.handle = None
