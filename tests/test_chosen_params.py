"""Parameters chosen by the shape: a kernel file's ``[chosen]`` table, the ``auto`` value a run
leaves to it (registry.AUTO), and how the engine, the CLI and the app resolve it per shape."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from engine.kernels import registry  # noqa: E402
from cli.bench import parse_param_overrides  # noqa: E402
from engine.kernels.kernel_file import KernelFileError, parse_header  # noqa: E402
from engine.run.runner import Plan, Sweep, expand_items  # noqa: E402

AUTO = registry.AUTO

HEADER = """\
/*
+++
name = "{name}"
title = "a probe: C stored by rows where K is short"
source = "tests"
role = "user"
backend = "opencl"

[params]
ts = [8, 16]
crows = [1, 0]

[chosen]
{chosen}

[[constraints]]
check = "crows == (1 if K <= 64 else 0)"
reason = "K = {{K}} takes crows = {{1 if K <= 64 else 0}} (chosen by the shape)"

[launch]
grid = ["cdiv(N, ts)", "cdiv(M, ts)"]
block = ["ts", "ts"]
+++
*/
"""


def _write(tmp_path, name, chosen):
    path = tmp_path / f"{name}.cl"
    path.write_text(HEADER.format(name=name, chosen=chosen) + "__kernel void matmul() {}\n")
    return path


def test_a_kernel_file_says_how_the_shape_picks_a_parameter(tmp_path):
    h = parse_header(_write(tmp_path, "probe_chosen", 'crows = "1 if K <= 64 else 0"'))
    assert set(h.chosen) == {"crows"} and h.chosen["crows"].text == "1 if K <= 64 else 0"
    # only parameters can be chosen, and only by known names
    with pytest.raises(KernelFileError, match="not in \\[params\\]"):
        parse_header(_write(tmp_path, "probe_bad1", 'tm = "8"'))
    with pytest.raises(KernelFileError, match="unknown name 'q'"):
        parse_header(_write(tmp_path, "probe_bad2", 'crows = "q + 1"'))


@pytest.mark.parametrize("name, extra, shape, want", [
    # N % 4 != 0: the warp-row copies of B with C by rows where K is short, the padded copy past it
    ("ffma_wide", {}, (2048, 2047, 1024), {"bcopy": 2, "crows": 1}),
    ("ffma_wide", {"splitk": 4, "tailk": 1}, (4097, 4095, 4093), {"bcopy": 1, "crows": 0}),
    ("ffma_regdb", {"tile": 64128, "splitk": 3, "bcopy": 2}, (1000, 1001, 2561), {"crows": 0, "hybrid": 0}),
    # 2047 x 2049: 544 tiles of 64 x 128 for 396 CTAs a wave: split only the last wave's
    ("ffma_regdb", {"tile": 64128, "splitk": 3, "bcopy": 2}, (2047, 2049, 1023), {"crows": 1, "hybrid": 1}),
    ("ffma_regdb", {"tile": 64128, "splitk": 6}, (2047, 2049, 1023), {"crows": 0, "hybrid": 1}),  # padded B
    ("ffma_regdb", {"tile": 64128, "splitk": 3}, (1000, 1001, 1000), {"crows": 1, "hybrid": 0}),  # warp rows
    ("ffma_regdb", {"tile": 64128, "splitk": 3}, (2500, 2500, 2500), {"hybrid": 1, "crows": 0}),
    ("ffma_regdb", {"tile": 64128, "splitk": 3}, (1000, 1000, 1000), {"hybrid": 0}),   # under a wave
    ("ffma_regdb", {"tile": 64128}, (2500, 2500, 2500), {"hybrid": 0}),                # no split-K
])
def test_auto_resolves_to_the_value_the_constraints_want(name, extra, shape, want):
    """At every shape the value ``auto`` resolves to is the one the kernel's constraints
    accept, so a run left to the shape is never skipped for it."""
    v = registry.get(name)
    params = {**v.default_params("9.0"), **{p: AUTO for p in v.chosen}, **extra}    # extra: as named
    got = v.resolve(params, *shape)
    assert {p: got[p] for p in want} == want and all(got[p] == x for p, x in extra.items())
    assert v.check("cuda", params, *shape, "float32") is None
    assert v.check("cuda", got, *shape, "float32") is None
    # a named value is run as named: the one the shape does not pick is refused with why
    for p, val in want.items():
        if p == "bcopy":           # any of B's copies runs where N % 4 != 0: crows follows it
            continue
        other = dict(got, **{p: 1 - val})
        assert "chosen by the shape" in (v.check("cuda", other, *shape, "float32") or "")


def test_auto_only_for_parameters_the_file_chooses():
    v = registry.get("ffma_tuned")
    assert v.chosen == {}
    why = v.check("cuda", dict(v.default_params(), bm=AUTO), 4096, 4096, 4096, "float32")
    assert "not chosen by the shape" in why
    why = registry.get("ffma_wide").check("cuda", dict(registry.get("ffma_wide").default_params(), bk=AUTO),
                                          4096, 4096, 4096, "float32")
    assert "not chosen by the shape" in why
    with pytest.raises(ValueError, match="left to the shape"):
        registry.get("ffma_wide").defines(dict(registry.get("ffma_wide").default_params(),
                                               crows=AUTO), "float32")


def test_a_chosen_expression_sees_the_values_chosen_above_it():
    """[chosen] is worked out in the file's order: ffma_wide's crows (C by rows through shared
    memory) follows bcopy as the shape picked it, or as the run named it."""
    v = registry.get("ffma_wide")
    assert list(v.chosen) == ["bcopy", "crows"]
    both = dict(v.default_params("9.0"), bcopy=AUTO, crows=AUTO)
    assert {p: v.resolve(both, 2048, 2047, 1024)[p] for p in v.chosen} == {"bcopy": 2, "crows": 1}
    assert v.resolve(dict(both, bcopy=1), 2048, 2047, 1024)["crows"] == 0
    assert v.resolve(dict(both, bcopy=2), 2048, 2047, 1024)["crows"] == 1
    for bcopy in (AUTO, 0, 1, 2):
        assert v.check("cuda", dict(both, bcopy=bcopy), 2048, 2047, 1024, "float32") is None


def test_sweeps_leave_chosen_parameters_to_the_shape_unless_named():
    """``bench`` without --params sweeps every other parameter and leaves bcopy and crows to
    the shape; --params crows=0,1 (or crows=auto) names it."""
    v = registry.get("ffma_wide")
    items = expand_items("cuda", ["ffma_wide"])
    assert {p["crows"] for _, p in items} == {p["bcopy"] for _, p in items} == {AUTO}
    assert len(items) == len(v.combos()) // len(v.space["crows"]) // len(v.space["bcopy"])
    named = expand_items("cuda", ["ffma_wide"], parse_param_overrides("crows=0,1;bk=16"))
    assert {p["crows"] for _, p in named} == {0, 1} and {p["bk"] for _, p in named} == {16}
    assert parse_param_overrides("crows=auto") == {"crows": (AUTO,)}
    assert registry.params_to_str({"bk": 16, "crows": AUTO}) == "bk=16,crows=auto"
    assert registry.params_from_str("bk=16,crows=auto") == {"bk": 16, "crows": AUTO}
    assert registry.get("ffma_wide").label({"crows": AUTO}) == "ffma_wide[crows=auto]"


def test_a_run_records_the_value_the_shape_picked(tmp_path):
    """On the OpenCL backend (PoCL in CI): a kernel file whose tile size the shape picks,
    run with ``auto`` at two shapes: each record names the tile that ran, verified."""
    src = (registry.ROOT / "opencl" / "02_tiled.cl").read_text()
    body = src[src.index("+++", src.index("+++") + 3) + 3:]
    body = body[body.index("*/") + 2:]
    path = tmp_path / "tiled_by_shape.cl"
    path.write_text(textwrap.dedent("""\
        /*
        +++
        name = "tiled_by_shape"
        title = "the seed's tiled kernel, its tile chosen by the shape"
        source = "opencl/02_tiled.cl"
        role = "user"

        [params]
        block = [16, 8]

        [chosen]
        block = "8 if M % 16 else 16"

        [[constraints]]
        check = "M % block == 0 and N % block == 0 and K % block == 0"
        reason = "sizes must be multiples of the block ({block})"

        [launch]
        grid = ["N // block", "M // block"]
        block = ["block", "block"]
        +++
        */""") + body)
    from tests.helpers import backend_status, run_plan
    st = backend_status("opencl")
    if not st.available:
        pytest.skip(f"opencl backend unavailable: {st.reason}")
    names, problems = registry.load_kernel_files([path])
    assert problems == [] and names == ["tiled_by_shape"]
    try:
        plan = Plan(backend="opencl", items=expand_items("opencl", ["tiled_by_shape"]),
                    shapes=[(24, 40, 56), (32, 48, 64)], warmup=0, repeats=1)
        assert plan.items == [("tiled_by_shape", {"block": AUTO})]
        recs = run_plan(plan)[0]
        assert [(r.m, r.params, r.status, r.passed) for r in recs] == [
            (24, {"block": 8}, "ok", True), (32, {"block": 16}, "ok", True)]
    finally:
        registry.REGISTRY.pop("tiled_by_shape", None)


def test_the_app_ticks_auto_for_a_parameter_the_shape_picks(qtbot):
    """The kernel tree offers ``auto`` first for crows and hybrid, ticked, and the plan
    carries it; ticking a value instead runs that value."""
    from engine.measure.backends.base import BackendStatus, DeviceInfo
    from gui.config_panel import ConfigPanel

    cfg = ConfigPanel()
    qtbot.addWidget(cfg)
    cfg.set_statuses({"cuda": BackendStatus("cuda", True, devices=[
        DeviceInfo("cuda", 0, "NVIDIA H100", compute_capability="9.0")])})
    cfg.select("cuda", 0)
    boxes = cfg.variants._value_widgets[("ffma_wide", "crows")].boxes
    assert list(boxes) == [AUTO, 0, 1] and boxes[AUTO].text() == "auto"
    assert [v for v, b in boxes.items() if b.isChecked()] == [AUTO]
    hybrid = cfg.variants._value_widgets[("ffma_regdb", "hybrid")].boxes
    assert [v for v, b in hybrid.items() if b.isChecked()] == [AUTO]
    bk = cfg.variants._value_widgets[("ffma_wide", "bk")].boxes
    assert AUTO not in bk                     # not chosen by the shape: no auto
    cfg.variants.set_only(["ffma_wide"])
    cfg.sizes.set_text("2048x2047x1024")
    items = cfg.build_plan().items
    assert len(items) == 1 and items[0][1]["crows"] == AUTO and items[0][1]["bk"] == 16
    assert items[0][1]["bcopy"] == AUTO
    boxes[AUTO].setChecked(False)
    boxes[0].setChecked(True)
    # crows = 0 is refused with the warp-row copies (which the shape picks) where K ≤ 3072:
    # marked, and the run needs a size it fits
    assert 0 in cfg.variants.value_marks("ffma_wide", "crows")
    cfg.sizes.set_text("2048x2047x1024, 4097x4095x4093")
    assert cfg.variants.mark("ffma_wide") == "at 1 of 2 sizes"
    assert [p["crows"] for _, p in cfg.build_plan().items] == [0]
    # nothing at this shape is skipped for a value left to the shape
    v = registry.get("ffma_wide")
    for shape in [(2048, 2047, 1024), (4097, 4095, 4093)]:
        assert v.check("cuda", items[0][1], *shape, "float32") is None


def test_a_sweep_builds_each_shapes_value_once(monkeypatch):
    """The runner's parallel build step compiles the values each shape picks (the warp-row
    copies with C by rows at K = 1024 and 1000, the padded copy at K = 4093), once each,
    never ``auto`` itself."""
    built = []

    class Backend:
        def precompile(self, jobs):
            built.extend((v.name, tuple(sorted(p.items()))) for v, p, _ in jobs)
            return len(jobs), 0.0

    sweep = Sweep()
    sweep.backend = Backend()
    v = registry.get("ffma_wide")
    params = dict(v.default_params("9.0"), bcopy=AUTO, crows=AUTO)
    plan = Plan(backend="cuda", items=[("ffma_wide", params)],
                shapes=[(2048, 2047, 1024), (4097, 4095, 4093), (2000, 2001, 1000)])
    sweep._precompile(plan, plan.shapes, lambda e: None)
    assert sorted((dict(p)["bcopy"], dict(p)["crows"]) for _, p in built) == [(1, 0), (2, 1)]


def test_autotune_searches_the_shapes_value_once():
    """A search over combinations left to the shape times each build once: ``auto`` and the
    value it resolves to are the same combination there."""
    from engine.run.autotune import search_space

    v = registry.get("ffma_wide")
    base = dict(v.default_params("9.0"), bcopy=2)
    combos = [dict(base, crows=AUTO), dict(base, crows=1), dict(base, crows=0)]
    assert search_space("ffma_wide", "cuda", (2048, 2047, 1024), "float32", combos) == [
        dict(base, crows=1)]
    assert search_space("ffma_wide", "cuda", (4097, 4095, 4093), "float32", combos) == [
        dict(base, crows=0)]


def _run_left_to_the_shape(make_window, configure, qtbot, variant: str, param: str, sizes: str):
    """Click Run on cuda with ``variant`` as the tree offers it (``param`` auto) at ``sizes``;
    returns the window and sorted (K, the value the shape picked, status, passed) per record,
    once the chart shows the sweep as one ``param=auto`` curve."""
    from tests.helpers import backend_status

    st = backend_status("cuda")
    if not st.available:
        pytest.skip(f"cuda backend unavailable: {st.reason}")
    win = make_window()
    configure(win, backend="cuda", variants=(variant,), sizes=sizes, repeats=3)
    assert [p[param] for _, p in win.config.build_plan().items] == [AUTO]
    with qtbot.waitSignal(win.controller.finished, timeout=300_000):
        win.start_run()
    got = sorted((r.k, r.params[param], r.status, r.passed) for r in win.store.records)
    qtbot.waitUntil(lambda: any(f"{param}=auto" in c for c in win.charts.curves("runtime")),
                    timeout=5000)
    return win, got


@pytest.mark.gpu
def test_the_app_runs_a_kernel_left_to_the_shape_on_the_gpu(qtbot, make_window, configure, tmp_path):
    """Click Run with ffma_wide as the tree offers it (bcopy and crows auto) at a short K
    (one wave: no slices add through C) and a long K with N % 4 != 0: both run verified, the
    warp-row copies with crows 1 and the padded copy with crows 0 (none skipped), drawn as
    one curve; the window afterwards is saved (to $OUT when set) to look at."""
    win, got = _run_left_to_the_shape(make_window, configure, qtbot, "ffma_wide", "crows",
                                      "2048x2047x1024,600x131x3100")
    assert got == [(1024, 1, "ok", True), (3100, 0, "ok", True)]
    assert sorted((r.k, r.params["bcopy"]) for r in win.store.records) == [(1024, 2), (3100, 1)]
    # one curve for the sweep: the values the shape picked show as auto
    assert not any("crows=0" in c or "crows=1" in c for c in win.charts.curves("runtime"))
    win.grab().save(str(Path(os.environ.get("OUT", tmp_path)) / "chosen_params_run.png"))


@pytest.mark.gpu
def test_the_app_runs_the_small_rung_split_by_the_shape_on_the_gpu(qtbot, make_window, configure,
                                                                   tmp_path):
    """Click Run with ffma_small as the tree offers it (splitk auto): at 256³ its tiles fill
    the GPU and K is short (no split), at 200×300×1500 they are 70 for 132 SMs and K is long
    (2 CTAs a tile, summed in order): both verified, one curve; the window is saved."""
    win, got = _run_left_to_the_shape(make_window, configure, qtbot, "ffma_small", "splitk",
                                      "256,200x300x1500")
    assert got == [(256, 1, "ok", True), (1500, 2, "ok", True)]
    win.grab().save(str(Path(os.environ.get("OUT", tmp_path)) / "small_rung_run.png"))


def test_a_sweep_left_to_the_shape_is_one_curve():
    """Records whose crows the shape picked (1 at K = 1024, 0 at K = 3100) are one chart
    curve, labelled crows=auto; the table keeps what ran. Named values stay two curves."""
    from engine.results.records import ResultRecord
    from gui.chart_data import build_series

    def rec(k, crows, by_shape):
        r = ResultRecord(backend="cuda", device="GPU", variant="ffma_wide",
                         params={"bk": 16, "crows": crows}, m=1300, n=901, k=k, dtype="float32",
                         median_ms=0.1 * k / 1024, status="ok", passed=True, flops=2 * 1300 * 901 * k)
        if by_shape:
            r.by_shape = ["crows"]
        return r

    auto = build_series([rec(1024, 1, True), rec(3100, 0, True)])
    mine = [s for s in auto if not s.reference and s.records[0].variant == "ffma_wide" and not s.lab]
    assert len(mine) == 1 and mine[0].kernel == "ffma_wide[bk=16,crows=auto]"
    assert [r.label() for r in mine[0].records] == ["ffma_wide[bk=16,crows=1]",
                                                    "ffma_wide[bk=16,crows=0]"]
    named = build_series([rec(1024, 1, False), rec(3100, 0, False)])
    assert len([s for s in named if not s.reference and not s.lab]) == 2


def test_an_expression_that_gives_no_value_is_a_skip_with_a_reason(tmp_path):
    path = _write(tmp_path, "probe_div", 'crows = "(K - 64) // (K - 64)"')    # 1, but not at K = 64
    names, problems = registry.load_kernel_files([path])
    try:
        assert problems == [] and names == ["probe_div"]
        v = registry.get("probe_div")
        why = v.check("opencl", {"ts": 8, "crows": AUTO}, 64, 64, 64, "float32")
        assert why == '[chosen] crows = "(K - 64) // (K - 64)" gives no value at 64×64×64'
        assert v.check("opencl", {"ts": 8, "crows": AUTO}, 64, 64, 32, "float32") is None
    finally:
        registry.REGISTRY.pop("probe_div", None)
