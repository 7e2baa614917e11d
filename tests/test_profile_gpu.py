"""Hardware counters on a real GPU: the source documents' lessons, measured.

From the lab's own profile records (a sweep, then :func:`engine.profile.nsight.profile_records`
under Nsight Compute), the physical facts the seeds teach:

* coalescing — ``naive_uncoalesced`` touches ≥ 4× the sectors per global load of ``naive``;
* padding — ``aat_padded`` has ≥ 10× fewer shared-memory bank conflicts than
  ``aat_coalesced`` (the seed's 32-wide tile);
* tiling — ``tiled_any`` issues about BLOCK× fewer global load requests than ``naive``;
  beyond the L2 cache (8192) DRAM bytes fall with the tile width, not with the shared-memory
  tile itself (``naive`` and ``tiled_any`` of one block size read the same DRAM bytes);
* tensor cores — TF32 kernels do TF32 tensor-core operations, FP32 SIMT kernels none.

Marked ``gpu``: skipped where pycuda, a CUDA device or a permitted ``ncu`` is missing.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.profile import nsight as profile, metrics as pm
from engine.results import records
from engine.kernels import registry
from engine.run.runner import Plan
from tests.helpers import backend_status, run_plan

# serial: Nsight Compute's counters (DRAM bytes) are the whole GPU's, and one profiler at a time
pytestmark = [pytest.mark.gpu, pytest.mark.serial]
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", autouse=True)
def _need_profiler():
    st = backend_status("cuda")
    if not st.available:
        pytest.skip(f"cuda backend unavailable: {st.reason}")
    ok, why = profile.availability("cuda")
    if not ok:
        pytest.skip(why)


def _profiled(items, shape, folder, metrics=pm.METRICS, **types):
    items = [(name, {**registry.get(name).default_params(), **params}) for name, params in items]
    # one timed launch: the records are only what the profiles take (kernel, shape, inputs)
    plan = Plan(backend="cuda", items=items, shapes=[shape], warmup=0, repeats=1,
                **{"dtype": "float32", **types})
    recs, _ = run_plan(plan)
    assert all(r.passed for r in recs), [(r.label(), r.status, r.error) for r in recs]
    results = profile.profile_records(recs, folder, metrics=metrics)
    assert all(r.ok for r in results), [(r.request.label(), r.error) for r in results]
    return {r.label(): r.profile["counters"] for r in recs}


@pytest.fixture(scope="module")
def at_2048(tmp_path_factory):
    folder = tmp_path_factory.mktemp("profiles")
    items = [("naive", {"block": 16}), ("naive_uncoalesced", {"block": 16}),
             ("tiled_any", {"block": 16}), ("aat_coalesced", {"tile": 32}),
             ("aat_padded", {"tile": 32}), ("ffma_wide", {}), ("tf32_mma", {}),
             ("cublas_tf32", {})]
    return _profiled(items, (2048, 2048, 2048), folder), folder


def test_coalescing_sectors_per_request(at_2048):
    c, _ = at_2048
    coalesced = c["naive[block=16]"]["gld_sectors_per_request"]
    strided = c["naive_uncoalesced[block=16]"]["gld_sectors_per_request"]
    assert strided >= 4 * coalesced, (coalesced, strided)


def test_padding_removes_bank_conflicts(at_2048):
    c, _ = at_2048
    conflicted = c["aat_coalesced[tile=32]"]["shared_bank_conflicts"]
    padded = c["aat_padded[tile=32]"]["shared_bank_conflicts"]
    assert conflicted >= 10 * max(padded, 1), (conflicted, padded)
    assert c["aat_coalesced[tile=32]"]["shared_conflict_pct"] > 10


def test_tiling_divides_global_load_requests_by_the_block(at_2048):
    c, _ = at_2048
    ratio = c["naive[block=16]"]["gld_requests"] / c["tiled_any[block=16]"]["gld_requests"]
    assert 0.8 * 16 <= ratio <= 1.25 * 16, ratio


def test_tensor_pipe_only_for_tf32(at_2048):
    c, _ = at_2048
    for simt in ("naive[block=16]", "tiled_any[block=16]", next(k for k in c if k.startswith("ffma_wide"))):
        assert c[simt]["tf32_tensor_ops"] == 0, simt
        assert c[simt].get("tensor_pipe_pct", 0.0) < 1.0, simt
    for tc in (next(k for k in c if k.startswith("tf32_mma")), "cublas_tf32"):
        assert c[tc]["tf32_tensor_ops"] > 0, tc
        assert c[tc]["tensor_pipe_pct"] > 10, tc


def test_reports_are_kept_and_records_round_trip(at_2048, tmp_path):
    c, folder = at_2048
    reps = sorted(folder.glob("*.ncu-rep"))
    assert len(reps) == len(c)
    assert all(p.with_suffix(".csv").is_file() for p in reps)
    kernels = pm.parse_raw_csv(reps[0].with_suffix(".csv").read_text())
    assert kernels and kernels[0].duration_ns > 0


def test_dram_bytes_beyond_l2_fall_with_the_tile_width(tmp_path):
    keys = ["gld_requests", "dram_read_bytes"]
    items = [("naive", {"block": 16}), ("tiled_any", {"block": 16}),
             ("tiled_any", {"block": 32}), ("blocktile_2d", {"bm": 128, "bn": 128})]
    c = _profiled(items, (8192, 8192, 8192), tmp_path, pm.select(keys))
    naive, t16, t32 = c["naive[block=16]"], c["tiled_any[block=16]"], c["tiled_any[block=32]"]
    bt = c[next(k for k in c if k.startswith("blocktile_2d"))]
    assert naive["gld_requests"] / t16["gld_requests"] >= 0.8 * 16
    # The shared-memory tile removes L1/L2 requests; DRAM re-reads depend on the tile
    # width (which A rows and B columns resident blocks share in L2), the same for both.
    assert t16["dram_read_bytes"] <= 1.1 * naive["dram_read_bytes"]
    assert t32["dram_read_bytes"] <= 0.6 * t16["dram_read_bytes"]
    assert bt["dram_read_bytes"] <= 0.25 * naive["dram_read_bytes"]


def test_bench_profile_command(tmp_path):
    # the command line's path to profile_records (a library line's profile: at_2048's cuBLAS)
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "bench", "--backend", "cuda", "--variants",
         "naive", "--params", "block=16", "--sizes", "512", "--repeats", "3",
         "--profile", "--profile-dir", str(tmp_path / "p"), "--out", str(out)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Profile at 512" in proc.stdout and "Global load sectors / request" in proc.stdout
    recs = records.load(out)
    assert {r.variant for r in recs} == {"naive"}
    for r in recs:
        assert r.profile["counters"]["duration_ns"] > 0, r.label()
        assert Path(r.profile["report"]).is_file()
    assert json.loads(out.read_text())["records"][0]["profile"]["tool"].startswith("ncu ")


def test_a_crashing_kernel_fails_its_profile_only(tmp_path):
    """A launch that writes far outside C ends the profiled process with an illegal
    address; the profile's error says so, and the next profile runs."""
    path = tmp_path / "crasher.cu"
    code = subprocess.run([sys.executable, str(ROOT / "main.py"), "new-kernel", "--from",
                           "naive", str(path)], capture_output=True, text=True).returncode
    assert code == 0
    text = path.read_text()
    bad = text.replace("C[row * N + col] = (ELEM)acc;",
                       "C[row * N + col] = (ELEM)acc;\n    C[(size_t)1 << 40] = (ELEM)acc;", 1)
    assert bad != text
    path.write_text(bad)
    req = profile.ProfileRequest("crasher", {"block": 16}, 256, 256, 256,
                                 kernel_files=(str(path),))
    res = profile.run_profile(req, tmp_path / "p", timeout_s=180)
    assert not res.ok and "illegal" in res.error.lower(), res.error
    good = profile.run_profile(profile.ProfileRequest("naive", {"block": 16}, 256, 256, 256),
                               tmp_path / "p", timeout_s=180)
    assert good.ok, good.error
    assert good.counters["duration_ns"] > 0


@pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                    reason="Triton is not installed (requirements-triton.txt)")
def test_triton_kernels_are_profiled_like_any_other(tmp_path):
    """Profile takes a Triton kernel through the same target as a CUDA C one (the engine
    compiles it with Triton, launches it once inside the profiled range): its report is
    kept and its counters read; the TF32 rung uses the tensor pipe, the IEEE FP32 one not."""
    tile = {"block_m": 64, "block_n": 64, "block_k": 32, "num_warps": 4}
    c = _profiled([("triton_grouped_fp32", tile), ("triton_grouped_tf32", tile)],
                  (2048, 2048, 2048), tmp_path)
    fp32 = next(v for k, v in c.items() if k.startswith("triton_grouped_fp32"))
    tf32 = next(v for k, v in c.items() if k.startswith("triton_grouped_tf32"))
    assert fp32["tf32_tensor_ops"] == 0 and tf32["tf32_tensor_ops"] > 0
    assert tf32["tensor_pipe_pct"] > 5
    assert len(sorted(tmp_path.glob("*.ncu-rep"))) == 2


@pytest.mark.parametrize("variant, dtype, out", [("lab_half", "bfloat16", "bfloat16"),
                                                 ("int8_wgmma", "int8", "int32")])
def test_a_16_and_8_bit_kernel_is_profiled_in_its_types_on_the_tensor_pipe(tmp_path, variant,
                                                                          dtype, out):
    """Profile runs a 16-bit or int8 kernel in the timed run's types and layout (B as N×K):
    its one launch is counted and keeps the tensor pipe busy (wgmma; int8's on the integer
    MMA pipe, which the float pipe's counter reads as 0%), with no TF32 operations. The
    16-bit one is the dispatch line lab_half: the profiled process runs the kernel its table
    picks (step 34 at 2048³), never the table file itself. (FP8's fp8_wgmma passed the same
    test on an H200; two kernels here keep the serial step short.)"""
    c = _profiled([(variant, {})], (2048, 2048, 2048), tmp_path,
                  metrics=pm.select(["duration_ns", "tensor_pipe_pct", "tf32_tensor_ops"]),
                  dtype=dtype, out_dtype=out, layout="nk")
    (counters,) = c.values()
    assert counters["duration_ns"] > 0 and counters["tensor_pipe_pct"] > 20, counters
    assert counters["tf32_tensor_ops"] == 0
