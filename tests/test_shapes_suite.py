"""The shape suite: benchmarks/shapes.py on the OpenCL backend (PoCL), the suite as a size
preset in the window, and the lab best table of ``bench``."""
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from engine.results import derived, records  # noqa: E402
from engine.inputs.sizes import PRESETS, SHAPE_SUITE, format_shape, parse_sizes  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _shapes_module():
    spec = importlib.util.spec_from_file_location("shapes_bench", ROOT / "benchmarks" / "shapes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _opencl_available() -> bool:
    from engine.measure.backends import probe_all
    return probe_all()["opencl"].available


def test_suite_holds_the_issues_shapes_and_reads_back_as_text():
    wanted = {(1024,) * 3, (1000,) * 3, (1536,) * 3, (3000,) * 3, (4096,) * 3, (4100, 4090, 4095),
              (8192,) * 3, (8192, 8192, 256), (12288, 1024, 4096), (1024, 12288, 4096),
              (64, 4096, 4096), (16, 8192, 8192), (1, 8192, 8192), (8192, 1, 8192)}
    assert wanted <= set(SHAPE_SUITE)
    assert parse_sizes(",".join(format_shape(s) for s in SHAPE_SUITE)) == SHAPE_SUITE
    assert any(v == SHAPE_SUITE for v in PRESETS.values())


def test_contenders_reach_down_to_the_floor_rung_whatever_the_rung_count():
    """Every CUDA rung of a precision from its floor up runs by default (ffma_regdb is the
    lab best of several suite shapes; a count of ten dropped it when rung 33 came), the
    cuBLAS lines first; a backend without the floor rung (OpenCL) keeps its seeds."""
    from engine.kernels import registry
    shapes = _shapes_module()
    names = shapes.contenders("cuda")
    assert names[:2] == ["cublas_fp32", "cublas_tf32"]
    for precision, floor in shapes.CONTENDER_FLOOR.items():
        rungs = [v for v in registry.variants_for("cuda")          # the ladder's (Triton's: no order)
                 if v.role == "rung" and v.precision == precision and v.kind == "gemm"
                 and v.order is not None]
        lowest = registry.get(floor).order
        want = {v.name for v in rungs if v.order >= lowest}
        # each precision in an input type its floor takes (float32; float16 for half; e4m3 for FP8)
        mine = shapes.contenders("cuda", registry.get(floor).dtypes[0])
        assert floor in want and {n for n in mine if registry.get(n).precision == precision
                                  and not registry.get(n).library} == want
        assert all(registry.get(n).order < lowest for n in {v.name for v in rungs} - want)
    assert {"ffma_regdb", "ffma_wide", "skinny", "ffma_small"} <= set(names)
    opencl = shapes.contenders("opencl")
    assert opencl and all(registry.get(n).role in ("seed", "baseline", "reference") for n in opencl)


def test_window_size_preset_gives_the_suite(qtbot):
    from gui.sizes_editor import SizesEditor

    ed = SizesEditor()
    qtbot.addWidget(ed)
    name = next(n for n, v in PRESETS.items() if v == SHAPE_SUITE)
    ed.preset.setCurrentText(name)
    assert ed.shapes() == SHAPE_SUITE
    # Typing the suite back selects the preset again.
    ed.preset.setCurrentIndex(0)
    ed.set_text(", ".join(format_shape(s) for s in SHAPE_SUITE))
    assert ed.preset.currentText() == name


@pytest.mark.skipif(not _opencl_available(), reason="no OpenCL device (install pocl-opencl-icd)")
@pytest.mark.slow
def test_shapes_script_runs_verifies_tunes_and_guesses(tmp_path):
    """Two shapes of one class and one of another on PoCL: every record verified, a lab
    best per shape, the winners in the autotune cache with their class, and the
    leave-one-out guess of each shape compared with its full search."""
    out = tmp_path / "out"
    sizes = "40x36x28,44x40x32,33x17x65"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "shapes.py"), "--backend", "opencl",
                           "--sizes", sizes, "--variants", "naive,tiled_any,wpt", "--params", "ts=8,16",
                           "--warmup", "1", "--repeats", "3", "--out", str(out)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    recs = records.load(out / "shapes.json")
    ran = [r for r in recs if r.status != "skipped"]
    assert ran and all(r.status == "ok" and r.passed is True for r in ran)
    assert {(r.m, r.n, r.k) for r in ran} == set(parse_sizes(sizes))
    assert all(r.precision == "fp32" for r in ran)
    table = (out / "shapes.txt").read_text()
    mod = _shapes_module()
    rows = mod.summary_rows(recs)
    assert [row["shape"] for row in rows] == parse_sizes(sizes)
    for row in rows:
        at = [r for r in ran if (r.m, r.n, r.k) == row["shape"]]
        fastest = min(at, key=lambda r: r.median_ms)
        assert row["fp32"]["label"] == fastest.label()
        assert row["fp32"]["ms"] == fastest.median_ms
        assert f"{format_shape(row['shape']):<18} {fastest.label()}" in table
    cache = json.loads((out / "autotune.json").read_text())
    assert len(cache) == 3 * 3                      # 3 variants × 3 shapes
    # The two 4-aligned small shapes share a class: each one's guess comes from the other.
    assert "from" in table and "class (1 shapes)" in table
    guess = [ln for ln in table.splitlines() if ln.startswith("guess vs full search over")]
    assert guess and "9 (variant, shape) pairs" in guess[0]
    pcts = [float(ln.split()[-2]) for ln in table.splitlines()
            if ln.split() and ln.split()[0] in ("naive", "tiled_any", "wpt") and "x" in ln.split()[1]]
    assert len(pcts) == 9 and all(0 < p <= 100.0 + 1e-9 for p in pcts)
    # --from re-prints the same tables from the saved records, running nothing.
    again = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "shapes.py"), "--from",
                            str(out / "shapes.json"), "--cache", str(out / "autotune.json")],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.splitlines()[1:] == table.splitlines()[1:]


def test_lab_best_keeps_the_fastest_verified_lab_kernel_per_shape_and_precision():
    def rec(variant, ms, shape=(64, 64, 64), passed=True, status="ok", precision=None):
        r = records.ResultRecord(backend="cuda", device="dev", variant=variant, params={}, m=shape[0],
                                 n=shape[1], k=shape[2], dtype="float32", median_ms=ms, status=status,
                                 passed=passed)
        if precision:
            r.precision = precision
        return r

    recs = [rec("ffma_wide", 2.0), rec("skinny", 1.5, passed=False, status="failed"),
            rec("cublas_fp32", 0.5), rec("ffma_regdb", 1.8), rec("tf32_mma", 0.9),
            rec("tf32_wgmma_tma", 0.7), rec("cublas_tf32", 0.1), rec("ffma_wide", 3.0, shape=(1, 64, 64))]
    best = derived.lab_best(recs)
    got = {((r.m, r.n, r.k), k[-1]): r.variant for k, r in best.items()}
    # failed verification, references: never the lab best
    assert got == {((64, 64, 64), "fp32"): "ffma_regdb", ((64, 64, 64), "tf32"): "tf32_wgmma_tma",
                   ((1, 64, 64), "fp32"): "ffma_wide"}
    # A TF32 request may run an FP32 kernel (as accurate or more) where that one is faster;
    # without a TF32 kernel at a shape there is no TF32 line at all.
    recs.append(rec("skinny", 0.3))
    best = derived.lab_best(recs)
    got = {((r.m, r.n, r.k), k[-1]): r.variant for k, r in best.items()}
    assert got[((64, 64, 64), "tf32")] == got[((64, 64, 64), "fp32")] == "skinny"
    assert ((1, 64, 64), "tf32") not in got
    assert not math.isnan(best[next(iter(best))].median_ms)


def test_paired_rounds_give_the_ratio_and_never_pick_the_lab_best():
    """The table's % of cuBLAS is the median of the paired rounds' ratios (the sweep's one
    timing kept beside it); a paired record, however fast, never becomes the lab best or a
    cache winner; a round whose kernel failed is left out."""
    mod = _shapes_module()

    def rec(variant, ms, paired=None, passed=True, status="ok", params=None):
        r = records.ResultRecord(backend="cuda", device="dev", variant=variant, params=dict(params or {}),
                                 m=96, n=80, k=64, dtype="float32", median_ms=ms, status=status,
                                 passed=passed)
        r.precision = "fp32"
        if paired:
            r.extra["paired"] = {"precision": "fp32", "round": paired[0], "line": paired[1]}
        return r

    sweep = [rec("ffma_wide", 2.0, params={"bk": 16}), rec("ffma_wide", 2.4, params={"bk": 8}),
             rec("ffma_regdb", 2.2), rec("cublas_fp32", 1.9)]
    assert mod.paired_items(sweep, (96, 80, 64)) == [("fp32", ("ffma_wide", {"bk": 16}), ("cublas_fp32", {}))]
    rounds = [rec("ffma_wide", 2.0, (0, "lab best"), params={"bk": 16}), rec("cublas_fp32", 2.1, (0, "line")),
              rec("ffma_wide", 1.0, (1, "lab best"), params={"bk": 16}), rec("cublas_fp32", 1.05, (1, "line")),
              rec("ffma_wide", 2.0, (2, "lab best"), params={"bk": 16}), rec("cublas_fp32", 1.9, (2, "line")),
              rec("ffma_wide", 0.5, (3, "lab best"), passed=False, status="failed", params={"bk": 16}),
              rec("cublas_fp32", 1.9, (3, "line"))]
    rows = mod.summary_rows(sweep + rounds)
    cell = rows[0]["fp32"]
    assert cell["paired"] == pytest.approx([105.0, 105.0, 95.0])
    assert cell["pct_of_cublas"] == pytest.approx(105.0)
    assert cell["pct_of_cublas_sweep"] == pytest.approx(95.0)
    assert cell["ms"] == 2.0 and cell["label"] == sweep[0].label()     # the sweep's, not round 1's 1.0
    assert mod.search_winners(sweep + rounds)[("ffma_wide", (96, 80, 64))].median_ms == 2.0
    table = mod.summary_table(rows, None)
    assert " 105.0  95.0-105.0 " in table and "median over paired rounds" in table
    # without rounds: the sweep's ratio, no range, no footnote
    plain = mod.summary_rows(sweep)[0]["fp32"]
    assert plain["pct_of_cublas"] == pytest.approx(95.0) and plain["paired"] == []
    assert "paired rounds" not in mod.summary_table(mod.summary_rows(sweep), None)


def test_contenders_of_16_bit_and_fp8_inputs_come_from_the_headers():
    """A half or FP8 suite runs the reference lines and rungs whose header lists the input
    type and B's layout, from the precision's floor up; no FP32 or TF32 kernel and no FP32
    line joins it (they do not take 16-bit words)."""
    from engine.kernels import registry
    shapes = _shapes_module()
    for dtype, layout, precision in (("bfloat16", "kn", "half"), ("float16", "nk", "half"),
                                     ("float8_e4m3", "nk", "fp8"), ("float8_e4m3", "kn", "fp8")):
        names = shapes.contenders("cuda", dtype, layout)
        takes = [v for v in registry.variants_for("cuda") if dtype in v.dtypes and layout in v.layouts]
        refs = [v.name for v in takes if v.role == "reference"]
        assert refs and names[:len(refs)] == refs, (dtype, layout, names)
        floor = registry.get(shapes.CONTENDER_FLOOR[precision])
        want = {v.name for v in takes if v.role == "rung" and v.precision == precision
                and v.order is not None and v.order >= floor.order}
        assert floor.name in want and set(names[len(refs):]) == want, (dtype, layout, names)
    assert shapes.contenders("cuda", "bfloat16")[0] == "cublas_half"
    assert {"half_wmma", "half_mma", "half_wgmma"} <= set(shapes.contenders("cuda", "float16"))
    # FP8's line is kept for B as K×N too: the backend skips it there, saying why (below)
    assert shapes.contenders("cuda", "float8_e4m3", "kn")[:2] == ["cublaslt_fp8", "fp8_wgmma"]
    assert not {"cublas_fp32", "cublas_tf32", "ffma_wide", "tf32_mma"} & set(shapes.contenders("cuda", "float16"))
    # the cpu backend has no 16-bit rungs: numpy, its seed, takes every type
    assert shapes.contenders("cpu", "float16") == ["cpu_numpy"]


def _rec(variant, ms, dtype="float32", shape=(96, 80, 64), paired=None, status="ok", error="",
         params=None, layout=""):
    r = records.ResultRecord(backend="cuda", device="dev", variant=variant, params=dict(params or {}),
                             m=shape[0], n=shape[1], k=shape[2], dtype=dtype, median_ms=ms,
                             status=status, passed=True if status == "ok" else None, error=error,
                             layout=layout)
    r.gflops = 2.0 * shape[0] * shape[1] * shape[2] / (ms * 1e-3) / 1e9 if ms > 0 else math.nan
    if paired:
        r.extra["paired"] = {"precision": paired[0], "round": paired[1], "line": paired[2]}
    return r


def test_summary_gives_each_precision_its_own_section_line_and_peak():
    """FP32 and FP16 records at one shape: two sections, each lab best against the line of
    its own precision (cublas_fp32 for FP32, cublas_half for FP16, never the other's), with
    paired rounds of each precision kept apart; the device line names both peaks."""
    from engine.measure.backends.base import DeviceInfo
    mod = _shapes_module()
    sweep = [_rec("ffma_wide", 2.0, params={"bk": 16}), _rec("cublas_fp32", 1.9),
             _rec("half_wgmma", 0.5, "float16", params={"stages": 4}), _rec("half_mma", 1.2, "float16"),
             _rec("cublas_half", 0.45, "float16")]
    rounds = [_rec("half_wgmma", 0.5, "float16", paired=("fp16", 0, "lab best"), params={"stages": 4}),
              _rec("cublas_half", 0.49, "float16", paired=("fp16", 0, "line")),
              _rec("half_wgmma", 0.5, "float16", paired=("fp16", 1, "lab best"), params={"stages": 4}),
              _rec("cublas_half", 0.51, "float16", paired=("fp16", 1, "line")),
              _rec("half_wgmma", 0.5, "float16", paired=("fp16", 2, "lab best"), params={"stages": 4}),
              _rec("cublas_half", 0.50, "float16", paired=("fp16", 2, "line"))]
    assert [r.precision or derived.record_precision(r) for r in sweep] == ["fp32"] * 2 + ["fp16"] * 3
    assert mod.paired_items(sweep, (96, 80, 64)) == [
        ("fp32", ("ffma_wide", {"bk": 16}), ("cublas_fp32", {})),
        ("fp16", ("half_wgmma", {"stages": 4}), ("cublas_half", {}))]
    row, = mod.summary_rows(sweep + rounds)
    assert row["precisions"] == ["fp32", "tf32", "fp16"]
    assert row["fp32"]["label"] == sweep[0].label() and row["fp32"]["cublas_ms"] == 1.9
    assert row["fp32"]["pct_of_cublas"] == pytest.approx(95.0) and row["fp32"]["paired"] == []
    assert row["fp16"]["label"] == sweep[2].label() and row["fp16"]["cublas_ms"] == 0.45
    assert row["fp16"]["pct_of_cublas_sweep"] == pytest.approx(90.0)
    assert row["fp16"]["paired"] == pytest.approx([98.0, 102.0, 100.0])
    assert row["fp16"]["pct_of_cublas"] == pytest.approx(100.0)
    assert "tf32" not in row and mod.paired_ratios(rounds, (96, 80, 64), "fp32") == []
    device = DeviceInfo(backend="cuda", index=0, name="gpu", peak_gflops_fp32=60e3,
                        peak_gflops_tf32=500e3, peak_gflops_fp16=1000e3)
    table = mod.summary_table([row], device)
    lines = table.splitlines()
    assert lines[0] == ("device: gpu; FP32 SIMT peak 60.0 TFLOP/s; TF32 tensor peak 500.0 TFLOP/s; "
                        "FP16 tensor peak 1000.0 TFLOP/s")
    head = lines[1]
    assert head.index("FP32 lab best") < head.index("TF32 lab best") < head.index("FP16 lab best")
    body = next(ln for ln in lines if ln.startswith("96x80x64"))
    # the FP16 cell in its own column (the empty TF32 one holds its place), 100.0 of cublas_half
    assert body.index(sweep[2].label()) == head.index("FP16 lab best")
    assert "    95.0 " in body and "   100.0  98.0-102.0 " in body
    assert "median over paired rounds" in table


def test_summary_of_a_half_run_alone_and_a_skipped_line_said():
    """A BF16 run's table has one section, BF16, with the bandwidth columns; an FP8 run with
    B as K×N, where cuBLASLt was skipped, shows its lab best without a % of cuBLAS and says
    why under the table instead of failing."""
    mod = _shapes_module()
    bf16 = [_rec("half_wgmma", 0.5, "bfloat16"), _rec("cublas_half", 0.45, "bfloat16")]
    table = mod.summary_table(mod.summary_rows(bf16), None)
    head = table.splitlines()[0]
    assert head.split()[1:4] == ["BF16", "lab", "best"] and "FP32" not in head and "TF32" not in head
    assert "GB/s" in head and "under the BF16 ridge" in table and "    90.0 " in table
    why = "cuBLASLt's FP8 GEMM takes B as N×K only (the TN form); run with --layout nk"
    fp8 = [_rec("fp8_wgmma", 0.3, "float8_e4m3", layout="kn"),
           _rec("cublaslt_fp8", math.nan, "float8_e4m3", status="skipped", error=why, layout="kn"),
           _rec("fp8_wgmma", 0.9, "float8_e4m3", shape=(1, 512, 512), layout="kn"),
           _rec("cublaslt_fp8", math.nan, "float8_e4m3", shape=(1, 512, 512), status="skipped", error=why,
                layout="kn")]
    rows = mod.summary_rows(fp8)
    assert [row["no_line"] for row in rows] == [{"fp8": ("cublaslt_fp8", why)}] * 2
    assert all(math.isnan(row["fp8"]["pct_of_cublas"]) for row in rows)
    from engine.measure.backends.base import DeviceInfo
    device = DeviceInfo(backend="cuda", index=0, name="gpu", peak_gflops_fp16=1000e3, peak_gflops_fp8=2000e3)
    assert device.peaks()["fp8"] == 2000e3          # what an FP8 record's % of peak is taken of
    table = mod.summary_table(rows, device)
    assert table.splitlines()[0] == "device: gpu; FP8 tensor peak 2000.0 TFLOP/s"
    assert table.splitlines()[1].split()[1] == "FP8"
    assert table.splitlines()[-1] == f"FP8: no %cuBLAS at 2 shape(s): cublaslt_fp8 did not run: {why}"


def test_saved_fp32_suite_reprints_as_it_was_printed():
    """The FP32/TF32 table of the saved H100 suite, as the run printed it, is what --from
    prints from its records today (the per-precision sections keep float32's layout)."""
    saved = (ROOT / "benchmarks" / "results" / "h100_shapes.txt").read_text().splitlines()
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "shapes.py"), "--from",
                           str(ROOT / "benchmarks" / "results" / "h100_shapes.json")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    again = proc.stdout.splitlines()
    assert len(again) > 10 and again == saved[:len(again)]


@pytest.fixture
def numpy_half_line(monkeypatch):
    """numpy registered as the cpu backend's 16-bit reference line (role reference,
    precision half): where the cpu backend has no cuBLAS, numpy runs as both the lab's
    kernel (cpu_numpy) and the line, so a half suite has a line to pair with."""
    import dataclasses
    from engine.kernels import registry
    line = dataclasses.replace(registry.get("cpu_numpy"), name="numpy_half_line", role="reference",
                               precision="half", dtypes=("float16", "bfloat16"), order=None,
                               newcomer=frozenset())
    monkeypatch.setitem(registry.REGISTRY, line.name, line)
    return line.name


def test_float16_suite_on_the_cpu_pairs_against_its_line_and_keeps_fp32_winners(
        tmp_path, numpy_half_line, capsys):
    """The suite in float16 on the cpu backend: the line comes from the registry (a
    reference listing float16), the table has an FP16 section with paired ratios, the
    winners go to the cache under float16 beside an FP32 entry left as it was, and --from
    prints the same table; B as N×K stores nothing and says why."""
    from engine.kernels.registry import REGISTRY
    from engine.run import autotune
    mod = _shapes_module()
    assert mod.contenders("cpu", "float16") == [numpy_half_line, "cpu_numpy"]
    out, cache = tmp_path / "out", tmp_path / "autotune.json"
    sizes = "40x36x28,33x17x65"
    fp32_winner = records.ResultRecord(backend="cpu", device="x", variant="cpu_numpy", params={},
                                       m=40, n=36, k=28, dtype="float32", median_ms=0.125)
    args = ["--backend", "cpu", "--sizes", sizes, "--warmup", "1", "--repeats", "3", "--budget", "0",
            "--out", str(out), "--cache", str(cache)]
    from engine.measure.backends.cpu import _cpu_name
    autotune.store("cpu", _cpu_name(), "cpu_numpy", "float32", (40, 36, 28), fp32_winner, 1, cache)
    assert mod.main(args + ["--dtype", "float16"]) == 0
    printed = capsys.readouterr().out
    recs = records.load(out / "shapes.json")
    assert {r.dtype for r in recs} == {"float16"} and {r.precision for r in recs} == {"fp16"}
    assert all(r.status == "ok" and r.passed is True for r in recs)
    rows = mod.summary_rows(recs)
    assert [row["shape"] for row in rows] == parse_sizes(sizes)
    for row in rows:
        cell = row["fp16"]
        assert cell["label"] == "cpu_numpy" and len(cell["paired"]) == 3
        assert cell["pct_of_cublas"] == pytest.approx(sorted(cell["paired"])[1])
        assert math.isfinite(cell["cublas_ms"]) and "fp32" not in row
        paired = [r for r in recs if r.extra.get("paired") and (r.m, r.n, r.k) == row["shape"]]
        assert [r.variant for r in paired] == ["cpu_numpy", numpy_half_line] * 3
    table = (out / "shapes.txt").read_text()
    head = table.splitlines()[1]
    assert "FP16 lab best" in head and "FP32" not in head and "TF32" not in head
    assert "median over paired rounds" in table and table.split("\n\n")[0] in printed
    assert "FP16 left out" in table and "one parameter combination per shape" in table
    entries = json.loads(cache.read_text())
    device = recs[0].device
    assert entries[f"cpu|{device}|cpu_numpy|float32|40x36x28"]["median_ms"] == 0.125
    assert {k for k in entries if "|float16|" in k} == {f"cpu|{device}|cpu_numpy|float16|{s}"
                                                        for s in sizes.split(",")}
    assert numpy_half_line in REGISTRY and not any(numpy_half_line in k for k in entries)
    # --from: the same table from the saved half records (their own types, no --dtype)
    assert mod.main(["--from", str(out / "shapes.json")]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == table.split("\n\n")[0].splitlines()[1:]
    # B as N×K: its winners are entries of their own (the layout in the key); the others stay
    before = json.loads(cache.read_text())
    assert mod.main(args + ["--dtype", "bfloat16", "--layout", "nk", "--out", str(tmp_path / "nk")]) == 0
    nk = (tmp_path / "nk" / "shapes.txt").read_text()
    assert "BF16 lab best" in nk
    after = json.loads(cache.read_text())
    assert {k: after[k] for k in before} == before
    assert {k for k in after if k not in before} == {f"cpu|{device}|cpu_numpy|bfloat16/nk|{s}"
                                                     for s in sizes.split(",")}


@pytest.mark.skipif(not _opencl_available(), reason="no OpenCL device (install pocl-opencl-icd)")
def test_paired_pass_times_the_lab_best_and_its_line_in_turn(tmp_path):
    """On PoCL (no library line: the sweep's other kernel stands in for cuBLAS), the paired pass runs
    the sweep's lab best and the line alternately, every record verified and marked with
    its round, and the summary's ratio is the rounds' median."""
    from engine.run.runner import Plan, Sweep, expand_items

    mod = _shapes_module()
    shape = (45, 37, 29)
    plan_args = dict(backend="opencl", dtype="float32", warmup=1, repeats=3)
    sweep = Sweep()
    try:
        items = expand_items("opencl", ["naive", "tiled_any"], {"ts": (8, 16)})
        recs = sweep.run(Plan(items=items, shapes=[shape], **plan_args), lambda ev: None)
        (key, winner), = derived.lab_best(recs).items()
        # the other kernel stands in for cuBLAS; the lab best against itself is no pair
        other = "naive" if winner.variant != "naive" else "tiled_any"
        assert mod.paired_items(recs, shape, against={"fp32": winner.variant}) == []
        paired = mod.paired_pass(sweep, plan_args, recs, shape, 3, lambda ev: None, against={"fp32": other})
    finally:
        sweep.close()
    assert [(r.variant, r.extra["paired"]["line"], r.extra["paired"]["round"]) for r in paired] == [
        (winner.variant, "lab best", 0), (other, "line", 0), (winner.variant, "lab best", 1),
        (other, "line", 1), (winner.variant, "lab best", 2), (other, "line", 2)]
    assert all(r.status == "ok" and r.passed is True and (r.m, r.n, r.k) == shape for r in paired)
    assert all(r.params == winner.params for r in paired if r.variant == winner.variant)
    ratios = mod.paired_ratios(paired, shape, "fp32")
    want = [100.0 * paired[i + 1].median_ms / paired[i].median_ms for i in (0, 2, 4)]
    assert ratios == pytest.approx(want)
    row = mod.summary_rows(recs + paired)[0]
    assert row["fp32"]["label"] == winner.label()
    assert row["fp32"]["pct_of_cublas"] == pytest.approx(sorted(want)[1])


@pytest.mark.skipif(not _opencl_available(), reason="no OpenCL device (install pocl-opencl-icd)")
@pytest.mark.slow
def test_bench_prints_the_lab_best_table(tmp_path):
    """``bench`` with two lab kernels adds the lab best table: per shape the fastest
    verified one (checked against the saved records)."""
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "main.py", "bench", "--backend", "opencl", "--variants",
                           "naive,tiled_any", "--sizes", "33x17x65,48", "--repeats", "3", "--out", str(out)],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Lab best" in proc.stdout
    lab = proc.stdout[proc.stdout.index("Lab best"):]
    for shape in ((33, 17, 65), (48, 48, 48)):
        at = [r for r in records.load(out) if (r.m, r.n, r.k) == shape]
        fastest = min(at, key=lambda r: r.median_ms)
        line = next(ln for ln in lab.splitlines() if f" {format_shape(shape)} " in ln)
        assert fastest.label() in line and "FP32" in line


def test_results_table_marks_the_lab_best_rows(make_window, tmp_path, qtbot):
    """The table's "Lab best" column stars, per shape and precision, the fastest verified
    lab kernel of a real H100 suite file (never cuBLAS), and follows a faster row arriving."""
    from gui.results_table import COLUMNS

    recs = [r for r in records.load(ROOT / "benchmarks" / "results" / "h100_shapes.json")
            if (r.m, r.n, r.k) in ((1000, 1000, 1000), (1, 8192, 8192))]
    path = tmp_path / "two.json"
    records.save(recs, path)
    win = make_window()
    assert win.open_results(path)
    model = win.table.model_
    col = [c.title for c in COLUMNS].index("Lab best")
    starred = {model.record(i).label() + f"@{model.record(i).m}": model.data(model.index(i, col))
               for i in range(model.rowCount()) if model.data(model.index(i, col))}
    want = {}
    for key, r in derived.lab_best(model.store.records).items():
        want.setdefault(r.label() + f"@{r.m}", []).append(key[-1].upper())
    want = {k: "★ " + ", ".join(sorted(v)) for k, v in want.items()}
    assert starred == want and len(want) == 3          # FP32 and TF32 at both shapes
    assert not any("cublas" in k for k in starred)
    # At the GEMV the FP32 skinny rung is the best TF32 kernel too: TF32 may run it.
    gemv = {k: v for k, v in starred.items() if k.startswith("skinny[") and k.endswith("@1")}
    assert list(gemv.values()) == ["★ FP32, TF32"]
    # A faster verified row of another kernel takes the star once the rows pause.
    best = next(r for r in model.store.records if r.label() + "@1" in gemv and r.m == 1)
    faster = records.ResultRecord(**{**best.__dict__, "variant": "ffma_wide", "params": dict(best.params),
                                     "median_ms": best.median_ms / 2, "extra": dict(best.extra)})
    win.store.add([faster])
    qtbot.waitUntil(lambda: model.data(model.index(model.rowCount() - 1, col)) == "★ FP32, TF32",
                    timeout=3000)
    row = next(i for i in range(model.rowCount()) if model.record(i) is best)
    assert model.data(model.index(row, col)) == ""
