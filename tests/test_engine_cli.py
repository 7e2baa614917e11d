"""``python main.py bench`` end to end on OpenCL (PoCL): results files, --list, exit codes
0 (all verified), 1 (a wrong result) and 2 (bad input, with a clear message)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import main
from engine.kernels import registry
from cli.bench import parse_param_overrides, UsageError
from tests.helpers import require_backend
from tests.test_engine_verify import planted_variant


@pytest.fixture(autouse=True)
def _opencl():
    require_backend("opencl")


def bench(capsys, *args):
    code = main.main(["bench", *map(str, args)])
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), " ".join(err.split())   # rich wraps at 80 columns


def test_bench_end_to_end_json(capsys, tmp_path):
    out_file = tmp_path / "res.json"
    code, out, err = bench(capsys, "--backend", "opencl", "--variants", "naive,tiled_any,aat_padded",
                           "--params", "block=16", "--sizes", "64,33x17x29", "--repeats", 2,
                           "--warmup", 0, "--out", out_file, "--seed", 11)
    assert code == 0, err
    data = json.loads(out_file.read_text())["records"]
    got = sorted((d["variant"], json.dumps(d["params"], sort_keys=True), d["m"], d["n"], d["k"])
                 for d in data)
    tiles = registry.get("aat_padded").space["tile"]
    expected = sorted(
        [(v, '{"block": 16}', m, n, k) for v in ("naive", "tiled_any")
         for m, n, k in ((64, 64, 64), (33, 17, 29))]
        + [("aat_padded", json.dumps({"tile": t}), m, m, k) for t in tiles
           for m, k in ((64, 64), (33, 29))])       # aat: n == m
    assert got == expected
    for d in data:
        assert d["passed"] is True and d["status"] == "ok" and d["verify_method"] == "full", d
        assert d["backend"] == "opencl" and d["dtype"] == "float32" and d["repeats"] == 2
        assert d["warmup"] == 0 and d["median_ms"] > 0 and d["flops"] == 2 * d["m"] * d["n"] * d["k"]
    assert "Results" in out and "naive[block=16]" in out and "33x17x29" in out
    assert f"saved {len(data)} records" in err


def test_bench_csv_int32_with_progress_bar(capsys, tmp_path):
    out_file = tmp_path / "res.csv"
    code, out, err = bench(capsys, "--backend", "opencl", "--variants", "wpt", "--params",
                           "ts=16;wpt=2,4", "--sizes", "31x45x17", "--dtype", "int32",
                           "--dist", "int", "--repeats", 1, "--warmup", 0, "--out", out_file)
    assert code == 0, err
    from engine.results import records
    recs = records.load(out_file)
    assert [(r.params, r.passed, r.dtype) for r in recs] == \
        [({"ts": 16, "wpt": 2}, True, "int32"), ({"ts": 16, "wpt": 4}, True, "int32")]


def test_skipped_runs_are_not_failures(capsys):
    code, out, err = bench(capsys, "--backend", "opencl", "--variants", "tiled", "--params",
                           "block=16", "--sizes", "33x17x29", "--repeats", 1, "--warmup", 0,
                           "--quiet")
    assert code == 0, err
    assert "skipped" in out and "multiples of block=16" in out


def test_list(capsys):
    code, out, err = bench(capsys, "--list")
    assert code == 0
    assert "Backends and devices" in out and "Variants" in out
    for name in registry.REGISTRY:
        assert name in out
    assert "Portable Computing Language" in out or "pocl" in out.lower()
    for backend in ("cuda", "opencl", "cpu"):
        assert backend in out


def test_help_via_subprocess():
    proc = subprocess.run([sys.executable, "main.py", "bench", "--help"], cwd=registry.ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "usage: main.py bench" in proc.stdout and "--sizes" in proc.stdout


def _csv(path, rows):
    path.write_text("\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return path


@pytest.mark.parametrize("args,message", [
    (["--sizes", "64,abc"], "'abc' in 'abc' is not a whole number"),
    (["--sizes", "512:256"], "ends before it starts"),
    (["--variants", "naive,nope"], "unknown variant 'nope'"),
    (["--variants", "cpu_numpy"], "cpu_numpy has no opencl kernel"),
    (["--params", "foo=1"], "--params: unknown parameter(s) foo"),
    (["--params", "block=abc"], "--params: 'abc' is not a whole number"),
    (["--params", "16"], "--params: '16' has no name"),
    (["--repeats", "0"], "--repeats: '0' is out of range (write a whole number from 1 to 100000)"),
    (["--repeats", "100001"], "--repeats: '100001' is out of range"),
    (["--warmup", "-1"], "--warmup: '-1' is out of range (write a whole number from 0 to 10000)"),
    (["--budget", "-1"], "--budget: '-1' is out of range (write one from 0.01 to 3600)"),
    (["--budget", "nan"], "--budget: 'nan' is not a number of seconds"),
    (["--budget", "1e9"], "--budget: '1e9' is out of range"),
    (["--seed", "-3"], "--seed: '-3' is out of range (write a whole number from 0 to 2147483647)"),
    (["--b", "b.npy"], "--b needs --a"),
    (["--variants", ", ,"], "--variants: no variant named"),
    (["--variants", "naive", "--params", "wpt=2"], "--params: wpt is not a parameter of naive"),
    (["--launch-timeout", "nan"], "--launch-timeout: 'nan' is not a number of seconds"),
    (["--out", "."], "is a folder"),
    (["--out", "no_dir/x.json"], "the folder no_dir does not exist"),
    (["--sizes", "[red]7x"], "'[red]7x' must be MxNxK"),           # printed literally
    (["--out", "x.txt"], "--out must end in .json or .csv"),
    (["--device", "7"], "--device 7"),
    (["--a", "does_not_exist.npy"], "A: does_not_exist.npy"),
    (["--dtype", "float64"], ""),                      # argparse's own message
    (["--frobnicate"], ""),
])
def test_bad_input_exits_2(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code, out, err = bench(capsys, "--backend", "opencl", "--sizes", "16", "--repeats", 1,
                           "--warmup", 0, "--quiet", *args)
    assert code == 2, (out, err)
    assert message in err, err
    assert "Results" not in out                          # nothing ran
    assert not list(tmp_path.iterdir()), "no output file on bad input"


def test_csv_with_text_names_row_and_column(capsys, tmp_path):
    a = _csv(tmp_path / "a.csv", [[1, 2, 3], [4, "five", 6]])
    b = _csv(tmp_path / "b.csv", [[1], [2], [3]])
    code, out, err = bench(capsys, "--backend", "opencl", "--variants", "naive", "--a", a,
                           "--b", b, "--quiet")
    assert code == 2
    assert "A: a.csv, row 2, column 2: 'five' is not a number" in err, err


def test_inner_dimension_mismatch(capsys, tmp_path):
    rng = np.random.default_rng()
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, rng.uniform(-1, 1, (5, 7)).astype(np.float32))
    np.save(b, rng.uniform(-1, 1, (6, 3)).astype(np.float32))
    code, out, err = bench(capsys, "--backend", "opencl", "--a", a, "--b", b, "--quiet")
    assert code == 2
    assert "A's columns (7) must equal B's rows (6)" in err, err


def test_npy_inputs_are_verified(capsys, tmp_path):
    rng = np.random.default_rng()
    a = rng.uniform(-1, 1, (37, 23)).astype(np.float32)
    b = rng.uniform(-1, 1, (23, 41)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out_file = tmp_path / "r.json"
    code, out, err = bench(capsys, "--backend", "opencl", "--variants", "naive,wpt", "--params",
                           "block=8;ts=8;wpt=2", "--a", tmp_path / "a.npy", "--b",
                           tmp_path / "b.npy", "--sizes", "999", "--repeats", 1, "--warmup", 0,
                           "--out", out_file, "--quiet")
    assert code == 0, err
    assert "A: 37×23 float32, B: 23×41 float32" in err
    data = json.loads(out_file.read_text())["records"]
    assert [(d["variant"], d["m"], d["n"], d["k"], d["passed"]) for d in data] == \
        [("naive", 37, 41, 23, True), ("wpt", 37, 41, 23, True)]   # --sizes ignored


def test_wrong_kernel_exits_1(capsys, tmp_path, monkeypatch):
    name = planted_variant(tmp_path, monkeypatch, "k_off_by_one")
    out_file = tmp_path / "r.json"
    code, out, err = bench(capsys, "--in-process", "--backend", "opencl", "--variants", f"naive,{name}",
                           "--params", "block=16", "--sizes", "33x17x29", "--repeats", 1,
                           "--warmup", 0, "--out", out_file, "--quiet")
    assert code == 1
    assert "FAILED" in out and "wrong result" in err
    data = {d["variant"]: d for d in json.loads(out_file.read_text())["records"]}
    assert data["naive"]["passed"] is True and data[name]["passed"] is False


def test_planted_kernel_passes_when_correct(capsys, tmp_path, monkeypatch):
    """The control for the test above: the same harness with the fault removed exits 0."""
    name = planted_variant(tmp_path, monkeypatch, "correct")
    code, out, err = bench(capsys, "--in-process", "--backend", "opencl", "--variants", name, "--params",
                           "block=16", "--sizes", "33x17x29", "--repeats", 1, "--warmup", 0,
                           "--quiet")
    assert code == 0, err


def test_no_verify_never_fails(capsys, tmp_path, monkeypatch):
    name = planted_variant(tmp_path, monkeypatch, "k_off_by_one")
    code, out, err = bench(capsys, "--in-process", "--backend", "opencl", "--variants", name, "--params",
                           "block=16", "--sizes", "17", "--repeats", 1, "--warmup", 0,
                           "--no-verify", "--quiet")
    assert code == 0 and "not checked" in out


def test_parse_param_overrides():
    assert parse_param_overrides("block=16,32;ts=32") == {"block": (16, 32), "ts": (32,)}
    assert parse_param_overrides("block=16,32 wpt=4") == {"block": (16, 32), "wpt": (4,)}
    assert parse_param_overrides("BLOCK=8") == {"block": (8,)}
    assert parse_param_overrides(None) == {} and parse_param_overrides("") == {}
    with pytest.raises(UsageError, match="a name is missing"):
        parse_param_overrides("=16")


def test_out_in_a_missing_folder_is_bad_input(capsys, tmp_path):
    out_file = tmp_path / "no_such_folder" / "r.json"
    code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "8", "--repeats", 1,
                           "--warmup", 0, "--quiet", "--out", out_file)
    assert code == 2 and "no_such_folder" in err


def test_results_table_names_the_device_when_there_are_several():
    import io

    from rich.console import Console

    from cli.bench import _results_table
    from engine.results.records import ResultRecord
    recs = [ResultRecord(backend="cuda", device="NVIDIA H200", variant="naive", params={}, m=64, n=64,
                         k=64, dtype="float32", median_ms=1.0, host="node", device_index=i,
                         worker=f"process {100 + i}") for i in (0, 1)]
    out = io.StringIO()
    Console(file=out, width=200).print(_results_table(recs))
    text = out.getvalue()
    assert "NVIDIA H200 #0" in text and "NVIDIA H200 #1" in text and "process 101" in text
    out = io.StringIO()
    Console(file=out, width=200).print(_results_table(recs[:1]))
    assert "#0" not in out.getvalue()                      # one device: no column
