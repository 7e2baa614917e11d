"""Time and verify the skinny rung (24_skinny.cu) against ffma_wide and cuBLAS on skinny shapes.

    python3 benchmarks/skinny_check.py [--shapes 1x8192x8192,...] [--repeats 20] [--out DIR]

Through the engine (engine.runner.Sweep on the cuda backend, verification on): for each
shape, cuBLAS strict FP32, every parameter combination of ``skinny`` and of ``ffma_wide``
(those valid at the shape). The table shows per shape the best of each: milliseconds,
effective bandwidth ((M*K + K*N + M*N) * 4 bytes / time), % of cuBLAS's time (cuBLAS ms /
ms), and for skinny its parameters and the % of a device-to-device copy's bandwidth (read +
written bytes / time of cuMemcpyDtoD, measured first). Records go to DIR/skinny_check.json
(DIR: --out, else $OUT, else benchmarks/results) and the table to DIR/skinny_check.txt.
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

from engine import records, registry  # noqa: E402
from engine.registry import params_to_str  # noqa: E402
from engine.runner import Plan, Sweep, expand_items  # noqa: E402

SHAPES = ("1x8192x8192,16x8192x8192,8192x1x8192,64x4096x4096,1x4096x4096,8192x64x8192,"
          "3x5000x7001,8192x7x4099")


def copy_gbps(nbytes: int = 1 << 30, reps: int = 20) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second) in a context of our
    own, closed before the sweep opens the engine's; nan where pycuda is missing."""
    try:
        import pycuda.driver as drv
        drv.init()
        ctx = drv.Device(0).make_context()
    except Exception as exc:  # noqa: BLE001
        print(f"(no copy bandwidth: {exc})")
        return math.nan
    try:
        src, dst = drv.mem_alloc(nbytes), drv.mem_alloc(nbytes)
        times = []
        for i in range(reps + 3):
            e0, e1 = drv.Event(), drv.Event()
            e0.record()
            drv.memcpy_dtod(dst, src, nbytes)
            e1.record()
            e1.synchronize()
            if i >= 3:
                times.append(e0.time_till(e1))
        src.free()
        dst.free()
        times.sort()
        return 2 * nbytes / (times[len(times) // 2] * 1e-3) / 1e9
    finally:
        ctx.pop()
        ctx.detach()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=SHAPES, help="MxNxK,... (A is MxK)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    shapes = [tuple(int(x) for x in s.lower().split("x")) for s in args.shapes.split(",") if s]
    out = Path(args.out or os.environ.get("OUT") or ROOT / "benchmarks" / "results")
    out.mkdir(parents=True, exist_ok=True)

    copy = copy_gbps()
    print(f"device-to-device copy: {copy:.0f} GB/s (read + written)", flush=True)
    sweep, recs = Sweep(), []

    def emit(ev):
        if ev.kind == "result" and ev.record is not None:
            r = ev.record
            print(f"  {r.label():<48} {r.m}x{r.n}x{r.k:<12} {r.status:<8} {r.median_ms:9.4f} ms "
                  f"{r.gbps:8.0f} GB/s", flush=True)
        elif ev.kind == "log" and getattr(ev, "level", "") == "error":
            print("  [error]", ev.message, flush=True)

    try:
        for m, n, k in shapes:
            items = [("cublas_fp32", {})]
            for name in ("skinny", "ffma_wide"):
                v = registry.get(name)
                items += [(nm, p) for nm, p in expand_items("cuda", [name])
                          if v.check("cuda", p, m, n, k, "float32") is None]
            plan = Plan(backend="cuda", items=items, shapes=[(m, n, k)], dtype="float32",
                        warmup=args.warmup, repeats=args.repeats, verify=True)
            print(f"== {m}x{n}x{k}: {len(items)} runs", flush=True)
            recs += sweep.run(plan, emit)
    finally:
        sweep.close()

    def best(name, shape):
        ok = [r for r in recs if r.variant == name and (r.m, r.n, r.k) == shape
              and r.status == "ok" and math.isfinite(r.median_ms)]
        return min(ok, key=lambda r: r.median_ms) if ok else None

    head = (f"{'shape':<16}{'cuBLAS ms':>10}{'GB/s':>7} | {'skinny ms':>10}{'GB/s':>7}{'%cuBLAS':>8}"
            f"{'%copy':>7}  {'params':<26}| {'ffma_wide ms':>12}{'%cuBLAS':>8}")
    lines = [f"copy bandwidth {copy:.0f} GB/s; % of cuBLAS = cuBLAS time / time", head]
    for shape in shapes:
        cb, sk, fw = best("cublas_fp32", shape), best("skinny", shape), best("ffma_wide", shape)

        def pct(r):
            return f"{100 * cb.median_ms / r.median_ms:.1f}" if (r and cb) else "—"
        cell = (lambda r, w: f"{r.median_ms:{w}.4f}" if r else f"{'—':>{w}}")
        lines.append(
            f"{'x'.join(map(str, shape)):<16}{cell(cb, 10)}{(cb.gbps if cb else math.nan):7.0f} | "
            f"{cell(sk, 10)}{(sk.gbps if sk else math.nan):7.0f}{pct(sk):>8}"
            f"{(100 * sk.gbps / copy if sk else math.nan):7.1f}  "
            f"{params_to_str(sk.params) if sk else '':<26}| {cell(fw, 12)}{pct(fw):>8}")
    bad = [r for r in recs if r.status not in ("ok", "skipped")]
    lines += [f"!! {r.label()} {r.m}x{r.n}x{r.k}: {r.status}: {r.error[:200]}" for r in bad]
    text = "\n".join(lines)
    print(text)
    records.save(recs, out / "skinny_check.json")
    (out / "skinny_check.txt").write_text(text + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
