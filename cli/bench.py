"""``python main.py bench``: a sweep from the command line, without Qt.

Exit codes: 0 all verified (or verification off), 1 a verification failed or a run
errored, or --autotune's results could not be cached (they are still shown and saved),
2 bad input (arguments, sizes, matrix files, an unavailable backend).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from engine.common.dtypes import ELEMENT_NAMES, INTEGER_NAMES, ElementType, Layout, TypeSpec
from engine.inputs import matrices
from engine.results import derived, records
from engine.results.records import RecordStatus
from engine.run.events import EventKind, LogLevel
from engine.kernels import registry, user_kernels
from engine.common import terminal
from engine.measure.backends import BACKENDS, probe_all
from cli.args import Number, Parser, Percent, WholeNumber
from engine.measure import timing
from engine.run.dispatch import MODES, Run
from engine.measure.conditions import ClockLock, ClockMode, monitors_for
from engine.results import environment
from engine.run.engines import EngineHandle, LocalEngine
from engine.common.files import check_regular_file
from engine.kernels.kernel_file import KERNEL_FILE_LIMIT, shown_text
from engine.run.pool import EnginePool, RunTarget
from engine.run.process import ProcessEngine
from engine.run.runner import (BUDGET_RANGE, REPEATS_RANGE, SEED_RANGE, WARMUP_RANGE, Event, Plan,
                               expand_items)
from engine.inputs.sizes import SizeSpecError, format_shape, parse_sizes
from engine.common.terminal import literal

from cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK  # noqa: E402


class UsageError(ValueError):
    """Bad command-line input; exit code 2."""


def parse_param_overrides(text: str | None) -> dict[str, tuple[int, ...]]:
    """``block=16,32;ts=32`` or ``block=16,32 wpt=4`` → ``{'block': (16, 32), 'ts': (32,)}``;
    ``crows=auto`` leaves a parameter of ``[chosen]`` to the shape (:data:`registry.AUTO`).

    A value list runs until the next ``name=``; groups may be separated by ``;`` or spaces.
    """
    out: dict[str, list[int]] = {}
    if not text:
        return {}
    current = None
    for token in text.replace(";", ",").replace(" ", ",").split(","):
        token = token.strip()
        if not token:
            continue
        if "=" in token:
            current, _, token = token.partition("=")
            current = current.strip().lower()
            if not current:
                raise UsageError(f"--params: a name is missing before '=' in '{text}'")
            out.setdefault(current, [])
        if current is None:
            raise UsageError(f"--params: '{token}' has no name (write e.g. block=16,32)")
        try:
            out[current].append(registry.value_from_text(token))
        except ValueError:
            raise UsageError(f"--params: '{token}' is not a whole number (or auto: the shape "
                             "chooses)") from None
    known = {p for v in registry.REGISTRY.values() for p in v.space}
    unknown = sorted(set(out) - known)
    if unknown:
        raise UsageError(f"--params: unknown parameter(s) {', '.join(unknown)}; "
                         f"known: {', '.join(sorted(known))}")
    return {k: tuple(v) for k, v in out.items() if v}


#: The longest --launch-timeout (a day; engine.run.runner.Plan.validate's limit).
LAUNCH_TIMEOUT_MAX_S = 86400.0
#: Every number option's type: its range is checked where argparse reads it, in a message
#: naming the option (--warmup -1, --repeats 0, --budget nan, --launch-timeout inf).
DEVICE_INDEX = WholeNumber(0, 4095, "device index")
WARMUP = WholeNumber(*WARMUP_RANGE)
REPEATS = WholeNumber(*REPEATS_RANGE)
SEED = WholeNumber(*SEED_RANGE)
BUDGET = Number(*BUDGET_RANGE, unit="seconds", low_included=True)
NOISE_PCT = Percent(*timing.NOISE_PCT_RANGE)
NOISE_TIME = Number(*timing.NOISE_TIME_RANGE, unit="seconds", low_included=True)
LAUNCH_TIMEOUT = Number(0.0, LAUNCH_TIMEOUT_MAX_S, unit="seconds")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="main.py bench", description=(
        "Compile, time and verify matmul kernels without the GUI. Sizes: 256,512 | "
        "256:4096:x2 | 128:512:128 | MxNxK shapes such as 127x253x61 (A is MxK, B is KxN)."))
    p.add_argument("--list", action="store_true",
                   help="list backends, devices and variants with their parameters, then exit "
                        "(with --variants: those variants in full)")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="cuda, opencl or cpu (default: the first one available)")
    # None: not given (then 0); given beside --devices it is refused, not ignored.
    p.add_argument("--device", type=DEVICE_INDEX, default=None,
                   help="device index within the backend (default 0)")
    p.add_argument("--devices", default=None,
                   help="several devices at once: 'all' or indices such as 0,1 (replaces --device)")
    p.add_argument("--mode", choices=MODES, default=None,
                   help="with several devices: 'compare' runs every item on every device, "
                        "'share' divides the items (and autotune candidates) among them "
                        "(default: compare; share with --ray)")
    p.add_argument("--timeline", action="store_true",
                   help="after the run, what each engine did when (setup, compile, verify, "
                        "timing, idle): where a shared run waits")
    p.add_argument("--ray", default=None, metavar="ADDRESS",
                   help="run on every GPU (cuda) or worker slot (cpu, opencl) of a Ray cluster: "
                        "'local' starts a small one here, else the head's host:port, 'auto' "
                        "or ray://host:10001 (pip install -r requirements-cluster.txt)")
    p.add_argument("--launch-timeout", type=LAUNCH_TIMEOUT, default=None, metavar="SECONDS",
                   help="end a kernel launch that runs longer (default: from the FLOPs and the "
                        "device's peak, at least 10 s); the engine restarts and the sweep goes on")
    p.add_argument("--in-process", action="store_true",
                   help="run the engine in this process (no isolation: a crashing or hanging "
                        "kernel takes the command with it)")
    p.add_argument("--variants", default=None, help="comma-separated variant names (default: all of the backend)")
    p.add_argument("--kernel", action="append", default=[], metavar="PATH",
                   help="a kernel file of your own (.cu or .cl with a header; or a folder of "
                        "them), run next to --variants (repeatable; see 'python main.py new-kernel')")
    p.add_argument("--kernels", action="append", default=[], metavar="DIR", dest="kernel_dirs",
                   help="a folder of your kernel files, available like the built-ins (repeatable; "
                        "the user kernel folder is always read unless --no-user-kernels)")
    p.add_argument("--no-user-kernels", action="store_true",
                   help="do not read the user kernel folder (MATMUL_LAB_DATA/kernels, or the "
                        "platform's user-data folder)")
    p.add_argument("--params", default=None, help="restrict parameters, e.g. 'block=16,32;wpt=4'")
    p.add_argument("--sizes", default="256,512", help="sizes (see above)")
    p.add_argument("--dtype", choices=ELEMENT_NAMES, default="float32",
                   help="input type of A and B (half and FP8 accumulate in FP32; FP8 inputs "
                        "carry per-tensor scales; int8 sums exactly in int32; the cpu backend "
                        "runs every type, CUDA and OpenCL skip those they have no kernel for, "
                        "saying why)")
    p.add_argument("--out-dtype", choices=ELEMENT_NAMES, default=None,
                   help="type of C: float16/bfloat16 inputs write float32 (default) or their "
                        "own type; FP8 inputs write bfloat16 (default) or float32; int8 "
                        "inputs write int32")
    p.add_argument("--layout", choices=tuple(Layout), default="kn",
                   help="B as K×N row-major (kn, default) or N×K (nk, 'transposed'): the cpu "
                        "backend, cuBLAS and the kernel files whose header lists layouts = "
                        "[\"kn\", \"nk\"]; the others are skipped, saying why")
    p.add_argument("--warmup", type=WARMUP, default=3,
                   help=f"untimed launches first ({WARMUP.range_text()}; default 3)")
    p.add_argument("--repeats", type=REPEATS, default=20,
                   help=f"timed launches ({REPEATS.range_text()}; default 20)")
    p.add_argument("--budget", type=BUDGET, default=None, metavar="SECONDS",
                   help="time budget per variant in seconds (replaces --repeats; "
                        f"{BUDGET.range_text()})")
    p.add_argument("--until-noise", type=NOISE_PCT, default=None, metavar="PCT",
                   help="time until the relative standard error of the mean of the launch "
                        "times is below PCT (replaces --repeats and --budget; "
                        f"{NOISE_PCT.range_text().replace('%', '%%')}), between --noise-min-time and --noise-max-time")
    p.add_argument("--noise-min-time", type=NOISE_TIME, default=timing.NOISE_MIN_S, metavar="SECONDS",
                   help=f"with --until-noise: time at least this long (default {timing.NOISE_MIN_S:g})")
    p.add_argument("--noise-max-time", type=NOISE_TIME, default=timing.NOISE_MAX_S, metavar="SECONDS",
                   help=f"with --until-noise: stop after this long whatever the noise "
                        f"(default {timing.NOISE_MAX_S:g})")
    p.add_argument("--cold", action="store_true", help="flush the L2 cache before each timed launch")
    p.add_argument("--lock-clocks", choices=[m.value for m in ClockMode if m is not ClockMode.NONE],
                   default=None,
                   help="cuda: lock the GPU's SM clock at its base (TDP) or highest clock for the "
                        "run through NVML, restored at the end (needs root; refused: the run goes "
                        "on unlocked and says how to fix it)")
    p.add_argument("--no-verify", action="store_true", help="skip verification")
    p.add_argument("--seed", type=SEED, default=0,
                   help=f"seed of the generated matrices ({SEED.range_text()}; default 0)")
    p.add_argument("--dist", choices=matrices.DISTRIBUTIONS, default="uniform",
                   help="distribution of the generated float32 matrices (int32 ones are "
                        "whole numbers from -8 to 8, int8 ones from -128 to 127)")
    p.add_argument("--a", dest="a_path", default=None, help="matrix file for A (.npy .npz .csv .txt .mtx)")
    p.add_argument("--b", dest="b_path", default=None, help="matrix file for B (or omit with a .npz holding a and b)")
    p.add_argument("--out", default=None, help="save results to .json or .csv")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--autotune", action="store_true",
                   help="per variant and size, search the parameter space (restricted by --params) "
                        "or take the best parameters from the autotune cache; report the best")
    p.add_argument("--guess", action="store_true",
                   help="with --autotune: time only the parameters guessed from the searched shapes "
                        "of the same shape class (and the device's defaults); nothing is stored")
    p.add_argument("--retune", action="store_true",
                   help="with --autotune: ignore the cache and search again")
    p.add_argument("--profile", action="store_true",
                   help="after timing, profile one launch of each kernel with Nsight Compute "
                        "(ncu, cuda only): hardware counters go into the records and a table; "
                        "the .ncu-rep reports are kept")
    p.add_argument("--profile-dir", default=None, metavar="DIR",
                   help="with --profile: where the reports go (default: a new folder under "
                        "the user-data folder's profiles/)")
    p.add_argument("--profile-metrics", default=None, metavar="KEYS",
                   help="with --profile: only these metrics (comma-separated keys, e.g. "
                        "gld_sectors_per_request,dram_read_bytes; fewer metrics, fewer "
                        "replay passes)")
    return p


def _print_list(console, names: list[str] | None = None) -> None:
    """``--list``: backends and devices, then every variant with its parameters (values,
    default first, and one-line descriptions); ``names`` (``--list --variants``): only
    those variants, each in full (:func:`_print_variant`)."""
    from rich.markup import escape  # noqa: PLC0415
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    if names:
        for i, name in enumerate(names):
            if i:
                console.print()
            _print_variant(console, registry.get(name))
        return
    status = probe_all()
    t = Table(title="Backends and devices")
    for col in ("backend", "device", "name", "units", "memory", "peak FP32", "bandwidth"):
        t.add_column(col)
    for name, st in status.items():
        if not st.available:
            t.add_row(name, "—", Text(f"unavailable: {shown_text(st.reason)}", style="red"),
                      "", "", "", "")
            continue
        for d in st.devices:      # a driver's name is text too: printed as it reads
            t.add_row(name, str(d.index), Text(shown_text(d.name)), str(d.compute_units or "—"),
                      f"{d.memory_bytes / 2**30:.1f} GiB" if d.memory_bytes else "—",
                      f"{d.peak_gflops_fp32:,.0f} GFLOP/s" if d.peak_gflops_fp32 else "—",
                      f"{d.peak_gbps:,.0f} GB/s" if d.peak_gbps else "—")
    console.print(t)
    console.print()
    console.print(Text("Variants", style="bold"), Text("(--list --variants NAME: one in full)",
                                                        style="dim"))
    for var in registry.REGISTRY.values():
        console.print(_variant_head(var))
        console.print(_indented(Text(shown_text(var.technique)), 4))
        if var.role == "user":
            for h in var.headers:
                console.print(_indented(Text(shown_text(h.path), style="dim"), 4))
        if var.space:
            console.print(_indented(_params_grid(var), 4))
    from engine.run.cluster import ray_status  # noqa: PLC0415
    ok, why = ray_status()
    console.print(f"Ray cluster (--ray): {'available, ' if ok else 'unavailable: '}{escape(why)}")


def _variant_head(var: registry.Variant):
    """``name  role · backends``: a variant's first line in ``--list``."""
    from rich.text import Text  # noqa: PLC0415

    # Text, not markup: a user's name or title is printed as written (no [bold], no
    # :smile:, no escape code acting on the terminal).
    head = Text(shown_text(var.name), style="bold")
    head.append(f"  {var.role} · {', '.join(var.backends)}", style="dim")
    return head


def _indented(renderable, left: int):
    from rich.padding import Padding  # noqa: PLC0415

    return Padding(renderable, (0, 0, 0, left), expand=False)    # no trailing blanks


def _params_grid(var: registry.Variant, full: bool = False):
    """A variant's parameters, one a row: name, values (default first; ``auto`` where the
    shape picks it), description, folded under itself where it is long. ``full``: the
    rule that picks the ``auto`` value too."""
    from rich.table import Table  # noqa: PLC0415
    from rich.text import Text  # noqa: PLC0415

    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold", max_width=28)
    grid.add_column(overflow="fold", ratio=1)
    defaults = var.default_params()
    for pname, values in var.space.items():
        first = defaults.get(pname, values[0])
        shown = [first, *(x for x in values if x != first)]
        text = "/".join(map(registry.value_text, shown))
        if pname in var.chosen:
            text = "auto/" + text
        about = Text(shown_text(var.descriptions.get(pname, "")))
        if full and pname in var.chosen:
            about.append(f"{' ' if about else ''}(auto: {shown_text(var.chosen[pname].text)})",
                         style="dim")
        grid.add_row(Text(shown_text(pname), style="cyan"), Text(text), about)
    return grid


def _print_variant(console, var: registry.Variant) -> None:
    """One variant in full: title, summary, where it comes from, its files, parameters with
    their descriptions, and the constraints with their reasons."""
    from rich.text import Text  # noqa: PLC0415

    console.print(_variant_head(var))
    console.print(_indented(Text(shown_text(var.technique), style="bold"), 4))
    if var.summary:
        console.print(_indented(Text(shown_text(var.summary)), 4))
    facts = [("kind", var.kind), ("dtypes", ", ".join(var.dtypes)),
             ("precision", var.precision), ("from", var.seed)]
    facts += [(f"{backend} file", source) for backend, source in var.sources.items()]
    for label, value in facts:
        line = Text(f"{label}: ", style="dim")
        line.append(shown_text(value))
        console.print(_indented(line, 4))
    if var.space:
        console.print(_indented(Text("parameters (default first)", style="bold"), 4))
        console.print(_indented(_params_grid(var, full=True), 6))
    header = next((h for h in var.headers if h.backend == "cuda"),
                  var.headers[0] if var.headers else None)
    if header is not None and header.constraints:
        console.print(_indented(Text("constraints (each must hold; the reason is shown "
                                     "where one fails)", style="bold"), 4))
        for c in header.constraints:
            console.print(_indented(Text(shown_text(c.reason)), 6))
            console.print(_indented(Text(f"check: {shown_text(c.check.text)}", style="dim"), 8))


def _results_table(recs: list[records.ResultRecord]):
    from rich.table import Table  # noqa: PLC0415

    t = Table(title="Results")
    # Several engines (devices, processes, cluster workers): which one ran each row.
    several_hosts = len({r.host for r in recs if r.host}) > 1
    workers = [r.worker + (f" @ {r.host}" if several_hosts and r.host else "") for r in recs]
    with_worker = len(set(w for w in workers if w)) > 1
    for col, just in (("variant", "left"), ("shape", "right"), ("median ms", "right"),
                      ("noise %", "right"), ("GFLOP/s", "right"), ("GB/s", "right"),
                      ("vs naive", "right"), ("% peak", "right"), ("verified", "left")):
        t.add_column(col, justify=just)
    # Several devices (compare mode, two GPUs of one model): which device each row is.
    with_device = len({r.device_key() for r in recs}) > 1
    if with_device:
        t.add_column("device", justify="left")
    if with_worker:
        t.add_column("worker", justify="left")
    # NVML's figures (cuda with nvidia-ml-py): columns only where some record has them
    with_power = any(math.isfinite(r.power_w) for r in recs)
    if with_power:
        for col in ("SM MHz", "W", "GFLOP/s/W"):
            t.add_column(col, justify="right")

    def num(x, fmt):
        return "—" if x is None or not math.isfinite(x) else format(x, fmt)

    notes: dict[str, list[str]] = {}
    throttled: dict[str, list[str]] = {}
    for r, worker in zip(recs, workers):
        if r.status == RecordStatus.SKIPPED:
            verdict = "[dim]skipped[/dim]"
        elif r.status == RecordStatus.ERROR:
            verdict = "[red]error[/red]"
        elif r.passed is True:
            how = literal(r.verify_method.split("+")[0])
            verdict = (f"[green]yes[/green] {how} exact" if r.dtype in INTEGER_NAMES
                       else f"[green]yes[/green] {how} {r.rel_l2:.0e}")
        elif r.passed is False:
            verdict = "[red]FAILED[/red]"
        else:
            verdict = "not checked"
        if r.error:
            notes.setdefault(r.error, []).append(f"{r.label()}@{format_shape((r.m, r.n, r.k))}")
        if r.throttled:
            throttled.setdefault(", ".join(r.throttle), []).append(
                f"{r.label()}@{format_shape((r.m, r.n, r.k))}")
        t.add_row(literal(r.label()), format_shape((r.m, r.n, r.k)),
                  num(r.median_ms, ".4f") + (" [yellow]*[/yellow]" if r.throttled else ""),
                  num(r.noise_pct, ".1f"), num(r.gflops, ",.1f"), num(r.gbps, ",.1f"),
                  num(r.speedup_vs_naive, ".2f") + ("×" if math.isfinite(r.speedup_vs_naive) else ""),
                  num(r.pct_of_peak, ".1f"), verdict,
                  *([literal(r.device_label(with_host=several_hosts))] if with_device else []),
                  *([literal(worker)] if with_worker else []),
                  *([num(r.sm_clock_median_mhz, ".0f"), num(r.power_w, ".0f"),
                     num(r.gflops_per_watt, ",.1f")] if with_power else []))
    lines = [literal(f"{', '.join(who[:4])}{' …' if len(who) > 4 else ''}: {msg}", keep_newlines=True)
             for msg, who in notes.items()]
    lines += [literal(f"* timed under a power or thermal cap ({why}): {', '.join(who[:4])}"
                      f"{' …' if len(who) > 4 else ''}; kept and flagged, the clocks were held "
                      "down, compare with care") for why, who in throttled.items()]
    t.caption = "\n".join(lines) or None
    t.caption_justify = "left"
    return t


def lab_best_table(recs: list[records.ResultRecord]):
    """Per shape and precision, the lab best (:func:`engine.results.derived.lab_best`: the fastest
    verified lab kernel) beside cuBLAS of that precision; None when fewer than two of the
    lab's variants ran (one kernel is its own best)."""
    from rich.table import Table  # noqa: PLC0415

    lab = [r for r in recs if not derived.is_reference_record(r)]
    if len({r.variant for r in lab}) < 2:
        return None
    best = derived.lab_best(recs)
    if not best:
        return None
    t = Table(title="Lab best: the fastest verified kernel per shape (dispatching by shape, as cuBLAS does)")
    for col, just in (("shape", "right"), ("precision", "left"), ("kernel", "left"),
                      ("median ms", "right"), ("GFLOP/s", "right"), ("% of cuBLAS", "right"),
                      ("% peak", "right")):
        t.add_column(col, justify=just)
    with_device = len({r.device_key() for r in recs}) > 1
    if with_device:
        t.add_column("device", justify="left")
    # of the row's precision (TF32 may run an FP32 kernel), timed on the row's own device
    refs = derived.reference_times(recs)
    missing = "— (no cuBLAS line on its device)" if refs else "—"
    for key, r in sorted(best.items(), key=lambda kv: (kv[1].m * kv[1].n * kv[1].k, kv[0][-1])):
        pct = derived.lab_best_pct_of_reference(key, r, refs)
        t.add_row(format_shape((r.m, r.n, r.k)), key[-1].upper(), literal(r.label()),
                  f"{r.median_ms:.4f}", f"{r.gflops:,.1f}",
                  f"{pct:.1f}" if math.isfinite(pct) else missing,
                  f"{r.pct_of_peak:.1f}" if math.isfinite(r.pct_of_peak) else "—",
                  *([literal(r.device_label())] if with_device else []))
    groups = sorted({r.share_group for r in recs if r.share_group})
    models = sorted({r.device for r in recs if not r.share_group})
    notes = [f"one table over {g}: the best of all of them, each row naming its device"
             for g in groups]
    if with_device and len(models) > 1:
        notes.append("different devices (" + "; ".join(models) + "): a lab best per device")
    t.caption = literal("\n".join(notes)) if notes else None
    t.caption_justify = "left"
    return t


def _default_backend(status) -> str:
    """The first available backend of ``status`` (a :func:`probe_all` result)."""
    for name in BACKENDS:
        if status[name].available:
            return name
    return "cpu"


#: The longest warning line about one kernel file (its path and message).
WARNING_CHARS = 400


def _load_user_kernels(args, err) -> None:
    """Register the user kernel folder (its bad files are warned about) and the folders
    of ``--kernels`` (a bad file there is an error: the user named it)."""
    from rich.text import Text  # noqa: PLC0415

    for d in args.kernel_dirs:
        if not Path(d).is_dir():
            raise UsageError(f"--kernels: {shown_text(d)} is not a folder")
    folders = ([] if args.no_user_kernels else [user_kernels.user_kernel_dir()]) + args.kernel_dirs
    loaded = user_kernels.reload(folders)
    named = [registry.resolved(d) for d in args.kernel_dirs]
    fatal = []
    for problem in loaded.errors:
        # the folder the entry is in, not where a link in it leads (a loop leads nowhere)
        if any(registry.resolved(problem.path.parent).is_relative_to(d) for d in named):
            fatal.append(shown_text(problem, WARNING_CHARS))
        else:       # one line per file, printed as written (Text: no markup, no emoji)
            err.print(Text.assemble(("warning:", "yellow"), " user kernel skipped: ",
                                    shown_text(problem, WARNING_CHARS)), soft_wrap=True)
    if fatal:
        raise UsageError("\n".join(fatal))


def _list_names(text: str | None) -> list[str] | None:
    """``--list --variants a,b``: the variants to print in full (None: list them all)."""
    if text is None:
        return None
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise UsageError("--variants: no variant named (write e.g. naive,tiled_any)")
    for name in names:
        if name not in registry.REGISTRY:
            raise UsageError(f"unknown variant '{name}'; known: {', '.join(registry.REGISTRY)}")
    return names


def given_options(argv: Sequence[str]) -> set[str]:
    """The options ``argv`` sets (their ``dest``), defaults left out: what the user asked
    for, as against what argparse filled in."""
    parser = build_parser()
    for action in parser._actions:      # argparse has no public way to list them
        action.default = argparse.SUPPRESS
    namespace, _rest = parser.parse_known_args(list(argv))
    return set(vars(namespace))


def check_options(args: argparse.Namespace, given: set[str]) -> list[str]:
    """Options that the others make meaningless: an error (UsageError) where the user
    must choose, a warning (returned) where the run can go on and says what it does.
    Nothing the user typed is dropped in silence."""
    warnings: list[str] = []

    def needs(option: str, dest: str, what: str) -> None:
        if dest in given and what not in given:
            raise UsageError(f"{option} is only used with --{what.replace('_', '-')}; "
                             f"add --{what.replace('_', '-')} or drop {option}")

    if args.list:
        unused = sorted(given - {"list", "kernel_dirs", "no_user_kernels", "variants"})
        if unused:
            warnings.append("--list lists and exits; not used: "
                            + ", ".join(_option_name(d) for d in unused))
        return warnings
    if "device" in given and "devices" in given:
        raise UsageError("--device and --devices both given: --devices replaces --device; "
                         "give one of them")
    needs("--profile-dir", "profile_dir", "profile")
    needs("--profile-metrics", "profile_metrics", "profile")
    if "mode" in given and not ({"devices", "ray"} & given):
        raise UsageError("--mode divides or repeats the work among several devices; it needs "
                         "--devices or --ray")
    if "budget" in given and "repeats" in given:
        raise UsageError("--budget replaces --repeats (the launches run until the budget is "
                         "spent); give one of them")
    for other in ("repeats", "budget"):
        if "until_noise" in given and other in given:
            raise UsageError(f"--until-noise replaces --{other} (the launches run until their "
                             "times are quiet enough); give one of them")
    needs("--noise-min-time", "noise_min_time", "until_noise")
    needs("--noise-max-time", "noise_max_time", "until_noise")
    if args.in_process and "launch_timeout" in given:
        raise UsageError("--launch-timeout ends a launch by restarting the engine process; "
                         "with --in-process there is none: drop one of them")
    if args.a_path:
        if "sizes" in given:
            warnings.append("--sizes is not used: with --a the size is the matrices' own")
        if "dist" in given:
            warnings.append("--dist is not used: it draws generated matrices, and with --a "
                            "they come from the files")
        if "seed" in given:
            warnings.append("--seed: A and B come from the files; the seed only draws "
                            "verification's random checks")
    elif args.dtype in INTEGER_NAMES and "dist" in given and args.dist != "int":
        low, high = matrices.integer_range(ElementType(args.dtype))
        warnings.append(f"--dist {args.dist}: {args.dtype} matrices are always whole numbers "
                        f"from {low} to {high} (as --dist int); the distribution applies to "
                        "float types")
    if args.ray is not None:
        from engine.run.cluster import ClusterError, parse_address  # noqa: PLC0415
        try:
            parse_address(args.ray)      # before Ray is imported or joined: say it now
        except ClusterError as exc:
            raise UsageError(f"--ray: {exc}") from None
    return warnings


def _option_name(dest: str) -> str:
    return {"a_path": "--a", "b_path": "--b", "kernel_dirs": "--kernels"}.get(
        dest, "--" + dest.replace("_", "-"))


def _say_error(err, exc: BaseException) -> None:
    """``error: ...`` on stderr; the message's user text (file names, variant names,
    Ray's words) printed as written."""
    # soft_wrap: one message stays one line (a long path is not broken for a grep)
    err.print(f"[red]error:[/red] {literal(str(exc), keep_newlines=True)}", soft_wrap=True)


def _say_warning(err, text: str) -> None:
    err.print(f"[yellow]warning:[/yellow] {literal(text, keep_newlines=True)}", soft_wrap=True)


def run_bench(argv: Sequence[str]) -> int:
    console = terminal.console()
    err = terminal.console(stderr=True, pipe_width=None)
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:  # argparse already printed the message
        return EXIT_OK if exc.code == 0 else EXIT_BAD_INPUT
    given = given_options(argv)
    try:
        for warning in check_options(args, given):
            _say_warning(err, warning)
    except UsageError as exc:
        _say_error(err, exc)
        return EXIT_BAD_INPUT
    given_device = args.device is not None
    args.device = args.device if given_device else 0
    try:
        _load_user_kernels(args, err)
    except UsageError as exc:
        _say_error(err, exc)
        return EXIT_BAD_INPUT
    if args.list:
        try:
            _print_list(console, _list_names(args.variants))
        except UsageError as exc:
            _say_error(err, exc)
            return EXIT_BAD_INPUT
        return EXIT_OK
    pool = _engine_pool(args)
    try:
        probed = probe_all()  # once: probing CUDA initialises the driver
        if args.ray is not None:    # the workers' backend, not this machine's
            backend, devices = _ray_backend(args, probed), [args.device]
            from engine.run.cluster import GPU_BACKENDS  # noqa: PLC0415
            if given_device and backend in GPU_BACKENDS:
                raise UsageError("--device with --ray: each cuda engine takes the GPU Ray "
                                 "gives it; drop --device")
        else:
            backend = args.backend or _default_backend(probed)
            status = probed[backend]
            if not status.available:
                raise UsageError(f"the {backend} backend is unavailable: {status.reason}")
            devices = parse_devices(args.devices, args.device, len(status.devices), backend)
            if "mode" in given and len(devices) == 1:
                _say_warning(err, f"--mode {args.mode}: one device ({devices[0]}) runs every item; "
                                  "there is nothing to divide or compare")
        if args.b_path and not args.a_path:
            raise UsageError("--b needs --a (B alone is no problem to multiply)")
        if args.variants is not None and not args.variants.strip(" ,"):
            raise UsageError("--variants: no variant named (write e.g. naive,tiled_any)")
        names = [s.strip() for s in args.variants.split(",") if s.strip()] if args.variants else None
        for k in args.kernel:   # a pipe, a device, a link loop: one line, never a hang or a traceback
            if not os.path.isdir(k):
                try:
                    check_regular_file(Path(k), f"--kernel {k}", UsageError, KERNEL_FILE_LIMIT)
                except UsageError as exc:
                    raise UsageError(shown_text(str(exc))) from None
        kernel_files = tuple(os.path.realpath(k) for k in args.kernel)
        if kernel_files:
            loaded, problems = registry.load_kernel_files(kernel_files)
            if problems:
                raise UsageError("\n".join(problems))
            if not loaded:
                raise UsageError(f"--kernel: no kernel file in {', '.join(args.kernel)}")
            names = (names or []) + [n for n in loaded if n not in (names or [])]
        for name in names or []:
            try:
                v = registry.get(name)
            except KeyError as exc:
                raise UsageError(str(exc.args[0])) from None
            if backend not in v.sources:
                raise UsageError(f"{name} has no {backend} kernel (it runs on {', '.join(v.backends)})")
        overrides = parse_param_overrides(args.params)
        chosen = names or [v.name for v in registry.default_variants(backend)]
        unused = sorted(p for p in overrides if not any(p in registry.get(n).space for n in chosen))
        if unused:
            raise UsageError(f"--params: {', '.join(unused)} is not a parameter of "
                             f"{', '.join(chosen) if len(chosen) <= 6 else 'the chosen variants'}")
        for pname, values in overrides.items():   # else every item of it would be a skip
            offered = sorted({x for n in chosen for x in registry.get(n).space.get(pname, ())})
            outside = [v for v in values if v != registry.AUTO and v not in offered]
            if outside:
                shown = str(outside[0]) if len(str(outside[0])) <= 24 else str(outside[0])[:20] + "…"
                raise UsageError(f"--params: {pname}={shown} is not a value of "
                                 f"{', '.join(chosen) if len(chosen) <= 6 else 'the chosen variants'}"
                                 f" (they offer {pname}={'/'.join(map(str, offered))})")
        items = expand_items(backend, names, overrides)
        if not items:
            raise UsageError(f"no variants for the {backend} backend")
        shapes = [] if args.a_path else parse_sizes(args.sizes)
        mats = None
        try:
            TypeSpec(args.dtype, args.out_dtype, args.layout)
        except ValueError as exc:
            raise UsageError(f"--out-dtype: {exc}") from None
        if args.a_path:
            pair = matrices.load_operands(args.a_path, args.b_path, args.dtype)
            mats = pair
            err.print(literal(f"A: {matrices.describe(pair.a)}, B: {matrices.describe(pair.b)}"
                              + (f" ({pair.note})" if pair.note else "")))
        if args.out:
            check_out_path(args.out)
        if (args.autotune or args.retune or args.guess) and args.a_path:
            raise UsageError("--autotune needs --sizes, not matrix files")
        profile_metrics, profile_dir = _profile_setup(args, backend) if args.profile else (None, None)
        if args.in_process and len(devices) > 1:
            raise UsageError("--in-process runs one device; drop --devices or --in-process")
        ray_engs = _ray_engines(pool, args.ray, backend) if args.ray is not None else None
        if ray_engs:
            devices = [ray_engs[0].device]
        plan = Plan(backend=backend, items=items, shapes=shapes, dtype=args.dtype,
                    out_dtype=args.out_dtype, layout=args.layout,
                    device=devices[0], warmup=args.warmup, repeats=args.repeats,
                    time_budget_s=args.budget, cold=args.cold, verify=not args.no_verify,
                    until_noise=None if args.until_noise is None else timing.NoiseStop(
                        args.until_noise, args.noise_min_time, args.noise_max_time),
                    seed=args.seed, dist=args.dist, matrices=mats,
                    autotune=args.autotune or args.retune or args.guess, retune=args.retune,
                    tune="guess" if args.guess else "search",
                    launch_timeout_s=args.launch_timeout,
                    kernel_files=tuple(dict.fromkeys(
                        kernel_files + user_kernels.kernel_files_of(n for n, _ in items))))
        try:
            plan.validate()      # the window's limits, in the window's words
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    except (UsageError, SizeSpecError, matrices.MatrixInputError) as exc:
        pool.close(ENGINE_CLOSE_S)      # a cluster's engines may be open already
        _say_error(err, exc)
        return EXIT_BAD_INPUT
    # Before the search: a cache that cannot be read or written is said now, not after it.
    cache_problems = _autotune_cache_check(plan, err) if plan.autotune else []
    target = RunTarget(backend, tuple(devices), args.mode or ("share" if ray_engs else "compare"),
                       args.ray)
    # The lock is held here, in the command's process, not in an engine: a crashed engine
    # cannot leave the clocks locked; the lock's finally (and atexit) restores them.
    monitors = _lock_monitors(args, backend, devices, probed, err)
    lock = ClockLock(ClockMode(args.lock_clocks) if monitors is not None else ClockMode.NONE,
                     monitors or [])
    try:
        with lock:
            if lock.note:
                err.print(literal(f"--lock-clocks {args.lock_clocks}: {lock.note}"))
            runs: list[Run] = []
            recs, interrupted = _run_with_progress(pool, target, plan, err, quiet=args.quiet,
                                                   cache_problems=cache_problems, runs=runs)
    finally:
        pool.close(ENGINE_CLOSE_S)
    for problem in lock.restore_problems:
        err.print(f"[red]error:[/red] {literal(problem)}")
    console.print(_results_table(recs))
    lab = lab_best_table(recs)
    if lab is not None:
        console.print(lab)
    if args.timeline and runs:
        console.print(literal(runs[-1].timeline.text(), keep_newlines=True), soft_wrap=True)
    profile_failed = False
    if args.profile and not interrupted:
        profile_failed = _profile(recs, plan, profile_dir, profile_metrics, console, err)
    if args.out:
        try:
            used = probed[backend].devices if args.ray is None and backend in probed else []
            env = environment.collect(
                recs, [d for d in used if d.index in devices],
                environment.timing_of(recs, args.budget, clock_lock=(
                    f"{args.lock_clocks}: {lock.note or f'not used ({backend})'}"
                    if args.lock_clocks else "")))
            path = records.save(recs, args.out, environment=env)
            err.print(f"saved {len(recs)} records to {literal(path)}")
        except (OSError, ValueError) as exc:
            # The folder was writable at the start; keep the results anyway.
            fallback = Path(tempfile.gettempdir()) / f"matmul-lab-results-{os.getpid()}.json"
            records.save(recs, fallback)
            err.print(f"[red]error:[/red] saving to {literal(args.out)} failed ({literal(exc)}); "
                      f"the {len(recs)} records are in {literal(fallback)}")
            return EXIT_FAILED
    if interrupted:
        err.print(f"interrupted: kept {len(recs)} finished result(s)")
        return EXIT_INTERRUPTED
    if any(r.build_failed and registry.role_of(r.variant) == "user" for r in recs):
        return EXIT_BAD_INPUT            # a kernel file of the user's did not compile
    if not recs:                         # the run could not start: its reason is printed above
        return EXIT_FAILED
    bad = [r for r in recs if r.passed is False or r.status == RecordStatus.ERROR]
    not_cached = any(p.lost for p in cache_problems)
    if not_cached:
        err.print("[yellow]warning: the autotune results above were not cached (exit code 1)"
                  "[/yellow]", markup=True, highlight=False)
    return EXIT_FAILED if bad or profile_failed or not_cached else EXIT_OK


def _lock_monitors(args, backend: str, devices: list[int], probed, err) -> list | None:
    """The NVML monitors of the GPUs ``--lock-clocks`` locks (a GPU without one: it is said
    why); None where nothing is to be locked (not asked, not cuda, --ray)."""
    if not args.lock_clocks:
        return None
    if args.ray is not None or backend != "cuda":
        _say_warning(err, f"--lock-clocks locks the clocks of this machine's NVIDIA GPUs (cuda); "
                          f"not used with {'--ray' if args.ray is not None else backend}")
        return None
    monitors, missing = monitors_for(d for d in probed[backend].devices if d.index in devices)
    for why in missing:
        _say_warning(err, f"--lock-clocks: {why}")
    return monitors


def _autotune_cache_check(plan: Plan, err) -> list:
    """``--autotune``: the cache's problems (:func:`engine.run.autotune.prepare_cache`), said
    before the search; the run's searches say each again only if it is new."""
    from engine.run import autotune  # noqa: PLC0415

    state = autotune.prepare_cache(writing=plan.tune == "search")
    for problem in state.problems:
        _say_cache_problem(err, problem)
    return list(state.problems)


def _say_cache_problem(err, problem) -> None:
    from engine.common.terminal import literal  # noqa: PLC0415

    err.print(f"[yellow]warning: {literal(problem.message())}[/yellow]", markup=True,
              highlight=False)


def _profile_setup(args, backend: str):
    """``--profile``'s checks before the sweep: (metrics, report folder)."""
    from engine.profile import nsight as profile, metrics as profile_metrics  # noqa: PLC0415

    if args.ray is not None:
        raise UsageError("--profile profiles this machine's GPUs; drop --ray")
    ok, why = profile.availability(backend)
    if not ok:
        raise UsageError(f"--profile: {why}")
    try:
        metrics = profile_metrics.select(
            [k.strip() for k in args.profile_metrics.split(",") if k.strip()]
            if args.profile_metrics else None)
    except ValueError as exc:
        raise UsageError(f"--profile-metrics: {exc}") from None
    try:
        folder = Path(args.profile_dir) if args.profile_dir else profile.new_report_folder()
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--profile-dir: the report folder cannot be made ({exc})") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--profile-dir: {folder} cannot be written")
    return metrics, folder


def _profile(recs, plan: Plan, folder: Path, metrics, console, err) -> bool:
    """Profile each record's item once; print the counters; True if a profile failed."""
    from engine.profile import nsight as profile  # noqa: PLC0415

    def log(level: str, text: str) -> None:
        colour = {"error": "red", "warning": "yellow"}.get(level)
        err.print(f"[{colour}]{literal(text, True)}[/{colour}]" if colour else literal(text, True),
                  markup=True, highlight=False)

    def progress(done: int, total: int, what: str) -> None:
        if what:
            err.print(f"profiling {done + 1}/{total}: {literal(what)}", highlight=False)

    results = profile.profile_records(recs, folder, plan.kernel_files, log, progress,
                                      metrics=metrics, seed=plan.seed)
    for table in profile_tables(recs, metrics):
        console.print(table)
    err.print(f"reports (open in Nsight Compute): {literal(folder)}")
    return any(not r.ok for r in results)


def profile_tables(recs, metrics=None) -> list:
    """One rich table per shape: a row per metric, a column per profiled record."""
    from rich.table import Table  # noqa: PLC0415

    from engine.profile import metrics as pm  # noqa: PLC0415

    metrics = metrics or pm.METRICS
    shapes: dict[tuple, list] = {}
    for r in recs:
        if records.profile_data(r).counters:
            shapes.setdefault((r.m, r.n, r.k, r.dtype), []).append(r)
    tables = []
    for (m, n, k, dtype), rows in shapes.items():
        for first in range(0, len(rows), 5):      # five columns a table: readable at 160
            chunk = rows[first:first + 5]
            part = f" ({first // 5 + 1}/{(len(rows) + 4) // 5})" if len(rows) > 5 else ""
            t = Table(title=f"Profile at {format_shape((m, n, k))} {dtype} (Nsight Compute, "
                            f"one launch){part}")
            t.add_column("metric")
            for r in chunk:
                t.add_column(literal(r.label()), justify="right", overflow="fold")
            for metric in metrics:
                t.add_row(metric.label, *(literal(pm.value_text(metric, records.profile_data(r).counters))
                                          for r in chunk))
            tables.append(t)
    return tables


def _ray_backend(args, probed) -> str:
    """``--ray``: Ray usable, no flag against it, and the backend the workers run: --backend,
    else cuda when the cluster has GPUs, else the first other backend available here."""
    from engine.run.cluster import ClusterError, connect, ray_status  # noqa: PLC0415

    ok, why = ray_status()
    if not ok:
        raise UsageError(why)
    if args.in_process or args.devices is not None:
        raise UsageError("--ray runs one engine per GPU or slot of the cluster; "
                         "drop --in-process and --devices")
    if args.backend is not None:
        return args.backend
    try:
        has_gpus = bool(connect(args.ray).get("GPU"))
    except ClusterError as exc:
        raise UsageError(str(exc)) from None
    return "cuda" if has_gpus else next(
        (b for b in BACKENDS if b != "cuda" and probed[b].available), "cpu")


#: How long each engine gets to close when the command ends (then it is ended).
ENGINE_CLOSE_S = 10.0


def _engine_pool(args) -> EnginePool:
    """The command's engines: one per device in a process of its own (in this process
    with --in-process), or one per GPU or slot of --ray's cluster.  The command keeps no
    core for itself: the engines share them all."""
    def cluster_engines(address: str, backend: str) -> list[EngineHandle]:
        from engine.run.cluster import ray_engines  # noqa: PLC0415  (Ray only when used)
        return list(ray_engines(address, backend, device=args.device))

    return EnginePool(LocalEngine if args.in_process else ProcessEngine, cluster_engines,
                      reserve_cpus=0)


def _ray_engines(pool: EnginePool, address: str, backend: str) -> list[EngineHandle]:
    """One engine per GPU (cuda) or slot (cpu, opencl) of the cluster at ``address``."""
    from engine.run.cluster import ClusterError  # noqa: PLC0415

    try:
        return pool.cluster_engines(address, backend)
    except ClusterError as exc:
        raise UsageError(str(exc)) from None


def check_out_path(out: str) -> None:
    """``--out`` before the sweep: a .json/.csv file name (not a folder) in a folder that
    exists and can be written, and if the file exists, one that can be replaced."""
    p = Path(out)
    if p.is_dir():
        raise UsageError(f"--out: {out} is a folder; give a file name ending in .json or .csv")
    if p.suffix.lower() not in (".json", ".csv"):
        raise UsageError(f"--out must end in .json or .csv, not '{out}'")
    folder = p.resolve().parent
    if not folder.is_dir():
        raise UsageError(f"--out: the folder {p.parent} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--out: the folder {p.parent} cannot be written")
    if p.exists() and not p.is_file():
        raise UsageError(f"--out: {out} is not a regular file")
    if p.exists() and not os.access(p, os.W_OK):
        raise UsageError(f"--out: {out} cannot be written")


def parse_devices(text: str | None, single: int, count: int, backend: str) -> list[int]:
    """``--devices``: 'all' or comma-separated indices (each once); else ``[--device]``."""
    if text is None:
        chosen = [single]
    elif text.strip().lower() == "all":
        chosen = list(range(count))
    else:
        chosen = []
        for tok in text.split(","):
            tok = tok.strip()
            if not tok:
                continue
            try:
                idx = int(tok)
            except ValueError:
                raise UsageError(f"--devices: '{tok}' is not a device index (write e.g. 0,1 or all)") from None
            if idx in chosen:
                raise UsageError(f"--devices: device {idx} is listed twice")
            chosen.append(idx)
    if not chosen:
        raise UsageError(f"--devices: no device given; the {backend} backend has {count}")
    flag = "--device" if text is None else "--devices"
    for idx in chosen:
        if not 0 <= idx < count:
            raise UsageError(f"{flag} {idx}: the {backend} backend has {count} device(s)"
                             + (f" (0–{count - 1})" if count else ""))
    return chosen


def _wait(run: Run, err) -> tuple[list[records.ResultRecord], bool]:
    """The run's final records; Ctrl-C (or SIGTERM) cancels it, keeps what finished."""
    import signal  # noqa: PLC0415

    interrupted = False

    def on_term(signum, frame):  # SIGTERM: the same as Ctrl-C
        raise KeyboardInterrupt
    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:          # not the main thread (a test, a library caller)
        old = None
    try:
        while True:
            try:
                return run.result(), interrupted
            except KeyboardInterrupt:
                if not interrupted:
                    interrupted = True
                    run.cancel()
                    err.print("interrupted: stopping after the current item…")
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _run_with_progress(pool: EnginePool, target: RunTarget, plan: Plan, err, quiet: bool,
                       cache_problems: list | None = None, runs: list | None = None
                       ) -> tuple[list[records.ResultRecord], bool]:
    """Run on ``pool``'s engines for ``target`` with a progress bar (none when ``quiet``);
    errors are printed after it. Autotune cache problems not in ``cache_problems`` yet are
    added to it and printed too; the started :class:`Run` goes into ``runs``."""
    def started(run: Run) -> Run:
        if runs is not None:
            runs.append(run)
        return run

    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,  # noqa: PLC0415
                               TimeElapsedColumn, TimeRemainingColumn)

    from engine.run.autotune import CacheEvent  # noqa: PLC0415

    errors: list[str] = []
    cache_problems = [] if cache_problems is None else cache_problems
    new_problems: list = []

    def cache_event(ev: Event) -> bool:
        """A cache problem (kept for the exit code, said after the run when new)."""
        if not isinstance(ev, CacheEvent) or ev.problem is None:
            return False
        if ev.problem not in cache_problems:
            cache_problems.append(ev.problem)
            new_problems.append(ev.problem)
        return True

    if quiet:
        def emit(ev: Event) -> None:
            if cache_event(ev):
                return
            if ev.kind == EventKind.LOG and ev.level in (LogLevel.ERROR, LogLevel.WARNING):   # quiet: no bar, all said
                errors.append(ev.message)
        recs, interrupted = _wait(started(pool.start_run(plan, target, emit)), err)
    else:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TimeRemainingColumn(), console=err, transient=True) as prog:
            task = prog.add_task("starting", total=None)

            def emit(ev: Event) -> None:  # called on the run's threads; rich is thread-safe
                if cache_event(ev):
                    return
                if ev.kind in (EventKind.STARTED, EventKind.PROGRESS, EventKind.RESULT):
                    prog.update(task, total=ev.total or None, completed=ev.done,
                                description=literal(ev.current or ev.message or "running"))
                elif ev.kind == EventKind.LOG and ev.level in (LogLevel.ERROR, LogLevel.WARNING):
                    errors.append(ev.message)
            recs, interrupted = _wait(started(pool.start_run(plan, target, emit)), err)
    for msg in errors:
        err.print(f"[red]{literal(msg, keep_newlines=True)}[/red]")
    for problem in new_problems:
        _say_cache_problem(err, problem)
    return recs, interrupted


def main(argv: Sequence[str] | None = None) -> int:
    return run_bench(sys.argv[1:] if argv is None else argv)
