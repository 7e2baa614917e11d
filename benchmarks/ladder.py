"""Run the CUDA performance ladder against cuBLAS and print the table.

    python3 benchmarks/ladder.py [--sizes 1024,2048,4096,8192] [--variants a,b]
                                 [--params 'bk=16;stages=3'] [--defaults] [--out DIR]

Through the engine (engine.run.runner.Sweep on the cuda backend, verification on): the two
cuBLAS lines, then every ladder kernel with every combination of its parameter space
(or only its default with ``--defaults``, or restricted with ``--params``). For each
variant and size the table shows the best combination: TFLOP/s, % of cuBLAS (strict
FP32 for FP32 kernels, TF32 for tf32_mma; same run), % of the device's FP32 peak, and
the parameters. The slow rungs (naive_uncoalesced, blocktile_1d) run only up to
``--slow-max`` (default 4096): at 8192 a single launch of them takes seconds.

All records go to ``DIR/ladder.json`` (DIR: ``--out``, else $OUT, else
benchmarks/results) and the table to ``DIR/ladder.txt``.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.results import records  # noqa: E402
from engine.kernels import registry  # noqa: E402
from cli.bench import parse_param_overrides  # noqa: E402
from engine.kernels.registry import params_to_str  # noqa: E402
from engine.run.runner import Plan, Sweep, expand_items  # noqa: E402

SLOW = ("naive_uncoalesced", "blocktile_1d")
#: The library lines every run includes (the registry's ``reference`` role).
REFERENCES = tuple(v.name for v in registry.REGISTRY.values() if v.role == "reference")


def build_items(names, overrides, defaults):
    items = []
    for name in names:
        v = registry.get(name)
        if defaults and not overrides:
            items.append((name, v.default_params()))
        else:
            items += [(n, p) for n, p in expand_items("cuda", [name], overrides)
                      if v.check("cuda", p, 4096, 4096, 4096, "float32") is None]
    return items


def best_per_variant(recs):
    """{(variant, size): best ok record}, by median time."""
    best = {}
    for r in recs:
        if r.status != "ok" or not math.isfinite(r.median_ms):
            continue
        key = (r.variant, r.m)
        if key not in best or r.median_ms < best[key].median_ms:
            best[key] = r
    return best


def table(recs, names, sizes, device) -> str:
    best = best_per_variant(recs)
    lines = [f"device: {device.name} (cc {device.compute_capability}); "
             f"FP32 peak estimate {device.peak_gflops_fp32 / 1e3:.1f} TFLOP/s"
             if device.peak_gflops_fp32 else f"device: {device.name}"]
    head = f"{'variant':<18}" + "".join(f"{s:>24}" for s in sizes) + "   best params (at largest size)"
    lines += [head, f"{'':<18}" + "".join(f"{'TFLOP/s %cuBLAS %peak':>24}" for _ in sizes)]
    for name in names:
        cells, params = [], ""
        for s in sizes:
            r = best.get((name, s))
            if r is None:
                cells.append(f"{'—':>24}")
                continue
            pc = "—" if not math.isfinite(r.pct_of_cublas) else f"{r.pct_of_cublas:.1f}"
            pp = "—" if not math.isfinite(r.pct_of_peak) else f"{r.pct_of_peak:.1f}"
            cells.append(f"{r.gflops / 1e3:>10.2f} {pc:>7} {pp:>5}")
            params = params_to_str(r.params)
        lines.append(f"{name:<18}" + "".join(cells) + f"   {params}")
    bad = [r for r in recs if r.status not in ("ok", "skipped")]
    for r in bad:
        lines.append(f"!! {r.label()} at {r.m}: {r.status}: {r.error[:200]}")
    for r in recs:
        if r.status == "skipped" and r.variant in REFERENCES:
            lines.append(f"-- {r.variant} skipped: {r.error}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1024,2048,4096,8192")
    ap.add_argument("--variants", default=None, help="ladder variants (default: all)")
    ap.add_argument("--params", default=None, help="restrict parameters, e.g. 'bk=16;stages=3'")
    ap.add_argument("--defaults", action="store_true", help="default parameters only")
    ap.add_argument("--slow-max", type=int, default=4096)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    names = args.variants.split(",") if args.variants else registry.ladder_names()
    overrides = parse_param_overrides(args.params) if args.params else {}
    out = Path(args.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results")
    out.mkdir(parents=True, exist_ok=True)

    sweep = Sweep()
    recs = []
    device = None

    def emit(ev):
        if ev.kind == "log" and ev.level == "error":
            print("  [error]", ev.message, flush=True)
        elif ev.kind == "result" and ev.record is not None:
            r = ev.record
            print(f"  {r.label():<70} {r.m:>5} {r.status:<8} "
                  f"{r.gflops / 1e3 if math.isfinite(r.gflops) else float('nan'):8.2f} TFLOP/s",
                  flush=True)

    try:
        for s in sizes:
            wanted = [n for n in names if not (n in SLOW and s > args.slow_max)]
            items = [(n, {}) for n in REFERENCES] + build_items(wanted, overrides, args.defaults)
            plan = Plan(backend="cuda", items=items, shapes=[(s, s, s)], dtype="float32",
                        warmup=args.warmup, repeats=args.repeats, verify=not args.no_verify)
            print(f"== {s}: {len(items)} runs", flush=True)
            recs += sweep.run(plan, emit)
            device = sweep.device or device
    finally:
        sweep.close()
    if device is None:
        print("the cuda backend did not open", file=sys.stderr)
        return 1
    text = table(recs, list(REFERENCES) + names, sizes, device)
    print(text)
    records.save(recs, out / "ladder.json")
    (out / "ladder.txt").write_text(text + "\n")
    print(f"records: {out / 'ladder.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
