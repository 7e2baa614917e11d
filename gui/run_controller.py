"""The run lifecycle for the window: engines, runs, progress, cancel, faults, shutdown.

:class:`RunController` runs on the engines of an :class:`~engine.run.pool.EnginePool`
(one per device, a :class:`~engine.run.process.ProcessEngine` by default: a kernel that
crashes or hangs takes only its own process down, and the window's process never holds a
CUDA context), which reuses them from run to run and starts each run with
:func:`engine.run.dispatch.start_run`.  The dispatcher calls back from its worker threads;
the controller posts every event through one internal queued signal to itself, and
re-emits it as a public signal in the GUI thread.  So every slot connected to the
controller (a window method, a lambda, a test's waiter) runs in the GUI thread, and no
connection crosses threads except the controller's own.  Nothing here waits on an
engine in the GUI thread: probing, opening devices, connecting to a Ray cluster and
closing engines all happen on worker threads.

The GPU clock lock of a run (:class:`~engine.measure.conditions.ClockLock`, bench's
``--lock-clocks``) is held here, in the window's process, never in an engine process
(which may crash): taken when the run starts and restored when its ``finished`` event is
handled, on Cancel, when the controller closes (the window's closeEvent) or is killed,
and at the interpreter's exit (the lock's atexit).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Callable, Sequence

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from engine.run import cluster  # Ray itself is imported only when a cluster is used
from engine.run.autotune import CacheEvent
from engine.measure.backends import DeviceInfo, probe_all
from engine.measure.conditions import ClockLock, ClockMode, monitors_for
from engine.common.cpus import WINDOW_CPUS
from engine.run.dispatch import MODES, Run
from engine.run.engines import EngineHandle
from engine.run.events import EventKind, LogLevel
from engine.run.pool import ClusterFactory, EngineFactory, EnginePool, RunTarget
from engine.run.runner import Event, Plan

#: On shutdown: how long a cancelled run may take to end (a remote engine's kernel is
#: killed after engine.run.engines.CANCEL_KILL_S), then how long engines get to close.
SHUTDOWN_RUN_WAIT_S = 2.5
SHUTDOWN_CLOSE_S = 1.5


#: Longest the GUI thread spends handing over queued engine events before it lets the
#: event loop run (timers, painting, input) again.
DELIVERY_SLICE_S = 0.012


def _prepare_engine_processes() -> None:
    """Do now, off the GUI thread, what the first engine process would otherwise do in the
    middle of a run: import the spawn machinery (PySide's import hook reads each importing
    module's source, holding the interpreter) and start multiprocessing's resource tracker
    (a process of its own)."""
    try:
        import multiprocessing.connection  # noqa: F401, PLC0415
        import multiprocessing.popen_spawn_posix  # noqa: F401, PLC0415
        from multiprocessing import resource_tracker  # noqa: PLC0415

        import engine.run.process  # noqa: F401, PLC0415
        resource_tracker.ensure_running()
    except Exception:  # noqa: BLE001  (an optimisation only; a run does the same work)
        pass


class RunController(QObject):
    """Starts runs on a backend's devices and reports them as signals; its
    :class:`~engine.run.pool.EnginePool` (:attr:`pool`) owns the engines.

    Parameters
    ----------
    engine_factory
        Makes one device's engine; by default :func:`engine.run.pool.process_engine`.  Tests pass
        :class:`engine.run.engines.LocalEngine` (in-process: fast, no isolation).
    cluster_factory
        Makes a Ray cluster's engines; by default :func:`engine.run.pool.ray_engines`.

    Signals
    -------
    started(Event)
        A run began: ``event.total`` runs on ``event.devices``.
    progress(Event)
        ``done``, ``total``, ``current`` and ``eta_s`` of the run, over all devices.
    log(str, str)
        ``(level, message)``: compile reports, uploads, engine restarts, errors verbatim.
    result(ResultRecord)
        One finished item (from any device).
    cache_problem(CacheProblem)
        The autotune cache could not be read or written (:mod:`engine.run.autotune`); its
        message also comes as a ``warning`` log line.
    finished(Event)
        The run ended: ``event.cancelled``, ``event.started``, ``event.records`` (the
        final copies with speed-ups).  :attr:`running` is already False here.
    backends_probed(dict)
        ``{name: BackendStatus}`` from :func:`engine.measure.backends.probe_all`.
    probe_failed(str)
        The probe itself raised (it should not; the text is shown verbatim).
    ray_probed(bool, str)
        Whether Ray clusters can be used, and the reason when not.
    closed()
        :meth:`close_async` finished: every engine is closed (or ended).
    """

    started = Signal(object)
    progress = Signal(object)
    log = Signal(str, str)
    result = Signal(object)
    cache_problem = Signal(object)
    finished = Signal(object)
    backends_probed = Signal(object)
    probe_failed = Signal(str)
    ray_probed = Signal(bool, str)
    closed = Signal()
    #: Internal: ``(run serial or None, signal name, args)`` on its way to the GUI thread.
    _relay = Signal(object)

    def __init__(self, engine_factory: EngineFactory | None = None,
                 cluster_factory: ClusterFactory | None = None, parent: QObject | None = None):
        super().__init__(parent)
        # The window keeps WINDOW_CPUS cores for itself: a reference product on every
        # core starved its repaints (engine.common.cpus).
        self.pool = EnginePool(engine_factory, cluster_factory, reserve_cpus=WINDOW_CPUS)
        self._serial = 0
        self._run: Run | None = None
        self._cancel_requested = False
        self._shutting_down = False
        self._closed = False
        self.running = False
        #: The target of the current (or last) run.
        self.target: RunTarget | None = None
        # Queued even from the GUI thread: a run that fails at once still reports after
        # start() has returned, like any other.
        self._relay.connect(self._deliver, Qt.ConnectionType.QueuedConnection)
        self._pending: deque = deque()
        self._pending_lock = threading.Lock()
        self._wake_posted = False
        self._progress_seq = 0
        #: The current run's clock lock (None: none held).
        self._lock: ClockLock | None = None
        #: What the last run asked of the clocks and what came of it, as a results file's
        #: environment block says it (``base: SM clock locked at …``; "": not asked).
        self.clock_lock_text = ""

    # --- signals from worker threads ---------------------------------------------------

    def _post(self, name: str, *args, serial: int | None = None) -> None:
        """From any thread: emit signal ``name`` with ``args`` in the GUI thread (for a
        run's event, only while run ``serial`` is still the current one).

        Messages wait in a queue; the GUI thread is woken once per batch and handles them
        in slices of at most :data:`DELIVERY_SLICE_S`, yielding to the event loop between
        slices, so a burst of results never freezes the window."""
        with self._pending_lock:
            if name == "progress":          # only the latest progress is worth showing
                self._progress_seq += 1
                args = args + (self._progress_seq,)
            self._pending.append((serial, name, args))
            wake = not self._wake_posted
            self._wake_posted = True
        if wake:
            try:
                self._relay.emit(None)
            except RuntimeError:   # "Internal C++ object already deleted": the window is gone
                pass

    @Slot(object)
    def _deliver(self, _wake=None) -> None:
        # GUI thread, in the order the events were posted.
        end = time.perf_counter() + DELIVERY_SLICE_S
        while True:
            with self._pending_lock:
                if not self._pending:
                    self._wake_posted = False
                    return
                serial, name, args = self._pending.popleft()
                latest_progress = self._progress_seq
            if name == "progress":
                if args[-1] != latest_progress:
                    continue                 # superseded by a later progress
                args = args[:-1]
            if serial is not None:
                if serial != self._serial:
                    continue             # a superseded run's (or a closed window's) straggler
                if name == "finished":
                    self.running = False
                    self._run = None
                    self._release_lock()
            getattr(self, name).emit(*args)
            if time.perf_counter() > end:
                # The rest after the event loop had its turn (timers, painting, input).
                QTimer.singleShot(0, self._deliver)
                return

    # --- probing -----------------------------------------------------------------------

    def probe(self) -> threading.Thread:
        """Probe every backend, then Ray, on a worker thread; answers come as signals.

        Probing only asks drivers what they have (``cuInit`` and device attributes);
        no device context is made in this process.
        """
        def body() -> None:
            try:
                statuses = probe_all()
            except Exception as exc:  # noqa: BLE001
                self._post("probe_failed", f"{type(exc).__name__}: {exc}")
            else:
                self._post("backends_probed", statuses)
            ok, why = cluster.ray_status()
            self._post("ray_probed", ok, why)
            _prepare_engine_processes()

        thread = threading.Thread(target=body, name="probe-backends", daemon=True)
        thread.start()
        return thread

    # --- engines -----------------------------------------------------------------------

    @property
    def engine_factory(self) -> EngineFactory:
        return self.pool.engine_factory

    @engine_factory.setter
    def engine_factory(self, factory: EngineFactory) -> None:
        self.pool.engine_factory = factory

    @property
    def cluster_factory(self) -> ClusterFactory:
        return self.pool.cluster_factory

    @cluster_factory.setter
    def cluster_factory(self, factory: ClusterFactory) -> None:
        self.pool.cluster_factory = factory

    def engines(self) -> list[EngineHandle]:
        """Every engine the controller's pool holds now (local ones, then cluster ones)."""
        return self.pool.engines()

    def idle(self) -> bool:
        """No run, no engine, nothing being closed: closing now would not wait at all."""
        return not self.running and self.pool.idle()

    def engines_for(self, target: RunTarget) -> list[EngineHandle]:
        """The engines of ``target``'s devices (:meth:`EnginePool.engines_for`)."""
        return self.pool.engines_for(target)

    # --- runs --------------------------------------------------------------------------

    def start(self, plan: Plan, target: RunTarget, clock_mode: ClockMode = ClockMode.NONE,
              lock_devices: Sequence[DeviceInfo] = ()) -> bool:
        """Start ``plan`` on ``target``; False when a run is already going (or closing).

        Returns at once.  A run that cannot start (bad plan, no device opens) still
        reports ``started``/``finished`` as signals: ``finished`` with ``started``
        False and the reason in its message.

        ``clock_mode``: lock the SM clocks of ``lock_devices`` (those NVML finds by their
        PCI bus id) for the run, as ``bench --lock-clocks``; a refusal is a log line and
        the run goes on unlocked.
        """
        if self.running or self._shutting_down:
            return False
        if target.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not '{target.mode}'")
        self._serial += 1
        serial = self._serial
        self.running = True
        self.target = target
        self._cancel_requested = False
        self._run = None
        emit = self._emitter(serial)
        try:
            self._take_lock(ClockMode(clock_mode), lock_devices, target, emit)
            if target.ray_address is not None:
                threading.Thread(target=self._launch_on_cluster, args=(plan, target, emit, serial),
                                 name="run-launch", daemon=True).start()
                return True
            try:
                self._run = self.pool.start_run(plan, target, emit)
            except ValueError as exc:       # engines of another backend, no engines, bad mode
                emit(Event(EventKind.LOG, str(exc), level=LogLevel.ERROR))
                emit(Event(EventKind.FINISHED, str(exc)))
        except BaseException:
            # No finished event will come to restore the clocks: do it now.
            self.running = False
            self._release_lock()
            raise
        return True

    # --- the clock lock ------------------------------------------------------------------

    @property
    def clocks_locked(self) -> bool:
        """Whether this controller holds some GPU's clocks locked now."""
        return self._lock is not None and bool(self._lock.locked)

    def _take_lock(self, mode: ClockMode, devices: Sequence[DeviceInfo], target: RunTarget,
                   emit: Callable[[Event], None]) -> None:
        self.clock_lock_text = ""
        if mode is ClockMode.NONE:
            return
        asked = f"Clock lock ({mode.value})"
        if target.ray_address is not None:
            note = "not used with a Ray cluster (its machines' clocks are their own)"
            emit(Event(EventKind.LOG, f"{asked}: {note}", level=LogLevel.WARNING))
            self.clock_lock_text = f"{mode.value}: {note}"
            return
        monitors, missing = monitors_for(devices)
        for why in missing:
            emit(Event(EventKind.LOG, f"{asked}: {why}; its clocks are left as they are",
                       level=LogLevel.WARNING))
        lock = ClockLock(mode, monitors)
        lock.__enter__()
        self._lock = lock
        if lock.note:
            emit(Event(EventKind.LOG, f"{asked}: {lock.note}",
                       level=LogLevel.INFO if lock.locked else LogLevel.WARNING))
        # as bench writes it into a results file's environment block
        self.clock_lock_text = f"{mode.value}: {lock.note or f'not used ({target.backend})'}"

    def _release_lock(self) -> None:
        """Restore the clocks the current run locked (idempotent; GUI thread)."""
        lock, self._lock = self._lock, None
        if lock is None or not lock.locked:
            return
        problems = lock.restore()
        try:
            for problem in problems:
                self.log.emit(LogLevel.ERROR.value, problem)
            if not problems:
                self.log.emit(LogLevel.INFO.value, "GPU clocks restored (unlocked)")
        except RuntimeError:    # "Internal C++ object already deleted": the window is gone
            pass

    def _launch_on_cluster(self, plan: Plan, target: RunTarget, emit, serial: int) -> None:
        """Worker thread: connect to the cluster, then start the run there."""
        emit(Event(EventKind.LOG, f"connecting to the Ray cluster '{target.ray_address}'…"))
        try:
            engines = self.pool.cluster_engines(target.ray_address, target.backend)
        except Exception as exc:  # noqa: BLE001  (no ray, no cluster, no worker: say it)
            msg = f"Ray cluster '{target.ray_address}': {exc}"
            emit(Event(EventKind.LOG, msg, level=LogLevel.ERROR))
            emit(Event(EventKind.FINISHED, msg, cancelled=self._cancel_requested))
            return
        if self._cancel_requested or serial != self._serial:
            emit(Event(EventKind.FINISHED, "cancelled before the run started", cancelled=True))
            return
        emit(Event(EventKind.LOG, f"Ray cluster '{target.ray_address}': {len(engines)} engine(s)"))
        try:
            run = self.pool.start_run(plan, target, emit)
        except (ValueError, RuntimeError) as exc:    # RuntimeError: closed meanwhile
            emit(Event(EventKind.LOG, str(exc), level=LogLevel.ERROR))
            emit(Event(EventKind.FINISHED, str(exc)))
            return
        self._run = run
        if self._cancel_requested:      # Cancel came while the run was being started
            run.cancel()

    def _emitter(self, serial: int) -> Callable[[Event], None]:
        """The run's event callback (worker threads): post each event as its signal."""
        def emit(ev: Event) -> None:
            # A superseded run's (or a closed window's) stragglers are dropped here and
            # again on arrival, so that they can never be mistaken for the current run's.
            if serial != self._serial:
                return
            if ev.kind == EventKind.RESULT and ev.record is not None:
                self._post("result", ev.record, serial=serial)
            elif ev.kind == EventKind.PROGRESS:
                self._post("progress", ev, serial=serial)
            elif ev.kind == EventKind.LOG:
                self._post("log", ev.level, ev.message, serial=serial)
                if isinstance(ev, CacheEvent) and ev.problem is not None:
                    self._post("cache_problem", ev.problem, serial=serial)
            elif ev.kind == EventKind.STARTED:
                self._post("started", ev, serial=serial)
            elif ev.kind == EventKind.FINISHED:
                self._post("finished", ev, serial=serial)
        return emit

    def cancel(self) -> None:
        """Ask the run to stop before its next launch (an engine in another process whose
        kernel does not return is ended); returns at once.  Finished results are kept."""
        if not self.running:
            return
        self._cancel_requested = True
        # What is timed after Cancel is discarded: the clocks need not wait for the run's end.
        self._release_lock()
        run = self._run
        if run is not None:
            run.cancel()

    # --- shutdown ----------------------------------------------------------------------

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` (or :meth:`close_async`) has finished."""
        return self._closed

    def _begin_close(self) -> None:
        self._shutting_down = True
        self._cancel_requested = True
        self._release_lock()
        run = self._run
        if run is not None:
            run.cancel()

    def _close_everything(self, deadline: float) -> bool:
        """Cancel the run, wait for it briefly, close every engine; kill what lingers."""
        run = self._run
        if run is not None:
            try:
                run.result(max(0.0, min(SHUTDOWN_RUN_WAIT_S, deadline - time.monotonic())))
            except Exception:  # noqa: BLE001  (a timeout, or the run's own failure)
                pass
        stuck = run is not None and not run.done()
        # A stuck run thread is blocked on its engines (opening a device, a kernel past
        # cancel): the pool ends them rather than closing them from a second thread.
        ok = self.pool.close(max(0.2, min(SHUTDOWN_CLOSE_S, deadline - time.monotonic())),
                             deadline, kill_first=stuck)
        self._serial = -1        # nothing of this controller's runs is delivered any more
        self._closed = True
        return ok and not stuck

    def close(self, timeout: float = SHUTDOWN_RUN_WAIT_S + SHUTDOWN_CLOSE_S + 0.5) -> bool:
        """Cancel the run and close every engine, blocking for at most about ``timeout``
        seconds (engines in other processes that do not stop are killed).  For use when
        the event loop is over (e.g. after ``app.exec()``) or in tests.  Idempotent;
        True when everything ended cleanly."""
        if self._closed:
            return True
        self._begin_close()
        return self._close_everything(time.monotonic() + timeout)

    def close_async(self, timeout: float = SHUTDOWN_RUN_WAIT_S + SHUTDOWN_CLOSE_S + 0.5) -> None:
        """Like :meth:`close` but on a worker thread; ``closed`` is emitted when done."""
        if self._closed:
            self._post("closed")
            return
        self._begin_close()
        deadline = time.monotonic() + timeout

        def body() -> None:
            try:
                self._close_everything(deadline)
            finally:
                self._post("closed")

        threading.Thread(target=body, name="close-engines", daemon=True).start()

    def kill_all(self) -> None:
        """End every engine now (the last resort of a window that must close)."""
        self._begin_close()
        self.pool.kill_all()
        self._serial = -1
