"""engine.run.autotune on OpenCL (PoCL on CI) at tiny sizes: the cache is written, reused
without timing anything, --retune searches again, and the winner is the fastest record."""
from __future__ import annotations

import json
import math

import pytest

from engine.run import autotune as at
from engine.kernels import registry
from engine.run.runner import Plan, Sweep, expand_items
from tests.helpers import require_backend

SHAPE = (16, 24, 8)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(at.CACHE_ENV, str(tmp_path / "cachedir"))
    return tmp_path / "cachedir" / "autotune.json"


@pytest.fixture
def timed(monkeypatch):
    """Count time_launches calls of the opencl backend (one per timed series)."""
    require_backend("opencl")
    from engine.measure.backends.opencl import OpenCLBackend
    calls = []
    orig = OpenCLBackend.time_launches

    def counting(self, kernel, *a, **kw):
        calls.append(kernel.variant.label(kernel.params))
        return orig(self, kernel, *a, **kw)
    monkeypatch.setattr(OpenCLBackend, "time_launches", counting)
    return calls


def test_cache_path_env_and_default(monkeypatch, tmp_path):
    monkeypatch.setenv(at.CACHE_ENV, str(tmp_path / "x.json"))
    assert at.cache_path() == tmp_path / "x.json"
    monkeypatch.setenv(at.CACHE_ENV, str(tmp_path))
    assert at.cache_path() == tmp_path / "autotune.json"
    monkeypatch.delenv(at.CACHE_ENV)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    p = at.cache_path()
    assert p.name == "autotune.json" and p.parent.name == "matmul-lab" and p.parent.parent.name == ".cache"


def test_best_record_ignores_wrong_and_failed():
    from engine.results.records import ResultRecord

    def rec(ms, status="ok", passed=True):
        r = ResultRecord(backend="b", device="d", variant="naive", params={"block": int(ms)},
                         m=1, n=1, k=1, dtype="float32", mode="hot", warmup=0, repeats=1,
                         timestamp="", versions="", flops=2, bytes=12, median_ms=ms)
        r.status, r.passed = status, passed
        return r
    recs = [rec(3.0), rec(1.0, "failed", False), rec(2.0), rec(0.5, "error", None)]
    assert at.best_record(recs).median_ms == 2.0
    assert at.best_record([]) is None


def test_autotune_cache_written_reused_and_retuned(cache, timed):
    sweep = Sweep()
    try:
        space = registry.get("naive").combos()
        best, recs = at.autotune(sweep, "opencl", 0, "naive", SHAPE, "float32",
                                 warmup=0, repeats=2)
        assert len(recs) == len(space) == len(timed)
        ok = [r for r in recs if r.status == "ok"]
        assert ok and all(r.passed for r in ok)
        fastest = min(ok, key=lambda r: r.median_ms)
        assert best == fastest.params                      # the fastest of the records
        data = json.loads(cache.read_text())
        (key, entry), = data.items()
        assert key.startswith("opencl|") and key.endswith("|naive|float32|16x24x8")
        assert entry["params"] == best and entry["searched"] == len(space)

        n = len(timed)
        best2, recs2 = at.autotune(sweep, "opencl", 0, "naive", SHAPE, "float32",
                                   warmup=0, repeats=2)
        assert best2 == best and recs2 == [] and len(timed) == n   # no new timing run

        best3, recs3 = at.autotune(sweep, "opencl", 0, "naive", SHAPE, "float32",
                                   warmup=0, repeats=2, retune=True)
        assert len(recs3) == len(space) and len(timed) == n + len(space)
        assert best3 == min((r for r in recs3 if r.status == "ok"), key=lambda r: r.median_ms).params
        # another shape or dtype is another key
        at.autotune(sweep, "opencl", 0, "naive", (8, 8, 8), "float32", warmup=0, repeats=1)
        assert len(json.loads(cache.read_text())) == 2
    finally:
        sweep.close()


def test_autotune_through_engine_thread(cache, timed):
    from engine.run.worker import EngineThread
    eng = EngineThread().start()
    try:
        best, recs = at.autotune(eng, "opencl", 0, "tiled_any", SHAPE, "float32",
                                 warmup=0, repeats=1, combos=[{"block": 8}, {"block": 16}])
        assert best in ({"block": 8}, {"block": 16}) and len(recs) == 2
        best2, recs2 = at.autotune(eng, "opencl", 0, "tiled_any", SHAPE, "float32")
        assert best2 == best and recs2 == [] and len(timed) == 2
    finally:
        assert eng.shutdown(30)


def test_stale_cache_entry_is_ignored(cache, timed):
    sweep = Sweep()
    try:
        name = sweep.ensure_open("opencl", 0).name
        key = at.cache_key("opencl", name, "naive", "float32", SHAPE)
        cache.parent.mkdir(parents=True)
        cache.write_text(json.dumps({key: {"params": {"block": 999}}}))
        best, recs = at.autotune(sweep, "opencl", 0, "naive", SHAPE, "float32", warmup=0, repeats=1)
        assert recs and best["block"] != 999
    finally:
        sweep.close()


def test_batched_searches_run_a_shape_as_one_plan_with_the_same_outcome(cache, timed):
    """``batch`` (a share run over several devices): each shape's searches go out as one
    plan, every candidate timed once, the winners stored as a search would store them, and
    a second run times each cached winner once, again one plan a shape."""
    items = expand_items("opencl", ["naive", "tiled_any"])
    plan = Plan(backend="opencl", items=items, shapes=[SHAPE, (9, 7, 5)], warmup=0, repeats=1,
                autotune=True)
    sweep = Sweep()
    plans = []

    def execute(p, emit, cancel):
        plans.append(p)
        return sweep.run(p, emit, cancel)

    try:
        name = sweep.ensure_open("opencl", 0).name
        events = []
        recs = at.run_autotuned(execute, plan, events.append, device_name=name, batch=True)
        assert [(r.variant, (r.m, r.n, r.k)) for r in recs] == [
            ("naive", SHAPE), ("tiled_any", SHAPE), ("naive", (9, 7, 5)), ("tiled_any", (9, 7, 5))]
        assert all(r.status == "ok" and r.passed for r in recs)
        assert [p.shapes for p in plans] == [[SHAPE], [(9, 7, 5)]]     # one plan a shape
        assert all(sorted(p.items, key=str) == sorted(items, key=str) for p in plans)
        assert len(timed) == 2 * len(items)
        for r in recs:          # each winner is the fastest of its variant's candidates there
            assert at.lookup("opencl", name, r.variant, "float32", (r.m, r.n, r.k)) == r.params
        plans.clear()
        again = at.run_autotuned(execute, plan, lambda e: None, device_name=name, batch=True)
        assert len(timed) == 2 * len(items) + 4 and len(plans) == 2
        assert [r.params for r in again] == [r.params for r in recs]
        assert all(len(p.items) == 2 for p in plans)                   # the cached winners
    finally:
        sweep.close()


def test_plan_autotune_in_sweep(cache, timed):
    items = expand_items("opencl", ["naive", "tiled_any"])
    plan = Plan(backend="opencl", items=items, shapes=[SHAPE, (9, 7, 5)], warmup=0, repeats=1,
                autotune=True)
    events = []
    sweep = Sweep()
    try:
        recs = at.run_autotuned(sweep, plan, events.append)
        assert [(r.variant, (r.m, r.n, r.k)) for r in recs] == [
            ("naive", SHAPE), ("tiled_any", SHAPE), ("naive", (9, 7, 5)), ("tiled_any", (9, 7, 5))]
        assert all(r.status == "ok" and r.passed for r in recs)
        searched = len(timed)
        assert searched == 2 * len(items)
        assert [e.kind for e in events].count("started") == 1
        assert events[-1].kind == "finished" and events[-1].records == recs
        again = at.run_autotuned(sweep, plan, lambda e: None)  # cache hit: one timed run each
        assert len(timed) == searched + 4
        assert [r.params for r in again] == [r.params for r in recs]
        plan.retune = True
        at.run_autotuned(sweep, plan, lambda e: None)
        assert len(timed) == searched + 4 + 2 * len(items)
    finally:
        sweep.close()


def test_cli_autotune(cache, timed, capsys):
    from cli.bench import run_bench
    args = ["--in-process", "--backend", "opencl", "--variants", "naive", "--sizes", "16x24x8", "--warmup", "0",
            "--repeats", "1", "--quiet", "--autotune"]
    assert run_bench(args) == 0
    n = len(timed)
    assert n == len(registry.get("naive").combos()) and cache.is_file()
    assert run_bench(args) == 0 and len(timed) == n + 1
    assert run_bench(args + ["--retune"]) == 0 and len(timed) == 2 * n + 1
    out = capsys.readouterr().out
    assert "naive[block=" in out


# --- shape classes and guesses ------------------------------------------------------------

def test_shape_classes_of_representative_shapes():
    c = at.shape_class
    assert [at.size_bucket(n) for n in (1, 64, 65, 512, 513, 2047, 2048, 8192)] == [
        "skinny", "skinny", "small", "small", "medium", "medium", "large", "large"]
    assert c((4096, 4096, 4096)) == c((8192, 8192, 8192)) == c((3000, 3000, 3000)) \
        == "large-large-large/vec4"
    assert c((4100, 4090, 4095)) == "large-large-large/novec"       # N, K not float4 rows
    assert c((4096, 4096, 4095)) == c((4096, 4094, 4096)) == "large-large-large/novec"
    assert c((4095, 4096, 4096)) == "large-large-large/vec4"        # M does not align rows
    assert c((1, 8192, 8192)) == c((1, 4096, 4096)) == "skinny-large-large/vec4"
    assert c((1024, 1024, 1024)) == c((1792, 1536, 1280)) == "medium-medium-medium/vec4"
    assert c((2048, 2048, 2048)) != c((1024, 1024, 1024))
    assert c((8192, 8192, 64)) == "large-large-skinny/vec4"         # split-K territory
    assert c((127, 253, 61)) == "small-small-skinny/novec"
    assert c(["16", 24, 8]) == "skinny-skinny-skinny/vec4"


def _entry(params, relative=None, **more):
    e = {"params": params, "median_ms": 1.0, "gflops": 1.0, "searched": 3, "timestamp": "",
         "versions": ""}
    if relative is not None:
        e["relative"] = relative
    return {**e, **more}


def _write(cache, entries):
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({at.cache_key("opencl", "dev", name, "float32", shape): e
                                 for (name, shape), e in entries.items()}))


def test_guess_ranks_the_class_and_skips_what_cannot_run_here(cache):
    rel = {"block=32": 1.0, "block=16": 0.8, "block=8": 0.5}
    _write(cache, {("tiled", (128, 128, 128)): _entry({"block": 32}, rel),
                   ("tiled", (256, 256, 256)): _entry({"block": 32}, rel),
                   ("tiled", (1024, 1024, 1024)): _entry({"block": 8}, {"block=8": 1.0})})
    g = at.guess_candidates("opencl", "dev", "tiled", "float32", (192, 160, 224), top=3)
    assert g.source == "class" and g.shapes == 2 and g.shape_class == "small-small-small/vec4"
    assert g.candidates == [{"block": 32}, {"block": 16}, {"block": 8}]
    assert g.scores == pytest.approx([1.0, 0.8, 0.5])
    assert "guessed from class small-small-small/vec4 (2 shapes)" in g.describe()
    # block=32 cannot run at 144 (tiled needs multiples of block): skipped, with the reason
    g = at.guess_candidates("opencl", "dev", "tiled", "float32", (144, 144, 144))
    assert g.params == {"block": 16} and g.skipped[0][0] == {"block": 32}
    assert "multiples of block=32" in g.skipped[0][1] and "1 of its combinations" in g.describe()
    assert at.guess("opencl", "dev", "tiled", "float32", (136, 136, 136)) == {"block": 8}
    # restricted to the combinations given
    assert at.guess("opencl", "dev", "tiled", "float32", (192, 160, 224),
                    combos=[{"block": 8}, {"block": 16}]) == {"block": 16}
    # a class not searched yet learns from the nearest searched shape (log2 distance):
    # 1024³ for 2048³ (block=8 there), 128³ for 64³ (block=32, then 16, 8)
    g = at.guess_candidates("opencl", "dev", "tiled", "float32", (2048, 2048, 2048))
    assert g.source == "nearest" and g.near == (1024, 1024, 1024) and g.params == {"block": 8}
    assert "guessed from the nearest searched shape 1024x1024x1024 (class " in g.describe()
    g = at.guess_candidates("opencl", "dev", "tiled", "float32", (64, 64, 64), top=3)
    assert g.near == (128, 128, 128) and g.candidates == [{"block": 32}, {"block": 16}, {"block": 8}]
    assert g.scores == [1.0, 0.8, 0.5]
    # other devices, dtypes and variants learnt nothing: the defaults
    for args in (("opencl", "other", "tiled", "float32", (192, 160, 224)),
                 ("opencl", "dev", "tiled", "int32", (192, 160, 224)),
                 ("opencl", "dev", "tiled_any", "float32", (192, 160, 224))):
        g = at.guess_candidates(*args)
        assert g.source == "default" and g.params == {"block": 16}, args
        assert "no shape of class" in g.describe()
    # nothing valid at all: no guess
    g = at.guess_candidates("opencl", "dev", "tiled", "float32", (130, 130, 132))
    assert g.source == "none" and g.params is None
    assert at.guess("opencl", "dev", "tiled", "float32", (130, 130, 132)) is None


def test_guess_prefers_the_exact_entry_unless_left_out(cache):
    _write(cache, {("naive", (100, 100, 100)): _entry({"block": 8}, {"block=8": 1.0, "block=32": 0.9}),
                   ("naive", (200, 200, 200)): _entry({"block": 32}, {"block=32": 1.0, "block=8": 0.7})})
    assert at.guess("opencl", "dev", "naive", "float32", (100, 100, 100)) == {"block": 8}
    g = at.guess_candidates("opencl", "dev", "naive", "float32", (100, 100, 100))
    assert g.source == "exact" and g.describe() == "cached {'block': 8}"
    # leave-one-out: only the other shape of the class speaks
    assert at.guess("opencl", "dev", "naive", "float32", (100, 100, 100),
                    exclude_exact=True) == {"block": 32}
    # both together: block=32 has the better mean (0.95 against 0.85)
    assert at.guess("opencl", "dev", "naive", "float32", (300, 300, 300)) == {"block": 32}
    stats = at.class_stats("opencl", "dev", "naive", "float32", "small-small-small/vec4")
    assert stats.shapes == [(100, 100, 100), (200, 200, 200)]
    assert [(p, round(s, 3), w) for p, s, w in stats.ranked] == [
        ({"block": 32}, 0.95, 1), ({"block": 8}, 0.85, 1)]
    assert at.relative_speed("opencl", "dev", "naive", "float32", (200, 200, 200),
                             {"block": 8}) == 0.7
    assert at.relative_speed("opencl", "dev", "naive", "float32", (200, 200, 200),
                             {"block": 16}) is None


def test_old_cache_entries_still_teach_their_class(cache):
    """Entries written before classes (the winner only, no relative speeds) keep their
    format and meaning: lookup reads them, and they count as the class's winners."""
    _write(cache, {("naive", (16, 24, 8)): _entry({"block": 8})})
    assert at.lookup("opencl", "dev", "naive", "float32", (16, 24, 8)) == {"block": 8}
    assert at.guess("opencl", "dev", "naive", "float32", (20, 16, 12)) == {"block": 8}
    assert at.relative_speed("opencl", "dev", "naive", "float32", (16, 24, 8), {"block": 8}) == 1.0
    cache.write_text(json.dumps({"junk": 1, "opencl|dev|naive|float32|1x2": {"params": {}},
                                 "opencl|dev|naive|float32|4x4x4": {"params": {"block": "x"}}}))
    assert at.guess("opencl", "dev", "naive", "float32", (4, 4, 4)) == {"block": 16}


def test_nearest_shape_guess_skips_what_cannot_run_and_leaves_the_shape_out(cache):
    """A shape whose class was never searched takes the nearest searched shape's best
    combination that can run here; where none can, the next nearest shape's; the shape
    itself is left out in leave-one-out."""
    assert at.shape_distance((100, 4096, 4096), (200, 4096, 4096)) == 1.0
    assert at.shape_distance((100, 4096, 4096), (100, 4096, 4095)) == 1.0 + math.log2(4096 / 4095)
    assert at.shape_distance((3, 5, 7), (3, 5, 7)) == 0.0
    _write(cache, {("tiled", (128, 128, 128)): _entry({"block": 32}, {"block=32": 1.0, "block=16": 0.9}),
                   ("tiled", (2048, 2048, 2048)): _entry({"block": 8}, {"block=8": 1.0})})
    # 48³ (class skinny-skinny-skinny, not searched) is nearest to 128³, where block=32
    # won; 48 is no multiple of 32, so block=16 (0.9 there)
    g = at.guess_candidates("opencl", "dev", "tiled", "float32", (48, 48, 48))
    assert g.source == "nearest" and g.near == (128, 128, 128) and g.params == {"block": 16}
    assert g.scores == [0.9] and g.shape_class == "skinny-skinny-skinny/vec4"
    # 40³: neither of 128³'s combinations runs (40 is no multiple of 16 or 32): 2048³'s block=8
    g = at.guess_candidates("opencl", "dev", "tiled", "float32", (40, 40, 40))
    assert g.near == (2048, 2048, 2048) and g.params == {"block": 8}
    # leave-one-out at a searched shape alone in its class: the other shape speaks
    g = at.guess_candidates("opencl", "dev", "tiled", "float32", (128, 128, 128), exclude_exact=True)
    assert g.source == "nearest" and g.near == (2048, 2048, 2048) and g.params == {"block": 8}


def test_default_guess_follows_the_architecture(cache):
    shape = (4096, 4096, 4096)
    base = registry.get("ffma_wide").default_params()
    assert at.guess("cuda", "NVIDIA H200", "ffma_wide", "float32", shape) == base
    g = at.guess_candidates("cuda", "NVIDIA H200", "ffma_wide", "float32", shape, arch="9.0")
    assert g.params == {**base, "bk": 16} and g.source == "default"
    assert "default parameters for sm_90" in g.describe()
    assert at.guess("cuda", "H800", "ffma_wide", "float32", shape, arch="sm_80") == base


def test_search_records_relative_speeds_and_guess_mode_times_few(cache, timed):
    """Two searches of naive in one class teach it; a third shape of the class then times
    only the class's best (and the default) and says so; nothing is stored for it."""
    combos = [{"block": 8}, {"block": 32}]          # best params differ from the default (16)
    shapes = [(16, 24, 8), (12, 20, 8)]
    sweep = Sweep()
    try:
        name = sweep.ensure_open("opencl", 0).name
        recs = {}
        for shape in shapes:
            best, recs[shape] = at.autotune(sweep, "opencl", 0, "naive", shape, "float32",
                                            warmup=0, repeats=2, combos=combos)
            assert best in combos
        data = json.loads(cache.read_text())
        for shape in shapes:
            entry = data[at.cache_key("opencl", name, "naive", "float32", shape)]
            assert entry["class"] == "skinny-skinny-skinny/vec4"
            assert set(entry["relative"]) == {"block=8", "block=32"}
            assert max(entry["relative"].values()) == 1.0
            assert entry["relative"][at._pkey(entry["params"])] == 1.0
            fastest = min(r.median_ms for r in recs[shape] if r.status == "ok")
            for r in recs[shape]:
                assert entry["relative"][f"block={r.params['block']}"] == pytest.approx(
                    fastest / r.median_ms, abs=1e-4)
        mean = {b: sum(data[at.cache_key("opencl", name, "naive", "float32", s)]["relative"][f"block={b}"]
                       for s in shapes) for b in (8, 32)}
        want = at.class_stats("opencl", name, "naive", "float32",
                              "skinny-skinny-skinny/vec4").ranked[0][0]
        assert mean[want["block"]] == max(mean.values())
        third = (20, 16, 12)
        # the guess for a shape weights each searched shape by its nearness: where the two
        # searches disagree on the best (timing noise at these sizes), the nearer one decides
        want = at.class_stats("opencl", name, "naive", "float32", "skinny-skinny-skinny/vec4",
                              near=third).ranked[0][0]
        assert at.guess("opencl", name, "naive", "float32", third) == want
        assert want != registry.get("naive").default_params()

        n, logs = len(timed), []
        best, recs3 = at.autotune(sweep, "opencl", 0, "naive", third, "float32", warmup=0,
                                  repeats=1, mode="guess", emit=logs.append)
        assert best in (*combos, {"block": 16})
        assert sorted(r.params["block"] for r in recs3) == [8, 16, 32]   # class's 2 + default
        assert len(timed) == n + 3
        text = "\n".join(e.message for e in logs)
        assert "guessed from class skinny-skinny-skinny/vec4 (2 shapes)" in text
        assert "timing 3 of 3 combinations" in text and "not stored" in text
        assert at.lookup("opencl", name, "naive", "float32", third) is None
        # top=1: only the class's best and the default
        n = len(timed)
        at.autotune(sweep, "opencl", 0, "naive", third, "float32", warmup=0, repeats=1,
                    mode="guess", guess_top=1)
        assert len(timed) == n + 2
        # another class: the nearest searched shape's best, and the default
        n, logs = len(timed), []
        best, recs4 = at.autotune(sweep, "opencl", 0, "naive", (9, 7, 5), "float32", warmup=0,
                                  repeats=1, mode="guess", guess_top=1, emit=logs.append)
        assert len(recs4) == 2 and len(timed) == n + 2
        assert {r.params["block"] for r in recs4} == {16, at.guess("opencl", name, "naive", "float32", (12, 20, 8))["block"]}
        assert "no shape of class skinny-skinny-skinny/novec searched yet: guessed from the nearest" in logs[0].message
        # another device learnt nothing: the default only
        assert at.guess_candidates("opencl", "other", "naive", "float32", (9, 7, 5)).source == "default"
        # a searched shape answers from the cache in guess mode too; retune guesses anew
        n = len(timed)
        assert at.autotune(sweep, "opencl", 0, "naive", shapes[0], "float32",
                           mode="guess")[1] == [] and len(timed) == n
        with pytest.raises(ValueError, match="mode"):
            at.autotune(sweep, "opencl", 0, "naive", third, "float32", mode="quick")
    finally:
        sweep.close()


def test_plan_guess_mode_through_the_engine_thread(cache, timed):
    """The Plan path: ``plan.tune = "guess"`` (or run_autotuned's mode) on an engine thread."""
    from engine.run.worker import EngineThread
    items = expand_items("opencl", ["naive"])
    eng = EngineThread().start()
    try:
        full = Plan(backend="opencl", items=items, shapes=[SHAPE, (12, 20, 8)], warmup=0,
                    repeats=1, autotune=True)
        eng.submit(full, lambda e: None).result()
        searched = len(timed)
        assert searched == 2 * len(items)
        plan = Plan(backend="opencl", items=items, shapes=[(20, 16, 12), (9, 7, 5)], warmup=0,
                    repeats=1, autotune=True)
        plan.tune = "guess"
        events = []
        recs = eng.submit(plan, events.append).result()
        assert [(r.variant, (r.m, r.n, r.k)) for r in recs] == [
            ("naive", (20, 16, 12)), ("naive", (9, 7, 5))]
        assert all(r.status == "ok" and r.passed for r in recs)
        # class of 2 shapes: its (up to) 3 best, the default among them; (9, 7, 5), a class
        # not searched: the nearest searched shape's 3 best, the default among them
        assert len(timed) - searched == 2 * len(items)
        logs = [e.message for e in events if e.kind == "log"]
        assert any("guessed from class skinny-skinny-skinny/vec4 (2 shapes)" in m for m in logs)
        assert any("no shape of class skinny-skinny-skinny/novec searched yet: guessed from the "
                   "nearest searched shape" in m for m in logs)
        assert events[0].kind == "started" and "(guess)" in events[0].message
        assert len(json.loads(cache.read_text())) == 2          # guesses are not stored
    finally:
        assert eng.shutdown(30)
    sweep = Sweep()
    try:
        events = []
        plan.tune = "search"
        n = len(timed)
        recs = at.run_autotuned(sweep, plan, events.append, mode="guess")
        assert len(recs) == 2 and len(timed) - n == 2 * len(items)
        bad = at.run_autotuned(sweep, plan, events.append, mode="fast")
        assert bad == [] and "must be search or guess" in events[-1].message
    finally:
        sweep.close()


def test_class_mean_counts_only_the_shapes_where_a_combination_can_run(cache):
    """ffma_regdb's 80-row tile runs only for M = 65..80: the class's 100- and 150-row
    shapes say nothing about it, so its mean is over the one shape where it ran (1.0),
    not 1/3, and it is the guess at 70 rows; at 100 rows it cannot run and the 64-row
    tile is the guess."""
    def p(bm, splitk):      # hybrid 0: these grids are short of a wave; B as it lies
        return {"tile": bm * 1000 + 128, "splitk": splitk, "hybrid": 0, "bcopy": 0, "crows": 0}

    def key(bm, splitk):
        return at._pkey(p(bm, splitk))

    entries = {(80, 4096, 4096): _entry(p(80, 8), {key(80, 8): 1.0, key(64, 4): 0.84}),
               (100, 4096, 4096): _entry(p(64, 4), {key(64, 4): 1.0}),
               (150, 4096, 4096): _entry(p(64, 4), {key(64, 4): 1.0, key(64, 6): 0.9})}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({at.cache_key("cuda", "dev", "ffma_regdb", "float32", s): e
                                 for s, e in entries.items()}))
    cls = at.shape_class((70, 4096, 4096))
    assert {at.shape_class(s) for s in entries} == {cls}
    stats = at.class_stats("cuda", "dev", "ffma_regdb", "float32", cls)
    ranked = {at._pkey(q): round(score, 3) for q, score, _w in stats.ranked}
    # split-K 6 could run at all three but was timed at one: 0 at the other two, as before
    assert ranked == {key(80, 8): 1.0, key(64, 4): round((0.84 + 1 + 1) / 3, 3), key(64, 6): 0.3}
    assert at.guess("cuda", "dev", "ffma_regdb", "float32", (70, 4096, 4096)) == p(80, 8)
    g = at.guess_candidates("cuda", "dev", "ffma_regdb", "float32", (120, 4096, 4096))
    assert g.params == p(64, 4) and g.source == "class"
    assert any(q == p(80, 8) and "80-row tiles" in why for q, why in g.skipped)


def test_class_guess_listens_most_to_the_nearest_shapes(cache):
    """A class spans shapes whose best split-K differs with the tile count: each searched
    shape's say is weighted by 2 ** -distance to the shape guessed for, so the nearer one
    decides (an unweighted mean would pick split-K 4 at both: (1 + 0.85) / 2 < (0.9 + 1) / 2)."""
    def p(splitk):          # hybrid 0: these grids are short of a wave
        return {"tile": 64128, "splitk": splitk, "hybrid": 0, "bcopy": 0, "crows": 0}

    k4, k8 = at._pkey(p(4)), at._pkey(p(8))
    entries = {(64, 4096, 4096): _entry(p(8), {k8: 1.0, k4: 0.9}),
               (64, 16384, 16384): _entry(p(4), {k4: 1.0, k8: 0.85})}
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({at.cache_key("cuda", "dev", "ffma_regdb", "float32", s): e
                                 for s, e in entries.items()}))
    near_small, near_large = (64, 4096, 8192), (64, 16384, 8192)
    assert {at.shape_class(s) for s in [*entries, near_small, near_large]} == {at.shape_class(near_small)}
    flat = at.class_stats("cuda", "dev", "ffma_regdb", "float32", at.shape_class(near_small))
    assert flat.ranked[0][0] == p(4) and flat.ranked[0][1] == pytest.approx(0.95)
    g = at.guess_candidates("cuda", "dev", "ffma_regdb", "float32", near_small, top=2)
    # distances 1 and 3: weights 1/2 and 1/8
    assert g.source == "class" and g.candidates == [p(8), p(4)]
    assert g.scores == pytest.approx([(0.5 + 0.125 * 0.85) / 0.625, (0.5 * 0.9 + 0.125) / 0.625])
    assert at.guess("cuda", "dev", "ffma_regdb", "float32", near_large) == p(4)
