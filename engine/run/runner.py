"""Plans and the sweep that runs them.

A :class:`Plan` is variants × parameter choices × shapes × one dtype on one backend
device. :func:`run_plan` executes it on the calling thread (the engine thread, see
:mod:`engine.run.worker`), streaming :class:`Event` objects to a callback: progress, a
log line per compile (its resource report), one :class:`ResultRecord` per item, and a
final ``finished`` event. A failure is recorded on its row and the sweep goes on.
"""
from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

import numpy as np

from engine.common.dtypes import ELEMENT_NAMES, ElementType, Layout, TypeSpec, backend_refusal
from engine.inputs import matrices, memory
from engine.measure import conditions, metrics, peaks, verify
from engine.kernels import registry, sources
from engine.measure.backends import get_backend
from engine.measure.backends.base import (BUILD_TIMEOUT_S, Backend, BackendError, BuildError,
                                          DeviceInfo, DeviceLost, Workspace)
from engine.results import derived
from engine.results.records import RecordStatus, ResultRecord, now_stamp
from engine.run.events import EventKind, LogLevel, Phase
from engine.inputs.sizes import format_shape
from engine.measure.verify import Reference
from engine.measure.timing import NoiseStop, stop_rule_text

Shape = tuple[int, int, int]


@dataclass(frozen=True)
class FailedBuild:
    """A build that could not finish earlier in a run (its engine was ended to stop it):
    the run's later sweeps record it as failed instead of building it again."""

    variant: str
    #: The parameters as built (values left to the shape resolved), sorted by name.
    params: tuple[tuple[str, int], ...]
    dtype: str
    reason: str

    def matches(self, name: str, params: Mapping[str, int], dtype: str) -> bool:
        return (name, tuple(sorted(params.items())), dtype) == (
            self.variant, self.params, self.dtype)


#: Limits of the measurement settings, shared by the window's controls and ``bench``.
WARMUP_RANGE = (0, 10_000)
REPEATS_RANGE = (1, 100_000)
BUDGET_RANGE = (0.01, 3600.0)
SEED_RANGE = (0, 2**31 - 1)


@dataclass
class Plan:
    """Everything one sweep needs.

    ``items`` are (variant name, params) pairs; build them with :func:`expand_items`.
    When ``a_path`` (and ``b_path``, or a .npz holding both) is set, the loaded
    matrices replace ``shapes``: the sweep runs their one shape.
    """

    backend: str
    items: list[tuple[str, dict[str, int]]]
    shapes: list[Shape] = field(default_factory=list)
    dtype: str = "float32"
    #: C's type (None: the input type's default, engine.common.dtypes) and B's layout
    #: ("kn": K×N; "nk": N×K, for the cpu backend, cuBLAS and kernels whose header lists it).
    out_dtype: str | None = None
    layout: str = "kn"
    device: int = 0
    warmup: int = 3
    repeats: int = 20
    time_budget_s: float | None = None
    #: Time until the per-launch times are quiet enough (engine.measure.timing.NoiseStop);
    #: replaces ``repeats`` and ``time_budget_s``.
    until_noise: NoiseStop | None = None
    cold: bool = False
    verify: bool = True
    seed: int = 0
    dist: str = "uniform"
    a_path: str | None = None
    b_path: str | None = None
    #: Host matrices given directly (the GUI's loaded files): (A, B or None).
    matrices: tuple[np.ndarray, np.ndarray | None] | None = None
    #: Search each variant's items for the best parameters per shape (engine.run.autotune),
    #: remembered in the autotune cache; ``retune`` ignores the cache.
    autotune: bool = False
    retune: bool = False
    #: With ``autotune``: ``search`` the whole space, or ``guess`` (time only what the
    #: searched shapes of the same class suggest, engine.run.autotune.guess_candidates).
    tune: str = "search"
    #: Longest one kernel launch may take before an isolated engine is ended (seconds);
    #: None: :func:`launch_timeout_s` derives it from the FLOPs and the device's peak.
    launch_timeout_s: float | None = None
    #: The user's kernel files (or folders of them) the items may name: every engine
    #: that runs the plan registers them first (engine.kernels.registry.load_kernel_files).
    kernel_files: tuple[str, ...] = ()
    #: ``kernel_files`` (folders expanded) and what they include, as the run read them when
    #: it started (:meth:`with_sources`); None: not read yet. Engines register and build
    #: these texts, so that a file edited during the run changes nothing in it.
    kernel_sources: tuple[sources.KernelSource, ...] | None = None
    #: Kernel files that could not be read when the run started (their items cannot run).
    kernel_problems: tuple[sources.Unreadable, ...] = ()
    #: Longest one kernel build may take (seconds) before its engine is ended and the item
    #: fails; None: :data:`~engine.measure.backends.base.BUILD_TIMEOUT_S`.
    build_timeout_s: float | None = None
    #: Builds that could not finish earlier in this run: recorded, not tried again.
    failed_builds: tuple[FailedBuild, ...] = ()
    #: Leave out the (item, shape) pairs that :meth:`Variant.check
    #: <engine.kernels.registry.Variant.check>` refuses (a constraint, the dtype): no run and no
    #: record, one log line per item says where and why (the window's runs: its tree marks
    #: them "not for these sizes"). False: each is a "skipped" record with the reason (bench).
    only_fitting: bool = False

    @property
    def type_spec(self) -> TypeSpec:
        """The run's types and layout (ValueError for a combination that does not exist)."""
        return TypeSpec(self.dtype, self.out_dtype, self.layout)

    def with_sources(self) -> "Plan":
        """This plan with :attr:`kernel_sources` read now (itself when already read)."""
        if self.kernel_sources is not None:
            return self
        found: list[sources.KernelSource] = []
        problems: list[sources.Unreadable] = []
        for entry in self.kernel_files:
            p = Path(entry)
            for f in (registry.kernel_files_in(p) if p.is_dir() else [p]):
                try:
                    found.append(sources.read_kernel_source(f))
                except sources.SourceError as exc:
                    problems.append(sources.Unreadable(os.path.abspath(f), str(exc)))
        return dataclasses.replace(self, kernel_sources=tuple(found),
                                   kernel_problems=tuple(problems))

    def load_kernels(self) -> list[str]:
        """Register the user's kernels here, from :attr:`kernel_sources` (read now if not
        yet); returns their problems (``path:line: why``)."""
        if not self.kernel_files:
            return []
        plan = self.with_sources()
        texts = {s.path: s.text for s in plan.kernel_sources}
        problems = [u.problem for u in plan.kernel_problems]
        if texts:
            _names, found = registry.load_kernel_files(list(texts), texts=texts)
            problems += found
        for src in plan.kernel_sources:
            sources.remember(src)
        return problems

    def items_at(self, shape: Shape) -> list[tuple[str, dict[str, int]]]:
        """The items that run at ``shape``: every one, or with :attr:`only_fitting` those
        that fit there (:func:`refusal`)."""
        if not self.only_fitting:
            return list(self.items)
        return [(n, p) for n, p in self.items
                if refusal(self.backend, n, p, shape, self.dtype, self.layout) is None]

    def input_shapes(self) -> list[Shape]:
        """The shape of each input set: the given matrices' one, else :attr:`shapes` (the
        files of :attr:`a_path` are not read here: none for them)."""
        if self.matrices is not None:
            a, b = self.matrices
            return [(a.shape[0], a.shape[0] if b is None else b.shape[1], a.shape[1])]
        return [] if self.a_path is not None else list(self.shapes)

    def unfit_notes(self, shapes: list[Shape] | None = None) -> list[str]:
        """With :attr:`only_fitting`: one line per item left out at some of ``shapes``
        (default :meth:`input_shapes`), saying where and why; empty otherwise."""
        if not self.only_fitting:
            return []
        shapes = self.input_shapes() if shapes is None else shapes
        out = []
        for name, params in self.items:
            fit = item_fit(self.backend, name, params, shapes, self.dtype, self.layout)
            if fit.left_out:
                out.append(fit.note(registry.get(name).label(params)))
        return out

    def build_timeout(self) -> float:
        """Seconds one kernel build may take (:attr:`build_timeout_s` or the default)."""
        return float(self.build_timeout_s or BUILD_TIMEOUT_S)

    def source_of(self, name: str) -> list[sources.KernelSource]:
        """The run's read sources of the user variant ``name`` (none for a built-in)."""
        v = registry.REGISTRY.get(name)
        if v is None or not self.kernel_sources:
            return []
        mine = {os.path.abspath(h.path) for h in v.headers}
        return [s for s in self.kernel_sources if s.path in mine]

    def validate(self) -> None:
        """Raise ValueError with a clear message for a plan that cannot start."""
        if self.dtype not in ELEMENT_NAMES:
            raise ValueError(f"dtype must be one of {', '.join(ELEMENT_NAMES)}, not '{self.dtype}'")
        spec = self.type_spec          # raises ValueError for an output or layout it lacks
        if spec.layout is Layout.NK and self.backend == "opencl":
            raise ValueError("B as N×K (layout nk) runs on the cpu and cuda backends; no OpenCL "
                             "kernel takes it yet")
        if self.tune not in ("search", "guess"):
            raise ValueError(f"tune must be 'search' or 'guess', not '{self.tune}'")
        if not self.items:
            raise ValueError("no variants selected")
        sourced = self.with_sources()       # the texts this run would build, read once
        problems = sourced.load_kernels()
        # A variant registered earlier (the window's) whose file the run could not read.
        unread = {os.path.realpath(u.path): u.problem for u in sourced.kernel_problems}
        for name, _ in self.items:
            if name not in registry.REGISTRY and problems:
                raise ValueError(f"'{name}' is not a usable kernel: " + "; ".join(problems))
            v = registry.get(name)
            paths = [os.path.realpath(h.path) for h in v.headers] if v.role == "user" else []
            why = [unread[p] for p in paths if p in unread]
            if why:
                raise ValueError(f"'{name}' is not a usable kernel: " + "; ".join(why))
        if not self.shapes and self.a_path is None and self.matrices is None:
            raise ValueError("no sizes given")
        for what, value, (low, high) in (("warm-up", self.warmup, WARMUP_RANGE),
                                          ("repeats", self.repeats, REPEATS_RANGE),
                                          ("the seed", self.seed, SEED_RANGE)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"{what} must be a whole number from {low} to {high}, not {value!r}")
        if self.time_budget_s is not None and not (
                BUDGET_RANGE[0] <= self.time_budget_s <= BUDGET_RANGE[1]):   # NaN fails too
            raise ValueError(f"the time budget must be from {BUDGET_RANGE[0]} to {BUDGET_RANGE[1]} s, "
                             f"not {self.time_budget_s}")
        if self.until_noise is not None:
            if self.time_budget_s is not None:
                raise ValueError("the noise rule and the time budget are two stop rules: choose one")
            why = self.until_noise.problem()
            if why:
                raise ValueError(why)
        if self.launch_timeout_s is not None and not (0 < self.launch_timeout_s <= 86400):
            raise ValueError(f"the launch timeout must be from 0 to 86400 s, not {self.launch_timeout_s}")
        if self.build_timeout_s is not None and not (0 < self.build_timeout_s <= 86400):
            raise ValueError(f"the build time limit must be from 0 to 86400 s, not {self.build_timeout_s}")


def expand_items(backend: str, variant_names: Iterable[str] | None = None,
                 overrides: Mapping[str, Iterable[int]] | None = None) -> list[tuple[str, dict]]:
    """(variant, params) pairs for ``backend``: every combination unless restricted."""
    names = (list(variant_names) if variant_names
             else [v.name for v in registry.default_variants(backend)])
    ov = {k: tuple(v) for k, v in (overrides or {}).items()}
    items = []
    for name in names:
        v = registry.get(name)
        for params in registry.iter_plan_params(v, ov):
            items.append((name, params))
    return items


def refusal(backend: str, name: str, params: Mapping[str, int], shape: Shape,
            dtype: str, layout: str = "kn") -> str | None:
    """Why ``name`` with ``params`` cannot run at ``shape`` (:meth:`Variant.check
    <engine.kernels.registry.Variant.check>`: its constraints, the dtype, B's layout), or
    None where it can. A half or FP8 type a backend has no kernel for says so
    (engine.common.dtypes)."""
    v = registry.get(name)
    return _type_refusal(backend, v, dtype) or v.check(backend, params, *shape, dtype, str(layout))


def _type_refusal(backend: str, v, dtype: str) -> str | None:
    """Why ``backend`` has no kernel of ``dtype`` for ``v`` (a half or FP8 type it lacks), or None."""
    if dtype in ELEMENT_NAMES and ElementType(dtype).is_low_precision:
        return backend_refusal(backend, ElementType(dtype), library=v.library)
    return None


@dataclass(frozen=True)
class Fit:
    """Where one item (variant, params) runs among a run's shapes, and why not elsewhere."""

    runs: tuple[Shape, ...]
    left_out: tuple[Shape, ...]
    #: Why not, at the first shape left out (None: it runs at every shape).
    reason: str | None = None
    #: What does not fit where it runs nowhere: ``not for these sizes``, or the run's type
    #: (``not in float16``) or B's layout (``not for B as N×K``) where the item takes neither.
    misfit: str = "not for these sizes"

    @property
    def nowhere(self) -> bool:
        """It runs at none of the shapes (there were some)."""
        return not self.runs and bool(self.left_out)

    def note(self, label: str, shown: int = 3) -> str:
        """``skinny[bm=64]: not for these sizes (M or N must be ...)`` (or ``not in
        float16``, ...) or, where it runs at some, the sizes it leaves out (the first
        ``shown`` of them)."""
        if self.nowhere:
            return f"{label}: {self.misfit} ({self.reason})"
        names = [format_shape(s) for s in self.left_out[:shown]]
        more = len(self.left_out) - len(names)
        where = ", ".join(names) + (f" and {more} more" if more else "")
        return f"{label}: not run at {where} ({self.reason})"


def item_fit(backend: str, name: str, params: Mapping[str, int], shapes: Iterable[Shape],
             dtype: str, layout: str = "kn") -> Fit:
    """Which of ``shapes`` the item runs at (:func:`refusal`)."""
    runs, left, reason = [], [], None
    for shape in shapes:
        why = refusal(backend, name, params, shape, dtype, layout)
        if why is None:
            runs.append(shape)
        else:
            left.append(shape)
            reason = reason or why
    return Fit(tuple(runs), tuple(left), reason, misfit(backend, name, dtype, layout))


def misfit(backend: str, name: str, dtype: str, layout: str = "kn") -> str:
    """What keeps ``name`` from running whatever the sizes, as a mark says it: its type
    (``not in float16``: the variant or the backend lacks it), B's layout (``not for B as
    N×K``), else ``not for these sizes``."""
    v = registry.get(name)
    if dtype not in v.dtypes or _type_refusal(backend, v, dtype):
        return f"not in {dtype}"
    if str(layout) not in v.layouts:
        return "not for B as N×K"
    return "not for these sizes"


def fitting_count(plan: Plan, shapes: list[Shape] | None = None) -> int:
    """Runs of ``plan`` over ``shapes`` (default :meth:`Plan.input_shapes`) on one device:
    (item, shape) pairs, or (variant, shape) pairs when it autotunes, only the fitting
    ones with :attr:`Plan.only_fitting`."""
    shapes = plan.input_shapes() if shapes is None else shapes
    count = 0
    for shape in shapes:
        items = plan.items_at(shape)
        count += len({n for n, _ in items}) if plan.autotune else len(items)
    return count


# --- events ---------------------------------------------------------------------------

@dataclass
class Event:
    """Something the sweep reports: its :class:`~engine.run.events.EventKind`; a
    ``phase`` event's message is the :class:`~engine.run.events.Phase` the item in flight
    enters, with ``expected_s`` the longest the device part may take (a supervisor's
    watchdog)."""

    kind: EventKind
    message: str = ""
    record: ResultRecord | None = None
    done: int = 0
    total: int = 0
    current: str = ""
    eta_s: float | None = None
    device: DeviceInfo | None = None
    cancelled: bool = False
    level: LogLevel = LogLevel.INFO       # for log events
    #: finished: whether the sweep got as far as opening the device and starting.
    started: bool = False
    #: finished: the final records, with speed-ups and % of cuBLAS filled in. They are
    #: new objects: records sent earlier in result events are never changed afterwards.
    records: list[ResultRecord] | None = None
    #: progress and phase: the item in flight, ``(variant, params, (m, n, k))``.
    item: tuple | None = None
    #: phase: seconds the device part of this phase may take (None: no limit).
    expected_s: float | None = None
    #: started: every device of the run (one per engine).
    devices: list[DeviceInfo] | None = None

    def __post_init__(self):
        # the words as enums even where a caller passed the plain text
        self.kind, self.level = EventKind(self.kind), LogLevel(self.level)
        if self.kind == EventKind.PHASE:
            self.message = Phase(self.message)


Emit = Callable[[Event], None]


class CancelToken:
    """Set from any thread; the sweep checks it before each launch series."""

    def __init__(self):
        self._ev = threading.Event()

    def cancel(self) -> None:
        self._ev.set()

    @property
    def cancelled(self) -> bool:
        return self._ev.is_set()


# --- the sweep ------------------------------------------------------------------------

def input_sets(plan: Plan) -> list[tuple[Shape, Callable[[], tuple[np.ndarray, np.ndarray]]]]:
    """(shape, loader) per input set; loaders run lazily, inside the sweep."""
    if plan.matrices is not None:
        a, b = plan.matrices
        a = np.ascontiguousarray(a, dtype=matrices.DTYPES[plan.dtype])
        b = a.T.copy() if b is None else np.ascontiguousarray(b, dtype=matrices.DTYPES[plan.dtype])
        # matrices.Operands keep FP8's scales through the run
        ops = matrices.Operands(a, b, ElementType(plan.dtype), *_scales(plan.matrices))
        return [((a.shape[0], b.shape[1], a.shape[1]), lambda: ops)]
    if plan.a_path is not None:
        ops = matrices.load_operands(plan.a_path, plan.b_path, plan.dtype)
        return [((ops.a.shape[0], ops.b.shape[1], ops.a.shape[1]), lambda: ops)]
    out = []
    for shape in plan.shapes:
        m, n, k = shape
        out.append((shape, lambda m=m, n=n, k=k: _generated_pair(
            (m, n, k, plan.dtype, plan.dist, plan.seed))))
    return out


#: The last generated input set and its references: a multi-device run hands an engine
#: several pieces of one shape in a row, and generating 8192² inputs and their float64
#: reference again for each piece would cost more than timing the kernels.
_LAST_INPUTS: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
#: References by (input key, C's type, B's layout): one input set serves runs that write C
#: in different types, whose tolerances differ.
_LAST_REFS: dict[tuple, dict[str, Reference]] = {}
_INPUTS_LOCK = threading.Lock()


#: Input sets kept (oldest dropped first): each shape's first and second (re-check) set, for
#: a few shapes, so that a share run's engine, handed pieces of several shapes in turn
#: (longest first), makes neither set nor their references again when a shape comes back
#: (two H200s, two shapes, two sets kept: each engine's check time twice one device's).
_INPUTS_KEPT = 8
#: ... and at most this many bytes of them (host memory), the newest set always kept.
_INPUTS_KEPT_BYTES = 2 * 2**30


def _pair_bytes(pair) -> int:
    return sum(int(getattr(x, "nbytes", 0)) for x in pair if x is not None)


def _scales(pair) -> tuple[float, float]:
    """FP8's per-tensor scales of an input set (matrices.Operands), 1 for a plain pair."""
    return float(getattr(pair, "scale_a", 1.0)), float(getattr(pair, "scale_b", 1.0))


def _generated_pair(key: tuple) -> tuple[np.ndarray, np.ndarray]:
    with _INPUTS_LOCK:
        if key not in _LAST_INPUTS:
            m, n, k, dtype, dist, seed = key
            pair = matrices.generate_pair(m, n, k, dtype, dist=dist, seed=seed)
            while _LAST_INPUTS and (len(_LAST_INPUTS) >= _INPUTS_KEPT or _pair_bytes(pair) + sum(
                    _pair_bytes(p) for p in _LAST_INPUTS.values()) > _INPUTS_KEPT_BYTES):
                oldest = next(iter(_LAST_INPUTS))
                del _LAST_INPUTS[oldest]
                for ref_key in [r for r in _LAST_REFS if r[0] == oldest]:
                    del _LAST_REFS[ref_key]
            _LAST_INPUTS[key] = pair
        else:                         # the newest again: dropped last
            _LAST_INPUTS[key] = _LAST_INPUTS.pop(key)
        return _LAST_INPUTS[key]


def _cached_references(key: tuple, out_dtype, layout) -> dict[str, "Reference"]:
    """The references of the generated input set ``key`` (a fresh dict once it is dropped)."""
    with _INPUTS_LOCK:
        if key not in _LAST_INPUTS:
            return {}
        # the size rule that picks a reference's method is part of what it is
        rule = (verify.FULL_REFERENCE_LIMIT, verify.INT_EXACT_LIMIT)
        return _LAST_REFS.setdefault((key, out_dtype, layout, rule), {})


def _references_for(plan: Plan, shape: Shape) -> dict[str, "Reference"]:
    """The reference cache of a generated input set (shared by the pieces of one shape);
    a fresh dict for loaded matrices."""
    if plan.matrices is not None or plan.a_path is not None:
        return {}
    return _cached_references((*shape, plan.dtype, plan.dist, plan.seed), plan.out_dtype, plan.layout)


HOST = socket.gethostname()
#: A launch is never ended sooner than this (seconds), whatever the estimate says.
LAUNCH_TIMEOUT_MIN_S = 10.0
#: The slowest rate (share of the device's peak) a correct kernel is assumed to reach;
#: the default launch timeout is 10× the time of a kernel running that slowly.
SLOWEST_SHARE_OF_PEAK = 0.002
#: GFLOP/s assumed when the device's peak is unknown (a CPU OpenCL driver, say).
SLOWEST_GFLOPS_UNKNOWN_PEAK = 0.5


def launch_timeout_s(plan: Plan, device: DeviceInfo | None, flops: int) -> float:
    """The per-launch timeout: ``plan.launch_timeout_s``, or 10× a very slow kernel's time."""
    if plan.launch_timeout_s:
        return float(plan.launch_timeout_s)
    peak = device.peak_gflops_fp32 if device is not None else None
    slowest = peak * SLOWEST_SHARE_OF_PEAK if peak else SLOWEST_GFLOPS_UNKNOWN_PEAK
    return max(LAUNCH_TIMEOUT_MIN_S, 10.0 * flops / (max(slowest, 1e-3) * 1e9))


def make_record(plan: Plan, device: DeviceInfo, versions: str, name: str, params,
                shape: Shape, worker: str = "") -> ResultRecord:
    """The record of one item before it runs: what, where, the FLOP and byte models."""
    v = registry.get(name)
    m, n, k = shape
    n_eff = v.effective_n(m, n)
    spec = plan.type_spec
    return ResultRecord(out_dtype=str(spec.output), layout=str(spec.layout), backend=plan.backend, device=device.name, variant=name,
                        params=dict(params), m=m, n=n_eff, k=k, dtype=plan.dtype,
                        mode="cold" if plan.cold else "hot", warmup=plan.warmup,
                        repeats=plan.repeats, timestamp=now_stamp(), versions=versions,
                        flops=v.flops(m, n_eff, k),
                        bytes=registry.io_bytes(v, m, n_eff, k, plan.dtype, str(spec.output)),
                        host=HOST, device_index=device.index, worker=worker)


def concrete(device: DeviceInfo | None, name: str, params: Mapping[str, int],
             shape: Shape, dtype: str | None = None, layout: str = "kn") -> tuple[str, dict[str, int]]:
    """The kernel an item runs at ``shape`` on ``device`` (:func:`registry.concrete
    <engine.kernels.registry.concrete>`: values left to the shape resolved; a dispatch
    variant's pick, by the device's SM count and architecture where it is a GPU)."""
    gpu = device is not None and device.backend == "cuda"
    return registry.concrete(name, params, *shape, sms=device.compute_units if gpu else None,
                             arch=device.compute_capability if gpu else None, dtype=dtype,
                             layout=layout)


def build_jobs(plan: Plan, device: DeviceInfo | None,
               shapes: list[Shape]) -> list[tuple[registry.Variant, dict[str, int], str]]:
    """(variant, parameters, dtype) of every kernel ``plan`` builds over ``shapes`` on
    ``device``, each once: what a backend's precompile (and a share run's compile-ahead,
    engine.run.dispatch) is given."""
    jobs, seen = [], set()
    for item, params in plan.items:
        for shape in shapes:      # a value left to the shape (a dispatch's pick) may differ per shape
            name, run = concrete(device, item, params, shape, plan.dtype, plan.layout)
            v = registry.get(name)
            key = (name, tuple(sorted(run.items())))
            if key not in seen and v.check(plan.backend, run, *shape, plan.dtype, plan.layout) is None:
                seen.add(key)
                jobs.append((v, run, plan.dtype))
    return jobs


#: Measured copy bandwidth per (backend, device index, device name): one probe per process.
_COPY_GBPS: dict[tuple, float | None] = {}


def _copy_bandwidth(backend: Backend, device: DeviceInfo) -> float | None:
    """The device's measured copy bandwidth (GB/s), probed once per process; a failed
    probe is a missing roof, never a failed run."""
    key = (backend.name, device.index, device.name)
    if key not in _COPY_GBPS:
        try:
            _COPY_GBPS[key] = backend.measure_copy_gbps()
        except BackendError:
            _COPY_GBPS[key] = None
    return _COPY_GBPS[key]


class Sweep:
    """Runs plans on one open backend device; kept open across plans by the engine thread."""

    def __init__(self, worker: str = "local"):
        self.backend: Backend | None = None
        self.device_index: int | None = None
        self.device: DeviceInfo | None = None
        #: Written into every record: which engine ran it.
        self.worker = worker
        #: The shape in flight's second input set (the re-check on fresh inputs).
        self._second: SecondInputs | None = None
        #: FP8's per-tensor scales of the input set in flight (1, 1 for other types).
        self._scales = (1.0, 1.0)

    def ensure_open(self, name: str, index: int) -> DeviceInfo:
        if self.backend is not None and self.backend.name == name and self.device_index == index:
            return self.device
        self.close()
        backend = get_backend(name)
        self.device = backend.open(index)
        self.backend, self.device_index = backend, index
        self.device.copy_gbps = _copy_bandwidth(backend, self.device)
        return self.device

    def close(self) -> None:
        if self.backend is not None:
            try:
                self.backend.close()
            finally:
                self.backend = None
                self.device_index = None
                self.device = None

    def run(self, plan: Plan, emit: Emit, cancel: CancelToken | None = None) -> list[ResultRecord]:
        cancel = cancel or CancelToken()
        results: list[ResultRecord] = []
        plan = plan.with_sources()      # read once: every item runs the same text
        try:
            plan.validate()
            sets = input_sets(plan)
        except (ValueError, matrices.MatrixInputError) as exc:
            emit(Event(EventKind.LOG, str(exc), level=LogLevel.ERROR))
            emit(Event(EventKind.FINISHED, str(exc), cancelled=False))
            return results
        try:
            device = self.ensure_open(plan.backend, plan.device)
        except BackendError as exc:
            emit(Event(EventKind.LOG, f"{plan.backend}: {exc}", level=LogLevel.ERROR))
            emit(Event(EventKind.FINISHED, str(exc)))
            return results
        backend = self.backend
        backend.build_timeout_s = plan.build_timeout()
        shapes = [shape for shape, _ in sets]
        total = fitting_count(dataclasses.replace(plan, autotune=False), shapes)
        emit(Event(EventKind.STARTED, f"{total} runs on {device.name}", total=total, device=device))
        for note in plan.unfit_notes(shapes):
            emit(Event(EventKind.LOG, note))
        self._precompile(plan, shapes, emit)
        newer = _NewerSources(plan, emit)
        done = 0
        t_start = time.perf_counter()
        versions = backend.versions()
        for shape, load in sets:
            if cancel.cancelled:
                break
            m, n, k = shape
            items = plan.items_at(shape)
            if not items:           # nothing fits this shape (only_fitting): no inputs made
                continue
            try:
                # Sized before anything is allocated: a refusal costs nothing. The device
                # needs A, B (unless every variant is C = A·Aᵀ) and the largest C.
                # C in its own type (FP32 from 16-bit inputs is twice their size)
                itemsize = registry.ITEMSIZE[plan.dtype]
                out_size = registry.ITEMSIZE[str(plan.type_spec.output)]
                memory.check_host_fit(shape, itemsize, plan.verify, out_itemsize=out_size)
                needs_b = any(registry.get(nm).kind == "gemm" for nm, _ in items)
                out_elems = max(m * registry.get(nm).effective_n(m, n) for nm, _ in items)
                need = (m * k + (k * n if needs_b else 0)) * itemsize + out_elems * out_size
                matrices.check_device_fit(need, backend.free_memory(), f"the {m}×{n}×{k} problem")
                largest = max(max(m * k, k * n if needs_b else 0) * itemsize, out_elems * out_size)
                limit = backend.max_buffer_bytes()
                if limit is not None and largest > limit:
                    side = int((limit // itemsize) ** 0.5)
                    raise matrices.MatrixInputError(
                        f"{m}×{n}×{k}: one matrix needs {largest / 2**20:,.1f} MiB, more than "
                        f"{device.name} allocates in one buffer ({limit / 2**20:,.1f} MiB); the "
                        f"largest square size that fits is {side}")
            except matrices.MatrixInputError as exc:
                done = self._fail_input_set(plan, items, device, versions, shape, exc, results,
                                            emit, done, total)
                continue
            try:
                pair = load()
                a, b = pair
            except (matrices.MatrixInputError, MemoryError) as exc:
                emit(Event(EventKind.LOG, str(exc) or "out of host memory", level=LogLevel.ERROR))
                break
            refs: dict[str, Reference] = _references_for(plan, shape)
            ws: Workspace | None = None
            self._second = SecondInputs(plan, shape, backend, needs_b)
            try:
                backend.type_spec = plan.type_spec
                ws = backend.prepare(a, b if needs_b else None)
                ws.scale_a, ws.scale_b = _scales(pair)
                self._scales = _scales(pair)
                emit(Event(EventKind.LOG, f"{m}×{n}×{k} {plan.dtype}: inputs uploaded in {ws.upload_ms:.3f} ms"))
            except (matrices.MatrixInputError, BackendError) as exc:
                done = self._fail_input_set(plan, items, device, versions, shape, exc, results,
                                            emit, done, total)
                continue
            try:
                for name, item_params in items:
                    if cancel.cancelled:
                        break
                    # values left to the shape (registry.AUTO) resolved here, so that the
                    # progress, a crash's record and the result all name the build that ran
                    # a dispatch variant runs (and records) the kernel its table picks here
                    shown, (name, params) = name, concrete(device, name, item_params, shape,
                                                           plan.dtype, plan.layout)
                    label = (f"{shown} → " if shown != name else "") + \
                        f"{registry.get(name).label(params)} @ {m}×{n}×{k}"
                    elapsed = time.perf_counter() - t_start
                    eta = elapsed / done * (total - done) if done else None
                    emit(Event(EventKind.PROGRESS, label, done=done, total=total, current=label, eta_s=eta,
                               item=(name, dict(params), shape)))
                    try:
                        rec = self._one(plan, device, versions, name, params, shape, ws, a, b,
                                        refs, emit, cancel)
                    except DeviceLost as exc:
                        # The context is gone (a sticky CUDA error): nothing more can run in
                        # this process. The caller decides (restart the engine, or stop).
                        exc.record = exc.record or self._record(plan, device, versions, name,
                                                                params, shape)
                        exc.results = results
                        ws = None
                        raise
                    by_shape = [p for p, x in item_params.items() if x == registry.AUTO]
                    if by_shape:         # one curve for the sweep (ResultRecord.series_params)
                        rec.by_shape = by_shape
                    if shown != name:    # one curve too: the dispatch line, saying what it ran
                        rec.dispatched_to, rec.variant, rec.params = rec.label(), shown, dict(item_params)
                    rec.newer_source = newer.note(name)
                    results.append(rec)
                    done += 1
                    emit(Event(EventKind.RESULT, record=rec, done=done, total=total))
            finally:
                if ws is not None:
                    backend.release(ws)  # device memory goes back between shapes
                    self._second.release()
        final = final_records(results)
        emit(Event(EventKind.FINISHED, f"{done} of {total} runs", done=done, total=total,
                   cancelled=cancel.cancelled, started=True, records=final))
        return final

    def _fail_input_set(self, plan, items, device, versions, shape, exc, results, emit, done,
                        total) -> int:
        """Every item of an input set that cannot run gets a record saying why; the count
        of items done after them."""
        for name, params in items:
            rec = self._record(plan, device, versions, name, params, shape)
            rec.status, rec.error = RecordStatus.ERROR, str(exc)
            results.append(rec)
            done += 1
            emit(Event(EventKind.RESULT, record=rec, done=done, total=total))
        emit(Event(EventKind.LOG, str(exc), level=LogLevel.ERROR))
        return done

    def _precompile(self, plan: Plan, shapes: list[Shape], emit: Emit) -> None:
        """Build every kernel the plan will run at once (a backend that can: cuda runs one
        nvcc per core), instead of one at a time in the middle of the timings."""
        precompile = getattr(self.backend, "precompile", None)
        if precompile is None:
            return
        self.backend.type_spec = plan.type_spec    # C's type is a build constant (-DOUT) on cuda
        built, seconds = precompile(build_jobs(plan, self.device, shapes))
        if built:
            emit(Event(EventKind.LOG, f"compiled {built} kernels in {seconds:.1f} s (in parallel)"))

    def _record(self, plan, device, versions, name, params, shape) -> ResultRecord:
        return make_record(plan, device, versions, name, params, shape, self.worker)

    def _one(self, plan, device, versions, name, params, shape, ws, a, b, refs, emit,
             cancel) -> ResultRecord:
        v = registry.get(name)
        m, n, k = shape
        rec = self._record(plan, device, versions, name, params, shape)
        rec.upload_ms = ws.upload_ms
        if plan.type_spec.element.is_float8:
            rec.scale_a, rec.scale_b = self._scales
        reason = refusal(plan.backend, name, params, shape, plan.dtype, plan.layout)
        if reason:
            rec.status, rec.error = RecordStatus.SKIPPED, reason
            emit(Event(EventKind.LOG, f"skip {v.label(params)} at {m}×{n}×{k}: {reason}"))
            return rec
        item = (name, dict(params), shape)
        per_launch = launch_timeout_s(plan, device, rec.flops)
        failed = next((f for f in plan.failed_builds if f.matches(name, params, plan.dtype)), None)
        if failed is not None:
            rec.status, rec.error = RecordStatus.ERROR, f"{failed.reason} (not built again)"
            rec.build_failed = True
            emit(Event(EventKind.LOG, f"{v.label(params)} at {m}×{n}×{k}: {rec.error}", level=LogLevel.ERROR))
            return rec
        try:
            # The build's own limit: an engine process is ended past it (engine.run.engines).
            emit(Event(EventKind.PHASE, Phase.COMPILE, item=item, expected_s=plan.build_timeout()))
            kernel = self.backend.compile(v, params, plan.dtype)
            emit(Event(EventKind.LOG, kernel.report))
            self.backend.ensure_output(ws, v.output_shape(m, n, k))
            if plan.verify:
                self.backend.poison_output(ws)
                emit(Event(EventKind.PHASE, Phase.VERIFY, item=item, expected_s=per_launch))
                c = self.backend.run_once(kernel, ws, m, n, k)
                emit(Event(EventKind.PHASE, Phase.CHECK, item=item))
                if v.kind not in refs:
                    refs[v.kind] = Reference(a, None if v.kind == "aat" else b, kind=v.kind,
                                             seed=plan.seed + 1, spec=plan.type_spec,
                                             scale_a=self._scales[0], scale_b=self._scales[1])
                verdict = refs[v.kind].check(c, precision=v.precision)
                del c
                rec.launches += 1
                rec.verify_method, rec.rel_l2, rec.max_abs, rec.passed = (
                    verdict.method, verdict.rel_l2, verdict.max_abs, verdict.passed)
                if not verdict.passed:
                    rec.status = RecordStatus.FAILED
                    rec.error = f"wrong result: {verdict.detail}"
                    emit(Event(EventKind.LOG, f"{v.label(params)} at {m}×{n}×{k}: {rec.error}", level=LogLevel.ERROR))
                else:
                    # Poisoned again, so that the check after the timed launches sees only
                    # what they wrote (a kernel that computes only on its first launch fails).
                    self.backend.poison_output(ws)
            else:
                rec.status = RecordStatus.UNVERIFIED
            if cancel.cancelled:
                rec.error = (rec.error + "; " if rec.error else "") + "cancelled before timing"
                return rec
            noise = plan.until_noise
            launches = plan.warmup + (plan.repeats if plan.time_budget_s is None and noise is None else 3)
            longest = noise.max_s if noise is not None else (plan.time_budget_s or 0.0)
            emit(Event(EventKind.PHASE, Phase.TIME, item=item,
                       expected_s=per_launch * launches + longest))
            times = self.backend.time_launches(kernel, ws, m, n, k, plan.warmup, plan.repeats,
                                               plan.cold, plan.time_budget_s,
                                               should_stop=lambda: cancel.cancelled,
                                               **({"noise": noise} if noise is not None else {}))
            # e.g. launches that could not be held back to back
            rec.timing_note = self.backend.timing_note() or ""
            rec.timing_mode = self.backend.timing_mode()
            rec.stop_rule = stop_rule_text(plan.repeats, plan.time_budget_s, noise)
            loop = self.backend.last_timing
            rec.stopped_by = loop.stopped_by if loop is not None and loop.stopped_by else ""
            rec.launches += plan.warmup + len(times)
            if rec.passed:
                self._recheck(rec, v, kernel, ws, refs[v.kind], shape, item, per_launch, emit)
            st = metrics.summarize(times)
            rec.repeats = st.count
            rec.median_ms, rec.min_ms, rec.max_ms = st.median_ms, st.min_ms, st.max_ms
            rec.mean_ms, rec.noise_pct = st.mean_ms, st.noise_pct
            rec.gflops = metrics.gflops(rec.flops, st.median_ms)
            rec.gbps = metrics.gbps(rec.bytes, st.median_ms)
            fill_ceilings(rec, v.precision, device)
            fill_conditions(rec, getattr(self.backend, "loop_conditions", None))
        except DeviceLost as exc:
            rec.status, rec.error = RecordStatus.ERROR, str(exc)
            exc.record = rec
            raise
        except BackendError as exc:
            # A library missing here (cuBLAS without nvmath) is a skip, not a failure.
            rec.status, rec.error = (RecordStatus.SKIPPED if getattr(exc, "skip", False)
                                      else RecordStatus.ERROR), str(exc)
            if isinstance(exc, BuildError):
                rec.build_failed = True     # the kernel file is at fault (CLI: exit 2)
            emit(Event(EventKind.LOG, f"{v.label(params)} at {m}×{n}×{k}: {exc}", level=LogLevel.ERROR))
            self._raise_if_lost(rec)
        except Exception as exc:  # noqa: BLE001  (a driver error no backend wrapped: its row)
            rec.status, rec.error = RecordStatus.ERROR, f"{type(exc).__name__}: {exc}"
            emit(Event(EventKind.LOG, f"{v.label(params)} at {m}×{n}×{k}: {rec.error}", level=LogLevel.ERROR))
            self._raise_if_lost(rec)
        return rec

    def _recheck(self, rec: ResultRecord, v, kernel, ws: Workspace, ref: Reference,
                 shape: Shape, item, per_launch: float, emit: Emit) -> None:
        """After the timed launches of a kernel that passed: the last timed launch's output
        against the same reference (C was poisoned before the warm-up), then one launch on
        fresh inputs from a second seed writing over C as the timed launches left it (the
        first inputs' answer). A failure makes the record ``failed``, naming the check."""
        m, n, k = shape
        checks = []
        emit(Event(EventKind.PHASE, Phase.CHECK, item=item))
        verdict = ref.check(self.backend.read_output(ws), precision=v.precision)
        if not verdict.passed:
            self._recheck_failed(rec, v, shape, emit, "re-check of the timed launches: the last "
                                 "one's output is wrong, though the verified launch was right (a "
                                 "kernel that reads C, computes only on its first launch, or races "
                                 f"when launched back to back): {verdict.detail}")
            return
        checks.append("last timed launch")
        second = self._second
        ws2 = second.workspace() if second is not None else None
        if ws2 is None:
            rec.recheck = ", ".join(checks) + (f"; second seed not checked: {second.note}"
                                               if second is not None and second.note else "")
            return
        emit(Event(EventKind.PHASE, Phase.VERIFY, item=item, expected_s=per_launch))
        # C as the timed launches left it: a kernel that keeps an answer it finds there fails.
        ws2.c, ws2.c_shape = ws.c, ws.c_shape
        try:
            c2 = self.backend.run_once(kernel, ws2, m, n, k)
        finally:
            ws2.c, ws2.c_shape = None, None
        rec.launches += 1
        emit(Event(EventKind.PHASE, Phase.CHECK, item=item))
        verdict = second.reference(v.kind).quick_check(c2, precision=v.precision)
        if not verdict.passed:
            self._recheck_failed(rec, v, shape, emit, "re-check on fresh inputs (seed "
                                 f"{second.seed}): wrong, though right on the first inputs (a "
                                 "kernel that keeps an answer it finds in C, which held the first "
                                 f"inputs' answer): {verdict.detail}")
            return
        checks.append(f"second seed ({verdict.method})")
        rec.recheck = ", ".join(checks)

    @staticmethod
    def _recheck_failed(rec: ResultRecord, v, shape: Shape, emit: Emit, why: str) -> None:
        rec.status, rec.passed, rec.error = RecordStatus.FAILED, False, why
        m, n, k = shape
        emit(Event(EventKind.LOG, f"{v.label(rec.params)} at {m}×{n}×{k}: {why}", level=LogLevel.ERROR))

    def _raise_if_lost(self, rec: ResultRecord) -> None:
        """After a failed item: a backend whose device context no longer works (CUDA's
        sticky errors: illegal address, trap, misaligned access) raises DeviceLost."""
        lost = self.backend.context_lost()
        if lost:
            raise DeviceLost(f"{rec.error} ({lost})" if rec.error else lost, record=rec)


#: The second input set's seed is the run's seed plus this (a different random stream).
SECOND_SEED_OFFSET = 1_000_003


class SecondInputs:
    """Fresh inputs of one shape from a second seed, for the re-check of kernels that
    passed (:meth:`Sweep._recheck`): made and uploaded on first use, once per shape;
    where they do not fit (host or device memory) :attr:`note` says so and the check is
    left out."""

    def __init__(self, plan: Plan, shape: Shape, backend: Backend, needs_b: bool):
        self.plan, self.shape, self.backend, self.needs_b = plan, shape, backend, needs_b
        self.seed = (plan.seed + SECOND_SEED_OFFSET) % (SEED_RANGE[1] + 1)
        self.note = ""
        self._ws: Workspace | None = None
        self._pair: tuple[np.ndarray, np.ndarray] | None = None
        self._refs: dict[str, Reference] = {}
        self._scales = (1.0, 1.0)

    def workspace(self) -> Workspace | None:
        if self._ws is not None or self.note:
            return self._ws
        m, n, k = self.shape
        itemsize = registry.ITEMSIZE[self.plan.dtype]
        need = (m * k + (k * n if self.needs_b else 0)) * itemsize
        if need > self.backend.free_memory() // 2:
            self.note = "no room on the device for a second input set"
            return None
        try:
            key = (m, n, k, self.plan.dtype, self.plan.dist, self.seed)
            pair = _generated_pair(key)
            a, b = pair
            self._refs = _cached_references(key, self.plan.out_dtype, self.plan.layout)
            self._ws = self.backend.prepare(a, b if self.needs_b else None)
            self._ws.scale_a, self._ws.scale_b = self._scales = _scales(pair)
        except (matrices.MatrixInputError, MemoryError, BackendError) as exc:
            self.note = f"the second input set could not be made ({exc or 'out of memory'})"
            return None
        self._pair = (a, b)
        return self._ws

    def reference(self, kind: str) -> Reference:
        if kind not in self._refs:
            a, b = self._pair
            self._refs[kind] = Reference(a, None if kind == "aat" else b, kind=kind,
                                         seed=self.seed + 1, spec=self.plan.type_spec,
                                         scale_a=self._scales[0], scale_b=self._scales[1])
        return self._refs[kind]

    def release(self) -> None:
        if self._ws is not None:
            self.backend.release(self._ws)
        self._ws, self._pair, self._refs = None, None, {}


class _NewerSources:
    """Which of a sweep's user kernels were edited on disk since the run read them: each
    item of one says so on its record (:attr:`ResultRecord.newer_source`), and the sweep's log
    says it once per file."""

    def __init__(self, plan: Plan, emit: Emit):
        self.plan, self.emit = plan, emit
        self._said: set[str] = set()

    def note(self, name: str) -> str:
        """What the record of an item of ``name`` should say ("" when nothing changed)."""
        changed = [p for src in self.plan.source_of(name) for p in src.changed()]
        if not changed:
            return ""
        files = ", ".join(changed)
        text = (f"{files} changed on disk after the run started; this run builds the "
                f"version it read then (run again for the newer one)")
        for p in changed:
            if p not in self._said:
                self._said.add(p)
                self.emit(Event(EventKind.LOG, f"{name}: {p} changed on disk after the run started; "
                                       "the run goes on with the version it read then",
                                level=LogLevel.WARNING))
        return text


def fill_ceilings(rec: ResultRecord, variant_precision: str, device: DeviceInfo) -> None:
    """% of the peak of the record's own arithmetic (FP32 SIMT, TF32 tensor cores or
    int32; :mod:`engine.measure.peaks`), and the ceilings it was compared with:
    ``precision``, ``peak_gflops`` and the device's measured ``copy_gbps``."""
    precision = peaks.precision_of(variant_precision, rec.dtype)
    rec.precision = precision
    peak = peaks.peak_for(device.peaks(), precision)
    if peak:
        rec.peak_gflops = peak
        rec.pct_of_peak = derived.pct_of_peak(rec.gflops, peak)
    if device.copy_gbps:
        rec.copy_gbps = device.copy_gbps


def fill_conditions(rec: ResultRecord, loop_conditions) -> None:
    """The GPU's clocks, power, temperature, throttle reasons and energy over the timed
    loop (a backend with NVML: ``loop_conditions()``; others leave the fields empty)."""
    if loop_conditions is None:
        return
    cond = loop_conditions()
    if not cond.samples:
        return
    rec.sm_clock_min_mhz, rec.sm_clock_median_mhz = cond.sm_clock_min_mhz, cond.sm_clock_median_mhz
    rec.mem_clock_mhz, rec.power_w, rec.temperature_c = cond.mem_clock_mhz, cond.power_w, cond.temperature_c
    rec.throttle, rec.throttled = list(cond.throttle), cond.throttled
    rec.energy_j_per_launch = conditions.energy_per_launch_j(cond, rec.median_ms)
    rec.gflops_per_watt = derived.gflops_per_watt(rec.flops, rec.energy_j_per_launch)


def final_records(results: list[ResultRecord]) -> list[ResultRecord]:
    """New copies of a sweep's records with the post-run columns (speed-up over naive,
    % of cuBLAS) filled in; the records already sent in result events stay unchanged."""
    final = [dataclasses.replace(r, params=dict(r.params), extra=dict(r.extra),
                                 by_shape=list(r.by_shape), throttle=list(r.throttle))
             for r in results]
    derived.fill_speedups(final)
    derived.fill_pct_of_cublas(final)
    return final
