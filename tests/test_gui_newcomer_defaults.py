"""GUI: the newcomer defaults (issue 36, part 3).

A first start with no saved settings ticks a short run (the kernel files' ``newcomer``
flag, cuBLAS, a dispatch line, the user's kernels): at most about ten curves in a chart.
A ticked variant or value that fits none of the chosen sizes is marked "not for these
sizes" and a run leaves it out, so no run makes "skipped" rows for a kernel that does not
apply to the sizes; settings saved before keep their choices.

Set ``MATMUL_LAB_SHOTS=FOLDER`` to keep the screenshots of the first run on opencl, at
sizes 64–512 then, and on cuda with the window's defaults (``assets/first_run_opencl.png``
and ``assets/first_run_h200.png`` come from here).
"""
import dataclasses
import json
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from engine.kernels import registry  # noqa: E402
from engine.run.runner import Plan, Sweep, item_fit  # noqa: E402
from engine.inputs.sizes import PRESETS  # noqa: E402
from gui.settings import ini_settings  # noqa: E402

DEFAULT_SIZES = PRESETS["powers of two 128–4096"]
OPENCL_SEEDS = ["naive", "tiled", "tiled_any", "wpt", "aat_simple", "aat_coalesced", "aat_padded"]
#: What a first start ticks on OpenCL: the seeds and the dispatch line over them.
OPENCL_FIRST = OPENCL_SEEDS + ["lab_opencl"]
#: What a first start ticks on CUDA: two seeds, the dispatch lines (the lab's own GEMM) and
#: the two cuBLAS lines beside them, two ladder steps (the production kernels run as the
#: dispatch lines' picks).
CUDA_FIRST = ["naive", "tiled", "lab_fp32", "lab_tf32", "cublas_fp32", "cublas_tf32",
              "blocktile_2d", "warptile"]
MAX_CURVES = 10


def _curves_expected(backend: str, names: list[str]) -> int:
    """Curves a run of ``names`` draws where all of them run: one each, and a "lab best"
    line per precision where two or more of the lab's variants have it."""
    lab: dict[str, int] = {}
    for n in names:
        v = registry.get(n)
        if v.role != "reference":
            lab[v.precision] = lab.get(v.precision, 0) + 1
    return len(names) + sum(1 for count in lab.values() if count >= 2)


def _skipped(recs):
    return [(r.label(), r.m, r.error) for r in recs if r.status == "skipped"]


def test_first_start_ticks_a_short_run_per_backend(make_window):
    win = make_window()
    cfg = win.config
    cfg.select("opencl", 0)
    assert cfg.variants.ticks is registry.Ticks.NEWCOMER
    assert cfg.variants.checked_variants() == OPENCL_FIRST
    assert cfg.sizes.shapes() == DEFAULT_SIZES
    # One parameter set each (the defaults), every one fits every default size.
    assert len(cfg.variants.plan_items()) == len(OPENCL_FIRST)
    assert cfg.run_count() == len(OPENCL_FIRST) * len(DEFAULT_SIZES)
    assert all(cfg.variants.mark(n) == "" for n in OPENCL_FIRST)
    assert _curves_expected("opencl", OPENCL_FIRST) <= MAX_CURVES
    cfg.select("cpu", 0)
    assert cfg.variants.checked_variants() == ["cpu_numpy"]
    # CUDA (no device here: the tree is the registry's): seeds, a few rungs, cuBLAS.
    tree = cfg.variants
    tree.set_backend("cuda")
    assert tree.checked_variants() == CUDA_FIRST
    assert _curves_expected("cuda", CUDA_FIRST) <= MAX_CURVES
    assert all(tree.mark(n) == "" for n in CUDA_FIRST)
    assert len(tree.plan_items()) == len(CUDA_FIRST)
    # Another architecture ticks the same short run (no sm_90a kernel among the defaults).
    tree.set_arch("8.6")
    assert tree.checked_variants() == CUDA_FIRST


def test_the_default_set_is_declared_data():
    """The rule is the registry's: the files' ``newcomer`` flag per backend, the library
    lines and a dispatch line by role, never an experiment, nothing that cannot run the
    first run's float32 (a half-only line)."""
    for backend in ("cuda", "opencl", "cpu"):
        for v in registry.variants_for(backend):
            ticked = registry.ticked_by_default(v, backend, arch="sm_90")
            assert ticked == ("float32" in v.dtypes
                              and (backend in v.newcomer or v.role in registry.NEWCOMER_ROLES)), v.name
            assert not (ticked and v.role == "experiment")
            # Settings saved before the newcomer defaults: every variant but the experiments.
            assert registry.ticked_by_default(v, backend, registry.Ticks.ALL) == \
                (v.role != "experiment")
            if ticked:      # each default parameter set fits every default size
                params = {p: registry.AUTO if p in v.chosen else x
                          for p, x in v.default_params("sm_90").items()}
                fit = item_fit(backend, v.name, params, DEFAULT_SIZES, "float32")
                assert fit.left_out == (), (v.name, fit.reason)
    dispatch = registry.Variant(name="dispatch_fp32", technique="t", seed="s",
                                sources={"cuda": "x.cu"}, space={}, geometry=lambda *a: None,
                                role="dispatch")
    assert registry.ticked_by_default(dispatch, "cuda")


def _run(qtbot, win, timeout=120_000):
    with qtbot.waitSignal(win.controller.finished, timeout=timeout):
        assert win.start_run()
    return win.store.records


@pytest.mark.parametrize("backend", ["opencl", "cpu"])
def test_first_run_draws_few_curves_and_no_skipped_rows(qtbot, make_window, shots, backend):
    win = make_window()
    cfg = win.config
    cfg.select(backend, 0)
    names = cfg.variants.checked_variants()
    shot = bool(os.environ.get("MATMUL_LAB_SHOTS")) and backend == "opencl"
    sizes = "64:512:x2" if shot else "32,64,96"      # small: PoCL runs it in seconds
    cfg.sizes.set_text(sizes)
    if not shot:          # the screenshot times as the window's defaults do
        cfg.warmup.setValue(0)
        cfg.repeats.setValue(2)
    recs = _run(qtbot, win, timeout=300_000)
    assert _skipped(recs) == []
    assert len(recs) == len(names) * len(cfg.sizes.shapes())
    assert all(r.status == "ok" and r.passed for r in recs)
    curves = win.charts.curves("gflops")
    assert len(curves) == _curves_expected(backend, names) <= MAX_CURVES, sorted(curves)
    if backend == "opencl":
        win.charts.set_current("gflops")
        qtbot.wait(100)
        win.grab().save(str(shots / "first_run_opencl.png"))


@pytest.mark.gpu
def test_first_run_on_cuda_with_the_defaults(qtbot, make_window, shots):
    """A first start on CUDA, Run as it comes: the dispatch lines and cuBLAS beside the
    seeds and two ladder steps, every row verified, none skipped, at most ten curves."""
    from tests.helpers import backend_status
    if not backend_status("cuda").available:
        pytest.skip("cuda backend unavailable")
    win = make_window()
    win.resize(1280, 800)
    cfg = win.config
    cfg.select("cuda", 0)
    names = cfg.variants.checked_variants()
    assert sorted(names) == sorted(CUDA_FIRST)
    recs = _run(qtbot, win, timeout=300_000)
    assert _skipped(recs) == []
    assert len(recs) == len(names) * len(cfg.sizes.shapes())
    assert all(r.status == "ok" and r.passed for r in recs), [
        (r.label(), r.m, r.status, r.error) for r in recs if not r.passed]
    assert {r.dispatched_to.split("[")[0] for r in recs if r.variant == "lab_fp32"} <= {
        "ffma_regdb", "ffma_wide", "ffma_small", "skinny"}
    assert len(win.charts.curves("gflops")) == _curves_expected("cuda", names) <= MAX_CURVES
    win.charts.set_current("gflops")
    qtbot.wait(100)
    win.grab().save(str(shots / "first_run_h200.png"))


def test_a_specialist_ticked_for_sizes_it_does_not_fit_is_marked_and_not_run(qtbot, make_window):
    win = make_window()
    cfg = win.config
    cfg.select("opencl", 0)
    tree = cfg.variants
    tree.set_only(["naive", "tiled"])
    tree.set_param_values("naive", "block", [16])
    tree.set_param_values("tiled", "block", [16])
    cfg.warmup.setValue(0)
    cfg.repeats.setValue(2)
    # tiled needs multiples of its block: none of these sizes
    cfg.sizes.set_text("40,56")
    mark = tree.mark("tiled")
    assert mark.startswith("not for these sizes: sizes must be multiples of block=16")
    assert set(tree.value_marks("tiled", "block")) == {16, 32}      # 8 divides both
    assert tree.mark("naive") == "" and tree.value_marks("naive", "block") == {}
    row = next(tree.topLevelItem(i) for i in range(tree.topLevelItemCount())
               if tree.topLevelItem(i).text(0) == "tiled")
    assert row.text(1) == mark
    box = tree._value_widgets[("tiled", "block")].boxes[16]
    assert box.font().strikeOut() and "not for these sizes" in box.toolTip()
    assert cfg.run_count() == 2 and win.run_bar.status.text() == "Ready: 2 runs"
    recs = _run(qtbot, win)
    assert _skipped(recs) == [] and {r.variant for r in recs} == {"naive"}
    assert "tiled[block=16]: not for these sizes (sizes must be multiples" in win.log.plain_text()
    # Some sizes fit: it runs at those only, and the row says at how many.
    cfg.sizes.set_text("32,40,64")
    assert tree.mark("tiled") == "at 2 of 3 sizes"
    assert row.text(1).startswith("at 2 of 3 sizes · ")
    recs = _run(qtbot, win)
    assert _skipped(recs) == []
    assert sorted(r.m for r in recs if r.variant == "tiled") == [32, 64]
    assert "tiled[block=16]: not run at 40 (" in win.log.plain_text()
    # Only variants that fit nothing: Run says so rather than starting.
    cfg.sizes.set_text("40,56")
    tree.set_only(["tiled"])
    assert "tiled: not for these sizes" in cfg.problems()[0]
    assert not win.run_bar.run_button.isEnabled()
    # Unticked, it carries no mark; ticked again at sizes it fits, none either.
    tree.set_only(["naive"])
    assert tree.mark("tiled") == "" and row.text(1) == registry.get("tiled").technique
    assert not box.font().strikeOut()


def test_a_specialist_on_cuda_is_marked_at_square_sizes(make_window):
    """The tree's marks need no device: skinny (M or N ≤ 64) at the default sizes."""
    win = make_window()
    tree = win.config.variants
    tree.set_backend("cuda")
    tree.set_context(DEFAULT_SIZES, "float32")
    tree.set_variant_checked("skinny", True)
    assert tree.mark("skinny").startswith("not for these sizes: made for skinny shapes")
    tree.set_context(DEFAULT_SIZES + [(4096, 16, 4096)], "float32")
    assert tree.mark("skinny") == "at 1 of 7 sizes"
    # int32 chosen: the cuBLAS lines take float32 only (no longer ticked by default; ticked,
    # marked)
    win.config.dtype.setCurrentText("int32")
    assert "cublas_fp32" not in tree.checked_variants()
    tree.set_variant_checked("cublas_fp32", True)
    assert tree.mark("cublas_fp32").startswith("not in int32: cublas_fp32 does not "
                                               "support int32")
    # B as N×K: a kernel that reads B as K×N only says so, not "not for these sizes"
    win.config.dtype.setCurrentText("float32")
    win.config.layout_b.setCurrentIndex(win.config.layout_b.findData("nk"))
    tree.set_variant_checked("tiled_any", True)
    assert tree.mark("tiled_any").startswith("not for B as N×K: ")
    assert tree.mark("cublas_fp32") == ""                    # cuBLAS reads B either way


def test_choosing_a_16_bit_type_ticks_its_own_lines_and_keeps_the_users_choices(make_window):
    """Before the user chooses, bfloat16 ticks the 16-bit dispatch line and cuBLAS's (the
    FP32 lines would all be skips); a line the user ticked or unticked keeps that choice
    through type changes; back to float32, the FP32 defaults return."""
    win = make_window()
    cfg = win.config
    tree = cfg.variants
    tree.set_backend("cuda")            # no device needed: the tree lists the cuda kernels
    cfg.dtype.setCurrentText("float32")
    first = set(tree.checked_variants())
    assert {"lab_fp32", "cublas_fp32"} <= first and "lab_half" not in first
    cfg.dtype.setCurrentText("bfloat16")
    half = set(tree.checked_variants())
    assert {"lab_half", "cublas_half"} <= half
    assert all("bfloat16" in registry.get(n).dtypes for n in half), half
    assert all(tree.mark(n) == "" for n in half)           # every ticked line runs
    tree.set_variant_checked("half_wgmma", True)           # the user's own choices
    tree.set_variant_checked("cublas_half", False)
    cfg.dtype.setCurrentText("float8_e4m3")
    fp8 = set(tree.checked_variants())
    assert {"lab_fp8", "cublaslt_fp8", "half_wgmma"} <= fp8 and "cublas_half" not in fp8
    cfg.dtype.setCurrentText("float32")
    assert set(tree.checked_variants()) == first | {"half_wgmma"}


def test_only_fitting_runs_leave_out_what_does_not_fit_and_bench_keeps_its_skips():
    """The engine's side: a plan with only_fitting makes no record where an item does not
    fit; without it (bench) each such pair is a skipped record, as before."""
    items = [("naive", {"block": 16}), ("tiled", {"block": 16})]
    kw = dict(backend="cpu", items=[("cpu_numpy", {})], shapes=[(16, 16, 16)], warmup=0, repeats=1)
    assert Plan(**kw, only_fitting=True).unfit_notes() == []
    plan = Plan(backend="opencl", items=items, shapes=[(32, 32, 32), (40, 40, 40)], warmup=0,
                repeats=1)
    assert plan.items_at((40, 40, 40)) == items
    fitting = dataclasses.replace(plan, only_fitting=True)
    assert fitting.items_at((40, 40, 40)) == items[:1]
    assert fitting.unfit_notes() == [
        "tiled[block=16]: not run at 40 (sizes must be multiples of block=16 (like the seed's "
        "CUDA sample, no bounds checks): M=40, N=40, K=40; use tiled_any for any size)"]
    sweep = Sweep()
    try:
        logs = []
        recs = sweep.run(fitting, lambda ev: logs.append(ev))
        assert [(r.variant, r.m, r.status) for r in recs] == [
            ("naive", 32, "ok"), ("tiled", 32, "ok"), ("naive", 40, "ok")]
        started = next(ev for ev in logs if ev.kind == "started")
        assert started.total == 3
        recs = sweep.run(plan, lambda ev: None)
        assert [(r.variant, r.m, r.status) for r in recs][-1] == ("tiled", 40, "skipped")
    finally:
        sweep.close()


def test_saved_settings_keep_their_choices(make_window, tmp_path, gui_settings):
    # Saved before the newcomer defaults: no "ticks"; untouched variants were all ticked.
    old = {"backend": "opencl", "variants": {"checked": {"naive": False}, "values": {},
                                             "explicit": True}}
    ini = tmp_path / "old.ini"
    settings = ini_settings(ini)
    settings.setValue("config/state", json.dumps(old))
    settings.sync()
    win = make_window(settings)
    tree = win.config.variants
    assert tree.ticks is registry.Ticks.ALL
    assert tree.checked_variants() == [n for n in OPENCL_FIRST if n != "naive"]
    tree.set_backend("cuda")
    assert "skinny" in tree.checked_variants() and "tf32_wgmma_fused" not in tree.checked_variants()
    assert json.loads(json.dumps(tree.state()))["ticks"] == "all"
    win.close()
    # Saved now: the newcomer defaults, and the user's own ticks over them.
    win = make_window()
    tree = win.config.variants
    win.config.select("opencl", 0)
    tree.set_variant_checked("wpt", False)
    win.close()
    again = make_window()
    again.config.select("opencl", 0)
    tree = again.config.variants
    assert tree.ticks is registry.Ticks.NEWCOMER
    assert tree.checked_variants() == [n for n in OPENCL_FIRST if n != "wpt"]
    tree.set_backend("cuda")
    assert tree.checked_variants() == CUDA_FIRST
