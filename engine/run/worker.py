"""The engine thread: one long-lived thread that owns the backends (and the CUDA context).

Everything that touches a device runs here, in submission order. The GUI and the CLI
talk to it through :meth:`EngineThread.submit` (a sweep, with an event callback that is
called *on this thread*: the GUI re-emits events as Qt signals) and
:meth:`EngineThread.call` (any function, e.g. probing devices). :meth:`shutdown`
cancels what is running, closes the backends on this thread (``ctx.pop()`` and
``ctx.detach()`` for CUDA) and joins.
"""
from __future__ import annotations

import atexit
import os
import queue
import sys
import threading
import weakref
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from engine.run.autotune import run_autotuned
from engine.measure.backends.base import DeviceLost
from engine.results.records import ResultRecord
from engine.run.events import EventKind, LogLevel
from engine.run.runner import CancelToken, Emit, Event, Plan, Sweep, final_records

#: Engine threads still running, for the exit hook below.
_LIVE: "weakref.WeakSet[EngineThread]" = weakref.WeakSet()
#: How long the exit hook waits for a running sweep to notice its cancel.
EXIT_GRACE_S = 5.0


@atexit.register
def _shutdown_at_exit() -> None:
    """Close every engine before the interpreter tears its modules down.

    pycuda aborts the process (SIGABRT, "context stack was not empty upon module
    cleanup") when the interpreter ends while a context is still current on some thread.
    So at exit each engine is cancelled and closed on its own thread; an engine stuck in
    a kernel that never returns cannot be closed, and then the process ends right here
    with its exit status 0 rather than aborting later.
    """
    stuck = [eng for eng in list(_LIVE) if not eng.shutdown(EXIT_GRACE_S)]
    if stuck and any(eng.holds_context() for eng in stuck):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


class Job:
    """A submitted sweep: cancel it, or wait for its records."""

    def __init__(self, plan: Plan, emit: Emit, cancel: CancelToken | None = None):
        self.plan, self.emit = plan, emit
        self.cancel_token = cancel or CancelToken()
        self.future: Future[list[ResultRecord]] = Future()

    def cancel(self) -> None:
        self.cancel_token.cancel()

    def result(self, timeout: float | None = None) -> list[ResultRecord]:
        return self.future.result(timeout)


@dataclass(frozen=True)
class _Submit:
    """A sweep for the engine thread's queue."""

    job: Job


@dataclass(frozen=True)
class _Call:
    """A function to call on the engine thread; its outcome goes to ``future``."""

    fn: Callable[..., Any]
    args: tuple
    kwargs: dict = field(default_factory=dict)
    future: Future = field(default_factory=Future)


@dataclass(frozen=True)
class _Stop:
    """The engine thread ends after what is before this in its queue."""


class EngineThread:
    """Owns a :class:`Sweep` (and so the open backend) on a dedicated daemon thread."""

    def __init__(self, name: str = "engine", worker: str = "local", restartable: bool = False):
        """``restartable``: the engine lives in a process its supervisor restarts; a lost
        device context then fails the job with :class:`DeviceLost` (the supervisor records
        the item), instead of being reported here as the end of the sweep."""
        self._queue: queue.Queue = queue.Queue()
        self._sweep = Sweep(worker)
        self._restartable = restartable
        self._current: Job | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._started = False
        self._stopping = threading.Event()

    def start(self) -> "EngineThread":
        if not self._started:
            self._thread.start()
            self._started = True
            _LIVE.add(self)
        return self

    def holds_context(self) -> bool:
        """Whether a backend (a CUDA context) is still open on the engine thread."""
        return self._sweep.backend is not None

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def submit(self, plan: Plan, emit: Emit, cancel: CancelToken | None = None) -> Job:
        """Queue a sweep; ``cancel`` (optional) is the token that stops it."""
        job = Job(plan, emit, cancel)
        self._queue.put(_Submit(job))
        return job

    def open_device(self, backend: str, index: int) -> Future:
        """Open ``backend`` device ``index`` on the engine thread; the future holds
        ``(DeviceInfo, versions)``."""
        def opener():
            info = self._sweep.ensure_open(backend, index)
            return info, self._sweep.backend.versions()
        return self.call(opener)

    def call(self, fn: Callable[..., Any], *args, **kwargs) -> Future:
        call = _Call(fn, args, kwargs)
        self._queue.put(call)
        return call.future

    def cancel_current(self) -> None:
        with self._lock:
            if self._current is not None:
                self._current.cancel()

    def shutdown(self, timeout: float | None = 30.0) -> bool:
        """Cancel the running sweep, close the backends on the engine thread, join.

        Returns True when the thread ended within ``timeout``.
        """
        if not self._started:
            return True
        self._stopping.set()  # sweeps still queued are cancelled, not run
        self.cancel_current()
        self._queue.put(_Stop())
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        while True:
            msg = self._queue.get()
            if isinstance(msg, _Stop):
                break
            if isinstance(msg, _Call):
                if msg.future.set_running_or_notify_cancel():
                    try:
                        msg.future.set_result(msg.fn(*msg.args, **msg.kwargs))
                    except BaseException as exc:  # noqa: BLE001  (handed to the caller)
                        msg.future.set_exception(exc)
                continue
            job: Job = msg.job
            if self._stopping.is_set():
                job.future.cancel()
                continue
            with self._lock:
                self._current = job
            try:
                job.plan = job.plan.with_sources()   # the texts the run started with, once
                for problem in job.plan.load_kernels():
                    job.emit(Event(EventKind.LOG, problem, level=LogLevel.ERROR))
                if job.plan.autotune:
                    records = run_autotuned(self._sweep, job.plan, job.emit, job.cancel_token)
                else:
                    records = self._sweep.run(job.plan, job.emit, job.cancel_token)
                job.future.set_result(records)
            except DeviceLost as exc:
                self._device_lost(job, exc)
            except BaseException as exc:  # noqa: BLE001  (never kill the engine thread)
                try:
                    job.emit(Event(EventKind.LOG, f"internal error: {exc!r}", level=LogLevel.ERROR))
                    job.emit(Event(EventKind.FINISHED, f"internal error: {exc}"))
                finally:
                    job.future.set_exception(exc)
            finally:
                with self._lock:
                    self._current = None
        _LIVE.discard(self)
        # Drain: whatever was queued behind the stop is cancelled, not left hanging.
        while not self._queue.empty():
            msg = self._queue.get_nowait()
            if isinstance(msg, _Submit):
                msg.job.future.cancel()
            elif isinstance(msg, _Call):
                msg.future.cancel()
        try:
            self._sweep.close()  # on this thread: the CUDA context is popped where it was made
        except Exception:  # noqa: BLE001  (a lost context fails its synchronize; it is popped anyway)
            pass

    def _device_lost(self, job: Job, exc: DeviceLost) -> None:
        """The device context died under a kernel. Restartable (in an engine process): the
        supervisor records the item and restarts the process. In-process: the item is
        recorded, the sweep ends, and the backend is closed so that a later plan opens
        the device anew (CUDA refuses until the process restarts; its error says so)."""
        if self._restartable:
            job.future.set_exception(exc)
            return
        rec = exc.record
        results = list(exc.results) + ([rec] if rec is not None else [])
        try:
            if rec is not None:
                job.emit(Event(EventKind.RESULT, record=rec, done=len(results), total=len(results)))
            job.emit(Event(EventKind.LOG, f"the device is lost: {exc}", level=LogLevel.ERROR))
            final = final_records(results)
            job.emit(Event(EventKind.FINISHED, f"stopped: {exc}", done=len(results), total=len(results),
                           started=True, records=final))
            job.future.set_result(final)
        finally:
            try:
                self._sweep.close()
            except Exception:  # noqa: BLE001
                self._sweep.backend = None
