"""Engines on a Ray cluster: one Ray actor per GPU (``num_gpus=1``), as Kernel Tuner's
parallel runner does, or one per worker slot for the cpu and opencl backends.

Ray is optional (``pip install -r requirements-cluster.txt``): nothing here imports it
until a cluster is asked for, and :func:`ray_status` says why it cannot be used.

* :class:`RayEngine` is a :class:`~engine.run.engines.RemoteEngine` whose engine lives in a
  Ray actor (:class:`_EngineActor`). The actor hosts an :class:`~engine.run.worker.EngineThread`
  that opens the device and owns its context on a thread of its own; the actor's methods
  only relay. Commands (``open``, ``run``, ``cancel``) are short actor calls; the sweep's
  events go into a queue inside the actor, and the handle keeps one ``poll`` call in
  flight that returns them in batches as soon as there are any, so they stream back live.
  The actor runs several calls at once (``max_concurrency``), so a cancel reaches it while
  a sweep is running. An actor that dies (its process or node gone, ``ray.kill``) fails the
  pending ``poll``: the handle raises :class:`~engine.run.engines.EngineLost` with the item in
  flight, and :mod:`engine.run.dispatch` records that item as an error, puts the rest of its
  task back in the queue and restarts the engine: a new actor wherever Ray can place one,
  or, when none can be placed within :data:`RESTART_PLACE_TIMEOUT_S`, the engine leaves
  the run and the other workers finish its items.
* Resources: a GPU engine (``cuda``) asks for ``num_gpus=1``; Ray sets the actor's
  ``CUDA_VISIBLE_DEVICES``, so it opens device 0 and its records carry the GPU's own index.
  A cpu or opencl engine asks for ``num_cpus=1`` and one unit of the custom resource
  :data:`SLOT` (``matmul_lab_slot``): start each worker node with
  ``ray start --address HEAD --resources '{"matmul_lab_slot": 1}'`` to get one engine per
  node (more units: more engines on that node).
* :func:`ray_engines` connects (``"local"`` starts a small cluster on this machine for a
  try-out: a head and two worker nodes of one slot each, so two engines) and returns one
  engine per GPU, or per slot, of the cluster.

The code travels with the job (Ray's ``runtime_env`` ``working_dir``: this checkout less
its large folders); the workers need the Python packages of ``requirements.txt`` (and
``requirements-cuda.txt`` for GPUs) installed.
"""
from __future__ import annotations

import atexit
import dataclasses
import enum
import importlib
import os
import queue
import re
import socket
import threading
import time
import traceback
from collections import deque
from pathlib import Path

from engine.measure.backends.base import DeviceLost
from engine.run.engines import EngineLost, RemoteEngine
from engine.run.messages import (Cancel, Command, Done, EventMessage, Failed, Lost, OpenDevice,
                                 Opened, Reply, RunTask, Shutdown)
from engine.results.records import RecordStatus, ResultRecord
from engine.run.runner import HOST, CancelToken, Emit, Event, Plan, make_record

#: The custom resource a cpu or opencl engine takes: one engine per unit.
SLOT = "matmul_lab_slot"
#: Backends that get one actor per GPU (``num_gpus=1``).
GPU_BACKENDS = ("cuda",)
#: How long a new engine may wait for Ray to place its actor (a free GPU or slot).
PLACE_TIMEOUT_S = 120.0
#: The same after a worker was lost: sooner than that, the engine leaves the run.
RESTART_PLACE_TIMEOUT_S = 15.0
#: Longest a command (an actor call that only queues work) may take to be answered.
COMMAND_TIMEOUT_S = 60.0
#: How long one ``poll`` call waits inside the actor for the first message.
POLL_WAIT_S = 0.5
#: How long connecting to a ``host:port`` address may take before it is given up.
CONNECT_TIMEOUT_S = 10.0
#: Folders of the checkout that the workers do not need (Ray's ``runtime_env`` excludes).
EXCLUDES = [".git", ".gpu", ".whl", ".benchmarks", "benchmarks", "assets", "out",
            "**/__pycache__", "*.pyc", ".pytest_cache"]
#: Where the code is: the checkout holding this package.
ROOT = Path(__file__).resolve().parents[2]

INSTALL_HINT = "pip install -r requirements-cluster.txt"


class ClusterError(RuntimeError):
    """The cluster cannot be used: Ray missing, no connection, no GPU or slot to run on."""


def ray_status() -> tuple[bool, str]:
    """Whether Ray can be used here: ``(True, "ray 2.x")`` or ``(False, why not)``.

    Asks the installed packages, without importing Ray: importing it takes seconds and
    holds the interpreter, which a window probing its backends cannot afford. A broken
    install shows when a cluster is used (:func:`_ray` says what broke).
    """
    import importlib.metadata  # noqa: PLC0415
    import importlib.util  # noqa: PLC0415

    try:
        found = importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return False, f"Ray is not installed ({INSTALL_HINT})"
    try:
        return True, f"ray {importlib.metadata.version('ray')}"
    except importlib.metadata.PackageNotFoundError:
        return True, "ray (version unknown)"


#: Ray's own C++ log level unless the user chose one: its warnings ("Failed to connect to
#: GCS", retried every few seconds) would come before, and bury, the app's one message.
RAY_LOG_LEVEL = "error"


def _ray():
    ok, why = ray_status()
    if not ok:
        raise ClusterError(why)
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", RAY_LOG_LEVEL)
    try:
        import ray  # noqa: PLC0415
    except Exception as exc:  # noqa: BLE001  (a broken install: say what broke)
        raise ClusterError(f"Ray cannot be imported: {type(exc).__name__}: {exc} "
                           f"({INSTALL_HINT})") from None
    return ray


# --- the actor ----------------------------------------------------------------------------

class _EngineActor:
    """Runs inside a Ray worker process: an EngineThread and a queue of messages for the
    handle. Its methods return at once (``poll`` after at most ``max_wait``)."""

    def __init__(self, preload: tuple[str, ...] = ()):
        import ray  # noqa: PLC0415
        from engine.run.worker import EngineThread  # noqa: PLC0415

        ctx = ray.get_runtime_context()
        self.node_id = ctx.get_node_id() or ""
        self.pid = os.getpid()
        gpus = []
        try:
            gpus = [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])]
        except Exception:  # noqa: BLE001  (older Ray: no accelerator ids)
            pass
        #: The GPU's index on its host (Ray's id), which records carry instead of 0.
        self.gpu = int(gpus[0]) if len(gpus) == 1 and gpus[0].isdigit() else None
        self.gpus = gpus
        self.worker = f"ray {self.node_id[:8]}/{self.pid}"
        self._q: queue.Queue = queue.Queue()
        self._job = None
        for name in preload:
            try:
                importlib.import_module(name)
            except Exception as exc:  # noqa: BLE001
                self._q.put(Failed(f"preloading {name} failed: {exc}"))
        self.engine = EngineThread(name="engine", worker=self.worker, restartable=True).start()

    def where(self) -> dict:
        """Where this engine runs (also: the actor is placed and ready)."""
        try:
            import ray  # noqa: PLC0415
            ip = ray.util.get_node_ip_address()
        except Exception:  # noqa: BLE001
            ip = ""
        return {"node": self.node_id, "pid": self.pid, "host": HOST, "ip": ip,
                "gpus": self.gpus, "worker": self.worker}

    # records and device infos: the GPU's host index instead of the visible index 0
    def _fix_record(self, rec):
        if rec is None or self.gpu is None:
            return rec
        return dataclasses.replace(rec, device_index=self.gpu)

    def _fix_event(self, ev: Event) -> Event:
        if self.gpu is None:
            return ev
        changes = {}
        if ev.record is not None:
            changes["record"] = self._fix_record(ev.record)
        if ev.records is not None:
            changes["records"] = [self._fix_record(r) for r in ev.records]
        if ev.device is not None:
            changes["device"] = dataclasses.replace(ev.device, index=self.gpu)
        return dataclasses.replace(ev, **changes) if changes else ev

    def command(self, msg: Command) -> None:
        """A command (engine.run.messages), queued or done at once; what follows comes
        back through :meth:`poll`."""
        match msg:
            case OpenDevice(backend, device):
                fut = self.engine.open_device(backend, device)
                fut.add_done_callback(self._opened)
            case RunTask(plan):
                job = self.engine.submit(plan, lambda ev: self._q.put(EventMessage(self._fix_event(ev))))
                self._job = job
                job.future.add_done_callback(self._finished)
            case Cancel():
                if self._job is not None:
                    self._job.cancel()
            case Shutdown():
                self.stop()

    def _opened(self, fut) -> None:
        exc = fut.exception()
        if exc is not None:     # BackendError: the reason, verbatim
            self._q.put(Failed(str(exc)))
            return
        info, versions = fut.result()
        if self.gpu is not None:
            info = dataclasses.replace(info, index=self.gpu)
        self._q.put(Opened(info, versions, HOST))

    def _finished(self, fut) -> None:
        if fut.cancelled():
            self._q.put(Done([]))
            return
        exc = fut.exception()
        if exc is None:
            self._q.put(Done([self._fix_record(r) for r in fut.result()]))
        elif isinstance(exc, DeviceLost):
            # The context is unusable: the handle restarts the engine as a new actor.
            self._q.put(Lost(str(exc), self._fix_record(exc.record)))
        else:
            self._q.put(Failed("".join(traceback.format_exception_only(type(exc), exc)).strip()))

    def poll(self, max_wait: float) -> list[Reply]:
        """The messages queued so far; waits up to ``max_wait`` s for the first one."""
        try:
            out = [self._q.get(timeout=max_wait)]
        except queue.Empty:
            return []
        while len(out) < 256:
            try:
                out.append(self._q.get_nowait())
            except queue.Empty:
                break
        return out

    def stop(self, timeout: float = 10.0) -> bool:
        """Cancel what runs and close the backend on its own thread (the CUDA context is
        popped where it was made); True when the engine thread ended."""
        return self.engine.shutdown(timeout)


# --- the handle ---------------------------------------------------------------------------

class RayEngine(RemoteEngine):
    """One engine in a Ray actor (see the module docstring).

    Parameters
    ----------
    backend
        What the actor opens; ``cuda`` takes one GPU (``num_gpus=1``), ``cpu`` and
        ``opencl`` one :data:`SLOT`.
    device
        Device index inside the actor: 0 for a GPU (the one Ray gave it); for opencl the
        platform's device index on the worker node.
    slot
        This engine's number among the cluster's engines (its label before it starts).
    preload
        Modules the actor imports first (e.g. ones that register kernels).
    """

    def __init__(self, backend: str, device: int = 0, slot: int = 0,
                 preload: tuple[str, ...] = (), place_timeout_s: float = PLACE_TIMEOUT_S,
                 restart_timeout_s: float = RESTART_PLACE_TIMEOUT_S):
        super().__init__(backend, device)
        self.slot = slot
        self.preload = tuple(preload)
        #: How long a start, and a restart after a lost worker, wait for a GPU or slot.
        self.place_timeout_s = place_timeout_s
        self.restart_timeout_s = restart_timeout_s
        self.actor = None
        #: ``where()`` of the running actor: node id, pid, host, ip, GPU ids.
        self.where: dict = {}
        #: The records' ``worker`` of the running actor (``ray <node>/<pid>``).
        self.worker = ""
        #: How many actors this engine started (1 + restarts).
        self.starts = 0
        self._poll_ref = None
        self._buffer: deque = deque()

    @property
    def label(self) -> str:
        if self.where:
            return f"{self.backend}@{self.where['node'][:8]}/{self.where['pid']}"
        return f"{self.backend}@ray#{self.slot}"

    def _options(self) -> dict:
        opts = {"max_concurrency": 4, "max_restarts": 0, "max_task_retries": 0}
        if self.backend in GPU_BACKENDS:
            opts["num_gpus"] = 1
        else:
            opts["num_cpus"] = 1
            opts["resources"] = {SLOT: 1}
        return opts

    def alive(self) -> bool:
        return self.actor is not None

    def _start(self) -> None:
        ray = _ray()
        self.kill()
        actor = ray.remote(_EngineActor).options(**self._options()).remote(self.preload)
        try:
            where = ray.get(actor.where.remote(), timeout=self.place_timeout_s)
        except ray.exceptions.GetTimeoutError:
            _kill_quietly(ray, actor)
            need = "GPU" if self.backend in GPU_BACKENDS else f"'{SLOT}' slot"
            raise EngineLost(f"{self.label}: no ray worker with a free {need} took the engine "
                             f"within {self.place_timeout_s:.0f} s") from None
        except ray.exceptions.RayError as exc:
            _kill_quietly(ray, actor)
            raise EngineLost(f"{self.label}: the ray actor did not start: "
                             f"{_short(exc)}") from None
        self.actor, self.where, self.worker = actor, where, where["worker"]
        self.host = where.get("host", "")
        self.starts += 1

    def _node_text(self) -> str:
        w = self.where
        if not w:
            return "ray worker lost"
        return (f"ray worker on node {w['node'][:8]} ({w.get('host') or w.get('ip')}, "
                f"pid {w['pid']}) lost")

    def _lost(self, exc: Exception) -> EngineLost:
        """The actor (or its node) is gone: say which, and forget it (the run loop adds
        the item in flight)."""
        reason = f"{self._node_text()}: {_short(exc)}"
        self.kill()         # an actor only unreachable for now would still hold its slot
        return EngineLost(reason)

    def _send(self, msg: Command) -> None:
        ray = _ray()
        if self.actor is None:
            raise EngineLost(f"{self.label}: the engine is not running")
        try:
            ray.get(self.actor.command.remote(msg), timeout=COMMAND_TIMEOUT_S)
        except ray.exceptions.GetTimeoutError:
            self.kill()
            raise EngineLost(f"{self._node_text()}: no answer within {COMMAND_TIMEOUT_S:.0f} s",
                             item=self.in_flight) from None
        except ray.exceptions.RayError as exc:
            raise self._lost(exc) from None

    def _receive(self, timeout: float) -> Reply | None:
        if not self._buffer:
            self._fetch(timeout)
        return self._buffer.popleft() if self._buffer else None

    def _fetch(self, timeout: float) -> None:
        """One ``poll`` call stays in flight between calls: its messages are never dropped."""
        ray = _ray()
        if self.actor is None:
            raise EngineLost(f"{self.label}: the engine is not running")
        if self._poll_ref is None:
            self._poll_ref = self.actor.poll.remote(POLL_WAIT_S)
        ready, _ = ray.wait([self._poll_ref], timeout=max(timeout, 0.0))
        if not ready:
            return
        ref, self._poll_ref = self._poll_ref, None
        try:
            self._buffer.extend(ray.get(ref))
        except ray.exceptions.RayError as exc:
            raise self._lost(exc) from None

    def run(self, plan: Plan, emit: Emit, cancel: CancelToken) -> list[ResultRecord]:
        try:
            return super().run(plan, emit, cancel)
        except EngineLost as lost:
            # The item in flight is recorded as this worker's (the run adds the reason).
            if lost.record is None and lost.item is not None and self.info is not None:
                name, params, shape = lost.item
                rec = make_record(plan, self.info, self.versions, name, params, tuple(shape),
                                  worker=self.worker or self.label)
                rec.host = self.host or rec.host
                rec.status, rec.error = RecordStatus.ERROR, lost.reason
                lost.record = rec
            raise

    def restart(self):
        """A new actor wherever Ray can place one, soon, or EngineLost (the engine leaves
        the run; the other workers finish its items)."""
        self.kill()
        keep, self.place_timeout_s = self.place_timeout_s, self.restart_timeout_s
        try:
            return self.open()
        finally:
            self.place_timeout_s = keep

    def kill(self) -> None:
        actor = self.actor
        self._drop()
        if actor is not None:
            try:
                import ray  # noqa: PLC0415
                _kill_quietly(ray, actor)
            except ImportError:
                pass

    def _drop(self) -> None:
        self.actor = None
        self._poll_ref = None
        self._buffer.clear()

    def close(self, timeout: float = 10.0) -> bool:
        """Close the backend inside the actor, then end the actor (its GPU or slot is
        free again)."""
        if self.actor is None:
            return True
        ok = False
        try:
            ray = _ray()
            ok = bool(ray.get(self.actor.stop.remote(timeout), timeout=timeout + 5.0))
        except Exception:  # noqa: BLE001  (gone already, or stuck: it is killed below)
            ok = False
        self.kill()
        return ok


def _kill_quietly(ray, actor) -> None:
    try:
        ray.kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001  (dead already)
        pass


def _short(exc: BaseException) -> str:
    """Ray's error texts run over many lines; the line that says why (and, for an actor
    whose start failed, the exception it raised)."""
    lines = [ln.strip() for ln in re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines()
             if ln.strip()]
    why = next((ln for ln in reversed(lines)
                if ln.startswith(("The actor is dead because", "The actor died because"))), None)
    if why is not None and "creation task" in why:
        why = f"the actor failed to start: {lines[-1]}"
    elif why is None:
        why = lines[0] if lines else ""
    why = why.split(" The task may or may not")[0].rstrip(".")
    name = type(exc).__name__
    return f"{name}: {why}"[:400] if why else name


# --- connecting ---------------------------------------------------------------------------

_LOCAL = None           # the ray.cluster_utils.Cluster that "local" started
_CONNECTED: str | None = None
_CONNECT_LOCK = threading.Lock()
#: Worker nodes of the "local" try-out cluster, and the slots of each.
LOCAL_WORKERS = 2


def runtime_env() -> dict:
    """The job's code: this checkout (without its large folders) as the working dir."""
    return {"working_dir": str(ROOT), "excludes": list(EXCLUDES)}


def start_local(workers: int = LOCAL_WORKERS) -> str:
    """Start (once per process) a cluster on this machine: a head with this machine's GPUs,
    ``workers`` nodes of one CPU and one :data:`SLOT` each. Returns its address."""
    global _LOCAL
    _ray()
    if _LOCAL is None:
        if threading.current_thread() is threading.main_thread():
            _LOCAL = _make_local(workers)
        else:
            _LOCAL = _make_local_on_keeper_thread(workers)
        atexit.register(shutdown_local)
    return _LOCAL.address


def _make_local(workers: int):
    from ray.cluster_utils import Cluster  # noqa: PLC0415
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False})
    try:
        for _ in range(workers):
            cluster.add_node(num_cpus=1, num_gpus=0, resources={SLOT: 1})
    except BaseException:
        cluster.shutdown()
        raise
    return cluster


_KEEPER_STOP = threading.Event()


def _make_local_on_keeper_thread(workers: int):
    """Started from another thread (the GUI's workers): Ray starts the cluster's processes
    with PR_SET_PDEATHSIG, and Linux ends them when the *thread* that started them ends,
    so they are started from a thread that lives as long as the cluster. Ray's nodes also
    set a SIGTERM handler, which Python allows on the main thread only: they go without."""
    import ray._private.utils as ray_utils  # noqa: PLC0415
    box: dict = {}
    ready = threading.Event()

    def keeper():
        original = ray_utils.set_sigterm_handler
        ray_utils.set_sigterm_handler = lambda handler: None
        try:
            box["cluster"] = _make_local(workers)
        except BaseException as exc:  # noqa: BLE001  (handed to the caller)
            box["error"] = exc
        finally:
            ray_utils.set_sigterm_handler = original
            ready.set()
        if "cluster" in box:
            _KEEPER_STOP.wait()

    _KEEPER_STOP.clear()
    threading.Thread(target=keeper, name="ray-local-cluster", daemon=True).start()
    ready.wait()
    if "error" in box:
        raise box["error"]
    return box["cluster"]


def local_cluster():
    """The ``ray.cluster_utils.Cluster`` that :func:`start_local` started, or None (tests
    add and remove its worker nodes)."""
    return _LOCAL


def shutdown_local() -> None:
    """Disconnect and stop the cluster :func:`start_local` started (if any)."""
    global _LOCAL, _CONNECTED
    with _CONNECT_LOCK:
        if _LOCAL is None:
            return
        try:
            import ray  # noqa: PLC0415
            if ray.is_initialized():
                ray.shutdown()
        finally:
            _CONNECTED = None
            cluster, _LOCAL = _LOCAL, None
            try:
                cluster.shutdown()
            finally:
                _KEEPER_STOP.set()


class AddressKind(enum.Enum):
    LOCAL = "local"          # start_local's try-out cluster
    AUTO = "auto"            # the cluster this machine belongs to (RAY_ADDRESS, or found)
    HEAD = "host:port"       # the head node's GCS port
    CLIENT = "ray://"        # Ray Client's server on the head


@dataclasses.dataclass(frozen=True)
class RayAddress:
    """A ``--ray`` address, read: what it names and, for a head or a client server, where."""

    text: str
    kind: AddressKind
    host: str = ""
    port: int = 0


ADDRESS_FORMS = "local, auto, host:port (the head's port, 6379 by default) or ray://host:10001"


def parse_address(text: str) -> RayAddress:
    """Read a Ray address; ClusterError says what is wrong with it in words (ray.init's
    own "Invalid address format:" names neither the address nor the forms)."""
    from engine.common.terminal import visible  # noqa: PLC0415

    raw = text if isinstance(text, str) else ""
    address = raw.strip()
    shown = f"'{visible(raw)}'"
    if not address:
        raise ClusterError(f"the Ray address is empty; write {ADDRESS_FORMS}")
    if address.lower() in ("local", "auto"):
        return RayAddress(address.lower(), AddressKind(address.lower()))
    kind, rest = AddressKind.HEAD, address
    scheme, sep, after = address.partition("://")
    if sep:
        if scheme.lower() != "ray":
            raise ClusterError(f"{shown} is not a Ray address ({scheme}:// is not Ray's); "
                               f"write {ADDRESS_FORMS}")
        kind, rest = AddressKind.CLIENT, after.rstrip("/")
    host, colon, port_text = rest.rpartition(":")
    if not colon:
        raise ClusterError(f"{shown} is not a Ray address: the port is missing; write "
                           f"{ADDRESS_FORMS}")
    if host.startswith("[") and host.endswith("]"):      # [::1]:6379
        host = host[1:-1]
    if not host:
        raise ClusterError(f"{shown} is not a Ray address: the host name before the port is "
                           f"missing; write {ADDRESS_FORMS}")
    if any(ch.isspace() or ch in "/?#@[]" for ch in host) or ":" in host and \
            not rest.startswith("["):
        raise ClusterError(f"{shown} is not a Ray address: '{visible(host)}' is no host name; "
                           f"write {ADDRESS_FORMS}")
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise ClusterError(f"{shown} is not a Ray address: the port '{visible(port_text)}' is not "
                           f"a number from 1 to 65535; write {ADDRESS_FORMS}")
    return RayAddress(address, kind, host, int(port_text))


def connect(address: str) -> dict[str, float]:
    """Join the cluster at ``address`` (``"local"``: :func:`start_local`'s; ``"auto"``, a
    ``host:port`` of the head, or a ``ray://`` address); returns its resources. The address
    is read (:func:`parse_address`) and a head or client server is asked first whether it
    answers at all (:func:`_check_reachable`), before Ray is imported or joined."""
    global _CONNECTED
    parsed = parse_address(address)
    address = parsed.text
    if parsed.kind in (AddressKind.HEAD, AddressKind.CLIENT):
        _check_reachable(parsed)
    ray = _ray()
    with _CONNECT_LOCK:
        if address != _CONNECTED or not ray.is_initialized():
            target = start_local() if parsed.kind is AddressKind.LOCAL else address
            if ray.is_initialized():
                ray.shutdown()
            try:
                ray.init(address=target, runtime_env=runtime_env(), log_to_driver=False,
                         logging_level="error")
            except Exception as exc:  # noqa: BLE001  (ConnectionError, a bad address...)
                raise ClusterError(f"cannot join the Ray cluster at {address}: "
                                   f"{_join_error(exc)}") from None
            _CONNECTED = address
            if parsed.kind is AddressKind.LOCAL:
                _LOCAL.wait_for_nodes()
        return dict(ray.cluster_resources())


def _join_error(exc: BaseException) -> str:
    """Why ray.init failed, in the words a user acts on."""
    text = str(exc)
    if "ray[client]" in text:
        return ("a ray:// address needs Ray's client: pip install 'ray[client]' (or give the "
                "head's host:port)")
    if "Could not find any running Ray instance" in text:
        return "no Ray cluster runs on this machine (start one with ray start --head, or give its address)"
    return _short(exc)


#: The client preface of HTTP/2 and an empty SETTINGS frame: a gRPC server (Ray's GCS and
#: its client server) answers with a SETTINGS frame of its own.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
_H2_SETTINGS = 0x04


def _check_reachable(address: RayAddress) -> None:
    """A head or client server that nobody answers, or that is no Ray (gRPC) server: say
    so now (ray.init would keep retrying for minutes, logging each try)."""
    host = address.host
    try:
        with socket.create_connection((host, address.port), timeout=CONNECT_TIMEOUT_S) as sock:
            if os.environ.get("RAY_USE_TLS", "0") not in ("", "0"):
                return                    # a TLS server does not answer plain HTTP/2
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.sendall(_H2_PREFACE)
            head, deadline = b"", time.monotonic() + CONNECT_TIMEOUT_S
            while len(head) < 9 and time.monotonic() < deadline:
                chunk = sock.recv(9 - len(head))
                if not chunk:
                    break
                head += chunk
    except socket.timeout:
        head = b""
    except (OSError, OverflowError, UnicodeError) as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address.text}: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    if len(head) < 9 or head[3] != _H2_SETTINGS:
        what = "Ray's client server" if address.kind is AddressKind.CLIENT else "a Ray head"
        raise ClusterError(f"{address.text} answers, but not as {what} (no gRPC server there); "
                           f"check the port: {ADDRESS_FORMS}")


def ray_engines(address: str, backend: str, device: int = 0,
                preload: tuple[str, ...] = ()) -> list[RayEngine]:
    """One :class:`RayEngine` per GPU of the cluster at ``address`` (``cuda``) or per
    :data:`SLOT` (``cpu``, ``opencl``). Raises :class:`ClusterError` when there are none."""
    res = connect(address)
    if backend in GPU_BACKENDS:
        count = int(res.get("GPU", 0))
        if count == 0:
            raise ClusterError(f"the Ray cluster at {address} has no GPU")
        device = 0
    else:
        count = int(res.get(SLOT, 0))
        if count == 0:
            raise ClusterError(
                f"the Ray cluster at {address} has no '{SLOT}' resource for {backend} engines: "
                f"start each worker with ray start --resources '{{\"{SLOT}\": 1}}'")
    return [RayEngine(backend, device, slot=i, preload=preload) for i in range(count)]


class FreeWorkers:
    """Engines for the cluster's free GPUs (``cuda``) or :data:`SLOT` units: the ``joiners``
    of a share-mode run (:func:`engine.run.dispatch.start_run`), so that a worker node that
    joins the cluster mid-sweep takes part in it.

    A GPU or slot is free when no actor holds it (``ray.available_resources``): the run's
    own engines hold theirs, so what is free came with a new node, or was let go.
    """

    def __init__(self, backend: str, device: int = 0, preload: tuple[str, ...] = (),
                 first_slot: int = 0):
        self.backend, self.device, self.preload = backend, device, tuple(preload)
        self._next_slot = first_slot
        #: Every engine handed out (the caller closes them with its own at the end).
        self.made: list[RayEngine] = []

    def __call__(self) -> list[RayEngine]:
        ray = _ray()
        if not ray.is_initialized():
            return []
        key = "GPU" if self.backend in GPU_BACKENDS else SLOT
        free = int(ray.available_resources().get(key, 0.0) + 1e-9)
        made = [RayEngine(self.backend, 0 if self.backend in GPU_BACKENDS else self.device,
                          slot=self._next_slot + i, preload=self.preload) for i in range(free)]
        self._next_slot += free
        self.made.extend(made)
        return made


__all__ = ["SLOT", "ClusterError", "FreeWorkers", "RayEngine", "connect", "ray_engines",
           "ray_status", "shutdown_local", "start_local"]

