"""The autotune cache keeps a winner per run's numbers: input type, C's type and B's
layout. A search times its candidates in the run's types and layout (the records say so),
and a winner with C in BF16 or B as N×K is not taken for the plain run's, nor the reverse."""
from __future__ import annotations

import json

import pytest

from engine.common.dtypes import TypeSpec
from engine.run import autotune as at
from engine.run.runner import Plan, Sweep

SHAPE = (16, 24, 8)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(at.CACHE_ENV, str(tmp_path / "cachedir"))
    return tmp_path / "cachedir" / "autotune.json"


def test_type_tags_keep_the_old_keys_for_the_default_numbers():
    assert at.type_tag("float32") == at.type_tag(TypeSpec("float32")) == "float32"
    assert at.type_tag(TypeSpec("bfloat16", "float32", "kn")) == "bfloat16"
    assert at.type_tag(TypeSpec("bfloat16", "bfloat16", "kn")) == "bfloat16>bfloat16"
    assert at.type_tag(TypeSpec("float8_e4m3", "bfloat16", "nk")) == "float8_e4m3/nk"   # its default C
    assert at.type_tag(TypeSpec("float8_e4m3", "float32", "nk")) == "float8_e4m3>float32/nk"
    assert at.type_tag(TypeSpec("float16", None, "nk")) == "float16/nk"
    assert at.cache_key("cuda", "H200", "half_wgmma", TypeSpec("bfloat16", None, "nk"),
                        (1, 2, 3)) == "cuda|H200|half_wgmma|bfloat16/nk|1x2x3"


def test_a_search_runs_in_the_runs_types_and_keeps_its_own_entry(cache):
    nk = TypeSpec("bfloat16", "bfloat16", "nk")
    sweep = Sweep()
    try:
        best, recs = at.autotune(sweep, "cpu", 0, "cpu_numpy", SHAPE, nk, warmup=0, repeats=1)
        assert best == {} and recs
        assert all(r.layout == "nk" and r.out_dtype == "bfloat16" and r.dtype == "bfloat16"
                   for r in recs)
        (key,) = json.loads(cache.read_text())
        assert key.endswith("|cpu_numpy|bfloat16>bfloat16/nk|16x24x8")
        # the same numbers: the entry, nothing timed
        assert at.autotune(sweep, "cpu", 0, "cpu_numpy", SHAPE, nk)[1] == []
        # B as K×N, C in FP32: not that entry; a search of its own
        best2, recs2 = at.autotune(sweep, "cpu", 0, "cpu_numpy", SHAPE, "bfloat16",
                                   warmup=0, repeats=1)
        assert recs2 and all(r.layout == "kn" and r.out_dtype == "float32" for r in recs2)
        assert len(json.loads(cache.read_text())) == 2
    finally:
        sweep.close()


@pytest.mark.parametrize("batch", [False, True])
def test_an_autotuned_plan_searches_in_its_layout_and_output(cache, batch):
    plan = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[SHAPE], dtype="float16",
                out_dtype="float16", layout="nk", warmup=0, repeats=1, autotune=True)
    sweep = Sweep()
    try:
        recs = at.run_autotuned(sweep, plan, lambda e: None, batch=batch)
        assert recs and all(r.layout == "nk" and r.out_dtype == "float16" and r.passed for r in recs)
        assert any(k.endswith("|float16>float16/nk|16x24x8") for k in json.loads(cache.read_text()))
        # a second run takes the entry and times the winner once, in the same numbers
        again = at.run_autotuned(sweep, plan, lambda e: None, batch=batch)
        assert again and all(r.layout == "nk" and r.out_dtype == "float16" for r in again)
    finally:
        sweep.close()
