"""NVML conditions of a timed loop (engine.measure.conditions) with a test double of the
pynvml API: sampling, throttle flags, energy per launch, the record fields, the paths
without NVML, and the clock lock's refusal and restore."""
from __future__ import annotations

import math
import sys
import time
import types

import pytest

from engine.measure import conditions
from engine.measure.conditions import (ClockLock, ClockMode, LoopSampler, Monitor,
                                       ThrottleReason, open_monitor)
from engine.results import derived
from engine.results.records import ResultRecord
from engine.run.runner import fill_conditions


class NVMLError(Exception):
    pass


class NVMLError_NoPermission(NVMLError):
    pass


class FakeNVML:
    """The part of pynvml the lab calls, with scripted readings."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    NVML_CLOCK_LIMIT_ID_TDP = 0xFFFFFF01
    nvmlClocksEventReasonGpuIdle = 0x1
    nvmlClocksEventReasonApplicationsClocksSetting = 0x2
    nvmlClocksEventReasonSwPowerCap = 0x4
    nvmlClocksEventReasonHwSlowdown = 0x8
    nvmlClocksEventReasonSyncBoost = 0x10
    nvmlClocksEventReasonSwThermalSlowdown = 0x20
    nvmlClocksEventReasonHwThermalSlowdown = 0x40
    nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x80
    nvmlClocksEventReasonDisplayClockSetting = 0x100

    def __init__(self, sm=(1980,), power_mw=(400_000,), reasons=(0,), energy_step_mj=500,
                 lock_error: Exception | None = None, instant_mw=None):
        self.sm, self.power_mw, self.reasons = list(sm), list(power_mw), list(reasons)
        self.instant_mw = list(instant_mw) if instant_mw is not None else None
        self.calls: list[str] = []
        self.energy, self.energy_step = 1_000_000, energy_step_mj
        self.lock_error = lock_error
        self.locked: tuple | None = None
        self.i = 0

    def _next(self, seq):
        return seq[min(self.i, len(seq) - 1)]

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        if bus != "0000:41:00.0":
            raise NVMLError("Not Found")
        return "handle"

    def nvmlDeviceGetClockInfo(self, handle, which):
        self.calls.append("clock")
        return self._next(self.sm) if which == self.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._next(self.power_mw)

    NVML_FI_DEV_POWER_INSTANT = 186

    def nvmlDeviceGetFieldValues(self, handle, ids):
        """pynvml's c_nvmlFieldValue_t, as far as the lab reads it; NotSupported (as an
        H100 driver without the field answers) unless instant readings are scripted."""
        if self.instant_mw is None or ids != [self.NVML_FI_DEV_POWER_INSTANT]:
            return [types.SimpleNamespace(nvmlReturn=3, valueType=1, value=types.SimpleNamespace(uiVal=0))]
        return [types.SimpleNamespace(nvmlReturn=0, valueType=1,
                                      value=types.SimpleNamespace(uiVal=self._next(self.instant_mw)))]

    def nvmlDeviceGetTemperature(self, handle, sensor):
        return 40 + self.i

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        value = self._next(self.reasons)
        self.i += 1                       # one sample read per call of this
        return value

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        self.energy += self.energy_step
        return self.energy

    def nvmlDeviceGetUUID(self, handle):
        return "GPU-1234"

    def nvmlSystemGetDriverVersion(self):
        return "570.1"

    def nvmlSystemGetCudaDriverVersion(self):
        return 12080

    def nvmlDeviceGetMaxClockInfo(self, handle, which):
        return 1980

    def nvmlDeviceSetGpuLockedClocks(self, handle, low, high):
        if self.lock_error:
            raise self.lock_error
        self.locked = (low, high)

    def nvmlDeviceResetGpuLockedClocks(self, handle):
        self.locked = None


def monitor(**kw) -> tuple[Monitor, FakeNVML]:
    nv = FakeNVML(**kw)
    mon, why = open_monitor("0000:41:00.0", nvml=nv)
    assert mon is not None, why
    return mon, nv


def test_sampler_takes_before_during_and_after_samples():
    mon, nv = monitor(sm=(1980, 1700, 1500, 1900), power_mw=(300_000, 480_000, 490_000, 470_000),
                      reasons=(0x1, 0x4, 0x0, 0x0), instant_mw=(90_000, 480_000, 490_000, 470_000))
    with LoopSampler(mon, period_s=0.005) as s:
        time.sleep(0.05)
    c = s.result
    assert c.samples >= 4                 # before, some during, after
    assert c.sm_clock_min_mhz == 1500 and 1500 <= c.sm_clock_median_mhz <= 1980
    # the instantaneous readings taken while it ran (the idle one before it left out)
    assert c.mem_clock_mhz == 2619 and 470 <= c.power_w <= 490
    assert c.throttle == ["sw_power_cap"]          # gpu_idle at an edge is not a cap
    assert c.throttled
    assert math.isnan(c.energy_j)         # 50 ms: shorter than the counter is good for


def test_a_short_loop_without_instant_power_has_no_power_figure(monkeypatch):
    """NVML's plain reading averages over ~1 s: a 50 ms loop would read the previous
    second's draw (an H200 loop of ffma_wide at 4096³ read 127 W against 550 W over a
    1 s budget), so there is no figure; at least a window long, the readings' median."""
    mon, nv = monitor(power_mw=(100_000, 500_000, 520_000, 510_000))
    with LoopSampler(mon, period_s=0.005) as s:
        time.sleep(0.05)
    assert math.isnan(s.result.power_w) and math.isnan(s.result.energy_j)
    monkeypatch.setattr(conditions, "POWER_AVERAGE_S", 0.01)
    mon, nv = monitor(power_mw=(100_000, 500_000, 520_000, 510_000))
    with LoopSampler(mon, period_s=0.005) as s:
        time.sleep(0.05)
    assert 500 <= s.result.power_w <= 520       # the sample before the loop left out


def test_instant_power_reading_by_its_value_type():
    mon, nv = monitor(instant_mw=(345_678,))
    assert mon.instant_power_mw() == 345_678
    sample = mon.sample()
    assert sample.power_instant and sample.power_w == pytest.approx(345.678)
    nv.instant_mw = None                          # NotSupported: the averaged reading
    sample = mon.sample()
    assert not sample.power_instant and sample.power_w == 400.0
    del FakeNVML.NVML_FI_DEV_POWER_INSTANT        # a library without the field
    try:
        assert mon.instant_power_mw() is None
    finally:
        FakeNVML.NVML_FI_DEV_POWER_INSTANT = 186


def test_energy_from_the_counter_over_a_long_loop(monkeypatch):
    monkeypatch.setattr(conditions, "ENERGY_COUNTER_MIN_S", 0.0)
    mon, nv = monitor(energy_step_mj=2000)
    with LoopSampler(mon, period_s=0.5):
        pass
    s = LoopSampler(mon, period_s=0.5)
    with s:
        pass
    c = s.result
    assert c.energy_j == pytest.approx(2.0)                           # one step of 2000 mJ
    assert c.power_w == pytest.approx(2.0 / c.loop_s)                 # the counter's mean power
    assert conditions.energy_per_launch_j(c, 1.0) == pytest.approx(c.power_w * 1e-3)


def test_energy_per_launch_is_the_loops_mean_power_times_the_median():
    c = conditions.LoopConditions(samples=3, power_w=400.0, energy_j=200.0, loop_s=0.5)
    assert conditions.energy_per_launch_j(c, 2.5) == pytest.approx(1.0)      # 400 W × 2.5 ms
    # a loop too short for the counter: no figure, not the lagging sampled power
    short = conditions.LoopConditions(samples=3, power_w=400.0, loop_s=0.01)
    assert math.isnan(conditions.energy_per_launch_j(short, 2.5))
    assert derived.gflops_per_watt(2 * 10**9, 1.0) == pytest.approx(2.0)
    assert math.isnan(derived.gflops_per_watt(2 * 10**9, math.nan))


def test_thermal_and_power_brake_flag_a_record_but_sync_boost_does_not():
    mon, _ = monitor(reasons=(0x10,))
    with LoopSampler(mon, period_s=1) as s:
        pass
    assert s.result.throttle == ["sync_boost"] and not s.result.throttled
    mon, _ = monitor(reasons=(0x40 | 0x80,))
    with LoopSampler(mon, period_s=1) as s:
        pass
    assert set(s.result.throttle) == {"hw_thermal", "hw_power_brake"} and s.result.throttled


def test_the_record_gets_the_conditions_and_gflops_per_watt(monkeypatch):
    monkeypatch.setattr(conditions, "ENERGY_COUNTER_MIN_S", 0.0)
    mon, _ = monitor(sm=(1600,), power_mw=(500_000,), reasons=(0x4,))
    with LoopSampler(mon, period_s=1) as s:
        pass
    # the loop's energy as summarize() reads it from the counter: 5 J in 10 ms, 500 W
    s.result = conditions.summarize(mon, [mon.sample()], 0, 5000, 0.01)
    rec = ResultRecord("cuda", "H200", "naive", {}, 1024, 1024, 1024, "float32", repeats=10,
                       median_ms=2.0, flops=2 * 1024**3)
    fill_conditions(rec, lambda: s.result)
    assert rec.sm_clock_min_mhz == 1600 and rec.power_w == pytest.approx(500) and rec.throttled
    assert rec.throttle == ["sw_power_cap"]
    assert rec.energy_j_per_launch == pytest.approx(1.0)              # 500 W × 2 ms
    assert rec.gflops_per_watt == pytest.approx(2 * 1024**3 / 1e9)


def test_without_nvml_nothing_is_sampled_and_nothing_fails(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)      # the package missing
    mon, why = open_monitor("0000:41:00.0")
    assert mon is None and "nvidia-ml-py" in why
    assert open_monitor("", nvml=FakeNVML())[0] is None   # OpenCL / cpu: no bus id
    mon, why = open_monitor("0000:99:00.0", nvml=FakeNVML())
    assert mon is None and "0000:99:00.0" in why
    with LoopSampler(None) as s:
        pass
    assert s.result.samples == 0 and not s.result.throttled
    rec = ResultRecord("opencl", "pocl", "naive", {}, 8, 8, 8, "float32")
    fill_conditions(rec, lambda: s.result)
    fill_conditions(rec, None)                            # a backend without NVML
    assert math.isnan(rec.power_w) and rec.throttle == [] and not rec.throttled


def test_a_driver_that_does_not_initialise(monkeypatch):
    fake = types.ModuleType("pynvml")

    def no_driver():
        raise NVMLError("Driver Not Loaded")
    fake.nvmlInit = no_driver
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    mon, why = open_monitor("0000:41:00.0")
    assert mon is None and "Driver Not Loaded" in why


def test_unsupported_readings_are_empty_not_errors():
    nv = FakeNVML()

    def unsupported(*a):
        raise NVMLError("Not Supported")
    nv.nvmlDeviceGetPowerUsage = unsupported
    nv.nvmlDeviceGetTotalEnergyConsumption = unsupported
    mon, _ = open_monitor("0000:41:00.0", nvml=nv)
    with LoopSampler(mon, period_s=1) as s:
        pass
    assert math.isnan(s.result.power_w) and math.isnan(s.result.energy_j)
    assert s.result.sm_clock_median_mhz == 1980


def test_identity():
    mon, _ = monitor()
    assert mon.identity() == {"uuid": "GPU-1234", "driver": "570.1", "cuda_driver": "12.8"}


def test_lock_clocks_locks_and_restores():
    mon, nv = monitor()
    with ClockLock(ClockMode.MAX, [mon]) as lock:
        assert nv.locked == (1980, 1980) and "1980 MHz" in lock.note
    assert nv.locked is None
    with ClockLock(ClockMode.BASE, [mon]):
        assert nv.locked == (nv.NVML_CLOCK_LIMIT_ID_TDP,) * 2
    assert nv.locked is None


def test_lock_clocks_restores_after_an_exception_and_ctrl_c():
    mon, nv = monitor()
    with pytest.raises(RuntimeError):
        with ClockLock(ClockMode.MAX, [mon]):
            raise RuntimeError("an engine crashed")
    assert nv.locked is None
    with pytest.raises(KeyboardInterrupt):
        with ClockLock(ClockMode.BASE, [mon]):
            raise KeyboardInterrupt
    assert nv.locked is None


def test_lock_clocks_refused_without_permission_names_the_fix():
    mon, nv = monitor(lock_error=NVMLError_NoPermission("Insufficient Permissions"))
    with ClockLock(ClockMode.MAX, [mon]) as lock:
        assert not lock.locked
    assert "not locked" in lock.note and "root" in lock.note and "nvidia-smi -lgc" in lock.note
    assert "goes on unlocked" in lock.note


def test_lock_clocks_without_nvml_or_not_asked():
    with ClockLock(ClockMode.MAX, []) as lock:
        pass
    assert "no GPU" in lock.note
    with ClockLock(ClockMode.NONE, []) as lock:
        pass
    assert lock.note == ""


def test_reason_names_are_the_enum_values():
    mon, _ = monitor()
    assert mon.reason_names(0x1FF) == [r.value for r in ThrottleReason]


@pytest.mark.gpu
@pytest.mark.serial  # clocks and power of the whole GPU: another test's kernels would count
def test_a_record_on_a_real_gpu_has_its_conditions(tmp_path):
    """On an NVIDIA GPU with nvidia-ml-py: clocks, power, temperature and energy filled
    and within what a GPU does; the environment block names the GPU's UUID and driver."""
    from engine.results import environment, records
    from engine.run.runner import Plan
    from tests.helpers import backend_status, require_backend, run_plan

    require_backend("cuda")
    pytest.importorskip("pynvml")
    plan = Plan(backend="cuda", items=[("tiled_any", {"block": 16})], shapes=[(2048, 2048, 2048)],
                warmup=2, repeats=200)
    recs, _events = run_plan(plan)
    (rec,) = recs
    assert rec.status == "ok", rec.error
    assert 100 < rec.sm_clock_min_mhz <= rec.sm_clock_median_mhz < 4000
    assert 100 < rec.mem_clock_mhz < 10000 and 10 < rec.power_w < 2000
    assert 0 < rec.temperature_c < 110
    assert 0 < rec.energy_j_per_launch < 10 and rec.gflops_per_watt > 0
    assert all(r in [t.value for t in ThrottleReason] for r in rec.throttle)
    info = backend_status("cuda").devices[0]
    env = environment.collect(recs, [info])
    assert env.devices[0].uuid.startswith("GPU-") and env.devices[0].driver
    back = records.load_file(records.save(recs, tmp_path / "r.csv", environment=env))
    assert back.environment.devices[0].uuid == env.devices[0].uuid
    assert back.records[0].power_w == rec.power_w
