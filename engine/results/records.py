"""Result records and their CSV / JSON files.

A record is one (backend, device, variant, params, shape, dtype, mode) measurement.
JSON files hold ``{"format": 2, "environment": {...}, "records": [...]}`` (older files: a
bare list of records, still read) with the field names below; CSV files hold the same
fields as columns, ``params`` written as ``name=value,...``, after the environment block
as leading ``# key: value`` lines (:mod:`engine.results.environment`).
"""
from __future__ import annotations

import csv
import io
import json
import math
import re
import time
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from engine.common.files import read_text, write_atomic
from engine.kernels.registry import AUTO, kernel_label, params_to_str
from engine.common.terminal import visible
from engine.results.status import RAN, RecordStatus  # noqa: F401
from engine.results import environment as env_block
from engine.results.environment import Environment
from engine.measure.timing import StopReason, TimingMode


@dataclass
class ResultRecord:
    backend: str
    device: str
    variant: str
    params: dict[str, int]
    m: int
    n: int
    k: int
    dtype: str
    mode: str = "hot"                  # "hot" (back to back) or "cold" (L2 flushed first)
    warmup: int = 0
    repeats: int = 0
    median_ms: float = math.nan
    min_ms: float = math.nan
    max_ms: float = math.nan
    mean_ms: float = math.nan
    noise_pct: float = math.nan
    gflops: float = math.nan
    gbps: float = math.nan
    verify_method: str = "none"
    rel_l2: float = math.nan
    max_abs: float = math.nan
    passed: bool | None = None         # None: not verified (or not run)
    error: str = ""
    timestamp: str = ""
    versions: str = ""
    status: RecordStatus = RecordStatus.OK
    flops: int = 0
    bytes: int = 0
    upload_ms: float = math.nan        # host→device transfer of the inputs, never in kernel time
    speedup_vs_naive: float = math.nan
    pct_of_peak: float = math.nan
    pct_of_cublas: float = math.nan
    source: str = ""                   # a label for overlays (file the record came from)
    #: Anything else a caller attached (kept as it is). The keys the app once kept here
    #: are the named fields below; an old file's are moved there (:data:`EXTRA_FIELDS`).
    extra: dict[str, Any] = field(default_factory=dict)
    host: str = ""                     # the machine it ran on (socket.gethostname())
    device_index: int = -1             # the device's index within its backend on that host
    worker: str = ""                   # the engine that ran it: "local", "process 1234", "ray …"
    #: Hardware counters of one profiled launch (engine.profile.nsight): ``counters`` (the curated
    #: metrics, engine.profile.metrics), ``kernels``, ``report`` (the .ncu-rep), ``tool``,
    #: ``error``. Empty when not profiled.
    profile: dict[str, Any] = field(default_factory=dict)
    #: A dispatch variant's record (engine.kernels.dispatch_table): the kernel and parameters
    #: its table picked at this shape and ran, e.g. ``ffma_wide[bm=256,bk=16]``; "" otherwise.
    dispatched_to: str = ""
    #: The parameters this run left to the shape (a plan's ``auto``): one chart curve.
    by_shape: list[str] = field(default_factory=list)
    #: The user's kernel file changed on disk after the run read it (what to say), or "".
    newer_source: str = ""
    #: The kernel did not build (the kernel file is at fault: ``bench`` exits 2).
    build_failed: bool = False
    #: What the backend says about the timing (launches not held back to back), or "".
    timing_note: str = ""
    #: The arithmetic the % of peak is of (fp32, tf32, int32); "": not recorded.
    precision: str = ""
    #: The peak (GFLOP/s) of that arithmetic and the device's measured copy bandwidth
    #: (GB/s) the record was compared with; NaN: not known.
    peak_gflops: float = math.nan
    copy_gbps: float = math.nan
    #: The GPU's conditions over the timed loop, from NVML (engine.measure.conditions);
    #: NaN / empty where not measured (no NVML: OpenCL, cpu, no driver). SM clock: the
    #: lowest and the median sample; memory clock: the median; power: the energy counter's
    #: mean over the loop (else the samples' median); temperature: the highest.
    sm_clock_min_mhz: float = math.nan
    sm_clock_median_mhz: float = math.nan
    mem_clock_mhz: float = math.nan
    power_w: float = math.nan
    temperature_c: float = math.nan
    #: The clock-event (throttle) reasons NVML reported during the loop (ThrottleReason values).
    throttle: list[str] = field(default_factory=list)
    #: Timed under a power or thermal cap (engine.measure.conditions.CAP_REASONS): kept, flagged.
    throttled: bool = False
    #: Joules per launch (engine.measure.conditions.energy_per_launch_j) and the
    #: efficiency it gives (engine.results.derived.gflops_per_watt).
    energy_j_per_launch: float = math.nan
    gflops_per_watt: float = math.nan
    #: How the timed launches were timed (engine.measure.timing.TimingMode: per-launch events,
    #: held back to back behind the stream hold, the host's clock); "": not recorded.
    timing_mode: TimingMode | str = ""
    #: The stop rule the series ran under ("repeats 20", "budget 0.05 s", "noise < 0.5% …")
    #: and what ended it (StopReason: the noise target met, its maximum time...); "": not recorded.
    stop_rule: str = ""
    stopped_by: StopReason | str = ""
    #: Every launch the item took on the device: verification, warm-up, timed, re-checks
    #: (``repeats`` counts the timed ones); 0: not recorded.
    launches: int = 0
    #: What was checked again after the timed launches, all passed ("last timed launch,
    #: second seed (sampled)"); "": nothing (not verified, or an older file).
    recheck: str = ""
    #: A share-mode run over several devices of one model (engine.run.dispatch): the devices,
    #: e.g. "2 × NVIDIA H200 (#0, #1)"; their records are one table (one lab best,
    #: engine.results.derived.table_key). "": the record's own device is its table.
    share_group: str = ""
    #: The output type of C and B's layout (engine.common.dtypes): "" in files written
    #: before half precision, meaning the input type and "kn" (B as K×N).
    out_dtype: str = ""
    layout: str = ""
    #: FP8's per-tensor scales of A and B (C = scale_a·scale_b·A·B); NaN: no scales.
    scale_a: float = math.nan
    scale_b: float = math.nan

    def __post_init__(self):
        # A status given as its word becomes the enum; a wrong one is left for
        # validate() to name (a record is built before it is checked).
        if type(self.status) is str and self.status in RecordStatus.__members__.values():
            self.status = RecordStatus(self.status)
        # The keys records once carried in ``extra`` (an old file, old code) go to their
        # fields, unless the field is set already.
        if isinstance(self.extra, Mapping) and any(k in self.extra for k in EXTRA_FIELDS):
            for key in EXTRA_FIELDS:
                if key in self.extra and _is_default(self, key):
                    setattr(self, key, self.extra[key])
            self.extra = {k: v for k, v in self.extra.items() if k not in EXTRA_FIELDS}

    def label(self) -> str:
        return kernel_label(self.variant, self.params)

    def series_params(self) -> dict[str, int]:
        """The parameters a chart curve groups by: those the shape picked in this run
        (:attr:`by_shape`, a plan's ``auto``) as ``auto``, so that a sweep that left
        them to the shape is one curve, whatever value each size ran."""
        return {k: (AUTO if k in self.by_shape else v) for k, v in self.params.items()}

    def series_label(self) -> str:
        """:meth:`label` with the values the shape picked shown as ``auto``."""
        return kernel_label(self.variant, self.series_params())

    def series_key(self) -> tuple:
        """What one chart curve groups by."""
        return (self.source, self.backend) + self.device_key() + (
            self.variant, params_to_str(self.series_params()), self.dtype, self.mode)

    def device_key(self) -> tuple:
        """One physical device: two GPUs of the same model on a host differ by index."""
        return (self.host, self.device, self.device_index)

    def device_label(self, with_host: bool = False) -> str:
        """``NVIDIA H200 #1`` (``@ host`` added on request): the device as users name it."""
        text = self.device + (f" #{self.device_index}" if self.device_index >= 0 else "")
        return text + (f" @ {self.host}" if with_host and self.host else "")


FIELDS = [f.name for f in fields(ResultRecord)]
#: The fields that were keys of ``extra`` in files written before they were fields.
EXTRA_FIELDS = ("by_shape", "newer_source", "build_failed", "timing_note", "precision",
                "peak_gflops", "copy_gbps")
_DEFAULTS = {f.name: f.default for f in fields(ResultRecord) if f.name in EXTRA_FIELDS
             and f.default is not MISSING}


def _is_default(rec: ResultRecord, name: str) -> bool:
    value = getattr(rec, name)
    if name == "by_shape":
        return not value
    default = _DEFAULTS[name]
    if isinstance(default, float) and math.isnan(default):
        return isinstance(value, float) and math.isnan(value)
    return value == default

def now_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _finite_or_none(val: Any) -> Any:
    """``val`` with every non-finite float (at any depth) replaced by None: JSON has no NaN."""
    if isinstance(val, float) and not math.isfinite(val):
        return None
    if isinstance(val, dict):
        return {k: _finite_or_none(v) for k, v in val.items()}
    if isinstance(val, (list, tuple)):
        return [_finite_or_none(v) for v in val]
    return val


def to_dict(rec: ResultRecord) -> dict[str, Any]:
    return {key: _finite_or_none(val) for key, val in asdict(rec).items()}


STATUSES = tuple(RecordStatus)
MODES = ("hot", "cold")


class ResultsFileError(ValueError):
    """A results file that cannot be read (the message names the file and the problem)."""


class RecordFieldError(ValueError):
    """One field of a record is wrong: ``field`` names it (``params.block`` inside a
    mapping), ``expected`` says what it should be. ``str()``: "field 'device_index' is
    1.5, not a whole number"."""

    def __init__(self, field: str, value: Any, expected: str):
        self.field, self.value, self.expected = field, value, expected
        super().__init__(f"field '{field}' is {_shown(value)}, not {expected}")


def _shown(value: Any) -> str:
    """A field's value as a message quotes it: short, and never a wall of text."""
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        text = repr(value)
        return text if len(text) <= 40 else text[:20] + "…" + f" ({len(text)} digits)"
    if isinstance(value, str):
        if not value.strip():
            return "empty" if not value else "blank"
        text = visible(value if len(value) <= 40 else value[:40] + "…")
        return f"'{text}'"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return f"a {type(value).__name__}"


# --- one parser per kind of field: the typed value, or RecordFieldError ------------------
# The same parsers read a JSON value, a CSV cell (text) and check a record's attribute,
# so a record loaded, journaled or built in code passes one set of rules.

_WHOLE_TEXT = re.compile(r"[+-]?[0-9]{1,40}")


def _whole(value: Any, name: str, low: int, high: int, default: int | None) -> int:
    """A whole number from ``low`` to ``high``; empty (None, "") is ``default`` (None:
    the field is required)."""
    expected = f"a whole number from {low} to {high}"
    if value is None or (isinstance(value, str) and not value.strip()):
        if default is None:
            raise RecordFieldError(name, value, expected)
        return default
    if isinstance(value, bool):
        raise RecordFieldError(name, value, "a whole number")
    if isinstance(value, int):
        out = value
    elif isinstance(value, float):
        if not value.is_integer():         # 1.5, NaN, infinity
            raise RecordFieldError(name, value, "a whole number")
        out = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if _WHOLE_TEXT.fullmatch(text):
            out = int(text)
        else:                              # "16.0", "1e3" (a CSV from a spreadsheet)
            try:
                num = float(text) if len(text) <= 64 else math.nan
            except ValueError:
                num = math.nan
            if not num.is_integer():
                raise RecordFieldError(name, value, "a whole number")
            out = int(num)
    else:
        raise RecordFieldError(name, value, "a whole number")
    if not low <= out <= high:
        raise RecordFieldError(name, value, expected)
    return out


def _real(value: Any, name: str, allow_inf: bool = False) -> float:
    """A number ≥ 0 (NaN when empty: not measured); infinity only where ``allow_inf``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return math.nan
    if isinstance(value, bool):
        raise RecordFieldError(name, value, "a number")
    try:
        if isinstance(value, (int, float)):
            out = float(value)
        elif isinstance(value, str) and len(value) <= 64:
            out = float(value)
        else:
            raise RecordFieldError(name, value, "a number")
    except (ValueError, OverflowError):
        raise RecordFieldError(name, value, "a number") from None
    if math.isinf(out) and not allow_inf:
        raise RecordFieldError(name, value, "a finite number")
    if out < 0:
        raise RecordFieldError(name, value, "a number ≥ 0")
    return out


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise RecordFieldError(name, value, "text")
    return value


def _name(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RecordFieldError(name, value, "a name")
    return value


def _optional_choice(options: tuple[str, ...]) -> Callable[[Any, str], str]:
    """One of ``options``, or "" (empty, None: a file from before the field)."""
    chosen = _choice(tuple(str(o) for o in options))
    return lambda value, name: "" if value in (None, "") else chosen(value, name)


def _choice(options: tuple[str, ...]) -> Callable[[Any, str], str]:
    def parse(value: Any, name: str) -> str:
        if not isinstance(value, str) or value not in options:
            raise RecordFieldError(name, value, f"one of {', '.join(options)}")
        return value
    return parse


def _word_of(enum) -> Callable[[Any, str], Any]:
    """A parser of one of ``enum``'s words (the member), or "" for empty (not recorded)."""
    words = tuple(e.value for e in enum)

    def parse(value: Any, name: str):
        if value is None or value == "":
            return ""
        if not isinstance(value, str) or value not in words:
            raise RecordFieldError(name, value, f"empty or one of {', '.join(words)}")
        return enum(value)
    return parse


def _status(value: Any, name: str) -> RecordStatus:
    if not isinstance(value, str) or value not in STATUSES:
        raise RecordFieldError(name, value, f"one of {', '.join(STATUSES)}")
    return RecordStatus(value)


_LABEL = re.compile(r"[a-z_][a-z0-9_]*(\[([a-z_][a-z0-9_]*=-?\d+(,[a-z_][a-z0-9_]*=-?\d+)*)?\])?")


def _kernel_label(value: Any, name: str) -> str:
    """A kernel as :func:`kernel_label` writes it (``ffma_wide[bm=256,bk=16]``), or ""."""
    text = "" if value is None else value
    if not isinstance(text, str) or (text and not _LABEL.fullmatch(text)):
        raise RecordFieldError(name, value, "a kernel and its parameters, as name[p=1,q=2]")
    return text


def _bool(value: Any, name: str) -> bool | None:
    """True, False, or None (not verified); CSV text true/false/1/0/yes/no."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
    raise RecordFieldError(name, value, "a boolean (true or false)")


def _json_mapping(value: Any, name: str, cell: bool = True) -> Mapping:
    """A mapping, or (``cell``: a field of its own, a CSV cell) one written as JSON;
    empty is ``{}``."""
    if value is None or (cell and isinstance(value, str) and not value.strip()):
        return {}
    if cell and isinstance(value, str):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            raise RecordFieldError(name, value, "a mapping written as JSON") from None
    if not isinstance(value, Mapping):
        raise RecordFieldError(name, value, "a mapping")
    for key in value:
        if not isinstance(key, str) or not key:
            raise RecordFieldError(name, value, "a mapping with names as keys")
    return value


#: The largest magnitude of a parameter value (a kernel's compile-time constant).
PARAM_LIMIT = 2**62


def _params(value: Any, name: str) -> dict[str, int]:
    """``{name: whole number}``, or its CSV text ``block=16,wpt=auto``."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return {}
    if isinstance(value, str):
        out: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in value.split(","))):
            key, sep, val = part.partition("=")
            if not sep or not key.strip():
                raise RecordFieldError(name, value, "name=value pairs such as block=16,wpt=4")
            out[key.strip()] = AUTO if val.strip().lower() == "auto" else val
        value = out
    if not isinstance(value, Mapping):
        raise RecordFieldError(name, value, "a mapping of parameter names to whole numbers")
    params: dict[str, int] = {}
    for key, val in value.items():
        if not isinstance(key, str) or not key.strip():
            raise RecordFieldError(name, value, "a mapping of parameter names to whole numbers")
        params[key] = _whole(val, f"{name}.{key}", -PARAM_LIMIT, PARAM_LIMIT, None)
    return params


def _name_list(value: Any, name: str) -> list[str]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise RecordFieldError(name, value, "a list of names")
    return list(value)


def _names(value: Any, name: str) -> list[str]:
    """A list of names, or its CSV cell ``bm,bk``; empty is ``[]``."""
    if value is None:
        return []
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",") if v.strip()]
    return _name_list(value, name)


def _flag(value: Any, name: str) -> bool:
    """True or False; empty is False."""
    return bool(_bool(value, name))


#: The keys an old file keeps in ``extra``, with their parsers (its errors name them
#: ``extra.by_shape``); they are then moved to their fields. Other keys are kept as they are.
_EXTRA_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "by_shape": _name_list,
    "precision": _name,
    "peak_gflops": _real,
    "copy_gbps": _real,
    "build_failed": _flag,
    "timing_note": _text,
    "newer_source": _text,
}


def _keyed(parsers: Mapping[str, Callable[[Any, str], Any]]) -> Callable[[Any, str], dict[str, Any]]:
    """A parser of a mapping whose known keys each have a parser (others kept as they are)."""
    def parse(value: Any, name: str) -> dict[str, Any]:
        out = dict(_json_mapping(value, name))
        for key, parse_value in parsers.items():
            if key in out:
                out[key] = parse_value(out[key], f"{name}.{key}")
        return out
    return parse


_extra = _keyed(_EXTRA_KEYS)


def _counters(value: Any, name: str) -> dict[str, float]:
    """Hardware counters: names to finite numbers (None, a counter not measured, is left out)."""
    out: dict[str, float] = {}
    for key, val in _json_mapping(value, name, cell=False).items():
        if val is None:
            continue
        num = _real_signed(val, f"{name}.{key}")
        out[key] = num
    return out


def _real_signed(value: Any, name: str) -> float:
    """A finite number of either sign (a counter)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordFieldError(name, value, "a number")
    try:
        out = float(value)
    except OverflowError:
        raise RecordFieldError(name, value, "a finite number") from None
    if not math.isfinite(out):
        raise RecordFieldError(name, value, "a finite number")
    return out


def _kernels(value: Any, name: str) -> list[dict[str, Any]]:
    """The profiled launch's kernels: a list of mappings (``name`` text where given)."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise RecordFieldError(name, value, "a list of kernels")
    out = []
    for i, k in enumerate(value):
        if not isinstance(k, Mapping) or not all(isinstance(key, str) for key in k):
            raise RecordFieldError(f"{name}[{i}]", k, "a mapping (name, duration, block, grid)")
        if "name" in k:
            _text(k["name"], f"{name}[{i}].name")
        out.append(dict(k))
    return out


#: The keys of ``profile`` (engine.profile.nsight.ProfileResult.to_profile) with their parsers.
_PROFILE_KEYS: dict[str, Callable[[Any, str], Any]] = {
    "counters": _counters,
    "kernels": _kernels,
    "report": _text,
    "tool": _text,
    "error": _text,
}


_profile = _keyed(_PROFILE_KEYS)


def _field_parsers() -> dict[str, Callable[[Any, str], Any]]:
    from engine.common.dtypes import ELEMENT_NAMES, Layout  # noqa: PLC0415

    def whole(low, high, default):
        return lambda v, n: _whole(v, n, low, high, default)

    size = whole(1, 1 << 31, None)
    parsers: dict[str, Callable[[Any, str], Any]] = {
        "backend": _name, "variant": _name, "params": _params,
        "m": size, "n": size, "k": size,
        "dtype": _choice(ELEMENT_NAMES), "out_dtype": _optional_choice(ELEMENT_NAMES),
        "layout": _optional_choice(tuple(Layout)), "mode": _choice(MODES), "status": _status,
        "warmup": whole(0, 10**9, 0), "repeats": whole(0, 10**9, 0),
        "flops": whole(0, 1 << 100, 0), "bytes": whole(0, 1 << 100, 0),
        "device_index": whole(-1, 1 << 31, -1),
        "passed": _bool, "extra": _extra, "profile": _profile,
        "by_shape": _names, "build_failed": _flag, "dispatched_to": _kernel_label,
        "throttle": _names, "throttled": _flag,
        "timing_mode": _word_of(TimingMode), "stopped_by": _word_of(StopReason),
        "launches": whole(0, 1 << 62, 0),
    }
    for f in fields(ResultRecord):
        if f.name in parsers:
            continue
        if f.type in ("float", float):
            inf_ok = f.name in ("rel_l2", "max_abs")    # no reference scale: an infinite error
            parsers[f.name] = lambda v, n, inf_ok=inf_ok: _real(v, n, inf_ok)
        elif f.type in ("str", str):
            parsers[f.name] = _text
    missing = set(FIELDS) - set(parsers)
    assert not missing, f"no parser for the record field(s) {missing}"
    return parsers


_PARSERS: dict[str, Callable[[Any, str], Any]] = {}


def parse_field(name: str, value: Any) -> Any:
    """The typed value of field ``name`` from a JSON value, a CSV cell or an attribute;
    RecordFieldError names the field and says what it should be."""
    if not _PARSERS:
        _PARSERS.update(_field_parsers())
    try:
        return _PARSERS[name](value, name)
    except RecursionError:
        raise RecordFieldError(name, value, "nested this deep") from None


REQUIRED = ("backend", "variant", "m", "n", "k", "dtype")


def from_dict(d: Mapping[str, Any]) -> ResultRecord:
    """Build a record from a JSON object or a CSV row, every field checked
    (:func:`parse_field`); missing optional fields take their defaults, fields the record
    does not have are ignored. Raises RecordFieldError (or ValueError for a row that is
    not a record, or lacks a key field)."""
    if not isinstance(d, Mapping):
        raise ValueError("not a record (a JSON object with named fields)")
    missing = [f for f in REQUIRED if f not in d]
    if missing:
        raise ValueError(f"a record lacks the field(s) {', '.join(missing)}")
    kw = {name: parse_field(name, d[name]) for name in FIELDS if name in d}
    kw.setdefault("device", "")
    kw.setdefault("params", {})          # a hand-made file may have no params column
    return ResultRecord(**kw)


def validate(rec: ResultRecord) -> ResultRecord:
    """Check every field of a record (read from a file, a journal, or made in code) with
    the rules of :func:`from_dict`; values are normalised in place (``16.0`` → 16,
    counters to floats). Raises RecordFieldError naming the first wrong field. Charts,
    tables and the Profile view can then trust every record they are given."""
    for name in FIELDS:
        setattr(rec, name, parse_field(name, getattr(rec, name)))
    return rec


def _same(new: Any, old: Any) -> bool:
    """Whether a parsed value is the value it came from (3 and 3.0 are; "3", 3 are not)."""
    if new is old:
        return True
    if isinstance(new, bool) != isinstance(old, bool):
        return False
    if isinstance(new, float) and isinstance(old, float) and math.isnan(new) and math.isnan(old):
        return True
    number = (int, float)
    return isinstance(new, number) == isinstance(old, number) and new == old


def is_valid(rec: ResultRecord) -> bool:
    """Whether ``rec`` is valid as it is: every field passes :func:`parse_field` unchanged
    (``None`` for ``params`` is not, though :func:`validate` would make it ``{}``).
    ``rec`` is never modified."""
    try:
        return all(_same(parse_field(name, getattr(rec, name)), getattr(rec, name))
                   for name in FIELDS)
    except (ValueError, RecursionError):
        return False


@dataclass(frozen=True)
class ProfileData:
    """A record's profile (``ResultRecord.profile``), typed."""

    counters: dict[str, float]
    kernels: list[dict[str, Any]]
    report: str = ""
    tool: str = ""
    error: str = ""


def profile_data(rec: ResultRecord) -> ProfileData:
    """The profile of ``rec`` whatever it holds: a profile of the wrong shape is an empty
    one whose ``error`` says which field is wrong, so a view never fails on a record."""
    try:
        p = _profile(rec.profile, "profile")
    except ValueError as exc:
        return ProfileData({}, [], error=f"the profile cannot be read: {exc}")
    return ProfileData(p.get("counters", {}), p.get("kernels", []), p.get("report", ""),
                       p.get("tool", ""), p.get("error", ""))


def save(records: Iterable[ResultRecord], path: str | Path,
         environment: Environment | None = None) -> Path:
    """Write records to ``.json`` or ``.csv`` (chosen by the extension), atomically: a
    temporary file in the same folder, then a rename, so a failure never leaves a torn
    file and never destroys an earlier one. ``environment``: the block written with them
    (:func:`engine.results.environment.collect` of the records when not given)."""
    path = Path(path)
    recs = list(records)
    suffix = path.suffix.lower()
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a results file")
    if suffix not in (".json", ".csv"):
        raise ValueError(f"results go to .json or .csv, not '{path.suffix or path.name}'")
    env = environment if environment is not None else env_block.collect(recs)
    if suffix == ".json":
        text = json.dumps({"format": env_block.FORMAT, "environment": env.to_dict(),
                           "records": [to_dict(r) for r in recs]}, indent=1)
    else:
        fh = io.StringIO(newline="")
        fh.write("\n".join(env_block.csv_lines(env)) + "\n")
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        for r in recs:
            row = to_dict(r)
            row["params"] = params_to_str(r.params)
            for name in ("extra", "profile"):      # mappings: JSON in one cell
                row[name] = json.dumps(row[name]) if row[name] else ""
            row["by_shape"] = ",".join(r.by_shape)
            row["throttle"] = ",".join(r.throttle)
            w.writerow({k: ("" if v is None else v) for k, v in row.items()})
        text = fh.getvalue()
    # A link named as the results file is the user's choice (they gave the name): the
    # file it points to is replaced, as a shell's ">" would write it.
    write_atomic(path, text, f"the results file {path}", OSError, follow_links=True)
    return path


def _json_int(text: str) -> int | float:
    """JSON integers past Python's digit limit become floats (a field then says it is out
    of range) instead of failing the whole file."""
    return int(text) if len(text) <= 400 else float(text)


@dataclass(frozen=True)
class ResultsFile:
    """A results file read back: its valid records, what was skipped and why, its
    environment block (empty for an old file) and why that could not be read, if so."""

    records: list[ResultRecord]
    skipped: list[str]
    environment: Environment = Environment()
    environment_problem: str = ""


def load_report(path: str | Path) -> tuple[list[ResultRecord], list[str]]:
    """Read records written by :func:`save` (or by hand, with at least the key fields).

    Returns ``(records, skipped)``: a record with a wrong field is left out and
    ``skipped`` says which and why ("record 7: field 'm' is 0, not a whole number from 1
    to 2147483648"; a CSV names the row and its line). Raises ResultsFileError when the
    file is not a results file at all, or when no record is valid.
    """
    got = load_file(path)
    return got.records, got.skipped


def _json_rows(data: Any, name: str) -> tuple[list, Any]:
    """(records, environment) of a JSON results file: a bare list (format 1) or the
    object :func:`save` writes (format 2)."""
    if isinstance(data, list):
        return data, None
    if not isinstance(data, dict):
        raise ResultsFileError(f"{name}: the file does not hold a JSON list of records")
    fmt = data.get("format")
    if isinstance(fmt, bool) or not isinstance(fmt, int) or "records" not in data:
        raise ResultsFileError(f"{name}: the file does not hold a JSON list of records "
                               "(nor an object with 'format' and 'records')")
    if fmt != env_block.FORMAT:
        raise ResultsFileError(f"{name}: results format {fmt} is not one this version reads "
                               f"(it reads 1 and {env_block.FORMAT}): written by another version "
                               "of the app")
    if not isinstance(data["records"], list):
        raise ResultsFileError(f"{name}: 'records' is not a list of records")
    return data["records"], data.get("environment")


def load_file(path: str | Path) -> ResultsFile:
    """:func:`load_report` with the file's environment block (:class:`ResultsFile`)."""
    path = Path(path)
    from engine.inputs.memory import HOST_SHARE  # noqa: PLC0415
    from engine.common.host_memory import host_available_bytes  # noqa: PLC0415
    suffix = path.suffix.lower()
    if suffix not in (".json", ".csv"):
        raise ResultsFileError(f"{path.name}: results files are .json or .csv")
    rows: list[tuple[str, Any]] = []          # (where, row)
    env_data: Any = None
    env_lines: list[str] = []
    try:
        text = read_text(path, path.name, ResultsFileError,
                         max_bytes=int(host_available_bytes() * HOST_SHARE) // 8)
        if suffix == ".json":
            data, env_data = _json_rows(json.loads(text, parse_int=_json_int), path.name)
            rows = [(f"record {i}", row) for i, row in enumerate(data, 1)]
        else:
            text = text.removeprefix("\ufeff")
            # the environment block: leading "# key: value" lines (env_block.csv_lines)
            while text.startswith("#"):
                line, _, text = text.partition("\n")
                env_lines.append(line.rstrip("\r"))
            reader = csv.DictReader(io.StringIO(text, newline=""))
            ended = 1 + len(env_lines)        # the header's last line
            for i, row in enumerate(reader, 1):
                # a row's first line: a quoted cell may hold line breaks
                rows.append((f"row {i} (line {ended + 1})", row))
                ended = reader.line_num + len(env_lines)
    except ResultsFileError:
        raise
    except RecursionError:
        raise ResultsFileError(f"{path.name}: not a results file (its JSON is nested too deeply "
                               "for a list of records)") from None
    except MemoryError:
        raise ResultsFileError(f"{path.name}: too large to read into this machine's memory") from None
    except (UnicodeDecodeError, ValueError, csv.Error) as exc:
        raise ResultsFileError(f"{path.name}: not a results file ({visible(exc)})") from None
    out: list[ResultRecord] = []
    skipped: list[str] = []
    for where, row in rows:
        try:
            out.append(from_dict(row))
        except (ValueError, RecursionError) as exc:
            skipped.append(f"{where}: {exc}")
    if skipped and not out:
        raise ResultsFileError(f"{path.name}: not a results file: no valid record ({skipped[0]}"
                               + (f"; and {len(skipped) - 1} more" if len(skipped) > 1 else "") + ")")
    environment, problem = Environment(), ""
    try:
        if env_data is not None:
            environment = env_block.from_dict(env_data)
        elif env_lines:
            environment = env_block.from_csv_lines(env_lines)
    except (ValueError, RecursionError) as exc:
        problem = visible(str(exc))
    return ResultsFile(out, skipped, environment, problem)


def load(path: str | Path) -> list[ResultRecord]:
    """The valid records of a results file (see :func:`load_report`)."""
    return load_report(path)[0]
