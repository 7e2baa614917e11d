"""The conditions of a timed loop, read through NVML (``nvidia-ml-py``, imported lazily).

The GPU is found by its PCI bus id (what pycuda's ``Device.pci_bus_id()`` says), never
by its index: CUDA_VISIBLE_DEVICES and CUDA's own ordering may number it differently
from NVML.

Sampling rule (:class:`LoopSampler`): one sample right before the timed loop (after the
warm-up), one every :data:`SAMPLE_PERIOD_S` on a background thread while it runs, one
right after it; plus NVML's total-energy counter read before and after. The timing
thread makes no NVML call between its events: the sampler only reads, on its own thread.

Without NVML (OpenCL, cpu, no driver, the package missing) :func:`open_monitor` gives
None and a reason; every field of the record stays empty and nothing fails.

Clock locking (:class:`ClockLock`, ``--lock-clocks base|max``) is done by the process
that owns the run (``bench``, the window), not by an engine process: a crashed engine
cannot leave the clocks locked, and the owner restores them in a ``finally`` and at exit.
"""
from __future__ import annotations

import atexit
import enum
import math
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import Any

#: Seconds between two samples while a timed loop runs.
SAMPLE_PERIOD_S = 0.010

#: Below this loop time the energy counter (updated every few to ~100 ms, by GPU) is too
#: coarse: no energy figure then (NVML's power reading is itself a ~1 s average on an H200,
#: so a sampled power would carry the previous kernel's draw into a short loop).
ENERGY_COUNTER_MIN_S = 0.25

#: NVML's plain power reading is a moving average over about this long (an H200): a loop
#: shorter than it gets a power figure only from the instantaneous reading, where NVML
#: offers one (field NVML_FI_DEV_POWER_INSTANT), else none.
POWER_AVERAGE_S = 1.0


class ThrottleReason(str, enum.Enum):
    """NVML's clock-event (throttle) reasons, as records name them."""

    GPU_IDLE = "gpu_idle"
    APPLICATION_CLOCKS = "application_clocks"
    SW_POWER_CAP = "sw_power_cap"
    HW_SLOWDOWN = "hw_slowdown"
    SYNC_BOOST = "sync_boost"
    SW_THERMAL = "sw_thermal"
    HW_THERMAL = "hw_thermal"
    HW_POWER_BRAKE = "hw_power_brake"
    DISPLAY_CLOCKS = "display_clocks"


#: The reasons that mean a power or thermal cap held the clocks down: a record timed
#: under one of them is flagged ``throttled``.
CAP_REASONS = frozenset({ThrottleReason.SW_POWER_CAP, ThrottleReason.HW_SLOWDOWN,
                         ThrottleReason.SW_THERMAL, ThrottleReason.HW_THERMAL,
                         ThrottleReason.HW_POWER_BRAKE})

#: pynvml's bit constant (clocks-event name, older throttle name) of each reason.
_REASON_BITS = {
    ThrottleReason.GPU_IDLE: ("nvmlClocksEventReasonGpuIdle", "nvmlClocksThrottleReasonGpuIdle"),
    ThrottleReason.APPLICATION_CLOCKS: ("nvmlClocksEventReasonApplicationsClocksSetting",
                                        "nvmlClocksThrottleReasonApplicationsClocksSetting"),
    ThrottleReason.SW_POWER_CAP: ("nvmlClocksEventReasonSwPowerCap",
                                  "nvmlClocksThrottleReasonSwPowerCap"),
    ThrottleReason.HW_SLOWDOWN: ("nvmlClocksEventReasonHwSlowdown",
                                 "nvmlClocksThrottleReasonHwSlowdown"),
    ThrottleReason.SYNC_BOOST: ("nvmlClocksEventReasonSyncBoost",
                                "nvmlClocksThrottleReasonSyncBoost"),
    ThrottleReason.SW_THERMAL: ("nvmlClocksEventReasonSwThermalSlowdown",
                                "nvmlClocksThrottleReasonSwThermalSlowdown"),
    ThrottleReason.HW_THERMAL: ("nvmlClocksEventReasonHwThermalSlowdown",
                                "nvmlClocksThrottleReasonHwThermalSlowdown"),
    ThrottleReason.HW_POWER_BRAKE: ("nvmlClocksEventReasonHwPowerBrakeSlowdown",
                                    "nvmlClocksThrottleReasonHwPowerBrakeSlowdown"),
    ThrottleReason.DISPLAY_CLOCKS: ("nvmlClocksEventReasonDisplayClockSetting",
                                    "nvmlClocksThrottleReasonDisplayClockSetting"),
}


def import_nvml():
    """The ``pynvml`` module (nvidia-ml-py) initialised, or None and why not."""
    try:
        import pynvml  # noqa: PLC0415  (optional: pip install nvidia-ml-py)
    except ImportError:
        return None, "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001  (NVMLError_LibraryNotFound, DriverNotLoaded, ...)
        return None, f"NVML did not initialise ({exc})"
    return pynvml, ""


@dataclass(frozen=True)
class Sample:
    """One NVML reading; None where the device does not report that figure."""

    sm_mhz: float | None
    mem_mhz: float | None
    power_w: float | None
    temperature_c: float | None
    reasons: int | None
    power_instant: bool = False             # power_w is NVML's instantaneous reading


@dataclass
class LoopConditions:
    """What the GPU did while one timed loop ran (:class:`LoopSampler`)."""

    samples: int = 0
    sm_clock_min_mhz: float = math.nan
    sm_clock_median_mhz: float = math.nan
    mem_clock_mhz: float = math.nan
    power_w: float = math.nan               # the energy counter's mean, else the samples' median (see summarize)
    temperature_c: float = math.nan         # the highest sample
    throttle: list[str] = field(default_factory=list)
    energy_j: float = math.nan              # NaN: the counter is missing or too coarse
    loop_s: float = 0.0

    @property
    def throttled(self) -> bool:
        return any(ThrottleReason(r) in CAP_REASONS for r in self.throttle)


def _median(values) -> float:
    vals = [v for v in values if v is not None]
    return float(statistics.median(vals)) if vals else math.nan


class Monitor:
    """One GPU through NVML: samples, identity, energy, clock locking."""

    def __init__(self, nvml, handle):
        self.nvml, self.handle = nvml, handle
        self._bits: dict[ThrottleReason, int] = {}
        for reason, names in _REASON_BITS.items():
            bit = next((getattr(nvml, n) for n in names if hasattr(nvml, n)), None)
            if bit:
                self._bits[reason] = int(bit)

    def _read(self, fn_name: str, *args) -> Any:
        """One NVML query, or None where the device or the library does not offer it."""
        fn = getattr(self.nvml, fn_name, None)
        if fn is None:
            return None
        try:
            return fn(self.handle, *args)
        except Exception:  # noqa: BLE001  (NVMLError_NotSupported and its kin: not reported)
            return None

    def sample(self) -> Sample:
        nv = self.nvml
        sm = self._read("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_SM)
        mem = self._read("nvmlDeviceGetClockInfo", nv.NVML_CLOCK_MEM)
        mw, instant = self.instant_power_mw(), True
        if mw is None:
            mw, instant = self._read("nvmlDeviceGetPowerUsage"), False
        temp = self._read("nvmlDeviceGetTemperature", nv.NVML_TEMPERATURE_GPU)
        reasons = self._read("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = self._read("nvmlDeviceGetCurrentClocksThrottleReasons")
        return Sample(sm, mem, mw / 1e3 if mw is not None else None, temp, reasons,
                      power_instant=instant and mw is not None)

    def instant_power_mw(self) -> float | None:
        """NVML's instantaneous power reading in mW (field NVML_FI_DEV_POWER_INSTANT), or
        None where the library or the driver does not offer it."""
        field_id = getattr(self.nvml, "NVML_FI_DEV_POWER_INSTANT", None)
        if field_id is None:
            return None
        values = self._read("nvmlDeviceGetFieldValues", [field_id])
        try:
            v = values[0]
            if v.nvmlReturn != 0:
                return None
            # the union member that holds it, by its value type (NVML's valueType codes)
            member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal"}.get(v.valueType, "uiVal")
            mw = float(getattr(v.value, member))
        except (TypeError, IndexError, AttributeError, ValueError):
            return None
        return mw if math.isfinite(mw) and mw > 0 else None

    def energy_mj(self) -> int | None:
        return self._read("nvmlDeviceGetTotalEnergyConsumption")

    def reason_names(self, mask: int) -> list[str]:
        return [r.value for r, bit in self._bits.items() if mask & bit]

    def identity(self) -> dict[str, str]:
        """UUID, driver and the driver's CUDA version of this GPU ("" where not known)."""
        nv = self.nvml

        def text(value) -> str:
            return value.decode() if isinstance(value, bytes) else str(value or "")

        uuid = text(self._read("nvmlDeviceGetUUID"))
        try:
            driver = text(nv.nvmlSystemGetDriverVersion())
        except Exception:  # noqa: BLE001
            driver = ""
        try:
            cuda = int(nv.nvmlSystemGetCudaDriverVersion())
            cuda_text = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except Exception:  # noqa: BLE001
            cuda_text = ""
        return {"uuid": uuid, "driver": driver, "cuda_driver": cuda_text}


def open_monitor(pci_bus_id: str | None, nvml=None) -> tuple[Monitor | None, str]:
    """The :class:`Monitor` of the GPU at ``pci_bus_id`` (``0000:41:00.0``), or None and
    why not. ``nvml``: an initialised pynvml-like module (tests pass a double)."""
    if not pci_bus_id:
        return None, "the device has no PCI bus id (not an NVIDIA GPU)"
    reason = ""
    if nvml is None:
        nvml, reason = import_nvml()
        if nvml is None:
            return None, reason
    try:
        handle = nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
    except Exception as exc:  # noqa: BLE001
        return None, f"NVML does not know the GPU at {pci_bus_id} ({exc})"
    return Monitor(nvml, handle), ""


def monitors_for(devices) -> tuple[list[Monitor], list[str]]:
    """The :class:`Monitor` of each device (a DeviceInfo: its ``extra["pci_bus_id"]``), and
    for each that has none, ``"<name> #<index>: why"``: what a clock lock works on."""
    monitors, missing = [], []
    for info in devices:
        mon, why = open_monitor((info.extra or {}).get("pci_bus_id"))
        if mon is None:
            missing.append(f"{info.name} #{info.index}: {why}")
        else:
            monitors.append(mon)
    return monitors, missing


class LoopSampler:
    """Samples a :class:`Monitor` around one timed loop::

        with LoopSampler(monitor) as s:
            ...timed loop...
        s.result   # LoopConditions

    With ``monitor`` None it does nothing and ``result`` is an empty LoopConditions.
    """

    def __init__(self, monitor: Monitor | None, period_s: float = SAMPLE_PERIOD_S):
        self.monitor, self.period_s = monitor, period_s
        self.result = LoopConditions()
        self._samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._energy0: int | None = None
        self._t0 = 0.0

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            self._samples.append(self.monitor.sample())

    def __enter__(self) -> "LoopSampler":
        if self.monitor is None:
            return self
        self._samples.append(self.monitor.sample())
        self._energy0 = self.monitor.energy_mj()
        self._t0 = time.perf_counter()
        self._thread = threading.Thread(target=self._run, name="nvml-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.monitor is None:
            return
        self._stop.set()
        self._thread.join()
        loop_s = time.perf_counter() - self._t0
        energy1 = self.monitor.energy_mj()
        self._samples.append(self.monitor.sample())
        self.result = summarize(self.monitor, self._samples, self._energy0, energy1, loop_s)


def summarize(monitor: Monitor, samples: list[Sample], energy0: int | None,
              energy1: int | None, loop_s: float) -> LoopConditions:
    """The figures of a loop from its samples (see the module's sampling rule)."""
    sms = [s.sm_mhz for s in samples if s.sm_mhz is not None]
    mask = 0
    for s in samples:
        mask |= s.reasons or 0
    energy = math.nan
    if energy0 is not None and energy1 is not None and energy1 > energy0 \
            and loop_s >= ENERGY_COUNTER_MIN_S:
        energy = (energy1 - energy0) / 1e3
    power = energy / loop_s if math.isfinite(energy) else _sampled_power(samples, loop_s)
    temps = [s.temperature_c for s in samples if s.temperature_c is not None]
    return LoopConditions(
        samples=len(samples),
        sm_clock_min_mhz=float(min(sms)) if sms else math.nan,
        sm_clock_median_mhz=_median(sms),
        mem_clock_mhz=_median(s.mem_mhz for s in samples),
        power_w=power,
        temperature_c=float(max(temps)) if temps else math.nan,
        # GPU idle is left out: the samples at the loop's edges may see the GPU between launches
        throttle=[r for r in monitor.reason_names(mask) if r != ThrottleReason.GPU_IDLE.value],
        energy_j=energy, loop_s=loop_s)


def _sampled_power(samples: list[Sample], loop_s: float) -> float:
    """The loop's power where the energy counter gives none: the median instantaneous
    reading taken while it ran (the edge samples left out where there are others); NVML's
    averaged reading only for a loop at least as long as its window (else it would carry
    the previous kernel's or the idle GPU's draw); else NaN."""
    inner = samples[1:-1] if len(samples) > 2 else samples
    instant = [s.power_w for s in inner if s.power_instant and s.power_w is not None]
    if instant:
        return _median(instant)
    if loop_s >= POWER_AVERAGE_S:
        return _median(s.power_w for s in samples[1:])
    return math.nan


def energy_per_launch_j(cond: LoopConditions, median_ms: float) -> float:
    """Joules per launch: the loop's mean power from the energy counter (its energy over
    its time) × the median launch time; NaN where the loop was too short for the counter
    (:data:`ENERGY_COUNTER_MIN_S`). Not energy ÷ launches: the loop also holds the gaps
    between batches of launches (host syncs), which on an H200 added up to 25% to short
    kernels' figure; the mean power counts them at the loop's own draw instead."""
    if math.isfinite(cond.energy_j) and cond.loop_s > 0 and math.isfinite(median_ms):
        return cond.energy_j / cond.loop_s * median_ms / 1e3
    return math.nan


# --- clock locking ----------------------------------------------------------------------

class ClockMode(str, enum.Enum):
    """``--lock-clocks``: leave the clocks to the driver, or lock the SM clock at the
    base (TDP) clock or at the highest one."""

    NONE = "none"
    BASE = "base"
    MAX = "max"


class ClockLockRefused(RuntimeError):
    """The driver refused to lock the clocks; the message names the fix."""


def _lock_fix(mode: ClockMode) -> str:
    return ("run as root (or with CAP_SYS_ADMIN), or lock them yourself beforehand with "
            "`sudo nvidia-smi -lgc <MHz>,<MHz>` (`sudo nvidia-smi -rgc` resets them)"
            if mode is not ClockMode.NONE else "")


class ClockLock:
    """Locks the SM clocks of some GPUs for a run and restores them, whatever happens::

        with ClockLock(ClockMode.BASE, monitors) as lock:
            lock.note        # what was done, or why not
            ...run...

    A refusal (no permission, not supported) is no failure: the run goes on with the
    clocks unlocked (every record still carries the clocks it ran at) and ``note`` says
    why and how to fix it. The restore runs in ``__exit__`` (the end, an exception,
    Ctrl-C) and, should the process end without it, at exit (atexit); a SIGKILL of the
    owning process is the one case left, then ``nvidia-smi -rgc`` resets them.
    """

    def __init__(self, mode: ClockMode, monitors: list[Monitor]):
        self.mode, self.monitors = ClockMode(mode), list(monitors)
        self.locked: list[Monitor] = []
        self.note = ""
        #: What went wrong restoring the clocks at the end ("" messages: none).
        self.restore_problems: list[str] = []

    def __enter__(self) -> "ClockLock":
        if self.mode is ClockMode.NONE:
            return self
        if not self.monitors:
            self.note = "no GPU to lock through NVML; the clocks are left as they are"
            return self
        atexit.register(self.restore)
        notes = []
        for mon in self.monitors:
            try:
                mhz = self._lock(mon)
                self.locked.append(mon)
                notes.append(f"SM clock locked at {mhz}")
            except ClockLockRefused as exc:
                notes.append(str(exc))
        self.note = "; ".join(dict.fromkeys(notes))
        return self

    def _lock(self, mon: Monitor) -> str:
        nv = mon.nvml
        try:
            if self.mode is ClockMode.BASE:
                tdp = nv.NVML_CLOCK_LIMIT_ID_TDP
                nv.nvmlDeviceSetGpuLockedClocks(mon.handle, tdp, tdp)
                return "the base (TDP) clock"
            top = nv.nvmlDeviceGetMaxClockInfo(mon.handle, nv.NVML_CLOCK_SM)
            nv.nvmlDeviceSetGpuLockedClocks(mon.handle, top, top)
            return f"{top} MHz (the highest)"
        except Exception as exc:  # noqa: BLE001  (NVMLError_NoPermission, NotSupported, ...)
            why = ("the driver refuses it without root" if "ermission" in type(exc).__name__
                   + str(exc) else f"the driver refused it ({exc})")
            raise ClockLockRefused(f"the clocks were not locked ({self.mode.value}): {why}; "
                                   f"{_lock_fix(self.mode)}. The run goes on unlocked") from None

    def restore(self) -> list[str]:
        """Reset the locked clocks (idempotent); problems are returned, never raised."""
        problems = []
        while self.locked:
            mon = self.locked.pop()
            try:
                mon.nvml.nvmlDeviceResetGpuLockedClocks(mon.handle)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"the GPU clocks could not be reset ({exc}): "
                                "run `sudo nvidia-smi -rgc`")
        try:
            atexit.unregister(self.restore)
        except Exception:  # noqa: BLE001
            pass
        return problems

    def __exit__(self, *exc) -> None:
        self.restore_problems = self.restore()
