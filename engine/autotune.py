"""Autotuning: search a variant's parameter space on the current device, remember the best.

Backend-agnostic: a search is an ordinary :class:`~engine.runner.Plan` (every valid
combination of the variant's space, or the combinations given, at one shape) run by a
:class:`~engine.runner.Sweep`; the fastest verified record wins. The winner is stored in
a JSON cache keyed by (backend, device name, variant, dtype, shape), so a second call
for the same key runs nothing (``retune=True`` searches again).

Cache file: ``$MATMUL_LAB_CACHE/autotune.json`` when that variable is set (a path ending
in ``.json`` is taken as the file itself), else ``~/.cache/matmul-lab/autotune.json``
(``$XDG_CACHE_HOME`` honoured).

Entry points:

* :func:`autotune` ``(sweep_or_engine, backend, device, variant, shape, dtype, ...)
  -> (best_params, records)``: one variant at one shape; ``records`` are the search's
  records (empty when the cache answered). Give it a :class:`Sweep` on the engine
  thread, or an :class:`~engine.worker.EngineThread` from any other thread (it blocks).
* ``Plan(autotune=True, retune=...)``: an engine (``engine.worker``) or a multi-device
  run (``engine.dispatch``) hands such a plan to :func:`run_autotuned`, which tunes
  every variant of the plan at every shape and returns one record per (variant, shape):
  that of the best parameters (a fresh timed run when the cache answered). This module
  sits above the runner: the runner never imports it.
"""
from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from . import registry
from .records import ResultRecord, now_stamp
from .runner import CancelToken, Event, Plan, final_records

CACHE_ENV = "MATMUL_LAB_CACHE"
CACHE_FILE = "autotune.json"
_LOCK = threading.Lock()

Shape = tuple[int, int, int]


def cache_path() -> Path:
    """Where the autotune cache lives (see the module docstring)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        p = Path(env).expanduser()
        return p if p.suffix == ".json" else p / CACHE_FILE
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "matmul-lab" / CACHE_FILE


def cache_key(backend: str, device: str, variant: str, dtype: str, shape: Shape) -> str:
    m, n, k = shape
    return f"{backend}|{device}|{variant}|{dtype}|{m}x{n}x{k}"


def load_cache(path: Path | None = None) -> dict[str, Any]:
    path = path or cache_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def lookup(backend: str, device: str, variant: str, dtype: str, shape: Shape,
           path: Path | None = None) -> dict[str, int] | None:
    """The cached best parameters, or None. Entries whose parameters the variant no
    longer offers are ignored (the space changed since)."""
    entry = load_cache(path).get(cache_key(backend, device, variant, dtype, shape))
    if not isinstance(entry, dict) or not isinstance(entry.get("params"), dict):
        return None
    params = {str(k): int(v) for k, v in entry["params"].items()}
    v = registry.get(variant)
    if v.check(backend, params, *shape, dtype) is not None:
        return None
    return params


def store(backend: str, device: str, variant: str, dtype: str, shape: Shape,
          best: ResultRecord, searched: int, path: Path | None = None) -> None:
    """Write one entry (read-modify-write, atomic rename)."""
    path = path or cache_path()
    with _LOCK:
        data = load_cache(path)
        data[cache_key(backend, device, variant, dtype, shape)] = {
            "params": dict(best.params), "median_ms": best.median_ms, "gflops": best.gflops,
            "searched": searched, "timestamp": now_stamp(), "versions": best.versions}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)


def best_record(records: Iterable[ResultRecord]) -> ResultRecord | None:
    """The fastest record that ran and was not found wrong (verified or unverified)."""
    ok = [r for r in records if r.status in ("ok", "unverified") and r.passed is not False
          and math.isfinite(r.median_ms) and r.median_ms > 0]
    return min(ok, key=lambda r: r.median_ms) if ok else None


def search_space(variant: str, backend: str, shape: Shape, dtype: str,
                 combos: Iterable[Mapping[str, int]] | None = None) -> list[dict[str, int]]:
    """Valid combinations (``combos``, else the variant's whole space) at this shape."""
    v = registry.get(variant)
    pool = [dict(c) for c in combos] if combos is not None else v.combos()
    return [p for p in pool if v.check(backend, p, *shape, dtype) is None]


# --- running plans on a Sweep, an EngineThread, or any executor ------------------------

#: ``execute(plan, emit, cancel) -> records``: runs one plain plan somewhere (a Sweep on
#: this thread, an engine thread, the engines of a multi-device run).
Execute = Callable


def _runner(sweep_or_engine) -> Execute:
    """A function ``(plan, emit, cancel) -> records`` for a Sweep, an EngineThread, or an
    executor function (returned as is)."""
    if hasattr(sweep_or_engine, "submit"):          # EngineThread: from another thread
        def run(plan, emit, cancel=None):
            job = sweep_or_engine.submit(plan, emit)
            if cancel is not None and cancel.cancelled:
                job.cancel()
            return job.result()
        return run
    if hasattr(sweep_or_engine, "run"):
        return lambda plan, emit, cancel=None: sweep_or_engine.run(plan, emit, cancel)
    return sweep_or_engine


def _device_name(sweep_or_engine, backend: str, device: int) -> str:
    if hasattr(sweep_or_engine, "ensure_open") and not hasattr(sweep_or_engine, "submit"):
        return sweep_or_engine.ensure_open(backend, device).name
    from .backends import probe_all  # noqa: PLC0415
    st = probe_all()[backend]
    if not st.available or not 0 <= device < len(st.devices):
        raise ValueError(f"{backend} device {device} is not available: {st.reason}")
    return st.devices[device].name


def _only_logs(emit):
    def inner(ev):
        if emit is not None and ev.kind == "log":
            emit(ev)
    return inner


def autotune(sweep_or_engine, backend: str, device: int, variant: str, shape: Shape,
             dtype: str = "float32", *, warmup: int = 3, repeats: int = 10,
             time_budget_s: float | None = None, cold: bool = False, verify: bool = True,
             retune: bool = False, combos: Iterable[Mapping[str, int]] | None = None,
             seed: int = 0, dist: str = "uniform", emit=None, cancel=None,
             cache: Path | None = None, device_name: str | None = None,
             launch_timeout_s: float | None = None,
             ) -> tuple[dict[str, int] | None, list[ResultRecord]]:
    """Best parameters of ``variant`` at ``shape`` on this device, and the search's records.

    ``sweep_or_engine`` is a :class:`~engine.runner.Sweep` (this thread), an
    :class:`~engine.worker.EngineThread` or an executor ``(plan, emit, cancel) ->
    records`` (then give ``device_name``, the cache key's device). With a cache entry
    (and not ``retune``) nothing runs: ``(params, [])``. Otherwise every valid
    combination is compiled, verified (unless ``verify=False``) and timed, the fastest
    record that was not wrong wins and is stored. ``best_params`` is None when nothing
    ran successfully (the records say why).
    """
    shape = tuple(int(x) for x in shape)
    name = device_name or _device_name(sweep_or_engine, backend, device)
    if not retune:
        cached = lookup(backend, name, variant, dtype, shape, cache)
        if cached is not None:
            if emit:
                emit(Event("log", f"autotune {variant} {dtype} {shape}: cached {cached}"))
            return cached, []
    space = search_space(variant, backend, shape, dtype, combos)
    if not space:
        v = registry.get(variant)
        pool = list(combos) if combos is not None else v.combos()
        why = v.check(backend, dict(pool[0]) if pool else {}, *shape, dtype) or "empty space"
        raise ValueError(f"autotune: no valid parameters for {variant} at {shape}: {why}")
    plan = Plan(backend=backend, items=[(variant, p) for p in space], shapes=[shape],
                dtype=dtype, device=device, warmup=warmup, repeats=repeats,
                time_budget_s=time_budget_s, cold=cold, verify=verify, seed=seed, dist=dist,
                launch_timeout_s=launch_timeout_s)
    recs = _runner(sweep_or_engine)(plan, _only_logs(emit), cancel)
    best = best_record(recs)
    if best is None:
        return None, recs
    store(backend, name, variant, dtype, shape, best, len(recs), cache)
    if emit:
        emit(Event("log", f"autotune {variant} {dtype} {shape}: best {best.label()} "
                          f"{best.median_ms:.4f} ms of {len(recs)} tried"))
    return dict(best.params), recs


def run_autotuned(sweep_or_execute, plan, emit, cancel=None, *, device_name: str | None = None,
                  frame: bool = True) -> list[ResultRecord]:
    """A plan with ``autotune`` set: one record per (variant, shape), that of the best
    parameters. The search space of a variant is the set of its items in the plan
    (``expand_items`` gives the whole space, or the ``--params`` restriction).

    ``sweep_or_execute`` runs the searches (see :func:`autotune`); with ``frame`` the
    ``started`` and ``finished`` events are emitted here, else the caller frames the run
    (a multi-device run does).
    """
    cancel = cancel or CancelToken()
    execute = _runner(sweep_or_execute)
    results: list[ResultRecord] = []
    try:
        plan.validate()
        if not plan.shapes:
            raise ValueError("autotune needs sizes (not loaded matrices)")
        if device_name is None:
            device_name = _device_name(sweep_or_execute, plan.backend, plan.device)
    except ValueError as exc:
        emit(Event("log", str(exc), level="error"))
        if frame:
            emit(Event("finished", str(exc)))
        return results
    spaces: dict[str, list[dict[str, int]]] = {}
    for vname, params in plan.items:
        spaces.setdefault(vname, []).append(dict(params))
    total = len(spaces) * len(plan.shapes)
    if frame:
        emit(Event("started", f"autotune: {total} (variant, shape) pairs", total=total))
    done = 0
    kw = dict(warmup=plan.warmup, repeats=plan.repeats, time_budget_s=plan.time_budget_s,
              cold=plan.cold, verify=plan.verify, seed=plan.seed, dist=plan.dist)
    for shape in plan.shapes:
        for vname, combos in spaces.items():
            if cancel.cancelled:
                break
            label = f"autotune {vname} @ {shape[0]}×{shape[1]}×{shape[2]}"
            emit(Event("progress", label, done=done, total=total, current=label))
            try:
                best, recs = autotune(execute, plan.backend, plan.device, vname, shape, plan.dtype,
                                      retune=plan.retune, combos=combos, emit=emit, cancel=cancel,
                                      device_name=device_name,
                                      launch_timeout_s=plan.launch_timeout_s, **kw)
            except (ValueError, KeyError) as exc:
                emit(Event("log", str(exc), level="error"))
                best, recs = None, []
            rec = None
            if best is not None and recs:
                rec = next((r for r in recs if r.params == best and r.status in ("ok", "unverified")),
                           None)
            if best is not None and rec is None:         # cache hit: time the winner once more
                one = Plan(backend=plan.backend, items=[(vname, best)], shapes=[shape],
                           dtype=plan.dtype, device=plan.device,
                           launch_timeout_s=plan.launch_timeout_s, **kw)
                got = execute(one, _only_logs(emit), cancel)
                rec = got[0] if got else None
            if rec is None and recs:                     # nothing ran: report why (first record)
                rec = recs[0]
            if rec is not None:
                results.append(rec)
                done += 1
                emit(Event("result", record=rec, done=done, total=total))
    final = final_records(results)
    if frame:
        emit(Event("finished", f"{done} of {total} autotuned", done=done, total=total,
                   cancelled=cancel.cancelled, started=True, records=final))
    return final
