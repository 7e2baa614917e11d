"""Every GPU of one machine at once: "compare devices" and "share the work", timed.

    python3 benchmarks/multi_gpu.py [--backend cuda] [--devices all] [--out DIR]

1. compare: the same items on every device (one engine process each); prints each
   device's median per item and the interval in which both were busy;
2. share: the same items divided among the devices; wall time against one device;
3. autotune of one variant (--tune-variant, searched again with a private cache) over
   --tune-sizes, on one device and then shared by all: wall times and the speed-up.

Records (JSON, one file per part) go to --out. Same engine as ``bench`` and the app.
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

from engine.results import records  # noqa: E402
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
    tl = Timeline()
    t0 = time.monotonic()
    recs = start_run(plan, engines, tl, mode).result()
    wall = time.monotonic() - t0
    records.save(recs, out / f"{name}.json")
    bad = [r for r in recs if r.status not in ("ok", "skipped") or r.passed is False]
    print(f"{name}: {len(recs)} records in {wall:.1f} s, {len(bad)} not ok; workers "
          + ", ".join(f"{w}: {tl.first[w]:.1f}-{tl.last[w]:.1f} s" for w in sorted(tl.first))
          + f"; all busy together for {tl.overlap():.1f} s", flush=True)
    return recs, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--devices", default="all")
    ap.add_argument("--variants", default="naive,tiled_any,wpt,ffma_regdb,ffma_wide,cublas_fp32")
    ap.add_argument("--sizes", default="2048,4096")
    ap.add_argument("--tune-variant", default="ffma_wide")
    ap.add_argument("--tune-sizes", default="2048,4096,8192")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timing per candidate")
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
    print("devices:", ", ".join(f"{d.index}: {d.name}" for d in st.devices if d.index in devices))
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
        summary = {"devices": devices, "share_one_s": one, "share_all_s": shared,
                   "autotune_one_s": t_one, "autotune_all_s": t_all}
        (out / "multi_gpu_summary.json").write_text(json.dumps(summary, indent=1))
    finally:
        for e in engines:
            e.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
