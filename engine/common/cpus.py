"""How many CPU threads an engine may keep busy, so that the window keeps its cores.

An engine's own CPU work is heavy: the float64 reference of a 4096³ product is 137
GFLOP of BLAS, which OpenBLAS spreads over every core. On a 16-core GPU machine that
starved the window's process (its GUI thread and Qt's painting threads) and stretched a
20 ms repaint to 60-190 ms, although the engine runs niced in a process of its own.
So an engine process gets a thread budget: the machine's usable cores, less what is
kept for the window, shared among the engines of the run. It bounds the BLAS/OpenMP
pools (through ``threadpoolctl``), PoCL's CPU device, and the parallel nvcc builds.

Functions
---------
usable_cpus()
    Cores this process may run on: its affinity mask, bounded by a cgroup CPU quota.
engine_threads(engines, reserve)
    The budget of one of ``engines`` engine processes when ``reserve`` cores are kept.
set_thread_budget(n)
    Apply a budget to this process (an engine process calls it first thing).
thread_budget()
    The budget in force: the one set, else every usable core.
"""
from __future__ import annotations

import math
import os
from pathlib import Path

#: Cores kept for the window's process while its engines run: the GUI thread and Qt's
#: raster threads (the backing store's image work is split across a thread pool).
WINDOW_CPUS = 2

_budget: int | None = None
_limiter = None          # threadpoolctl's limiter: kept so that the limits stay in force
_env_set: set[str] = set()   # variables this module set (a user's own are left alone)


def _cgroup_quota(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """CPUs the cgroup's quota allows (v2 ``cpu.max``, then v1), or None if unlimited."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        if quota != "max" and float(period) > 0:
            return float(quota) / float(period)
        return None
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu/cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu/cpu.cfs_period_us").read_text())
        if quota_us > 0 and period_us > 0:
            return quota_us / period_us
    except (OSError, ValueError):
        pass
    return None


def usable_cpus() -> int:
    """Cores this process may run on: the affinity mask (``os.sched_getaffinity``, else
    ``os.cpu_count()``), bounded by the cgroup's CPU quota; at least 1."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = _cgroup_quota()
    if quota is not None:
        n = min(n, max(1, math.ceil(quota)))
    return max(1, n)


def engine_threads(engines: int = 1, reserve: int = WINDOW_CPUS, cpus: int | None = None) -> int:
    """Threads one engine process may use: ``(cpus − reserve) // engines``, at least 1.

    Parameters
    ----------
    engines
        Engine processes that run at once on this machine.
    reserve
        Cores kept free: :data:`WINDOW_CPUS` for the window, 0 for the command line.
    cpus
        The machine's usable cores (default :func:`usable_cpus`).
    """
    if engines < 1:
        raise ValueError(f"engines must be at least 1, not {engines}")
    if reserve < 0:
        raise ValueError(f"reserve must not be negative, not {reserve}")
    total = usable_cpus() if cpus is None else cpus
    return max(1, (total - reserve) // engines)


def set_thread_budget(threads: int, environment: bool = True) -> list[str]:
    """Limit this process's compute threads to ``threads``; returns what was limited.

    Bounds the BLAS and OpenMP pools already loaded (``threadpoolctl``; numpy's OpenBLAS
    is), the parallel builds, and, with ``environment``, for libraries that read the
    environment when they start, PoCL's CPU device and OpenMP/BLAS pools loaded later (a
    value the user set is kept; child processes inherit it). Call it before a backend is
    opened.
    """
    global _budget, _limiter
    if threads < 1:
        raise ValueError(f"threads must be at least 1, not {threads}")
    _budget = int(threads)
    done = []
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                 "POCL_CPU_MAX_CU_COUNT", "POCL_MAX_PTHREAD_COUNT") if environment else ():
        if name not in os.environ or name in _env_set:
            os.environ[name] = str(_budget)
            _env_set.add(name)
            done.append(name)
    try:
        from threadpoolctl import threadpool_info, threadpool_limits  # noqa: PLC0415
    except ImportError:                  # a requirement; without it, the environment only
        return done
    done += [f"{p['internal_api']} {p['num_threads']} → {_budget}" for p in threadpool_info()]
    _limiter = threadpool_limits(limits=_budget)
    return done


def thread_budget() -> int:
    """Threads this process may keep busy: the budget set, else every usable core."""
    return _budget if _budget is not None else usable_cpus()


def build_workers(jobs: int) -> int:
    """Parallel compiler processes for ``jobs`` builds: the budget set, else every usable
    core but one (kept for the rest of the machine); at least 1, at most ``jobs``."""
    room = _budget if _budget is not None else usable_cpus() - 1
    return max(1, min(jobs, room))
