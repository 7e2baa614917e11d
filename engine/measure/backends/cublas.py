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
"""
from __future__ import annotations

import numpy as np

from engine.measure.backends.base import BackendError

#: cudaDataType_t CUDA_R_32F
CUDA_R_32F = 0


class LibraryUnavailable(BackendError):
    """The library is not installed or cannot load here: the run is skipped, not failed."""

    skip = True


def _import_cublas():
    try:
        from nvmath.bindings import cublas  # noqa: PLC0415
    except ImportError as exc:
        raise LibraryUnavailable(
            f"cuBLAS reference needs nvmath-python (nvmath.bindings.cublas): {exc}") from None
    except Exception as exc:  # noqa: BLE001  (libcublas missing, wrong CUDA, ...)
        raise LibraryUnavailable(f"cuBLAS cannot load: {exc}") from None
    return cublas


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

    def gemm(self, routine: str, a_ptr: int, b_ptr: int, c_ptr: int, m: int, n: int, k: int) -> None:
        """Row-major C (m×n) = A (m×k) · B (k×n), all float32, on the default stream."""
        lib = self.lib
        op_n = int(lib.Operation.N)
        try:
            lib.gemm_ex(self.handle, op_n, op_n, n, m, k,
                        self._alpha.ctypes.data, int(b_ptr), CUDA_R_32F, n,
                        int(a_ptr), CUDA_R_32F, k,
                        self._beta.ctypes.data, int(c_ptr), CUDA_R_32F, n,
                        self.compute_type(routine), int(lib.GemmAlgo.DEFAULT))
        except BackendError:
            raise
        except Exception as exc:  # noqa: BLE001  (cuBLASError with the status name)
            raise BackendError(f"cublasGemmEx ({routine}) failed: {exc}") from None

    def describe(self, routine: str) -> str:
        ver = f"cuBLAS {self.version}" if self.version else "cuBLAS"
        return f"{ver} gemmEx, compute type {routine.split(':', 1)[1]}, row-major via Cᵀ = Bᵀ·Aᵀ"

    def close(self) -> None:
        if self.handle is not None:
            try:
                self.lib.destroy(self.handle)
            finally:
                self.handle = None
