"""The environment block of results files (engine.results.environment) through JSON and
CSV, old files (a bare list, a CSV without the block) still loading, and hostile blocks."""
from __future__ import annotations

import json
import math

import pytest

from engine.measure.backends.base import DeviceInfo
from engine.results import environment as envmod, records
from engine.results.records import ResultRecord, ResultsFileError


def recs() -> list[ResultRecord]:
    out = []
    for name, ms in (("naive", 2.0), ("tiled_any", 1.0)):
        out.append(ResultRecord("opencl", "pthread-cpu", name, {"block": 16} if name != "naive" else {},
                                64, 64, 64, "float32", warmup=3, repeats=20, median_ms=ms,
                                host="box", versions="numpy 2; pyopencl 2026", device_index=0,
                                sm_clock_min_mhz=1500.0, sm_clock_median_mhz=1700.0,
                                power_w=450.5, temperature_c=61.0,
                                throttle=["sw_power_cap", "hw_slowdown"], throttled=True,
                                energy_j_per_launch=0.9, gflops_per_watt=1.2))
    return out


def gpu() -> DeviceInfo:
    return DeviceInfo("cuda", 0, "NVIDIA H200", compute_capability="9.0",
                      extra={"uuid": "GPU-abc", "pci_bus_id": "0000:41:00.0", "driver": "570.1",
                             "cuda_driver": "12.8"})


@pytest.mark.parametrize("ext", ["json", "csv"])
def test_new_fields_and_environment_round_trip(tmp_path, ext):
    env = envmod.collect(recs(), [gpu()], envmod.TimingSettings("3", "20", "hot", "max: refused"))
    path = records.save(recs(), tmp_path / f"r.{ext}", environment=env)
    got = records.load_file(path)
    assert got.skipped == [] and got.environment_problem == ""
    assert [repr(r) for r in got.records] == [repr(r) for r in recs()]
    back = got.environment
    assert back == env
    assert back.devices[0].uuid == "GPU-abc" and back.devices[0].driver == "570.1"
    assert back.timing.clock_lock == "max: refused"
    # the kernel files the records ran, hashed
    assert any(name.endswith(".cl") for name in back.kernels) and \
        all(len(h) == 16 for h in back.kernels.values())
    assert back.app_version.startswith(envmod.APP_VERSION)
    rows = dict(back.rows())
    assert rows["Device cuda #0"].startswith("NVIDIA H200 (GPU-abc")


def test_save_without_an_environment_collects_one(tmp_path):
    path = records.save(recs(), tmp_path / "r.csv")
    env = records.load_file(path).environment
    assert env.host == "box" and env.timing.warmup == "3" and env.timing.repeats == "20"
    assert env.devices[0].name == "pthread-cpu" and env.versions == ("numpy 2; pyopencl 2026",)
    assert path.read_text().startswith("# format: 2\n# app_version: ")


def test_a_user_kernel_is_named_by_its_file_name_only(tmp_path):
    from engine.kernels import registry
    user = [v for v in registry.REGISTRY.values() if not v.library and "opencl" in v.sources][0]
    env = envmod.collect([ResultRecord("opencl", "d", user.name, {}, 8, 8, 8, "float32")])
    assert all(not name.startswith("/") for name in env.kernels)


def test_old_files_still_load(tmp_path):
    old = tmp_path / "old.json"
    old.write_text(json.dumps([records.to_dict(r) for r in recs()]))      # format 1: a list
    got = records.load_file(old)
    assert len(got.records) == 2 and got.environment == envmod.Environment()
    old_csv = tmp_path / "old.csv"
    records.save(recs(), old_csv)
    text = old_csv.read_text()
    old_csv.write_text("\n".join(l for l in text.splitlines() if not l.startswith("#")) + "\n")
    got = records.load_file(old_csv)
    assert len(got.records) == 2 and got.environment.host == ""
    assert got.records[0].throttle == ["sw_power_cap", "hw_slowdown"]


def test_csv_row_numbers_count_the_environment_lines(tmp_path):
    path = records.save(recs(), tmp_path / "r.csv")
    lines = path.read_text().splitlines()
    header = next(i for i, l in enumerate(lines) if not l.startswith("#"))
    lines[header + 2] = lines[header + 2].replace("tiled_any", "", 1).replace(",64,64,64,", ",0,64,64,", 1)
    path.write_text("\n".join(lines) + "\n")
    got = records.load_file(path)
    assert len(got.records) == 1
    assert got.skipped[0].startswith(f"row 2 (line {header + 3})")


@pytest.mark.parametrize("env, says", [
    ({"devices": "all"}, "'devices' is not a list"),
    ({"devices": [{"index": "x"}]}, "devices[0].index"),
    ({"kernels": [1]}, "'kernels' is not a mapping"),
    ({"timing": {"warmup": [1]}}, "timing.warmup"),
    ("text", "not a mapping"),
])
def test_a_wrong_environment_is_said_and_the_records_still_load(tmp_path, env, says):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"format": 2, "environment": env,
                                "records": [records.to_dict(r) for r in recs()]}))
    got = records.load_file(path)
    assert len(got.records) == 2 and says in got.environment_problem


def test_a_wrong_csv_environment_line(tmp_path):
    path = records.save(recs(), tmp_path / "r.csv")
    text = path.read_text().replace("# devices: [", "# devices: [[[", 1)
    path.write_text(text)
    got = records.load_file(path)
    assert len(got.records) == 2 and "devices" in got.environment_problem


@pytest.mark.parametrize("data, says", [
    ({"format": 3, "records": []}, "format 3"),
    ({"format": 2, "records": {}}, "'records' is not a list"),
    ({"format": "2", "records": []}, "nor an object"),
    ({"records": []}, "nor an object"),
    ({"format": True, "records": []}, "nor an object"),
])
def test_json_objects_that_are_not_results_files(tmp_path, data, says):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFileError, match=".*") as err:
        records.load(path)
    assert says in str(err.value)


def test_nan_fields_are_empty_and_bad_throttle_is_a_field_error(tmp_path):
    r = ResultRecord("cpu", "c", "cpu_numpy", {}, 8, 8, 8, "float32")
    path = records.save([r], tmp_path / "r.json")
    (back,) = records.load(path)
    assert math.isnan(back.power_w) and back.throttle == [] and back.throttled is False
    data = json.loads(path.read_text())
    data["records"][0]["throttle"] = "sw_power_cap"      # a CSV-like cell is read too
    data["records"][0]["power_w"] = -3
    path.write_text(json.dumps(data))
    with pytest.raises(ResultsFileError, match="power_w"):
        records.load(path)
