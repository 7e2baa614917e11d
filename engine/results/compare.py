"""Two runs compared: which kernels got faster or slower, beyond the noise.

Records of a BASE and a NEW run are paired by backend, variant, parameters, shape (M, N,
K), dtype, timing mode and device name. When the two runs share no device name (an H100
file against an H200 file) the device is left out of the key and the pairs are made by
the other keys; :attr:`Comparison.by_device` is then False and the header says so.
Several records with one key on a side (two GPUs of one model, a repeated run) pair in
order of device index, then of appearance; the rest are unmatched.

The rule (as ``nvbench_compare``'s SAME/FAST/SLOW): with ``change = NEW/BASE − 1`` of the
median times and ``noise = √(noise_BASE² + noise_NEW²)`` (the noise of a difference of two
independent measurements; a record's noise is its relative standard deviation,
``noise_pct``, or where that is missing half its min–max spread over the median), a pair
is FASTER or SLOWER only when ``|change|`` exceeds both the threshold and the noise;
otherwise SAME. A record that failed verification makes the pair FAILED; one that did not
run or has no finite median time makes it NOT_TIMED (the note says which side and why).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Iterable, Sequence

from engine.inputs.sizes import format_shape
from engine.kernels.registry import kernel_label
from engine.results.environment import Environment
from engine.results.records import ResultRecord
from engine.results.status import RAN, RecordStatus

#: The default threshold in per cent. Within-run noise does not see what moves between
#: runs (clocks, temperature, power cap): the project's H200 notes show several per cent.
DEFAULT_THRESHOLD_PCT = 5.0


class Verdict(StrEnum):
    """What a pair says about NEW against BASE (a ``str``: the word a table shows)."""

    SAME = "same"              # within the threshold or the noise
    FASTER = "faster"          # NEW's median is shorter beyond both
    SLOWER = "slower"          # NEW's median is longer beyond both
    FAILED = "failed"          # a side failed verification: its time measures a wrong kernel
    NOT_TIMED = "not timed"    # a side did not run (error, skipped) or has no finite median


@dataclass(frozen=True)
class PairKey:
    """What two records must share to be compared."""

    backend: str
    variant: str
    params: tuple[tuple[str, int], ...]
    shape: tuple[int, int, int]
    dtype: str
    mode: str
    device: str            # "" when the runs share no device (not part of the key)

    def label(self) -> str:
        """``ffma_wide[bm=256] 4096×4096×4096 float32`` (mode and device when not the usual)."""
        text = f"{kernel_label(self.variant, dict(self.params))} {format_shape(self.shape)} {self.dtype}"
        return text + ("" if self.mode == "hot" else f" {self.mode}")


def pair_label(base: ResultRecord, new: ResultRecord) -> str:
    """A pair's kernel, shape and dtype; both parameter choices where they differ
    (``ffma_wide[splitk=1] → [splitk=4] 4096×4096×4096 float32``)."""
    key = pair_key(base)
    if base.params == new.params:
        return key.label()
    other = kernel_label(new.variant, new.params).removeprefix(new.variant)
    return f"{kernel_label(base.variant, base.params)} → {other or '(defaults)'} " + \
        key.label().split(" ", 1)[1]


def pair_key(rec: ResultRecord, by_device: bool = True, by_params: bool = True) -> PairKey:
    return PairKey(rec.backend, rec.variant, tuple(rec.params.items()) if by_params else (),
                   (rec.m, rec.n, rec.k), rec.dtype, rec.mode, rec.device if by_device else "")


def record_noise_pct(rec: ResultRecord) -> float:
    """The record's noise in per cent: its ``noise_pct`` (relative standard deviation),
    else half its min–max spread over the median; NaN when neither is known."""
    if _finite(rec.noise_pct):
        return rec.noise_pct
    if _finite(rec.min_ms) and _finite(rec.max_ms) and _finite(rec.median_ms) and rec.median_ms > 0:
        return 50.0 * (rec.max_ms - rec.min_ms) / rec.median_ms
    return math.nan


def combined_noise_pct(base: ResultRecord, new: ResultRecord) -> float:
    """√(noise_BASE² + noise_NEW²); a side without noise counts 0; NaN when neither has any."""
    parts = [n for n in (record_noise_pct(base), record_noise_pct(new)) if _finite(n)]
    return math.sqrt(sum(n * n for n in parts)) if parts else math.nan


def verdict_of(change_pct: float, noise_pct: float, threshold_pct: float) -> Verdict:
    """The rule: FASTER/SLOWER only when ``|change|`` exceeds the threshold and the noise
    (unknown noise: the threshold alone)."""
    bar = max(threshold_pct, noise_pct if _finite(noise_pct) else 0.0)
    if abs(change_pct) <= bar:
        return Verdict.SAME
    return Verdict.SLOWER if change_pct > 0 else Verdict.FASTER


@dataclass(frozen=True)
class Pair:
    """One kernel at one shape in both runs."""

    key: PairKey
    base: ResultRecord
    new: ResultRecord
    verdict: Verdict
    ratio: float = math.nan          # NEW median / BASE median (NaN: not both timed)
    noise_pct: float = math.nan      # combined noise of the two records
    note: str = ""                   # why FAILED / NOT_TIMED, or that the noise is unknown

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.ratio - 1.0) if _finite(self.ratio) else math.nan


@dataclass(frozen=True)
class Difference:
    """A way the two runs' conditions differ (``what``: GPU, driver, SM clock …)."""

    what: str
    base: str
    new: str


@dataclass(frozen=True)
class Comparison:
    pairs: list[Pair]
    only_base: list[ResultRecord]
    only_new: list[ResultRecord]
    differences: list[Difference]
    threshold_pct: float
    #: Whether the device name was part of the key (False: the runs share no device).
    by_device: bool = True
    counts: dict[Verdict, int] = field(default_factory=dict)

    def with_verdict(self, verdict: Verdict) -> list[Pair]:
        return [p for p in self.pairs if p.verdict == verdict]

    def newly_failed(self) -> list[Pair]:
        """Pairs whose BASE passed verification and whose NEW failed it: a kernel that
        became wrong (a regression gate must catch it, whatever its time)."""
        return [p for p in self.pairs if p.verdict == Verdict.FAILED and p.base.passed is True
                and _timed(p.new) == "failed verification"]

    def problem(self) -> str | None:
        """Why there is nothing to compare (no pair in common, no pair timed on both
        sides), or None."""
        if not self.pairs:
            return ("no result in common: the two runs share no kernel, parameters, shape "
                    "and dtype" + (" (on any device)" if not self.by_device else ""))
        if all(p.verdict in (Verdict.NOT_TIMED, Verdict.FAILED) for p in self.pairs):
            return (f"none of the {len(self.pairs)} results in common has a usable time on both "
                    f"sides (not run, failed or no finite median): {self.pairs[0].note}")
        return None

    def summary(self) -> str:
        """``12 pairs: 10 same, 1 faster, 1 slower; 2 only in BASE`` (threshold named)."""
        parts = [f"{n} {v.value}" for v, n in self.counts.items() if n]
        text = f"{len(self.pairs)} pair{'s' if len(self.pairs) != 1 else ''}: {', '.join(parts) or 'none'}"
        if self.only_base:
            text += f"; {len(self.only_base)} only in BASE"
        if self.only_new:
            text += f"; {len(self.only_new)} only in NEW"
        return text + f" (threshold {self.threshold_pct:g}%, and the noise of both records)"


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _timed(rec: ResultRecord) -> str:
    """Why ``rec``'s time cannot be compared, or "" when it can."""
    if rec.status == RecordStatus.FAILED or rec.passed is False:
        return "failed verification"
    if rec.status not in RAN:
        first = rec.error.strip().splitlines()[0] if rec.error.strip() else ""
        return rec.status.value + (f" ({first[:57]}…)" if len(first) > 60 else f" ({first})" if first else "")
    if not (_finite(rec.median_ms) and rec.median_ms > 0):
        return "no finite median time"
    return ""


def make_pair(key: PairKey, base: ResultRecord, new: ResultRecord, threshold_pct: float) -> Pair:
    why = {side: _timed(rec) for side, rec in (("BASE", base), ("NEW", new))}
    if any(why.values()):
        note = "; ".join(f"{side}: {text}" for side, text in why.items() if text)
        failed = any(text == "failed verification" for text in why.values())
        return Pair(key, base, new, Verdict.FAILED if failed else Verdict.NOT_TIMED, note=note)
    ratio = new.median_ms / base.median_ms
    noise = combined_noise_pct(base, new)
    verdict = verdict_of(100.0 * (ratio - 1.0), noise, threshold_pct)
    note = "" if _finite(noise) else "noise not recorded: the threshold alone"
    return Pair(key, base, new, verdict, ratio, noise, note)


def compare(base: Sequence[ResultRecord], new: Sequence[ResultRecord],
            threshold_pct: float = DEFAULT_THRESHOLD_PCT,
            base_environment: Environment | None = None,
            new_environment: Environment | None = None,
            ignore_params: bool = False) -> Comparison:
    """Pair ``base`` and ``new`` and give each pair its verdict (see the module for the
    rule). ``*_environment``: the results files' environment blocks, where they have one.
    ``ignore_params``: pair records whatever their parameters (one parameter choice against
    another, e.g. a kernel before and after its default changed; several choices of one
    kernel at one shape pair in the order they appear)."""
    if not (_finite(threshold_pct) and threshold_pct >= 0):
        raise ValueError(f"the threshold is {threshold_pct!r}, not a per cent ≥ 0")
    by_device = bool({r.device for r in base} & {r.device for r in new})
    groups: dict[PairKey, list[list[ResultRecord]]] = defaultdict(lambda: [[], []])
    for side, recs in enumerate((base, new)):
        for r in recs:
            groups[pair_key(r, by_device, not ignore_params)][side].append(r)
    pairs: list[Pair] = []
    only_base: list[ResultRecord] = []
    only_new: list[ResultRecord] = []
    for key, (bs, ns) in groups.items():
        bs = sorted(bs, key=lambda r: r.device_index)      # stable: then by appearance
        ns = sorted(ns, key=lambda r: r.device_index)
        pairs.extend(make_pair(key, b, n, threshold_pct) for b, n in zip(bs, ns))
        only_base.extend(bs[len(ns):])
        only_new.extend(ns[len(bs):])
    counts = {v: sum(p.verdict == v for p in pairs) for v in Verdict}
    return Comparison(pairs, only_base, only_new,
                      differences(base, new, base_environment, new_environment, by_device),
                      threshold_pct, by_device, counts)


# --- how the two runs' conditions differ ---------------------------------------------------

#: Text fields of a record (or a results file's environment) the header compares, with
#: the name it gives them. Fields a record does not have are skipped (getattr).
_TEXT_FIELDS = (("GPU", "device"), ("host", "host"), ("backend", "backend"),
                ("stop rule", "stop_rule"), ("timing mode", "timing_mode"))
#: Numeric fields (the median over a run's records is compared; 2% apart counts).
_NUMBER_FIELDS = (("SM clock MHz", "sm_clock_median_mhz"), ("memory clock MHz", "mem_clock_mhz"),
                  ("power W", "power_w"), ("temperature °C", "temperature_c"))
NUMBER_TOLERANCE = 0.02


def _text_values(recs: Iterable[ResultRecord], name: str) -> str:
    values = {str(getattr(r, name, "") or "") for r in recs} - {""}
    return ", ".join(sorted(values))


def _joined(values: Iterable[str]) -> str:
    return ", ".join(dict.fromkeys(v for v in values if v))


def _environment_items(env: Environment | None) -> dict[str, str]:
    """The parts of a file's environment block the header compares (empty: no block)."""
    if env is None:
        return {}
    devices, timing = env.devices, env.timing
    return {"GPU UUID": _joined(d.uuid for d in devices), "driver": _joined(d.driver for d in devices),
            "CUDA driver": _joined(d.cuda_driver for d in devices),
            "compute capability": _joined(d.compute_capability for d in devices),
            "app version": env.app_version, "warm-up": timing.warmup,
            "stop rule": timing.repeats, "clock lock": timing.clock_lock}


def _versions(recs: Iterable[ResultRecord]) -> dict[str, str]:
    """``numpy 2.5.2; CUDA 13.0.0; driver 13000`` → ``{numpy: 2.5.2, CUDA: 13.0.0, …}``
    over the run's records (values of several records joined)."""
    out: dict[str, set[str]] = defaultdict(set)
    for r in recs:
        for part in filter(None, (p.strip() for p in (r.versions or "").split(";"))):
            name, _, value = part.rpartition(" ")
            out[name or part].add(value if name else "")
    return {k: ", ".join(sorted(v)) for k, v in out.items()}


def _median_of(recs: Iterable[ResultRecord], name: str) -> float:
    values = sorted(v for v in (getattr(r, name, math.nan) for r in recs) if _finite(v))
    return values[len(values) // 2] if values else math.nan


def _throttled(recs: Sequence[ResultRecord]) -> str:
    flagged = [r for r in recs if getattr(r, "throttled", False)]
    return f"{len(flagged)} of {len(recs)} records" if flagged else ""


def differences(base: Sequence[ResultRecord], new: Sequence[ResultRecord],
                base_env: Environment | None = None, new_env: Environment | None = None,
                by_device: bool = True) -> list[Difference]:
    """How the two runs' conditions differ: GPU, host, driver and library versions, the
    app version, timing settings and kernel files (from the files' environment blocks),
    and the clocks, power and throttling where the records carry them."""
    out: list[Difference] = []
    for what, name in _TEXT_FIELDS:
        b, n = _text_values(base, name), _text_values(new, name)
        if b != n and (b or n):
            if name == "device" and not by_device:
                what = "GPU (no device in common: pairs made by kernel, shape and dtype)"
            out.append(Difference(what, b or "—", n or "—"))
    eb, en = _environment_items(base_env), _environment_items(new_env)
    if (base_env is None) != (new_env is None):
        out.append(Difference("environment block", "none (an older file)" if base_env is None else "yes",
                              "none (an older file)" if new_env is None else "yes"))
    elif base_env is not None and new_env is not None:
        # (the stop rule once: the records' own field, where they carry it, came first)
        out.extend(Difference(what, eb[what] or "—", en[what] or "—") for what in eb
                   if eb[what] != en[what] and not any(d.what == what for d in out))
        for name in sorted(base_env.kernels.keys() & new_env.kernels.keys()):
            if base_env.kernels[name] != new_env.kernels[name]:
                out.append(Difference(f"kernel file {name} (SHA-256)", base_env.kernels[name],
                                      new_env.kernels[name]))
    vb, vn = _versions(base), _versions(new)
    for name in [k for k in vb if k in vn] + [k for k in vn if k not in vb] + [k for k in vb if k not in vn]:
        if vb.get(name) != vn.get(name) and not any(d.what == name for d in out):
            out.append(Difference(name, vb.get(name) or "—", vn.get(name) or "—"))
    for what, name in _NUMBER_FIELDS:
        b, n = _median_of(base, name), _median_of(new, name)
        if _finite(b) != _finite(n) or (_finite(b) and abs(n - b) > NUMBER_TOLERANCE * max(abs(b), 1e-9)):
            out.append(Difference(what + " (median of records)", f"{b:.0f}" if _finite(b) else "—",
                                  f"{n:.0f}" if _finite(n) else "—"))
    tb, tn = _throttled(base), _throttled(new)
    if tb or tn:
        out.append(Difference("throttled (power or thermal cap)", tb or "none", tn or "none"))
    return out


def shape_text(rec: ResultRecord) -> str:
    return format_shape((rec.m, rec.n, rec.k))


def row_label(rec: ResultRecord) -> str:
    """An unmatched record as a listing names it."""
    return f"{kernel_label(rec.variant, rec.params)} {shape_text(rec)} {rec.dtype}" + (
        "" if rec.mode == "hot" else f" {rec.mode}") + (f" on {rec.device}" if rec.device else "")


__all__ = ["DEFAULT_THRESHOLD_PCT", "Comparison", "Difference", "Pair", "PairKey", "Verdict",
           "combined_noise_pct", "compare", "differences", "make_pair", "pair_key", "pair_label",
           "record_noise_pct", "row_label", "verdict_of"]
