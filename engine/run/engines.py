"""Engine handles: one engine per device, the same interface whether it runs in this
process, in a child process, or on a cluster worker.

A handle opens its device (:meth:`EngineHandle.open`), runs plain plans
(:meth:`EngineHandle.run`, blocking, streaming the sweep's events), and says when its
engine was lost (:class:`EngineLost`: a crash, a lost device context, a kernel past its
launch timeout, a build past its time limit: :class:`BuildTimedOut`).
:mod:`engine.run.dispatch` drives several handles at once.

* :class:`LocalEngine`: an :class:`~engine.run.worker.EngineThread` in this process (tests, the
  library API). Nothing isolates it: a lost context ends its part of the run.
* :class:`RemoteEngine`: the watchdog loop shared by engines in other processes
  (:class:`engine.run.process.ProcessEngine`, :class:`engine.run.cluster.RayEngine`): cancel ends
  the process when the kernel does not return in time, a launch past its timeout or a
  build past its time limit ends it too, and :meth:`restart` starts a fresh one.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from engine.measure.backends.base import BackendError, DeviceInfo, DeviceLost
from engine.results.records import ResultRecord
from engine.run.events import EventKind, LogLevel, Phase
from engine.run.messages import (Cancel, Command, Done, EventMessage, Failed, Lost, OpenDevice,
                                 Opened, Reply, RunTask, Shutdown)
from engine.run.runner import HOST, CancelToken, Emit, Event, Plan
from engine.run.worker import EngineThread

#: After Cancel, how long a remote engine may take to finish its launch before it is ended.
CANCEL_KILL_S = 1.5
#: Extra seconds on top of a phase's expected time before the watchdog ends the engine.
WATCHDOG_SLACK_S = 2.0


class EngineLost(RuntimeError):
    """The engine of a device stopped: its process crashed or was ended, its device
    context was lost, or a launch ran past its timeout.

    ``record`` is the item it was running when the engine knew it (status ``error``);
    otherwise ``item`` is ``(variant, params, shape)`` of the item in flight, if any.
    ``restartable`` is False for an in-process engine, which cannot be restarted.
    """

    def __init__(self, reason: str, record: ResultRecord | None = None, item: tuple | None = None,
                 restartable: bool = True):
        super().__init__(reason)
        self.reason = reason
        self.record = record
        self.item = item
        self.restartable = restartable


class BuildTimedOut(EngineLost):
    """A kernel build ran past its time limit (a preprocessor macro bomb never ends): the
    engine was ended to stop it. ``item`` is the item whose build it was."""

    def __init__(self, limit_s: float, item: tuple | None):
        super().__init__(f"the build took longer than {limit_s:g} s (its engine was ended "
                         "to stop it)", item=item)
        self.limit_s = limit_s


class EngineHandle(ABC):
    """One device's engine, seen from the run that uses it."""

    def __init__(self, backend: str, device: int):
        self.backend, self.device = backend, device
        self.info: DeviceInfo | None = None
        self.versions = ""
        #: Host the engine runs on (a cluster worker's own).
        self.host = ""
        #: ``(variant, params, shape)`` the engine is running now, if known.
        self.in_flight: tuple | None = None
        #: CPU threads the engine may keep busy (engine.common.cpus); None: no limit. Only an
        #: engine in a process of its own applies it (set it before a run).
        self.cpu_threads: int | None = None

    @property
    def label(self) -> str:
        """Short name in logs: ``cuda:1``, or ``cuda:1@host`` for a cluster worker."""
        return f"{self.backend}:{self.device}"

    @abstractmethod
    def open(self) -> DeviceInfo:
        """Start the engine if needed and open its device; raises EngineLost or
        BackendError (the message says why)."""

    @abstractmethod
    def run(self, plan: Plan, emit: Emit, cancel: CancelToken) -> list[ResultRecord]:
        """Run one plain plan (no autotune); ``log``, ``progress`` and ``result`` events go
        to ``emit``; returns the records. Raises EngineLost."""

    def restart(self) -> DeviceInfo:
        """Replace a lost engine by a fresh one on the same device."""
        raise EngineLost(f"{self.label}: an in-process engine cannot be restarted",
                         restartable=False)

    @abstractmethod
    def close(self, timeout: float = 10.0) -> bool:
        """Stop the engine (closing its backend on its own thread); True when it ended."""


class LocalEngine(EngineHandle):
    """An :class:`EngineThread` in this process: no isolation, no restarts."""

    def __init__(self, backend: str, device: int = 0):
        super().__init__(backend, device)
        self.thread = EngineThread(name=f"engine-{backend}-{device}", worker="local",
                                   restartable=True)

    def open(self) -> DeviceInfo:
        self.thread.start()
        self.info, self.versions = self.thread.open_device(self.backend, self.device).result()
        self.host = HOST
        return self.info

    def run(self, plan: Plan, emit: Emit, cancel: CancelToken) -> list[ResultRecord]:
        job = self.thread.submit(plan, _without_frame(emit), cancel)
        try:
            return job.result()
        except DeviceLost as exc:
            raise EngineLost(str(exc), record=exc.record, restartable=False) from None

    def close(self, timeout: float = 10.0) -> bool:
        return self.thread.shutdown(timeout)


def _without_frame(emit: Emit) -> Emit:
    """A sweep's own started/finished events are the engine's business, not the run's."""
    def inner(ev: Event) -> None:
        if ev.kind not in (EventKind.STARTED, EventKind.FINISHED):
            emit(ev)
    return inner


class RemoteEngine(EngineHandle):
    """An engine in another process, reached by messages.

    Subclasses provide the transport: :meth:`_start` (a fresh engine), :meth:`_send`
    (a :data:`~engine.run.messages.Command`), :meth:`_receive` (the next
    :data:`~engine.run.messages.Reply`, or None after ``timeout``; raises EngineLost when
    the engine is gone) and :meth:`kill`.
    """

    #: Seconds a fresh engine may take to open its device (imports, driver start-up).
    OPEN_TIMEOUT_S = 180.0

    @abstractmethod
    def _start(self) -> None: ...

    @abstractmethod
    def _send(self, msg: Command) -> None: ...

    @abstractmethod
    def _receive(self, timeout: float) -> Reply | None: ...

    @abstractmethod
    def kill(self) -> None:
        """End the engine now (its kernel with it)."""

    @abstractmethod
    def alive(self) -> bool: ...

    def open(self) -> DeviceInfo:
        if not self.alive():
            self._start()
        self._send(OpenDevice(self.backend, self.device))
        deadline = time.monotonic() + self.OPEN_TIMEOUT_S
        while time.monotonic() < deadline:
            match self._receive(0.25):
                case Opened(info, versions, host):
                    self.info, self.versions, self.host = info, versions, host
                    return self.info
                case Failed(text):
                    raise BackendError(text)
        self.kill()
        raise EngineLost(f"{self.label}: the engine did not open its device within "
                         f"{self.OPEN_TIMEOUT_S:.0f} s")

    def restart(self) -> DeviceInfo:
        self.kill()
        return self.open()

    def run(self, plan: Plan, emit: Emit, cancel: CancelToken) -> list[ResultRecord]:
        if not self.alive():
            self.open()
        self._send(RunTask(plan))
        got: list[ResultRecord] = []
        item = None
        deadline = None
        deadline_len = 0.0
        phase = ""
        phase_limit = 0.0
        cancel_sent_at = None
        while True:
            now = time.monotonic()
            if cancel.cancelled and cancel_sent_at is None:
                self._send(Cancel())
                cancel_sent_at = now
            if cancel_sent_at is not None and now - cancel_sent_at > CANCEL_KILL_S:
                # The kernel in flight does not return: end the process; what finished stays.
                self.kill()
                emit(Event(EventKind.LOG, f"{self.label}: engine ended to stop a running kernel "
                                  f"(cancel)", level=LogLevel.WARNING))
                return got
            if deadline is not None and now > deadline and cancel_sent_at is None:
                self.kill()
                if phase == Phase.COMPILE:
                    raise BuildTimedOut(phase_limit, item)
                raise EngineLost(f"timed out: the {phase} launches ran past "
                                 f"{deadline_len:.1f} s (launch timeout)", item=item)
            try:
                msg = self._receive(0.05)
            except EngineLost as lost:       # the process died: the item in flight died with it
                lost.item = lost.item or item
                self.in_flight = None
                raise
            if msg is None:
                continue
            if isinstance(msg, EventMessage):
                ev = msg.event
                if ev.kind == EventKind.PHASE:
                    item = self.in_flight = ev.item or item
                    phase = ev.message
                    if ev.expected_s is not None:
                        phase_limit = ev.expected_s
                        deadline_len = ev.expected_s + WATCHDOG_SLACK_S
                        deadline = time.monotonic() + deadline_len
                    else:
                        deadline = None
                    emit(ev)        # the run's timeline (engine.run.timeline)
                    continue
                if ev.kind == EventKind.PROGRESS:
                    item = self.in_flight = ev.item
                elif ev.kind == EventKind.RESULT and ev.record is not None:
                    got.append(ev.record)
                    item, deadline, self.in_flight = None, None, None
                if ev.kind not in (EventKind.STARTED, EventKind.FINISHED):
                    emit(ev)
            elif isinstance(msg, Done):
                return got
            elif isinstance(msg, Lost):
                raise EngineLost(msg.reason, record=msg.record)
            elif isinstance(msg, Failed):
                emit(Event(EventKind.LOG, f"{self.label}: internal error: {msg.text}",
                           level=LogLevel.ERROR))
                return got

    def close(self, timeout: float = 10.0) -> bool:
        if not self.alive():
            return True
        try:
            self._send(Shutdown())
        except (OSError, EngineLost):
            pass
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.alive():
            try:
                self._receive(0.05)
            except EngineLost:
                break
        if self.alive():
            self.kill()
            return False
        return True
