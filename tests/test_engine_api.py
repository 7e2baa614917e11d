"""engine's public surface: what a script imports from ``engine`` itself runs a plan and
reads its records, with no Qt and no knowledge of the floors beneath."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import engine

ROOT = Path(__file__).resolve().parents[1]


def test_every_public_name_resolves_and_unknown_names_say_so():
    for name in engine.__all__:
        assert getattr(engine, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        engine.nope  # noqa: B018


def test_a_script_runs_a_plan_through_the_public_surface(tmp_path):
    """In a fresh interpreter: start() on the cpu backend at an odd shape, verified,
    saved and read back; the run's own engines are closed when it ends."""
    code = textwrap.dedent(f"""
        import threading, sys
        import engine
        plan = engine.Plan(backend="cpu", items=[("cpu_numpy", {{}})], shapes=[(127, 61, 253)],
                           warmup=0, repeats=2)
        kinds = []
        run = engine.start(plan, engine.RunTarget("cpu"), kinds.append)
        recs = run.result(120)
        assert [r.status for r in recs] == [engine.RecordStatus.OK], [r.status for r in recs]
        assert recs[0].passed is True and recs[0].verify_method != "none" and (recs[0].m, recs[0].n, recs[0].k) == (127, 61, 253)
        assert engine.EventKind.FINISHED in [e.kind for e in kinds]
        path = engine.save_results(recs, {str(tmp_path / 'r.json')!r})
        assert [r.variant for r in engine.load_results(path)] == ["cpu_numpy"]
        assert "PySide6" not in sys.modules
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
