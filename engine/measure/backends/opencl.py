"""The opencl backend (pyopencl): any platform and device, a profiling-enabled queue.

On machines without a GPU, PoCL runs these kernels on the CPU, which is how CI checks
every OpenCL variant for real.
"""
from __future__ import annotations

import re
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from engine.kernels.sources import check_includes, working_dirs
from engine.kernels.kernel_file import KernelFileError
from engine.common import host_memory
from engine.kernels import sources
from engine.kernels.registry import Variant
from engine.common.dtypes import backend_refusal, parse_element
from engine.measure.backends.base import (COPY_BYTES, COPY_REPEATS, FLOAT_POISON_BITS, INT_POISON,
                                          Backend, BackendError, BackendStatus, BuildError,
                                          CompiledKernel, DeviceInfo, Workspace, argument_mismatch,
                                          copy_bandwidth, entry_line, missing_entry)
from engine.measure.timing import TimingLoop


def _import_cl():
    try:
        import pyopencl as cl  # noqa: PLC0415  (lazy: the app starts without it)
    except ImportError as exc:
        raise BackendError(f"pyopencl is not installed ({exc})") from None
    return cl


def _all_devices(cl) -> list:
    try:
        platforms = cl.get_platforms()
    except cl.Error as exc:  # e.g. PLATFORM_NOT_FOUND_KHR when no ICD is installed
        raise BackendError(f"no OpenCL platform ({exc})") from None
    devices = []
    for p in platforms:
        try:
            devices.extend(p.get_devices())
        except cl.Error:
            continue
    if not devices:
        raise BackendError("no OpenCL platform with a device (install an ICD, e.g. pocl-opencl-icd)")
    return devices


def _device_info(cl, dev, index: int) -> DeviceInfo:
    info = DeviceInfo(
        backend="opencl", index=index,
        name=f"{dev.name.strip()} ({dev.platform.name.strip()})",
        compute_units=dev.max_compute_units,
        memory_bytes=dev.global_mem_size,
        clock_mhz=float(dev.max_clock_frequency) or None,
        l2_bytes=dev.global_mem_cache_size or None,
    )
    notes = []
    # Whether half-precision arithmetic exists on the device (PoCL on a CPU has none):
    # the type picker and the sweep's refusals say so (engine.common.dtypes).
    info.extra["cl_khr_fp16"] = "cl_khr_fp16" in dev.extensions.split()
    if "cl_nv_device_attribute_query" in dev.extensions:
        major = dev.get_info(0x4000)  # CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV
        minor = dev.get_info(0x4001)
        info.compute_capability = f"{major}.{minor}"
        from engine.measure.peaks import cuda_peaks  # noqa: PLC0415
        peaks, how = cuda_peaks(major, minor, info.compute_units, info.clock_mhz)
        # OpenCL kernels reach neither TF32 tensor cores nor anything but FP32 and int32.
        info.peak_gflops_fp32, info.peak_gops_int32 = peaks.get("fp32"), peaks.get("int32")
        notes.extend(n for n in how if not n.startswith("peak TF32"))
    if info.peak_gflops_fp32 is None:
        notes.append("OpenCL does not report FP32 lanes or memory bandwidth for this device")
    info.notes = "; ".join(notes)
    info.extra["version"] = dev.version
    info.extra["max_work_group_size"] = dev.max_work_group_size
    return info


#: A compiler diagnostic's place: ``file:line:column:``, at the start of a line or after
#: ``error: `` (PoCL writes ``error: /.../kcache/tempfile_X.cl:55:35: expected ';'``).
_DIAGNOSTIC = re.compile(r"^(?P<pre>(?:error|warning|note): )?(?P<file>[^\s:]+):(?P<line>\d+):"
                         r"(?P<col>\d+):", re.MULTILINE)


def name_source_in_log(log: str, path: Path, staged: sources.Staged | None = None) -> str:
    """The build log with the user's paths: a diagnostic in an included file (``staged``:
    where the build found the includes) names that file; every other one names the kernel
    itself, where the OpenCL compiler named a temporary copy of it."""
    def place(m: re.Match) -> str:
        user = staged.user_path(m["file"]) if staged is not None else None
        return f"{m['pre'] or ''}{user or path}:{m['line']}:{m['col']}:"

    log = _DIAGNOSTIC.sub(place, log)
    return staged.user_paths(log) if staged is not None else log


def opencl_options(variant: Variant, params, dtype: str) -> list[str]:
    """The build options of one kernel: its defines (:meth:`Variant.defines`). The backend
    and the kernel editor's check (:mod:`engine.measure.kernel_check`) build with exactly these."""
    return [f"-D{k}={v}" for k, v in variant.defines(params, dtype).items()]


def build_program(cl, ctx, dev, source: str, options: list[str], path: Path,
                  includes: tuple[sources.SourceFile, ...] | None = None):
    """Build ``source`` (the kernel at ``path``) for ``dev``; returns (program, build log:
    '' when the compiler said nothing). A failed build raises :class:`BuildError` with the
    log, its diagnostics naming ``path`` (:func:`name_source_in_log`) instead of the
    compiler's temporary copy, or the included file they are in.

    The files ``source`` includes (``includes``; by default :func:`engine.kernels.sources.includes_of`)
    are found beside ``path`` as they were read, through a staging folder on the include
    path: the program itself is built from memory, which has no folder of its own."""
    if includes is None:
        try:
            includes = sources.includes_of(path, source)
        except sources.SourceError as exc:
            raise BuildError(str(exc)) from None
    with sources.staged(path, source, includes) if includes else nullcontext() as staged:
        extra = ["-I", _quoted(str(staged.folder))] if staged is not None else []
        try:
            prog = cl.Program(ctx, source).build(options=list(options) + extra)
        except cl.Error as exc:
            raise BuildError(f"OpenCL build of {path.name} failed:\n"
                             f"{name_source_in_log(str(exc), path, staged)}") from None
        try:
            log = prog.get_build_info(dev, cl.program_build_info.LOG) or ""
        except cl.Error:
            log = ""
        return prog, name_source_in_log(log.strip(), path, staged)


def _quoted(folder: str) -> str:
    """An include folder as one build option (the options are one string: a space splits)."""
    return f'"{folder}"' if " " in folder else folder


def entry_kernel(cl, prog, variant: Variant, path: Path, text: str):
    """The built program's kernel ``variant.entry``, or :class:`BuildError` saying (at the
    file and line) that the file defines no kernel of that name, or that its arguments are
    not those of the header's ``kind``."""
    try:
        names = [n for n in (prog.get_info(cl.program_info.KERNEL_NAMES) or "").split(";") if n]
    except cl.Error:
        names = []
    if variant.entry not in names:
        raise BuildError(missing_entry(variant, path, text, names))
    kern = cl.Kernel(prog, variant.entry)
    try:
        count = int(kern.get_info(cl.kernel_info.NUM_ARGS))
    except cl.Error:
        return kern
    wrong = argument_mismatch(variant, count)
    if wrong:
        raise BuildError(f"{path}:{entry_line(text, variant.entry)}: {wrong}")
    return kern


def kernel_limits(cl, kern, dev) -> tuple[int, int, int]:
    """(local memory bytes, private memory bytes, max work-group size) of a built kernel
    on ``dev`` (``clGetKernelWorkGroupInfo``)."""
    wg = cl.kernel_work_group_info
    return (int(kern.get_work_group_info(wg.LOCAL_MEM_SIZE, dev)),
            int(kern.get_work_group_info(wg.PRIVATE_MEM_SIZE, dev)),
            int(kern.get_work_group_info(wg.WORK_GROUP_SIZE, dev)))


class OpenCLBackend(Backend):
    name = "opencl"

    def __init__(self):
        self.cl = None
        self.ctx = None
        self.queue = None
        self.dev = None
        self.info: DeviceInfo | None = None
        self._programs: dict[tuple, CompiledKernel] = {}
        self._flush = None

    def probe(self) -> BackendStatus:
        try:
            cl = _import_cl()
            devs = _all_devices(cl)
        except BackendError as exc:
            return BackendStatus("opencl", False, str(exc))
        return BackendStatus("opencl", True, "", [_device_info(cl, d, i) for i, d in enumerate(devs)],
                             self.versions())

    def versions(self) -> str:
        try:
            import pyopencl as cl  # noqa: PLC0415
            return f"numpy {np.__version__}; pyopencl {cl.VERSION_TEXT}"
        except ImportError:
            return super().versions()

    def open(self, device_index: int) -> DeviceInfo:
        cl = self.cl = _import_cl()
        devs = _all_devices(cl)
        if not 0 <= device_index < len(devs):
            raise BackendError(f"OpenCL device {device_index} does not exist (found {len(devs)})")
        self.dev = devs[device_index]
        self.ctx = cl.Context([self.dev])
        self.queue = cl.CommandQueue(self.ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
        self.info = _device_info(cl, self.dev, device_index)
        self._programs.clear()
        return self.info

    def close(self) -> None:
        if self.queue is not None:
            self.queue.finish()
        self._programs.clear()
        self._flush = None
        self.queue = self.ctx = self.dev = None

    def free_memory(self) -> int:
        # OpenCL cannot report free memory; the device total bounds what we may ask for.
        # A CPU device (PoCL) allocates this process's host memory: the engine's cgroup and
        # resource limits bound it too (engine.inputs.memory).
        total = int(self.dev.global_mem_size)
        if self.dev.type & self.cl.device_type.CPU:
            total = min(total, host_memory.host_available_bytes())
        return total

    def measure_copy_gbps(self) -> float | None:
        cl = self.cl
        host = bool(self.dev.type & cl.device_type.CPU)
        # A CPU device copies through host caches of tens of MiB: 64 MiB still streams.
        nbytes = min(COPY_BYTES // 4 if host else COPY_BYTES, int(self.dev.max_mem_alloc_size),
                     int(self.dev.global_mem_size) // 8) // 4 * 4
        if nbytes < 2**20:
            return None
        mf = cl.mem_flags
        src = cl.Buffer(self.ctx, mf.READ_WRITE, nbytes)
        dst = cl.Buffer(self.ctx, mf.READ_WRITE, nbytes)
        def copy_ms() -> float:
            ev = cl.enqueue_copy(self.queue, dst, src, byte_count=nbytes)
            ev.wait()
            return (ev.profile.end - ev.profile.start) * 1e-6

        try:
            cl.enqueue_fill_buffer(self.queue, src, np.float32(1.0), 0, nbytes)
            return copy_bandwidth(nbytes, copy_ms, COPY_REPEATS // 2 + 1 if host else COPY_REPEATS)
        except cl.Error as exc:
            raise BackendError(f"the copy-bandwidth probe failed: {exc}") from None
        finally:
            src.release()
            dst.release()

    def max_buffer_bytes(self) -> int | None:
        return int(self.dev.max_mem_alloc_size)

    def compile(self, variant: Variant, params, dtype) -> CompiledKernel:
        why = backend_refusal("opencl", parse_element(dtype),
                              opencl_fp16=bool(self.info and self.info.extra.get("cl_khr_fp16")))
        if why:       # never built in another type: ELEM would silently become float or int
            raise BackendError(why)
        cl = self.cl
        path = variant.source_path("opencl")
        src = variant.source_text("opencl")
        options = opencl_options(variant, params, dtype)
        try:
            includes = sources.includes_of(path, src)      # as the run read them, if it did
        except sources.SourceError as exc:
            raise BuildError(str(exc)) from None
        key = (src, tuple((f.path, f.text) for f in includes), tuple(options))
        if key in self._programs:
            return self._programs[key]
        try:     # built from memory, its includes resolve from here: a pipe among them would hang
            check_includes(src, path, path.parent, working_dirs())
        except KernelFileError as exc:
            raise BuildError(str(exc)) from None
        prog, _log = build_program(cl, self.ctx, self.dev, src, options, path, includes)
        kern = entry_kernel(cl, prog, variant, path, src)
        local, private, max_wg = kernel_limits(cl, kern, self.dev)
        report = (f"{variant.label(params)} {dtype}: built {path.name} with {' '.join(options)}; "
                  f"local memory {local} B, private memory {private} B, max work-group {max_wg}")
        ck = CompiledKernel(variant, dict(params), dtype, kern, report,
                            shared_bytes=int(local), local_bytes=int(private), max_threads=int(max_wg))
        self._programs[key] = ck
        return ck

    def prepare(self, a, b) -> Workspace:
        cl = self.cl
        ws = Workspace(a, b)
        mf = cl.mem_flags
        t0 = time.perf_counter()
        ws.a = cl.Buffer(self.ctx, mf.READ_ONLY, a.nbytes)
        ev = [cl.enqueue_copy(self.queue, ws.a, np.ascontiguousarray(a))]
        if b is not None:
            ws.b = cl.Buffer(self.ctx, mf.READ_ONLY, b.nbytes)
            ev.append(cl.enqueue_copy(self.queue, ws.b, np.ascontiguousarray(b)))
        self.queue.finish()
        try:
            ws.upload_ms = sum((e.profile.end - e.profile.start) for e in ev) * 1e-6
        except cl.Error:
            ws.upload_ms = (time.perf_counter() - t0) * 1e3
        return ws

    def ensure_output(self, ws, shape) -> None:
        if ws.c_shape != tuple(shape):
            if ws.c is not None:
                ws.c.release()
            nbytes = int(np.prod(shape)) * ws.dtype.itemsize
            ws.c = self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, nbytes)
            ws.c_shape = tuple(shape)

    def poison_output(self, ws) -> None:
        pattern = INT_POISON if np.issubdtype(ws.dtype, np.integer) else \
            np.array(FLOAT_POISON_BITS, dtype=np.uint32).view(np.float32)[()]
        nbytes = int(np.prod(ws.c_shape)) * ws.dtype.itemsize
        self.cl.enqueue_fill_buffer(self.queue, ws.c, np.array(pattern, dtype=ws.dtype), 0, nbytes)
        self.queue.finish()

    def _enqueue(self, kernel: CompiledKernel, ws: Workspace, m, n, k):
        v = kernel.variant
        (gx, gy), (bx, by) = v.launch_geometry(kernel.params, m, n, k, self.multiprocessors)
        if kernel.max_threads and bx * by > kernel.max_threads:
            raise BackendError(f"work-group {bx}×{by} exceeds this kernel's limit of "
                               f"{kernel.max_threads} on {self.dev.name.strip()}")
        if v.kind == "aat":
            args = (ws.a, ws.c, np.int32(m), np.int32(k))
        else:
            args = (ws.a, ws.b, ws.c, np.int32(m), np.int32(n), np.int32(k))
        try:
            return kernel.handle(self.queue, (gx * bx, gy * by), (bx, by), *args)
        except self.cl.Error as exc:
            raise BackendError(f"launch of {v.label(kernel.params)} failed: {exc}") from None

    def run_once(self, kernel, ws, m, n, k) -> np.ndarray:
        self._enqueue(kernel, ws, m, n, k).wait()
        out = np.empty(ws.c_shape, dtype=ws.dtype)
        self.cl.enqueue_copy(self.queue, out, ws.c)
        self.queue.finish()
        return out

    def time_launches(self, kernel, ws, m, n, k, warmup, repeats, cold, budget_s,
                      should_stop=lambda: False, noise=None) -> list[float]:
        cl = self.cl
        for _ in range(warmup):
            self._enqueue(kernel, ws, m, n, k)
        self.queue.finish()
        if cold and self._flush is None:
            size = max(2 * (self.dev.global_mem_cache_size or 0), 64 * 2**20)
            self._flush = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, size)
        loop = self.last_timing = TimingLoop(repeats, budget_s, noise)
        while loop.due():
            if cold:
                cl.enqueue_fill_buffer(self.queue, self._flush, np.uint32(len(loop.times)), 0,
                                       self._flush.size)
            ev = self._enqueue(kernel, ws, m, n, k)
            ev.wait()
            loop.add((ev.profile.end - ev.profile.start) * 1e-6)
            if should_stop():
                loop.cancel()
        return loop.times

    def read_output(self, ws) -> np.ndarray:
        out = np.empty(ws.c_shape, dtype=ws.dtype)
        self.cl.enqueue_copy(self.queue, out, ws.c)
        self.queue.finish()
        return out

    def release(self, ws) -> None:
        for name in ("a", "b", "c"):
            buf = getattr(ws, name)
            if buf is not None:
                buf.release()
                setattr(ws, name, None)
