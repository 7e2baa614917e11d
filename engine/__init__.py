"""The lab's engine: a Qt-free library that the window, the command line and scripts use.

Its public surface, importable from ``engine`` itself (loaded on first use, so that
``import engine`` costs nothing)::

    from engine import Plan, RunTarget, start
    run = start(Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(127, 61, 253)]),
                RunTarget("cpu"))
    records = run.result()

* running: :func:`start` (a plan on a target → a :class:`Run` handle: ``cancel()``,
  ``result()``, ``done()``), :class:`Plan`, :class:`RunTarget`, :class:`EnginePool` (engines
  kept between runs), :class:`Event` and :class:`EventKind` (what a run reports);
* kernels: :mod:`registry <engine.kernels.registry>` (every variant, user kernel folders);
* inputs: :func:`parse_sizes`, :func:`load_matrix`, :func:`generate_pair`;
* results: :class:`ResultRecord`, :class:`RecordStatus`, :func:`load_results`,
  :func:`save_results`.

The floors beneath (kernels, inputs, measure, results, run, profile) are in
docs/architecture.md.
"""
from __future__ import annotations

import importlib
from typing import Any

#: Public name → (module, attribute); attribute None: the module itself.
_PUBLIC = {
    "Plan": ("engine.run.runner", "Plan"),
    "Event": ("engine.run.runner", "Event"),
    "EventKind": ("engine.run.events", "EventKind"),
    "Run": ("engine.run.dispatch", "Run"),
    "RunTarget": ("engine.run.pool", "RunTarget"),
    "EnginePool": ("engine.run.pool", "EnginePool"),
    "registry": ("engine.kernels.registry", None),
    "parse_sizes": ("engine.inputs.sizes", "parse_sizes"),
    "load_matrix": ("engine.inputs.matrices", "load_matrix"),
    "generate_pair": ("engine.inputs.matrices", "generate_pair"),
    "ResultRecord": ("engine.results.records", "ResultRecord"),
    "RecordStatus": ("engine.results.status", "RecordStatus"),
    "load_results": ("engine.results.records", "load"),
    "save_results": ("engine.results.records", "save"),
}

__all__ = [*_PUBLIC, "start"]


def __getattr__(name: str) -> Any:
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'engine' has no attribute {name!r}") from None
    mod = importlib.import_module(module)
    return mod if attr is None else getattr(mod, attr)


def start(plan, target, emit=None, pool=None):
    """Run ``plan`` on ``target`` (a :class:`RunTarget`); returns the :class:`Run` at once.

    ``emit`` gets every :class:`Event` from the run's thread (default: dropped). With no
    ``pool``, the run gets engines of its own, closed (and joined) when it ends; pass an
    :class:`EnginePool` to keep them for the next run, as the window and ``bench`` do.
    """
    from engine.run.pool import EnginePool  # noqa: PLC0415  (the surface loads lazily)
    own = pool is None
    pool = EnginePool() if own else pool
    run = pool.start_run(plan, target, emit or (lambda _event: None))
    if own:
        run.future.add_done_callback(lambda _f: pool.close(30.0))
    return run
