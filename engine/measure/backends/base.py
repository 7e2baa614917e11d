"""The interface every backend (cuda, opencl, cpu) implements.

A backend is probed from any thread (``probe`` only reads what is installed and which
devices exist) but opened, used and closed on the engine thread alone: the CUDA
backend's context belongs to that thread.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from engine.measure.peaks import copy_gbps
from engine.measure.timing import NoiseStop, TimingLoop, TimingMode
from engine.kernels.registry import Variant


#: Copy-bandwidth probe: bytes per buffer (several times any L2, so the copy streams from
#: and to memory; smaller where free memory is short) and timed copies (after one warm-up).
COPY_BYTES = 256 * 2**20
COPY_REPEATS = 9
#: Longest one kernel build may take by default (seconds): far above any real kernel's
#: (the lab's largest CUDA kernels build in under a minute), short of a build that never
#: ends (a preprocessor macro bomb). A run may set its own (Plan.build_timeout_s).
BUILD_TIMEOUT_S = 180.0


def copy_bandwidth(nbytes: int, copy_ms, repeats: int = COPY_REPEATS) -> float:
    """GB/s (bytes read + written) of a copy of ``nbytes``: ``copy_ms()`` times one copy in
    milliseconds; it runs once to warm up, then ``repeats`` times, and the median counts."""
    copy_ms()
    return copy_gbps(nbytes, float(np.median([copy_ms() for _ in range(repeats)])))


#: The arguments a kernel of each ``kind`` is launched with, in order (a CUDA kernel with
#: ``launch.workspace`` takes one more, last).
KIND_ARGS = {"gemm": ("A", "B", "C", "M", "N", "K"), "aat": ("A", "C", "M", "K")}
#: What each ``kind`` computes, in the header's words.
KIND_MEANS = {"gemm": "C = A·B", "aat": "C = A·Aᵀ"}


def entry_line(text: str, entry: str) -> int:
    """The line of ``text`` where the kernel ``entry`` is defined (its name followed by
    an opening parenthesis on a line that is no preprocessor line), else 1."""
    pattern = re.compile(r"^(?!\s*#).*\b" + re.escape(entry) + r"\s*\(", re.MULTILINE)
    m = pattern.search(text)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def _header_line(text: str, *keys: str) -> int:
    """The line of the first of ``keys`` written as ``key = ...`` in ``text``, else 1."""
    for key in keys:
        m = re.search(r"^\s*" + re.escape(key) + r"\s*=", text, re.MULTILINE)
        if m:
            return text.count("\n", 0, m.start()) + 1
    return 1


def missing_entry(variant: Variant, path, text: str, names: list[str]) -> str:
    """``file:line: message`` of a build that holds no kernel named ``variant.entry`` (at
    the header's ``entry``, else its ``name``); ``names`` are the kernels it holds (C++
    names where the file did not declare them ``extern "C"``)."""
    plain = {}
    for n in names:
        m = re.match(r"_Z(\d+)(\w+)", n)       # a C++ (mangled) name: _Z6matmulPKf...
        plain[n] = m.group(2)[:int(m.group(1))] if m else n
    shown = ", ".join(n if plain[n] == n else f"{plain[n]} (as the C++ name {n})" for n in names)
    msg = (f"the kernel file defines no kernel named '{variant.entry}' "
           f"(it defines: {shown or 'no kernel at all'})")
    if variant.entry in plain.values():
        msg += f"; declare it extern \"C\" so that '{variant.entry}' is its name"
    elif names:
        msg += f"; rename the kernel, or set entry = \"{plain[names[0]]}\" in the header"
    return f"{path}:{_header_line(text, 'entry', 'name')}: {msg}"


def argument_mismatch(variant: Variant, count: int, workspace: bool = False,
                      scale: bool = False) -> str | None:
    """Why a kernel taking ``count`` arguments cannot be launched as ``variant.kind``
    says (None when it can): a C = A·Aᵀ header on a C = A·B kernel, say. ``scale``: an FP8
    kernel's scale_a·scale_b after the sizes."""
    extra = (("scale",) if scale else ()) + (("workspace",) if workspace else ())
    pre = variant.prepass
    # maps_in = "params": the pre-pass's tensor maps come first, one argument each
    maps = (tuple(f"map{j}" for j in range(len(pre.maps)))
            if pre is not None and pre.maps_in == "params" else ())
    want = maps + KIND_ARGS.get(variant.kind, ()) + extra
    if count == len(want):
        return None
    msg = (f"kind = \"{variant.kind}\" ({KIND_MEANS.get(variant.kind, variant.kind)}) launches "
           f"{variant.entry}({', '.join(want)}), {len(want)} arguments, but the kernel "
           f"'{variant.entry}' takes {count}")
    other = next((k for k, args in KIND_ARGS.items()
                  if k != variant.kind and len(maps) + len(args) + len(extra) == count), None)
    if other is not None:
        args = ", ".join(maps + KIND_ARGS[other] + extra)
        msg += (f": that is a {KIND_MEANS[other]} kernel's ({args}); set kind = \"{other}\" "
                "in the header, or change the kernel")
    return msg


class BackendError(RuntimeError):
    """A compile, launch or memory failure; the message is shown verbatim."""


class BuildError(BackendError):
    """The kernel's source did not compile (nvcc or the OpenCL build log says why)."""


class DeviceLost(BackendError):
    """The device context cannot be used any more (CUDA's sticky errors: an illegal
    address, a trap, a misaligned access...). Only a new process can use the device
    again: an isolated engine is restarted, an in-process one stops its sweep.

    ``record`` is the item that hit it (status ``error``); ``results`` what the sweep had
    finished before it.
    """

    def __init__(self, message: str, record=None, results=None):
        super().__init__(message)
        self.record = record
        self.results = list(results or [])


@dataclass
class DeviceInfo:
    """What the device panel and the roofline need to know about one device."""

    backend: str
    index: int
    name: str
    compute_units: int | None = None       # SMs or OpenCL compute units or CPU cores
    memory_bytes: int | None = None
    clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    bus_width_bits: int | None = None
    l2_bytes: int | None = None
    compute_capability: str | None = None
    peak_gflops_fp32: float | None = None   # estimate: units × lanes × 2 × clock
    peak_gbps: float | None = None          # estimate: 2 × memory clock × bus width
    peak_gflops_tf32: float | None = None   # dense TF32 tensor cores (engine.measure.peaks)
    peak_gops_int32: float | None = None    # 32-bit integer multiply-add units
    copy_gbps: float | None = None          # measured device-to-device copy (read + write)
    peak_gflops_fp16: float | None = None   # dense FP16 tensor cores, FP32 accumulation
    peak_gflops_bf16: float | None = None   # dense BF16 tensor cores, FP32 accumulation
    peak_gflops_fp8: float | None = None    # dense FP8 tensor cores, FP32 accumulation
    peak_gops_int8: float | None = None     # dense int8 tensor cores, int32 accumulation
    notes: str = ""                         # how the estimates were derived, or why not
    extra: dict[str, Any] = field(default_factory=dict)

    def peaks(self) -> dict[str, float | None]:
        """Peak GFLOP/s (GOP/s for int32 and int8) per precision: ``fp32``, ``tf32``,
        ``int32``, ``fp16``, ``bf16``, ``fp8``, ``int8``."""
        return {"fp32": self.peak_gflops_fp32, "tf32": self.peak_gflops_tf32,
                "int32": self.peak_gops_int32, "fp16": self.peak_gflops_fp16,
                "bf16": self.peak_gflops_bf16, "fp8": self.peak_gflops_fp8,
                "int8": self.peak_gops_int8}

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs for a properties table."""
        def fmt_bytes(b):
            return "—" if b is None else (f"{b / 2**30:.1f} GiB" if b >= 2**30 else f"{b / 2**20:.1f} MiB")
        out = [("Name", self.name),
               ("Compute units", "—" if self.compute_units is None else str(self.compute_units)),
               ("Memory", fmt_bytes(self.memory_bytes)),
               ("Clock", "—" if self.clock_mhz is None else f"{self.clock_mhz:.0f} MHz"),
               ("Memory clock", "—" if self.memory_clock_mhz is None else f"{self.memory_clock_mhz:.0f} MHz"),
               ("Bus width", "—" if self.bus_width_bits is None else f"{self.bus_width_bits} bit"),
               ("L2 / cache", fmt_bytes(self.l2_bytes)),
               ("Compute capability", self.compute_capability or "—"),
               ("Peak FP32 (est.)", "—" if self.peak_gflops_fp32 is None else f"{self.peak_gflops_fp32:,.0f} GFLOP/s"),
               ("Peak TF32 tensor (est.)", "—" if self.peak_gflops_tf32 is None
                else f"{self.peak_gflops_tf32:,.0f} GFLOP/s"),
               ("Peak FP16/BF16 tensor (est.)", "—" if self.peak_gflops_fp16 is None
                else f"{self.peak_gflops_fp16:,.0f} GFLOP/s" + (
                    "" if self.peak_gflops_bf16 else " (no BF16)")),
               ("Peak int32 (est.)", "—" if self.peak_gops_int32 is None else f"{self.peak_gops_int32:,.0f} GOP/s"),
               ("Peak int8 tensor (est.)", "—" if self.peak_gops_int8 is None
                else f"{self.peak_gops_int8:,.0f} GOP/s"),
               ("Bandwidth (est.)", "—" if self.peak_gbps is None else f"{self.peak_gbps:,.0f} GB/s"),
               ("Copy bandwidth (measured)", "— (measured on the first run)" if self.copy_gbps is None
                else f"{self.copy_gbps:,.0f} GB/s")]
        if self.notes:
            out.append(("Notes", self.notes))
        return out


@dataclass
class BackendStatus:
    """Whether a backend can be used here, and if not, why."""

    name: str
    available: bool
    reason: str = ""
    devices: list[DeviceInfo] = field(default_factory=list)
    versions: str = ""


@dataclass
class CompiledKernel:
    """A compiled kernel and its resource report (registers, shared memory, spills)."""

    variant: Variant
    params: dict[str, int]
    dtype: str
    handle: Any
    report: str = ""
    registers: int | None = None
    shared_bytes: int | None = None
    local_bytes: int | None = None
    max_threads: int | None = None          # most threads per block this kernel can launch
    #: (m, n, k) → the pre-pass's scratch bytes, geometry and tensor maps at that shape.
    prepass_plans: dict = field(default_factory=dict)
    #: (m, n, k) → bytes of the kernel's workspace argument at that shape (launch.workspace).
    workspace_plans: dict = field(default_factory=dict)


class Workspace:
    """Device buffers for one input set: A, B (None for aat-only sets) and C."""

    def __init__(self, a_host: np.ndarray, b_host: np.ndarray | None):
        self.a_host, self.b_host = a_host, b_host
        self.a: Any = None
        self.b: Any = None
        self.c: Any = None
        self.c_shape: tuple[int, int] | None = None
        self.dtype = a_host.dtype
        self.upload_ms = float("nan")
        #: A kernel's workspace argument (``launch.workspace``): the buffer, its size, and the
        #: compiled kernel that used it last (another one gets it zeroed first).
        self.kernel_workspace: Any = None
        self.kernel_workspace_bytes = 0
        self.kernel_workspace_owner: Any = None
        #: FP8's per-tensor scales (C = scale_a·scale_b·A·B; 1 for other types), set by
        #: the sweep from its engine.inputs.matrices.Operands.
        self.scale_a = 1.0
        self.scale_b = 1.0
        #: The cpu backend's accumulator where numpy multiplies in another type than C's
        #: (FP32 for a half or FP8 C, float64 for int8's int32 C; None otherwise).
        self.c_acc: Any = None
        #: The cpu backend's A and B in the run's own type, B in its layout (``a``/``b`` hold
        #: FP32 copies of half and FP8 inputs, float64 of int8, for numpy): what Triton's
        #: interpreter reads.
        self.a_native: Any = None
        self.b_native: Any = None

    @property
    def scale(self) -> float:
        """What an FP8 kernel or line multiplies A·B by: scale_a·scale_b (1 otherwise)."""
        return float(self.scale_a) * float(self.scale_b)


class Backend(ABC):
    """One compute backend. Everything but ``probe`` runs on the engine thread."""

    name: str = ""
    #: The open device (set by ``open``), None before.
    info: DeviceInfo | None = None
    #: Seconds a build may take before it is stopped, where the backend can stop one (an
    #: nvcc process); the sweep sets it from its plan. A build that runs inside this
    #: process (OpenCL) is ended with its engine process instead (engine.run.engines).
    build_timeout_s: float = BUILD_TIMEOUT_S

    @property
    def multiprocessors(self) -> int | None:
        """The open device's multiprocessor count (CUDA SMs, OpenCL compute units): a kernel
        header's ``SMS``; None before ``open``."""
        return self.info.compute_units if self.info else None

    @abstractmethod
    def probe(self) -> BackendStatus: ...

    @abstractmethod
    def open(self, device_index: int) -> DeviceInfo: ...

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def free_memory(self) -> int:
        """Bytes the open device can still allocate (an estimate where not queryable)."""

    @abstractmethod
    def compile(self, variant: Variant, params: dict[str, int], dtype: str) -> CompiledKernel: ...

    @abstractmethod
    def prepare(self, a: np.ndarray, b: np.ndarray | None) -> Workspace:
        """Upload the inputs (timing the transfer into ``upload_ms``)."""

    @abstractmethod
    def ensure_output(self, ws: Workspace, shape: tuple[int, int]) -> None: ...

    @abstractmethod
    def poison_output(self, ws: Workspace) -> None:
        """Fill C with NaN (float) or a sentinel (int) so unwritten elements fail."""

    @abstractmethod
    def run_once(self, kernel: CompiledKernel, ws: Workspace, m: int, n: int, k: int) -> np.ndarray:
        """One launch, waited for, and C read back."""

    @abstractmethod
    def time_launches(self, kernel: CompiledKernel, ws: Workspace, m: int, n: int, k: int,
                      warmup: int, repeats: int, cold: bool, budget_s: float | None,
                      should_stop=lambda: False, noise: NoiseStop | None = None) -> list[float]:
        """Per-launch kernel times in ms: one event pair per launch, transfers excluded.
        The series stops by ``noise`` when given, else by ``budget_s``, else after
        ``repeats`` launches; :attr:`last_timing` then holds its :class:`TimingLoop`."""

    #: The stop rule of the last timed series (what stopped it, its launches).
    last_timing: TimingLoop | None = None

    def timing_mode(self) -> TimingMode:
        """How the last timed series was timed."""
        return TimingMode.EVENTS

    def read_output(self, ws: Workspace) -> np.ndarray:
        """C as the last launch left it, copied to the host (no launch)."""
        raise BackendError(f"the {self.name} backend cannot read C back")

    @abstractmethod
    def release(self, ws: Workspace) -> None: ...

    def timing_note(self) -> str:
        """Why this backend's last timed launches may include more than the kernels (a
        fallback the records should say), or "" where they do not."""
        return ""

    def versions(self) -> str:
        return f"numpy {np.__version__}"

    def measure_copy_gbps(self) -> float | None:
        """The device's measured copy bandwidth in GB/s (bytes read + written per second,
        :data:`COPY_BYTES`-sized buffers, median of :data:`COPY_REPEATS` copies), or None
        where the backend cannot time a copy. Called on the engine thread once per open
        device (:meth:`engine.run.runner.Sweep.ensure_open`)."""
        return None

    def max_buffer_bytes(self) -> int | None:
        """The largest single buffer the open device allocates (OpenCL's
        ``CL_DEVICE_MAX_MEM_ALLOC_SIZE``), or None where only the total bounds it."""
        return None

    def context_lost(self) -> str | None:
        """Why the open device can no longer run anything (a reason), or None. Asked after
        an item failed; backends without sticky errors never lose their context."""
        return None


MIN_BUDGET_LAUNCHES = 3
MAX_BUDGET_LAUNCHES = 100_000


def keep_timing(count: int, repeats: int, budget_s: float | None, elapsed_s: float) -> bool:
    """Whether another timed launch is due.

    With a time budget the series runs until the budget is spent (at least
    :data:`MIN_BUDGET_LAUNCHES` launches); otherwise it runs ``repeats`` launches.
    """
    if budget_s is not None:
        return count < MIN_BUDGET_LAUNCHES or (elapsed_s < budget_s and count < MAX_BUDGET_LAUNCHES)
    return count < max(repeats, 1)


#: Int32 poison: an unlikely value, so an unwritten element almost surely mismatches.
INT_POISON = np.int32(-0x5A5A5A5B)
#: Float32 poison as a bit pattern: a quiet NaN.
FLOAT_POISON_BITS = 0x7FC0DEAD
