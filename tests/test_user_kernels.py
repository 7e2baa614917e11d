"""A kernel of the user's, end to end on the command line (OpenCL/PoCL, as in CI):
``new-kernel`` copies a built-in, ``bench --kernel`` runs it next to the original, and a
bad kernel file gets a clear answer (exit 2 for a bad file, 1 for a wrong result)."""
from __future__ import annotations

import json
import re

import pytest

import main
from engine import registry
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
    recs = json.loads(res.read_text())
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
    rec = json.loads(res.read_text())[0]
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
    rec = json.loads(res.read_text())[0]
    assert rec["passed"] is False and rec["status"] == "failed"
