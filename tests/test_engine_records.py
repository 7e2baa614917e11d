"""Result records: CSV and JSON round trips of records from real tiny sweeps, field by
field, and clear errors for files that are not results."""
from __future__ import annotations

import dataclasses
import json
import math
import secrets

import pytest

from engine.results import records
from engine.results.records import FIELDS, ResultRecord
from engine.run.runner import Plan, expand_items
from tests.helpers import backend_status, run_plan

SEED = secrets.randbelow(2**31)


@pytest.fixture(scope="module")
def realistic():
    """Records of every status: ok, skipped, failed, error, unverified."""
    recs, _ = run_plan(Plan(backend="cpu", items=expand_items("cpu"), shapes=[(33, 17, 29)],
                            dtype="int32", dist="int", warmup=0, repeats=3, seed=SEED))
    unverified, _ = run_plan(Plan(backend="cpu", items=expand_items("cpu"), shapes=[(5, 6, 7)],
                                  verify=False, cold=True, warmup=0, repeats=2, seed=SEED))
    recs += unverified
    if backend_status("opencl").available:
        ocl, _ = run_plan(Plan(backend="opencl",
                               items=[("naive", {"block": 8}), ("tiled", {"block": 16}),
                                      ("wpt", {"ts": 16, "wpt": 4}), ("aat_simple", {"tile": 16})],
                               shapes=[(33, 17, 29), (16, 16, 16)], warmup=0, repeats=2,
                               seed=SEED))
        recs += ocl
    assert any(r.status == "skipped" for r in recs) or not backend_status("opencl").available
    assert any(r.passed is True for r in recs) and any(r.passed is None for r in recs)
    failed = dataclasses.replace(recs[0], passed=False, status="failed",
                                 error='wrong result: largest error 1 at [3, 4], "quoted"\nline 2',
                                 extra={"note": "planted", "values": [1, 2.5]})
    errored = dataclasses.replace(recs[0], status="error", passed=None, median_ms=math.nan,
                                  gflops=math.inf, error="Not enough device memory; use smaller")
    return recs + [failed, errored]


def _same(a: ResultRecord, b: ResultRecord, fmt: str):
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, float) and math.isnan(x):
            assert isinstance(y, float) and math.isnan(y), (fmt, name, x, y)
        elif name == "gflops" and isinstance(x, float) and math.isinf(x):
            # JSON and CSV both store non-finite floats as empty → NaN.
            assert math.isnan(y), (fmt, name, y)
        else:
            assert x == y and type(x) is type(y), (fmt, name, x, y)


@pytest.mark.parametrize("ext", ["json", "csv"])
def test_round_trip_field_by_field(realistic, tmp_path, ext):
    path = records.save(realistic, tmp_path / f"results.{ext}")
    assert path.exists()
    back = records.load(path)
    assert len(back) == len(realistic)
    for a, b in zip(realistic, back):
        _same(a, b, ext)
    # None/True/False for passed survive as such, params as an int dict.
    assert [r.passed for r in back] == [r.passed for r in realistic]
    assert all(isinstance(v, int) for r in back for v in r.params.values())


def test_json_file_is_plain_json_without_nan(realistic, tmp_path):
    path = records.save(realistic, tmp_path / "r.json")
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)      # format 2: the environment block, then the records
    assert data["format"] == 2 and isinstance(data["environment"], dict)
    assert isinstance(data["records"], list) and set(data["records"][0]) == set(FIELDS)


def test_csv_header_is_the_field_list(realistic, tmp_path):
    path = records.save(realistic, tmp_path / "r.CSV")
    lines = path.read_text().splitlines()
    header = next(line for line in lines if not line.startswith("#"))   # after the environment
    assert lines[0] == "# format: 2" and header.split(",") == FIELDS
    assert len(records.load(path)) == len(realistic)


def test_hand_written_minimal_files(tmp_path):
    p = tmp_path / "min.csv"
    p.write_text("backend,variant,m,n,k,dtype,params,median_ms,passed\n"
                 "cuda,wpt,64,64,64,float32,\"ts=32,wpt=4\",0.5,yes\n"
                 "cuda,naive,8,8,8,int32,,,\n")
    a, b = records.load(p)
    assert (a.variant, a.params, a.median_ms, a.passed, a.device) == \
        ("wpt", {"ts": 32, "wpt": 4}, 0.5, True, "")
    assert b.params == {} and math.isnan(b.median_ms) and b.passed is None
    j = tmp_path / "min.json"
    j.write_text(json.dumps([{"backend": "opencl", "variant": "naive", "m": 3, "n": 4, "k": 5,
                              "dtype": "float32", "params": {"block": 8}, "gflops": None}]))
    (r,) = records.load(j)
    assert r.params == {"block": 8} and math.isnan(r.gflops) and r.mode == "hot"


@pytest.mark.parametrize("name,content,message", [
    ("a.json", "{not json", "not a results file"),
    ("b.json", '{"backend": "cuda"}', "does not hold a JSON list"),
    ("c.json", '[{"backend": "cuda", "variant": "naive"}]', "lacks the field(s) m, n, k, dtype"),
    ("d.csv", "backend,variant,m,n,k,dtype\ncuda,naive,abc,1,1,float32\n", "not a results file"),
    ("e.csv", "backend,variant,m,n,k,dtype,passed\ncuda,naive,1,1,1,float32,maybe\n",
     "field 'passed' is 'maybe', not a boolean"),
    ("f.csv", "just,some,columns\n1,2,3\n", "lacks the field(s)"),
    ("g.json", "[1, 2]", "not a results file"),
])
def test_bad_files_raise_value_error_naming_the_file(tmp_path, name, content, message):
    p = tmp_path / name
    p.write_text(content)
    with pytest.raises(ValueError) as info:
        records.load(p)
    assert name in str(info.value) and message in str(info.value)


def test_missing_file_and_wrong_extensions(tmp_path, realistic):
    with pytest.raises(records.ResultsFileError, match="nothere.json was not found"):
        records.load(tmp_path / "nothere.json")
    (tmp_path / "r.txt").write_text("[]")
    with pytest.raises(ValueError, match="results files are .json or .csv"):
        records.load(tmp_path / "r.txt")
    with pytest.raises(ValueError, match="not '.txt'"):
        records.save(realistic, tmp_path / "out.txt")


def test_label_and_series_key(realistic):
    r = next(r for r in realistic if r.variant == "naive") if any(
        r.variant == "naive" for r in realistic) else None
    if r is not None:
        assert r.label() == "naive[block=8]"
    cpu = realistic[0]
    assert cpu.label() == "cpu_numpy"
    assert cpu.series_key() == ("", "cpu", cpu.host, cpu.device, cpu.device_index, "cpu_numpy", "",
                                cpu.dtype, cpu.mode)
    assert cpu.host and cpu.device_index == 0 and cpu.worker == "local"
    assert cpu.device_label() == f"{cpu.device} #0"


def test_bad_records_are_skipped_with_reasons(tmp_path, realistic):
    good = records.to_dict(realistic[0])
    rows = [good, dict(good, m=0), dict(good, dtype="float64"), dict(good, median_ms=-1.0),
            dict(good, status="weird"), dict(good, params={"block": "x"}), "text", good]
    p = tmp_path / "mixed.json"
    p.write_text(json.dumps(rows))
    recs, skipped = records.load_report(p)
    assert len(recs) == 2
    assert [s.split(":")[0] for s in skipped] == [f"record {i}" for i in (2, 3, 4, 5, 6, 7)]
    assert "field 'm' is 0, not a whole number from 1" in skipped[0] and "float16" in skipped[1]


def test_save_is_atomic_and_refuses_folders(tmp_path, realistic, monkeypatch):
    p = tmp_path / "r.json"
    records.save(realistic, p)
    before = p.read_text()
    with pytest.raises(ValueError, match="is a folder"):
        records.save(realistic, tmp_path)

    def boom(*a, **k):
        raise OSError("disk full")
    from engine.common import files               # save() writes through files.write_atomic
    monkeypatch.setattr(files.os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        records.save(realistic[:1], p)
    assert p.read_text() == before                        # the earlier file is intact
    assert [f.name for f in tmp_path.iterdir()] == ["r.json"]   # no temporary left behind


def test_csv_without_params_column_reads(tmp_path):
    p = tmp_path / "min.csv"
    p.write_text("backend,variant,m,n,k,dtype,median_ms\ncuda,naive,8,8,8,float32,1.5\n")
    recs, skipped = records.load_report(p)
    assert not skipped and recs[0].params == {} and recs[0].median_ms == 1.5
