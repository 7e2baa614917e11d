"""The built-in Triton rungs against the lab's dispatch line and cuBLAS, on the shape suite.

    python3 benchmarks/triton_suite.py [--sizes SUITE_OR_SIZES] [--budget S] [--out DIR]

"What a Triton user gets": each Triton rung autotuned the way a Triton user would, over a
short list of configurations (``CONFIGS``, the tutorial's kind: a few tile shapes, warps
and stages, grouped ordering), the best of them per shape; beside it the lab's dispatch
line of the same precision (``lab_fp32``, ``lab_tf32``: one kernel and parameter set per
shape from ``cuda/lab/dispatch.toml``) and cuBLAS, in one run on one device, every record
verified. The table gives each one's % of the same-precision cuBLAS line; the records go
to ``DIR/triton_suite.json`` and the table to ``DIR/triton_suite.txt`` (DIR: ``--out``,
else $OUT, else benchmarks/results).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.inputs.sizes import SHAPE_SUITE, format_shape, parse_sizes  # noqa: E402
from engine.results import records  # noqa: E402
from engine.results.derived import pct_of_reference  # noqa: E402
from engine.run.runner import Plan, Sweep  # noqa: E402

#: (block_m, block_n, block_k, num_warps, num_stages): the kind of list a Triton matmul's
#: @triton.autotune carries; group_m 8 throughout.
CONFIGS = [(128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
           (64, 128, 32, 4, 4), (64, 64, 32, 4, 4), (128, 32, 32, 4, 4), (32, 64, 32, 4, 4),
           (64, 32, 32, 4, 5)]
#: precision -> (Triton rung, lab dispatch line, cuBLAS line)
LINES = {"fp32": ("triton_grouped_fp32", "lab_fp32", "cublas_fp32"),
         "tf32": ("triton_grouped_tf32", "lab_tf32", "cublas_tf32")}


def triton_items(name: str) -> list[tuple[str, dict]]:
    return [(name, {"block_m": bm, "block_n": bn, "block_k": bk, "group_m": 8, "num_warps": w,
                    "num_stages": s}) for bm, bn, bk, w, s in CONFIGS]


def table(recs) -> str:
    best: dict[tuple, float] = {}
    ok: dict[tuple, bool] = {}
    for r in recs:
        if r.status != "ok" or not r.passed:
            continue
        key = (r.variant, r.m, r.n, r.k)
        if r.median_ms < best.get(key, float("inf")):
            best[key] = r.median_ms
            ok[key] = True
    shapes = sorted({(r.m, r.n, r.k) for r in recs}, key=lambda s: (s[0] * s[1] * s[2], s))
    head = f"{'shape':>18}" + "".join(f"{h:>16}" for p in LINES for h in (
        f"cuBLAS {p} ms", f"Triton {p} %", f"lab {p} %"))
    lines = [head]
    for m, n, k in shapes:
        row = f"{format_shape((m, n, k)):>18}"
        for tri, lab, ref in LINES.values():
            ref_ms = best.get((ref, m, n, k))
            row += f"{ref_ms:16.4f}" if ref_ms else f"{'-':>16}"
            for name in (tri, lab):
                ms = best.get((name, m, n, k))
                row += f"{pct_of_reference(ref_ms, ms):15.1f}%" if ms and ref_ms else f"{'-':>16}"
        lines.append(row)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=None, help="size text (default: the shape suite)")
    ap.add_argument("--budget", type=float, default=0.1, help="seconds of timed launches per item")
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    out = Path(args.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results")
    out.mkdir(parents=True, exist_ok=True)
    shapes = parse_sizes(args.sizes) if args.sizes else list(SHAPE_SUITE)
    items = [it for tri, lab, ref in LINES.values() for it in triton_items(tri) + [(lab, {}), (ref, {})]]
    plan = Plan(backend="cuda", items=items, shapes=shapes, device=args.device, warmup=2,
                time_budget_s=args.budget, seed=1)
    sweep = Sweep()
    try:
        recs = sweep.run(plan, lambda event: None)
    finally:
        sweep.close()
    records.save(recs, out / "triton_suite.json")
    text = table(recs)
    (out / "triton_suite.txt").write_text(text + "\n")
    failed = [(r.label(), r.m, r.n, r.k, r.error) for r in recs if r.status == "ok" and not r.passed]
    print(text)
    if failed:
        print("NOT VERIFIED:", failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
