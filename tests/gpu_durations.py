"""The GPU suite's last measured test times, for its order under xdist (tests/conftest.py).

``tests/gpu_durations.json`` maps a test's node id to its seconds (setup + call) as one
run of the GPU suite on an H200 measured them. Regenerate it from a run's report:

    python -m pytest -m "gpu and not serial" -n 16 --durations=0 ... > par.txt
    python -m tests.gpu_durations par.txt

Only the order depends on it: a test missing from it runs after the measured ones as if
it took the median time, and a stale entry only orders a test too early or too late.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

FILE = Path(__file__).with_name("gpu_durations.json")
_LINE = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(\S+)")


def parse(text: str) -> dict[str, float]:
    """Seconds per node id from pytest's ``--durations`` lines."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            out[m.group(3)] = round(out.get(m.group(3), 0.0) + float(m.group(1)), 2)
    return out


def load() -> dict[str, float]:
    try:
        data = json.loads(FILE.read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items()} if isinstance(data, dict) else {}


def longest_first(ids: list[str], known: dict[str, float], workers: int) -> list[int]:
    """Indices of ``ids`` in the order to hand them out: longest first, by ``known``
    seconds (a test not in it counts as the median). xdist's load scheduling gives each
    worker two tests at first, consecutive ones: those pairs are a long test with a short
    one of the first ``2 * workers``, so that no worker starts with the two longest."""
    if not known or not ids:
        return list(range(len(ids)))
    times = sorted(known.values())
    median = times[len(times) // 2]
    order = sorted(range(len(ids)), key=lambda i: -known.get(ids[i], median))
    head, rest = order[:2 * workers], order[2 * workers:]
    paired = []
    for j in range((len(head) + 1) // 2):
        paired.append(head[j])
        if len(head) - 1 - j != j:
            paired.append(head[len(head) - 1 - j])
    return paired + rest


if __name__ == "__main__":
    found = {}
    for path in sys.argv[1:]:
        found.update(parse(Path(path).read_text()))
    FILE.write_text(json.dumps(dict(sorted(found.items())), indent=0) + "\n")
    print(f"{len(found)} tests, {sum(found.values()):.0f} s in all -> {FILE.name}")
