"""A kernel of the user's, end to end on the command line (OpenCL/PoCL, as in CI):
``new-kernel`` copies a built-in, ``bench --kernel`` runs it next to the original, and a
bad kernel file gets a clear answer (exit 2 for a bad file, 1 for a wrong result)."""
from __future__ import annotations

import json
import re

import pytest

import main
from engine.kernels import registry
from tests.helpers import require_backend


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """User kernels registered by a test stay in that test."""
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))


def run(capsys, *argv):
    code = main.main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def bench(capsys, *argv):
    return run(capsys, "bench", "--backend", "opencl", "--warmup", 0, "--repeats", 2,
               "--quiet", *argv)


def test_new_kernel_copies_a_builtin_that_bench_runs_next_to_it(tmp_path, capsys):
    require_backend("opencl")
    path = tmp_path / "my_tiled.cl"
    code, out, err = run(capsys, "new-kernel", "--from", "tiled_any", path)
    assert code == 0, err
    text = path.read_text()
    assert 'name = "my_tiled"' in text and 'role = "user"' in text
    assert "tiled_any" in out and "--kernel" in out
    res = tmp_path / "r.json"
    code, out, err = bench(capsys, "--kernel", path, "--variants", "tiled_any",
                           "--sizes", "127x61x253", "--params", "block=16", "--out", res)
    assert code == 0, err
    recs = json.loads(res.read_text())["records"]
    assert sorted(r["variant"] for r in recs) == ["my_tiled", "tiled_any"]
    assert all(r["status"] == "ok" and r["passed"] is True for r in recs)


def test_new_kernel_refuses_a_taken_name_and_an_existing_file(tmp_path, capsys):
    code, _out, err = run(capsys, "new-kernel", "--from", "naive", tmp_path / "naive.cl")
    assert code == 2 and "taken" in err
    code, _out, err = run(capsys, "new-kernel", "--from", "cublas_fp32", tmp_path / "x.cu")
    assert code == 2 and "library" in err
    (tmp_path / "mine.cl").write_text("x")
    code, _out, err = run(capsys, "new-kernel", "--from", "naive", tmp_path / "mine.cl")
    assert code == 2 and "exists" in err


def _copy(tmp_path, capsys, name="mine"):
    path = tmp_path / f"{name}.cl"
    assert run(capsys, "new-kernel", "--from", "tiled_any", path)[0] == 0
    return path


def test_a_bad_header_is_exit_2_with_the_line(tmp_path, capsys):
    path = _copy(tmp_path, capsys)
    path.write_text(path.read_text().replace("[launch]", "[launch]\ncolour = 3"))
    code, out, err = bench(capsys, "--kernel", path, "--sizes", "64")
    assert code == 2
    line = next(i for i, t in enumerate(path.read_text().split("\n"), 1) if t.startswith("colour"))
    assert f"{path}:{line}" in " ".join(err.split()).replace(" ", "") or f":{line}:" in err
    assert "unknown key 'colour'" in " ".join(err.split())


def test_a_compile_error_is_exit_2_and_the_log_names_the_line(tmp_path, capsys):
    require_backend("opencl")
    path = _copy(tmp_path, capsys)
    text = path.read_text()
    lines = text.split("\n")
    target = next(i for i, t in enumerate(lines) if "get_local_id(0)" in t)
    lines[target] = lines[target].replace(";", "")            # a syntax error on that line
    path.write_text("\n".join(lines))
    res = tmp_path / "r.json"
    code, out, err = bench(capsys, "--kernel", path, "--sizes", "64", "--params", "block=16",
                           "--out", res)
    assert code == 2, err
    rec = json.loads(res.read_text())["records"][0]
    assert rec["status"] == "error" and "build" in rec["error"]
    assert re.search(rf"{re.escape(str(path))}:{target + 1}:\d+:", rec["error"]), rec["error"]


def test_a_kernel_that_computes_wrong_results_is_exit_1(tmp_path, capsys):
    require_backend("opencl")
    path = _copy(tmp_path, capsys)
    text = path.read_text()
    # store acc + 1: every element off by one, the poisoned output cannot hide it
    new = re.sub(r"(C\[[^\]]+\]\s*=\s*)\(ELEM\)\s*acc", r"\1(ELEM)(acc + 1)", text, count=1)
    if new == text:
        new = re.sub(r"(C\[[^\]]+\]\s*=\s*)acc", r"\1acc + 1", text, count=1)
    assert new != text
    path.write_text(new)
    res = tmp_path / "r.json"
    code, out, err = bench(capsys, "--kernel", path, "--sizes", "61x45x33", "--params",
                           "block=16", "--out", res)
    assert code == 1, err
    rec = json.loads(res.read_text())["records"][0]
    assert rec["passed"] is False and rec["status"] == "failed"


def _kept_builtin(res_path) -> list[dict]:
    recs = json.loads(res_path.read_text())["records"]
    return [r for r in recs if r["variant"] == "tiled_any"]


@pytest.mark.slow
def test_a_kernel_that_never_finishes_is_ended_and_the_other_results_kept(tmp_path, capsys):
    """A user kernel that spins forever: its isolated engine is ended at the launch time
    limit, the record says so, and the built-in measured in the same run is kept."""
    require_backend("opencl")
    path = _copy(tmp_path, capsys)
    text = path.read_text()
    # A volatile flag the compiler cannot prove false: a loop it must keep.
    new = text.replace("const int tx = get_local_id(0);",
                       "volatile int spin = 1; while (spin) { }\n    const int tx = get_local_id(0);", 1)
    assert new != text
    path.write_text(new)
    res = tmp_path / "r.json"
    code, out, err = bench(capsys, "--kernel", path, "--variants", "tiled_any", "--sizes", "64",
                           "--params", "block=16", "--launch-timeout", "3", "--out", res)
    assert code == 1, err
    recs = json.loads(res.read_text())["records"]
    mine = [r for r in recs if r["variant"] == "mine"]
    assert mine and all(r["status"] == "error" for r in mine)
    assert all("timed out" in r["error"] and "engine restarted" in r["error"] for r in mine), mine
    kept = _kept_builtin(res)
    assert kept and all(r["status"] == "ok" and r["passed"] for r in kept)


@pytest.mark.slow
def test_a_kernel_that_writes_far_out_of_bounds_takes_only_its_engine(tmp_path, capsys):
    """Writes gigabytes past C: the engine process dies (or the result is wrong); either
    way the command ends with a clear record and the built-in's result is kept."""
    require_backend("opencl")
    path = _copy(tmp_path, capsys)
    text = path.read_text()
    new = text.replace("C[row * N + col] = (ELEM)acc;",
                       "C[row * N + col] = (ELEM)acc;\n"
                       "        C[(long)(row * N + col + 1) * 268435456L] = (ELEM)acc;", 1)
    assert new != text
    path.write_text(new)
    res = tmp_path / "r.json"
    code, out, err = bench(capsys, "--kernel", path, "--variants", "tiled_any", "--sizes", "64",
                           "--params", "block=16", "--out", res)
    assert code == 1, err
    recs = json.loads(res.read_text())["records"]
    mine = [r for r in recs if r["variant"] == "mine"]
    assert mine and all(r["status"] in ("error", "failed") for r in mine)
    assert all(r["error"] or r["passed"] is False for r in mine)
    kept = _kept_builtin(res)
    assert kept and all(r["status"] == "ok" and r["passed"] for r in kept)


def test_the_user_kernel_folder_is_read_by_bench_and_a_bad_file_there_only_warns(tmp_path, capsys):
    require_backend("opencl")
    from engine.kernels.user_kernels import user_kernel_dir

    folder = user_kernel_dir()
    assert run(capsys, "new-kernel", "--from", "tiled_any", folder / "in_folder.cl")[0] == 0
    (folder / "broken.cl").write_text('/*\n+++\nname = "broken"\ngird = 1\n+++\n*/\n')
    res = tmp_path / "r.json"
    code, out, err = bench(capsys, "--variants", "in_folder", "--sizes", "61x45x33",
                           "--params", "block=16", "--out", res)
    assert code == 0, err
    assert "broken.cl:4" in " ".join(err.split()) and "warning" in err
    recs = json.loads(res.read_text())["records"]
    assert [r["variant"] for r in recs] == ["in_folder"] and recs[0]["passed"]
    # --no-user-kernels leaves the folder out: the name is unknown.
    code, out, err = bench(capsys, "--no-user-kernels", "--variants", "in_folder", "--sizes", "64")
    assert code == 2 and "unknown variant 'in_folder'" in err


def test_kernels_dir_adds_a_folder_and_a_bad_file_there_is_exit_2(tmp_path, capsys):
    require_backend("opencl")
    folder = tmp_path / "mine"
    assert run(capsys, "new-kernel", "--from", "wpt", folder / "extra_wpt.cl")[0] == 0
    code, out, err = run(capsys, "bench", "--kernels", folder, "--list")
    assert code == 0 and "extra_wpt" in out and "user" in out
    res = tmp_path / "r.json"
    code, out, err = bench(capsys, "--kernels", folder, "--variants", "extra_wpt",
                           "--sizes", "64", "--params", "ts=16;wpt=4", "--out", res)
    assert code == 0, err
    assert json.loads(res.read_text())["records"][0]["passed"]
    (folder / "bad.cl").write_text("/* no header */\n__kernel void matmul() {}\n")
    code, out, err = bench(capsys, "--kernels", folder, "--variants", "extra_wpt", "--sizes", "64")
    assert code == 2 and "bad.cl:1" in " ".join(err.split())
    code, out, err = bench(capsys, "--kernels", tmp_path / "nowhere", "--sizes", "64")
    assert code == 2 and "not a folder" in " ".join(err.split())
