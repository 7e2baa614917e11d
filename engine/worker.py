"""The engine thread: one long-lived thread that owns the backends (and the CUDA context).

Everything that touches a device runs here, in submission order. The GUI and the CLI
talk to it through :meth:`EngineThread.submit` (a sweep, with an event callback that is
called *on this thread*: the GUI re-emits events as Qt signals) and
:meth:`EngineThread.call` (any function, e.g. probing devices). :meth:`shutdown`
cancels what is running, closes the backends on this thread (``ctx.pop()`` and
``ctx.detach()`` for CUDA) and joins.
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable

from .records import ResultRecord
from .runner import CancelToken, Emit, Event, Plan, Sweep


class Job:
    """A submitted sweep: cancel it, or wait for its records."""

    def __init__(self, plan: Plan, emit: Emit):
        self.plan, self.emit = plan, emit
        self.cancel_token = CancelToken()
        self.future: Future[list[ResultRecord]] = Future()

    def cancel(self) -> None:
        self.cancel_token.cancel()

    def result(self, timeout: float | None = None) -> list[ResultRecord]:
        return self.future.result(timeout)


class EngineThread:
    """Owns a :class:`Sweep` (and so the open backend) on a dedicated daemon thread."""

    def __init__(self, name: str = "engine"):
        self._queue: queue.Queue = queue.Queue()
        self._sweep = Sweep()
        self._current: Job | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._started = False
        self._stopping = threading.Event()

    def start(self) -> "EngineThread":
        if not self._started:
            self._thread.start()
            self._started = True
        return self

    @property
    def thread(self) -> threading.Thread:
        return self._thread

    def submit(self, plan: Plan, emit: Emit) -> Job:
        job = Job(plan, emit)
        self._queue.put(("job", job))
        return job

    def call(self, fn: Callable[..., Any], *args, **kwargs) -> Future:
        fut: Future = Future()
        self._queue.put(("call", (fn, args, kwargs, fut)))
        return fut

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
        self._queue.put(("stop", None))
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        while True:
            kind, payload = self._queue.get()
            if kind == "stop":
                break
            if kind == "call":
                fn, args, kwargs, fut = payload
                if fut.set_running_or_notify_cancel():
                    try:
                        fut.set_result(fn(*args, **kwargs))
                    except BaseException as exc:  # noqa: BLE001  (handed to the caller)
                        fut.set_exception(exc)
                continue
            job: Job = payload
            if self._stopping.is_set():
                job.future.cancel()
                continue
            with self._lock:
                self._current = job
            try:
                records = self._sweep.run(job.plan, job.emit, job.cancel_token)
                job.future.set_result(records)
            except BaseException as exc:  # noqa: BLE001  (never kill the engine thread)
                try:
                    job.emit(Event("log", f"internal error: {exc!r}", level="error"))
                    job.emit(Event("finished", f"internal error: {exc}"))
                finally:
                    job.future.set_exception(exc)
            finally:
                with self._lock:
                    self._current = None
        # Drain: whatever was queued behind the stop is cancelled, not left hanging.
        while not self._queue.empty():
            kind, payload = self._queue.get_nowait()
            if kind == "job":
                payload.future.cancel()
            elif kind == "call":
                payload[3].cancel()
        self._sweep.close()  # on this thread: the CUDA context is popped where it was made
