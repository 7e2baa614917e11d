"""Share runs over several devices (issue 38 §1-2): one honest table, longest first, the timeline.

The runs use two engine processes on two OpenCL devices of PoCL: ``POCL_DEVICES`` makes
them two devices of one model (``pthread pthread``) or of two (``basic pthread``). On
OpenCL the lines other records are compared with are naive's (the baseline role).
"""
from __future__ import annotations

import math

import pytest

from engine.results import derived
from engine.results.records import RecordStatus, ResultRecord
from engine.run.dispatch import _guided_chunks, expected_item_s, is_line, split_plan, start_run
from engine.run.process import ProcessEngine
from engine.run.runner import Plan, expand_items
from engine.run.timeline import Activity, Timeline
from tests.helpers import require_backend

SHAPES = [(48, 40, 32), (96, 80, 64)]


def _share_run(monkeypatch, pocl_devices: str):
    require_backend("opencl")
    # The engine processes are spawned: they read this when they start PoCL.
    monkeypatch.setenv("POCL_DEVICES", pocl_devices)
    items = (expand_items("opencl", ["naive"], {"block": (8,)})
             + expand_items("opencl", ["tiled_any", "wpt"])[:5])
    plan = Plan("opencl", items, shapes=SHAPES, warmup=0, repeats=2, time_budget_s=0.02)
    engines = [ProcessEngine("opencl", 0), ProcessEngine("opencl", 1)]
    logs: list[str] = []
    try:
        run = start_run(plan, engines, lambda ev: logs.append(ev.message) if ev.kind == "log"
                        else None, "share")
        recs = run.result(timeout=240)
    finally:
        for e in engines:
            e.close()
    return plan, recs, logs, run


@pytest.fixture(scope="module")
def same_model():
    with pytest.MonkeyPatch.context() as mp:
        yield _share_run(mp, "pthread pthread")


@pytest.fixture(scope="module")
def two_models():
    with pytest.MonkeyPatch.context() as mp:
        yield _share_run(mp, "basic pthread")


def _naive_on(recs, r):
    return [x for x in recs if x.variant == "naive" and x.device_key() == r.device_key()
            and (x.m, x.n, x.k) == (r.m, r.n, r.k) and x.status == RecordStatus.OK]


@pytest.mark.parametrize("which", ["same_model", "two_models"])
def test_every_ratio_is_of_a_line_on_the_records_own_device(which, request):
    plan, recs, _logs, _run = request.getfixturevalue(which)
    devices = {r.device_index for r in recs}
    assert devices == {0, 1}, "both devices ran items"
    lab = [r for r in recs if not is_line(r.variant)]
    assert len(lab) == 5 * len(SHAPES)          # each lab item once: the work was shared
    for r in lab:
        assert r.status == RecordStatus.OK, r.error
        naive = _naive_on(recs, r)
        assert naive, f"{r.label()} at {r.m} on #{r.device_index}: no naive line on its device"
        assert r.speedup_vs_naive == pytest.approx(min(x.median_ms for x in naive) / r.median_ms)
    # the line ran once per device that ran that shape's items, never on the others
    for shape in SHAPES:
        ran = {r.device_index for r in lab if (r.m, r.n, r.k) == shape}
        lines = sorted(r.device_index for r in recs if r.variant == "naive"
                       and (r.m, r.n, r.k) == shape)
        assert lines == sorted(ran)


def test_one_model_is_one_table(same_model):
    _plan, recs, logs, _run = same_model
    groups = {r.share_group for r in recs}
    assert len(groups) == 1 and groups != {""}
    assert "2 × " in groups.pop()
    best = derived.lab_best(recs)
    assert len(best) == len(SHAPES)             # one lab best per shape, over both devices
    for key, r in best.items():
        rivals = [x for x in recs if (x.m, x.n, x.k) == (r.m, r.n, r.k) and x.passed
                  and not derived.is_reference_record(x)]
        assert r.median_ms == min(x.median_ms for x in rivals)
    assert any("one table over" in m for m in logs)


def test_different_models_keep_their_lab_bests_apart_and_say_so(two_models):
    _plan, recs, logs, _run = two_models
    assert all(r.share_group == "" for r in recs)
    assert len({r.device for r in recs}) == 2
    best = derived.lab_best(recs)
    per_shape = {}
    for key, r in best.items():
        per_shape.setdefault((r.m, r.n, r.k), set()).add(r.device_index)
    for shape, devs in per_shape.items():
        ran = {r.device_index for r in recs if (r.m, r.n, r.k) == shape
               and not is_line(r.variant)}
        assert devs == ran                      # a best per device that ran the shape
    assert any("shared by different devices" in m for m in logs)


def test_the_timeline_shows_each_engine(same_model):
    _plan, _recs, _logs, run = same_model
    tl = run.timeline
    assert tl.engines() == ["opencl:0", "opencl:1"]
    for name in tl.engines():
        by = tl.seconds_by_activity(name)
        assert by.get(Activity.TIME, 0) > 0 and by.get(Activity.COMPILE, 0) > 0
    text = tl.text(40)
    assert text.count("|") == 4 and "#" in text


def _rec(device, index, variant, ms, group="", precision="fp32"):
    return ResultRecord(backend="cuda", device=device, variant=variant, params={}, m=64, n=64,
                        k=64, dtype="float32", median_ms=ms, status=RecordStatus.OK, passed=True,
                        host="h", device_index=index, share_group=group, precision=precision)


def test_a_lab_best_row_is_compared_with_the_line_of_its_own_device():
    g = "2 × GPU (#0, #1)"
    recs = [_rec("GPU", 0, "cublas_fp32", 1.0, g), _rec("GPU", 1, "cublas_fp32", 2.0, g),
            _rec("GPU", 0, "tiled", 4.0, g), _rec("GPU", 1, "wpt", 3.0, g)]
    best = derived.lab_best(recs)
    assert len(best) == 1
    (key, r), = best.items()
    assert r.variant == "wpt"                   # the best of both devices
    pct = derived.lab_best_pct_of_reference(key, r, derived.reference_times(recs))
    assert pct == pytest.approx(100 * 2.0 / 3.0)    # device #1's cuBLAS, not #0's faster one
    # without #1's line there is no ratio, rather than another device's
    pct = derived.lab_best_pct_of_reference(key, r, derived.reference_times(recs[:1] + recs[2:]))
    assert math.isnan(pct)
    # not shared: each device its own table
    apart = [_rec("GPU", 0, "tiled", 4.0), _rec("GPU", 1, "wpt", 3.0)]
    assert len(derived.lab_best(apart)) == 2


def test_tasks_go_out_longest_first_and_carry_their_shapes_lines():
    items = expand_items("opencl", ["naive", "tiled_any", "wpt"])
    plan = Plan("opencl", items, shapes=[(64, 64, 64), (512, 512, 512), (128, 128, 128)],
                warmup=1, repeats=10)
    tasks = split_plan(plan, 6, lines_apart=True, peak_gflops=100.0)
    costs = [t.expected_s for t in tasks]
    assert costs == sorted(costs, reverse=True)
    assert tasks[0].plan.shapes == [(512, 512, 512)]
    assert tasks[-1].plan.shapes == [(64, 64, 64)]
    for t in tasks:
        assert not any(is_line(n) for n, _ in t.plan.items)
        assert [n for n, _ in t.lines] == ["naive"] * 3
    lab = [it for it in items if not is_line(it[0])]
    assert sorted(str(it) for t in tasks for it in t.plan.items) == sorted(str(it) for it in lab * 3)
    # within a shape the costliest items lead: here the slower-assumed baseline
    mixed = split_plan(plan, 6, peak_gflops=100.0)
    first = [t for t in mixed if t.plan.shapes == [(512, 512, 512)]][0]
    assert first.plan.items[0][0] == "naive"
    assert expected_item_s(plan, "naive", items[0][1], (512,) * 3, 100.0) > \
        expected_item_s(plan, "wpt", lab[0][1], (512,) * 3, 100.0)
    # one engine: one task per shape, in the plan's order
    one = split_plan(plan, 1)
    assert [t.plan.shapes for t in one] == [[s] for s in plan.shapes]
    assert one[0].plan.items == items


def test_chunks_shrink_as_a_shapes_work_runs_out():
    """Each chunk about 1/pieces of the expected work still left: the costliest items alone,
    then chunks that shrink to single items, so that an engine pulling the last chunk never
    holds the others up for long; every item exactly once, costliest first."""
    ranked = list(range(40))
    cost = {i: 10.0 if i < 5 else 1.0 for i in ranked}
    chunks = _guided_chunks(ranked, cost, 6)
    assert [i for c in chunks for i in c] == ranked
    assert chunks[:5] == [[0], [1], [2], [3], [4]]         # each over 1/6 of what is left
    sizes = [len(c) for c in chunks[5:]]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] == 1 and sizes[0] > 3
    left = sum(cost.values())
    for c in chunks:
        got = sum(cost[i] for i in c)
        assert len(c) == 1 or got <= left / 6 + max(cost[i] for i in c) / 2
        left -= got
    assert _guided_chunks(ranked, cost, 1) == [ranked]


def test_timeline_text_marks_activity_and_the_idle_tail():
    now = [0.0]
    tl = Timeline(clock=lambda: now[0])
    tl.begin("a", Activity.COMPILE)
    now[0] = 1.0
    tl.begin("a", Activity.TIME)
    tl.begin("b", Activity.TIME)
    now[0] = 2.0
    tl.end("b")
    now[0] = 4.0
    tl.end("a")
    assert tl.span_s() == 4.0
    assert tl.idle_tail_s() == {"a": 0.0, "b": 2.0}
    rows = tl.text(8).splitlines()
    assert rows[0].startswith("a |cc######|")
    assert rows[1].startswith("b |..##....|")
    assert tl.to_json()["engines"]["b"]["busy_s"] == 1.0



@pytest.mark.slow
def test_a_shared_autotune_runs_each_shapes_searches_as_one_queue(monkeypatch, tmp_path):
    """A share run that autotunes over two devices gives one winner per (variant, shape),
    each verified and remembered, and both devices time candidates of the shape's searches
    (one plan a shape: no device waits at the end of each variant's search)."""
    require_backend("opencl")
    monkeypatch.setenv("POCL_DEVICES", "pthread pthread")
    monkeypatch.setenv("MATMUL_LAB_CACHE", str(tmp_path / "cache"))
    items = expand_items("opencl", ["naive", "tiled_any"])
    plan = Plan("opencl", items, shapes=SHAPES, warmup=0, repeats=2, autotune=True)
    engines = [ProcessEngine("opencl", 0), ProcessEngine("opencl", 1)]
    try:
        run = start_run(plan, engines, lambda ev: None, "share")
        recs = run.result(timeout=240)
    finally:
        for e in engines:
            e.close()
    assert sorted((r.variant, (r.m, r.n, r.k)) for r in recs) == sorted(
        (v, s) for v in ("naive", "tiled_any") for s in SHAPES)
    assert all(r.status == RecordStatus.OK and r.passed for r in recs), [(r.label(), r.error) for r in recs]
    lanes = run.timeline.engines()
    assert len(lanes) == 2 and all(
        run.timeline.seconds_by_activity(lane).get(Activity.TIME, 0.0) > 0 for lane in lanes)
    assert (tmp_path / "cache" / "autotune.json").is_file()
