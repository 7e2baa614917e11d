"""Per-precision peaks and the measured copy bandwidth (engine.measure.peaks, runner.fill_ceilings)."""
import math

import pytest

from engine.measure import peaks
from engine.measure.backends.base import DeviceInfo
from engine.results.records import ResultRecord
from engine.run.runner import Plan, Sweep, fill_ceilings


def test_h100_peaks_from_units_and_clock():
    got, notes = peaks.cuda_peaks(9, 0, 132, 1980.0)
    assert got["fp32"] == pytest.approx(132 * 128 * 2 * 1.98)          # 66.9 TFLOP/s
    assert got["tf32"] == pytest.approx(132 * 2048 * 1.98)             # 535 TFLOP/s dense
    assert got["int32"] == pytest.approx(132 * 64 * 2 * 1.98)
    assert len(notes) == 6 and all("132 SMs" in n for n in notes)      # FP16/BF16, FP8, int8 too
    # No TF32 tensor cores before Ampere; unknown architectures give no figure at all.
    assert "tf32" not in peaks.cuda_peaks(7, 5, 40, 1590.0)[0]
    assert peaks.cuda_peaks(99, 0, 10, 1000.0) == ({}, [])


def _record(variant, dtype, gflops):
    return ResultRecord(backend="cuda", device="dev", variant=variant, params={}, m=8, n=8, k=8,
                        dtype=dtype, gflops=gflops)


def test_each_record_is_measured_against_its_own_arithmetic():
    dev = DeviceInfo(backend="cuda", index=0, name="dev", peak_gflops_fp32=60_000.0,
                     peak_gflops_tf32=480_000.0, peak_gops_int32=30_000.0, copy_gbps=3000.0)
    fp32, tf32, i32 = (_record("ffma_wide", "float32", 48_000.0), _record("tf32_mma", "float32", 240_000.0),
                       _record("ffma_wide", "int32", 15_000.0))
    fill_ceilings(fp32, "fp32", dev)
    fill_ceilings(tf32, "tf32", dev)
    fill_ceilings(i32, "fp32", dev)
    assert fp32.pct_of_peak == pytest.approx(80.0) and fp32.precision == "fp32"
    assert tf32.pct_of_peak == pytest.approx(50.0) and tf32.peak_gflops == 480_000.0
    assert i32.pct_of_peak == pytest.approx(50.0) and i32.precision == "int32"
    assert all(r.copy_gbps == 3000.0 for r in (fp32, tf32, i32))
    # A precision without a known peak gets none, never another precision's.
    bare = DeviceInfo(backend="cuda", index=0, name="dev", peak_gflops_fp32=60_000.0)
    t = _record("tf32_mma", "float32", 240_000.0)
    fill_ceilings(t, "tf32", bare)
    assert math.isnan(t.pct_of_peak) and math.isnan(t.peak_gflops)
    rows = dict(dev.rows())
    assert rows["Peak TF32 tensor (est.)"] == "480,000 GFLOP/s"
    assert rows["Copy bandwidth (measured)"] == "3,000 GB/s"


def test_a_sweep_measures_the_copy_bandwidth_once_and_records_it():
    sweep = Sweep()
    try:
        recs = sweep.run(Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(33, 17, 65)], repeats=2),
                         lambda ev: None)
        first = sweep.device.copy_gbps
        assert first and first > 0.1
        assert recs[0].copy_gbps == first and recs[0].precision == "fp32"
        sweep.close()
        sweep.ensure_open("cpu", 0)
        assert sweep.device.copy_gbps == first       # probed once per process
    finally:
        sweep.close()
