"""Profiles records under Nsight Compute off the GUI thread.

:func:`engine.profile.nsight.profile_records` runs in a Python thread (each profile is an
``ncu`` process around a process of its own, so the window never waits on the GPU); its
progress and log lines arrive as Qt signals, queued to the GUI thread.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from engine.profile import nsight as profile
from engine.results.records import ResultRecord


class ProfileRunner(QObject):
    """Signals
    -------
    progress(done, total, what)
        Before each profile (``what``: the item) and once at the end.
    log(level, text)
        A line for the Log.
    finished(results, seconds, cancelled)
        The :class:`engine.profile.nsight.ProfileResult` list; the records carry the counters.
    """

    progress = Signal(int, int, str)
    log = Signal(str, str)
    finished = Signal(object, float, bool)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._active = False

    @property
    def running(self) -> bool:
        # cleared by the worker before it emits finished, not when its thread ends: the
        # window's finished slot asks whether anything still runs (to enable Run again), and
        # the thread is still alive while it emits
        return self._active

    def start(self, records: list[ResultRecord], folder: str | Path,
              kernel_files=(), seed: int = 0) -> bool:
        """Profile ``records`` (their ``profile`` is filled in place); False if busy."""
        if self.running:
            return False
        self._stop.clear()
        recs = list(records)
        self._active = True

        def body() -> None:
            t0 = time.perf_counter()
            results = []
            try:
                results = profile.profile_records(
                    recs, folder, kernel_files, log=self.log.emit, progress=self.progress.emit,
                    should_stop=self._stop.is_set, seed=seed)
            except Exception as exc:  # noqa: BLE001  (a bug must not leave the window busy)
                self.log.emit("error", f"profiling stopped: {type(exc).__name__}: {exc}")
            self._active = False
            self.finished.emit(results, time.perf_counter() - t0, self._stop.is_set())

        self._thread = threading.Thread(target=body, name="profiler", daemon=True)
        self._thread.start()
        return True

    def cancel(self) -> None:
        """End the profile in flight (its ncu is killed) and skip the rest."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
        return self._thread is None or not self._thread.is_alive()
