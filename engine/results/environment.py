"""The environment block of a results file: where and how its numbers were taken.

GPU name, UUID and driver (NVML, where there is one), the CUDA and library versions the
records name, the app's version (``git describe`` where the lab is a git checkout, else
:data:`APP_VERSION`), a hash of each kernel file the records ran, the host, the time and
the timing settings. :func:`engine.results.records.save` writes it into every file (JSON:
``{"format": 2, "environment": {...}, "records": [...]}``; CSV: leading ``# key: value``
lines) and :func:`engine.results.records.load_file` reads it back.

Records are :class:`engine.results.records.ResultRecord` (not imported here: the records
module imports this one).
"""
from __future__ import annotations

import hashlib
import json
import math
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

from engine.kernels import registry

#: The app's version where ``git describe`` cannot say (no git, not a checkout).
APP_VERSION = "0.37"
#: The results-file format :func:`engine.results.records.save` writes (a bare list: 1).
FORMAT = 2


class EnvironmentError_(ValueError):
    """An environment block of the wrong shape (the message names the key)."""


@dataclass(frozen=True)
class DeviceEnvironment:
    """One device a file's records ran on."""

    backend: str
    index: int
    name: str
    uuid: str = ""
    pci_bus_id: str = ""
    driver: str = ""
    cuda_driver: str = ""
    compute_capability: str = ""


@dataclass(frozen=True)
class TimingSettings:
    """How the records were timed (several values: the records differ)."""

    warmup: str = ""          # e.g. "3"
    repeats: str = ""         # the stop rule: "repeats 20", "budget 1 s", "noise < 0.5% …"
    mode: str = ""            # "hot", "cold" or "hot, cold"
    clock_lock: str = ""      # --lock-clocks and what came of it ("" : not asked)


@dataclass(frozen=True)
class Environment:
    app_version: str = ""
    host: str = ""
    time: str = ""
    devices: tuple[DeviceEnvironment, ...] = ()
    versions: tuple[str, ...] = ()
    kernels: dict[str, str] = field(default_factory=dict)   # kernel file -> sha256 (16 hex)
    timing: TimingSettings = TimingSettings()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"devices": [asdict(d) for d in self.devices],
                               "versions": list(self.versions)}

    def rows(self) -> list[tuple[str, str]]:
        """(label, text) pairs for a "Run info" view or ``bench``'s printout; none for
        the empty block of an older file."""
        if self == Environment():
            return []
        out = [("App version", self.app_version), ("Host", self.host), ("Saved", self.time)]
        for d in self.devices:
            ids = ", ".join(x for x in (d.uuid, f"driver {d.driver}" if d.driver else "",
                                        f"CUDA {d.cuda_driver}" if d.cuda_driver else "") if x)
            out.append((f"Device {d.backend} #{d.index}", d.name + (f" ({ids})" if ids else "")))
        out += [("Versions", v) for v in self.versions]
        t = self.timing
        out += [("Warm-up", t.warmup), ("Stop rule", t.repeats), ("L2", t.mode),
                ("Clock lock", t.clock_lock or "not asked")]
        out += [(f"Kernel {name}", digest) for name, digest in sorted(self.kernels.items())]
        return [(k, v) for k, v in out if v]


def app_version() -> str:
    """``git describe --always --dirty`` of the lab's checkout, else :data:`APP_VERSION`."""
    try:
        out = subprocess.run(["git", "describe", "--always", "--dirty", "--tags"],
                             cwd=registry.ROOT, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return APP_VERSION
    text = out.stdout.strip()
    return f"{APP_VERSION} ({text})" if out.returncode == 0 and text else APP_VERSION


def file_hash(path: Path) -> str:
    """The first 16 hex digits of a file's SHA-256, or "" when it cannot be read."""
    try:
        if not path.is_file():
            return ""
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()[:16]
    except OSError:
        return ""


def _kernel_files(records) -> dict[str, str]:
    """Each kernel file the records ran: its name (relative to the lab for its own files;
    the file name only for a user's, so no private path goes into a shared file) → hash."""
    out: dict[str, str] = {}
    for r in records:
        names = {r.variant}
        if r.dispatched_to:
            names.add(r.dispatched_to.split("[")[0])
        for name in names:
            v = registry.REGISTRY.get(name)
            if v is None or r.backend not in v.sources or v.library:
                continue
            path = v.source_path(r.backend)
            try:
                shown = path.relative_to(registry.ROOT).as_posix()
            except ValueError:
                shown = path.name
            if shown not in out:
                digest = file_hash(path)
                if digest:
                    out[shown] = digest
    return out


def _joined(values: Iterable) -> str:
    return ", ".join(dict.fromkeys(str(v) for v in values))


def timing_of(records, budget_s: float | None = None, clock_lock: str = "") -> TimingSettings:
    """The timing settings the records themselves carry (with the budget where known)."""
    ran = [r for r in records if r.repeats]
    # the stop rule where the records name it: under a budget or a noise target each
    # record's launch count is an outcome, not a setting
    rules = _joined(r.stop_rule for r in ran if getattr(r, "stop_rule", ""))
    repeats = f"budget {budget_s:g} s" if budget_s else rules or _joined(r.repeats for r in ran)
    return TimingSettings(warmup=_joined(r.warmup for r in ran), repeats=repeats,
                          mode=_joined(r.mode for r in ran), clock_lock=clock_lock)


def device_of(info) -> DeviceEnvironment:
    """A :class:`DeviceInfo <engine.measure.backends.base.DeviceInfo>` as the block names it."""
    extra = info.extra or {}
    return DeviceEnvironment(backend=info.backend, index=info.index, name=info.name,
                             uuid=str(extra.get("uuid", "")),
                             pci_bus_id=str(extra.get("pci_bus_id", "")),
                             driver=str(extra.get("driver", "")),
                             cuda_driver=str(extra.get("cuda_driver", "")),
                             compute_capability=info.compute_capability or "")


def collect(records, devices=(), timing: TimingSettings | None = None) -> Environment:
    """The environment of ``records``: ``devices`` (DeviceInfo) where the caller knows
    them (else the records' own device names), ``timing`` else what the records carry."""
    records = list(records)
    devs = tuple(device_of(d) for d in devices)
    known = {(d.backend, d.index) for d in devs}
    for r in records:         # devices the caller did not name: what the records say
        if (r.backend, r.device_index) not in known:
            known.add((r.backend, r.device_index))
            devs += (DeviceEnvironment(r.backend, r.device_index, r.device),)
    hosts = _joined(r.host for r in records if r.host) or socket.gethostname()
    return Environment(app_version=app_version(), host=hosts,
                       time=time.strftime("%Y-%m-%dT%H:%M:%S%z"), devices=devs,
                       versions=tuple(dict.fromkeys(r.versions for r in records if r.versions)),
                       kernels=_kernel_files(records), timing=timing or timing_of(records))


# --- reading a block back (a file may hold anything) ------------------------------------

def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise EnvironmentError_(f"environment: '{where}' is not text")
    if isinstance(value, float) and not math.isfinite(value):
        raise EnvironmentError_(f"environment: '{where}' is not text")
    return str(value)[:10_000]


def _mapping(value: Any, where: str) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise EnvironmentError_(f"environment: '{where}' is not a mapping")
    return value


def from_dict(data: Any) -> Environment:
    """The block read from a file; :class:`EnvironmentError_` names a wrong key. Keys it
    does not know are ignored (a newer app may write more)."""
    data = _mapping(data, "environment")
    devices = data.get("devices") or []
    if not isinstance(devices, list):
        raise EnvironmentError_("environment: 'devices' is not a list")
    devs = []
    for i, d in enumerate(devices):
        d = _mapping(d, f"devices[{i}]")
        kw: dict[str, Any] = {}
        for f in fields(DeviceEnvironment):
            if f.name == "index":
                idx = d.get("index", -1)
                if isinstance(idx, bool) or not isinstance(idx, int):
                    raise EnvironmentError_(f"environment: 'devices[{i}].index' is not a whole number")
                kw["index"] = idx
            else:
                kw[f.name] = _text(d.get(f.name), f"devices[{i}].{f.name}")
        devs.append(DeviceEnvironment(**kw))
    versions = data.get("versions") or []
    if not isinstance(versions, list):
        raise EnvironmentError_("environment: 'versions' is not a list")
    kernels = {_text(k, "kernels"): _text(v, f"kernels.{k}")
               for k, v in _mapping(data.get("kernels"), "kernels").items()}
    timing = _mapping(data.get("timing"), "timing")
    return Environment(
        app_version=_text(data.get("app_version"), "app_version"),
        host=_text(data.get("host"), "host"), time=_text(data.get("time"), "time"),
        devices=tuple(devs),
        versions=tuple(_text(v, f"versions[{i}]") for i, v in enumerate(versions)),
        kernels=kernels,
        timing=TimingSettings(**{f.name: _text(timing.get(f.name), f"timing.{f.name}")
                                 for f in fields(TimingSettings)}))


def csv_lines(env: Environment) -> list[str]:
    """The block as a CSV file's leading comment lines: ``# key: value`` (mappings and
    lists as JSON), ``# format: 2`` first."""
    lines = [f"# format: {FORMAT}"]
    for key, value in env.to_dict().items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"# {key}: {' '.join(text.splitlines())}")
    return lines


def from_csv_lines(lines: list[str]) -> Environment:
    """The block from a CSV file's leading ``# key: value`` lines (see :func:`csv_lines`)."""
    data: dict[str, Any] = {}
    for line in lines:
        key, sep, value = line.lstrip("#").strip().partition(":")
        if not sep:
            continue
        value = value.strip()
        if value[:1] in "[{":
            try:
                data[key.strip()] = json.loads(value)
                continue
            except (ValueError, RecursionError):
                raise EnvironmentError_(f"environment: '{key.strip()}' is not valid JSON") from None
        data[key.strip()] = value
    data.pop("format", None)
    return from_dict(data)
