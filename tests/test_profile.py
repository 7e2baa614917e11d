"""Profiles without a GPU: reading Nsight Compute's raw-page CSV recorded on an H100
(tests/data/ncu), the curated metrics, where profiling is unavailable and why, records
that keep their counters, and the ncu process handling (with a stand-in ncu)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cli import bench as cli
from engine.profile import nsight as profile, metrics as pm
from engine.results import records
from engine.results.records import ResultRecord
from engine.run.runner import HOST

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "data" / "ncu" / "h100_2048"


def counters_of(stem: str) -> dict[str, float]:
    path = next(FIXTURES.glob(f"{stem}-2048x2048x2048-float32-dev0.csv"))
    return pm.summarize(pm.parse_raw_csv(path.read_text()))


# --- reading recorded reports -------------------------------------------------------------

def test_every_fixture_parses_into_the_curated_metrics():
    paths = sorted(FIXTURES.glob("*.csv"))
    assert len(paths) == 10
    for path in paths:
        kernels = pm.parse_raw_csv(path.read_text())
        assert kernels, path.name
        c = pm.summarize(kernels)
        for key in ("duration_ns", "sm_throughput_pct", "memory_throughput_pct",
                    "achieved_occupancy_pct", "registers_per_thread", "dram_read_bytes",
                    "instructions"):
            assert math.isfinite(c[key]) and c[key] >= 0, (path.name, key)
        assert pm.occupancy_limiter(c) is not None
        assert pm.top_stalls(c), path.name
        for metric in pm.METRICS:
            assert pm.value_text(metric, c)


def test_recorded_counters_show_the_seeds_lessons():
    """The physical facts of the issue, in the recorded reports (the GPU tests check them
    live): coalescing, padding, tiling, tensor cores."""
    naive, strided = counters_of("naive-block16"), counters_of("naive_uncoalesced-block16")
    assert strided["gld_sectors_per_request"] >= 4 * naive["gld_sectors_per_request"]
    coalesced, padded = counters_of("aat_coalesced-tile32"), counters_of("aat_padded-tile32")
    assert coalesced["shared_bank_conflicts"] >= 10 * padded["shared_bank_conflicts"]
    tiled = counters_of("tiled_any-block16")
    assert 0.8 * 16 <= naive["gld_requests"] / tiled["gld_requests"] <= 1.25 * 16
    for simt in ("naive-block16", "ffma_wide-*", "cublas_fp32"):
        assert counters_of(simt)["tf32_tensor_ops"] == 0, simt
    for tc in ("tf32_mma-*", "tf32_wgmma_tma-*", "cublas_tf32"):
        c = counters_of(tc)
        assert c["tf32_tensor_ops"] == 2 * 2048 ** 3, tc   # every FLOP of 2·M·N·K on them
        assert c["tensor_pipe_pct"] > 10, tc


def test_a_launch_of_two_kernels_adds_counts_and_weights_rates():
    path = next(FIXTURES.glob("tf32_wgmma_tma-*.csv"))
    kernels = pm.parse_raw_csv(path.read_text())
    assert [k.name for k in kernels] == ["prepass", "matmul"]
    c = pm.summarize(kernels)
    assert c["kernels"] == 2
    assert c["duration_ns"] == pytest.approx(sum(k.duration_ns for k in kernels))
    assert c["instructions"] == pytest.approx(sum(k.values["smsp__inst_executed.sum"] for k in kernels))
    main = max(kernels, key=lambda k: k.duration_ns)
    assert c["registers_per_thread"] == main.values["launch__registers_per_thread"]
    rates = [k.values["sm__warps_active.avg.pct_of_peak_sustained_active"] for k in kernels]
    assert min(rates) <= c["achieved_occupancy_pct"] <= max(rates)


def test_units_separators_and_missing_values():
    text = ('==PROF== Connected to process 7\n'
            '"ID","Kernel Name","Block Size","Grid Size","dram__bytes_read.sum","gpu__time_duration.sum",'
            '"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"\n'
            '"","","","","Mbyte","usecond","",""\n'
            '"0","k","(32, 1, 1)","(4, 1, 1)","1.5","2.25","1,024","n/a"\n')
    (k,) = pm.parse_raw_csv(text)
    assert k.values["dram__bytes_read.sum"] == pytest.approx(1.5e6)
    assert k.duration_ns == pytest.approx(2250)
    assert k.values["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == 1024
    assert "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum" not in k.values
    c = pm.summarize([k])
    assert "gld_sectors_per_request" not in c          # no sectors: not a made-up ratio
    assert pm.value_text(pm.METRIC_BY_KEY["gld_sectors_per_request"], c) == "—"


@pytest.mark.parametrize("text", ["", "==PROF== No kernels were profiled.\n",
                                  '"a","b"\n"1","2"\n'])
def test_output_that_is_not_a_raw_page_is_refused(text):
    with pytest.raises(pm.ProfileReadError):
        pm.parse_raw_csv(text)


def test_metric_names_follow_what_the_gpu_has():
    query = ("Device X (GA100)\n---- ----\nMetric Name  Metric Type\n---- ----\n"
             "sm__pipe_tensor_op_hmma_cycles_active  Counter  cycle  ...\n"
             "sm__throughput Throughput %\nFBSP.TriageCompute.dramc__cycles_elapsed Counter\n")
    available = pm.parse_query_metrics(query)
    assert {"sm__throughput", "dramc__cycles_elapsed",
            "sm__pipe_tensor_op_hmma_cycles_active"} <= available
    names = pm.raw_metric_names(available=available)
    assert "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" in names
    assert not any("hgmma" in n or "hmma_type_hmma_hgmma" in n for n in names)
    assert "launch__registers_per_thread" in names       # launch attributes always asked
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in names
    assert len(pm.raw_metric_names()) > len(names)


def test_select_names_an_unknown_metric():
    assert [m.key for m in pm.select(["dram_read_bytes", "gld_requests"])] == \
        ["gld_requests", "dram_read_bytes"]
    with pytest.raises(ValueError, match="bogus"):
        pm.select(["bogus"])


# --- where profiling cannot run ---------------------------------------------------------

@pytest.mark.parametrize("backend", ["opencl", "cpu"])
def test_other_backends_are_told_it_needs_cuda(backend):
    ok, why = profile.availability(backend)
    assert not ok and "needs the cuda backend" in why and backend in why


def test_missing_ncu_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(profile, "NCU_GLOBS", ())
    ok, why = profile.availability("cuda")
    assert not ok and "Nsight Compute" in why and "NCU" in why
    monkeypatch.setenv("NCU", str(tmp_path / "nowhere" / "ncu"))
    ok, why = profile.availability("cuda")
    assert not ok and "not an executable file" in why


def test_counters_restricted_to_admins_are_explained(monkeypatch, tmp_path, fake_ncu):
    params = tmp_path / "params"
    params.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\n")
    monkeypatch.setattr(os, "geteuid", lambda: 1000, raising=False)
    ok, why = profile.availability("cuda", params_file=params)
    assert not ok and "ERR_NVGPUCTRPERM" in why and "NVreg_RestrictProfilingToAdminUsers=0" in why
    monkeypatch.setattr(os, "geteuid", lambda: 0, raising=False)
    assert profile.availability("cuda", params_file=params)[0]        # root may
    params.write_text("RmProfilingAdminOnly: 0\n")
    monkeypatch.setattr(os, "geteuid", lambda: 1000, raising=False)
    ok, why = profile.availability("cuda", params_file=params)
    assert ok and "ncu 2025.3.1.0" in why


def test_bench_profile_refuses_without_cuda(capsys):
    code = cli.run_bench(["--backend", "opencl", "--profile", "--sizes", "16"])
    assert code == cli.EXIT_BAD_INPUT
    assert "needs the cuda backend" in capsys.readouterr().err.replace("\n", " ")


def test_the_profiled_process_reports_its_failure(tmp_path):
    """Without CUDA the profile target writes why and exits 1 (ncu passes it on)."""
    pytest.importorskip("numpy")
    out = tmp_path / "t.json"
    code = subprocess.run([sys.executable, str(ROOT / "main.py"), "profile-target", "--variant",
                           "naive", "--params", "block=16", "--shape", "64x64x64", "--json",
                           str(out), "--device", "7"], capture_output=True, text=True,
                          timeout=120).returncode
    said = json.loads(out.read_text())
    if said["ok"]:
        pytest.skip("this machine has a CUDA device 7")
    assert code == 1 and said["error"]


# --- the ncu process, with a stand-in ---------------------------------------------------------

def _calls(tmp_path) -> list[list[str]]:
    return [json.loads(line) for line in (tmp_path / "ncu.log").read_text().splitlines()]


def test_a_profile_keeps_the_report_and_reads_it_back(fake_ncu, tmp_path):
    req = profile.ProfileRequest("naive", {"block": 16}, 2048, 2048, 2048,
                                 kernel_files=("/k/mine.cu",))
    res = profile.run_profile(req, tmp_path / "reports")
    assert res.ok, res.error
    assert Path(res.report).is_file() and res.report.endswith(".ncu-rep")
    assert Path(res.csv_path).read_text() == Path(os.environ["FAKE_NCU_CSV"]).read_text()
    assert res.counters == counters_of("naive-block16")
    assert res.tool == "ncu 2025.3.1.0" and res.kernels[0]["name"] == "matmul"
    prof = next(c for c in _calls(tmp_path) if "--export" in c)
    assert prof[prof.index("--profile-from-start") + 1] == "off"
    assert prof[prof.index("--clock-control") + 1] == "none"
    metrics = prof[prof.index("--metrics") + 1].split(",")
    assert "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum" in metrics
    target = prof[prof.index(str(ROOT / "main.py")):]
    assert target[1] == "profile-target" and target[target.index("--variant") + 1] == "naive"
    assert target[target.index("--kernel-file") + 1] == "/k/mine.cu"
    assert target[target.index("--shape") + 1] == "2048x2048x2048"
    imported = next(c for c in _calls(tmp_path) if "--import" in c)
    assert imported[imported.index("--page") + 1] == "raw" and "--csv" in imported


@pytest.mark.parametrize("mode, says", [
    ("perm", "NVreg_RestrictProfilingToAdminUsers=0"),
    ("target_error", "CUDA device 3 does not exist"),
    ("noreport", "An error was reported by the driver"),
])
def test_a_failed_profile_says_why(fake_ncu, tmp_path, monkeypatch, mode, says):
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    res = profile.run_profile(profile.ProfileRequest("naive", {"block": 16}, 64, 64, 64), tmp_path)
    assert not res.ok and says in res.error
    assert not res.counters and not res.report


@pytest.mark.slow
def test_a_profile_that_hangs_is_ended(fake_ncu, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "hang")
    res = profile.run_profile(profile.ProfileRequest("naive", {}, 64, 64, 64), tmp_path,
                              timeout_s=1.0)
    assert not res.ok and "timed out" in res.error and res.seconds < 30
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 1

    res = profile.run_profile(profile.ProfileRequest("naive", {}, 64, 64, 64), tmp_path,
                              should_stop=stop)
    assert res.error == "cancelled"


def test_a_16_bit_record_is_profiled_in_its_own_types_and_layout(fake_ncu, tmp_path):
    """The profiled process builds and sizes C as the timed run did: C's type and B's
    layout travel to it (a 16-bit kernel built for FP32 C writing into a 16-bit C buffer
    was an illegal address under ncu), and records of other types or layouts are profiled
    apart."""
    recs = [_record(variant="half_wgmma", params={"stages": 4}, dtype="bfloat16", out_dtype=o,
                    layout=lay) for o, lay in (("bfloat16", "nk"), ("float32", "kn"), ("bfloat16", "nk"))]
    results = profile.profile_records(recs, tmp_path / "r")
    assert len(results) == 2 and all(r.ok for r in results), [r.error for r in results]
    targets = [c[c.index(str(ROOT / "main.py")):] for c in _calls(tmp_path) if "--export" in c]
    said = [(t[t.index("--dtype") + 1], t[t.index("--out-dtype") + 1], t[t.index("--layout") + 1])
            for t in targets]
    assert said == [("bfloat16", "bfloat16", "nk"), ("bfloat16", "float32", "kn")]
    assert results[0].report != results[1].report and "nk" in Path(results[0].report).name


def _record(**kw) -> ResultRecord:
    base = dict(backend="cuda", device="GPU", variant="naive", params={"block": 16}, m=64,
                n=64, k=64, dtype="float32", status="ok", host=HOST, device_index=0,
                median_ms=0.5)
    base.update(kw)
    return ResultRecord(**base)


def test_profile_records_profiles_each_item_once_and_says_what_it_skips(fake_ncu, tmp_path):
    hot, cold = _record(mode="hot"), _record(mode="cold")
    other = _record(variant="tiled_any")
    remote = _record(host="elsewhere")
    ocl = _record(backend="opencl")
    skipped = _record(variant="tiled", status="skipped")
    lines, steps = [], []
    results = profile.profile_records([hot, cold, other, remote, ocl, skipped], tmp_path / "r",
                                      log=lambda lvl, t: lines.append((lvl, t)),
                                      progress=lambda d, t, w: steps.append((d, t, w)))
    assert [r.request.variant for r in results] == ["naive", "tiled_any"]
    assert hot.profile["counters"] == cold.profile["counters"] != {}
    assert other.profile["counters"] and not remote.profile and not ocl.profile
    said = " ".join(t for _, t in lines)
    assert "elsewhere" in said and "needs the cuda backend" in said and "did not run" in said
    assert steps[0][:2] == (0, 2) and steps[-1] == (2, 2, "")


@pytest.mark.parametrize("suffix", [".json", ".csv"])
def test_records_keep_their_counters_in_results_files(tmp_path, suffix):
    recs = records.load(FIXTURES / "records_2048.json")
    assert len(recs) == 10 and all(r.profile["counters"] for r in recs)
    path = records.save(recs, tmp_path / f"r{suffix}")
    again = records.load(path)
    for a, b in zip(recs, again):
        assert a.profile["counters"] == pytest.approx(b.profile["counters"])
        assert a.profile["kernels"] == b.profile["kernels"]
        assert a.profile["report"] == b.profile["report"]


def test_a_results_file_with_bad_counters_skips_that_record(tmp_path):
    data = json.loads((FIXTURES / "records_2048.json").read_text())
    data[0]["profile"]["counters"]["gld_requests"] = "many"
    data[1]["profile"] = ["not", "a", "mapping"]
    (tmp_path / "bad.json").write_text(json.dumps(data))
    recs, skipped = records.load_report(tmp_path / "bad.json")
    assert len(recs) == 8 and len(skipped) == 2
    assert "counters" in skipped[0] and "profile" in skipped[1]


def test_bench_prints_a_profile_table_per_five_columns():
    from rich.console import Console

    recs = records.load(FIXTURES / "records_2048.json")
    tables = cli.profile_tables(recs)
    assert len(tables) == 2
    console = Console(width=200, record=True)
    for t in tables:
        console.print(t)
    text = console.export_text()
    assert "Global load sectors / request" in text and "(2/2)" in text
    assert "registers (1 blocks/SM)" in text and "17,179,869,184" in text


def test_the_tensor_pipe_counts_integer_mma_where_the_gpu_has_the_counter():
    """int8's wgmma runs on the integer MMA pipe, which the float pipe's counter
    (hmma_type_hmma_hgmma_qgmma) reads as 0% (H200, 80% on the IMMA one): the tensor pipe is
    the counter of every MMA type, else (older GPUs, the recorded reports) the float one."""
    (m,) = pm.select(["tensor_pipe_pct"])
    assert "imma_igmma" in m.raw[0] and "qgmma" in m.raw[0]
    assert pm.resolved_raw(m, lambda name: True) == m.raw
    older = {pm.base_name(m.fallback[0])}
    assert pm.resolved_raw(m, lambda name: pm.base_name(name) in older) == (m.fallback[0],)
    assert pm.raw_metric_names([m], available=older) == [m.fallback[0]]
    assert pm.raw_metric_names([m], available={pm.base_name(m.raw[0]), *older}) == [m.raw[0]]
