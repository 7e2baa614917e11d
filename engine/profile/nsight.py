"""Hardware counters per variant: one launch profiled with Nsight Compute (``ncu``).

The profiled program is this lab's own engine code in a process of its own
(``python main.py profile-target``): it opens the CUDA device in its main thread, builds
the kernel, launches it once outside the profiled range (module load, cuBLAS heuristics)
and once inside ``cuProfilerStart``/``cuProfilerStop`` — ``ncu --profile-from-start off``
profiles exactly that launch, every kernel of it (a pre-pass, cuBLAS's split-K reduce).
A kernel that crashes or hangs takes that process only; ``ncu`` is ended after a timeout.

The report is kept as ``.ncu-rep`` (open it in Nsight Compute's own GUI) and read back with
``ncu --import REPORT --csv --page raw`` — Nsight Compute's own reader, not a scrape of
its text layout — into the curated metrics of :mod:`engine.profile.metrics`. The raw CSV
is kept beside the report.
"""
from __future__ import annotations

import argparse
import functools
import glob
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from engine.profile import metrics as pm
from engine.common.files import read_text, write_atomic
from engine.results.records import RecordStatus, ResultRecord
from engine.kernels.registry import params_from_str, params_to_str

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "main.py"
#: Where Nsight Compute is looked for besides PATH, newest version first.
NCU_GLOBS = ("/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda/nsight-compute*/ncu",
             "/usr/local/cuda*/bin/ncu",
             "C:/Program Files/NVIDIA Corporation/Nsight Compute */ncu.bat")
PERMISSION_HELP = (
    "the driver lets only administrators read the GPU's performance counters "
    "(ERR_NVGPUCTRPERM). Run the lab as an administrator (root), or allow every user: on "
    "Linux add 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' to a file in "
    "/etc/modprobe.d and reboot; on Windows tick 'Allow access to the GPU performance "
    "counters to all users' in the NVIDIA Control Panel (Developer settings). "
    "See https://developer.nvidia.com/ERR_NVGPUCTRPERM")
#: Seconds a profile may take at least; more for slow kernels (ncu replays a launch once
#: per counter pass, about 40 passes for the full set).
PROFILE_TIMEOUT_MIN_S = 120.0
HOST_PARAMS = Path("/proc/driver/nvidia/params")


class ProfileUnavailable(RuntimeError):
    """Profiling cannot run here; the message says why and what to change."""


# --- finding ncu and whether it may read counters -------------------------------------------

def find_ncu() -> str | None:
    """The ``ncu`` to use: ``$NCU``, then PATH, then Nsight Compute's usual install folders
    (newest first). None when there is none."""
    env = os.environ.get("NCU")
    if env:
        return env if Path(env).is_file() and os.access(env, os.X_OK) else None
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in NCU_GLOBS:
        hits = sorted(glob.glob(pattern), key=_version_key, reverse=True)
        for hit in hits:
            if os.access(hit, os.X_OK):
                return hit
    return None


def _version_key(path: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", path))


@functools.lru_cache(maxsize=None)
def ncu_version(ncu: str) -> str:
    """``ncu 2025.3.1.0`` (the tool's own version line, asked once per ncu), or '' when it
    cannot say."""
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    match = re.search(r"Version\s+([\w.]+)", out.stdout)
    return f"ncu {match.group(1)}" if match else ""


@functools.lru_cache(maxsize=None)
def device_metrics(ncu: str) -> frozenset[str] | None:
    """Base names of the metrics this machine's GPU has (``ncu --query-metrics``, asked
    once per ncu); None when ncu cannot say (then every metric is asked for)."""
    try:
        out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return frozenset(pm.parse_query_metrics(out.stdout)) or None


def counters_restricted(params_file: Path = HOST_PARAMS) -> bool:
    """Whether the NVIDIA driver restricts counters to administrators and this process is
    not one (Linux: ``RmProfilingAdminOnly: 1`` in the driver's parameters)."""
    try:
        text = read_text(params_file, str(params_file), ValueError, max_bytes=1 << 20)
    except ValueError:
        return False                      # not Linux, or no NVIDIA driver: ncu will say
    match = re.search(r"RmProfilingAdminOnly:\s*(\d+)", text)
    if not match or match.group(1) == "0":
        return False
    return hasattr(os, "geteuid") and os.geteuid() != 0


def availability(backend: str, params_file: Path = HOST_PARAMS, with_version: bool = True
                 ) -> tuple[bool, str]:
    """(True, 'ncu 2025.3.1 at /path') or (False, why not and what to change).
    ``with_version`` False: no ``ncu --version`` call (a window enabling its action)."""
    if backend != "cuda":
        return False, (f"profiling reads NVIDIA GPU hardware counters with Nsight Compute: it "
                       f"needs the cuda backend ({backend} is selected)")
    ncu = find_ncu()
    if ncu is None:
        where = f"NCU={os.environ['NCU']} is not an executable file" if os.environ.get("NCU") \
            else "'ncu' is not on PATH nor in /opt/nvidia/nsight-compute or CUDA's bin folder"
        return False, (f"Nsight Compute's command line was not found ({where}). Install "
                       f"Nsight Compute (it comes with the CUDA toolkit) or set NCU to the "
                       f"path of its ncu")
    if counters_restricted(params_file):
        return False, "profiling is not permitted: " + PERMISSION_HELP
    return True, f"{(ncu_version(ncu) if with_version else '') or 'ncu'} at {ncu}"


def new_report_folder() -> Path:
    """A new folder for one Profile's reports: ``<user data>/profiles/<time stamp>``."""
    from engine.results.records import now_stamp  # noqa: PLC0415
    from engine.kernels.user_kernels import data_dir  # noqa: PLC0415

    base = data_dir() / "profiles"
    stamp = now_stamp().replace(":", "")
    folder, n = base / stamp, 1
    while folder.exists():
        n += 1
        folder = base / f"{stamp}-{n}"
    folder.mkdir(parents=True)
    return folder


# --- one profile ------------------------------------------------------------------------

@dataclass
class ProfileRequest:
    """One launch to profile: a variant with its parameters at a shape, on a device."""

    variant: str
    params: dict[str, int]
    m: int
    n: int
    k: int
    dtype: str = "float32"
    device_index: int = 0
    kernel_files: tuple[str, ...] = ()
    seed: int = 0
    #: C's type ("" : the input type's default) and B's layout ("" or "kn": K×N), as timed:
    #: a 16-bit kernel's build and its C buffer depend on them
    out_dtype: str = ""
    layout: str = ""

    def label(self) -> str:
        return f"{self.variant}[{params_to_str(self.params)}]" if self.params else self.variant

    def stem(self) -> str:
        """A file name for its report, plain letters, digits, '-' and '_' (safe on every
        file system and in a shell): ``ffma_wide-bk16-sw8-2048x2048x2048-float32-dev0``."""
        parts = [self.variant, *(f"{k}{v}" for k, v in self.params.items()),
                 f"{self.m}x{self.n}x{self.k}", self.dtype,
                 *([f"to-{self.out_dtype}"] if self.out_dtype else []),
                 *([self.layout] if self.layout not in ("", "kn") else []), f"dev{self.device_index}"]
        return re.sub(r"[^A-Za-z0-9_-]+", "_", "-".join(parts)).strip("_")

    @classmethod
    def of(cls, rec: ResultRecord, kernel_files: Iterable[str] = (), seed: int = 0
           ) -> "ProfileRequest":
        return cls(rec.variant, dict(rec.params), rec.m, rec.n, rec.k, rec.dtype,
                   max(rec.device_index, 0), tuple(kernel_files), seed,
                   rec.out_dtype or "", rec.layout or "")


@dataclass
class ProfileResult:
    request: ProfileRequest
    counters: dict[str, float] = field(default_factory=dict)
    kernels: list[dict] = field(default_factory=list)   # name, duration_ns, block, grid
    report: str = ""                                     # the .ncu-rep kept
    csv_path: str = ""                                   # its raw-page CSV
    tool: str = ""
    error: str = ""
    #: A problem that cost no counters (the CSV copy could not be written).
    warning: str = ""
    seconds: float = math.nan

    @property
    def ok(self) -> bool:
        return not self.error

    def to_profile(self) -> dict:
        """What a record keeps (``ResultRecord.profile``)."""
        return {"counters": dict(self.counters), "kernels": list(self.kernels),
                "report": self.report, "tool": self.tool, "error": self.error}


def profile_timeout_s(rec: ResultRecord | None, passes: int = 60) -> float:
    """A profile's time limit: at least :data:`PROFILE_TIMEOUT_MIN_S`, more for a kernel
    whose timed median says replaying it ``passes`` times takes longer."""
    median = rec.median_ms if rec is not None and math.isfinite(rec.median_ms) else 0.0
    return max(PROFILE_TIMEOUT_MIN_S, 3.0 * passes * median / 1000.0 + 60.0)


def _ncu_errors(text: str) -> str:
    lines = [ln.split("==ERROR==", 1)[1].strip() for ln in text.splitlines() if "==ERROR==" in ln]
    return "; ".join(dict.fromkeys(ln for ln in lines if ln))


def run_profile(req: ProfileRequest, out_dir: str | Path, ncu: str | None = None,
                metrics: Iterable[pm.Metric] = pm.METRICS, timeout_s: float = PROFILE_TIMEOUT_MIN_S,
                should_stop: Callable[[], bool] = lambda: False) -> ProfileResult:
    """Profile ``req`` once under ``ncu``; the report and its CSV go to ``out_dir``.

    Never raises for a profile that fails: the result's ``error`` says why (ncu missing,
    counters not permitted, the kernel did not build or crashed, a timeout, cancelled).
    """
    t0 = time.perf_counter()
    res = ProfileResult(req)
    ncu = ncu or find_ncu()
    if ncu is None:
        res.error = availability("cuda")[1]
        return res
    out = Path(out_dir)
    stem = req.stem()
    report = out / f"{stem}.ncu-rep"
    target_json = out / f"{stem}.target.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        for stale in (report, target_json):
            stale.unlink(missing_ok=True)
    except OSError as exc:       # a file where the folder should be, a folder named like a report
        res.error = (f"the report folder {out} cannot be used: {exc.strerror or exc}"
                     + (f" ({exc.filename})" if exc.filename else ""))
        return res
    metrics = tuple(metrics)
    target = [sys.executable, str(MAIN), "profile-target", "--variant", req.variant,
              "--params", params_to_str(req.params), "--shape", f"{req.m}x{req.n}x{req.k}",
              "--dtype", req.dtype, "--device", str(req.device_index), "--seed", str(req.seed),
              "--json", str(target_json)]
    if req.out_dtype:
        target += ["--out-dtype", req.out_dtype]
    if req.layout:
        target += ["--layout", req.layout]
    for path in req.kernel_files:
        target += ["--kernel-file", str(path)]
    # --clock-control none: counters under the clocks the timings ran at (ncu would lock
    # them to base); --cache-control all (the default) flushes caches before each pass.
    cmd = [ncu, "--profile-from-start", "off", "--clock-control", "none",
           "--target-processes", "all",
           "--metrics", ",".join(pm.raw_metric_names(metrics, device_metrics(ncu))),
           "--export", str(out / stem), "--force-overwrite", *target]
    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    text, why = _run(cmd, env, timeout_s, should_stop)
    res.tool = ncu_version(ncu)
    target_said = _target_said(target_json)
    if why:
        res.error = why
    elif "ERR_NVGPUCTRPERM" in text or "permission to access NVIDIA GPU Performance Counters" in text:
        res.error = "profiling is not permitted: " + PERMISSION_HELP
    elif target_said.get("error"):
        res.error = str(target_said["error"])
    elif not report.is_file():
        res.error = ("ncu wrote no report: " + (_ncu_errors(text) or _tail(text))
                     if text.strip() else "ncu wrote no report and said nothing")
    if res.error:
        res.seconds = time.perf_counter() - t0
        return res
    res.report = str(report)
    try:
        imported = subprocess.run([ncu, "--import", str(report), "--csv", "--page", "raw",
                                   "--print-units", "base"], capture_output=True, text=True,
                                  timeout=300)
        kernels = pm.parse_raw_csv(imported.stdout)
    except (OSError, subprocess.SubprocessError, pm.ProfileReadError) as exc:
        res.error = f"reading the report failed: {exc}"
        return res
    if not kernels:
        res.error = ("no kernel ran in the profiled range" + (": " + _ncu_errors(text)
                                                               if _ncu_errors(text) else ""))
        return res
    csv_path = out / f"{stem}.csv"
    try:
        write_atomic(csv_path, imported.stdout, f"the counters' CSV {csv_path}", OSError)
        res.csv_path = str(csv_path)
    except OSError as exc:
        # The counters are read already: they are kept, the missing copy is said.
        res.warning = str(exc)
    res.counters = pm.summarize(kernels, metrics)
    res.kernels = [{"name": k.name, "duration_ns": k.duration_ns, "block": k.block,
                    "grid": k.grid} for k in kernels]
    res.seconds = time.perf_counter() - t0
    return res


def _target_said(path: Path) -> dict:
    """What the profiled process wrote (``{"ok": ..., "error": ...}``), then removed; ``{}``
    when there is nothing usable (a pipe, a folder, not JSON, not an object)."""
    try:
        said = json.loads(read_text(path, path.name, ValueError, max_bytes=1 << 20))
    except (ValueError, RecursionError):
        said = {}
    try:
        if path.is_file():
            path.unlink()
    except OSError:
        pass
    return said if isinstance(said, dict) else {}


def _tail(text: str, lines: int = 6) -> str:
    return " | ".join(ln.strip() for ln in text.strip().splitlines()[-lines:])


def _run(cmd: list[str], env: dict, timeout_s: float, should_stop: Callable[[], bool]
         ) -> tuple[str, str]:
    """Run ``cmd`` in a session of its own; (its output, why it was ended or '')."""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, start_new_session=True)
    except OSError as exc:
        return "", f"ncu could not start: {exc}"
    deadline = time.monotonic() + timeout_s
    why = ""
    while True:
        try:
            text, _ = proc.communicate(timeout=0.25)
            break
        except subprocess.TimeoutExpired:
            if should_stop():
                why = "cancelled"
            elif time.monotonic() > deadline:
                why = f"timed out after {timeout_s:.0f} s (the profile was ended)"
            if why:
                _kill_group(proc)
                text, _ = proc.communicate()
                break
    return text or "", why


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass


# --- profiling a run's records ---------------------------------------------------------------

def profile_key(rec: ResultRecord) -> tuple:
    return (rec.variant, params_to_str(rec.params), rec.m, rec.n, rec.k, rec.dtype,
            rec.out_dtype or "", rec.layout or "", rec.device_index)


def why_not_profiled(rec: ResultRecord, host: str) -> str:
    """'' when ``rec`` can be profiled here, else why not."""
    if rec.backend != "cuda":
        return f"profiling needs the cuda backend ({rec.backend})"
    if rec.host and rec.host != host:
        return f"ran on {rec.host}: profiles are taken on this machine's GPUs"
    if rec.status in (RecordStatus.SKIPPED, RecordStatus.ERROR):
        return f"it did not run ({rec.status})"
    return ""


def profile_records(records: list[ResultRecord], out_dir: str | Path,
                    kernel_files: Iterable[str] = (),
                    log: Callable[[str, str], None] = lambda level, text: None,
                    progress: Callable[[int, int, str], None] = lambda done, total, what: None,
                    should_stop: Callable[[], bool] = lambda: False,
                    metrics: Iterable[pm.Metric] = pm.METRICS, seed: int = 0,
                    ncu: str | None = None) -> list[ProfileResult]:
    """Profile each distinct item of ``records`` once and store the counters in every
    matching record's ``profile``; returns the results in order. ``log(level, text)`` gets
    a line per profile, ``progress(done, total, label)`` one before each."""
    from engine.run.runner import HOST  # noqa: PLC0415

    metrics = tuple(metrics)
    groups: dict[tuple, list[ResultRecord]] = {}
    for rec in records:
        why = why_not_profiled(rec, HOST)
        if why:
            log("warning", f"not profiled: {rec.label()} at {rec.m}×{rec.n}×{rec.k}: {why}")
            continue
        groups.setdefault(profile_key(rec), []).append(rec)
    results = []
    ncu = ncu or find_ncu()
    for i, recs in enumerate(groups.values()):
        if should_stop():
            break
        req = ProfileRequest.of(recs[0], kernel_files, seed)
        shape = f"{req.m}×{req.n}×{req.k}"
        progress(i, len(groups), f"{req.label()} {shape}")
        res = run_profile(req, out_dir, ncu, metrics, profile_timeout_s(recs[0]), should_stop)
        for rec in recs:
            rec.profile = res.to_profile()
        if res.ok:
            names = ", ".join(k["name"][:40] for k in res.kernels[:3])
            log("info", f"profiled {req.label()} at {shape}: {len(res.kernels)} kernel(s) "
                        f"({names}) in {res.seconds:.1f} s; report {res.report}")
        else:
            log("error", f"profile of {req.label()} at {shape} failed: {res.error}")
        if res.warning:
            log("warning", f"profile of {req.label()} at {shape}: {res.warning}")
        results.append(res)
    progress(len(results), len(groups), "")
    return results


# --- the profiled process ------------------------------------------------------------------


