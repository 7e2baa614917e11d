"""Run a few FP32 GEMMs once each at one size (for ncu): python3 benchmarks/fp32_v4_ncu.py 4096 name[:k=v,k=v] ...

No verification, one launch per item, so that `ncu -k regex:'matmul|gemm'` sees one
kernel per item in the order given (ladder v4 FP32 evidence; see benchmarks/NOTES.md).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.runner import Plan, Sweep  # noqa: E402


def main(argv):
    size = int(argv[0])
    items = []
    for spec in argv[1:]:
        name, _, ps = spec.partition(":")
        params = {k: int(v) for k, v in (kv.split("=") for kv in ps.split(",") if kv)}
        items.append((name, params))
    sweep = Sweep()
    try:
        recs = sweep.run(Plan(backend="cuda", items=items, shapes=[(size, size, size)],
                              dtype="float32", warmup=0, repeats=1, verify=False), lambda e: None)
    finally:
        sweep.close()
    for r in recs:
        print(r.label(), r.status, f"{r.median_ms:.3f} ms", r.error[:200] if r.error else "")


if __name__ == "__main__":
    main(sys.argv[1:])
