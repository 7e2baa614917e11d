"""Ctrl-C (SIGINT) or SIGTERM during ``bench``: it stops after the current item, prints
and saves what finished, exits 130, and prints no traceback."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import require_backend

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.slow
def test_interrupt_keeps_finished_results(tmp_path, sig):
    require_backend("opencl")
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(ROOT / "main.py"), "bench", "--backend", "opencl", "--variants",
           "naive,tiled_any", "--sizes", "96:1024:+64", "--warmup", "0", "--repeats", "3",
           "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=tmp_path)
    time.sleep(6.0)                       # the engine is up and some items have finished
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert "interrupted" in stderr
    data = json.loads(out.read_text())["records"]
    assert 0 < len(data) < 2 * 3 * 15       # some, not all, of the items
    assert all(d["status"] == "ok" and d["passed"] for d in data)
    assert "Results" in stdout
