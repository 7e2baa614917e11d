"""Autotune's own timing follows the run's stop rule (issue 37 §2): a search in a run
with Noise < (``--until-noise``) times every candidate, and a cached winner's re-timing,
by that rule, not by fixed repeats. On the cpu backend (numpy)."""
from __future__ import annotations

import pytest

from engine.measure.timing import NoiseStop, StopReason
from engine.run import autotune as at
from engine.run.runner import Plan, Sweep, expand_items

SHAPE = (48, 40, 32)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(at.CACHE_ENV, str(tmp_path / "cachedir"))
    return tmp_path / "cachedir" / "autotune.json"


@pytest.mark.parametrize("rule", [NoiseStop(5.0, 0.02, 0.2), None])
def test_the_search_and_the_cached_winner_are_timed_by_the_runs_stop_rule(cache, rule):
    plan = Plan(backend="cpu", items=expand_items("cpu", ["cpu_numpy"]), shapes=[SHAPE],
                warmup=0, repeats=2, until_noise=rule, autotune=True)
    expected = rule.describe() if rule is not None else "repeats 2"
    sweep = Sweep()
    try:
        searched = []
        recs = at.run_autotuned(sweep, plan, searched.append)
        assert len(recs) == 1 and recs[0].status == "ok"
        assert recs[0].stop_rule == expected
        assert (recs[0].stopped_by == StopReason.REPEATS) == (rule is None)
        again = at.run_autotuned(sweep, plan, lambda e: None)      # a cache hit: timed once more
        assert again[0].stop_rule == expected
        # and autotune() on its own takes the rule as a Plan does
        _, tried = at.autotune(sweep, "cpu", 0, "cpu_numpy", SHAPE, warmup=0, repeats=2,
                               until_noise=rule, retune=True)
        assert [r.stop_rule for r in tried] == [expected]
    finally:
        sweep.close()
