"""A run over one or several engines: the run lifecycle in one place.

:func:`start_run` takes a :class:`~engine.run.runner.Plan` and engine handles (one per device:
:class:`~engine.run.engines.LocalEngine`, :class:`~engine.run.process.ProcessEngine`,
:class:`~engine.run.cluster.RayEngine`) and runs it in one of two modes:

* ``compare``: every device runs every item; records carry their device, so charts and
  tables show the devices side by side;
* ``share``: the items (and autotune candidates) are split into tasks that idle devices
  pull from one queue; the result is the one table, sooner.

In ``share`` mode, engines may also join a run in progress: given ``joiners`` (a callable
that returns engines for devices that became free, e.g. a worker node that joined the
Ray cluster), the run asks it every :data:`JOIN_POLL_S` seconds, opens what it returns,
and the new engines take tasks from the queue like the others (the plan is then cut
into one task per item and input set, so there is work left to take).

It emits the same events as a single sweep (``started``, ``progress``, ``log``,
``result``, ``finished``) from its own thread, counting over all devices. When an engine
is lost (crash, sticky CUDA error, a launch past its timeout, a cluster worker gone), the
item in flight is recorded with status ``error`` and the reason, the engine is restarted,
and the rest of its task goes back to the queue; nothing measured is lost and nothing is
counted twice. An engine that dies before a task's first item (nothing in flight to
blame) gets :data:`EARLY_DEATHS_MAX` tries at it; then the task's items fail with the
reason. A build past the time limit (:class:`~engine.run.engines.BuildTimedOut`) fails its
item, and the run's later tasks record that build without trying it again.

The kernel files are read once, when the run starts (:meth:`Plan.with_sources
<engine.run.runner.Plan.with_sources>`): every engine gets those texts with its tasks.

A share run over several devices keeps one honest table: the lines other records are
compared with (the ``reference`` and ``baseline`` roles: cuBLAS, naive) run on every
device that runs items of their shape, so every ratio is of a line timed on the record's
own device; over devices of one model the records carry a ``share_group`` (one lab best,
engine.results.derived.table_key), over different models the run says their lab bests
stay apart. Tasks go out longest expected first (:func:`expected_item_s`), and the run's
:class:`~engine.run.timeline.Timeline` keeps what each engine did when.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable, Sequence

from engine.common import cpus
from engine.inputs import matrices
from engine.measure import build_cache
from engine.run.autotune import run_autotuned
from engine.measure.backends.base import BackendError
from engine.run.engines import BuildTimedOut, EngineHandle, EngineLost
from engine.results.records import RecordStatus, ResultRecord
from engine.run.events import EventKind, LogLevel
from engine.kernels import registry
from engine.run.runner import (CancelToken, Emit, Event, FailedBuild, Plan, build_jobs,
                               final_records, fitting_count, input_sets, make_record)
from engine.run.timeline import Activity, Timeline

MODES = ("compare", "share")
#: How often a share-mode run asks its ``joiners`` for new engines.
JOIN_POLL_S = 2.0
#: After an engine that offered to join could not open, the next ask waits this long.
JOIN_RETRY_S = 20.0
#: Times a task may see its engine die before its first item (a memory-limited container
#: killing the engine while it sets up) before the task fails instead of being retried.
EARLY_DEATHS_MAX = 3

#: Engines that can join a run now (devices that became free); [] when none.
Joiners = Callable[[], list[EngineHandle]]

#: Roles of the lines other records' ratios are of (% of cuBLAS, speed-up over naive):
#: a share run times them on every device that runs their shape.
LINE_ROLES = ("reference", "baseline")
#: Share of the device's peak an item's launches are assumed to reach when the tasks are
#: ordered (only the order matters: the baseline, naive, is far slower than the others).
ASSUMED_SHARE_OF_PEAK = {"baseline": 0.02}
DEFAULT_SHARE_OF_PEAK = 0.4
#: Peak GFLOP/s assumed for ordering where the device's is unknown (a CPU driver).
UNKNOWN_PEAK_GFLOPS = 100.0
#: Seconds an item costs besides its launches (build from cache, checks, its record).
ITEM_OVERHEAD_S = 0.05
#: A share run cuts each shape's items in this many pieces per engine: the last pieces are
#: short, so that no engine waits long for another at the end.
PIECES_PER_ENGINE = 3


def compile_ahead(plan: Plan, devices: Sequence) -> threading.Thread | None:
    """Start building, on a thread of this process, every CUDA kernel of ``plan`` that the
    lab's own files give (for each distinct architecture among ``devices``, DeviceInfo),
    into the disk cache the engines read (engine.measure.build_cache): while the first
    tasks are timed, the later tasks' kernels are built, and an engine that needs one being
    built here waits for it instead of running nvcc again. Half the cores: the engines'
    own precompiles and the window keep theirs. None where there is nothing to gain (not
    cuda, no disk cache, no device description)."""
    if plan.backend != "cuda" or build_cache.BuildCache.from_env() is None:
        return None
    by_arch = {d.compute_capability: d for d in devices
               if d is not None and d.compute_capability}
    if not by_arch:
        return None
    shapes = plan.input_shapes()
    items = [(n, p) for n, p in plan.items if n in registry.REGISTRY]   # a user's: the engines'

    def lab_file(v) -> bool:
        return (not v.library and not v.is_triton and "cuda" in v.sources
                and registry.is_builtin_file(v.source_path("cuda")))

    def body() -> None:
        from engine.measure.backends.cuda import CudaBackend  # noqa: PLC0415  (needs no GPU to build)
        for device in by_arch.values():
            try:
                be = CudaBackend()
                major, _, minor = device.compute_capability.partition(".")
                be.arch, be.type_spec = f"sm_{major}{minor}", plan.type_spec
                jobs = [j for j in build_jobs(dataclasses.replace(plan, items=items), device, shapes)
                        if lab_file(j[0])]
                be.precompile(jobs, workers=max(1, cpus.usable_cpus() // 2))
            except Exception:  # noqa: BLE001  (only a head start: the engines build what is missing)
                continue

    if not items or not shapes:
        return None
    thread = threading.Thread(target=body, name="compile-ahead", daemon=True)
    thread.start()
    return thread


def is_line(name: str) -> bool:
    """A reference or baseline line (:data:`LINE_ROLES`)."""
    return registry.role_of(name) in LINE_ROLES


def expected_item_s(plan: Plan, name: str, params, shape, peak_gflops: float | None) -> float:
    """Rough seconds one item takes on a device of ``peak_gflops``: its launches (verify,
    warm-up, timed, re-checks) at an assumed share of the peak, or the time budget."""
    v = registry.get(name)
    m, n, k = shape
    flops = v.flops(m, v.effective_n(m, n), k)
    share = ASSUMED_SHARE_OF_PEAK.get(v.role, DEFAULT_SHARE_OF_PEAK)
    launch_s = flops / (max(peak_gflops or UNKNOWN_PEAK_GFLOPS, 1e-3) * 1e9 * share)
    if plan.until_noise is not None:
        timed_s = max(plan.until_noise.min_s, 3 * launch_s)
    elif plan.time_budget_s is not None:
        timed_s = max(plan.time_budget_s, 3 * launch_s)
    else:
        timed_s = plan.repeats * launch_s
    return ITEM_OVERHEAD_S + (plan.warmup + 3) * launch_s + timed_s


@dataclass
class Task:
    """A piece of a plan for one engine: some items at one input set."""

    plan: Plan
    #: Position of the task's shape and items in the whole plan, to order the final table.
    order: tuple[int, int]
    #: Engine deaths so far before the task's first item (each one restarts the engine).
    early_deaths: int = 0
    #: The reference and baseline items of the task's shape, run first by a device that has
    #: not run them at that shape (a share run: every ratio of its own device's lines).
    lines: tuple = ()
    #: Seconds the task is expected to take (:func:`expected_item_s`): longest first.
    expected_s: float = 0.0


def _guided_chunks(ranked: list[int], cost: dict[int, float], pieces: int) -> list[list[int]]:
    """``ranked`` (costliest first) cut in chunks for ``pieces``: one chunk where pieces is
    1; else each chunk takes items until it holds about 1/pieces of the expected cost still
    left (at least one item), so chunks shrink as the shape's work runs out and its last ones
    are single items. Engines pull chunks as they finish: an estimate that is off (a naive
    rung far under the assumed share of the peak) costs at most one short chunk at the end,
    where equal chunks left one engine with a long one while the other idled."""
    if pieces <= 1:
        return [list(ranked)]
    out, left = [], sum(cost[i] for i in ranked)
    start = 0
    while start < len(ranked):
        target, got, end = left / pieces, 0.0, start
        # an item joins while at least half of it fits under the target
        while end < len(ranked) and (end == start or got + cost[ranked[end]] / 2 <= target):
            got += cost[ranked[end]]
            end += 1
        out.append(ranked[start:end])
        left -= got
        start = end
    return out


def split_plan(plan: Plan, pieces: int, lines_apart: bool = False,
               peak_gflops: float | None = None) -> list[Task]:
    """One task per shape (or per loaded matrix pair), its items cut in about ``pieces``
    chunks so several devices can share one shape's items.

    With several pieces, each shape's costliest items go in its first chunks, chunks shrink
    as the shape's expected work runs out (:func:`_guided_chunks`), and the tasks come
    longest expected first (the shortest last: the engines finish together).
    ``lines_apart``: the shape's reference and baseline lines are no chunk's items but
    every chunk's :attr:`Task.lines`."""
    sets = [None] if plan.matrices is not None else list(plan.shapes)
    tasks = []
    for si, shape in enumerate(sets):
        # only_fitting: the items that do not fit the shape make no task (no record)
        at = plan.input_shapes()[0] if shape is None else shape
        items = plan.items_at(at)
        lines = [it for it in items if is_line(it[0])] if lines_apart else []
        rest = [it for it in items if not is_line(it[0])] if lines else items
        if not rest:        # only lines at this shape: a task like any other
            rest, lines = items, []
        cost = {i: expected_item_s(plan, n, p, at, peak_gflops) for i, (n, p) in enumerate(rest)}
        ranked = sorted(cost, key=lambda i: -cost[i]) if pieces > 1 else list(cost)
        for chunk in _guided_chunks(ranked, cost, pieces):
            chunk = sorted(chunk)                           # the plan's order within a chunk
            sub = dataclasses.replace(plan, items=[rest[i] for i in chunk],
                                      shapes=[] if shape is None else [shape], autotune=False,
                                      retune=False)
            tasks.append(Task(sub, (si, chunk[0]), lines=tuple(lines),
                              expected_s=sum(cost[i] for i in chunk)))
    if pieces > 1:
        tasks.sort(key=lambda t: -t.expected_s)     # stable: a shape's chunks stay in order
    return tasks


class Run:
    """A started run: cancel it, wait for its records, or ask whether it is done."""

    def __init__(self):
        self.cancel_token = CancelToken()
        self.future: Future[list[ResultRecord]] = Future()
        self.thread: threading.Thread | None = None
        #: What each engine did when (filled while the run goes on).
        self.timeline = Timeline()

    def cancel(self) -> None:
        self.cancel_token.cancel()

    def result(self, timeout: float | None = None) -> list[ResultRecord]:
        return self.future.result(timeout)

    def done(self) -> bool:
        return self.future.done()


class Dispatcher:
    """Runs one plan over ``engines`` (see the module docstring); use :func:`start_run`."""

    def __init__(self, plan: Plan, engines: Sequence[EngineHandle], emit: Emit,
                 mode: str = "compare", run: Run | None = None, joiners: Joiners | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not '{mode}'")
        if not engines:
            raise ValueError("no engines to run on")
        wrong = [e.label for e in engines if e.backend != plan.backend]
        if wrong:
            raise ValueError(f"engines {', '.join(wrong)} do not run the {plan.backend} backend")
        self.plan, self.engines, self.mode = plan, list(engines), mode
        #: Where engines that join mid-run come from (share mode only).
        self.joiners = joiners if mode == "share" else None
        self.run_handle = run or Run()
        self.cancel = self.run_handle.cancel_token
        self._emit_lock = threading.Lock()
        self._user_emit = emit
        self._done = 0
        self._total = 0
        self._t0 = time.perf_counter()
        self._results: list[tuple[tuple, int, ResultRecord]] = []
        #: What each engine did when (engine.run.timeline); the run's handle shows it too.
        self.timeline = self.run_handle.timeline
        #: A share run over devices of one model: its records' share_group, and that model.
        self._share_group = ""
        self._share_model = ""
        self._live: list[EngineHandle] = []
        #: Builds whose engine was ended past the build time limit: later tasks record
        #: them instead of building them again (each try would cost the whole limit).
        self._failed_builds: dict[tuple, FailedBuild] = {}

    # --- events --------------------------------------------------------------------

    def _emit(self, ev: Event) -> None:
        with self._emit_lock:
            self._user_emit(ev)

    def _tag(self, engine: EngineHandle) -> str:
        return f"[{engine.label}] " if len(self.engines) > 1 else ""

    def _forward(self, engine: EngineHandle, order: tuple, got: list[ResultRecord]) -> Emit:
        """Events of one engine's task, re-counted over the whole run."""
        tag = self._tag(engine)
        eng_index = self.engines.index(engine)

        def inner(ev: Event) -> None:
            if self._timed(engine, ev):
                return
            if ev.kind == EventKind.RESULT and ev.record is not None:
                got.append(ev.record)
                self._add_result(order, eng_index, ev.record)
            elif ev.kind == EventKind.PROGRESS:
                with self._emit_lock:
                    done, total = self._done, self._total
                elapsed = time.perf_counter() - self._t0
                eta = elapsed / done * (total - done) if done else None
                current = tag + (ev.current or ev.message)
                self._emit(Event(EventKind.PROGRESS, current, done=done, total=total, current=current,
                                 eta_s=eta, item=ev.item))
            elif ev.kind == EventKind.LOG:
                self._emit(dataclasses.replace(ev, message=tag + ev.message))
        return inner

    def _timed(self, engine: EngineHandle, ev: Event) -> bool:
        """Puts an engine's phase (and an item's end) on the timeline; True for a phase
        event, which goes no further."""
        if ev.kind == EventKind.PHASE:
            what = ""
            if ev.item is not None:
                name, params, (m, n, k) = ev.item
                v = registry.REGISTRY.get(name)
                what = f"{v.label(params) if v is not None else name} @ {m}×{n}×{k}"
            self.timeline.begin(self._lane(engine), Activity(ev.message), what)
            return True
        if ev.kind == EventKind.RESULT:
            self.timeline.end(self._lane(engine))
        return False

    def _lane(self, engine: EngineHandle) -> str:
        """The engine's row in the timeline: its label, numbered where two engines share it."""
        same = [e for e in self.engines if e.label == engine.label]
        return engine.label if len(same) < 2 else f"{engine.label}/{same.index(engine) + 1}"

    def _add_result(self, order: tuple, eng_index: int, rec: ResultRecord) -> None:
        if self._share_group and rec.device == self._share_model and not rec.share_group:
            rec.share_group = self._share_group     # before anyone sees it
        with self._emit_lock:
            self._results.append((order, eng_index, rec))
            self._done += 1
            self._user_emit(Event(EventKind.RESULT, record=rec, done=self._done, total=self._total))

    # --- the run ---------------------------------------------------------------------

    def run(self) -> list[ResultRecord]:
        # The kernel files are read here, once: every engine (a restarted one too) registers
        # and builds these texts, whatever happens to the files during the run.
        plan = self.plan = self.plan.with_sources()
        try:
            plan.validate()
            if plan.a_path is not None:      # read the files once, here, not in every engine
                a, b = matrices.load_pair(plan.a_path, plan.b_path, plan.dtype)
                plan = self.plan = dataclasses.replace(plan, matrices=(a, b), a_path=None,
                                                       b_path=None)
            if plan.autotune and not plan.shapes:
                raise ValueError("autotune needs sizes (not loaded matrices)")
        except (ValueError, KeyError, matrices.MatrixInputError) as exc:
            msg = str(exc.args[0]) if isinstance(exc, KeyError) else str(exc)
            self._emit(Event(EventKind.LOG, msg, level=LogLevel.ERROR))
            self._emit(Event(EventKind.FINISHED, msg))
            return []
        infos = self._open_all()
        if not self._live:
            msg = "; ".join(infos) or "no engine could start"
            self._emit(Event(EventKind.FINISHED, msg))
            return []
        devices = [e.info for e in self._live]
        if self.mode == "share":
            self._one_table()
        per_device = fitting_count(plan)
        self._total = per_device * (len(self._live) if self.mode == "compare" else 1)
        where = (devices[0].name if len(devices) == 1
                 else f"{len(devices)} devices ({self.mode})")
        self._emit(Event(EventKind.STARTED, f"{self._total} runs on {where}", total=self._total,
                         device=devices[0], devices=devices))
        for note in plan.unfit_notes():
            self._emit(Event(EventKind.LOG, note))
        if self.mode == "compare":
            threads = [threading.Thread(target=self._guard, args=(self._device_run, eng),
                                        name=f"run-{eng.label}", daemon=True)
                       for eng in self._live]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            self._guard(self._shared_run)
        ordered = sorted(self._results, key=lambda t: (t[0], t[1]))
        final = final_records([r for _o, _e, r in ordered])
        self._emit(Event(EventKind.FINISHED, f"{self._done} of {self._total} runs", done=self._done,
                         total=self._total, cancelled=self.cancel.cancelled, started=True,
                         records=final))
        return final

    def _one_table(self) -> None:
        """A share run over several devices: one model makes one table (the records'
        share_group); different models keep their lab bests apart, and the log says so."""
        keys = {(e.host, e.info.name, e.info.index) for e in self._live}
        if len(keys) < 2:
            return          # engines on one device: its table is the run's
        models = sorted({name for _h, name, _i in keys})
        if len(models) > 1:
            self._emit(Event(EventKind.LOG, "the work is shared by different devices ("
                             + "; ".join(models) + "): each keeps its own lab best, and every "
                             "ratio is of its own device's reference lines", level=LogLevel.WARNING))
            return
        hosts = {h for h, _n, _i in keys}
        where = ", ".join(f"#{i}" + (f" @ {h}" if len(hosts) > 1 else "")
                          for h, _n, i in sorted(keys, key=lambda t: (t[0], t[2])))
        self._share_model = models[0]
        self._share_group = f"{len(keys)} × {models[0]} ({where})"
        self._emit(Event(EventKind.LOG, f"one table over {self._share_group}: one lab best, "
                         "each row naming its device; every ratio is of its own device's "
                         "reference lines"))

    def _guard(self, fn: Callable, *args) -> None:
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001  (a bug must not hang the run: say it)
            self._emit(Event(EventKind.LOG, f"internal error: {type(exc).__name__}: {exc}", level=LogLevel.ERROR))

    def _open_one(self, eng: EngineHandle, joined: bool = False) -> str | None:
        """Open ``eng``'s device; None when it is ready, else why not."""
        try:
            info = eng.open()
            self._emit(Event(EventKind.LOG, f"{eng.label}: {info.name} "
                                    + ("joined the run" if joined else "ready")
                                    + (f" on {eng.host}" if eng.host else "")))
            return None
        except Exception as exc:  # noqa: BLE001  (BackendError, EngineLost, a failed start)
            return f"{eng.label}: {exc}"

    def _open_all(self) -> list[str]:
        """Open every engine's device at once; the ones that open join the run."""
        problems: list[str] = []
        results: list[str | None] = ["not opened"] * len(self.engines)
        threads = [threading.Thread(target=lambda i=i, e=e: results.__setitem__(i, self._open_one(e)),
                                    daemon=True) for i, e in enumerate(self.engines)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for eng, problem in zip(self.engines, results):
            if problem is None:
                self._live.append(eng)
            else:
                problems.append(problem)
                self._emit(Event(EventKind.LOG, problem, level=LogLevel.ERROR))
        return problems

    def _device_run(self, engine: EngineHandle) -> None:
        """compare mode: this device runs the whole plan (or tunes it) on its own."""
        plan = dataclasses.replace(self.plan, device=engine.device)
        if plan.autotune:
            run_autotuned(lambda p, e, c: self._execute(p, [engine], e, c), plan,
                          self._counted_winners(engine), self.cancel, device_name=engine.info.name,
                          frame=False)
        else:
            self._execute(plan, [engine], None, self.cancel)

    def _shared_run(self) -> None:
        """share mode: the tasks (or autotune candidates) go to whichever device is idle."""
        if self.plan.autotune:
            names = {e.info.name for e in self._live}
            if len(names) > 1:
                self._emit(Event(EventKind.LOG, "autotune across different device models: the winner "
                                        f"is remembered for {self._live[0].info.name}",
                                 level=LogLevel.WARNING))
            # a shape's searches as one queue: no device waits at the end of each search
            run_autotuned(lambda p, e, c: self._execute(p, self._live, e, c), self.plan,
                          self._counted_winners(None), self.cancel,
                          device_name=self._live[0].info.name, frame=False,
                          batch=len(self._live) > 1)
        else:
            self._execute(self.plan, self._live, None, self.cancel)

    def _counted_winners(self, engine: EngineHandle | None) -> Emit:
        """Autotune's events: winners are the run's results; the search stays in the log."""
        eng_index = self.engines.index(engine) if engine is not None else 0
        tag = self._tag(engine) if engine is not None else ""
        counter = iter(range(1 << 30))

        def inner(ev: Event) -> None:
            if ev.kind == EventKind.RESULT and ev.record is not None:
                self._add_result((next(counter), 0), eng_index, ev.record)
            elif ev.kind == EventKind.PROGRESS:
                self._emit(Event(EventKind.PROGRESS, tag + ev.message, done=self._done, total=self._total,
                                 current=tag + (ev.current or ev.message)))
            elif ev.kind == EventKind.LOG:
                self._emit(dataclasses.replace(ev, message=tag + ev.message))
        return inner

    def _execute(self, plan: Plan, engines: list[EngineHandle], emit: Emit | None,
                 cancel: CancelToken) -> list[ResultRecord]:
        """Run a plain plan's tasks on ``engines`` (idle ones pull the next task).

        ``emit`` None: results are the run's own (counted and shown). Otherwise (an
        autotune search) results go only into the returned list and ``emit`` sees logs.
        """
        joinable = self.joiners is not None and engines is self._live
        # With engines that may join, every item is a task of its own: work to take.
        pieces = (len(plan.items) if joinable else PIECES_PER_ENGINE * len(engines)
                  if len(engines) > 1 else 1)
        # A share run's own items: each device times the lines of the shapes it runs.
        lines_apart = emit is None and self.mode == "share" and len(engines) > 1
        peaks = [e.info.peak_gflops_fp32 for e in engines if e.info is not None]
        tasks = deque(split_plan(plan, pieces, lines_apart,
                                 max((p for p in peaks if p), default=None)))
        if len(engines) > 1:      # the later tasks' kernels built while the first are timed
            compile_ahead(plan, [e.info for e in engines])
        #: (device, shape) pairs whose lines have run (or are running).
        lines_run: set[tuple] = set()
        # Guards tasks, out, live and busy; idle engines wait on it while another engine
        # may still put the rest of a task back (its engine lost), so nothing is stranded.
        lock = threading.Condition()
        out: list[tuple[tuple, int, ResultRecord]] = []
        live = list(engines)
        busy = [0]          # engines running a task now

        def next_task() -> Task | None:
            """The next task; None once the queue is empty and no engine can refill it."""
            with lock:
                while not cancel.cancelled:
                    if tasks:
                        busy[0] += 1
                        return tasks.popleft()
                    if busy[0] == 0:
                        return None
                    lock.wait(0.2)
                return None

        def with_lines(engine: EngineHandle, task: Task) -> Task:
            """``task`` with its shape's lines first, where ``engine``'s device has not run them."""
            if not task.lines or engine.info is None:
                return task
            key = (engine.host, engine.info.name, engine.info.index, tuple(task.plan.shapes))
            with lock:
                if key in lines_run:
                    return task
                lines_run.add(key)
            have = {(n, tuple(sorted(p.items()))) for n, p in task.plan.items}
            extra = [(n, p) for n, p in task.lines if (n, tuple(sorted(p.items()))) not in have]
            if emit is None:
                with self._emit_lock:
                    self._total += len(extra)
            return dataclasses.replace(task, plan=dataclasses.replace(
                task.plan, items=extra + list(task.plan.items)), lines=())

        def work(engine: EngineHandle) -> None:
            while True:
                task = next_task()
                if task is None:
                    return
                try:
                    self.timeline.begin(self._lane(engine), Activity.SETUP)
                    if not run_task(engine, with_lines(engine, task)):
                        return
                finally:
                    self.timeline.end(self._lane(engine))
                    with lock:
                        busy[0] -= 1
                        lock.notify_all()

        def run_task(engine: EngineHandle, task: Task) -> bool:
            """One task on ``engine``; False when the engine left the run."""
            eng_index = self.engines.index(engine)
            got: list[ResultRecord] = []
            if emit is None:
                fwd = self._forward(engine, task.order, got)
            else:
                def fwd(ev, got=got):
                    if self._timed(engine, ev):
                        return
                    if ev.kind == EventKind.RESULT and ev.record is not None:
                        got.append(ev.record)
                    elif ev.kind == EventKind.LOG:
                        emit(dataclasses.replace(ev, message=self._tag(engine) + ev.message))
            try:
                engine.run(self._for_engine(task.plan, engine), fwd, cancel)
                with lock:
                    out.extend((task.order, eng_index, r) for r in got)
            except EngineLost as lost:
                with lock:
                    out.extend((task.order, eng_index, r) for r in got)
                rest = self._recover(engine, task, got, lost, emit)
                with lock:
                    if rest is not None:
                        tasks.appendleft(rest)     # an idle engine may take it now
                        lock.notify_all()
                # Restarting may take a while: the other engines go on meanwhile.
                if not lost.restartable or not self._restarted(engine, lost):
                    with lock:
                        live.remove(engine)
                        if not live:        # nobody left to run what remains
                            self._abandon(tasks, engine, lost, emit)
                    return False
            return True

        def queue_done() -> bool:
            with lock:
                return cancel.cancelled or (not tasks and busy[0] == 0) or not live

        def watch_for_joiners() -> None:
            """Ask for new engines while work is queued; each one that opens takes tasks."""
            wait_s = JOIN_POLL_S
            while not stop_watching.wait(wait_s) and not queue_done():
                wait_s = JOIN_POLL_S
                try:
                    offered = self.joiners()
                except Exception as exc:  # noqa: BLE001  (a cluster query failed: say it)
                    self._emit(Event(EventKind.LOG, f"looking for new engines failed: {exc}",
                                     level=LogLevel.WARNING))
                    wait_s = JOIN_RETRY_S
                    continue
                for eng in offered:
                    problem = self._open_one(eng, joined=True)
                    if problem is not None or queue_done():
                        if problem is not None:
                            self._emit(Event(EventKind.LOG, f"a new engine could not join: {problem}",
                                             level=LogLevel.WARNING))
                            wait_s = JOIN_RETRY_S
                        eng.close()
                        continue
                    with lock:
                        self.engines.append(eng)
                        self._live.append(eng)
                        live.append(eng)
                        t = threading.Thread(target=self._guard, args=(work, eng), daemon=True,
                                             name=f"task-{eng.label}")
                        joined.append(t)
                    t.start()

        threads = [threading.Thread(target=self._guard, args=(work, e), daemon=True,
                                    name=f"task-{e.label}") for e in engines]
        joined: list[threading.Thread] = []
        stop_watching = threading.Event()
        watcher = (threading.Thread(target=self._guard, args=(watch_for_joiners,), daemon=True,
                                    name="join-watch") if joinable else None)
        for t in threads:
            t.start()
        if watcher is not None:
            watcher.start()
        for t in threads:
            t.join()
        stop_watching.set()
        if watcher is not None:
            watcher.join()
        for t in list(joined):
            t.join()
        out.sort(key=lambda t: (t[0], t[1]))
        return [r for _o, _e, r in out]

    def _for_engine(self, plan: Plan, engine: EngineHandle) -> Plan:
        """``plan`` (a task's, or an autotune search's) as ``engine`` runs it: with the run's
        kernel sources and build limit, and the builds known to fail."""
        run = self.plan
        with self._emit_lock:
            failed = tuple(self._failed_builds.values())
        return dataclasses.replace(plan, device=engine.device, kernel_files=run.kernel_files,
                                   kernel_sources=run.kernel_sources,
                                   kernel_problems=run.kernel_problems,
                                   build_timeout_s=run.build_timeout_s, failed_builds=failed)

    def _recover(self, engine: EngineHandle, task: Task, got: list[ResultRecord],
                 lost: EngineLost, emit: Emit | None) -> Task | None:
        """Record the item the engine died on; the task's items not yet run, as a task."""
        rec = lost.record
        if rec is None and lost.item is not None and engine.info is not None:
            name, params, shape = lost.item
            rec = make_record(task.plan, engine.info, engine.versions, name, params, shape,
                              worker=engine.label)
            rec.host = engine.host or rec.host
        what = lost.reason
        if isinstance(lost, BuildTimedOut) and lost.item is not None:
            name, params, shape = lost.item
            m, n, k = shape
            fb = FailedBuild(name, tuple(sorted(params.items())), task.plan.dtype,
                             f"the build took longer than {lost.limit_s:g} s at {m}×{n}×{k}")
            with self._emit_lock:
                self._failed_builds[(fb.variant, fb.params, fb.dtype)] = fb
        if rec is None and not got:
            # Nothing of the task ran: without a bound the same death would repeat forever.
            deaths = task.early_deaths + 1
            if deaths >= EARLY_DEATHS_MAX:
                self._fail_task(engine, task, f"the engine process died before its first item "
                                              f"{deaths} times: {what}", emit)
                return None
            self._emit(Event(EventKind.LOG, f"{engine.label}: {what} (before the task's first item; "
                                    f"try {deaths + 1} of {EARLY_DEATHS_MAX})", level=LogLevel.ERROR))
            return dataclasses.replace(task, early_deaths=deaths)
        if rec is not None:
            rec = dataclasses.replace(rec, status=RecordStatus.ERROR, passed=None,
                                      error=what + (" — engine restarted" if lost.restartable
                                                    else ""))
        self._emit(Event(EventKind.LOG, f"{engine.label}: {what}", level=LogLevel.ERROR))
        if rec is not None:
            got.append(rec)
            if emit is None:
                self._add_result(task.order, self.engines.index(engine), rec)
        def done(n, p) -> bool:     # a value left to the shape (auto) ran as the shape's
            v = registry.get(n)
            return any(r.variant == n and r.params == v.resolve(p, r.m, r.n, r.k) for r in got)
        remaining = [(n, p) for n, p in task.plan.items if not done(n, p)]
        if not remaining:
            return None
        self._emit(Event(EventKind.LOG, f"{engine.label}: {len(remaining)} item(s) of that task go "
                                "back to the queue", level=LogLevel.WARNING))
        return dataclasses.replace(task, plan=dataclasses.replace(task.plan, items=remaining),
                                   early_deaths=0)

    def _fail_task(self, engine: EngineHandle, task: Task, why: str, emit: Emit | None) -> None:
        """Every item of ``task`` is recorded as an error saying ``why``; it is not retried."""
        self._emit(Event(EventKind.LOG, f"{engine.label}: {why}; its {len(task.plan.items)} item(s) "
                                "are recorded as failed", level=LogLevel.ERROR))
        for shape, _load in input_sets(task.plan):
            for name, params in task.plan.items:
                rec = make_record(task.plan, engine.info, engine.versions, name, params, shape,
                                  worker=engine.label)
                rec.host = engine.host or rec.host
                rec.status, rec.error = RecordStatus.ERROR, why
                if emit is None:
                    self._add_result(task.order, self.engines.index(engine), rec)

    def _restarted(self, engine: EngineHandle, lost: EngineLost) -> bool:
        if self.cancel.cancelled:
            return True              # restarted lazily by the next run that needs it
        try:
            engine.restart()
            self._emit(Event(EventKind.LOG, f"{engine.label}: engine restarted after: {lost.reason}",
                             level=LogLevel.WARNING))
            return True
        except (BackendError, EngineLost) as exc:
            self._emit(Event(EventKind.LOG, f"{engine.label}: the engine could not restart: {exc}",
                             level=LogLevel.ERROR))
            return False

    def _abandon(self, tasks: deque, engine: EngineHandle, lost: EngineLost,
                 emit: Emit | None) -> None:
        """No engine is left: every item still queued is recorded as an error."""
        while tasks:
            task = tasks.popleft()
            for shape, _load in input_sets(task.plan):
                for name, params in task.plan.items:
                    rec = make_record(task.plan, engine.info, engine.versions, name, params,
                                      shape, worker=engine.label)
                    rec.status, rec.error = RecordStatus.ERROR, f"not run: no engine left ({lost.reason})"
                    if emit is None:
                        self._add_result(task.order, self.engines.index(engine), rec)


def start_run(plan: Plan, engines: Sequence[EngineHandle], emit: Emit,
              mode: str = "compare", joiners: Joiners | None = None) -> Run:
    """Run ``plan`` on ``engines`` from a new thread; returns the :class:`Run`.

    ``joiners`` (share mode): asked during the run for engines that can join it.
    """
    run = Run()
    dispatcher = Dispatcher(plan, engines, emit, mode, run, joiners)

    def body():
        try:
            run.future.set_result(dispatcher.run())
        except BaseException as exc:  # noqa: BLE001
            try:
                emit(Event(EventKind.LOG, f"internal error: {exc!r}", level=LogLevel.ERROR))
                emit(Event(EventKind.FINISHED, f"internal error: {exc}"))
            finally:
                run.future.set_exception(exc)

    run.thread = threading.Thread(target=body, name="run", daemon=True)
    run.thread.start()
    return run
