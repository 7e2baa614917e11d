"""Result records and their CSV / JSON files.

A record is one (backend, device, variant, params, shape, dtype, mode) measurement.
JSON files hold a list of records with the field names below; CSV files hold the same
fields as columns, ``params`` written as ``name=value,...``.
"""
from __future__ import annotations

import csv
import json
import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from .files import check_regular_file
from .registry import AUTO, kernel_label, params_from_str, params_to_str


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
    status: str = "ok"                 # ok | failed (wrong result) | error | skipped | unverified
    flops: int = 0
    bytes: int = 0
    upload_ms: float = math.nan        # host→device transfer of the inputs, never in kernel time
    speedup_vs_naive: float = math.nan
    pct_of_peak: float = math.nan
    pct_of_cublas: float = math.nan
    source: str = ""                   # a label for overlays (file the record came from)
    extra: dict[str, Any] = field(default_factory=dict)
    host: str = ""                     # the machine it ran on (socket.gethostname())
    device_index: int = -1             # the device's index within its backend on that host
    worker: str = ""                   # the engine that ran it: "local", "process 1234", "ray …"
    #: Hardware counters of one profiled launch (engine.profile): ``counters`` (the curated
    #: metrics, engine.profile_metrics), ``kernels``, ``report`` (the .ncu-rep), ``tool``,
    #: ``error``. Empty when not profiled.
    profile: dict[str, Any] = field(default_factory=dict)

    def label(self) -> str:
        return kernel_label(self.variant, self.params)

    def series_params(self) -> dict[str, int]:
        """The parameters a chart curve groups by: those the shape picked in this run
        (``extra["by_shape"]``, a plan's ``auto``) as ``auto``, so that a sweep that left
        them to the shape is one curve, whatever value each size ran."""
        by_shape = self.extra.get("by_shape") or ()
        return {k: (AUTO if k in by_shape else v) for k, v in self.params.items()}

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
_FLOATS = {f.name for f in fields(ResultRecord) if f.type in ("float", float)}
_INTS = {"m", "n", "k", "warmup", "repeats", "flops", "bytes", "device_index"}


def ratio_to_best_baseline(records: Iterable[ResultRecord], baseline_key, record_key
                           ) -> dict[int, float]:
    """``best baseline median / record median`` per record, keyed by ``id(record)``.

    ``baseline_key(r)`` is the group a baseline run belongs to (None for non-baselines);
    ``record_key(r)`` the group whose fastest baseline ``r`` is compared with. Records
    without a finite, positive median, or without a baseline in their group, get none.
    Speed-up over naive and per cent of cuBLAS are both this ratio.
    """
    recs = [r for r in records if math.isfinite(r.median_ms) and r.median_ms > 0]
    best: dict[Any, float] = {}
    for r in recs:
        key = baseline_key(r)
        if key is not None:
            best[key] = min(best.get(key, math.inf), r.median_ms)
    out = {}
    for r in recs:
        key = record_key(r)
        if key in best:
            out[id(r)] = best[key] / r.median_ms
    return out


def record_precision(r: ResultRecord) -> str:
    """The arithmetic of a record: ``extra["precision"]`` (engine.runner.fill_ceilings),
    else its variant's (fp32 or tf32) as the registry knows it, int32 for integer data."""
    from . import peaks, registry  # noqa: PLC0415  (registry imports this module's helpers)
    got = r.extra.get("precision")
    if got:
        return str(got)
    v = registry.REGISTRY.get(r.variant)
    return peaks.precision_of(v.precision if v is not None else "fp32", r.dtype)


def is_reference_record(r: ResultRecord) -> bool:
    """A library reference line (cuBLAS): never the lab's own kernel."""
    from . import registry  # noqa: PLC0415
    v = registry.REGISTRY.get(r.variant)
    return v.role == "reference" if v is not None else r.variant.lower().startswith("cublas")


def problem_key(r: ResultRecord) -> tuple:
    """(source, backend, device, M, N, K, dtype, mode, precision): one problem of one run,
    the key of :func:`lab_best` and :func:`reference_times`."""
    return (r.source, r.backend) + r.device_key() + (r.m, r.n, r.k, r.dtype, r.mode,
                                                     record_precision(r))


def reference_times(records: Iterable[ResultRecord]) -> dict[tuple, float]:
    """The fastest run (median ms) of the library reference line (cuBLAS) per
    :func:`problem_key`: what a lab best row is compared with."""
    out: dict[tuple, float] = {}
    for r in records:
        if is_reference_record(r) and r.status == "ok" and math.isfinite(r.median_ms):
            key = problem_key(r)
            out[key] = min(out.get(key, math.inf), r.median_ms)
    return out


#: Arithmetic a request of a precision may run on: a TF32 request may take an FP32 kernel
#: (as accurate or more), as cuBLAS's TF32 mode runs its FP32 GEMV on a matrix-vector product.
SERVES = {"tf32": ("tf32", "fp32")}


def lab_best(records: Iterable[ResultRecord]) -> dict[tuple, ResultRecord]:
    """The lab's best per problem: for each (source, backend, device, M, N, K, dtype, mode,
    precision), the fastest record of the lab's own kernels (not a library reference) that
    ran and passed verification. It is what a user gets by dispatching each shape to the
    fastest kernel, as cuBLAS does, and stands beside cuBLAS of the same precision. Where a
    TF32 kernel ran, the TF32 best may be an FP32 kernel (:data:`SERVES`): dispatching a
    TF32 request to it loses nothing."""
    best: dict[tuple, ResultRecord] = {}
    for r in records:
        if (r.status != "ok" or r.passed is not True or not math.isfinite(r.median_ms)
                or r.median_ms <= 0 or is_reference_record(r)):
            continue
        key = problem_key(r)
        if key not in best or r.median_ms < best[key].median_ms:
            best[key] = r
    for key in [k for k in best if k[-1] in SERVES]:
        for other in SERVES[key[-1]]:
            r = best.get(key[:-1] + (other,))
            if r is not None and r.median_ms < best[key].median_ms:
                best[key] = r
    return best


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


def from_dict(d: dict[str, Any]) -> ResultRecord:
    """Build a record from a JSON/CSV row, tolerating missing optional fields."""
    missing = [f for f in ("backend", "variant", "m", "n", "k", "dtype") if f not in d]
    if missing:
        raise ValueError(f"a record lacks the field(s) {', '.join(missing)}")
    kw: dict[str, Any] = {}
    for name in FIELDS:
        if name not in d:
            continue
        val = d[name]
        if name == "params":
            val = params_from_str(val) if isinstance(val, str) else dict(val or {})
        elif name in ("extra", "profile"):
            val = json.loads(val) if isinstance(val, str) and val else (val or {})
        elif name == "passed":
            val = _parse_bool(val)
        elif name in _INTS:
            val = int(float(val)) if val not in (None, "") else (-1 if name == "device_index" else 0)
        elif name in _FLOATS:
            val = float(val) if val not in (None, "") else math.nan
        elif val is None:
            val = ""
        kw[name] = val
    kw.setdefault("device", "")
    kw.setdefault("params", {})          # a hand-made file may have no params column
    return ResultRecord(**kw)


def _parse_bool(val: Any) -> bool | None:
    if val in (None, ""):
        return None
    if isinstance(val, bool):
        return val
    text = str(val).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"'{val}' is not a boolean")


STATUSES = ("ok", "failed", "error", "skipped", "unverified")


class ResultsFileError(ValueError):
    """A results file that cannot be read (the message names the file and the problem)."""


def validate(rec: ResultRecord) -> ResultRecord:
    """Check a record read from a file field by field; raise ValueError saying which field
    is wrong. Charts and tables can then trust every record they are given."""
    from .registry import DTYPES  # noqa: PLC0415

    for name in ("m", "n", "k"):
        val = getattr(rec, name)
        if not isinstance(val, int) or isinstance(val, bool) or not 1 <= val <= 1 << 31:
            raise ValueError(f"{name}={val!r} is not a positive size")
    if rec.dtype not in DTYPES:
        raise ValueError(f"dtype '{rec.dtype}' is not one of {', '.join(DTYPES)}")
    if not isinstance(rec.variant, str) or not rec.variant.strip():
        raise ValueError("the variant name is empty")
    if not isinstance(rec.backend, str) or not rec.backend.strip():
        raise ValueError("the backend name is empty")
    if rec.status not in STATUSES:
        raise ValueError(f"status '{rec.status}' is not one of {', '.join(STATUSES)}")
    if rec.mode not in ("hot", "cold"):
        raise ValueError(f"mode '{rec.mode}' is not hot or cold")
    if not isinstance(rec.params, dict) or not all(
            isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
            for k, v in rec.params.items()):
        raise ValueError(f"params {rec.params!r} are not name=whole-number pairs")
    for name in sorted(_FLOATS):
        val = getattr(rec, name)
        if not isinstance(val, float):
            raise ValueError(f"{name}={val!r} is not a number")
        if math.isinf(val) and name not in ("rel_l2", "max_abs"):
            raise ValueError(f"{name} is infinite")
        if name.endswith("_ms") and val < 0:
            raise ValueError(f"{name}={val} is negative")
    if not isinstance(rec.extra, dict):
        raise ValueError("extra is not a mapping")
    if not isinstance(rec.profile, dict):
        raise ValueError("profile is not a mapping")
    counters = rec.profile.get("counters")
    if counters is not None:
        if not isinstance(counters, dict) or not all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
                for v in counters.values()):
            raise ValueError("profile counters are not numbers")
        rec.profile["counters"] = {str(k): float(v) for k, v in counters.items() if v is not None}
    for name in ("device", "error", "timestamp", "versions", "source", "host", "worker",
                 "verify_method"):
        if not isinstance(getattr(rec, name), str):
            raise ValueError(f"{name} is not text")
    return rec


def save(records: Iterable[ResultRecord], path: str | Path) -> Path:
    """Write records to ``.json`` or ``.csv`` (chosen by the extension), atomically: a
    temporary file in the same folder, then a rename, so a failure never leaves a torn
    file and never destroys an earlier one."""
    path = Path(path)
    recs = list(records)
    suffix = path.suffix.lower()
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not a results file")
    if suffix not in (".json", ".csv"):
        raise ValueError(f"results go to .json or .csv, not '{path.suffix or path.name}'")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "w", newline="") as fh:
            if suffix == ".json":
                fh.write(json.dumps([to_dict(r) for r in recs], indent=1))
            else:
                w = csv.DictWriter(fh, fieldnames=FIELDS)
                w.writeheader()
                for r in recs:
                    row = to_dict(r)
                    row["params"] = params_to_str(r.params)
                    for name in ("extra", "profile"):      # mappings: JSON in one cell
                        row[name] = json.dumps(row[name]) if row[name] else ""
                    w.writerow({k: ("" if v is None else v) for k, v in row.items()})
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def load_report(path: str | Path) -> tuple[list[ResultRecord], list[str]]:
    """Read records written by :func:`save` (or by hand, with at least the key fields).

    Returns ``(records, skipped)``: a record that fails :func:`validate` is left out and
    ``skipped`` says which and why ("record 7: m=0 is not a positive size"). Raises
    ValueError when the file is not a results file at all, or when no record is valid.
    """
    path = Path(path)
    rows: list[Any]
    from .memory import HOST_SHARE, host_available_bytes  # noqa: PLC0415
    check_regular_file(path, path.name, ResultsFileError,
                       max_bytes=int(host_available_bytes() * HOST_SHARE) // 8)
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(path.read_text())
            if not isinstance(data, list):
                raise ResultsFileError(f"{path.name}: the file does not hold a JSON list of records")
            rows = data
        elif path.suffix.lower() == ".csv":
            with path.open(newline="") as fh:
                rows = list(csv.DictReader(fh))
        else:
            raise ResultsFileError(f"{path.name}: results files are .json or .csv")
    except ResultsFileError:
        raise
    except (OSError, UnicodeDecodeError, ValueError, csv.Error, RecursionError, MemoryError) as exc:
        raise ResultsFileError(f"{path.name}: not a results file ({exc})") from None
    out: list[ResultRecord] = []
    skipped: list[str] = []
    for i, row in enumerate(rows, 1):
        try:
            if not isinstance(row, dict):
                raise ValueError("not a record (a JSON object with named fields)")
            out.append(validate(from_dict(row)))
        except (ValueError, TypeError, OverflowError, AttributeError, RecursionError) as exc:
            skipped.append(f"record {i}: {exc}")
    if skipped and not out:
        raise ResultsFileError(f"{path.name}: not a results file: no valid record ({skipped[0]}"
                         + (f"; and {len(skipped) - 1} more" if len(skipped) > 1 else "") + ")")
    return out, skipped


def load(path: str | Path) -> list[ResultRecord]:
    """The valid records of a results file (see :func:`load_report`)."""
    return load_report(path)[0]
