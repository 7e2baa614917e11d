"""Dispatch tables (engine.kernels.dispatch_table): the lab's own GEMM, one variant per
precision that picks kernel and parameters by shape from a declared TOML table.

The TOML parsing and its file:line errors, the registry's dispatch variants (a bad table
listed as unusable, never stopping the registry), the resolution shape -> kernel, the
record field, the lab's own tables (every rule names a kernel and parameters that fit at a
shape of its class), and a real run: the OpenCL table through PoCL at odd shapes, verified.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.kernels import dispatch_table, registry
from engine.kernels.dispatch_table import DispatchError
from engine.results import records
from engine.results.records import RecordFieldError, ResultRecord
from engine.run.runner import Plan, Sweep
from tests.helpers import MINIMAL_KERNEL, require_backend

ROOT = Path(__file__).resolve().parents[1]

GOOD = """\
# a comment
[lab_x]
title = "test line"
backend = "opencl"
precision = "fp32"
dtypes = ["float32", "int32"]

[[lab_x.rule]]
when = "M % 16 == 0 and N % 16 == 0 and K % 16 == 0"
variant = "tiled"
params = { block = 16 }

[[lab_x.rule]]
when = "min(M, N) >= SMS"
variant = "wpt"
params = { ts = 16 }

[[lab_x.rule]]
variant = "tiled_any"
"""


def _tables(tmp_path, text, name="d.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return dispatch_table.parse(path)


@pytest.fixture
def registered(tmp_path):
    """Register the tables of a text as dispatch variants (removed afterwards)."""
    added = []

    def add(text):
        tables, problems = _tables(tmp_path, text)
        for t in tables:
            registry.REGISTRY[t.name] = registry._checked_table(registry.dispatch_variant(t))
            added.append(t.name)
        return tables, problems
    yield add
    for name in added:
        registry.REGISTRY.pop(name, None)


def test_parse_good_table(tmp_path):
    tables, problems = _tables(tmp_path, GOOD)
    assert problems == []
    (t,) = tables
    assert (t.name, t.backend, t.precision, t.dtypes, t.problem) == (
        "lab_x", "opencl", "fp32", ("float32", "int32"), None)
    assert [r.variant for r in t.rules] == ["tiled", "wpt", "tiled_any"]
    assert t.rules[0].params == {"block": 16} and t.rules[2].when is None
    assert t.rules[1].where.endswith("d.toml:13")       # the line of its [[lab_x.rule]]
    # first match wins; SMS is the default's (132) without a device, the device's with one
    assert t.rule_at(64, 64, 64).variant == "tiled"
    assert t.rule_at(200, 200, 30).variant == "wpt"
    assert t.rule_at(100, 100, 30).variant == "tiled_any"
    assert t.rule_at(100, 100, 30, sms=64).variant == "wpt"


@pytest.mark.parametrize("text, line, words", [
    (GOOD.replace('variant = "tiled_any"\n', 'when = "K > 3"\nvariant = "tiled_any"\n'), 19,
     "must apply to every shape"),
    (GOOD.replace('"min(M, N) >= SMS"', '"min(M, Q) >= 1"'), 14, "unknown name 'Q'"),
    # B's layout and C's element bytes are a kernel pre-pass's names, not a rule's: a rule
    # picks for every type and layout its table promises
    (GOOD.replace('"min(M, N) >= SMS"', '"OB == 4"'), 14, "unknown name 'OB'"),
    (GOOD.replace("params = { ts = 16 }", 'params = { ts = "16 if NK else 8" }'), 16, "unknown name 'NK'"),
    (GOOD.replace('"min(M, N) >= SMS"', '"__import__(1)"'), 14, "only cdiv"),
    (GOOD.replace('"min(M, N) >= SMS"', '"M +"'), 14, "does not parse"),
    (GOOD.replace("params = { ts = 16 }", 'params = { ts = 1.5 }'), 16, "whole number"),
    (GOOD.replace("params = { ts = 16 }", 'params = { ts = "big" }'), 16, "unknown name 'big'"),
    # a parameter may use those before it in the rule, not those after it
    (GOOD.replace("params = { ts = 16 }", 'params = { ts = "16 if wpt > 2 else 8", wpt = 4 }'), 16,
     "unknown name 'wpt'"),
    (GOOD.replace("params = { ts = 16 }", 'params = { ts = "16 if" }'), 16, "does not parse"),
    (GOOD.replace('backend = "opencl"', 'backend = "metal"'), 4, "backend must be"),
    (GOOD.replace('precision = "fp32"', 'precision = "fp64"'), 5, "precision must be"),
    (GOOD.replace('variant = "wpt"', 'variant = "wpt"\ncolour = 1'), 16, "unknown key 'colour'"),
    (GOOD.replace('title = "test line"', 'title = "test line"\nspeed = 3'), 4, "unknown key 'speed'"),
])
def test_bad_table_is_listed_unusable_with_file_and_line(tmp_path, text, line, words):
    tables, problems = _tables(tmp_path, text)
    assert problems == []
    (t,) = tables
    assert t.problem and f"d.toml:{line}:" in t.problem and words in t.problem, t.problem
    with pytest.raises(DispatchError, match=words):
        t.rule_at(64, 64, 64)


HALF = """\
[lab_h]
title = "16-bit line"
backend = "cuda"
precision = "half"
dtypes = ["bfloat16", "float16"]
layouts = ["kn", "nk"]

[[lab_h.rule]]
variant = "half_wgmma"
params = { persist = "1 if 2 * cdiv(M, 128) * cdiv(N, 256) >= 5 * SMS else 0" }
"""


#: A kernel file of the test's own that takes int8 (in both layouts of B)
INT8_KERNEL = MINIMAL_KERNEL.format(name="my_int8_pick", extra='dtypes = ["int8"]\nlayouts = ["kn", "nk"]')


INT8 = """\
[lab_i8]
title = "int8 line"
backend = "cuda"
precision = "int8"
dtypes = ["int8"]
layouts = ["kn", "nk"]

[[lab_i8.rule]]
when = "M <= 64"
variant = "my_int8_pick"
params = { bs = 16 }

[[lab_i8.rule]]
variant = "my_int8_pick"
"""


def test_an_int8_line_routes_to_its_int8_kernel(registered, tmp_path, monkeypatch):
    """A table of precision int8 promising int8 (as cuda/lab/dispatch.toml's lab_int8 does):
    the lab's int8 GEMM for the kernel editor and % of cuBLAS; a pick that takes no int8
    makes it unusable, saying so."""
    path = tmp_path / "my_int8_pick.cu"
    path.write_text(INT8_KERNEL)
    (kernel,), problems = registry.read_kernel_files([path])
    assert problems == [] and kernel.precision == "int8"
    monkeypatch.setitem(registry.REGISTRY, kernel.name, kernel)
    (t,), problems = registered(INT8)
    assert problems == [] and (t.precision, t.dtypes) == ("int8", ("int8",))
    v = registry.get("lab_i8")
    assert v.dispatch.problem is None and (v.precision, v.dtypes) == ("int8", ("int8",))
    # the first int8 line (cuda/lab/dispatch.toml's lab_int8 where it is there)
    assert registry.get(registry.dispatch_for("cuda", "int8")).precision == "int8"
    assert registry.concrete("lab_i8", {}, 64, 256, 256, 132, dtype="int8", layout="nk") == \
        ("my_int8_pick", {"bs": 16})
    assert registry.concrete("lab_i8", {}, 512, 256, 256, 132, dtype="int8") == ("my_int8_pick", {"bs": 16})
    assert "does not support float32" in v.check("cuda", {}, 64, 64, 64, "float32")
    registered(INT8.replace("lab_i8", "lab_i8b").replace('"my_int8_pick"', '"ffma_wide"')
               .replace("params = { bs = 16 }\n", ""))
    assert "ffma_wide does not take int8, which [lab_i8b] promises" in \
        registry.get("lab_i8b").dispatch.problem


def test_a_table_promises_types_and_layouts_its_picks_take(registered, tmp_path):
    (t,), _ = registered(HALF)
    v = registry.get("lab_h")
    assert (t.dtypes, t.layouts, v.dtypes, v.layouts) == (("bfloat16", "float16"), ("kn", "nk"),
                                                          ("bfloat16", "float16"), ("kn", "nk"))
    assert v.dispatch.problem is None and v.precision == "half"
    assert registry.concrete("lab_h", {}, 4096, 4096, 4096, 132, dtype="bfloat16", layout="nk") == \
        ("half_wgmma", {"stages": 4, "persist": 1, "bm": 128, "bn": 256, "streamk": 0, "rowpad": 16,
                       "inplace": 0, "tmastore": 0, "cluster": 1})
    assert registry.concrete("lab_h", {}, 3000, 3000, 3000, 132, dtype="float16")[1]["persist"] == 0
    assert "does not support float32" in v.check("cuda", {}, 64, 64, 64, "float32")
    # a pick that does not take a promised type or layout makes the table unusable, saying so
    registered(HALF.replace("lab_h", "lab_h2").replace('"half_wgmma"', '"ffma_wide"').replace(
        'params = { persist = "1 if 2 * cdiv(M, 128) * cdiv(N, 256) >= 5 * SMS else 0" }\n', ""))
    assert "ffma_wide does not take bfloat16, float16, which [lab_h2] promises" in \
        registry.get("lab_h2").dispatch.problem
    (bad,), _ = _tables(tmp_path, HALF.replace('["kn", "nk"]', '["kn", "mk"]'), "bad.toml")
    assert "bad.toml:6:" in bad.problem and "layouts must be a list of kn, nk" in bad.problem


def test_broken_toml_still_lists_its_tables(tmp_path):
    tables, problems = _tables(tmp_path, GOOD.replace("params = { block = 16 }", "params = { block = "))
    assert problems == [] and [t.name for t in tables] == ["lab_x"]
    assert "d.toml:11:" in tables[0].problem and "not valid TOML" in tables[0].problem
    tables, problems = _tables(tmp_path, "no = [ table")
    assert tables == [] and "d.toml:1:" in str(problems[0])
    tables, problems = dispatch_table.parse(tmp_path / "nowhere.toml")
    assert tables == [] and len(problems) == 1


def test_rules_checked_against_the_registry(registered):
    (t,), _ = registered(GOOD.replace('variant = "wpt"', 'variant = "nosuch"'))
    v = registry.get("lab_x")
    assert "d.toml:13: 'nosuch' is no opencl kernel" in v.dispatch.problem
    why = v.check("opencl", {}, 64, 64, 64, "float32")
    assert why and "nosuch" in why                      # unavailable, with the reason
    assert registry.concrete("lab_x", {}, 64, 64, 64) == ("lab_x", {})


@pytest.mark.parametrize("params, words", [("{ colour = 3 }", "no parameter 'colour'"),
                                           ("{ ts = 12 }", "ts=12 is not among")])
def test_rule_params_checked(registered, params, words):
    registered(GOOD.replace("params = { ts = 16 }", f"params = {params}"))
    assert words in registry.get("lab_x").dispatch.problem


EXPR = GOOD.replace("params = { ts = 16 }", 'params = { ts = "8 if N <= 300 else 16", wpt = "min(8, max(1, K // 16))" }')


def test_expression_params_worked_out_at_the_shape(registered):
    (t,), problems = registered(EXPR)
    assert problems == [] and t.problem is None and registry.get("lab_x").dispatch.problem is None
    rule = t.rules[1]
    assert rule.params["ts"].text == "8 if N <= 300 else 16" and rule.values(200, 200, 30) == {"ts": 8, "wpt": 1}
    assert registry.concrete("lab_x", {}, 200, 200, 30) == ("wpt", {"ts": 8, "wpt": 1})
    assert registry.concrete("lab_x", {}, 200, 400, 130) == ("wpt", {"ts": 16, "wpt": 8})
    assert registry.get("lab_x").check("opencl", {}, 200, 400, 130, "float32") is None


def test_a_param_uses_the_params_before_it(registered, tmp_path):
    """A rule's parameters are worked out in order, each seeing those before it: one
    condition written once serves several parameters."""
    (t,), problems = registered(GOOD.replace(
        "params = { ts = 16 }", 'params = { ts = "8 if N <= 300 else 16", wpt = "8 if ts == 16 else 2" }'))
    assert problems == [] and t.problem is None
    assert t.rules[1].values(200, 200, 30) == {"ts": 8, "wpt": 2}
    assert registry.concrete("lab_x", {}, 200, 400, 130) == ("wpt", {"ts": 16, "wpt": 8})
    (later,), _problems = _tables(tmp_path, GOOD.replace(
        "params = { ts = 16 }", 'params = { wpt = "8 if ts == 16 else 2", ts = 16 }'), "later.toml")
    assert "unknown name 'ts'" in later.problem and "only those before it" in later.problem, later.problem


def test_expression_param_value_the_kernel_lacks_says_why(registered):
    """An expression's value is checked where it is routed: the table loads (its other shapes
    run), the shape where it gives a value the kernel lacks has the reason, not a crash."""
    registered(EXPR.replace("min(8, max(1, K // 16))", "K // 16"))
    v = registry.get("lab_x")
    assert v.dispatch.problem is None
    assert registry.concrete("lab_x", {}, 200, 200, 64) == ("wpt", {"ts": 8, "wpt": 4})
    with pytest.raises(DispatchError) as exc:
        registry.route("lab_x", 200, 200, 48)
    assert all(w in str(exc.value) for w in ("d.toml:13:", 'wpt = "K // 16" gives 3', "200×200×48",
                                              "(4, 1, 2, 8)")), exc.value
    why = v.check("opencl", {}, 200, 200, 48, "float32")
    assert why and "d.toml:13:" in why and "gives 3" in why
    assert registry.concrete("lab_x", {}, 200, 200, 48) == ("lab_x", {})
    # an expression that fails at a shape (division by zero) is a reason too
    registered(EXPR.replace("min(8, max(1, K // 16))", "8 // (K - 48)").replace("lab_x", "lab_z"))
    why = registry.get("lab_z").check("opencl", {}, 200, 200, 48, "float32")
    assert why and "d.toml:13:" in why and "division by zero" in why and "200×200×48" in why


def test_resolution_fills_left_out_params(registered):
    registered(GOOD)
    v = registry.get("lab_x")
    assert v.role == "dispatch" and v.space == {} and v.backends == ("opencl",)
    # left out: the kernel's defaults (wpt's wpt = 4 is its first value)
    assert registry.concrete("lab_x", {}, 200, 200, 30) == ("wpt", {"ts": 16, "wpt": 4})
    assert registry.concrete("lab_x", {}, 64, 64, 64) == ("tiled", {"block": 16})
    r = registry.route("lab_x", 100, 100, 30)
    assert (r.variant, r.params, r.rule.variant) == ("tiled_any", {"block": 16}, "tiled_any")
    # a kernel that does not fit the shape makes the dispatch line's check say so
    registered(GOOD.replace('variant = "tiled_any"', 'variant = "tiled"').replace("lab_x", "lab_y"))
    why = registry.get("lab_y").check("opencl", {}, 100, 100, 30, "float32")
    assert why.startswith("tiled[block=16] (its pick): sizes must be multiples")
    assert registry.get("lab_y").check("opencl", {}, 64, 64, 64, "float32") is None


def test_chosen_params_resolved_at_the_shape():
    """A rule that leaves a [chosen] parameter out gets the shape's value."""
    v = registry.get("lab_fp32")
    if v.dispatch.problem:
        pytest.fail(v.dispatch.problem)
    for shape in [(4100, 4090, 4095), (4096, 4096, 4096), (1000, 1000, 1000)]:
        name, params = registry.concrete("lab_fp32", {}, *shape)
        target = registry.get(name)
        for p in target.chosen:
            assert params[p] != registry.AUTO
            assert params[p] == target.resolve({**params, p: registry.AUTO}, *shape)[p]


def _representative(rule, earlier: list) -> tuple[int, int, int]:
    """A suite-like shape of a rule's class: the first of a list that its 'when' takes and
    no earlier rule does."""
    candidates = [(1, 8192, 8192), (8192, 1, 8192), (16, 8192, 8192), (64, 4096, 4096),
                  (8192, 8192, 256), (1000, 1000, 1000), (1024, 1024, 1024), (3000, 3000, 3000),
                  (4100, 4090, 4095), (4096, 4096, 4096), (8192, 8192, 8192), (70, 80, 90),
                  (64, 64, 64), (33, 65, 17), (4096, 40, 4096), (8192, 20, 8192), (80, 4096, 4096),
                  (150, 4096, 4096), (4097, 4095, 4093),
                  (2500, 3100, 2900)]
    for s in candidates:
        if rule.applies(*s) and not any(r.applies(*s) for r in earlier):
            return s
    raise AssertionError(f"{rule.where}: no representative shape")


@pytest.mark.parametrize("name", ["lab_fp32", "lab_tf32", "lab_opencl", "lab_half", "lab_fp8",
                                  "lab_int8"])
def test_builtin_tables_rules_fit_at_a_shape_of_their_class(name):
    """Every rule names a kernel of the table's backend with parameters it has, and fits at a
    representative shape of its class (this fails while a kernel merge has not landed the
    parameters the table is written against)."""
    assert registry.BUILTIN_PROBLEMS == []
    v = registry.get(name)
    assert v.role == "dispatch" and v.dispatch.problem is None, v.dispatch.problem
    table = v.dispatch
    for i, rule in enumerate(table.rules):
        shape = _representative(rule, list(table.rules[:i]))
        assert table.rule_at(*shape) is rule
        for dtype in table.dtypes:
            for layout in table.layouts:
                why = v.check(table.backend, {}, *shape, dtype, layout)
                assert why is None, f"{rule.where} at {shape} ({dtype}, {layout}): {why}"


def test_builtin_tables_rank_near_the_references_and_are_ticked():
    names = list(registry.REGISTRY)
    assert names.index("lab_fp32") < names.index("cublas_fp32")
    assert all(registry.ticked_by_default(registry.get(n), b) for n, b in
               (("lab_fp32", "cuda"), ("lab_tf32", "cuda"), ("lab_opencl", "opencl")))
    assert registry.get("lab_tf32").precision == "tf32"


def test_record_field_round_trips(tmp_path):
    rec = ResultRecord(backend="opencl", device="d", variant="lab_opencl", params={}, m=3, n=4,
                       k=5, dtype="float32", dispatched_to="wpt[ts=16,wpt=4]")
    for suffix in ("json", "csv"):
        path = records.save([rec], tmp_path / f"r.{suffix}")
        (back,) = records.load(path)
        assert back.dispatched_to == "wpt[ts=16,wpt=4]" and back.variant == "lab_opencl"
    data = json.loads((tmp_path / "r.json").read_text())["records"]
    assert data[0]["dispatched_to"] == "wpt[ts=16,wpt=4]"
    assert records.parse_field("dispatched_to", "") == ""
    assert records.parse_field("dispatched_to", "skinny") == "skinny"
    for bad in ("wpt[ts=x]", "rm -rf /", 3, "a[b=1,]"):
        with pytest.raises(RecordFieldError):
            records.parse_field("dispatched_to", bad)


def test_opencl_dispatch_runs_the_picked_seed_verified():
    """The OpenCL table through PoCL: each shape runs (and verifies) the seed its rule
    picks; the records carry the dispatch line's name, no params (one curve) and what ran."""
    require_backend("opencl")
    shapes = [(64, 64, 64), (70, 80, 90), (33, 65, 17), (96, 64, 32)]
    plan = Plan(backend="opencl", items=[("lab_opencl", {})], shapes=shapes, warmup=0,
                repeats=2)
    sweep = Sweep()
    try:
        recs = sweep.run(plan, lambda ev: None)
    finally:
        sweep.close()
    assert len(recs) == len(shapes)
    for rec, shape in zip(recs, shapes):
        name, params = registry.concrete("lab_opencl", {}, *shape)
        assert rec.status == "ok" and rec.passed is True, rec.error
        assert (rec.variant, rec.params) == ("lab_opencl", {})
        assert rec.dispatched_to == registry.kernel_label(name, params)
        assert math.isfinite(rec.median_ms) and (rec.m, rec.n, rec.k) == shape
    assert {r.dispatched_to.split("[")[0] for r in recs} == {"tiled", "wpt", "tiled_any"}
    assert len({r.series_key() for r in recs}) == 1


def test_the_generator_does_not_write_over_a_hand_written_table(tmp_path, capsys):
    """benchmarks/dispatch_table.py --write makes single-value rules: over a table whose
    rules hold expressions (written by hand) it refuses and leaves the file as it was,
    unless --force."""
    import importlib.util
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("dispatch_script", root / "benchmarks" / "dispatch_table.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    saved = dict(registry.REGISTRY)
    try:
        path = tmp_path / "dispatch.toml"
        hand = (root / "cuda" / "lab" / "dispatch.toml").read_text()
        path.write_text(hand)
        assert script.hand_written(path)                 # the lab's table has expressions
        assert script.main(["--write", str(path)]) == 2
        assert path.read_text() == hand
        assert "written by hand" in capsys.readouterr().err
        assert script.main(["--write", str(path), "--force"]) == 0
        assert path.read_text() != hand and script.hand_written(path) == ""
    finally:
        registry.REGISTRY.clear()
        registry.REGISTRY.update(saved)


def _widest_filling_width(m: int, n: int, sms: int) -> int:
    """The width lab_half's rule means: the least waves × (bn + 32) over bn = 128..256 by 32
    (128-row tiles), the widest on ties."""
    cost = {bn: -(-(-(-m // 128) * -(-n // bn)) // sms) * (bn + 32) for bn in range(128, 257, 32)}
    return min(sorted(cost, reverse=True), key=cost.get)


def _random_picks(table_name, variant, seed, sides, ks, skip=lambda rule: False):
    """(m, n, k, sms, values) of 400 random shapes and SM counts at which the dispatch line
    table_name's rule picks variant (and skip(rule) is false), and variant accepts the pick."""
    import random
    rng = random.Random(seed)
    table, v = registry.get(table_name).dispatch, registry.get(variant)
    dtype = v.dtypes[-1]
    for _ in range(400):
        m, n, k = rng.randint(*sides), rng.randint(*sides), rng.choice(ks)
        sms = rng.choice([78, 114, 132])
        rule = table.rule_at(m, n, k, sms)
        if rule.variant != variant or skip(rule):
            continue
        values = rule.values(m, n, k, sms)
        assert v.check("cuda", {**v.default_params(), **values}, m, n, k, dtype) is None
        yield m, n, k, sms, values


def test_lab_half_picks_the_width_whose_tiles_fill_the_last_wave():
    """The rule's one expression (costs × 8 + an index, the least taken) picks the width of
    its model at any shape and SM count that reach it, and step 32 accepts its pick there."""
    table = registry.get("lab_half").dispatch
    seen = set()
    for m, n, _k, sms, values in _random_picks("lab_half", "half_wgmma", 39, (1, 20000), [64, 1000, 4096],
                                               skip=lambda rule: "bm" in rule.params):
        bn = values["bn"]
        assert bn == _widest_filling_width(m, n, sms), (m, n, sms, bn)
        seen.add(bn)
    assert seen == {128, 160, 192, 224, 256}
    assert (table.rule_at(1536, 1536, 1536, 132).values(1536, 1536, 1536, 132)["bn"],
            table.rule_at(3072, 3072, 3072, 132).values(3072, 3072, 3072, 132)["bn"],
            table.rule_at(4096, 4096, 4096, 132).values(4096, 4096, 4096, 132)["bn"]) == (160, 192, 256)


def test_lab_half_reads_a_in_place_where_its_rows_allow_at_the_widest_tiles():
    """lab_half leaves A where it lies (inplace 1: only B is copied onto whole lines) where
    rows are copied, A's rows are whole 16 bytes (K % 8 == 0) and the tiles are 256 wide;
    everywhere else both operands go onto whole lines as before; step 32 takes every pick."""
    seen = set()
    for m, n, k, sms, values in _random_picks("lab_half", "half_wgmma", 41, (1, 20000), [1000, 3000, 4100, 5000],
                                              skip=lambda rule: "bm" in rule.params):
        want = int(values["rowpad"] == 128 and k % 8 == 0 and values["bn"] == 256)
        assert values["inplace"] == want, (m, n, k, sms, values)
        seen.add(want)
    assert seen == {0, 1}
    table = registry.get("lab_half").dispatch
    assert table.rule_at(4000, 3000, 5000, 132).values(4000, 3000, 5000, 132)["inplace"] == 1
    assert table.rule_at(3000, 3000, 3000, 132).values(3000, 3000, 3000, 132)["inplace"] == 0   # 192 wide
    assert table.rule_at(4100, 4090, 4095, 132).values(4100, 4090, 4095, 132)["inplace"] == 0   # K % 8


def test_lab_half_pairs_ctas_on_b_at_the_widths_that_load_spare_columns():
    """lab_half pairs its CTAs in clusters sharing B (cluster 2) at 160- and 224-wide tiles
    (whose stages load 192 and 256 columns of B), where both operands are copied or read as
    they lie (not A in place), the tiles take more than one wave, and the pairs of tiles
    take no more waves of the SM pairs than the tiles take of the SMs; one CTA a cluster
    everywhere else."""
    def waves(units, slots):
        return -(-units // slots)
    seen = set()
    for m, n, k, sms, values in _random_picks("lab_half", "half_wgmma", 43, (1, 20000), [1000, 3000, 5000],
                                              skip=lambda rule: "bm" in rule.params):
        bn = values["bn"]
        tiles = -(-m // 128) * -(-n // bn)
        fits = tiles > sms and waves(-(-m // 256) * -(-n // bn), sms // 2) <= waves(tiles, sms)
        want = 2 if bn in (160, 224) and values["inplace"] == 0 and fits else 1
        assert values["cluster"] == want, (m, n, k, sms, values)
        seen.add((want, bn))
    assert {(2, 160), (2, 224), (1, 160), (1, 224), (1, 256)} <= seen
    table = registry.get("lab_half").dispatch
    pick = {s: table.rule_at(*s, 132).values(*s, 132)["cluster"]
            for s in ((5000, 5000, 5000), (1612, 4424, 7264), (6000, 7000, 5000), (8192, 8192, 8192),
                      (1536, 1536, 1536))}
    # 224 wide; 224 wide but 140 pairs of tiles take 3 waves of 66 where 260 tiles take 2 of
    # 132; A in place; 256 wide; 160 wide but 120 tiles, one wave
    assert pick == {(5000, 5000, 5000): 2, (1612, 4424, 7264): 1, (6000, 7000, 5000): 1, (8192, 8192, 8192): 1,
                    (1536, 1536, 1536): 1}


def _tf32_tiles_and_stream_k(m, n, sms):
    """lab_tf32's model for its mid and large sizes: 256x128 tiles with stream-K where the
    last wave is at most half full and holds at least 1/9 of the SMs' tiles (fewer and the
    kernel declines: a tile would have more than ~10 parts), in g equal parts of K (streamk
    2); else 128x128 tiles where their waves, each 0.6 of a 256x128 wave, take less time."""
    t256 = -(-m // 256) * -(-n // 128)
    rem = t256 % sms
    if t256 > sms and 2 * rem <= sms and 9 * rem >= sms:
        return 256, 2
    w128, w256 = -(-(-(-m // 128) * -(-n // 128)) // sms), -(-t256 // sms)
    return (128 if 3 * w128 < 5 * w256 else 256), 0


def test_lab_tf32_takes_its_wave_model_tiles_and_stream_k():
    """At random mid and large shapes and SM counts, lab_tf32's rules pick the tile height,
    stream-K and row padding of its model, and tf32_wgmma_rs accepts the pick; both tile
    heights and both stream-K values occur."""
    table = registry.get("lab_tf32").dispatch
    seen, padded = set(), set()
    for m, n, k, sms, values in _random_picks("lab_tf32", "tf32_wgmma_rs", 26, (1300, 12000),
                                              [600, 3001, 6000]):
        assert (values["bm"], values["streamk"]) == _tf32_tiles_and_stream_k(m, n, sms), (m, n, sms)
        seen.add((values["bm"], values["streamk"]))
        # rows copied onto whole lines: A's where they start inside a sector; B's too where
        # B is read often enough (M / bm times) to pay for its one copy, from M = 8 bm
        pads = (k % 8 != 0 or (n % 8 != 0 and m >= 8 * values["bm"])) and m * n * k >= 2 ** 31
        assert values["rowpad"] == (128 if pads else 16), (m, n, k, values)
        padded.add((values["bm"], values["rowpad"], n % 8 != 0 and m < 2048))
    assert seen == {(256, 0), (256, 2), (128, 0)}
    assert (128, 128, True) in padded and (256, 16, True) in padded     # B's copy from M = 8 bm
    assert table.rule_at(3900, 2100, 5100, 132).values(3900, 2100, 5100, 132)["bm"] == 128
    assert table.rule_at(4096, 4096, 4096, 132).values(4096, 4096, 4096, 132)["bm"] == 256
