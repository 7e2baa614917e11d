"""Autotuning: search a variant's parameter space on the current device, remember the best.

Backend-agnostic: a search is an ordinary :class:`~engine.run.runner.Plan` (every valid
combination of the variant's space, or the combinations given, at one shape) run by a
:class:`~engine.run.runner.Sweep`; the fastest verified record wins. The winner is stored in
a JSON cache keyed by (backend, device name, variant, dtype, shape), so a second call
for the same key runs nothing (``retune=True`` searches again).

Cache file: ``$MATMUL_LAB_CACHE/autotune.json`` when that variable is set (a path ending
in ``.json`` is taken as the file itself), else ``~/.cache/matmul-lab/autotune.json``
(``$XDG_CACHE_HOME`` honoured).

Shape classes: a search also records what it learnt about every combination it timed:
the entry of a shape holds, besides the winner (``params``), ``relative`` (each timed
combination's speed relative to the shape's best, 1.0 for the winner) and ``class``
(:func:`shape_class`). The knowledge of a class is read from the entries of its shapes
(:func:`class_stats`: per combination, the mean relative speed over the class's shapes
where it can run),
so it follows the class definition and old entries (winner only) still count.
:func:`guess` gives the parameters to try first at a shape not searched yet: its own
entry, else the class's most successful parameters valid at the shape, else (a class not
searched yet) the best valid parameters of the nearest searched shape
(:func:`shape_distance`), else the variant's defaults on the device's architecture. ``autotune(..., mode="guess")`` times
only the class's best few (and the default) instead of the whole space; a guess is not
stored (the cache keeps full searches only).

Entry points:

* :func:`autotune` ``(sweep_or_engine, backend, device, variant, shape, dtype, ...)
  -> (best_params, records)``: one variant at one shape; ``records`` are the search's
  records (empty when the cache answered). Give it a :class:`Sweep` on the engine
  thread, or an :class:`~engine.run.worker.EngineThread` from any other thread (it blocks).
  ``mode="guess"``: time the guessed parameters only (see above).
* :func:`guess` ``(backend, device_name, variant, dtype, shape, exclude_exact=...)``:
  the parameters to try first; ``exclude_exact=True`` ignores the shape's own entry
  (leave-one-out: how close does the class get to a full search?).
  :func:`guess_candidates` says where they came from; :func:`relative_speed` reads a
  searched shape's relative speed of any combination it timed.
* ``Plan(autotune=True, retune=...)``: an engine (``engine.run.worker``) or a multi-device
  run (``engine.run.dispatch``) hands such a plan to :func:`run_autotuned`, which tunes
  every variant of the plan at every shape and returns one record per (variant, shape):
  that of the best parameters (a fresh timed run when the cache answered). The plan's
  ``tune`` attribute (``"search"``, the default, or ``"guess"``) or ``run_autotuned(...,
  mode=...)`` chooses a full search or a guess. This module sits above the runner: the
  runner never imports it.
"""
from __future__ import annotations

import enum
import json
import math
import os
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Union

from engine.common.dtypes import Layout, TypeSpec
from engine.kernels import registry
from engine.common.files import TEXT_FILE_LIMIT, read_bytes, write_atomic
from engine.results.records import RecordStatus, ResultRecord, now_stamp
from engine.run.events import EventKind, LogLevel
from engine.kernels.registry import params_from_str, params_to_str
from engine.measure.timing import NoiseStop
from engine.run.runner import CancelToken, Event, Plan, final_records

CACHE_ENV = "MATMUL_LAB_CACHE"
CACHE_FILE = "autotune.json"
_LOCK = threading.Lock()

Shape = tuple[int, int, int]
#: ``autotune(mode=...)`` and ``Plan.tune``: the whole space, or the guessed few.
MODES = ("search", "guess")
#: How many of a class's best combinations a guess times (the default is added to them).
GUESS_TOP = 3

#: Size buckets of one dimension, (largest size, name); larger sizes are ``large``.
#: skinny: at most one 64-wide tile along it (GEMV-like: tiles are mostly padding, small
#: tiles and split-K decide); small: a handful of 128-wide tiles (≤ 4 per side, 16
#: blocks for 512²: far from filling 100+ SMs, so split-K and small tiles win); medium:
#: fewer than 16 tiles of 128 per side, i.e. under two waves of 128×128 blocks on a
#: 132-SM H100/H200, where wave quantisation picks the tile (ffma_regdb's best is bm=64
#: at 1024–1792, bm=128 at 2048 and 4096; benchmarks/NOTES.md, ladder v5); large: two
#: waves or more, throughput-bound, the biggest tiles win (ffma_wide bk=16 at 2048–8192).
#: K uses the same edges: few k-tiles (skinny, small) starve a deep pipeline and make
#: split-K worth it, many do not.
SIZE_BUCKETS = ((64, "skinny"), (512, "small"), (2047, "medium"))


def size_bucket(n: int) -> str:
    """``skinny`` (≤ 64), ``small`` (≤ 512), ``medium`` (< 2048) or ``large``."""
    return next((name for edge, name in SIZE_BUCKETS if n <= edge), "large")


def shape_class(shape) -> str:
    """The class of an M×N×K shape for learning parameters: a size bucket per dimension
    (:func:`size_bucket`) and whether the rows of A, B and C are whole float4s (N and K
    multiples of 4: the kernels' 16-byte vector copies and fast paths, else their scalar
    fallbacks). E.g. ``large-large-large/vec4`` (3000³), ``large-large-large/novec``
    (4100×4090×4095), ``skinny-large-large/vec4`` (1×4096×4096 and 1×8192×8192)."""
    m, n, k = (int(x) for x in shape)
    return f"{size_bucket(m)}-{size_bucket(n)}-{size_bucket(k)}/{'vec4' if _aligned(shape) else 'novec'}"


def _aligned(shape) -> bool:
    """N and K multiples of 4: the rows of A, B and C are whole float4s."""
    return int(shape[1]) % 4 == 0 and int(shape[2]) % 4 == 0


def shape_distance(a, b) -> float:
    """How far apart two M×N×K shapes are for learning parameters: the sum over M, N and K
    of |log2| of their ratio (a factor of 2 in one dimension counts 1), plus 1 where one
    has whole float4 rows and the other not (as :func:`shape_class` tells them apart)."""
    d = sum(abs(math.log2(max(int(x), 1) / max(int(y), 1))) for x, y in zip(a, b))
    return d + (0.0 if _aligned(a) == _aligned(b) else 1.0)


def cache_path() -> Path:
    """Where the autotune cache lives (see the module docstring)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        p = Path(env).expanduser()
        return p if p.suffix == ".json" else p / CACHE_FILE
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "matmul-lab" / CACHE_FILE


#: A run's numbers as the cache functions take them: the input type's name (its default C,
#: B as K×N), or the run's :class:`~engine.common.dtypes.TypeSpec` (C's type, B's layout).
Types = Union[str, TypeSpec]


def run_types(dtype: Types) -> TypeSpec:
    return dtype if isinstance(dtype, TypeSpec) else TypeSpec(dtype)


def type_tag(dtype: Types) -> str:
    """The cache key's name for a run's numbers: the input type alone where C is its default
    and B is K×N (the keys caches always had), else with C's type and B's layout
    (``bfloat16>bfloat16/nk``): a winner with C in BF16 or B as N×K is its own entry."""
    spec = run_types(dtype)
    tag = str(spec.element) + (f">{spec.out_dtype}" if spec.out_dtype else "")
    return tag + ("/nk" if spec.layout is Layout.NK else "")


def _check(v, backend: str, params, shape: Shape, dtype: Types) -> str | None:
    """:meth:`Variant.check` at ``shape`` in the run's input type and B's layout."""
    spec = run_types(dtype)
    return v.check(backend, params, *shape, str(spec.element), str(spec.layout))


def cache_key(backend: str, device: str, variant: str, dtype: Types, shape: Shape) -> str:
    m, n, k = shape
    return f"{backend}|{device}|{variant}|{type_tag(dtype)}|{m}x{n}x{k}"


# --- reading and writing the cache file -----------------------------------------------
#
# The cache is the user's file (``$MATMUL_LAB_CACHE`` may name anything): it may be a
# folder, a named pipe, a loop of links, text that is not JSON, or sit where nothing can
# be written. None of that may cost a search its results: a cache that cannot be read is
# left as it is (writing over it would lose what it holds), a malformed one is set aside
# under a new name, and a cache that cannot be written is said before the search and
# again when a write fails; the search's records are returned all the same.


class CacheIssue(enum.Enum):
    """What is wrong with the autotune cache."""

    #: It is there but cannot be read (a folder, a pipe, a link loop, too large, no
    #: permission): left as it is, and never written over.
    UNREADABLE = "unreadable"
    #: Its text is not a JSON object: renamed aside (``set_aside``) and a new cache begins.
    MALFORMED = "malformed"
    #: It cannot be written (its folder is a file, read-only, the disk is full).
    UNWRITABLE = "unwritable"


@dataclass(frozen=True)
class CacheProblem:
    """One problem with the autotune cache, said once per run.

    ``reason`` is a sentence naming the file and what is wrong; ``set_aside`` is where a
    malformed cache was moved (None when it was not moved); ``lost`` is True when search
    results are (or will be) not cached because of it."""

    issue: CacheIssue
    path: Path
    reason: str
    set_aside: Path | None = None
    lost: bool = False

    def message(self) -> str:
        if self.issue is CacheIssue.MALFORMED and self.set_aside is not None:
            return (f"{self.reason}; it was set aside as {self.set_aside.name} (in "
                    f"{self.set_aside.parent}) and a new cache is started")
        if self.issue is CacheIssue.UNWRITABLE:
            return self.reason + ("; results will not be cached" if self.lost else "")
        tail = "; it is left as it is"
        return self.reason + tail + ("; results will not be cached" if self.lost
                                     else "; nothing is read from it")


class CacheError(Exception):
    """The autotune cache could not be read back or written; ``problem`` says how."""

    def __init__(self, problem: CacheProblem):
        super().__init__(problem.message())
        self.problem = problem


class AutotuneCacheWarning(UserWarning):
    """A cache problem met by a caller of :func:`autotune` that gave no ``emit``."""


@dataclass
class CacheEvent(Event):
    """A ``log`` event (level ``warning``) about the cache, with the typed problem, so
    that a caller can act on it (the command line's exit code) and say it once."""

    problem: CacheProblem | None = None


@dataclass
class CacheState:
    """The cache as a search finds it: its entries (empty when it could not be read),
    whether a search's results can be stored, and the problems met on the way."""

    path: Path
    data: dict[str, Any]
    writable: bool
    problems: list[CacheProblem] = field(default_factory=list)


class _Failed(Exception):
    """engine.common.files' message for a cache that cannot be read or written."""


def _label(path: Path) -> str:
    return f"the autotune cache {path}"


def _set_aside(path: Path) -> Path:
    """Rename a malformed cache beside itself (``autotune.json.malformed-<time>``); never
    over an existing file. Raises OSError when it cannot be moved."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.malformed-{stamp}")
    n = 1
    while os.path.lexists(aside):
        n += 1
        aside = path.with_name(f"{path.name}.malformed-{stamp}-{n}")
    os.rename(path, aside)
    return aside


def _read_cache(path: Path, lost: bool) -> tuple[dict[str, Any] | None, list[CacheProblem]]:
    """``(entries, problems)``; entries None when the file is there but cannot be read (or
    was malformed and could not be moved aside): then it must not be written over."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return {}, []          # no cache yet (or its folder is a file: the write check says it)
    except (OSError, ValueError):
        pass                   # a link loop, no permission: read_bytes words it
    try:
        raw = read_bytes(path, _label(path), _Failed, max_bytes=TEXT_FILE_LIMIT)
    except _Failed as exc:
        return None, [CacheProblem(CacheIssue.UNREADABLE, path, str(exc).rstrip("."), lost=lost)]
    try:
        data = json.loads(raw.decode("utf-8"))
        why = None if isinstance(data, dict) else f"holds a JSON {type(data).__name__}, not an object"
    except UnicodeDecodeError as exc:
        why = f"is not UTF-8 text (byte {exc.start})"
    except json.JSONDecodeError as exc:
        why = f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
    except (ValueError, RecursionError):
        why = "is not valid JSON (nested too deeply or a number too long)"
    if why is None:
        return data, []
    reason = f"{_label(path)} {why}"
    try:
        aside = _set_aside(path)
    except OSError as exc:
        return None, [CacheProblem(CacheIssue.MALFORMED, path,
                                   f"{reason}, and it cannot be set aside ({exc.strerror or exc})",
                                   lost=lost)]
    return {}, [CacheProblem(CacheIssue.MALFORMED, path, reason, set_aside=aside)]


def _write_problem(path: Path) -> str | None:
    """Why a new cache file could not be written at ``path`` (its folder made, a file
    created and removed there), or None when it can."""
    target = path
    try:
        if path.is_symlink():
            target = path.resolve(strict=False)
    except (OSError, RuntimeError, ValueError):
        return f"{_label(path)} is a loop of symbolic links"
    folder = target.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        why = "a file is in the way" if isinstance(exc, (FileExistsError, NotADirectoryError)) \
            else (getattr(exc, "strerror", None) or str(exc))
        return f"{_label(path)} cannot be written: its folder {folder} cannot be made ({why})"
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".probe", dir=folder)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return f"{_label(path)} cannot be written: its folder {folder} does not take new files " \
               f"({exc.strerror or exc})"
    return None


def prepare_cache(path: Path | None = None, writing: bool = True) -> CacheState:
    """Read the cache before a search and say what stands in its way: a cache that cannot
    be read (left as it is), a malformed one (set aside now), and with ``writing`` one
    that cannot be written (checked by creating a file beside it). Never raises for the
    file; the search goes on from what could be read."""
    path = path or cache_path()
    with _LOCK:
        data, problems = _read_cache(path, lost=writing)
    writable = writing and data is not None
    if writable:
        why = _write_problem(path)
        if why is not None:
            writable = False
            problems.append(CacheProblem(CacheIssue.UNWRITABLE, path, why, lost=True))
    return CacheState(path, data if data is not None else {}, writable, problems)


def load_cache(path: Path | None = None) -> dict[str, Any]:
    """The cache's entries; empty when there is none or it cannot be read (a search's
    :func:`prepare_cache` says why)."""
    path = path or cache_path()
    try:
        raw = read_bytes(path, _label(path), _Failed, max_bytes=TEXT_FILE_LIMIT)
        data = json.loads(raw.decode("utf-8"))
    except (_Failed, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def report_cache_problem(problem: CacheProblem, emit=None) -> None:
    """Say ``problem`` as a warning: a :class:`CacheEvent` through ``emit``, else a Python
    warning (a library caller without events still hears of it)."""
    if emit is not None:
        emit(CacheEvent(EventKind.LOG, problem.message(), level=LogLevel.WARNING, problem=problem))
    else:
        warnings.warn(problem.message(), AutotuneCacheWarning, stacklevel=3)


def _entry_params(entry: Any) -> dict[str, int] | None:
    """An entry's winning parameters, or None for a malformed entry."""
    if not isinstance(entry, dict) or not isinstance(entry.get("params"), dict):
        return None
    params = {}
    for k, v in entry["params"].items():
        # A hand-edited cache may hold anything: only whole numbers (not true/false, not
        # 1.5 nor 1e400) are parameter values.
        if not isinstance(v, int) or isinstance(v, bool):
            return None
        params[str(k)] = v
    return params


def lookup(backend: str, device: str, variant: str, dtype: Types, shape: Shape,
           path: Path | None = None, data: Mapping[str, Any] | None = None
           ) -> dict[str, int] | None:
    """The cached best parameters, or None. Entries whose parameters the variant no
    longer offers are ignored (the space changed since)."""
    data = load_cache(path) if data is None else data
    params = _entry_params(data.get(cache_key(backend, device, variant, dtype, shape)))
    if params is None:
        return None
    v = registry.get(variant)
    if _check(v, backend, params, shape, dtype) is not None:
        return None
    return params


def _pkey(params: Mapping[str, int]) -> str:
    """A combination as a ``relative`` key: ``name=value`` pairs, names sorted."""
    return params_to_str({k: int(params[k]) for k in sorted(params)})


def relative_speeds(records: Iterable[ResultRecord], best: ResultRecord) -> dict[str, float]:
    """Each timed combination's speed relative to ``best`` (best / its time; 1.0 for
    the winner); records that failed, were wrong or were skipped are left out."""
    out: dict[str, float] = {}
    for r in records:
        if (r.status in (RecordStatus.OK, RecordStatus.UNVERIFIED) and r.passed is not False
                and math.isfinite(r.median_ms) and r.median_ms > 0):
            rel = round(min(1.0, best.median_ms / r.median_ms), 4)
            key = _pkey(r.params)
            out[key] = max(rel, out.get(key, 0.0))
    out[_pkey(best.params)] = 1.0
    return out


def store(backend: str, device: str, variant: str, dtype: Types, shape: Shape,
          best: ResultRecord, searched: int, path: Path | None = None,
          records: Iterable[ResultRecord] | None = None) -> list[CacheProblem]:
    """Write one entry (read-modify-write, atomic rename). With the search's
    ``records``, the entry also keeps each combination's relative speed (what the
    shape's class learns from).

    Returns the problems that did not stop the write (a malformed cache set aside).
    Raises :class:`CacheError` when the entry was not stored: the cache cannot be read
    back (it is not written over) or cannot be written (the earlier file is unchanged)."""
    path = path or cache_path()
    entry = {"params": dict(best.params), "median_ms": best.median_ms, "gflops": best.gflops,
             "searched": searched, "timestamp": now_stamp(), "versions": best.versions,
             "class": shape_class(shape)}
    if records is not None:
        entry["relative"] = relative_speeds(records, best)
    with _LOCK:
        # Read again: another search (another window, another process) may have added
        # entries since this one began.
        data, problems = _read_cache(path, lost=True)
        if data is None:
            raise CacheError(problems[0])
        data[cache_key(backend, device, variant, dtype, shape)] = entry
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError):
            pass                # write_atomic says what is wrong with the folder
        try:
            # The cache path is the user's choice (an environment variable, their home):
            # a link there is followed, as it always was for reading.
            write_atomic(path, json.dumps(data, indent=1, sort_keys=True) + "\n",
                         _label(path), _Failed, follow_links=True)
        except _Failed as exc:
            raise CacheError(CacheProblem(CacheIssue.UNWRITABLE, path,
                                          str(exc).rstrip("."), lost=True)) from None
    return problems


# --- what a class has learnt, and guesses from it ----------------------------------------

def _shape_of(text: str) -> Shape | None:
    parts = text.split("x")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)  # type: ignore[return-value]


def searched_shapes(backend: str, device: str, variant: str, dtype: Types,
                    path: Path | None = None, data: Mapping[str, Any] | None = None
                    ) -> dict[Shape, dict]:
    """Every searched shape of (backend, device, variant, dtype) in the cache, with its
    entry."""
    data = load_cache(path) if data is None else data
    prefix = cache_key(backend, device, variant, dtype, (0, 0, 0))[:-len("0x0x0")]
    out: dict[Shape, dict] = {}
    for key, entry in data.items():
        if key.startswith(prefix) and _entry_params(entry) is not None:
            shape = _shape_of(key[len(prefix):])
            if shape is not None:
                out[shape] = entry
    return out


def relative_speed(backend: str, device: str, variant: str, dtype: Types, shape: Shape,
                   params: Mapping[str, int], path: Path | None = None) -> float | None:
    """How fast ``params`` ran at a searched ``shape`` relative to its best (1.0: the
    winner), from the shape's entry; None when that search did not time them."""
    entry = searched_shapes(backend, device, variant, dtype, path).get(tuple(shape))
    if entry is None:
        return None
    speed = _entry_speeds(entry).get(_pkey(params))
    if speed is not None:
        return speed
    return 1.0 if _entry_params(entry) == dict(params) else None


def _entry_speeds(entry: Mapping[str, Any]) -> dict[str, float]:
    """A searched shape's timed combinations (``params_to_str`` keys) and their speeds
    relative to its best: the entry's finite ``relative`` values, the winner at 1.0 (old
    entries hold the winner only)."""
    rel = entry.get("relative")
    rel = dict(rel) if isinstance(rel, dict) else {}
    rel[_pkey(_entry_params(entry))] = 1.0
    out: dict[str, float] = {}
    for key, x in rel.items():
        # Hand-edited or damaged entries: keys that are no combination, values that are
        # no finite number (true, "fast", 1e999, an integer past float's range) are skipped.
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not _is_combo(key):
            continue
        try:
            x = float(x)
        except OverflowError:
            continue
        if math.isfinite(x):
            out[key] = x
    return out


def _is_combo(key: Any) -> bool:
    """Whether a ``relative`` key reads as a combination (``bk=16,sw=8``)."""
    try:
        return isinstance(key, str) and all(
            isinstance(v, int) for v in params_from_str(key).values())
    except ValueError:
        return False


@dataclass
class ClassStats:
    """What the searches of one shape class taught: the shapes, and per combination its
    mean relative speed over them (weighted by nearness to the shape guessed for, when
    there is one; 0 where a search did not time it or it failed) and
    on how many it won; best first."""

    shape_class: str
    shapes: list[Shape] = field(default_factory=list)
    #: ``(params, mean relative speed, wins)``, best first.
    ranked: list[tuple[dict[str, int], float, int]] = field(default_factory=list)


def class_stats(backend: str, device: str, variant: str, dtype: Types, cls: str,
                exclude: Shape | None = None, path: Path | None = None,
                data: Mapping[str, Any] | None = None, near: Shape | None = None) -> ClassStats:
    """The knowledge of class ``cls``, from the cache entries of its shapes (``exclude``:
    one shape left out). With ``near`` (the shape to guess for) each shape's say is
    weighted by ``2 ** -shape_distance(shape, near)``: a class spans M, N or K over a
    factor of 4 to 100 (``skinny``: 1 to 64; ``large``: 2048 and up), and split-K depths
    and tile heights follow the tile count, so the nearer shapes know more."""
    stats = ClassStats(cls)
    total: dict[str, float] = {}
    wins: dict[str, int] = {}
    timed: dict[str, set[Shape]] = {}
    weight: dict[Shape, float] = {}
    for shape, entry in sorted(searched_shapes(backend, device, variant, dtype, path, data).items()):
        if shape_class(shape) != cls or (exclude is not None and shape == tuple(exclude)):
            continue
        stats.shapes.append(shape)
        w = weight[shape] = 1.0 if near is None else 2.0 ** -shape_distance(shape, near)
        winner = _pkey(_entry_params(entry))
        for key, value in _entry_speeds(entry).items():
            total[key] = total.get(key, 0.0) + w * value
            timed.setdefault(key, set()).add(shape)
        wins[winner] = wins.get(winner, 0) + 1
    # A combination's mean is over the class's shapes where it can run: ffma_regdb's
    # 80-row tile is valid only for M = 65..80, so the 96- and 150-row shapes of its class
    # say nothing about it (counting them as 0 ranked it under the 64-row tile at 80 rows,
    # where it is 20% faster). Searched-but-untimed or failed still count as 0.
    runs = _valid_weights(backend, variant, dtype, weight, timed)
    order = sorted(total, key=lambda key: (-total[key] / runs[key], -wins.get(key, 0), key))
    stats.ranked = [(params_from_str(key), total[key] / runs[key], wins.get(key, 0)) for key in order]
    return stats


def _valid_weights(backend: str, variant: str, dtype: Types, weight: Mapping[Shape, float],
                   timed: Mapping[str, set[Shape]]) -> dict[str, float]:
    """For each combination (``params_to_str`` key) and the shapes where it was timed, the
    summed ``weight`` of the class's shapes where it can run: those, plus the others where
    :meth:`Variant.check` lets it (only these are checked: a check costs ~0.1 ms); all of
    them for a variant the registry does not know (any more)."""
    try:
        v = registry.get(variant)
    except KeyError:
        v = None
    everywhere = sum(weight.values())
    out = {}
    for key, where in timed.items():
        rest = [s for s in weight if s not in where]
        if v is None or not rest:
            out[key] = everywhere or 1.0
            continue
        params = params_from_str(key)
        out[key] = (sum(weight[s] for s in where)
                    + sum(weight[s] for s in rest if _check(v, backend, params, s, dtype) is None)) or 1.0
    return out


@dataclass
class Guess:
    """The parameters to try first at a shape, best first, and where they came from:
    ``exact`` (the shape's own search), ``class`` (its class's searches), ``nearest``
    (no shape of its class searched, or none of the class's parameters valid here: the
    nearest searched shape's, :attr:`near`), ``default`` (the variant's defaults; nothing
    learnt that can run here) or ``none`` (nothing valid)."""

    candidates: list[dict[str, int]]
    source: str
    shape_class: str
    #: Shapes of the class the guess learnt from.
    shapes: int = 0
    #: ``class``: each candidate's mean relative speed over those shapes.
    scores: list[float] = field(default_factory=list)
    #: Combinations the class liked that cannot run here, with the reason.
    skipped: list[tuple[dict[str, int], str]] = field(default_factory=list)
    #: ``default``: the architecture whose defaults were taken (None: portable).
    arch: str | None = None
    #: ``nearest``: the searched shape the guess learnt from.
    near: Shape | None = None

    @property
    def params(self) -> dict[str, int] | None:
        return dict(self.candidates[0]) if self.candidates else None

    def describe(self) -> str:
        if self.source == "exact":
            return f"cached {self.params}"
        if self.source == "class":
            plural = "" if self.shapes == 1 else "s"
            out = f"guessed from class {self.shape_class} ({self.shapes} shape{plural})"
            if self.skipped:
                out += f", {len(self.skipped)} of its combinations invalid here skipped"
            return out
        if self.source == "nearest":
            m, n, k = self.near
            return (f"no shape of class {self.shape_class} searched yet: guessed from the "
                    f"nearest searched shape {m}x{n}x{k} (class {shape_class(self.near)})")
        if self.source == "default":
            where = f" for {self.arch}" if self.arch else ""
            return (f"no shape of class {self.shape_class} searched yet: "
                    f"default parameters{where}")
        return f"no valid parameters (class {self.shape_class})"


def guess_candidates(backend: str, device: str, variant: str, dtype: Types, shape: Shape, *,
                     combos: Iterable[Mapping[str, int]] | None = None,
                     exclude_exact: bool = False, arch: str | None = None,
                     top: int = 1, path: Path | None = None,
                     data: Mapping[str, Any] | None = None) -> Guess:
    """Up to ``top`` parameter sets to try first for ``variant`` at ``shape`` on the
    device named ``device``, each valid there (:meth:`Variant.check`) and among
    ``combos`` when given: the shape's own cache entry (unless ``exclude_exact``), else
    the best of its class (:func:`class_stats`), else the best of the nearest searched
    shape (:func:`shape_distance`), else the default parameters on ``arch`` (the first
    valid combination when even those cannot run here). ``data``: the cache's entries
    when already read (else they are read from ``path``)."""
    v = registry.get(variant)
    shape = tuple(int(x) for x in shape)
    cls = shape_class(shape)
    data = load_cache(path) if data is None else data
    pool = None if combos is None else _at_shape(v, combos, shape)

    def why_not(p: Mapping[str, int]) -> str | None:
        if pool is not None and dict(p) not in pool:
            return "not among the parameters to search"
        return _check(v, backend, p, shape, dtype)

    if not exclude_exact:
        exact = lookup(backend, device, variant, dtype, shape, data=data)
        if exact is not None and why_not(exact) is None:
            return Guess([exact], "exact", cls, 1)
    stats = class_stats(backend, device, variant, dtype, cls,
                        exclude=shape if exclude_exact else None, data=data, near=shape)
    g = Guess([], "class", cls, len(stats.shapes))
    g.candidates, g.scores = _valid_first(v, ((p, score) for p, score, _wins in stats.ranked),
                                          why_not, top, g.skipped)
    if g.candidates:
        return g
    near = _nearest_candidates(backend, device, variant, dtype, shape, why_not, top,
                               exclude=shape if exclude_exact else None, data=data)
    if near is not None:
        g.source, g.near, g.candidates, g.scores = "nearest", near[0], near[1], near[2]
        g.shapes = 1
        return g
    name = registry.arch_name(arch)
    default = v.default_params(name)
    g.source, g.arch = "default", (name if v.arch_overrides(name) else None)
    if why_not(default) is None:
        g.candidates = [default]
        return g
    first = next((p for p in (pool if pool is not None else v.combos()) if why_not(p) is None), None)
    if first is None:
        g.source = "none"
    else:
        g.candidates, g.arch = [dict(first)], None
    return g


def _valid_first(v, ranked: Iterable[tuple[Mapping[str, int], float]],
                 why_not: Callable[[Mapping[str, int]], str | None], top: int,
                 skipped: list | None = None) -> tuple[list[dict[str, int]], list[float]]:
    """The first ``top`` of ``ranked`` ``(params, score)`` that can run here (``why_not``
    None), in the space's parameter order, with their scores; the others met on the way
    go to ``skipped`` with their reason."""
    cands: list[dict[str, int]] = []
    scores: list[float] = []
    for params, score in ranked:
        params = {k: params[k] for k in v.space if k in params} | dict(params)
        why = why_not(params)
        if why is not None:
            if skipped is not None:
                skipped.append((params, why))
            continue
        cands.append(params)
        scores.append(score)
        if len(cands) >= max(1, top):
            break
    return cands, scores


def _nearest_candidates(backend: str, device: str, variant: str, dtype: Types, shape: Shape,
                        why_not: Callable[[Mapping[str, int]], str | None], top: int, *,
                        exclude: Shape | None, data: Mapping[str, Any]):
    """``(shape searched, candidates, their relative speeds there)`` from the searched shape
    nearest to ``shape`` (:func:`shape_distance`; the next nearest when none of a shape's
    timed combinations is valid here), or None when no searched shape has one. A
    combination's rank is its speed at that shape relative to the shape's best."""
    v = registry.get(variant)
    found = searched_shapes(backend, device, variant, dtype, data=data)
    order = sorted((s for s in found if exclude is None or s != tuple(exclude)),
                   key=lambda s: (shape_distance(s, shape), s))
    for near in order:
        speeds = _entry_speeds(found[near])
        ranked = sorted(speeds, key=lambda key: (-speeds[key], key))
        cands, scores = _valid_first(v, ((params_from_str(key), speeds[key]) for key in ranked),
                                     why_not, top)
        if cands:
            return near, cands, scores
    return None


def guess(backend: str, device: str, variant: str, dtype: Types, shape: Shape, *,
          exclude_exact: bool = False, combos: Iterable[Mapping[str, int]] | None = None,
          arch: str | None = None, path: Path | None = None) -> dict[str, int] | None:
    """The parameters to try first for ``variant`` at ``shape`` on the device named
    ``device`` (the cache keys' device name): the shape's own search, else its class's
    most successful parameters that are valid here, else the nearest searched shape's
    best valid ones, else the defaults on ``arch``
    (``"sm_90"`` or ``"9.0"``; None: the portable ones). None when nothing can run.
    ``exclude_exact=True`` leaves the shape's own entry out (leave-one-out)."""
    return guess_candidates(backend, device, variant, dtype, shape, combos=combos,
                            exclude_exact=exclude_exact, arch=arch, path=path).params


def best_record(records: Iterable[ResultRecord]) -> ResultRecord | None:
    """The fastest record that ran and was not found wrong (verified or unverified)."""
    ok = [r for r in records if r.status in (RecordStatus.OK, RecordStatus.UNVERIFIED) and r.passed is not False
          and math.isfinite(r.median_ms) and r.median_ms > 0]
    return min(ok, key=lambda r: r.median_ms) if ok else None


def _at_shape(v, combos: Iterable[Mapping[str, int]], shape: Shape) -> list[dict[str, int]]:
    """``combos`` as they run at ``shape``: values left to it (:data:`registry.AUTO`) resolved,
    as a cache entry or a record holds them."""
    return [v.resolve({str(k): int(x) for k, x in c.items()}, *shape) for c in combos]


def search_space(variant: str, backend: str, shape: Shape, dtype: Types,
                 combos: Iterable[Mapping[str, int]] | None = None) -> list[dict[str, int]]:
    """Valid combinations (``combos``, else the variant's whole space) at this shape, values
    left to the shape (:data:`registry.AUTO`) resolved there, each once."""
    v = registry.get(variant)
    out: list[dict[str, int]] = []
    for p in _at_shape(v, combos if combos is not None else v.combos(), shape):
        if p not in out and _check(v, backend, p, shape, dtype) is None:
            out.append(p)
    return out


# --- running plans on a Sweep, an EngineThread, or any executor ------------------------

#: ``execute(plan, emit, cancel) -> records``: runs one plain plan somewhere (a Sweep on
#: this thread, an engine thread, the engines of a multi-device run).
Execute = Callable


def _runner(sweep_or_engine) -> Execute:
    """A function ``(plan, emit, cancel) -> records`` for a Sweep, an EngineThread, or an
    executor function (returned as is)."""
    if hasattr(sweep_or_engine, "submit"):          # EngineThread: from another thread
        def run(plan, emit, cancel=None):
            job = sweep_or_engine.submit(plan, emit)
            if cancel is not None and cancel.cancelled:
                job.cancel()
            return job.result()
        return run
    if hasattr(sweep_or_engine, "run"):
        return lambda plan, emit, cancel=None: sweep_or_engine.run(plan, emit, cancel)
    return sweep_or_engine


def _device_info(sweep_or_engine, backend: str, device: int):
    if hasattr(sweep_or_engine, "ensure_open") and not hasattr(sweep_or_engine, "submit"):
        return sweep_or_engine.ensure_open(backend, device)
    from engine.measure.backends import probe_all  # noqa: PLC0415
    st = probe_all()[backend]
    if not st.available or not 0 <= device < len(st.devices):
        raise ValueError(f"{backend} device {device} is not available: {st.reason}")
    return st.devices[device]


def _device_name(sweep_or_engine, backend: str, device: int) -> str:
    return _device_info(sweep_or_engine, backend, device).name


def device_arch(info) -> str | None:
    """The architecture whose ``[defaults]`` apply on a device (``sm_90``): CUDA devices
    only (an OpenCL device runs the .cl kernels, which the tables do not describe)."""
    if info is None or getattr(info, "backend", None) != "cuda":
        return None
    return registry.arch_name(getattr(info, "compute_capability", None))


def _only_logs(emit):
    def inner(ev):
        if emit is not None and ev.kind == EventKind.LOG:
            emit(ev)
    return inner


def autotune(sweep_or_engine, backend: str, device: int, variant: str, shape: Shape,
             dtype: Types = "float32", *, warmup: int = 3, repeats: int = 10,
             time_budget_s: float | None = None, until_noise: NoiseStop | None = None,
             cold: bool = False, verify: bool = True, retune: bool = False, combos: Iterable[Mapping[str, int]] | None = None,
             seed: int = 0, dist: str = "uniform", emit=None, cancel=None,
             cache: Path | None = None, device_name: str | None = None,
             launch_timeout_s: float | None = None, mode: str = "search",
             guess_top: int = GUESS_TOP, arch: str | None = None,
             ) -> tuple[dict[str, int] | None, list[ResultRecord]]:
    """Best parameters of ``variant`` at ``shape`` on this device, and the search's records.

    ``warmup``, ``repeats``, ``time_budget_s`` and ``until_noise``: how each candidate
    is timed, as a :class:`~engine.run.runner.Plan` says (a run's search is timed by the
    run's own stop rule).

    ``sweep_or_engine`` is a :class:`~engine.run.runner.Sweep` (this thread), an
    :class:`~engine.run.worker.EngineThread` or an executor ``(plan, emit, cancel) ->
    records`` (then give ``device_name``, the cache key's device). With a cache entry
    (and not ``retune``) nothing runs: ``(params, [])``. Otherwise every valid
    combination is compiled, verified (unless ``verify=False``) and timed, the fastest
    record that was not wrong wins and is stored. ``best_params`` is None when nothing
    ran successfully (the records say why).

    ``mode="guess"``: instead of the whole space, time the ``guess_top`` best
    combinations of the shape's class (:func:`guess_candidates`) and the default
    parameters (on ``arch``, else the device's architecture), or only the defaults when
    the class has not been searched yet; the fastest wins and is not stored. With
    ``retune`` the shape's own entry is ignored (the guess comes from the others).

    The cache is checked before the search (:func:`prepare_cache`): a cache that cannot
    be read, a malformed one (set aside) and, for a search, one that cannot be written
    are said as :class:`CacheEvent` warnings through ``emit`` (else Python warnings), as
    is a write that fails after the search. None of them costs the search its records.
    """
    search = plan_search(sweep_or_engine, backend, device, variant, shape, dtype,
                         retune=retune, combos=combos, emit=emit, cache=cache,
                         device_name=device_name, mode=mode, guess_top=guess_top, arch=arch)
    if search.cached is not None:
        return search.cached, []
    plan = search.plan(warmup=warmup, repeats=repeats, time_budget_s=time_budget_s,
                       until_noise=until_noise, cold=cold, verify=verify, seed=seed, dist=dist,
                       launch_timeout_s=launch_timeout_s)
    recs = _runner(sweep_or_engine)(plan, _only_logs(emit), cancel)
    return finish_search(search, recs, emit)


@dataclass
class Search:
    """One (variant, shape) search before it runs (:func:`plan_search`): the cache's
    answer, or the candidates to time."""

    backend: str
    device: int
    device_name: str
    variant: str
    shape: Shape
    dtype: Types
    mode: str
    state: CacheState
    what: str
    cached: dict[str, int] | None = None
    tried: list[dict[str, int]] = field(default_factory=list)

    def plan(self, **timing) -> Plan:
        """The candidates as one plan, timed as ``timing`` (Plan's fields) says."""
        spec = run_types(self.dtype)
        return Plan(backend=self.backend, items=[(self.variant, p) for p in self.tried],
                    shapes=[self.shape], dtype=str(spec.element), out_dtype=spec.out_dtype,
                    layout=str(spec.layout), device=self.device, **timing)


def plan_search(sweep_or_engine, backend: str, device: int, variant: str, shape: Shape,
                dtype: Types = "float32", *, retune: bool = False,
                combos: Iterable[Mapping[str, int]] | None = None, emit=None,
                cache: Path | None = None, device_name: str | None = None,
                mode: str = "search", guess_top: int = GUESS_TOP,
                arch: str | None = None) -> Search:
    """What :func:`autotune` will do for (``variant``, ``shape``): the cache's entry (then
    nothing runs), else the candidates (the whole space, or a guess's). Raises ValueError
    where no parameters are valid there."""
    if mode not in MODES:
        raise ValueError(f"autotune mode must be {' or '.join(MODES)}, not {mode!r}")
    shape = tuple(int(x) for x in shape)
    if device_name is None:
        info = _device_info(sweep_or_engine, backend, device)
        name, arch = info.name, arch or device_arch(info)
    else:
        name = device_name
    what = f"autotune {variant} {run_types(dtype).label} {shape}"
    state = prepare_cache(cache, writing=mode == "search")
    for problem in state.problems:
        report_cache_problem(problem, emit)
    search = Search(backend, device, name, variant, shape, dtype, mode, state, what)
    if not retune:
        cached = lookup(backend, name, variant, dtype, shape, data=state.data)
        asked = combos is None or cached in _at_shape(registry.get(variant), combos, shape)
        if cached is not None and (mode == "search" or asked):
            if emit:
                emit(Event(EventKind.LOG, f"{what}: cached {cached}"))
                if not asked:    # the user restricted the parameters: say the cache won
                    emit(Event(EventKind.LOG, f"{what}: the cache's best, "
                                      f"{registry.kernel_label(variant, cached)}, is not among "
                                      "the parameters asked for; it is used (retune to search "
                                      "only those)", level=LogLevel.WARNING))
            search.cached = cached
            return search
    space = search_space(variant, backend, shape, dtype, combos)
    if not space:
        v = registry.get(variant)
        pool = list(combos) if combos is not None else v.combos()
        why = _check(v, backend, dict(pool[0]) if pool else {}, shape, dtype) or "empty space"
        raise ValueError(f"autotune: no valid parameters for {variant} at {shape}: {why}")
    tried = space
    if mode == "guess":
        g = guess_candidates(backend, name, variant, dtype, shape, combos=space,
                             exclude_exact=True, arch=arch, top=guess_top, data=state.data)
        tried = list(g.candidates)
        default = registry.get(variant).default_params(arch)
        if g.source in ("class", "nearest") and default in space and default not in tried:
            tried.append(default)                 # a guess never does worse than the default
        if emit:
            emit(Event(EventKind.LOG, f"{what}: {g.describe()}; timing {len(tried)} of "
                              f"{len(space)} combinations"))
    search.tried = list(tried)
    return search


def finish_search(search: Search, recs: list[ResultRecord],
                  emit=None) -> tuple[dict[str, int] | None, list[ResultRecord]]:
    """The winner of a search's records, stored in the cache after a full search."""
    best = best_record(recs)
    if best is None:
        return None, recs
    if search.mode == "search" and search.state.writable:   # not writable: said before
        try:
            for problem in store(search.backend, search.device_name, search.variant,
                                 search.dtype, search.shape, best, len(recs),
                                 search.state.path, records=recs):
                report_cache_problem(problem, emit)
        except CacheError as exc:
            report_cache_problem(exc.problem, emit)   # the records are returned all the same
    if emit:
        how = f"of {len(recs)} tried" if search.mode == "search" else \
            f"of {len(recs)} guessed (not stored; a full search: mode='search')"
        emit(Event(EventKind.LOG, f"{search.what}: best {best.label()} {best.median_ms:.4f} ms {how}"))
    return dict(best.params), recs


def _batched_searches(execute, plan, shape, spaces, fitting, emit, cancel, kw, *,
                      device_name, mode, arch, cache) -> list[ResultRecord | None]:
    """Every variant's search at ``shape`` as one plan (:func:`run_autotuned`'s ``batch``):
    the winning record of each, in the plan's variant order (None where nothing ran)."""
    searches: list[tuple[str, Search | None]] = []
    for vname, combos in spaces.items():
        if vname not in fitting:
            continue
        try:
            searches.append((vname, plan_search(execute, plan.backend, plan.device, vname, shape,
                                                plan.type_spec, retune=plan.retune, combos=combos,
                                                emit=emit, cache=cache, device_name=device_name,
                                                mode=mode, arch=arch)))
        except (ValueError, KeyError) as exc:
            emit(Event(EventKind.LOG, str(exc), level=LogLevel.ERROR))
            searches.append((vname, None))
    items = [(vname, p) for vname, sr in searches if sr is not None
             for p in ([sr.cached] if sr.cached is not None else sr.tried)]
    recs = []
    if items and not cancel.cancelled:
        one = Plan(backend=plan.backend, items=items, shapes=[shape], dtype=plan.dtype,
                   out_dtype=plan.out_dtype, layout=plan.layout,
                   device=plan.device, launch_timeout_s=plan.launch_timeout_s, **kw)
        recs = execute(one, _only_logs(emit), cancel)
    out: list[ResultRecord | None] = []
    for vname, sr in searches:
        mine = [r for r in recs if r.variant == vname]
        if sr is None or not mine:
            out.append(None)
            continue
        if sr.cached is not None:                # the cache's winner, timed once more
            out.append(mine[0])
            continue
        best, _ = finish_search(sr, mine, emit)
        rec = None if best is None else next(
            (r for r in mine if r.params == best and r.status in (RecordStatus.OK, RecordStatus.UNVERIFIED)), None)
        out.append(rec or mine[0])              # nothing ran: the first record says why
    return out


def _cache_problems_once(emit):
    """``emit`` passing each cache problem once: every search of a run checks the cache,
    and a cache that cannot be written says so at each."""
    seen: set[CacheProblem] = set()
    lock = threading.Lock()

    def inner(ev: Event) -> None:
        if isinstance(ev, CacheEvent) and ev.problem is not None:
            with lock:
                if ev.problem in seen:
                    return
                seen.add(ev.problem)
        emit(ev)
    return inner


def run_autotuned(sweep_or_execute, plan, emit, cancel=None, *, device_name: str | None = None,
                  frame: bool = True, mode: str | None = None,
                  arch: str | None = None, cache: Path | None = None,
                  batch: bool = False) -> list[ResultRecord]:
    """A plan with ``autotune`` set: one record per (variant, shape), that of the best
    parameters. The search space of a variant is the set of its items in the plan
    (``expand_items`` gives the whole space, or the ``--params`` restriction).

    ``sweep_or_execute`` runs the searches (see :func:`autotune`); with ``frame`` the
    ``started`` and ``finished`` events are emitted here, else the caller frames the run
    (a multi-device run does). ``mode`` (else the plan's ``tune``, else ``"search"``):
    a full search or a guess (:func:`autotune`); ``arch``: the architecture whose default
    parameters a guess falls back on (found from the device when it is opened here);
    ``cache``: the cache file (else :func:`cache_path`). Each cache problem is said once
    per run (:class:`CacheEvent`), before the first search that meets it.

    ``batch``: the searches of a shape run as one plan (every variant's candidates, and the
    cached winners timed once more), so that a run sharing its work over several devices
    keeps them all busy until the shape's last candidate, instead of waiting at the end of
    each search for its slowest piece. The winners and the cache are the same.
    """
    cancel = cancel or CancelToken()
    execute = _runner(sweep_or_execute)
    results: list[ResultRecord] = []
    mode = mode or getattr(plan, "tune", None) or "search"
    emit = _cache_problems_once(emit)
    try:
        plan.validate()
        if not plan.shapes:
            raise ValueError("autotune needs sizes (not loaded matrices)")
        if mode not in MODES:
            raise ValueError(f"autotune mode (tune) must be {' or '.join(MODES)}, not {mode!r}")
        if device_name is None:
            info = _device_info(sweep_or_execute, plan.backend, plan.device)
            device_name, arch = info.name, arch or device_arch(info)
    except ValueError as exc:
        emit(Event(EventKind.LOG, str(exc), level=LogLevel.ERROR))
        if frame:
            emit(Event(EventKind.FINISHED, str(exc)))
        return results
    spaces: dict[str, list[dict[str, int]]] = {}
    for vname, params in plan.items:
        spaces.setdefault(vname, []).append(dict(params))
    total = sum(len({n for n, _ in plan.items_at(s)}) for s in plan.shapes)
    if frame:
        how = "" if mode == "search" else f" ({mode})"
        emit(Event(EventKind.STARTED, f"autotune{how}: {total} (variant, shape) pairs", total=total))
        for note in plan.unfit_notes():
            emit(Event(EventKind.LOG, note))
    done = 0
    kw = dict(warmup=plan.warmup, repeats=plan.repeats, time_budget_s=plan.time_budget_s,
              until_noise=plan.until_noise, cold=plan.cold, verify=plan.verify, seed=plan.seed, dist=plan.dist)
    def deliver(rec: ResultRecord | None) -> None:
        nonlocal done
        if rec is not None:
            results.append(rec)
            done += 1
            emit(Event(EventKind.RESULT, record=rec, done=done, total=total))

    for shape in plan.shapes:
        fitting = {n for n, _ in plan.items_at(shape)}    # only_fitting: the others said above
        if batch:
            if cancel.cancelled:
                break
            label = f"autotune {len(fitting & set(spaces))} variant(s) @ {shape[0]}×{shape[1]}×{shape[2]}"
            emit(Event(EventKind.PROGRESS, label, done=done, total=total, current=label))
            for rec in _batched_searches(execute, plan, shape, spaces, fitting, emit, cancel,
                                         kw, device_name=device_name, mode=mode, arch=arch,
                                         cache=cache):
                deliver(rec)
            continue
        for vname, combos in spaces.items():
            if cancel.cancelled:
                break
            if vname not in fitting:
                continue
            label = f"autotune {vname} @ {shape[0]}×{shape[1]}×{shape[2]}"
            emit(Event(EventKind.PROGRESS, label, done=done, total=total, current=label))
            try:
                best, recs = autotune(execute, plan.backend, plan.device, vname, shape, plan.type_spec,
                                      retune=plan.retune, combos=combos, emit=emit, cancel=cancel,
                                      device_name=device_name, mode=mode, arch=arch,
                                      launch_timeout_s=plan.launch_timeout_s, cache=cache, **kw)
            except (ValueError, KeyError) as exc:
                emit(Event(EventKind.LOG, str(exc), level=LogLevel.ERROR))
                best, recs = None, []
            rec = None
            if best is not None and recs:
                rec = next((r for r in recs if r.params == best and r.status in (RecordStatus.OK, RecordStatus.UNVERIFIED)),
                           None)
            if best is not None and rec is None:         # cache hit: time the winner once more
                one = Plan(backend=plan.backend, items=[(vname, best)], shapes=[shape],
                           dtype=plan.dtype, out_dtype=plan.out_dtype, layout=plan.layout,
                           device=plan.device,
                           launch_timeout_s=plan.launch_timeout_s, **kw)
                got = execute(one, _only_logs(emit), cancel)
                rec = got[0] if got else None
            if rec is None and recs:                     # nothing ran: report why (first record)
                rec = recs[0]
            deliver(rec)
    final = final_records(results)
    if frame:
        emit(Event(EventKind.FINISHED, f"{done} of {total} autotuned", done=done, total=total,
                   cancelled=cancel.cancelled, started=True, records=final))
    return final
