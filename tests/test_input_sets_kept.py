"""A share run hands one engine pieces of several shapes in turn: each shape's two input
sets (the timed one and the re-check's second seed) and their references are made once per
process, not again when the shape comes back (engine.run.runner's input-set cache)."""
from engine.inputs import matrices
from engine.measure import verify
from engine.run import runner
from engine.run.runner import Plan
from tests.helpers import run_plan


def test_a_shape_that_comes_back_makes_no_inputs_or_references_again(monkeypatch):
    made, refs = [], []
    real_pair, real_init = matrices.generate_pair, verify.Reference.__init__

    def counting_pair(*a, **kw):
        made.append(a[:3])
        return real_pair(*a, **kw)

    def counting_init(self, *a, **kw):
        refs.append(self)
        real_init(self, *a, **kw)

    monkeypatch.setattr(matrices, "generate_pair", counting_pair)
    monkeypatch.setattr(verify.Reference, "__init__", counting_init)
    monkeypatch.setattr(runner, "_LAST_INPUTS", {})
    monkeypatch.setattr(runner, "_LAST_REFS", {})
    shapes = [(37, 29, 41), (23, 31, 19)]
    for shape in shapes + shapes + shapes:          # pieces of two shapes, in turn
        plan = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[shape], warmup=0,
                    repeats=1, seed=5)
        recs, _ = run_plan(plan)
        assert recs[0].passed and "second seed" in recs[0].recheck, recs[0]
    # each shape: its timed set and its second seed's, once; one reference of each
    assert sorted(made) == sorted([s for s in shapes for _ in range(2)]), made
    assert len(refs) == 4, len(refs)


def test_input_sets_kept_stay_under_the_byte_cap(monkeypatch):
    monkeypatch.setattr(runner, "_LAST_INPUTS", {})
    monkeypatch.setattr(runner, "_LAST_REFS", {})
    monkeypatch.setattr(runner, "_INPUTS_KEPT_BYTES", 3 * 2 * 64 * 64 * 4)   # three 64³ pairs
    for seed in range(6):
        runner._generated_pair((64, 64, 64, "float32", "uniform", seed))
    assert [k[-1] for k in runner._LAST_INPUTS] == [3, 4, 5]
    runner._generated_pair((64, 64, 64, "float32", "uniform", 3))            # used again: newest
    runner._generated_pair((64, 64, 64, "float32", "uniform", 6))
    assert [k[-1] for k in runner._LAST_INPUTS] == [5, 3, 6]
