"""The shape suite: every contender kernel, tuned per shape, against its precision's cuBLAS line.

    python3 benchmarks/shapes.py [--backend cuda] [--device 0] [--sizes SUITE_OR_SIZES]
                                 [--variants a,b] [--params 'bk=16'] [--dtype T]
                                 [--out-dtype T] [--layout kn|nk] [--out DIR]

For each shape of the suite (``engine.inputs.sizes.SHAPE_SUITE``: square and odd sizes, flat K,
tall and wide panels, skinny panels and matrix-vector products; or ``--sizes``), every
parameter combination of every contender valid at that shape is compiled, verified and
timed through the engine (``Sweep``), with the library references of the input type (for
float32 cuBLAS strict FP32 and TF32; for float16/bfloat16 cuBLAS's half line; for FP8
cuBLASLt's, which takes B as N×K only) in the same run. ``--dtype``, ``--out-dtype`` and
``--layout`` are ``bench``'s: A and B's type, C's type and B's layout. The winners are
stored in the autotune cache (``--cache``), so the window's and the CLI's autotune start
from them; its entries are keyed by the run's numbers (input type, C's type, B's layout:
``engine.run.autotune.type_tag``), so a run with B as N×K stores its own winners.

Per shape the table gives the lab best (engine.results.derived.lab_best: the fastest verified
kernel of the lab, what dispatching by shape gives) of each precision the records hold
(engine.results.derived.record_precision: FP32 and TF32 for float32 inputs, FP16, BF16 or
FP8 for the others) with its % of the same-precision library line and % of the precision's
peak, and, for memory-bound shapes (arithmetic intensity under the ridge of the first
precision's peak over the measured copy bandwidth), the effective bandwidth as % of the
measured device-to-device copy bandwidth. A precision whose line was skipped (cuBLASLt's FP8
with B as K×N) says why below the table. Below it, for each variant: how close the
parameters guessed from the other shapes of its shape class (``engine.run.autotune.guess``,
leave-one-out) come to the full search at each shape.

Paired rounds (``--paired N``, default 3): after a shape's sweep, each precision's lab best
and its cuBLAS line are timed again in turn, on the same inputs, N times each (best, cuBLAS,
best, cuBLAS, ...), and the table's % of cuBLAS is the median of the N per-round ratios, with
their lowest and highest beside it. One timing of each, tens of seconds apart in a sweep,
compares two clock states: at 4096³ on an H200 cuBLAS TF32 alone took 376-390 µs over six
rounds of one session (benchmarks/NOTES.md, round 17). The paired records are kept (marked
``extra["paired"]``) but never pick the lab best or feed the autotune cache.

Contenders (``--variants`` unset): the reference lines whose header lists the input type and
B's layout, then per kernel precision that takes them (the registry's ``precision``,
``dtypes`` and ``layouts``: fp32 and tf32 for float32, half for 16-bit inputs, fp8 for FP8)
every rung of the ladder on the backend from ``CONTENDER_FLOOR[precision]`` up (a backend
without that rung: its ``CONTENDERS[precision]`` highest rungs), the seeds where a backend
has no rungs. All records go to ``DIR/shapes.json``, the table to ``DIR/shapes.txt`` (DIR:
``--out``, else $OUT, else benchmarks/results).
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
from engine.common.dtypes import ELEMENT_NAMES, Layout, TypeSpec  # noqa: E402
from engine.measure import peaks  # noqa: E402
from engine.run.runner import Plan, Sweep, expand_items, refusal  # noqa: E402
from engine.inputs.sizes import SHAPE_SUITE, format_shape, parse_sizes  # noqa: E402

#: The lowest rung of each precision that runs by default, with every rung above it: FP32's
#: ffma_regdb (18) is the lab best on square and flat shapes of a few thousand (1000³-3000³,
#: 8192²×256, 64×4096²) and, by its parameters, on narrow N and N % 4 != 0 at mid sizes;
#: above it the class specialists (24 skinny, both its streams, 32 small). A floor, not a
#: count: a count of ten, right when it was set, dropped ffma_regdb once rung 33 came
#: (round 19). The 16-bit ladder is three rungs and all of them run: half_wgmma's 128×256
#: tiles lead at 4096³-8192³ (96-100% of cuBLAS), but on narrow and skinny shapes, where such
#: tiles are mostly padding, the smaller tiles of half_wmma and half_mma have not been
#: measured against it yet. FP8 has its one rung.
CONTENDER_FLOOR = {"fp32": "ffma_regdb", "tf32": "tf32_mma", "half": "half_wmma", "fp8": "fp8_wgmma"}
#: Where a backend lacks the floor rung: how many of its highest rungs run.
CONTENDERS = {"fp32": 10, "tf32": 5, "half": 3, "fp8": 1}
#: The roles of the lab's own kernels among the contenders (rungs first, else the seeds).
LAB_ROLES = (("rung",), ("seed", "baseline"))

#: Rounds of the paired pass (``--paired``): the lab best and its cuBLAS line timed in turn.
PAIRED_ROUNDS = 3


def contenders(backend: str, dtype: str = "float32", layout: str = "kn") -> list[str]:
    """The references whose header lists ``dtype`` and ``layout``, then per kernel precision
    of the variants that take them (fp32 and tf32 for float32, half for float16/bfloat16,
    fp8 for FP8: the headers say it) the highest rungs (by ladder order) on ``backend``; a
    backend without rungs of a precision runs its seeds and baseline."""
    pool = [v for v in registry.variants_for(backend) if dtype in v.dtypes and layout in v.layouts]
    out = [v.name for v in pool if v.role == "reference"]
    # Triton's rungs stand beside the ladder ("what a Triton user gets"), never as its best
    lab = [v for v in pool if v.kind == "gemm" and not v.is_triton
           and any(v.role in roles for roles in LAB_ROLES)]
    for precision in dict.fromkeys(v.precision for v in lab):
        for roles in LAB_ROLES:
            mine = [v for v in lab if v.role in roles and v.precision == precision]
            if mine:
                mine.sort(key=lambda v: (v.order if v.order is not None else -1, v.name), reverse=True)
                floor = next((v for v in mine if v.name == CONTENDER_FLOOR.get(precision)), None)
                if floor is not None and floor.order is not None:
                    out += [v.name for v in mine if v.order is not None and v.order >= floor.order]
                else:
                    out += [v.name for v in mine[:CONTENDERS.get(precision, len(mine))]]
                break
    return out


def items_at(backend: str, names: list[str], overrides, shape, dtype: str,
             layout: str = "kn") -> list[tuple[str, dict]]:
    """Every combination of ``names`` valid at ``shape`` in ``dtype`` with B as ``layout``
    (invalid ones are left out: the constraint says why in ``bench``). A reference line is
    kept even where refused (cuBLASLt takes no e5m2 × e5m2): its one skipped record says
    why the precision has no % of cuBLAS."""
    return [(n, p) for n, p in expand_items(backend, names, overrides)
            if registry.get(n).role == "reference" or refusal(backend, n, p, shape, dtype, layout) is None]


def precision_label(precision: str) -> str:
    """A precision as the table heads it: ``FP32``, ``TF32``, ``BF16``, ``FP8``."""
    return precision.upper()


def _precision_rank(precision: str) -> tuple[int, str]:
    """The engine's order of precisions (peaks.PRECISIONS), unknown ones after it."""
    known = peaks.PRECISIONS
    return (known.index(precision) if precision in known else len(known), precision)


def dtype_precisions(dtype: str) -> set[str]:
    """The arithmetic a run of input type ``dtype`` may have: peaks.precision_of of each
    kernel precision the registry knows (fp32 and tf32 for float32, fp16 for float16, fp8
    for either FP8 type)."""
    return {peaks.precision_of(v.precision, dtype) for v in registry.REGISTRY.values()}


def table_precisions(recs: list[ResultRecord]) -> list[str]:
    """The precisions a table of ``recs`` has a section for: every arithmetic their input
    types run (:func:`dtype_precisions`: a float32 table keeps its TF32 section where no
    TF32 kernel ran) and any other a record carries, in the engine's order."""
    found = {p for dtype in {r.dtype for r in recs} for p in dtype_precisions(dtype)}
    found |= {record_precision(r) for r in recs}
    return sorted(found, key=_precision_rank)


def _known(value: float | None) -> float | None:
    """A record's measured figure, or None where it was not measured (NaN)."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


def is_memory_bound(r: ResultRecord) -> bool:
    """Under the ridge point of the record's own precision (its peak over the measured copy
    bandwidth): bytes, not FLOPs, decide."""
    peak, copy = _known(r.peak_gflops), _known(r.copy_gbps)
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
    """Per shape: the lab best of each precision of its records (``precisions``:
    :func:`table_precisions`), % of that precision's cuBLAS line and peak, bandwidth. The
    sweep's records pick the lab best; where paired rounds ran, % of cuBLAS is their median
    (``pct_of_cublas_sweep``: the sweep's one timing of each; ``paired``: the rounds' ratios).
    ``no_line``: {precision: (variant, why)} where the precision's line did not run at the
    shape (cuBLASLt's FP8 with B as K×N: skipped, saying why)."""
    swept = sweep_records(recs)
    refs = reference_times(swept)
    best = lab_best(swept)
    shapes = list(dict.fromkeys((r.m, r.n, r.k) for r in recs))
    rows = []
    for shape in shapes:
        here = [r for r in recs if (r.m, r.n, r.k) == shape]
        row = {"shape": shape, "verified": sum(1 for r in here if r.status == "ok" and r.passed is True),
               "ran": sum(1 for r in here if r.status != "skipped"),
               "precisions": table_precisions(here), "no_line": {}}
        for precision in row["precisions"]:
            lines = [r for r in here if is_reference_record(r) and record_precision(r) == precision]
            if lines and not any(r.status == "ok" for r in lines):
                why = next((r for r in lines if r.error), lines[0])
                row["no_line"][precision] = (why.variant, why.error or why.status)
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


def table_sections(rows: list[dict]) -> list[str]:
    """The precisions of the table's sections: those of its rows, in the engine's order
    (a float32 table with no rows: FP32 and TF32, as ever)."""
    found = {p for row in rows for p in row.get("precisions", ())} or dtype_precisions("float32")
    return sorted(found, key=_precision_rank)


def summary_table(rows: list[dict], device) -> str:
    """The lab best table: a section per precision (:func:`table_sections`), the first
    with the bandwidth columns (its ridge decides which shapes are memory-bound), each
    against its own line and peak."""
    sections = table_sections(rows)
    first, rest = sections[0], sections[1:]
    head = (f"{'shape':<18} {precision_label(first) + ' lab best':<54} {'TFLOP/s':>8} {'%cuBLAS':>8} "
            f"{'rounds':>11} {'%peak':>6} {'GB/s':>7} {'%copy':>6}")
    head += "".join(f"   {precision_label(p) + ' lab best':<40} {'TFLOP/s':>8} {'%cuBLAS':>8} "
                    f"{'rounds':>11} {'%peak':>6}" for p in rest)
    lines = []
    if device is not None:
        bits = [f"device: {device.name}" + (f" (cc {device.compute_capability})"
                                            if device.compute_capability else "")]
        known = device.peaks()
        for p in sections:
            v = known.get(p)
            if v:
                unit = "TOP/s" if p == "int32" else "TFLOP/s"
                bits.append(f"{peaks.LABELS.get(p, p).removesuffix(' core')} peak {v / 1e3:.1f} {unit}")
        if device.copy_gbps:
            bits.append(f"measured copy {device.copy_gbps:,.0f} GB/s")
        lines.append("; ".join(bits))
    lines += [head, "-" * len(head)]
    for row in rows:
        f = row.get(first)
        cells = [f"{format_shape(row['shape']):<18}"]
        if f:
            bw = f"{f['gbps']:>7.0f} {_pct(f['pct_of_copy']) if f['memory_bound'] else '':>6}"
            cells.append(f"{f['label'][:54]:<54} {f['gflops'] / 1e3:>8.2f} {_pct(f['pct_of_cublas']):>8} "
                         f"{_spread(f):>11} {_pct(f['pct_of_peak']):>6} {bw}")
        else:
            cells.append(f"{'—':<54} {'':>8} {'':>8} {'':>11} {'':>6} {'':>7} {'':>6}")
        for i, p in enumerate(rest):
            t = row.get(p)
            if t:
                cells.append(f"  {t['label'][:40]:<40} {t['gflops'] / 1e3:>8.2f} {_pct(t['pct_of_cublas']):>8} "
                             f"{_spread(t):>11} {_pct(t['pct_of_peak']):>6}")
            elif any(row.get(q) for q in rest[i + 1:]):     # keeps the later sections in their columns
                cells.append(f"  {'—':<40} {'':>8} {'':>8} {'':>11} {'':>6}")
        lines.append(" ".join(cells))
    lines.append(f"memory-bound shapes (intensity under the {precision_label(first)} ridge of the measured "
                 "copy bandwidth) show their effective bandwidth as % of the copy")
    if any((row.get(p) or {}).get("paired") for row in rows for p in sections):
        lines.append("%cuBLAS: the median over paired rounds (the lab best and cuBLAS timed in turn on "
                     "the same inputs); rounds: their lowest-highest (without rounds: one timing of each)")
    missing: dict[tuple, list] = defaultdict(list)
    for row in rows:
        for p, (variant, why) in row.get("no_line", {}).items():
            missing[(p, variant, why)].append(row["shape"])
    for (p, variant, why), shapes in missing.items():
        lines.append(f"{precision_label(p)}: no %cuBLAS at {len(shapes)} shape(s): {variant} did not run: {why}")
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


def guess_rows(recs: list[ResultRecord], backend: str, device_name: str, cache: Path,
               arch: str | None = None) -> list[dict]:
    """For each (variant, shape) searched: the parameters ``autotune.guess`` proposes from
    the other shapes (leave-one-out: the shape's own entry ignored) and how fast they ran
    in the full search, as % of the search's best. ``cache`` holds the winners, keyed by
    each record's own input type (a half run's never answer for FP32)."""
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
        if variant not in registry.REGISTRY:     # a saved run's kernel this checkout lacks
            continue
        # among the combinations the search ran, so that each guess has a time to compare
        g = autotune.guess_candidates(backend, device_name, variant, record_spec(best), shape, path=cache,
                                      exclude_exact=True, arch=arch, combos=searched[(variant, shape)])
        if not g.candidates:
            continue
        params = g.candidates[0]
        how = (f"class ({g.shapes} shapes)" if g.source == "class"
               else f"nearest {format_shape(g.near)}" if g.source == "nearest" else g.source)
        t = times.get((variant, shape, params_to_str(params)))
        rows.append({"variant": variant, "shape": shape, "guess": params, "how": how,
                     "best": dict(best.params), "precision": record_precision(best),
                     "combos": len({params_to_str(p) for p in searched[(variant, shape)]}),
                     "pct_of_search": 100.0 * best.median_ms / t if t else math.nan})
    return rows


def guess_skips(rows: list[dict]) -> dict[str, str]:
    """{precision: why its guess is left out}: a precision whose kernels ran one parameter
    combination per shape (the cpu backend's numpy, a --params that pins every value) has
    nothing for a guess to choose, so its rows would read 100% whatever the class knows."""
    out = {}
    for precision in dict.fromkeys(r["precision"] for r in rows):
        mine = [r for r in rows if r["precision"] == precision]
        if all(r["combos"] <= 1 for r in mine):
            names = ", ".join(dict.fromkeys(r["variant"] for r in mine))
            out[precision] = (f"its kernels ({names}) ran one parameter combination per shape: "
                              "a guess has nothing to choose")
    return out


def record_spec(r: ResultRecord) -> TypeSpec:
    """A record's types (files from before half precision: the input type's defaults)."""
    return TypeSpec(r.dtype, r.out_dtype or None, r.layout or Layout.KN)


def guess_text(recs: list[ResultRecord], backend: str, device_name: str, cache: Path,
               arch: str | None = None) -> str:
    """The guess table of a run, with a line for each precision left out and why."""
    rows = guess_rows(recs, backend, device_name, cache, arch)
    skips = guess_skips(rows)
    kept = [r for r in rows if r["precision"] not in skips]
    lines = [guess_table(kept)] if kept or not skips else []
    lines += [f"guess from shape class: {precision_label(p)} left out: {why}" for p, why in skips.items()]
    return "\n".join(lines)


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
    known: dict[str, float] = {}
    copy = None
    for r in recs:
        if _known(r.peak_gflops):
            known.setdefault(record_precision(r), float(r.peak_gflops))
        copy = copy or _known(r.copy_gbps)
    return DeviceInfo(backend=first.backend, index=max(first.device_index, 0), name=first.device,
                      peak_gflops_fp32=known.get("fp32"), peak_gflops_tf32=known.get("tf32"),
                      peak_gops_int32=known.get("int32"), peak_gflops_fp16=known.get("fp16"),
                      peak_gflops_bf16=known.get("bf16"), peak_gflops_fp8=known.get("fp8"),
                      peak_gops_int8=known.get("int8"), copy_gbps=copy)


def reprint(path: Path, cache: Path | None, arch: str | None) -> int:
    """The tables of a saved run (``--from``): nothing runs; the records say their types.
    ``arch`` (``sm_90``): whose default parameters a guess falls back to, as on the device
    the run was made on."""
    recs = records.load(path)
    if not recs:
        print(f"{path}: no records", file=sys.stderr)
        return 1
    device = device_of(recs)
    text = summary_table(summary_rows(recs), device)
    if cache is not None:
        text += "\n\n" + guess_text(recs, recs[0].backend, device.name, cache, arch)
    print(text)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--sizes", default=None, help="size text (default: the shape suite)")
    ap.add_argument("--variants", default=None, help="kernels (default: the contenders)")
    ap.add_argument("--params", default=None, help="restrict parameters, e.g. 'bk=16;stages=3'")
    ap.add_argument("--dtype", default="float32", choices=ELEMENT_NAMES,
                    help="input type of A and B, as bench's (the contenders and lines are those "
                         "whose header lists it; with --from the records say it)")
    ap.add_argument("--out-dtype", default=None, choices=ELEMENT_NAMES,
                    help="type of C, as bench's: float16/bfloat16 inputs write float32 (default) "
                         "or their own type; FP8 inputs bfloat16 (default) or float32")
    ap.add_argument("--layout", default="kn", choices=tuple(Layout),
                    help="B as K×N (kn, default) or N×K (nk), as bench's; cuBLASLt's FP8 line "
                         "takes nk only (with kn it is skipped, saying why)")
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
        return reprint(Path(args.from_file), Path(args.cache) if args.cache else None, args.arch)
    try:
        spec = TypeSpec(args.dtype, args.out_dtype, args.layout)
    except ValueError as exc:
        ap.error(f"--out-dtype: {exc}")

    shapes = parse_sizes(args.sizes) if args.sizes else list(SHAPE_SUITE)
    names = args.variants.split(",") if args.variants else contenders(args.backend, args.dtype, args.layout)
    names = [n for n in names if args.backend in registry.get(n).backends]
    overrides = parse_param_overrides(args.params) if args.params else {}
    out = Path(args.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results")
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(args.cache) if args.cache else out / "autotune.json"
    plan_args = dict(backend=args.backend, dtype=args.dtype, out_dtype=args.out_dtype, layout=args.layout,
                     device=args.device, warmup=args.warmup, repeats=args.repeats,
                     time_budget_s=args.budget or None)

    sweep = Sweep()
    recs: list[ResultRecord] = []
    planned = False

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
            items = items_at(args.backend, names, overrides, shape, args.dtype, args.layout)
            if not items:       # a plan of nothing is refused: say why here, once per shape
                why = sorted({refusal(args.backend, n, p, shape, args.dtype, args.layout)
                              for n, p in expand_items(args.backend, names, overrides)} - {None})
                print(f"== {format_shape(shape)}: 0 runs ({'; '.join(why[:3]) or 'no contender'})", flush=True)
                continue
            plan = Plan(items=items, shapes=[shape], **plan_args)
            planned = True
            print(f"== {format_shape(shape)}: {len(items)} runs", flush=True)
            recs += sweep.run(plan, emit)
            if args.paired > 0:
                print(f"   paired rounds: {args.paired}", flush=True)
                recs += paired_pass(sweep, plan_args, recs, shape, args.paired, emit)
            records.save(recs, out / "shapes.json")     # so far: a run cut short keeps its shapes
        device = sweep.device
    finally:
        sweep.close()
    if device is None:
        print(f"the {args.backend} backend did not open" if planned else
              f"nothing ran: no contender takes {spec.label} on the {args.backend} backend",
              file=sys.stderr)
        return 1
    swept = sweep_records(recs)
    for (variant, shape), best in search_winners(swept).items():
        searched = sum(1 for r in swept if r.variant == variant and (r.m, r.n, r.k) == shape)
        # every combination's speed relative to the winner: what the shape's class learns;
        # keyed by the run's numbers, so a half or N×K run's winners never replace FP32's
        autotune.store(args.backend, device.name, variant, spec, shape, best, searched, cache,
                       records=[r for r in swept if r.variant == variant and (r.m, r.n, r.k) == shape])
    text = summary_table(summary_rows(recs), device)
    arch = autotune.device_arch(device)
    text += "\n\n" + guess_text(recs, args.backend, device.name, cache, arch)
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
