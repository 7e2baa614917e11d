"""One device's engine in a child process of its own.

The child (started with ``spawn``: a fresh interpreter, no inherited CUDA state) runs the
same :class:`~engine.run.worker.EngineThread` as an in-process engine; that thread makes the
CUDA context and pops it on shutdown. The child's main thread only relays: commands
from the parent arrive on one pipe, the sweep's events leave on another.

So a kernel that hits an illegal address, traps, or never returns takes only this
process down: the parent (:class:`ProcessEngine`, through the watchdog loop of
:class:`~engine.run.engines.RemoteEngine`) records the item, starts a fresh child and goes
on. The window's process never holds a CUDA context, and its interpreter never waits
on the engine's Python or numpy work.
"""
from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import signal
import threading
import traceback
from multiprocessing.connection import wait

from engine.common import cpus
from engine.measure.backends.base import DeviceLost
from engine.run.engines import EngineLost, RemoteEngine
from engine.run.messages import (Cancel, Command, Done, EventMessage, Failed, Lost, OpenDevice,
                                 Opened, Reply, RunTask, SetThreads, Shutdown)
from engine.run.runner import HOST

#: How much lower than its parent an engine process (and its nvcc builds) is scheduled.
ENGINE_NICENESS = 5
#: Exit status of a child whose device context was lost (it ends itself after reporting).
EXIT_DEVICE_LOST = 3


def child_main(cmd_conn, evt_conn, preload: tuple[str, ...] = (),
               cpu_threads: int | None = None) -> None:
    """The engine process: relay commands to an EngineThread, its events back."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle
    try:
        # Below the window in the scheduler's eyes: this process and its compilers (one
        # nvcc per core during a precompile) must never starve the GUI of a core.
        os.nice(ENGINE_NICENESS)
    except OSError:
        pass
    if cpu_threads:
        # Niceness alone was not enough: a reference product on every core (OpenBLAS)
        # stretched the window's repaints threefold on a 16-core machine.
        cpus.set_thread_budget(cpu_threads)
    from engine.run.worker import EngineThread  # noqa: PLC0415  (after the signal set-up)

    send_lock = threading.Lock()

    def send(msg: Reply) -> None:
        with send_lock:
            try:
                evt_conn.send(msg)
            except (OSError, ValueError):   # the parent is gone: nothing to tell
                pass

    try:
        for name in preload:
            importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001
        send(Failed(f"preloading {name} failed: {exc}"))
    engine = EngineThread(name="engine", worker=f"process {os.getpid()}", restartable=True).start()
    job = None
    lost = threading.Event()

    def finished(fut) -> None:
        if fut.cancelled():
            send(Done([]))
            return
        exc = fut.exception()
        if exc is None:
            send(Done(fut.result()))
        elif isinstance(exc, DeviceLost):
            send(Lost(str(exc), exc.record))
            lost.set()
        else:
            send(Failed("".join(traceback.format_exception_only(type(exc), exc)).strip()))

    while not lost.is_set():
        try:
            if not cmd_conn.poll(0.2):
                continue
            msg: Command = cmd_conn.recv()
        except (EOFError, OSError):
            break                                       # the parent went away
        match msg:
            case OpenDevice(backend, device):
                try:
                    info, versions = engine.open_device(backend, device).result()
                    send(Opened(info, versions, HOST))
                except Exception as exc:  # noqa: BLE001  (BackendError: the reason, verbatim)
                    send(Failed(str(exc)))
            case RunTask(plan):
                job = engine.submit(plan, lambda ev: send(EventMessage(ev)))
                job.future.add_done_callback(finished)
            case Cancel():
                if job is not None:
                    job.cancel()
            case SetThreads(count):
                cpus.set_thread_budget(count)
            case Shutdown():
                break
    if lost.is_set():
        # The context is unusable: closing it may fail or hang, and the parent starts a
        # new process anyway. End now.
        os._exit(EXIT_DEVICE_LOST)
    ok = engine.shutdown(10.0)
    if not ok:
        os._exit(0)   # a kernel that never returns: leave without waiting for it


class ProcessEngine(RemoteEngine):
    """A device's engine in a ``spawn``-ed child process.

    Parameters
    ----------
    backend, device
        What the child opens.
    preload
        Modules the child imports before it starts (e.g. ones that register kernels).
    cpu_threads
        CPU threads the child may keep busy (BLAS pools, PoCL, nvcc builds): see
        :func:`engine.common.cpus.engine_threads`. None: every core. May be changed between
        runs (the child is told before the next one).
    """

    def __init__(self, backend: str, device: int = 0, preload: tuple[str, ...] = (),
                 cpu_threads: int | None = None):
        super().__init__(backend, device)
        self.preload = tuple(preload)
        self.cpu_threads = cpu_threads
        self._threads_sent: int | None = None
        self.proc = None
        self._cmd = None
        self._evt = None
        #: How many times this device's engine was started (1 + restarts).
        self.starts = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def _start(self) -> None:
        self._cleanup()
        ctx = mp.get_context("spawn")
        cmd_r, cmd_w = ctx.Pipe(duplex=False)
        evt_r, evt_w = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=child_main, args=(cmd_r, evt_w, self.preload, self.cpu_threads),
                           name=f"matmul-lab engine {self.label}", daemon=True)
        self._threads_sent = self.cpu_threads
        proc.start()
        cmd_r.close()
        evt_w.close()
        self.proc, self._cmd, self._evt = proc, cmd_w, evt_r
        self.starts += 1

    def run(self, plan, emit, cancel):
        if self.alive() and self.cpu_threads and self.cpu_threads != self._threads_sent:
            self._send(SetThreads(self.cpu_threads))   # more or fewer engines than before
            self._threads_sent = self.cpu_threads
        return super().run(plan, emit, cancel)

    def _send(self, msg: Command) -> None:
        if self._cmd is None:
            raise EngineLost(f"{self.label}: the engine is not running")
        try:
            self._cmd.send(msg)
        except (OSError, ValueError) as exc:
            raise EngineLost(self._death_reason() or f"{self.label}: {exc}") from None

    def _receive(self, timeout: float) -> Reply | None:
        if self._evt is None or self.proc is None:
            raise EngineLost(f"{self.label}: the engine is not running")
        ready = wait([self._evt, self.proc.sentinel], timeout)
        if self._evt in ready:
            try:
                return self._evt.recv()
            except (EOFError, OSError):
                pass                                   # the child ended: say how below
        elif not ready:
            return None
        self.proc.join(1.0)
        raise EngineLost(self._death_reason() or f"{self.label}: the engine process ended")

    def _death_reason(self) -> str:
        if self.proc is None or self.proc.exitcode is None:
            return ""
        code = self.proc.exitcode
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the engine process was killed ({name})"
        return f"the engine process exited with status {code}"

    def kill(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5.0)
        self._cleanup()

    def _cleanup(self) -> None:
        for conn in (self._cmd, self._evt):
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass
        self._cmd = self._evt = None
        if self.proc is not None and not self.proc.is_alive():
            self.proc = None

    def close(self, timeout: float = 10.0) -> bool:
        ok = super().close(timeout)
        if self.proc is not None:
            self.proc.join(1.0)
        self._cleanup()
        return ok
