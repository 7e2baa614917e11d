"""The shape suite: every contender kernel, tuned per shape, against both cuBLAS lines.

    python3 benchmarks/shapes.py [--backend cuda] [--device 0] [--sizes SUITE_OR_SIZES]
                                 [--variants a,b] [--params 'bk=16'] [--out DIR]

For each shape of the suite (``engine.inputs.sizes.SHAPE_SUITE``: square and odd sizes, flat K,
tall and wide panels, skinny panels and matrix-vector products; or ``--sizes``), every
parameter combination of every contender valid at that shape is compiled, verified and
timed through the engine (``Sweep``), with the library references (cuBLAS strict FP32 and
TF32) in the same run. The winners are stored in the autotune cache (``--cache``), so the
window's and the CLI's autotune start from them.

Per shape the table gives the lab best (engine.results.derived.lab_best: the fastest verified
kernel of the lab, what dispatching by shape gives) of each precision with its % of the
same-precision cuBLAS line and % of the precision's peak, and, for memory-bound shapes
(arithmetic intensity under the FP32 ridge of the measured copy bandwidth), the
effective bandwidth as % of the measured device-to-device copy bandwidth. Below it, for
each variant: how close the parameters guessed from the other shapes of its shape class
(``engine.run.autotune.guess``, leave-one-out) come to the full search at each shape.

Paired rounds (``--paired N``, default 3): after a shape's sweep, each precision's lab best
and its cuBLAS line are timed again in turn, on the same inputs, N times each (best, cuBLAS,
best, cuBLAS, ...), and the table's % of cuBLAS is the median of the N per-round ratios, with
their lowest and highest beside it. One timing of each, tens of seconds apart in a sweep,
compares two clock states: at 4096³ on an H200 cuBLAS TF32 alone took 376-390 µs over six
rounds of one session (benchmarks/NOTES.md, round 17). The paired records are kept (marked
``extra["paired"]``) but never pick the lab best or feed the autotune cache.

Contenders (``--variants`` unset): per precision every rung of the ladder on the backend from
``CONTENDER_FLOOR[precision]`` up (a backend without that rung: its ``CONTENDERS[precision]``
highest rungs), the seeds where a backend has no rungs. All records go
to ``DIR/shapes.json``, the table to ``DIR/shapes.txt`` (DIR: ``--out``, else $OUT, else
benchmarks/results).
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.run import autotune  # noqa: E402
from engine.results import records  # noqa: E402
from engine.kernels import registry  # noqa: E402
from cli.bench import parse_param_overrides  # noqa: E402
from engine.results.derived import (is_reference_record, lab_best, pct_of, pct_of_reference,  # noqa: E402
                                    problem_key, record_precision, reference_times)
from engine.results.records import ResultRecord  # noqa: E402
from engine.kernels.registry import params_to_str  # noqa: E402
from engine.run.runner import Plan, Sweep, expand_items  # noqa: E402
from engine.inputs.sizes import SHAPE_SUITE, format_shape, parse_sizes  # noqa: E402

#: The lowest rung of each precision that runs by default, with every rung above it: FP32's
#: ffma_regdb (18) is the lab best on square and flat shapes of a few thousand (1000³-3000³,
#: 8192²×256, 64×4096²) and, by its parameters, on narrow N and N % 4 != 0 at mid sizes;
#: above it the class specialists (24 skinny, both its streams, 32 small). A floor, not a
#: count: a count of ten, right when it was set, dropped ffma_regdb once rung 33 came
#: (round 19).
CONTENDER_FLOOR = {"fp32": "ffma_regdb", "tf32": "tf32_mma"}
#: Where a backend lacks the floor rung: how many of its highest rungs run.
CONTENDERS = {"fp32": 10, "tf32": 5}

#: Rounds of the paired pass (``--paired``): the lab best and its cuBLAS line timed in turn.
PAIRED_ROUNDS = 3


def contenders(backend: str) -> list[str]:
    """The references, then per precision the highest rungs (by ladder order) on
    ``backend``; a backend without rungs runs its seeds and baseline."""
    pool = registry.variants_for(backend)
    out = [v.name for v in pool if v.role == "reference" and "float32" in v.dtypes]
    for precision in ("fp32", "tf32"):
        for roles in (("rung",), ("seed", "baseline")):
            mine = [v for v in pool if v.role in roles and v.precision == precision and v.kind == "gemm"]
            if mine:
                mine.sort(key=lambda v: (v.order if v.order is not None else -1, v.name), reverse=True)
                floor = next((v for v in mine if v.name == CONTENDER_FLOOR.get(precision)), None)
                if floor is not None and floor.order is not None:
                    out += [v.name for v in mine if v.order is not None and v.order >= floor.order]
                else:
                    out += [v.name for v in mine[:CONTENDERS[precision]]]
                break
    return out


def items_at(backend: str, names: list[str], overrides, shape, dtype: str) -> list[tuple[str, dict]]:
    """Every combination of ``names`` valid at ``shape`` (invalid ones are left out: the
    constraint says why in ``bench``)."""
    return [(n, p) for n, p in expand_items(backend, names, overrides)
            if registry.get(n).check(backend, p, *shape, dtype) is None]


def _known(value: float | None) -> float | None:
    """A record's measured figure, or None where it was not measured (NaN)."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


def is_memory_bound(r: ResultRecord) -> bool:
    """Under the FP32 ridge point of the measured copy bandwidth: bytes, not FLOPs, decide."""
    peak, copy = _known(r.peak_gflops), _known(r.copy_gbps)
    if record_precision(r) != "fp32":
        return False
    if not (peak and copy and r.bytes):
        return False
    return r.flops / r.bytes < peak / copy


def _pct(x: float) -> str:
    return f"{x:.1f}" if isinstance(x, float) and math.isfinite(x) else "—"


def is_paired(r: ResultRecord) -> bool:
    """A record of the paired pass (not of the sweep)."""
    return isinstance(r.extra.get("paired"), dict)


def sweep_records(recs: list[ResultRecord]) -> list[ResultRecord]:
    """The sweep's records: what picks the lab best, the cache's winners and the guess."""
    return [r for r in recs if not is_paired(r)]


def paired_items(recs: list[ResultRecord], shape, against: dict[str, str] | None = None
                 ) -> list[tuple[str, tuple[str, dict], tuple[str, dict]]]:
    """``[(precision, (variant, params) of the lab best, (variant, params) of its line)]`` at
    ``shape``, from the sweep's records: the line is the fastest reference record (cuBLAS) of
    the lab best's problem, or, with ``against`` ({precision: variant}), that variant's
    fastest verified record at the shape (a backend without a library line)."""
    here = [r for r in sweep_records(recs) if (r.m, r.n, r.k) == shape]
    out = []
    for key, best in lab_best(here).items():
        precision = key[-1]
        if against is not None:
            lines = [r for r in here if r.variant == against.get(precision) and r.status == "ok"
                     and r.passed is True and problem_key(r)[:-1] == key[:-1]]
        else:
            lines = [r for r in here if is_reference_record(r) and r.status == "ok"
                     and problem_key(r) == key and math.isfinite(r.median_ms)]
        line = min(lines, key=lambda r: r.median_ms) if lines else None
        if line is not None and (line.variant, line.params) != (best.variant, best.params):
            out.append((precision, (best.variant, dict(best.params)), (line.variant, dict(line.params))))
    return out


def paired_pass(sweep: Sweep, plan_args: dict, recs: list[ResultRecord], shape, rounds: int,
                emit, against: dict[str, str] | None = None) -> list[ResultRecord]:
    """Time each precision's lab best at ``shape`` and its line in turn, ``rounds`` times
    each, on one upload of the inputs (one plan: best, line, best, line, ...); every record
    verified as in the sweep and marked ``extra["paired"] = {precision, round, line}``."""
    out: list[ResultRecord] = []
    for precision, best, line in paired_items(recs, shape, against):
        plan = Plan(items=[best, line] * rounds, shapes=[shape], **plan_args)
        seen: dict[str, int] = defaultdict(int)
        for r in sweep.run(plan, emit):
            role = "lab best" if (r.variant, r.params) == best else "line"
            r.extra["paired"] = {"precision": precision, "round": seen[role], "line": role}
            seen[role] += 1
            out.append(r)
    return out


def paired_ratios(recs: list[ResultRecord], shape, precision: str) -> list[float]:
    """Per paired round at ``shape`` of ``precision``: the line's time / the lab best's, in
    % (rounds where either did not run and verify are left out)."""
    rounds: dict[int, dict[str, float]] = defaultdict(dict)
    for r in recs:
        p = r.extra.get("paired")
        if (isinstance(p, dict) and (r.m, r.n, r.k) == shape and p.get("precision") == precision
                and r.status == "ok" and r.passed is not False and math.isfinite(r.median_ms)
                and r.median_ms > 0):
            rounds[p["round"]][p["line"]] = r.median_ms
    return [100.0 * t["line"] / t["lab best"] for _, t in sorted(rounds.items())
            if "line" in t and "lab best" in t]


def summary_rows(recs: list[ResultRecord]) -> list[dict]:
    """Per shape: the lab best of each precision, % of its cuBLAS and peak, bandwidth. The
    sweep's records pick the lab best; where paired rounds ran, % of cuBLAS is their median
    (``pct_of_cublas_sweep``: the sweep's one timing of each; ``paired``: the rounds' ratios)."""
    swept = sweep_records(recs)
    refs = reference_times(swept)
    best = lab_best(swept)
    shapes = list(dict.fromkeys((r.m, r.n, r.k) for r in recs))
    rows = []
    for shape in shapes:
        row = {"shape": shape, "verified": sum(1 for r in recs if (r.m, r.n, r.k) == shape
                                              and r.status == "ok" and r.passed is True),
               "ran": sum(1 for r in recs if (r.m, r.n, r.k) == shape and r.status != "skipped")}
        for precision in ("fp32", "tf32"):
            won = [(key, r) for key, r in best.items() if (r.m, r.n, r.k) == shape and key[-1] == precision]
            if not won:
                continue
            key, r = min(won, key=lambda kr: kr[1].median_ms)
            ref = refs.get(key)
            row[precision] = {
                "label": r.label(), "ms": r.median_ms, "gflops": r.gflops, "gbps": r.gbps,
                "pct_of_cublas": pct_of_reference(ref, r.median_ms),
                "pct_of_peak": r.pct_of_peak, "memory_bound": is_memory_bound(r),
                "pct_of_copy": pct_of(r.gbps, r.copy_gbps),
                "cublas_ms": ref if ref else math.nan}
            row[precision]["pct_of_cublas_sweep"] = row[precision]["pct_of_cublas"]
            ratios = paired_ratios(recs, shape, precision)
            row[precision]["paired"] = ratios
            if ratios:
                row[precision]["pct_of_cublas"] = statistics.median(ratios)
        rows.append(row)
    return rows


def _spread(cell: dict) -> str:
    """The paired rounds' lowest-highest % of cuBLAS, or empty without rounds."""
    ratios = cell.get("paired") or []
    return f"{min(ratios):.1f}-{max(ratios):.1f}" if ratios else ""


def summary_table(rows: list[dict], device) -> str:
    head = (f"{'shape':<18} {'FP32 lab best':<54} {'TFLOP/s':>8} {'%cuBLAS':>8} {'rounds':>11} {'%peak':>6} "
            f"{'GB/s':>7} {'%copy':>6}   {'TF32 lab best':<40} {'TFLOP/s':>8} {'%cuBLAS':>8} {'rounds':>11} "
            f"{'%peak':>6}")
    lines = []
    if device is not None:
        bits = [f"device: {device.name}" + (f" (cc {device.compute_capability})"
                                            if device.compute_capability else "")]
        for what, v in (("FP32 SIMT", device.peak_gflops_fp32), ("TF32 tensor", device.peak_gflops_tf32)):
            if v:
                bits.append(f"{what} peak {v / 1e3:.1f} TFLOP/s")
        if device.copy_gbps:
            bits.append(f"measured copy {device.copy_gbps:,.0f} GB/s")
        lines.append("; ".join(bits))
    lines += [head, "-" * len(head)]
    for row in rows:
        f, t = row.get("fp32"), row.get("tf32")
        cells = [f"{format_shape(row['shape']):<18}"]
        if f:
            bw = f"{f['gbps']:>7.0f} {_pct(f['pct_of_copy']) if f['memory_bound'] else '':>6}"
            cells.append(f"{f['label'][:54]:<54} {f['gflops'] / 1e3:>8.2f} {_pct(f['pct_of_cublas']):>8} "
                         f"{_spread(f):>11} {_pct(f['pct_of_peak']):>6} {bw}")
        else:
            cells.append(f"{'—':<54} {'':>8} {'':>8} {'':>11} {'':>6} {'':>7} {'':>6}")
        if t:
            cells.append(f"  {t['label'][:40]:<40} {t['gflops'] / 1e3:>8.2f} {_pct(t['pct_of_cublas']):>8} "
                         f"{_spread(t):>11} {_pct(t['pct_of_peak']):>6}")
        lines.append(" ".join(cells))
    lines.append("memory-bound shapes (intensity under the FP32 ridge of the measured copy bandwidth) "
                 "show their effective bandwidth as % of the copy")
    if any((row.get(p) or {}).get("paired") for row in rows for p in ("fp32", "tf32")):
        lines.append("%cuBLAS: the median over paired rounds (the lab best and cuBLAS timed in turn on "
                     "the same inputs); rounds: their lowest-highest (without rounds: one timing of each)")
    return "\n".join(lines)


def search_winners(recs: list[ResultRecord]) -> dict[tuple, ResultRecord]:
    """{(variant, shape): the fastest verified record} of the lab's kernels in the sweep."""
    out: dict[tuple, ResultRecord] = {}
    for r in sweep_records(recs):
        if r.status != "ok" or r.passed is not True or not math.isfinite(r.median_ms) \
                or is_reference_record(r):
            continue
        key = (r.variant, (r.m, r.n, r.k))
        if key not in out or r.median_ms < out[key].median_ms:
            out[key] = r
    return out


def guess_rows(recs: list[ResultRecord], backend: str, device_name: str, dtype: str,
               cache: Path, arch: str | None = None) -> list[dict]:
    """For each (variant, shape) searched: the parameters ``autotune.guess`` proposes from
    the other shapes (leave-one-out: the shape's own entry ignored) and how fast they ran
    in the full search, as % of the search's best. ``cache`` holds the winners."""
    recs = sweep_records(recs)
    times: dict[tuple, float] = {}
    for r in recs:
        if r.status == "ok" and r.passed is True and math.isfinite(r.median_ms):
            times[(r.variant, (r.m, r.n, r.k), params_to_str(r.params))] = r.median_ms
    searched: dict[tuple, list[dict]] = defaultdict(list)
    for r in recs:
        if r.status != "skipped":
            searched[(r.variant, (r.m, r.n, r.k))].append(dict(r.params))
    rows = []
    for (variant, shape), best in search_winners(recs).items():
        # among the combinations the search ran, so that each guess has a time to compare
        g = autotune.guess_candidates(backend, device_name, variant, dtype, shape, path=cache,
                                      exclude_exact=True, arch=arch, combos=searched[(variant, shape)])
        if not g.candidates:
            continue
        params = g.candidates[0]
        how = (f"class ({g.shapes} shapes)" if g.source == "class"
               else f"nearest {format_shape(g.near)}" if g.source == "nearest" else g.source)
        t = times.get((variant, shape, params_to_str(params)))
        rows.append({"variant": variant, "shape": shape, "guess": params, "how": how,
                     "best": dict(best.params),
                     "pct_of_search": 100.0 * best.median_ms / t if t else math.nan})
    return rows


def guess_table(rows: list[dict]) -> str:
    if not rows:
        return "guess from shape class: nothing to compare"
    lines = [f"{'variant':<18} {'shape':<18} {'guess (leave-one-out)':<36} {'from':<22} "
             f"{'% of full search':>16}   best"]
    by_variant = defaultdict(list)
    for row in rows:
        by_variant[row["variant"]].append(row)
        lines.append(f"{row['variant']:<18} {format_shape(row['shape']):<18} "
                     f"{params_to_str(row['guess'])[:36]:<36} {row['how'][:22]:<22} "
                     f"{_pct(row['pct_of_search']):>16}   {params_to_str(row['best'])}")
    got = [r["pct_of_search"] for r in rows if math.isfinite(r["pct_of_search"])]
    if got:
        exact = sum(1 for r in rows if r["guess"] == r["best"])
        lines.append(f"guess vs full search over {len(got)} (variant, shape) pairs: median "
                     f"{sorted(got)[len(got) // 2]:.1f}%, worst {min(got):.1f}%, the best parameters "
                     f"themselves {exact} of {len(rows)}")
    return "\n".join(lines)


def device_of(recs: list[ResultRecord]):
    """The device line of a saved run, from what its records carry (name, the peak of each
    precision, the measured copy bandwidth): a DeviceInfo for :func:`summary_table`."""
    from engine.measure.backends.base import DeviceInfo  # noqa: PLC0415
    first = recs[0]
    peaks: dict[str, float] = {}
    copy = None
    for r in recs:
        if _known(r.peak_gflops):
            peaks.setdefault(record_precision(r), float(r.peak_gflops))
        copy = copy or _known(r.copy_gbps)
    return DeviceInfo(backend=first.backend, index=max(first.device_index, 0), name=first.device,
                      peak_gflops_fp32=peaks.get("fp32"), peak_gflops_tf32=peaks.get("tf32"),
                      peak_gops_int32=peaks.get("int32"), copy_gbps=copy)


def reprint(path: Path, cache: Path | None, dtype: str, arch: str | None) -> int:
    """The tables of a saved run (``--from``): nothing runs. ``arch`` (``sm_90``): whose
    default parameters a guess falls back to, as on the device the run was made on."""
    recs = records.load(path)
    if not recs:
        print(f"{path}: no records", file=sys.stderr)
        return 1
    device = device_of(recs)
    text = summary_table(summary_rows(recs), device)
    if cache is not None:
        text += "\n\n" + guess_table(guess_rows(recs, recs[0].backend, device.name, dtype, cache, arch))
    print(text)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--sizes", default=None, help="size text (default: the shape suite)")
    ap.add_argument("--variants", default=None, help="kernels (default: the contenders)")
    ap.add_argument("--params", default=None, help="restrict parameters, e.g. 'bk=16;stages=3'")
    ap.add_argument("--dtype", default="float32", choices=("float32", "int32"))
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10, help="timed launches when --budget is 0")
    ap.add_argument("--budget", type=float, default=0.05,
                    help="seconds of timed launches per kernel and shape (at least 3 launches): "
                         "a 60 µs kernel gets ~800, so small shapes' medians settle; 0: --repeats")
    ap.add_argument("--paired", type=int, default=PAIRED_ROUNDS, metavar="N",
                    help="rounds of the paired pass: per shape and precision the lab best and "
                         "cuBLAS timed in turn N times each; %% of cuBLAS is the rounds' median "
                         f"(default {PAIRED_ROUNDS}; 0: the sweep's one timing of each)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--cache", default=None,
                    help="autotune cache to store the winners in (default: DIR/autotune.json)")
    ap.add_argument("--arch", default=None,
                    help="with --from: the run's GPU architecture (sm_90) for the guess's defaults")
    ap.add_argument("--from", dest="from_file", default=None,
                    help="print the tables of a saved run (its shapes.json) instead of running; "
                         "--cache names the run's autotune cache for the guess table")
    args = ap.parse_args(argv)
    if args.from_file:
        return reprint(Path(args.from_file), Path(args.cache) if args.cache else None, args.dtype,
                       args.arch)

    shapes = parse_sizes(args.sizes) if args.sizes else list(SHAPE_SUITE)
    names = args.variants.split(",") if args.variants else contenders(args.backend)
    names = [n for n in names if args.backend in registry.get(n).backends]
    overrides = parse_param_overrides(args.params) if args.params else {}
    out = Path(args.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results")
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(args.cache) if args.cache else out / "autotune.json"

    sweep = Sweep()
    recs: list[ResultRecord] = []

    def emit(ev):
        if ev.kind == "log" and ev.level == "error":
            print("  [error]", ev.message, flush=True)
        elif ev.kind == "result" and ev.record is not None:
            r = ev.record
            g = r.gflops / 1e3 if math.isfinite(r.gflops) else float("nan")
            print(f"  {r.label():<64} {format_shape((r.m, r.n, r.k)):>16} {r.status:<8} {g:8.2f} TFLOP/s",
                  flush=True)

    try:
        for shape in shapes:
            items = items_at(args.backend, names, overrides, shape, args.dtype)
            plan = Plan(backend=args.backend, items=items, shapes=[shape], dtype=args.dtype,
                        device=args.device, warmup=args.warmup, repeats=args.repeats,
                        time_budget_s=args.budget or None)
            print(f"== {format_shape(shape)}: {len(items)} runs", flush=True)
            recs += sweep.run(plan, emit)
            if args.paired > 0:
                print(f"   paired rounds: {args.paired}", flush=True)
                recs += paired_pass(sweep, dict(backend=args.backend, dtype=args.dtype, device=args.device,
                                                warmup=args.warmup, repeats=args.repeats,
                                                time_budget_s=args.budget or None),
                                    recs, shape, args.paired, emit)
            records.save(recs, out / "shapes.json")     # so far: a run cut short keeps its shapes
        device = sweep.device
    finally:
        sweep.close()
    if device is None:
        print(f"the {args.backend} backend did not open", file=sys.stderr)
        return 1
    swept = sweep_records(recs)
    for (variant, shape), best in search_winners(swept).items():
        searched = sum(1 for r in swept if r.variant == variant and (r.m, r.n, r.k) == shape)
        # every combination's speed relative to the winner: what the shape's class learns
        autotune.store(args.backend, device.name, variant, args.dtype, shape, best, searched, cache,
                       records=[r for r in swept if r.variant == variant and (r.m, r.n, r.k) == shape])
    text = summary_table(summary_rows(recs), device)
    arch = autotune.device_arch(device)
    text += "\n\n" + guess_table(guess_rows(recs, args.backend, device.name, args.dtype, cache, arch))
    bad = [r for r in recs if r.status not in ("ok", "skipped")]
    text += "".join(f"\n!! {r.label()} at {format_shape((r.m, r.n, r.k))}: {r.status}: {r.error[:200]}"
                    for r in bad)
    print(text)
    records.save(recs, out / "shapes.json")
    (out / "shapes.txt").write_text(text + "\n")
    print(f"records: {out / 'shapes.json'}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
