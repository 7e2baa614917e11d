"""The cuda backend (pycuda): the engine thread creates and owns the context.

``open`` calls ``make_context()`` on the engine thread and ``close`` pops and detaches
it there; pycuda's auto-initialising module is never imported. Kernels are compiled for the
device's own architecture (``sm_XY``) with their parameters as ``-D`` constants, and
the cubins are cached per (source, defines, arch). Each timed launch is bracketed by
its own CUDA event pair; transfers are timed apart from kernels.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import shlex
import signal
import struct
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from engine.common import cpus
from engine.common.dtypes import Layout, TypeSpec
from engine.kernels import sources
from engine.common.files import read_text
from engine.kernels.sources import check_includes, read_kernel_text
from engine.kernels.kernel_file import KernelFileError
from engine.measure import build_cache
from engine.measure.peaks import cuda_peaks
from engine.measure.conditions import LoopConditions, LoopSampler, open_monitor
from engine.kernels.registry import ROOT, Variant, is_builtin_file, takes_scale
from engine.measure.backends.base import (BUILD_TIMEOUT_S, COPY_BYTES, FLOAT_POISON_BITS,
                                          INT_POISON, Backend, BackendError, BackendStatus,
                                          BuildError, CompiledKernel, DeviceInfo, Workspace,
                                          argument_mismatch, copy_bandwidth, entry_line,
                                          missing_entry)
from engine.measure.timing import TimingLoop, TimingMode


#: Timed launches queued behind one stream hold at most (without a time budget).
HELD_BATCH = 32


def find_nvcc() -> str:
    """nvcc from CUDA_ROOT/CUDA_HOME, else from PATH."""
    for env in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(env)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    found = shutil.which("nvcc")
    if not found:
        raise BackendError("nvcc was not found (install the CUDA toolkit, or set CUDA_ROOT)")
    return found


@functools.lru_cache(maxsize=None)
def nvcc_version(nvcc: str) -> str | None:
    """``nvcc --version`` of the compiler at ``nvcc`` (part of a disk-cached build's name:
    another toolkit builds again), or None where it does not answer."""
    try:
        done = subprocess.run([nvcc, "--version"], capture_output=True, text=True,
                              errors="replace", timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def nvcc_options(variant: Variant, params, dtype: str, out_dtype: str | None = None,
                 layout: str = "kn") -> list[str]:
    """The nvcc options of one kernel build: its defines (:meth:`Variant.defines`; C's type
    ``out_dtype`` for 16-bit inputs, ``B_NK`` for B as N×K), the ptxas resource report
    (``-Xptxas -v``) and line info. The backend and the kernel editor's check
    (:mod:`engine.measure.kernel_check`) build with exactly these."""
    defines = variant.defines(params, dtype, out_dtype, layout)
    return [f"-D{k}={v}" for k, v in defines.items()] + ["-Xptxas", "-v", "-lineinfo"]


def target_arch(variant: Variant, device_arch: str) -> str:
    """The architecture to build ``variant`` for on a device of ``device_arch`` (``sm_XY``):
    the device's own, or ``sm_90a`` for a kernel with ``arch_suffix = "a"`` (wgmma), which
    only the exact architecture runs; raises :class:`ArchUnavailable` elsewhere."""
    suffix = variant.arch_suffix
    if not suffix:
        return device_arch
    if device_arch != "sm_90":
        raise ArchUnavailable(f"{variant.name} needs sm_90{suffix} (wgmma); "
                              f"this device is {device_arch}")
    return device_arch + suffix


def _helper_headers_text() -> str:
    """The shared helper headers (``cuda/*.cuh``) as one text: part of a build's cache key,
    so that editing ``lab_ptx.cuh`` while the app runs rebuilds what includes it."""
    parts = []
    for p in sorted((ROOT / "cuda").glob("*.cuh")):
        try:
            parts.append(read_text(p, p.name))     # a pipe or device there: skipped, not waited on
        except ValueError:
            pass
    return "\n".join(parts)


def nvcc_cubin(source: Path, options: list[str], arch: str,
               timeout: float = BUILD_TIMEOUT_S) -> tuple[bytes, str]:
    """Compile one kernel file to a cubin for ``arch``; returns (cubin, ptxas report).

    A plain nvcc process (not pycuda's compiler, whose ptxas report arrives through
    the process-global warnings machinery): builds can run in parallel threads, and
    nvcc's messages name the real file. ``timeout``: seconds before nvcc (and the
    compilers it started) is stopped: a :class:`BuildError` saying the build took longer.
    """
    target = _target(arch)
    with tempfile.TemporaryDirectory(prefix="matmul-lab-") as tmp:
        out = Path(tmp) / "kernel.cubin"
        cmd = [find_nvcc(), "-cubin", target, *options, f"-I{ROOT / 'cuda'}", "-o", str(out),
               str(source)]
        try:
            # A session of its own: on a timeout its whole group goes (cicc, ptxas too).
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, errors="replace", start_new_session=True)
        except OSError as exc:
            raise BackendError(f"nvcc could not run on {source.name}: {exc}") from None
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
            proc.communicate()
            raise BuildError(f"the build of {source.name} took longer than {timeout:g} s "
                             "(nvcc was stopped)") from None
        log = (stdout + stderr).strip()
        if proc.returncode != 0:
            raise BuildError(f"nvcc failed on {source.name}:\n{log}")
        return out.read_bytes(), log


def _target(arch: str) -> str:
    return f"-gencode=arch=compute_{arch[3:]},code={arch}" if arch.endswith("a") else f"-arch={arch}"


@functools.lru_cache(maxsize=None)
def device_pass_macros(nvcc: str, arch: str) -> tuple[str, ...] | None:
    """The ``-D__...`` macros nvcc's device pass for ``arch`` defines (``__CUDA_ARCH__``,
    its feature and list macros, ``__CUDACC__``...), read from its ``--dryrun``; None
    where that cannot be read."""
    with tempfile.TemporaryDirectory(prefix="matmul-lab-") as tmp:
        probe = Path(tmp) / "probe.cu"
        probe.write_text("")
        try:
            done = subprocess.run([nvcc, "-cubin", _target(arch), "--dryrun", "-o",
                                   str(Path(tmp) / "probe.cubin"), str(probe)],
                                  capture_output=True, text=True, errors="replace", timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
    for line in (done.stdout + done.stderr).splitlines():
        if " -E " in line and "-D__CUDA_ARCH__=" in line:
            try:
                words = shlex.split(line.lstrip("#$ "))
            except ValueError:
                return None
            return tuple(w for w in words if w.startswith("-D__"))
    return None


def device_text_digest(source: Path, options: list[str], arch: str,
                       timeout: float = BUILD_TIMEOUT_S) -> str | None:
    """A digest of what nvcc's device pass compiles for one build: the kernel file
    preprocessed as that pass sees it (its architecture macros, the build's defines), with
    the options that are not defines, the target and nvcc's version. Two builds whose
    defines leave the same device text (a parameter only the launch geometry reads, such
    as skinny's ``fill`` in its register stream) make the same cubin: the caches serve the
    second from the first. None where it cannot be had (then the build runs as always)."""
    try:
        nvcc = find_nvcc()
    except BackendError:
        return None
    version = nvcc_version(nvcc)
    macros = device_pass_macros(nvcc, arch)
    if version is None or not macros:
        return None
    defines = [o for o in options if o.startswith("-D")]
    rest = [o for o in options if not o.startswith("-D")]
    try:
        done = subprocess.run([nvcc, "-E", _target(arch), *macros, *defines, f"-I{ROOT / 'cuda'}",
                               str(source)], capture_output=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0 or not done.stdout.strip():
        return None
    return build_cache.digest("device text", hashlib.sha256(done.stdout).hexdigest(),
                              tuple(rest), arch, nvcc, version)


#: ``.nv.info.<kernel>`` record of one kernel parameter (EIATTR_KPARAM_INFO).
_EIATTR_KPARAM_INFO = 0x17
#: ``.nv.info`` record formats: a 16-bit size and that many bytes follow (EIFMT_SVAL).
_EIFMT_SVAL = 0x04


def cubin_kernels(cubin: bytes) -> dict[str, int] | None:
    """The kernels of a cubin (ELF) and how many parameters each takes, from the
    ``.nv.info.<name>`` sections nvcc writes (one parameter record per argument); None
    when the cubin cannot be read so (then nothing is checked)."""
    try:
        if cubin[:4] != b"\x7fELF" or cubin[4] != 2:          # 64-bit ELF only
            return None
        shoff = struct.unpack_from("<Q", cubin, 0x28)[0]
        entsize, count, strndx = struct.unpack_from("<HHH", cubin, 0x3A)
        sections = [struct.unpack_from("<I4xQ8xQQ", cubin, shoff + i * entsize)
                    for i in range(count)]                   # name, flags, offset, size
        names_at = sections[strndx][2]

        def name(offset: int) -> str:
            start = names_at + offset
            return cubin[start:cubin.index(b"\0", start)].decode("utf-8", "replace")

        out: dict[str, int] = {}
        for name_off, _flags, offset, size in sections:
            sec = name(name_off)
            if not sec.startswith(".nv.info."):
                continue
            params, i = 0, offset
            while i + 4 <= offset + size:
                fmt, attr, value = struct.unpack_from("<BBH", cubin, i)
                i += 4
                if fmt == _EIFMT_SVAL:
                    i += value
                params += attr == _EIATTR_KPARAM_INFO
            out[sec[len(".nv.info."):]] = params
        return out
    except (struct.error, IndexError, ValueError):
        return None


# --- TMA tensor maps (cuTensorMapEncodeTiled through ctypes) --------------------------------

_TMAP_L2_256B = 3                                     # CUtensorMap* enums (cuda.h)
#: CUtensorMapSwizzle per swizzle span in bytes (engine.kernels.kernel_file.MAP_SWIZZLES)
_TMAP_SWIZZLE = {32: 1, 64: 2, 128: 3}
#: CUtensorMapDataType per element type of a map (engine.kernels.kernel_file.MAP_ELEMS): FLOAT32
#: copies the bits; TFLOAT32 has the copy engine round each float to TF32 to nearest even
#: (low 13 mantissa bits cleared; measured bit for bit on an H100 by tests/test_tma_tf32.py).
#: b16 / b8: UINT16 / UINT8, the 16- and 8-bit words copied as they are (FP16, BF16, FP8).
_TMAP_DATA_TYPE = {"float32": 7, "tf32": 11, "b16": 1, "b8": 0}
_libcuda = None


def _cuda_lib():
    import ctypes  # noqa: PLC0415

    global _libcuda
    if _libcuda is None:
        try:
            _libcuda = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise BackendError(f"libcuda cannot be loaded: {exc}") from None
    return _libcuda


def kernel_param_offsets(cubin: bytes, entry: str, count: int) -> list[int]:
    """Byte offsets of ``entry``'s ``count`` parameters in its launch buffer, as the driver
    reads them (cuFuncGetParamInfo, on a second load of the same cubin in the current
    context; the count is known from the build, so that no query runs past the last). A
    64-byte-aligned parameter (a ``__grid_constant__`` tensor map) may start past 0: the
    parameter bank itself is not 64-byte aligned (sm_90: the first at 48)."""
    import ctypes  # noqa: PLC0415

    lib = _cuda_lib()
    module, func = ctypes.c_void_p(), ctypes.c_void_p()
    data = ctypes.create_string_buffer(cubin, len(cubin))
    if lib.cuModuleLoadData(ctypes.byref(module), data) != 0:
        raise BackendError(f"cannot load the cubin of {entry} to read its parameter offsets")
    try:
        if lib.cuModuleGetFunction(ctypes.byref(func), module, entry.encode()) != 0:
            raise BackendError(f"no kernel {entry} in its cubin")
        offsets, offset, size = [], ctypes.c_size_t(), ctypes.c_size_t()
        for j in range(count):
            res = lib.cuFuncGetParamInfo(func, ctypes.c_size_t(j), ctypes.byref(offset), ctypes.byref(size))
            if res != 0:
                raise BackendError(f"the driver reports no parameter {j} of {entry} (CUresult {res}; "
                                   "cuFuncGetParamInfo needs a CUDA 12.4 driver or newer)")
            offsets.append(offset.value)
        return offsets
    finally:
        lib.cuModuleUnload(module)


def encode_tensor_map_2d(addr: int, dim0: int, dim1: int, stride_bytes: int, box0: int,
                         box1: int, elem: str = "float32", swizzle: int = 128) -> bytes:
    """A 128-byte CUtensorMap of a row-major matrix of ``elem`` (dim1 rows of dim0 elements,
    rows ``stride_bytes`` apart) at device address ``addr``, box ``box0`` x ``box1``,
    a ``swizzle``-byte shared-memory swizzle, zero fill out of bounds (loads; stores clip at
    the edges); encoded by libcuda's cuTensorMapEncodeTiled. ``elem`` "tf32": the copies
    round to TF32 as they land (see ``_TMAP_DATA_TYPE``)."""
    import ctypes  # noqa: PLC0415

    lib = _cuda_lib()
    raw = (ctypes.c_uint8 * (128 + 64))()            # the map must be 64-byte aligned
    addr_map = (ctypes.addressof(raw) + 63) & ~63
    u64x2, u32x2 = ctypes.c_uint64 * 2, ctypes.c_uint32 * 2
    res = lib.cuTensorMapEncodeTiled(
        ctypes.c_void_p(addr_map), ctypes.c_int(_TMAP_DATA_TYPE[elem]), ctypes.c_uint32(2), ctypes.c_void_p(addr),
        u64x2(dim0, dim1), (ctypes.c_uint64 * 1)(stride_bytes), u32x2(box0, box1), u32x2(1, 1),
        ctypes.c_int(0), ctypes.c_int(_TMAP_SWIZZLE[swizzle]), ctypes.c_int(_TMAP_L2_256B),
        ctypes.c_int(0))
    if res != 0:
        raise BackendError(f"cuTensorMapEncodeTiled failed (CUresult {res}) for a {dim1} x {dim0} "
                           f"matrix, box {box1} x {box0}, element type {elem}, "
                           f"{swizzle}-byte swizzle")
    return ctypes.string_at(addr_map, 128)


def arg_codes(sig: str) -> list[str]:
    """The argument codes of a pycuda struct format without counts ("PPPiiiP")."""
    return re.findall(r"[a-zA-Z]", sig)


def param_signature(sig: str, maps: int, offsets: list[int]) -> str:
    """The launch buffer's struct format of a kernel whose first ``maps`` parameters are
    128-byte tensor maps, then ``sig``'s: padding up to the first map's offset, then each
    parameter where the driver reads it (``offsets``, :func:`kernel_param_offsets`); a
    kernel whose parameters lie elsewhere is refused, saying where."""
    fmt = arg_codes(sig)
    if len(offsets) != maps + len(fmt):
        raise BackendError(f"the kernel takes {len(offsets)} parameters; {maps} tensor maps and "
                           f"{len(fmt)} others were expected")
    out, at = "", 0
    for j, (code, want) in enumerate(zip(["128s"] * maps + fmt, offsets)):
        size = struct.calcsize(code)
        align = 1 if code == "128s" else size
        at_aligned = (at + align - 1) // align * align
        if want < at_aligned or (code != "128s" and want != at_aligned):
            raise BackendError(f"parameter {j} of the kernel is at byte {want}, not where a "
                               f"launch buffer would put it ({at_aligned})")
        if want > at:
            out += f"{want - at}x"
        out += code
        at = want + size
    return out


def device_words(x: np.ndarray) -> np.ndarray:
    """``x`` as the bytes a kernel reads, in a form pycuda copies: float16 and ml_dtypes'
    bfloat16/FP8 arrays (which export no buffer pycuda takes) viewed as their raw unsigned
    words, the same memory; other arrays as they are. Contiguous (a view when it was)."""
    x = np.ascontiguousarray(x)
    if x.dtype.kind in "iub" or x.dtype == np.float32 or x.dtype == np.float64:
        return x
    return x.view(np.dtype(f"uint{8 * x.dtype.itemsize}"))


def half_poison_bits(dtype: np.dtype) -> int:
    """The 16-bit word of a quiet NaN of ``dtype`` (float16 0x7E00, bfloat16 0x7FC0): the
    pattern C is filled with before a checked launch, so unwritten elements fail."""
    return int(np.array(np.nan, dtype=dtype).view(np.uint16)[()])


class ArchUnavailable(BackendError):
    """The variant needs an architecture-specific target (e.g. sm_90a) this device lacks:
    the run is skipped, not failed."""

    skip = True


def _import_cuda():
    try:
        import pycuda.driver as drv  # noqa: PLC0415  (lazy; the engine thread makes the context)
    except ImportError as exc:
        raise BackendError(f"pycuda is not installed ({exc})") from None
    except Exception as exc:  # a broken install, e.g. libcuda missing  # noqa: BLE001
        raise BackendError(f"pycuda cannot load: {exc}") from None
    try:
        drv.init()
    except drv.Error as exc:
        raise BackendError(f"the CUDA driver did not initialise ({exc})") from None
    if drv.Device.count() == 0:
        raise BackendError("no CUDA device")
    return drv


def _device_info_and_monitor(drv, index: int):
    """The device's description, and the NVML monitor of its clocks (None where NVML has
    none: the description says why)."""
    dev = drv.Device(index)
    a = drv.device_attribute

    def attr(name):
        try:
            return dev.get_attribute(getattr(a, name))
        except (AttributeError, drv.Error):
            return None

    major, minor = dev.compute_capability()
    sms = attr("MULTIPROCESSOR_COUNT")
    clock_khz = attr("CLOCK_RATE")
    mem_khz = attr("MEMORY_CLOCK_RATE")
    bus = attr("GLOBAL_MEMORY_BUS_WIDTH")
    info = DeviceInfo(backend="cuda", index=index, name=dev.name(), compute_units=sms,
                      memory_bytes=dev.total_memory(),
                      clock_mhz=clock_khz / 1e3 if clock_khz else None,
                      memory_clock_mhz=mem_khz / 1e3 if mem_khz else None,
                      bus_width_bits=bus, l2_bytes=attr("L2_CACHE_SIZE"),
                      compute_capability=f"{major}.{minor}")
    peaks, notes = cuda_peaks(major, minor, sms, clock_khz / 1e3 if clock_khz else None)
    info.peak_gflops_fp32, info.peak_gflops_tf32 = peaks.get("fp32"), peaks.get("tf32")
    info.peak_gops_int32 = peaks.get("int32")
    info.peak_gflops_fp16, info.peak_gflops_bf16 = peaks.get("fp16"), peaks.get("bf16")
    # FP8 records' % of peak: without it their peak was unknown (cuda_peaks computes it)
    info.peak_gflops_fp8 = peaks.get("fp8")
    info.peak_gops_int8 = peaks.get("int8")
    if mem_khz and bus:
        info.peak_gbps = 2 * mem_khz * 1e3 * bus / 8 / 1e9
        notes.append("bandwidth = 2 × memory clock × bus width")
    info.notes = "; ".join(notes)
    info.extra["shared_per_block_optin"] = attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
    # NVML finds the GPU by its PCI bus id (CUDA_VISIBLE_DEVICES may renumber indices)
    try:
        info.extra["pci_bus_id"] = dev.pci_bus_id()
    except (AttributeError, drv.Error):
        info.extra["pci_bus_id"] = ""
    monitor, why = open_monitor(info.extra["pci_bus_id"])
    info.extra.update(monitor.identity() if monitor is not None else {"nvml": why})
    return info, monitor


def _device_info(drv, index: int) -> DeviceInfo:
    return _device_info_and_monitor(drv, index)[0]     # probe(): no monitor is kept


class CudaBackend(Backend):
    name = "cuda"

    def __init__(self):
        self.drv = None
        self.ctx = None
        self.info: DeviceInfo | None = None
        self.arch = ""
        self._cubins: dict[tuple, tuple[bytes, str]] = {}
        #: Builds by the digest of their device text: parameters that leave it unchanged
        #: share one nvcc run (device_text_digest).
        self._by_device_text: dict[str, tuple[bytes, str]] = {}
        self._text_locks: dict[str, threading.Lock] = {}
        self._text_locks_guard = threading.Lock()
        #: Builds kept on disk across processes and starts (None: MATMUL_LAB_CACHE=off).
        self._disk = build_cache.BuildCache.from_env()
        self._kernels: dict[tuple, CompiledKernel] = {}
        self._flush = None
        self._flush_bytes = 0
        self._events: list = []
        self._cublas = None  # CublasGemm, made lazily on the engine thread (library variants)
        self._cublaslt = None  # CublasLt (the FP8 and int8 lines), with its workspace
        self._lt_buffers = None
        self._hold = None    # StreamHold, made lazily on the engine thread; False: unavailable
        self.hold_note = ""  # why timed launches cannot be held back to back, if so
        self._timing_note = ""  # what the last time_launches could not do (timing_note)
        self._monitor = None    # engine.measure.conditions.Monitor of the open GPU, or None
        self._conditions = LoopConditions()  # what NVML saw during the last time_launches
        #: The run's types (the sweep sets it before ``prepare``): 16-bit inputs are uploaded
        #: as their raw words, C is allocated, poisoned and read back in the output type.
        self.type_spec = TypeSpec()

    # -- discovery --------------------------------------------------------------------

    def probe(self) -> BackendStatus:
        try:
            drv = _import_cuda()
            devices = [_device_info(drv, i) for i in range(drv.Device.count())]
        except BackendError as exc:
            return BackendStatus("cuda", False, str(exc))
        return BackendStatus("cuda", True, "", devices, self.versions())

    def versions(self) -> str:
        try:
            import pycuda  # noqa: PLC0415
            import pycuda.driver as drv  # noqa: PLC0415
            ver = ".".join(map(str, drv.get_version()))
            return (f"numpy {np.__version__}; pycuda {pycuda.VERSION_TEXT}; CUDA {ver}; "
                    f"driver {drv.get_driver_version()}")
        except Exception:  # noqa: BLE001
            return super().versions()

    # -- context lifecycle (engine thread only) ----------------------------------------

    def open(self, device_index: int) -> DeviceInfo:
        drv = self.drv = _import_cuda()
        if not 0 <= device_index < drv.Device.count():
            raise BackendError(f"CUDA device {device_index} does not exist "
                               f"(found {drv.Device.count()})")
        dev = drv.Device(device_index)
        self.ctx = dev.make_context()
        major, minor = dev.compute_capability()
        self.arch = f"sm_{major}{minor}"
        # the NVML monitor the device's description opened samples its timed loops
        self.info, self._monitor = _device_info_and_monitor(drv, device_index)
        self._kernels.clear()
        return self.info

    def close(self) -> None:
        if self.ctx is None:
            return
        try:
            self.ctx.synchronize()
        finally:
            if self._cublaslt is not None:
                try:
                    self._cublaslt.close()
                finally:
                    self._cublaslt = None
                    for buf in self._lt_buffers or ():
                        buf.free()
                    self._lt_buffers = None
            if self._cublas is not None:  # destroy the handle while its context is current
                try:
                    self._cublas.close()
                finally:
                    self._cublas = None
            self._kernels.clear()
            self._events.clear()
            self._flush = None
            if self._hold:
                self._hold.close()
            self._hold = None
            # Pop and detach on the thread that made the context: no "context stack" abort.
            self.ctx.pop()
            self.ctx.detach()
            self.ctx = None

    def free_memory(self) -> int:
        free, _total = self.drv.mem_get_info()
        return int(free)

    def context_lost(self) -> str | None:
        """A sticky error (illegal address, trap, misaligned access, ...) makes every later
        call on this context fail with it: a synchronize and a tiny allocation tell."""
        if self.ctx is None:
            return None
        try:
            self.ctx.synchronize()
            self.drv.mem_alloc(4).free()
        except self.drv.Error as exc:
            return f"the CUDA context is lost: {exc}"
        return None

    # -- compile ------------------------------------------------------------------------

    def _compile_library(self, variant: Variant, params, dtype) -> CompiledKernel:
        """Library reference lines (cuBLAS): nothing to compile; the handle is made here."""
        if variant.library == "cublaslt":
            return self._compile_cublaslt(variant, params, dtype)
        if variant.library != "cublas":
            raise BackendError(f"the cuda backend knows no library '{variant.library}'")
        if dtype not in variant.dtypes:
            raise BackendError(f"{variant.name} runs {', '.join(variant.dtypes)} only, not {dtype}")
        from engine.measure.backends.cublas import CublasGemm, data_types  # noqa: PLC0415

        types = data_types(dtype, self._out_dtype(dtype))   # before the handle: a wrong type says so
        if self._cublas is None:
            self._cublas = CublasGemm()
        self._cublas.ensure()  # raises LibraryUnavailable (a skip) without nvmath/cuBLAS
        routine = variant.sources["cuda"]
        self._cublas.compute_type(routine)  # validates the routine name
        report = (f"{variant.label(params)} {dtype} on {self.arch}: "
                  f"{self._cublas.describe(routine, *types)}")
        return CompiledKernel(variant, dict(params), dtype, ("cublas", routine, types), report)

    def _compile_cublaslt(self, variant: Variant, params, dtype) -> CompiledKernel:
        """cuBLASLt's FP8 and int8 lines: the handle and a workspace, made here."""
        from engine.measure.backends.cublas import (LT_WORKSPACE_BYTES, CublasLt,  # noqa: PLC0415
                                                    LibraryUnavailable, lt_types)
        if dtype not in variant.dtypes:
            raise BackendError(f"{variant.name} runs {', '.join(variant.dtypes)} only, not {dtype}")
        types = lt_types(dtype, self._out_dtype(dtype))   # before the handle: a wrong type says so
        if self.type_spec.layout is not Layout.NK:
            raise LibraryUnavailable(f"cuBLASLt's {types.family} GEMM takes B as N×K only (the "
                                     "TN form); run with --layout nk")
        if self._cublaslt is None:
            self._cublaslt = CublasLt()
        self._cublaslt.ensure()
        if self._lt_buffers is None:
            try:
                self._lt_buffers = (self.drv.mem_alloc(LT_WORKSPACE_BYTES),)
            except self.drv.Error as exc:
                raise BackendError(f"cuBLASLt's workspace could not be allocated: {exc}") from None
        report = (f"{variant.label(params)} {dtype} on {self.arch}: "
                  f"{self._cublaslt.describe(types)}")
        return CompiledKernel(variant, dict(params), dtype,
                              ("cublaslt", variant.sources["cuda"], types), report)

    def _dynamic_shared(self, variant: Variant, params) -> int:
        """Bytes of dynamic shared memory (the kernel file's ``launch.shared``), else 0."""
        return int(variant.dynamic_shared(params)) if variant.dynamic_shared else 0

    def _grow(self, buf, nbytes: int, what: str):
        """A fresh device buffer of ``nbytes`` in place of ``buf`` (freed first, if any)."""
        if buf is not None:
            buf.free()
        try:
            return self.drv.mem_alloc(max(nbytes, 4))
        except self.drv.Error as exc:
            raise BackendError(f"allocating {what} ({nbytes / 2**20:.1f} MiB) failed: {exc}") from None

    def _scratch(self, ws, nbytes: int):
        """A device buffer of at least ``nbytes`` kept on the workspace (freed in release)."""
        if getattr(ws, "scratch_bytes", 0) < nbytes:
            old, ws.scratch, ws.scratch_bytes = getattr(ws, "scratch", None), None, 0
            ws.scratch = self._grow(old, nbytes, "scratch")
            ws.scratch_bytes = nbytes
            ws.tma_key = None  # tensor maps written into the old scratch are gone
        return ws.scratch

    def _kernel_workspace(self, kernel: CompiledKernel, ws, m: int, n: int, k: int, zero: bool = False):
        """The workspace argument of a kernel with ``launch.workspace`` at a shape: a device
        pointer to at least that many bytes, zero when allocated or when another compiled
        kernel used it last (or ``zero``: before a verified run, so that no earlier launch's
        leftovers can decide it); a null pointer where the kernel asks for 0 bytes."""
        nbytes = kernel.workspace_plans.get((m, n, k))
        if nbytes is None:
            nbytes = kernel.workspace_plans[(m, n, k)] = kernel.variant.workspace_bytes(
                kernel.params, m, n, k, self.multiprocessors)
        if nbytes == 0:
            return np.intp(0)
        if ws.kernel_workspace_bytes < nbytes:
            old, ws.kernel_workspace, ws.kernel_workspace_bytes = ws.kernel_workspace, None, 0
            ws.kernel_workspace = self._grow(old, nbytes, "the kernel's workspace")
            ws.kernel_workspace_bytes = nbytes
            ws.kernel_workspace_owner = None
        if zero or ws.kernel_workspace_owner is not kernel:
            self.drv.memset_d8(ws.kernel_workspace, 0, ws.kernel_workspace_bytes)
            ws.kernel_workspace_owner = kernel
        return ws.kernel_workspace

    def _nvcc_job(self, variant: Variant, params, dtype) -> tuple[tuple, list[str], str]:
        """(cache key, nvcc options, target arch) of one kernel build on this device.

        The key's first two parts are the kernel's text and what it includes: a user's
        kernel as its run read them (engine.kernels.sources), the lab's own file as it is now."""
        path = variant.source_path("cuda")
        options = nvcc_options(variant, params, dtype, self._out_dtype(dtype),  # -DOUT, -DB_NK:
                               str(self.type_spec.layout))                        # in the key
        arch = target_arch(variant, self.arch)  # sm_90a for wgmma kernels, else the device's
        try:     # never a hang: the file and what it includes are regular files, or a message
            if is_builtin_file(path):
                text, includes = read_kernel_text(path), None
            else:
                text = variant.source_text("cuda")
                includes = tuple((f.path, f.text) for f in sources.includes_of(path, text))
            check_includes(text, path, path.parent, [ROOT / "cuda"])
        except (KernelFileError, sources.SourceError) as exc:
            raise BuildError(str(exc)) from None
        return (text, includes, _helper_headers_text(), tuple(options), arch), options, arch

    def _build(self, variant: Variant, params, dtype) -> tuple[tuple, str]:
        """Compile (or find in the cache) one kernel; returns (key, target arch). A build
        that failed is not run again: its error is raised again.

        Thread-safe apart from the dict store, which the GIL makes atomic: precompile
        calls it from a pool, since each build is an nvcc process.
        """
        key, options, arch = self._nvcc_job(variant, params, dtype)
        if key not in self._cubins:
            try:
                self._cubins[key] = self._nvcc(variant.source_path("cuda"), key, options, arch)
            except BackendError as exc:
                # The same text fails the same way at every size (a macro bomb would cost
                # the whole time limit each time).
                self._cubins[key] = exc
        built = self._cubins[key]
        if isinstance(built, BackendError):
            raise built.with_traceback(None)
        return key, arch

    def _nvcc(self, path: Path, key: tuple, options: list[str], arch: str) -> tuple[bytes, str]:
        """The build ``key`` describes from the disk cache (engine.measure.build_cache),
        else from nvcc (:meth:`_run_nvcc`), then kept there; a failed build raises and is
        not kept."""
        disk_key = self._disk_key(path, key)
        if disk_key is None:
            return self._same_text_or_nvcc(path, key, options, arch)
        hit = self._disk.get(disk_key)
        if hit is None:
            # Another process building the same kernel now: wait for it, not nvcc twice.
            with self._disk.building(disk_key, self.build_timeout_s):
                hit = self._disk.get(disk_key)
                if hit is None:
                    cubin, log = self._same_text_or_nvcc(path, key, options, arch)
                    self._disk.put(disk_key, cubin, log)
                    return cubin, log
        return hit.cubin, hit.log

    def _same_text_or_nvcc(self, path: Path, key: tuple, options: list[str],
                           arch: str) -> tuple[bytes, str]:
        """The cubin of a build whose device text (:func:`device_text_digest`) an earlier
        build had, from memory or the disk cache; else nvcc's, kept under that digest too.
        Only for the lab's own files (a user's kernel is built from a staged copy)."""
        text_key = device_text_digest(path, options, arch, self.build_timeout_s) \
            if key[1] is None else None
        if text_key is None:
            return self._run_nvcc(path, key, options, arch)
        with self._text_locks_guard:      # precompile's threads: one nvcc a device text
            lock = self._text_locks.setdefault(text_key, threading.Lock())
        with lock:
            built = self._by_device_text.get(text_key)
            if built is None and self._disk is not None:
                hit = self._disk.get(text_key)
                built = (hit.cubin, hit.log) if hit is not None else None
            if built is None:
                built = self._run_nvcc(path, key, options, arch)
                if self._disk is not None:
                    self._disk.put(text_key, *built)
            self._by_device_text[text_key] = built
        return built

    def _disk_key(self, path: Path, key: tuple) -> str | None:
        """The disk cache's name of a build: the in-memory ``key`` (text, includes, helper
        headers, options, arch), the file's path (``-lineinfo`` records it), the checkout
        (``-I`` its cuda/), the headers beside a lab file (``key`` holds cuda/*.cuh only)
        and the nvcc that builds it, with its version. None: no disk cache for it."""
        if self._disk is None:
            return None
        try:
            nvcc = find_nvcc()
        except BackendError:
            return None
        version = nvcc_version(nvcc)
        if version is None:
            return None
        beside = None
        if key[1] is None:
            try:
                beside = tuple((f.path, f.text) for f in sources.find_includes(path, key[0]))
            except sources.SourceError:
                return None
        return build_cache.digest(str(path), str(ROOT), key, beside, nvcc, version)

    def _run_nvcc(self, path: Path, key: tuple, options: list[str], arch: str) -> tuple[bytes, str]:
        """nvcc on the build ``key`` describes: the lab's own file where it is; a user's
        kernel staged (engine.kernels.sources.staged) from the text and includes the run read, its
        messages naming the user's files."""
        text, includes = key[0], key[1]
        if includes is None:
            return nvcc_cubin(path, options, arch, timeout=self.build_timeout_s)
        files = tuple(sources.SourceFile(p, t) for p, t in includes)
        with sources.staged(path, text, files) as st:
            try:
                cubin, log = nvcc_cubin(st.main, [*options, f"-I{st.folder}"], arch,
                                        timeout=self.build_timeout_s)
            except BackendError as exc:
                raise type(exc)(st.user_paths(str(exc))) from None
            return cubin, st.user_paths(log)

    def precompile(self, jobs, workers: int | None = None) -> tuple[int, float]:
        """Build many kernels at once, one nvcc process per core (a sweep over the ladder
        has ~100 of them). Failures are left for :meth:`compile` to report on their row.

        Returns (kernels built, seconds).
        """
        todo = []
        for variant, params, dtype in jobs:
            if variant.library or variant.is_triton:   # no nvcc build: a library, or Triton's own
                continue
            try:
                key, _options, _arch = self._nvcc_job(variant, params, dtype)
            except BackendError:
                continue
            if key not in self._cubins and all(key != k for k, *_ in todo):
                todo.append((key, variant, params, dtype))
        if not todo:
            return 0, 0.0
        t0 = time.perf_counter()
        # Within the engine's thread budget: the window keeps its cores.
        workers = workers or cpus.build_workers(len(todo))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(self._build, v, p, d) for _key, v, p, d in todo]
            for fut in futures:
                try:
                    fut.result()
                except BackendError:
                    pass  # reported by compile() on the run's own row
        return len(todo), time.perf_counter() - t0

    def _compile_triton(self, variant: Variant, params, dtype) -> CompiledKernel:
        """A .py kernel: imported first in a child process (engine.measure.triton_kernels),
        then here; Triton compiles it for this device at its first launch of each class of
        arguments (the kernel's registers, spills and shared memory are reported then), in
        the run's types (A and B in ``dtype``, C in the run's output type) and layout."""
        from engine.measure import triton_kernels as tk  # noqa: PLC0415  (optional)
        why = tk.unavailable()
        if why:
            raise BackendError(f"{variant.name}: {why}")
        if os.environ.get(tk.INTERPRET_ENV) == "1":
            raise BackendError(f"{variant.name}: {tk.INTERPRET_ENV}=1 is set in this process: "
                               "Triton would interpret the kernel on the host, not compile it")
        if dtype not in variant.dtypes:
            raise BackendError(f"{variant.name} runs {', '.join(variant.dtypes)} only, not {dtype}")
        # the pointers' types and B's strides as the run has them (one kernel, both layouts)
        types = TypeSpec(dtype, self._out_dtype(dtype), self.type_spec.layout)
        path, text = variant.source_path("cuda"), variant.source_text("cuda")
        probe = tk.probe_file(path, text, variant, min(self.build_timeout_s, tk.IMPORT_TIMEOUT_S))
        if not probe.ok:
            raise BuildError(probe.problem)
        try:
            handle = tk.GpuTritonKernel(variant, params, tk.load_entry(path, text, variant.entry),
                                        types)
        except tk.TritonError as exc:
            raise BuildError(str(exc)) from None
        return CompiledKernel(variant, dict(params), dtype, handle=handle,
                              report=f"{variant.label(params)}: Triton {self._triton_version()}",
                              max_threads=1024)

    @staticmethod
    def _triton_version() -> str:
        import triton  # noqa: PLC0415
        return triton.__version__

    @staticmethod
    def _check_entries(variant: Variant, path: Path, text: str, cubin: bytes) -> None:
        """:class:`BuildError` (at the file and line) when the cubin holds no kernel named
        as the header's ``entry`` (or its pre-pass's), or one whose arguments are not
        those of the header's ``kind``: said before the driver's "named symbol not found"
        or a launch with the wrong arguments."""
        kernels = cubin_kernels(cubin)
        if kernels is None:
            return
        if variant.entry not in kernels:
            raise BuildError(missing_entry(variant, path, text, list(kernels)))
        wrong = argument_mismatch(variant, kernels[variant.entry], variant.workspace is not None,
                                  takes_scale(variant))
        if wrong:
            raise BuildError(f"{path}:{entry_line(text, variant.entry)}: {wrong}")
        pre = variant.prepass
        if pre is not None and pre.entry not in kernels:
            raise BuildError(f"{path}:{entry_line(text, pre.entry)}: the kernel file defines no "
                             f"pre-pass kernel named '{pre.entry}' "
                             f"(it defines: {', '.join(kernels) or 'no kernel at all'})")

    def compile(self, variant: Variant, params, dtype) -> CompiledKernel:
        if variant.library:
            return self._compile_library(variant, params, dtype)
        if variant.is_triton:
            return self._compile_triton(variant, params, dtype)
        path = variant.source_path("cuda")
        key, arch = self._build(variant, params, dtype)
        if key in self._kernels:
            return self._kernels[key]
        cubin, ptxas = self._cubins[key]
        self._check_entries(variant, path, key[0], cubin)
        try:
            module = self.drv.module_from_buffer(cubin)
            fn = module.get_function(variant.entry)
        except self.drv.Error as exc:
            raise BackendError(f"loading {path.name} failed: {exc}") from None
        fa = self.drv.function_attribute
        dyn = self._dynamic_shared(variant, params)
        if dyn > 48 * 1024:  # opt in above the default 48 KB per block
            try:
                fn.set_attribute(fa.MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn)
            except self.drv.Error as exc:
                raise BackendError(f"{variant.label(params)} needs {dyn} B of dynamic shared "
                                   f"memory, which this device refuses: {exc}") from None
        regs = fn.get_attribute(fa.NUM_REGS)
        shared = fn.get_attribute(fa.SHARED_SIZE_BYTES)
        local = fn.get_attribute(fa.LOCAL_SIZE_BYTES)
        max_threads = fn.get_attribute(fa.MAX_THREADS_PER_BLOCK)
        sig = ("PPii" if variant.kind == "aat" else "PPPiii") + ("f" if takes_scale(variant) else "")
        pre = variant.prepass
        sig = sig + "P" if variant.workspace is not None else sig
        if pre and pre.maps_in == "params":   # the tensor maps first, 128 bytes each
            count = len(pre.maps) + len(arg_codes(sig))
            sig = param_signature(sig, len(pre.maps), kernel_param_offsets(cubin, variant.entry, count))
        fn.prepare(sig)
        handle = (module, fn)
        if pre:  # a second entry of the same module, launched right before fn (_launch)
            try:
                pre_fn = module.get_function(pre.entry)
            except self.drv.Error as exc:
                raise BackendError(f"loading {path.name}:{pre.entry} failed: {exc}") from None
            pre_fn.prepare("PPPiii")
            handle = (module, fn, pre_fn)
        report = (f"{variant.label(params)} {dtype} on {arch}: {regs} registers, "
                  f"{shared} B shared, {local} B local (spills), max {max_threads} threads/block")
        if dyn:
            report += f", {dyn} B dynamic shared"
        lines = [ln.strip() for ln in ptxas.splitlines() if "ptxas" in ln and ("Used" in ln or "spill" in ln)]
        if lines:
            report += "\n  " + "\n  ".join(lines)
        ck = CompiledKernel(variant, dict(params), dtype, handle, report,
                            registers=regs, shared_bytes=shared, local_bytes=local,
                            max_threads=max_threads)
        self._kernels[key] = ck
        return ck

    # -- memory -------------------------------------------------------------------------

    def _out_dtype(self, dtype: str) -> str | None:
        """C's type for a build of ``dtype`` inputs: the run's output type where they are a
        tensor-core type (16-bit floats: float32 or the input type; FP8: bfloat16 or
        float32; int8: int32), else None (C has the input type)."""
        spec = self.type_spec
        if spec.element.is_low_precision and str(spec.element) == dtype:
            return str(spec.output)
        return None

    def prepare(self, a, b) -> Workspace:
        drv = self.drv
        spec = self.type_spec
        if spec.element.is_low_precision and a.dtype != spec.element.numpy_dtype:
            raise BackendError(f"the inputs are {a.dtype}, but the run is {spec.element}: "
                               "never uploaded as another type")
        ws = Workspace(a, b)
        if spec.element.is_low_precision:
            ws.dtype = spec.output.numpy_dtype
        start, end = drv.Event(), drv.Event()
        try:
            ws.a = drv.mem_alloc(a.nbytes)
            if b is not None:
                ws.b = drv.mem_alloc(b.nbytes)
            start.record()
            drv.memcpy_htod(ws.a, device_words(a))
            if b is not None:      # B as N×K where the run says so (the kernels built B_NK)
                drv.memcpy_htod(ws.b, device_words(np.ascontiguousarray(b.T)
                                                   if spec.layout is Layout.NK else b))
            end.record()
            end.synchronize()
        except drv.Error as exc:
            self.release(ws)
            raise BackendError(f"uploading the inputs failed: {exc}") from None
        ws.upload_ms = start.time_till(end)
        return ws

    def ensure_output(self, ws, shape) -> None:
        if ws.c_shape != tuple(shape):
            if ws.c is not None:
                ws.c.free()
                ws.c = None
            nbytes = int(np.prod(shape)) * ws.dtype.itemsize
            try:
                ws.c = self.drv.mem_alloc(nbytes)
            except self.drv.Error as exc:
                raise BackendError(f"allocating C ({nbytes / 2**20:.1f} MiB) failed: {exc}") from None
            ws.c_shape = tuple(shape)

    def measure_copy_gbps(self) -> float | None:
        drv = self.drv
        nbytes = min(COPY_BYTES, self.free_memory() // 8) // 4 * 4
        if nbytes < 2**20:
            return None
        try:
            src, dst = drv.mem_alloc(nbytes), drv.mem_alloc(nbytes)
        except drv.Error:
            return None
        def copy_ms() -> float:
            e0, e1 = drv.Event(), drv.Event()
            e0.record()
            drv.memcpy_dtod(dst, src, nbytes)
            e1.record()
            e1.synchronize()
            return e0.time_till(e1)

        try:
            drv.memset_d32(src, 0x3F800000, nbytes // 4)
            return copy_bandwidth(nbytes, copy_ms)
        except drv.Error as exc:
            raise BackendError(f"the copy-bandwidth probe failed: {exc}") from None
        finally:
            src.free()
            dst.free()

    def poison_output(self, ws) -> None:
        count = int(np.prod(ws.c_shape))
        if ws.dtype.itemsize == 2:            # FP16/BF16 C: that type's NaN in every element
            self.drv.memset_d16(ws.c, half_poison_bits(ws.dtype), count)
        else:
            pattern = int(np.uint32(INT_POISON.view(np.uint32))) if np.issubdtype(ws.dtype, np.integer) \
                else FLOAT_POISON_BITS
            self.drv.memset_d32(ws.c, pattern, count)
        self.ctx.synchronize()

    def release(self, ws) -> None:
        for name in ("a", "b", "c"):
            buf = getattr(ws, name)
            if buf is not None:
                buf.free()
                setattr(ws, name, None)
        if getattr(ws, "scratch", None) is not None:
            ws.scratch.free()
            ws.scratch, ws.scratch_bytes = None, 0
            ws.tma_key = None
        if ws.kernel_workspace is not None:
            ws.kernel_workspace.free()
            ws.kernel_workspace, ws.kernel_workspace_bytes = None, 0
            ws.kernel_workspace_owner = None
        ws.c_shape = None

    # -- launches -----------------------------------------------------------------------

    def _launch(self, kernel: CompiledKernel, ws: Workspace, m, n, k, stream=None,
                zero_workspace: bool = False):
        v = kernel.variant
        if v.library == "cublaslt":
            from engine.measure.backends.cublas import LT_WORKSPACE_BYTES  # noqa: PLC0415
            (workspace,) = self._lt_buffers
            self._cublaslt.gemm(ws.a, ws.b, ws.c, m, n, k, kernel.handle[2],
                                ws.scale, int(workspace), LT_WORKSPACE_BYTES)
            return
        if v.library:
            _lib, routine, types = kernel.handle
            self._cublas.gemm(routine, ws.a, ws.b, ws.c, m, n, k, *types,
                              b_nk=self.type_spec.layout is Layout.NK)
            return
        if v.is_triton:
            # The engine's buffers by address on the engine's stream (0: the null stream,
            # as pycuda's launches without one); Triton's launcher adds no copy.
            # B lies as the run's layout says (prepare uploads it N×K for nk); FP8's
            # scale_a·scale_b goes after K, as for the CUDA FP8 kernels.
            mats = (ws.a, ws.c) if v.kind == "aat" else (ws.a, ws.b, ws.c)
            kernel.handle.launch(tuple(int(x) for x in mats), m, n, k,
                                 stream.handle if stream is not None else 0,
                                 scale=ws.scale)
            return
        (gx, gy), (bx, by) = v.launch_geometry(kernel.params, m, n, k, self.multiprocessors)
        if kernel.max_threads and bx * by > kernel.max_threads:
            raise BackendError(f"block {bx}×{by} exceeds this kernel's limit of {kernel.max_threads}")
        fn = kernel.handle[1]
        if v.kind == "aat":
            args = (ws.a, ws.c, np.int32(m), np.int32(k))
        else:
            args = (ws.a, ws.b, ws.c, np.int32(m), np.int32(n), np.int32(k))
        pre = v.prepass
        if pre and pre.applies(kernel.params, m, n, k):
            scratch_bytes, ((px, py), (pbx, pby)), maps = self._prepass_plan(kernel, m, n, k)
            scratch = self._scratch(ws, scratch_bytes)
            if px > 0 and py > 0:    # a grid of no blocks: nothing to prepare at this shape
                kernel.handle[2].prepared_async_call((px, py, 1), (pbx, pby, 1), stream, ws.a, ws.b,
                                                     scratch, np.int32(m), np.int32(n), np.int32(k))
            args = (ws.a, scratch, ws.c, np.int32(m), np.int32(n), np.int32(k))
            if maps is not None and pre.maps_in == "scratch":
                self._write_tensor_maps(ws, scratch, maps)
            else:
                if maps is not None:     # maps_in = "params": the maps are arguments
                    args = (*self._tensor_map_args(ws, scratch, maps[1]), *args)
                if px > 0 and py > 0:
                    ws.tma_key = None    # this pre-pass may write where another kernel's maps lie
        if takes_scale(v):               # C = scale_a·scale_b·A·B: the product, after K
            args = (*args, np.float32(ws.scale))
        if v.workspace is not None:
            args = (*args, self._kernel_workspace(kernel, ws, m, n, k, zero_workspace))
        dyn = self._dynamic_shared(v, kernel.params)
        if dyn:
            fn.prepared_async_call((gx, gy, 1), (bx, by, 1), stream, *args, shared_size=dyn)
        else:
            fn.prepared_async_call((gx, gy, 1), (bx, by, 1), stream, *args)

    def _prepass_plan(self, kernel, m: int, n: int, k: int):
        """(scratch bytes, geometry, tensor maps or None) of a kernel's pre-pass at a shape,
        worked out from its header once (not on every timed launch)."""
        plan = kernel.prepass_plans.get((m, n, k))
        if plan is None:
            # NK, OB: the pre-pass's expressions see B's layout (a map of B differs with it)
            # and the bytes of C's elements (a map of C differs with them)
            pre = kernel.variant.prepass
            spec = getattr(self, "type_spec", None)
            p = {**kernel.params, "NK": int(spec is not None and spec.layout is Layout.NK),
                 "OB": spec.output.itemsize if spec is not None else 4}
            plan = kernel.prepass_plans[(m, n, k)] = (
                pre.scratch_bytes(p, m, n, k), pre.geometry(p, m, n, k, self.multiprocessors),
                pre.tensor_maps(p, m, n, k))
        return plan

    @staticmethod
    def _map_bases(ws, scratch) -> dict[str, int]:
        """The device address each map base names (0 for a buffer this run lacks)."""
        return {"a": int(ws.a), "b": int(ws.b) if ws.b is not None else 0,
                "c": int(ws.c) if ws.c is not None else 0, "scratch": int(scratch)}

    def _encode_tensor_maps(self, ws, bases, maps) -> list[bytes]:
        """The 128-byte maps: each MapSpec encoded from its base's device address (``bases``,
        :meth:`_map_bases`; :func:`encode_tensor_map_2d`)."""
        if any(t.base == "b" for t in maps) and ws.b is None:
            raise BackendError("a tensor map starts from B, but this run has no B (C = A·Aᵀ)")
        if any(t.base == "c" for t in maps) and ws.c is None:
            raise BackendError("a tensor map starts from C, but no output buffer is allocated yet")
        return [encode_tensor_map_2d(bases[t.base] + t.offset, t.dim0, t.dim1, t.stride, t.box0,
                                     t.box1, t.elem, t.swizzle) for t in maps]

    def _tensor_map_args(self, ws, scratch, maps) -> tuple[bytes, ...]:
        """The maps as the main kernel's first arguments (``maps_in = "params"``), encoded
        only when the buffers or the maps differ from the last launch's on this workspace."""
        bases = self._map_bases(ws, scratch)
        key = (*bases.values(), tuple(maps))
        cached = getattr(ws, "tma_args", None)
        if cached is None or cached[0] != key:
            cached = ws.tma_args = (key, tuple(self._encode_tensor_maps(ws, bases, maps)))
        return cached[1]

    def _write_tensor_maps(self, ws, scratch, spec) -> None:
        """``spec``: the pre-pass's tensor maps at this shape (:meth:`Prepass.tensor_maps`):
        (byte offset in the scratch, [MapSpec(base "a" | "b" | "c" | "scratch", byte offset,
        dim0, dim1, row stride bytes, box0, box1, elem, swizzle), ...]); each map is encoded
        (:func:`encode_tensor_map_2d`) and the 128-byte maps are copied, back to back, to
        scratch + offset. Done only when the buffers or the maps differ from the last ones
        written into this scratch (not on every timed launch). The maps themselves are the
        key, not the kernel's parameters: two kernels with the same parameters
        (``stages=4, persist=1``) at the same shape have different maps, and the second
        once ran with the first's (an illegal instruction, or the wrong box, on the GPU)."""
        offset, maps = spec
        bases = self._map_bases(ws, scratch)
        key = (*bases.values(), offset, tuple(maps))
        if getattr(ws, "tma_key", None) == key:
            return
        blobs = self._encode_tensor_maps(ws, bases, maps)
        self.drv.memcpy_htod(int(scratch) + offset, np.frombuffer(b"".join(blobs), dtype=np.uint8))
        ws.tma_key = key

    def _check(self, what: str) -> None:
        try:
            self.ctx.synchronize()
        except self.drv.Error as exc:
            raise BackendError(f"{what} failed: {exc}") from None

    def run_once(self, kernel, ws, m, n, k) -> np.ndarray:
        self._launch(kernel, ws, m, n, k, zero_workspace=True)
        self._check(f"launch of {kernel.variant.label(kernel.params)}")
        return self._read_c(ws)

    def _read_c(self, ws) -> np.ndarray:
        """C copied to the host in its type (16-bit types through their raw words)."""
        out = np.empty(ws.c_shape, dtype=ws.dtype)
        self.drv.memcpy_dtoh(device_words(out), ws.c)
        return out

    def profile_launch(self, kernel, ws, m, n, k) -> None:
        """One launch inside a profiler range (cuProfilerStart/Stop): what ``ncu
        --profile-from-start off`` profiles, and nothing else of this process."""
        self.drv.start_profiler()
        try:
            self._launch(kernel, ws, m, n, k)
            self._check(f"the profiled launch of {kernel.variant.label(kernel.params)}")
        finally:
            self.drv.stop_profiler()

    def _flush_l2(self) -> None:
        if self._flush is None:
            l2 = (self.info.l2_bytes if self.info else None) or 64 * 2**20
            self._flush_bytes = 2 * l2  # writing twice the L2 evicts A, B and C from it
            self._flush = self.drv.mem_alloc(self._flush_bytes)
        self.drv.memset_d32_async(self._flush, 0, self._flush_bytes // 4)

    def timing_note(self) -> str:
        return self._timing_note

    def loop_conditions(self) -> LoopConditions:
        """Clocks, power, temperature, throttle reasons and energy of the last timed loop
        (empty without NVML)."""
        return self._conditions

    def _stream_hold(self):
        """The :class:`StreamHold` of this context, or None where it cannot be made (then
        ``hold_note`` says why and launches are timed as the host issues them)."""
        if self._hold is None:
            from engine.measure.backends.stream_hold import StreamHold  # noqa: PLC0415
            try:
                self._hold = StreamHold(self.drv)
            except (self.drv.Error, AttributeError, TypeError) as exc:
                self._hold = False
                self.hold_note = f"timed launches are not held back to back: {exc}"
        return self._hold or None

    def time_launches(self, kernel, ws, m, n, k, warmup, repeats, cold, budget_s,
                      should_stop=lambda: False, noise=None) -> list[float]:
        drv = self.drv
        for _ in range(warmup):
            self._launch(kernel, ws, m, n, k)
        self._check("warm-up")
        hold = self._stream_hold()
        self._timing_note = self.hold_note
        timeouts = hold.timeouts if hold is not None else 0
        pairs = []
        self._conditions = LoopConditions()
        sampler = LoopSampler(self._monitor)   # its own thread: no NVML call among the events
        sampler.__enter__()
        try:
            # Batches between host syncs, so that a time budget can be honoured without a host
            # sync between every pair of launches. Each batch is queued behind the stream hold
            # (stream_hold.py) and released at once, so its launches run back to back and each
            # event pair times its launch on the GPU, not the host's way of issuing it.
            # The stop rule looks at each launch's own time, after each batch's sync.
            loop = self.last_timing = TimingLoop(repeats, budget_s, noise)
            while loop.due():
                batch = []
                if hold is not None:
                    hold.hold()
                try:
                    for _ in range(loop.batch(HELD_BATCH)):
                        if cold:
                            self._flush_l2()
                        e0, e1 = drv.Event(), drv.Event()
                        e0.record()
                        self._launch(kernel, ws, m, n, k)
                        e1.record()
                        batch.append((e0, e1))
                finally:
                    if hold is not None:
                        hold.release()
                try:
                    batch[-1][1].synchronize()
                except drv.Error as exc:
                    raise BackendError(f"timed launches failed: {exc}") from None
                if hold is not None and hold.timed_out():
                    self._timing_note = (f"the stream hold timed out in {hold.timeouts - timeouts} "
                                         "batch(es): their first launches may include host time")
                pairs.extend(batch)
                for e0, e1 in batch:
                    loop.add(e0.time_till(e1))
                if should_stop():
                    loop.cancel()
        finally:
            sampler.__exit__(None, None, None)
        self._conditions = sampler.result
        self._check("timed launches")
        return loop.times

    def timing_mode(self) -> TimingMode:
        return TimingMode.HELD if self._hold else TimingMode.EVENTS

    def read_output(self, ws) -> np.ndarray:
        self._check("the timed launches")
        return self._read_c(ws)
