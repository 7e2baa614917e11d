"""Every GPU of one machine at once: "compare devices" and "share the work", timed.

    python3 benchmarks/multi_gpu.py [--backend cuda] [--devices all] [--out DIR]

1. compare: the same items on every device (one engine process each); prints each
   device's median per item and the interval in which both were busy;
2. share: the same items divided among the devices; wall time against one device;
3. autotune of one variant (--tune-variant, searched again with a private cache) over
   --tune-sizes, on one device and then shared by all: wall times and the speed-up;
4. the share table (--table-variants at --table-sizes, shared by all): how many lab rows
   lack a % of cuBLAS (every device times its shapes' cuBLAS lines: none should), and the
   lab best per shape and precision with the device that ran it.

Each shared run prints its timeline (what each engine did when; engine.run.timeline) and
writes it to ``<part>_timeline.json``. Records (JSON, one file per part) go to --out.
Same engine as ``bench`` and the app.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.common import cpus  # noqa: E402
from engine.results import derived, records  # noqa: E402
from engine.measure.backends import probe_all  # noqa: E402
from engine.run.dispatch import start_run  # noqa: E402
from engine.run.process import ProcessEngine  # noqa: E402
from engine.run.runner import Plan, expand_items  # noqa: E402
from engine.inputs.sizes import parse_sizes  # noqa: E402


class Timeline:
    """When each engine delivered results: the busy interval per worker."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self.lock = threading.Lock()

    def __call__(self, ev):
        if ev.kind == "result" and ev.record is not None:
            t = time.monotonic() - self.t0
            with self.lock:
                self.first.setdefault(ev.record.worker, t)
                self.last[ev.record.worker] = t
        elif ev.kind == "log" and ev.level == "error":
            print("  error:", ev.message, flush=True)

    def overlap(self) -> float:
        """Seconds during which every worker was between its first and last result."""
        if len(self.first) < 2:
            return 0.0
        return max(0.0, min(self.last.values()) - max(self.first.values()))


def run(plan, engines, mode, out: Path, name: str):
    # The cores divided among the engines that run at once, as bench's and the window's
    # engine pool does (engine.run.pool): each engine process on every core made two
    # engines' host checks (OpenBLAS) contend for the same cores.
    threads = cpus.engine_threads(len(engines), reserve=0)
    for eng in engines:
        eng.cpu_threads = threads
    tl = Timeline()
    t0 = time.monotonic()
    started = start_run(plan, engines, tl, mode)
    recs = started.result()
    wall = time.monotonic() - t0
    records.save(recs, out / f"{name}.json")
    (out / f"{name}_timeline.json").write_text(json.dumps(started.timeline.to_json(), indent=1))
    bad = [r for r in recs if r.status not in ("ok", "skipped") or r.passed is False]
    print(f"{name}: {len(recs)} records in {wall:.1f} s, {len(bad)} not ok; workers "
          + ", ".join(f"{w}: {tl.first[w]:.1f}-{tl.last[w]:.1f} s" for w in sorted(tl.first))
          + f"; all busy together for {tl.overlap():.1f} s", flush=True)
    if len(engines) > 1:
        print(started.timeline.text(), flush=True)
    return recs, wall


def share_table(recs) -> dict:
    """Prints the lab rows without a % of cuBLAS and the lab best per shape; the counts."""
    lab = [r for r in recs if not derived.is_reference_record(r) and r.status == "ok"]
    missing = [r for r in lab if r.precision in ("fp32", "tf32") and r.pct_of_cublas != r.pct_of_cublas]
    print(f"share table: {len(recs)} records, {len(lab)} lab rows, {len(missing)} without a % of "
          f"cuBLAS" + (": " + ", ".join(f"{r.label()}@{r.m} #{r.device_index}" for r in missing[:6])
                       if missing else ""), flush=True)
    refs = derived.reference_times(recs)
    best = derived.lab_best(recs)
    for key, r in sorted(best.items(), key=lambda kv: (kv[1].m * kv[1].n * kv[1].k, kv[0][-1])):
        pct = derived.lab_best_pct_of_reference(key, r, refs)
        print(f"  {r.m}x{r.n}x{r.k} {key[-1]:5s} {r.label():40s} #{r.device_index}  "
              f"{pct:6.1f}% of cuBLAS on its device  {r.share_group or '(own table)'}", flush=True)
    return {"records": len(recs), "lab_rows": len(lab), "without_pct_of_cublas": len(missing),
            "lab_best_rows": len(best)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--devices", default="all")
    ap.add_argument("--variants", default="naive,tiled_any,wpt,ffma_regdb,ffma_wide,cublas_fp32")
    ap.add_argument("--sizes", default="2048,4096")
    ap.add_argument("--tune-variant", default="ffma_wide")
    ap.add_argument("--tune-sizes", default="2048,4096,8192")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timing per candidate")
    ap.add_argument("--table-variants",
                    default="ffma_regdb,ffma_wide,tf32_wgmma_rs,cublas_fp32,cublas_tf32")
    ap.add_argument("--table-sizes", default="3333x2222x1111,6000")
    ap.add_argument("--out", default="out")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    st = probe_all()[args.backend]
    if not st.available:
        print(f"{args.backend} unavailable: {st.reason}")
        return 2
    devices = (list(range(len(st.devices))) if args.devices == "all"
               else [int(x) for x in args.devices.split(",")])
    print("devices:", ", ".join(f"{d.index}: {d.name}" for d in st.devices if d.index in devices),
          f"({cpus.usable_cpus()} cores: {cpus.engine_threads(len(devices), reserve=0)} threads "
          f"an engine when all run)")
    engines = [ProcessEngine(args.backend, d) for d in devices]
    try:
        items = expand_items(args.backend, args.variants.split(","))
        plan = Plan(backend=args.backend, items=items, shapes=parse_sizes(args.sizes), warmup=3,
                    repeats=20)
        run(plan, engines[:1], "share", out, "warm_up_compile")     # nvcc cache, clocks up
        recs, _ = run(plan, engines, "compare", out, "compare")
        by = {}
        for r in recs:
            by.setdefault((r.label(), r.m), {})[r.device_index] = r.median_ms
        print("compare (median ms per device):")
        for (label, m), per in sorted(by.items()):
            print(f"  {label:38s} {m:5d}  " + "  ".join(f"#{d}: {ms:8.3f}" for d, ms in sorted(per.items())))
        _, one = run(plan, engines[:1], "share", out, "one_device")
        _, shared = run(plan, engines, "share", out, "share")
        print(f"share: {one:.1f} s on one device, {shared:.1f} s on {len(engines)}: "
              f"{one / shared:.2f}x", flush=True)

        tune_items = expand_items(args.backend, [args.tune_variant])
        with tempfile.TemporaryDirectory() as cache:
            os.environ["MATMUL_LAB_CACHE"] = cache
            tplan = Plan(backend=args.backend, items=tune_items, shapes=parse_sizes(args.tune_sizes),
                         warmup=3, repeats=20, time_budget_s=args.budget, autotune=True, retune=True)
            _, t_one = run(tplan, engines[:1], "share", out, "autotune_one_device")
            _, t_all = run(tplan, engines, "share", out, "autotune_share")
        print(f"autotune {args.tune_variant} ({len(tune_items)} candidates × "
              f"{len(tplan.shapes)} sizes): {t_one:.1f} s on one device, {t_all:.1f} s shared by "
              f"{len(engines)}: {t_one / t_all:.2f}x", flush=True)
        titems = expand_items(args.backend, args.table_variants.split(","))
        tab_plan = Plan(backend=args.backend, items=titems, shapes=parse_sizes(args.table_sizes),
                        warmup=3, repeats=20)
        run(tab_plan, engines[:1], "share", out, "table_warm_up")     # builds cached
        tab_recs, _ = run(tab_plan, engines, "share", out, "share_table")
        table = share_table(tab_recs)
        print(f"SUMMARY share {one / shared:.2f}x, autotune {t_one / t_all:.2f}x on "
              f"{len(engines)} devices; share table: {table['without_pct_of_cublas']} of "
              f"{table['lab_rows']} lab rows without a % of cuBLAS", flush=True)
        summary = {"devices": devices, "share_one_s": one, "share_all_s": shared,
                   "autotune_one_s": t_one, "autotune_all_s": t_all, "share_table": table}
        (out / "multi_gpu_summary.json").write_text(json.dumps(summary, indent=1))
    finally:
        for e in engines:
            e.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
