"""Adapts the engine thread's callbacks to Qt signals.

:class:`engine.worker.EngineThread` calls ``emit(event)`` on the engine thread.  The
bridge turns each event into a signal emitted from that thread; because the bridge
lives in the GUI thread, Qt queues the signal and the connected slots run in the GUI
thread.  Nothing here touches a widget, and nothing here blocks the GUI thread.
"""
from __future__ import annotations

import itertools
from concurrent.futures import Future

from PySide6.QtCore import QObject, Signal

from engine.backends import probe_all
from engine.runner import Event, Plan
from engine.worker import EngineThread, Job


class EngineBridge(QObject):
    """Submits plans and probes to the engine thread; reports back as signals.

    Signals
    -------
    started(Event)
        A sweep began; ``event.total`` runs on ``event.device``.
    progress(Event)
        ``done``, ``total``, ``current`` and ``eta_s`` of the running sweep.
    log(str, str)
        ``(level, message)``; compile reports, uploads, errors (verbatim).
    result(ResultRecord)
        One finished item.
    finished(Event)
        The sweep ended; ``event.cancelled`` says whether it was cancelled.
    backends_probed(dict)
        ``{name: BackendStatus}`` from :func:`engine.backends.probe_all`.
    probe_failed(str)
        The probe itself raised (it should not; the text is shown verbatim).
    """

    started = Signal(object)
    progress = Signal(object)
    log = Signal(str, str)
    result = Signal(object)
    finished = Signal(object)
    backends_probed = Signal(object)
    probe_failed = Signal(str)

    def __init__(self, engine: EngineThread, parent: QObject | None = None):
        super().__init__(parent)
        self.engine = engine
        self._serial = itertools.count(1)
        self._current_serial = 0
        self.job: Job | None = None

    # --- probing -------------------------------------------------------------------

    def probe(self) -> Future:
        """Probe every backend on the engine thread (CUDA likes its own thread)."""
        fut = self.engine.call(probe_all)
        fut.add_done_callback(self._probe_done)
        return fut

    def _probe_done(self, fut: Future) -> None:
        # Runs on the engine thread (or here if already done): only emit.
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            self.probe_failed.emit(f"{type(exc).__name__}: {exc}")
        else:
            self.backends_probed.emit(fut.result())

    # --- sweeps --------------------------------------------------------------------

    def submit(self, plan: Plan) -> Job:
        """Queue ``plan``; its events come back as this object's signals."""
        serial = next(self._serial)
        self._current_serial = serial

        def emit(event: Event) -> None:
            # Engine thread.  Events of a superseded job are dropped so that a late
            # straggler can never be mistaken for the current run's.
            if serial != self._current_serial:
                return
            if event.kind == "result" and event.record is not None:
                self.result.emit(event.record)
            elif event.kind == "progress":
                self.progress.emit(event)
            elif event.kind == "log":
                self.log.emit(event.level, event.message)
            elif event.kind == "started":
                self.started.emit(event)
            elif event.kind == "finished":
                self.finished.emit(event)

        self.job = self.engine.submit(plan, emit)
        return self.job

    def cancel(self) -> None:
        """Ask the running sweep to stop before its next launch; returns at once."""
        if self.job is not None:
            self.job.cancel()

    def detach(self) -> None:
        """Stop forwarding events (the window is going away)."""
        self._current_serial = -1
