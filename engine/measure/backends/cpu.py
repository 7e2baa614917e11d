"""The cpu backend: numpy.matmul on the host, the CPU row of the seed timing tables."""
from __future__ import annotations

import os
import platform
import time

import numpy as np

from engine.common import cpus
from engine.common.dtypes import ElementType, Layout, TypeSpec
from engine.common import host_memory
from engine.kernels.registry import Variant
from engine.measure.backends.base import (COPY_BYTES, COPY_REPEATS, INT_POISON, Backend,
                                          BackendError, BackendStatus, CompiledKernel, DeviceInfo,
                                          Workspace, copy_bandwidth)
from engine.measure.timing import TimingLoop, TimingMode

#: Written before each cold launch: larger than any desktop CPU's last-level cache.
FLUSH_BYTES = 256 * 2**20


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def multiplied_as(spec: TypeSpec) -> np.dtype | None:
    """What numpy multiplies a run's inputs in, where not their own type (None): FP32 for
    half and FP8 inputs (their products are exact there, the sums FP32's, as on tensor
    cores); float64 for int8, whose BLAS product is exact (every partial sum of int8 · int8
    terms stays below 2⁵³ for K < 2³⁹) and is then wrapped to int32 as the kernels' sums are."""
    if spec.element is ElementType.INT8:
        return np.dtype(np.float64)
    return np.dtype(np.float32) if spec.element.is_low_precision else None


class CpuBackend(Backend):
    name = "cpu"

    def __init__(self):
        self._flush: np.ndarray | None = None
        #: Whether the last timed kernel ran through Triton's interpreter (a .py kernel).
        self._interpreted = False
        #: The run's types and B's layout (the sweep sets it before ``prepare``): half and
        #: FP8 inputs are upcast to FP32 once, multiplied in FP32 (FP32 accumulation, as
        #: tensor cores do), scaled and rounded to the output type; int8 inputs are upcast to
        #: float64 once, multiplied exactly and wrapped to int32 (:func:`multiplied_as`).
        self.type_spec = TypeSpec()

    def _info(self) -> DeviceInfo:
        mem = None
        try:
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            pass
        return DeviceInfo(backend="cpu", index=0, name=_cpu_name(),
                          compute_units=cpus.thread_budget(), memory_bytes=mem,
                          notes="numpy " + np.__version__ + "; peak figures are not derivable for a CPU here")

    def probe(self) -> BackendStatus:
        return BackendStatus("cpu", True, "", [self._info()], self.versions())

    def open(self, device_index: int) -> DeviceInfo:
        if device_index != 0:
            raise BackendError(f"the cpu backend has one device (0), not {device_index}")
        from engine.measure import triton_kernels  # noqa: PLC0415  (.py kernels only)
        triton_kernels.use_interpreter()    # before anything imports Triton in this process
        return self._info()

    def close(self) -> None:
        self._flush = None

    def free_memory(self) -> int:
        # The device is this process's host memory: what the OS, the engine's own cgroup
        # and its resource limits leave it (engine.inputs.memory), not the machine's total.
        return host_memory.host_available_bytes()

    def measure_copy_gbps(self) -> float | None:
        # numpy's copy of a buffer larger than the last-level cache: main-memory bandwidth
        # as one thread sees it (what numpy's element-wise work gets).
        nbytes = min(COPY_BYTES // 4, self.free_memory() // 8) // 4 * 4
        if nbytes < 2**20:
            return None
        src = np.ones(nbytes // 4, dtype=np.float32)
        dst = np.empty_like(src)

        def copy_ms() -> float:
            t0 = time.perf_counter()
            np.copyto(dst, src)
            return (time.perf_counter() - t0) * 1e3

        return copy_bandwidth(nbytes, copy_ms, COPY_REPEATS // 2 + 1)

    def compile(self, variant: Variant, params, dtype) -> CompiledKernel:
        if variant.is_triton:
            return self._compile_triton(variant, params, dtype)
        return CompiledKernel(variant, dict(params), dtype, handle=np.matmul,
                              report=f"{variant.name}: numpy.matmul (no compilation)")

    def _compile_triton(self, variant: Variant, params, dtype) -> CompiledKernel:
        """A .py kernel through Triton's interpreter: imported first in a child process
        (an import that raises, exits or never ends costs that child), then here."""
        from engine.measure import triton_kernels as tk  # noqa: PLC0415
        from engine.measure.backends.base import BuildError  # noqa: PLC0415
        if dtype not in variant.dtypes:
            raise BackendError(f"{variant.name} runs {', '.join(variant.dtypes)} only, not {dtype}")
        why = tk.interpreter_type_problem(dtype) or tk.interpreter_problem()
        if why:
            raise BackendError(f"{variant.name}: {why}")
        path = variant.source_path("cpu")
        text = variant.source_text("cpu")
        probe = tk.probe_file(path, text, variant, min(self.build_timeout_s, tk.IMPORT_TIMEOUT_S))
        if not probe.ok:
            raise BuildError(probe.problem)
        try:
            fn = tk.load_entry(path, text, variant.entry)
            handle = tk.InterpretedTritonKernel(variant, params, fn, str(self.type_spec.layout))
        except tk.TritonError as exc:
            raise BuildError(str(exc)) from None
        return CompiledKernel(variant, dict(params), dtype, handle=handle,
                              report=f"{variant.label(params)}: Triton's interpreter on the host "
                                     "(no compilation; its times are no kernel's)")

    def prepare(self, a, b) -> Workspace:
        ws = Workspace(a, b)
        spec = self.type_spec
        t0 = time.perf_counter()
        if b is not None and spec.layout is Layout.NK:
            b = np.ascontiguousarray(b.T)     # stored N×K; the launch reads it transposed
        # Triton's interpreter reads A and B in their own type, as a GPU kernel would
        ws.a_native, ws.b_native = a, b
        wide = multiplied_as(spec)
        if wide is not None:
            # The "upload": the inputs in the type numpy's BLAS multiplies them in.
            a = a.astype(wide)
            b = None if b is None else b.astype(wide)
        ws.a, ws.b = a, b
        converted = wide is not None or (b is not None and spec.layout is Layout.NK)
        # Nothing moves for plain float32/int32 (the host is the device): no upload time.
        ws.upload_ms = (time.perf_counter() - t0) * 1e3 if converted else 0.0
        if spec.element.is_low_precision:
            ws.dtype = spec.output.numpy_dtype
        return ws

    def ensure_output(self, ws, shape) -> None:
        if ws.c_shape != tuple(shape):
            ws.c = np.empty(shape, dtype=ws.dtype)
            ws.c_shape = tuple(shape)
            ws.c_acc = None       # made for the new shape on the first launch (_accumulator)

    def _accumulator(self, ws) -> np.ndarray:
        """Where numpy writes the product: C itself, or (half, FP8 and int8 inputs whose C
        has another type than they are multiplied in) an array of that type, kept on the
        workspace. Made here, not with C: the re-check's second workspace borrows C alone."""
        wide = multiplied_as(self.type_spec)
        if wide is None or wide == ws.c.dtype:
            return ws.c
        if ws.c_acc is None or ws.c_acc.shape != ws.c.shape:
            ws.c_acc = np.empty(ws.c.shape, dtype=wide)
        return ws.c_acc

    def poison_output(self, ws) -> None:
        if np.issubdtype(ws.dtype, np.integer):
            ws.c.fill(INT_POISON)
        else:
            ws.c.fill(np.nan)

    def _launch(self, kernel: CompiledKernel, ws: Workspace) -> None:
        self._interpreted = kernel.variant.is_triton
        if self._interpreted:
            from engine.measure.triton_kernels import TritonError  # noqa: PLC0415
            m, k = ws.a.shape
            n = ws.c.shape[1]
            try:
                kernel.handle(ws.a_native, ws.b_native, ws.c, m, n, k,
                              scale=ws.scale)
            except TritonError as exc:
                raise BackendError(str(exc)) from None
            return
        b = ws.a.T if kernel.variant.kind == "aat" else ws.b
        if b is None:
            raise BackendError("B is missing for a C = A·B variant")
        if kernel.variant.kind != "aat" and self.type_spec.layout is Layout.NK:
            b = b.T
        if not self.type_spec.element.is_low_precision:
            np.matmul(ws.a, b, out=ws.c)
            return
        acc = self._accumulator(ws)
        np.matmul(ws.a, b, out=acc)
        if self.type_spec.element.is_integer:
            # exact sums → int64 → int32: the int64-to-int32 cast wraps modulo 2³², as the
            # kernels' int32 sums do (a float-to-int32 cast out of range would not)
            np.copyto(ws.c, acc.astype(np.int64), casting="unsafe")
            return
        scale = ws.scale
        if scale != 1.0:
            acc *= np.float32(scale)
        if acc is not ws.c:
            ws.c[...] = acc            # rounded to the output type (to nearest)

    def run_once(self, kernel, ws, m, n, k) -> np.ndarray:
        self._launch(kernel, ws)
        return ws.c.copy()

    def time_launches(self, kernel, ws, m, n, k, warmup, repeats, cold, budget_s,
                      should_stop=lambda: False, noise=None) -> list[float]:
        for _ in range(warmup):
            self._launch(kernel, ws)
        if cold and self._flush is None:
            self._flush = np.empty(FLUSH_BYTES // 8)
        loop = self.last_timing = TimingLoop(repeats, budget_s, noise)
        while loop.due():
            if cold:
                self._flush.fill(len(loop.times))  # evicts A, B and C from the caches
            t0 = time.perf_counter()
            self._launch(kernel, ws)
            loop.add((time.perf_counter() - t0) * 1e3)
            if should_stop():
                loop.cancel()
        return loop.times

    def timing_mode(self) -> TimingMode:
        return TimingMode.INTERPRETER if self._interpreted else TimingMode.HOST_CLOCK

    def timing_note(self) -> str:
        if self._interpreted:
            return ("Triton's interpreter: numpy ran the kernel's programs one by one on the "
                    "host; the times are no kernel's (a check of the arithmetic only)")
        return ""

    def read_output(self, ws) -> np.ndarray:
        return ws.c.copy()

    def release(self, ws) -> None:
        ws.a = ws.b = ws.c = ws.c_acc = ws.a_native = ws.b_native = None
