"""Stop rules compared (issue 37 §2): time to result and spread of % of cuBLAS.

    python3 benchmarks/noise_rules.py [--rounds 3] [--sizes ...] [--rules ...] [--out file.json]

Runs the same kernels at the same shapes under each stop rule (a fixed count of launches,
a time budget, a noise target), the rules interleaved round by round so that a drift of
the GPU's clocks touches each alike. For each rule it prints the wall time of a round
(verification and re-checks included, builds excluded: one untimed round builds first),
the timed launches, what stopped the series, and the spread of each kernel's % of cuBLAS
over the rounds (max − min, in points): the numbers that chose the defaults in
benchmarks/NOTES.md.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.inputs.sizes import format_shape, parse_sizes  # noqa: E402
from engine.kernels import registry  # noqa: E402
from engine.measure.timing import NoiseStop  # noqa: E402
from engine.results.records import RecordStatus  # noqa: E402
from engine.run.runner import Plan, Sweep  # noqa: E402

SIZES = "1024,4100x4090x4095,8192x8192x256,64x4096x4096"
RULES = "repeats:20,budget:0.05,noise:1,noise:0.5"


def rule_settings(rule: str) -> dict:
    kind, _, value = rule.partition(":")
    if kind == "repeats":
        return {"repeats": int(value)}
    if kind == "budget":
        return {"time_budget_s": float(value)}
    if kind == "noise":
        return {"until_noise": NoiseStop(float(value))}
    raise SystemExit(f"unknown rule {rule!r} (repeats:N, budget:S, noise:PCT)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="cuda")
    p.add_argument("--variants", default="ffma_regdb,lab_fp32,cublas_fp32")
    p.add_argument("--sizes", default=SIZES)
    p.add_argument("--rules", default=RULES)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=None, help="write every record's figures here (.json)")
    args = p.parse_args(argv)
    shapes = parse_sizes(args.sizes)
    rules = args.rules.split(",")
    sweep = Sweep()
    try:
        return _compare(sweep, args, shapes, rules)
    finally:
        sweep.close()         # the CUDA context is popped on this thread, before exit


def _compare(sweep: Sweep, args, shapes, rules) -> int:
    device = sweep.ensure_open(args.backend, 0)
    arch = device.compute_capability
    items = [(n, registry.get(n).default_params(arch)) for n in args.variants.split(",")]
    base = dict(backend=args.backend, items=items, shapes=shapes, only_fitting=True, warmup=3)
    t0 = time.perf_counter()
    sweep.run(Plan(**base, repeats=1), lambda ev: None)            # builds, untimed
    print(f"builds and a first round: {time.perf_counter() - t0:.1f} s", flush=True)
    rows = []
    for rnd in range(args.rounds):
        for rule in rules:
            t0 = time.perf_counter()
            recs = sweep.run(Plan(**base, **rule_settings(rule)), lambda ev: None)
            wall = time.perf_counter() - t0
            for r in recs:
                rows.append({"rule": rule, "round": rnd, "wall_s": wall, "variant": r.variant,
                             "shape": format_shape((r.m, r.n, r.k)), "status": str(r.status),
                             "error": r.error, "median_ms": r.median_ms, "noise_pct": r.noise_pct,
                             "repeats": r.repeats, "launches": r.launches,
                             "stopped_by": str(r.stopped_by), "timing_mode": str(r.timing_mode),
                             "pct_of_cublas": r.pct_of_cublas, "recheck": r.recheck,
                             "timed_s": r.repeats * r.mean_ms / 1e3})
            print(f"{rule} round {rnd}: {wall:.2f} s, {len(recs)} records", flush=True)
            if args.out:
                Path(args.out).write_text(json.dumps(rows, indent=1))
            bad = [r for r in recs if r.status not in (RecordStatus.OK,)]
            for r in bad:
                print(f"  {rule} round {rnd}: {r.label()} {r.m}x{r.n}x{r.k}: {r.status} {r.error[:160]}")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))
    print(f"{device.name}; {len(shapes)} shapes × {args.variants}; {args.rounds} rounds")
    print("| rule | wall s / round | timed s / round | launches / record (median) | stopped by "
          "| spread of % of cuBLAS, mean / max (points) | spread of the median, mean / max (%) |")
    print("|---|---|---|---|---|---|---|")
    for rule in rules:
        mine = [r for r in rows if r["rule"] == rule and r["status"] == "ok"]
        walls = sorted({(r["round"], r["wall_s"]) for r in mine})
        timed = [sum(r["timed_s"] for r in mine if r["round"] == rnd) for rnd in range(args.rounds)]
        spreads, medians = [], []
        for key in sorted({(r["variant"], r["shape"]) for r in mine}):
            same = [r for r in mine if (r["variant"], r["shape"]) == key]
            pcts = [r["pct_of_cublas"] for r in same if r["pct_of_cublas"] == r["pct_of_cublas"]]
            if len(pcts) == args.rounds and key[0] != "cublas_fp32":
                spreads.append(max(pcts) - min(pcts))
            ms = [r["median_ms"] for r in same]
            if len(ms) == args.rounds:
                medians.append(100 * (max(ms) - min(ms)) / statistics.mean(ms))
        why = Counter(r["stopped_by"] for r in mine)
        shown = (lambda xs: f"{statistics.mean(xs):.2f} / {max(xs):.2f}" if xs else "—")
        print(f"| {rule} | {statistics.mean(w for _, w in walls):.2f} | {statistics.mean(timed):.2f} "
              f"| {statistics.median(r['repeats'] for r in mine):.0f} "
              f"| {', '.join(f'{k} {v}' for k, v in why.most_common())} "
              f"| {shown(spreads)} | {shown(medians)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
