"""The engine pool: which engines a run gets, and their lifecycle (open, reuse, retire, join).

:class:`EnginePool` is the one owner of the engines that the window
(:mod:`gui.run_controller`) and the command line (:mod:`cli.bench`) run on.  Given a
:class:`RunTarget` (a backend's devices, or a Ray cluster), it hands out that target's
engines: kept ones are reused from run to run, missing ones are made lazily (a handle
opens its device when the dispatcher first uses it), and engines of other devices,
backends or clusters are *retired*: closed on a background thread, because an idle
engine holds a device context (GPU memory) that others may want.  :meth:`EnginePool.close`
closes every engine and joins every thread the pool started.

What happens when an engine dies during a run (restart, retry, fail the item) is the
dispatcher's business (:mod:`engine.run.dispatch`), not the pool's.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Sequence

from engine.common.cpus import engine_threads
from engine.run import cluster  # Ray itself is imported only when a cluster is used
from engine.run.dispatch import Run, start_run
from engine.run.engines import EngineHandle
from engine.run.runner import Emit, Plan

#: Makes the engine of one device: ``factory(backend, device_index)``.
EngineFactory = Callable[[str, int], EngineHandle]
#: Makes the engines of a Ray cluster: ``factory(address, backend)``, one per GPU/worker.
ClusterFactory = Callable[[str, str], list[EngineHandle]]

#: Engines retired between runs (another backend, devices no longer chosen) may take
#: this long to close in the background before they are ended.
RETIRE_CLOSE_S = 10.0


@dataclass(frozen=True)
class RunTarget:
    """Where a run goes: devices of one backend, or every GPU of a Ray cluster.

    ``devices`` are backend device indices (one engine each; an index given twice gets
    two engines, which tests use to run two engines on one device); ``mode`` is
    ``compare`` (every device runs everything) or ``share`` (they split the work);
    ``ray_address`` is None for this machine's devices, else the cluster address
    (``"local"`` starts a local cluster).
    """

    backend: str
    devices: tuple[int, ...] = (0,)
    mode: str = "compare"
    ray_address: str | None = None

    def describe(self) -> str:
        """``cpu device 0``, ``cuda devices 0, 1 (share)``, ``cuda on Ray cluster local``."""
        if self.ray_address is not None:
            return f"{self.backend} on the Ray cluster '{self.ray_address}' ({self.mode})"
        if len(self.devices) == 1:
            return f"{self.backend} device {self.devices[0]}"
        return (f"{self.backend} devices {', '.join(map(str, self.devices))} ({self.mode})")


def process_engine(backend: str, device: int) -> EngineHandle:
    """The default engine: the device's own child process."""
    from engine.run.process import ProcessEngine  # noqa: PLC0415  (multiprocessing only when used)
    return ProcessEngine(backend, device)


def ray_engines(address: str, backend: str) -> list[EngineHandle]:
    """One engine per GPU/worker of the Ray cluster at ``address``."""
    return list(cluster.ray_engines(address, backend))


def close_engines(engines: Sequence[EngineHandle], timeout: float) -> bool:
    """Close ``engines`` in parallel, each within ``timeout``; end those that do not stop
    (an engine in another process is killed).  True when every engine closed cleanly."""
    results: dict[int, bool] = {}

    def close_one(i: int, eng: EngineHandle) -> None:
        try:
            results[i] = bool(eng.close(timeout))
        except Exception:  # noqa: BLE001  (a dead engine's pipes, a lost actor: it is gone)
            results[i] = False

    threads = [threading.Thread(target=close_one, args=(i, e), daemon=True,
                                name=f"close-{e.label}") for i, e in enumerate(engines)]
    for t in threads:
        t.start()
    end = time.monotonic() + timeout + 0.5
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    for i, eng in enumerate(engines):
        if not results.get(i, False):
            kill_engine(eng)
    return all(results.get(i, False) for i in range(len(engines)))


def kill_engine(eng: EngineHandle) -> None:
    """End an engine now, if it can be ended (one in another process can)."""
    kill = getattr(eng, "kill", None)
    if kill is not None:
        try:
            kill()
        except Exception:  # noqa: BLE001
            pass


class EnginePool:
    """The engines of one owner (a window, a command): made lazily, reused while the
    target stays, retired when it changes, all closed and joined by :meth:`close`.

    Thread-safe: the window asks for a cluster's engines on a worker thread while its GUI
    thread may ask for the engines list.

    Parameters
    ----------
    engine_factory
        Makes one device's engine; by default :func:`process_engine`.
    cluster_factory
        Makes a Ray cluster's engines; by default :func:`ray_engines`.
    reserve_cpus
        Cores kept free for the owner when the engines' CPU threads are shared out
        (:func:`engine.common.cpus.engine_threads`): the window keeps some for its
        repaints, the command line none.
    """

    def __init__(self, engine_factory: EngineFactory | None = None,
                 cluster_factory: ClusterFactory | None = None, reserve_cpus: int = 0):
        self.engine_factory = engine_factory or process_engine
        self.cluster_factory = cluster_factory or ray_engines
        self.reserve_cpus = reserve_cpus
        #: Engines by (backend, device, n-th use of that device in a target), and a Ray
        #: cluster's list by ("ray", address, backend).
        self._engines: dict[tuple, EngineHandle] = {}
        self._cluster: dict[tuple, list[EngineHandle]] = {}
        #: Share-mode runs' joiners (cluster.FreeWorkers) whose run has not ended yet.
        self._joiners: list = []
        self._retiring: list[threading.Thread] = []
        #: Engines :meth:`close` is closing (so that :meth:`kill_all` can still end them).
        self._doomed: list[EngineHandle] = []
        self._lock = threading.Lock()
        self._closed = False

    # --- what the pool holds -----------------------------------------------------------

    def engines(self) -> list[EngineHandle]:
        """Every engine the pool holds now (local ones, then cluster ones)."""
        with self._lock:
            out = list(self._engines.values())
            for group in self._cluster.values():
                out.extend(group)
        return out

    def idle(self) -> bool:
        """No engine, nothing being closed: closing now would not wait at all."""
        return not self.engines() and not any(t.is_alive() for t in self._retiring)

    @property
    def closed(self) -> bool:
        return self._closed

    # --- handing engines out -----------------------------------------------------------

    def engines_for(self, target: RunTarget) -> list[EngineHandle]:
        """The engines of ``target``: kept ones reused, missing ones made, the others
        retired.  A cluster target connects to the cluster (may take a while; raises
        what the cluster factory raises)."""
        if target.ray_address is not None:
            return self.cluster_engines(target.ray_address, target.backend)
        self._check_open()
        seen: Counter = Counter()
        keys = []
        for d in target.devices:
            keys.append((target.backend, int(d), seen[d]))
            seen[d] += 1
        with self._lock:
            out = []
            for key in keys:
                eng = self._engines.get(key)
                if eng is None:
                    eng = self._engines[key] = self.engine_factory(target.backend, key[1])
                out.append(eng)
            # The engines share the machine's cores, less the owner's own: a reference
            # product on every core starved the window's repaints (engine.common.cpus).
            threads = engine_threads(len(out), self.reserve_cpus)
            for eng in out:
                eng.cpu_threads = threads
            stale = [k for k in self._engines if k not in keys]
            retired = [self._engines.pop(k) for k in stale]
            for k in list(self._cluster):
                retired.extend(self._cluster.pop(k))
        self._retire(retired)
        return out

    def cluster_engines(self, address: str, backend: str) -> list[EngineHandle]:
        """A Ray cluster's engines: the kept ones, else made by the cluster factory (the
        other engines are then retired).  Raises RuntimeError when it makes none."""
        self._check_open()
        key = ("ray", address, backend)
        with self._lock:
            got = self._cluster.get(key)
        if got:
            return got
        made = self.cluster_factory(address, backend)
        if not made:
            raise RuntimeError(f"the Ray cluster '{address}' has no {backend} worker")
        with self._lock:
            if self._closed:           # closed while connecting: these are not kept
                retired, made_kept = list(made), None
            else:
                retired = list(self._engines.values())
                self._engines.clear()
                for k in [k for k in self._cluster if k != key]:
                    retired.extend(self._cluster.pop(k))
                self._cluster[key] = made_kept = made
        self._retire(retired)
        if made_kept is None:
            raise RuntimeError("the engine pool was closed")
        return made

    def start_run(self, plan: Plan, target: RunTarget, emit: Emit) -> Run:
        """Start ``plan`` on ``target``'s engines (:func:`engine.run.dispatch.start_run`).

        Sharing the work on a cluster, worker nodes that join mid-sweep get engines too;
        after the run they stay with the cluster's others (reused by the next run, closed
        with them).  Raises ValueError when the run cannot start (engines of another
        backend, a bad mode)."""
        engines = self.engines_for(target)
        joiners = None
        if target.ray_address is not None and target.mode == "share":
            joiners = cluster.FreeWorkers(target.backend, engines[0].device,
                                          first_slot=len(engines))
            with self._lock:
                self._joiners.append(joiners)
        try:
            run = start_run(plan, engines, emit, target.mode, joiners)
        except BaseException:
            if joiners is not None:
                with self._lock:
                    self._joiners.remove(joiners)
            raise
        if joiners is not None:
            key = ("ray", target.ray_address, target.backend)
            run.future.add_done_callback(lambda _f: self._keep_joined(key, joiners))
        return run

    def _keep_joined(self, key: tuple, joiners) -> None:
        """After a run: engines that joined it mid-sweep stay with the cluster's others;
        ones that never opened are closed."""
        made = list(joiners.made)
        joined = [e for e in made if e.info is not None]
        for eng in made:
            if eng.info is None:
                eng.close()
        with self._lock:
            if joiners in self._joiners:
                self._joiners.remove(joiners)
            if not self._closed and key in self._cluster:
                self._cluster[key].extend(e for e in joined if e not in self._cluster[key])
                return
            if self._closed:
                # close() took these from the joiners already; close again is harmless
                retire = []
                done_now = joined
            else:
                retire, done_now = joined, []
        for eng in done_now:
            eng.close()
        self._retire(retire)      # the cluster's engines were retired meanwhile

    def _retire(self, engines: list[EngineHandle]) -> None:
        if not engines:
            return
        t = threading.Thread(target=close_engines, args=(engines, RETIRE_CLOSE_S),
                             name="retire-engines", daemon=True)
        t.start()
        self._retiring = [r for r in self._retiring if r.is_alive()] + [t]

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("the engine pool was closed")

    # --- shutdown ----------------------------------------------------------------------

    def close(self, timeout: float, deadline: float | None = None, kill_first: bool = False
              ) -> bool:
        """Close every engine (in parallel, each within ``timeout``; those that do not
        stop are ended), then join the retiring threads until ``deadline`` (monotonic;
        default: ``timeout`` from now).  ``kill_first`` ends the engines before closing
        them: a run thread is blocked on them.  Idempotent; True when every engine
        closed cleanly."""
        deadline = time.monotonic() + timeout if deadline is None else deadline
        with self._lock:
            self._closed = True
            engines = list(self._engines.values()) + [e for g in self._cluster.values() for e in g]
            for joiners in self._joiners:
                engines.extend(e for e in joiners.made if e not in engines)
            self._engines.clear()
            self._cluster.clear()
            self._doomed = list(engines)
        if kill_first:
            for eng in engines:
                kill_engine(eng)
        ok = close_engines(engines, timeout)
        for t in self._retiring:
            t.join(max(0.0, deadline - time.monotonic()))
        return ok

    def kill_all(self) -> None:
        """End every engine now, those being closed included (the last resort)."""
        with self._lock:
            engines = (list(self._engines.values()) + [e for g in self._cluster.values() for e in g]
                       + [e for j in self._joiners for e in j.made] + self._doomed)
        for eng in engines:
            kill_engine(eng)


__all__ = ["ClusterFactory", "EngineFactory", "EnginePool", "RETIRE_CLOSE_S", "RunTarget",
           "close_engines", "kill_engine", "process_engine", "ray_engines"]
