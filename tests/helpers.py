"""Shared test helpers: which backends this machine can run, and small sweeps."""
from __future__ import annotations

import functools

import pytest

from engine.measure.backends import probe_all
from engine.run.runner import Plan, Sweep


@functools.lru_cache(maxsize=None)
def backend_status(name: str):
    return probe_all()[name]


def require_backend(name: str):
    """Skip the test (with the backend's own reason) when ``name`` is unavailable."""
    st = backend_status(name)
    if not st.available:
        pytest.skip(f"{name} backend unavailable: {st.reason}")
    return st


def run_plan(plan: Plan, sweep: Sweep | None = None):
    """Run ``plan`` on this thread; returns (records, events)."""
    events = []
    own = sweep is None
    sweep = sweep or Sweep()
    try:
        recs = sweep.run(plan, events.append)
    finally:
        if own:
            sweep.close()
    return recs, events
