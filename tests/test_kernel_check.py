"""The kernel editor's *Compile* check (engine.measure.kernel_check, ``main.py check-kernel``):
every parameter combination of a user's kernel file built as the backend builds it, the
compiler's messages at the user's own lines, the resources and launch limits per
combination. CUDA checks need only nvcc (no GPU); OpenCL checks run on PoCL in CI."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import main
from engine.kernels import registry
from engine.measure.backends import cuda as cuda_backend
from engine.measure.backends import opencl as opencl_backend
from engine.measure.backends.base import BackendError
from engine.measure.kernel_check import (CheckReport, _plan, check_kernel,
                                         max_threads_for_registers, parse_diagnostics, parse_ptxas,
                                         probe_shapes, side_values)
from engine.kernels.new_kernel import make_copy
from tests.helpers import require_backend

ROOT = Path(__file__).resolve().parent.parent


def require_nvcc():
    try:
        cuda_backend.find_nvcc()
    except BackendError as exc:
        pytest.skip(str(exc))


def line_of(path: Path, needle: str) -> int:
    """1-based number of the first line of ``path`` holding ``needle``."""
    return next(i for i, t in enumerate(path.read_text().split("\n"), 1) if needle in t)


def with_line(text: str, number: int, new: str) -> str:
    lines = text.split("\n")
    lines[number - 1] = new
    return "\n".join(lines)


def labels(variant: str) -> list[str]:
    return [registry.params_to_str(p) for p in registry.get(variant).combos()]


# --- pure parsing (no compiler needed) ------------------------------------------------------

def test_max_threads_follow_the_register_file():
    # cuFuncGetAttribute(MAX_THREADS_PER_BLOCK) on an H100 for these register counts
    measured = {24: 1024, 64: 1024, 65: 896, 72: 896, 80: 768, 88: 640, 96: 640, 100: 512,
                128: 512, 129: 384, 168: 384, 176: 256, 200: 256, 255: 256}
    assert {r: max_threads_for_registers(r) for r in measured} == measured
    assert max_threads_for_registers(0) == 1024


def test_parse_ptxas_reads_each_entry():
    log = """ptxas info    : 0 bytes gmem, 1024 bytes cmem[3]
ptxas info    : Compiling entry function 'pre' for 'sm_90a'
ptxas info    : Function properties for pre
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 16 registers, used 0 barriers, 360 bytes cmem[0]
ptxas info    : Compiling entry function 'matmul' for 'sm_90a'
ptxas info    : Function properties for matmul
    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 24 bytes cumulative stack size, 16384 bytes smem
ptxas info    : Compile time = 10.395 ms"""
    got = parse_ptxas(log)
    assert got["matmul"] == {"arch": "sm_90a", "registers": 255, "shared": 16384, "stack": 24,
                             "spill_stores": 8, "spill_loads": 12, "cmem": 1024}
    assert got["pre"]["registers"] == 16 and got["pre"]["cmem"] == 360 + 1024


def test_parse_diagnostics_of_nvcc_clang_and_ptxas():
    src = ["__global__ void k(float* a) {", "    int x = y;", "    a[0] = x;", "}"]
    log = """/k/mine.cu(2): error: identifier "y" is undefined
      int x = y;
              ^

/k/mine.cu(3): warning #177-D: variable "unused" was declared but never referenced
  __attribute__((global)) void k(float* a) { int unused; }
                                                 ^

/usr/inc/helper.cuh(7): error: expected a ";"
/k/mine.cu:5:2: error: #error stop here
error: /k/mine.cl:9:13: use of undeclared identifier 'q'
/k/mine.cl:10:1: warning: unused variable 'w'
ptxas /tmp/tmpxft_0001-6_mine.ptx, line 29; error   : Unknown modifier '.instr'
ptxas fatal   : Ptx assembly aborted due to errors
Remark: The warnings can be suppressed with "-diag-suppress <warning-number>"
1 error detected in the compilation of "/k/mine.cu"."""
    got = [(d.path, d.line, d.column, d.severity, d.message)
           for d in parse_diagnostics(log, "/k/mine.cu", src)]
    assert got == [
        ("/k/mine.cu", 2, 13, "error", 'identifier "y" is undefined'),
        # the echoed line is not the file's (a macro expanded): no column
        ("/k/mine.cu", 3, None, "warning",
         'variable "unused" was declared but never referenced [#177-D]'),
        ("/usr/inc/helper.cuh", 7, None, "error", 'expected a ";"'),
        ("/k/mine.cu", 5, 2, "error", "#error stop here"),
        ("/k/mine.cl", 9, 13, "error", "use of undeclared identifier 'q'"),
        ("/k/mine.cl", 10, 1, "warning", "unused variable 'w'"),
        ("/k/mine.cu", None, None, "error", "ptxas: Unknown modifier '.instr'"),
    ]


# --- header problems -------------------------------------------------------------------------

def test_a_header_error_is_reported_at_its_line_and_nothing_is_built(tmp_path):
    path = make_copy("tiled_any", tmp_path / "my_tiled.cu")
    path.write_text(path.read_text().replace("[launch]", "[launch]\ncolour = 3"))
    line = line_of(path, "colour")
    rep = check_kernel(path)
    assert not rep.ok and rep.combos == []
    assert rep.header_error.startswith(f"{path}:{line}: ") and "unknown key 'colour'" in rep.header_error
    [d] = rep.diagnostics
    assert (d.path, d.line, d.severity) == (str(path), line, "error")
    # the editor's unsaved buffer names the file it edits, not a temporary copy
    rep = check_kernel(tmp_path / "elsewhere.cu", text=path.read_text(), display_path=path)
    assert rep.header_error.startswith(f"{path}:{line}: ")


# --- OpenCL (PoCL in CI) ---------------------------------------------------------------------

def test_an_opencl_copy_builds_every_combination(tmp_path):
    require_backend("opencl")
    path = make_copy("wpt", tmp_path / "my_wpt.cl")
    rep = check_kernel(path)
    assert rep.ok, rep.text()
    assert rep.backend == "opencl" and rep.target and rep.diagnostics == []
    assert [c.label for c in rep.combos] == labels("wpt")
    for c in rep.combos:
        assert c.ok and c.built and c.skipped is None and c.problems == []
        assert c.max_threads and c.max_threads >= c.block_threads > 0
        assert c.shared_static > 0 and c.registers is None and c.spill_stores is None
    assert "max wg" in rep.text() and "my_wpt.cl" in rep.text()


def test_an_opencl_error_is_at_the_users_line_for_every_combination(tmp_path):
    require_backend("opencl")
    path = make_copy("tiled_any", tmp_path / "my_tiled.cl")
    target = line_of(path, "get_local_id(0)")
    path.write_text(with_line(path.read_text(), target, "    int bogus = undeclared_thing + 1;"))
    rep = check_kernel(path)
    assert not rep.ok and all(not c.ok and not c.built for c in rep.combos)
    first = rep.errors()[0]
    assert (first.path, first.line, first.severity) == (str(path), target, "error")
    assert "undeclared_thing" in first.message and first.column is not None
    assert first.combos == labels("tiled_any")                 # one diagnostic, all combos
    assert all("tempfile" not in d.path and "kcache" not in c.log
               for d in rep.diagnostics for c in rep.combos)


# --- CUDA (nvcc only) ----------------------------------------------------------------------------

def test_a_cuda_copy_reports_registers_and_launch_limits(tmp_path):
    require_nvcc()
    path = make_copy("tiled_any", tmp_path / "my_tiled.cu")
    rep = check_kernel(path)
    assert rep.ok, rep.text()
    assert rep.target == "sm_90" and [c.label for c in rep.combos] == labels("tiled_any")
    for c in rep.combos:
        assert c.built and c.registers > 0 and c.spill_stores == 0 and c.spill_loads == 0
        assert c.max_threads >= c.block_threads == c.params["block"] ** 2
        assert c.shared_static == 2 * c.params["block"] ** 2 * 4          # As and Bs tiles
    table = rep.text()
    assert "regs" in table and "block=32" in table


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_half_kernel_is_checked_in_its_types_and_others_are_refused(tmp_path, dtype):
    """check-kernel --dtype takes every input type: a 16-bit kernel builds in its own (C in
    float32), without spills; a type its header does not list is refused with its list."""
    require_nvcc()
    path = make_copy("half_wmma", tmp_path / "my_half.cu")
    rep = check_kernel(path, dtype=dtype)
    assert rep.ok and rep.dtype == dtype, rep.text()
    assert all(c.built and c.spill_stores == 0 for c in rep.combos)
    for other in ("float32", "float8_e4m3"):
        refused = check_kernel(path, dtype=other)
        assert not refused.ok and "float16, bfloat16" in refused.problem


@pytest.mark.slow
def test_a_register_heavy_rung_fits_its_block(tmp_path):
    require_nvcc()
    path = make_copy("ffma_wide", tmp_path / "my_wide.cu")
    wanted = [{"bk": 8, "sw": 1, "splitk": 1, "tailk": 8}, {"bk": 16, "sw": 8, "splitk": 4, "tailk": 1}]
    rep = check_kernel(path, combos=wanted)
    assert rep.ok, rep.text()
    assert [c.params["bk"] for c in rep.combos] == [8, 16]
    for c in rep.combos:
        assert c.registers > 128 and c.spill_stores == 0 and c.spill_loads == 0
        assert c.max_threads >= c.block_threads == 256
        assert c.shared_dynamic > 48 * 1024


def test_a_tensor_map_wider_than_its_swizzle_is_an_error(tmp_path):
    """The pre-pass's tensor maps are evaluated at the check's shape: a box whose inner
    extent exceeds the map's swizzle span is reported before anything runs."""
    require_nvcc()
    path = make_copy("tf32_wgmma_rs", tmp_path / "my_rs.cu")
    text = path.read_text()
    old = 'box = [32, 32]\nelem = "tf32"'
    assert text.count(old) == 1
    path.write_text(text.replace(old, old + "\nswizzle = 64"))
    rep = check_kernel(path, combos=[{"persist": 1}])
    assert not rep.ok
    assert any("wider than the map's 64-byte swizzle span" in p for p in rep.combos[0].problems)


def test_a_cuda_error_in_unsaved_text_is_at_the_users_line(tmp_path):
    require_nvcc()
    path = make_copy("tiled_any", tmp_path / "my_tiled.cu")
    target = line_of(path, "threadIdx.x")
    text = with_line(path.read_text(), target, "    int bogus = undeclared_thing + 1;")
    rep = check_kernel(path, text=text)                  # the file on disk is still fine
    assert not rep.ok
    first = rep.errors()[0]
    assert (first.path, first.line, first.column) == (str(path), target, 17)
    assert "undeclared_thing" in first.message and first.combos == labels("tiled_any")
    assert all(str(tmp_path / "my_tiled.cu") in c.log and "matmul-lab-check" not in c.log
               for c in rep.combos)
    assert f"{path}:{target}:17: error:" in rep.text()


def test_too_many_registers_for_the_block_is_an_error(tmp_path):
    require_nvcc()
    path = tmp_path / "heavy.cu"
    path.write_text('''/*
+++
name = "heavy"
title = "More registers than a block of 1024 threads can have."
source = "a test"

[params]
nr = [96]

[launch]
grid = ["cdiv(N, 1024)", "M"]
block = [1024, 1]
+++
*/
extern "C" __global__ void matmul(const ELEM* A, const ELEM* B, ELEM* C, int M, int N, int K)
{
    ACC r[NR];
#pragma unroll
    for (int i = 0; i < NR; i++) r[i] = A[threadIdx.x + i * K];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int i = 0; i < NR; i++) r[i] = r[i] * r[(i + 1) % NR] + r[(i + 7) % NR];
    ACC s = 0;
#pragma unroll
    for (int i = 0; i < NR; i++) s += r[i] * r[(i * 3) % NR];
    C[threadIdx.x] = s;
}
''')
    rep = check_kernel(path)
    [c] = rep.combos
    assert c.built and not c.ok and not rep.ok
    assert c.registers > 64 and c.max_threads < c.block_threads == 1024
    assert any("too many resources requested for launch" in p for p in c.problems)


# --- nothing raises ------------------------------------------------------------------------------

def test_missing_tools_and_bad_combinations_are_reported_not_raised(tmp_path, monkeypatch):
    cu = make_copy("tiled_any", tmp_path / "my_tiled.cu")
    cl = make_copy("tiled_any", tmp_path / "my_tiled.cl")

    def nothing():
        raise BackendError("nvcc was not found (install the CUDA toolkit, or set CUDA_ROOT)")

    def no_devices(cl):
        raise BackendError("no OpenCL platform with a device")

    monkeypatch.setattr(cuda_backend, "find_nvcc", nothing)
    monkeypatch.setattr(opencl_backend, "_all_devices", no_devices)
    rep = check_kernel(cu)
    assert not rep.ok and "nvcc was not found" in rep.problem and "not checked" in rep.text()
    rep = check_kernel(cl)
    assert not rep.ok and "no OpenCL platform" in rep.problem
    rep = check_kernel(cl, backend="cuda")
    assert not rep.ok and "opencl kernel" in rep.problem
    rep = check_kernel(cu, combos=[{"block": 7}])
    assert not rep.ok and "not in the parameter space" in rep.combos[0].problems[0]


@pytest.mark.slow
def test_combinations_for_one_class_of_shapes_are_built_not_skipped():
    """A combination is built at the first shape its header allows: squares first, then
    skinny, odd and long-K shapes. skinny (M or N <= 64) and ffma_small's split-K values
    (chosen by the shape: few tiles and a long K) used to find no square and were skipped
    unbuilt; the ladder's other rungs keep the square they had."""
    from tests.test_nvcc_compile import _param_reason       # never valid, whatever the shape

    for name in ("skinny", "ffma_small", "ffma_wide", "ffma_regdb"):
        v = registry.get(name)
        plan = _plan(v, "cuda", "float32", None)
        assert plan and all(r.shape is not None or _param_reason(v, r.params, "float32")
                            for r in plan), [(r.label, r.skipped) for r in plan if r.skipped]
        assert name not in ("skinny", "ffma_small") or all(
            r.shape for r in plan if not _param_reason(v, r.params, "float32"))
        for r in (r for r in plan if r.shape):
            assert v.check("cuda", r.params, *r.shape, "float32") is None
            assert r.shape == next(s for s in probe_shapes(r.params, side_values(v, r.params))
                                   if v.check("cuda", r.params, *s, "float32") is None)
    # ffma_regdb's tile = 80128 is a tile for M = 65..80: its derived bm = 80 is a side tried;
    # a combination no shape can run (the warp-row copies on a narrow tile) is not tried at all
    rd = {r.label: r for r in _plan(registry.get("ffma_regdb"), "cuda", "float32", None)}
    assert 65 <= rd["tile=80128,splitk=1,hybrid=0,bcopy=0,crows=0"].shape[0] <= 80
    assert rd["tile=128064,splitk=1,hybrid=0,bcopy=2,crows=0"].skipped.startswith(
        "no shape satisfies the header (the warp-row copies")
    # the most slices at the smallest tile count and the longest K: one tile at K 8192 takes
    # all 32 (256 k a slice); 16 come where more tiles share the SMs at that K
    small = _plan(registry.get("ffma_small"), "cuda", "float32", None)
    assert {r.shape for r in small if r.params["splitk"] == 32} == {(1, 1, 8192)}
    assert all(r.shape[2] == 8192 and r.shape != (1, 1, 8192)
               for r in small if r.params["splitk"] == 16)
    assert all(r.shape == (1024, 1024, 1024) for r in _plan(registry.get("tiled_any"), "cuda",
                                                            "float32", None))
    # the shapes tried: the squares, then every side at each K (parameter values and one less)
    shapes = list(probe_shapes({"bm": 96, "splitk": 1}))
    assert shapes[0] == (1024, 1024, 1024) and (96, 95, 61) in shapes and (1, 4096, 8192) in shapes
    assert len(shapes) == len(set(shapes[:28])) + 3 * 11 ** 2


def test_a_header_no_shape_satisfies_is_skipped_with_its_reason(tmp_path):
    path = make_copy("tiled_any", tmp_path / "never.cu")
    text = path.read_text()
    path.write_text(text.replace("[[constraints]]", '[[constraints]]\ncheck = "M < 0"\n'
                                 'reason = "no matrix has a negative size"\n\n[[constraints]]', 1)
                    if "[[constraints]]" in text else text.replace(
                        "[launch]", '[[constraints]]\ncheck = "M < 0"\nreason = "no matrix has a '
                        'negative size"\n\n[launch]', 1))
    v = registry.variant_from_headers([registry.parse_header(path)], role="user")
    plan = _plan(v, "cuda", "float32", None)
    assert plan and all(r.skipped and "no shape tried satisfies the header (at 1024³: no matrix "
                        "has a negative size" in r.skipped for r in plan)


# --- the command line ----------------------------------------------------------------------------

def check_cli(capsys, *argv):
    code = main.main(["check-kernel", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_json_round_trips_and_exit_codes(tmp_path, capsys, monkeypatch):
    require_backend("opencl")
    path = make_copy("tiled_any", tmp_path / "my_tiled.cl")
    code, out, err = check_cli(capsys, path, "--json")
    assert code == 0, err
    data = json.loads(out)                               # stdout is the JSON alone
    assert data["ok"] is True and data["path"] == str(path)
    rep = CheckReport.from_dict(data)
    assert rep.ok and rep.to_dict() == data
    assert [c.label for c in rep.combos] == labels("tiled_any")

    code, out, err = check_cli(capsys, path, "--dtype", "int32")
    assert code == 0 and "OK" in out and "int32" in out

    # the editor's unsaved buffer on stdin, with an error: exit 2, the line in the JSON
    target = line_of(path, "get_local_id(0)")
    text = with_line(path.read_text(), target, "    int bogus = undeclared_thing + 1;")
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    code, out, err = check_cli(capsys, path, "--stdin", "--json")
    assert code == 2
    rep = CheckReport.from_dict(json.loads(out))
    assert not rep.ok and (rep.errors()[0].path, rep.errors()[0].line) == (str(path), target)

    path.write_text(path.read_text().replace("[launch]", "[launch]\ncolour = 3"))
    code, out, err = check_cli(capsys, path)
    assert code == 2 and f"{path}:{line_of(path, 'colour')}: unknown key 'colour'" in out


def test_cli_in_a_subprocess_prints_only_json(tmp_path):
    """As the GUI runs it (QProcess): the buffer on stdin, the report on stdout."""
    require_backend("opencl")
    path = make_copy("tiled_any", tmp_path / "my_tiled.cl")
    target = line_of(path, "get_local_id(0)")
    text = with_line(path.read_text(), target, "    int bogus = undeclared_thing + 1;")
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "check-kernel", "--json",
                           "--stdin", "--display-path", str(path), str(tmp_path / "buffer.cl")],
                          input=text, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2, proc.stderr
    rep = CheckReport.from_dict(json.loads(proc.stdout))
    assert rep.path == str(path) and rep.errors()[0].line == target
