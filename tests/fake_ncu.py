"""A stand-in for Nsight Compute's ``ncu`` on machines without a GPU.

It checks nothing about counters: it lets the tests drive :mod:`engine.profile.nsight`'s
process handling (the command line it builds, a report kept, ncu's own errors, a
profile that hangs) without a GPU. The counters it "reports" are a raw-page CSV
recorded by the real ncu on a GPU (``FAKE_NCU_CSV``). ``FAKE_NCU_MODE`` picks the
behaviour: ok | perm | hang | target_error | noreport. ``FAKE_NCU_LOG``: each command
line is appended there as a JSON list.
"""
import json
import os
import sys
import time
from pathlib import Path


def main(argv):
    log = os.environ.get("FAKE_NCU_LOG")
    if log:
        with open(log, "a") as fh:
            fh.write(json.dumps(argv) + "\n")
    if argv[:1] == ["--version"]:
        print("NVIDIA (R) Nsight Compute Command Line Profiler\n"
              "Copyright (c) 2018-2025 NVIDIA Corporation\nVersion 2025.3.1.0 (build 0) (public-release)")
        return 0
    if argv[:1] == ["--query-metrics"]:
        return 0
    if "--import" in argv:
        sys.stdout.write(Path(os.environ["FAKE_NCU_CSV"]).read_text())
        return 0
    mode = os.environ.get("FAKE_NCU_MODE", "ok")
    export = argv[argv.index("--export") + 1]
    target_json = argv[argv.index("--json") + 1]
    if mode == "hang":
        time.sleep(120)
        return 0
    if mode == "perm":
        print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
              "GPU Performance Counters on the target device 0.")
        return 1
    if mode == "target_error":
        Path(target_json).write_text(json.dumps({"ok": False, "error": "CUDA device 3 does not exist (found 1)"}))
        print("==PROF== Disconnected from process 1")
        return 1
    if mode == "noreport":
        print("==ERROR== An error was reported by the driver")
        return 1
    Path(target_json).write_text(json.dumps({"ok": True, "kernel": "matmul"}))
    Path(export + ".ncu-rep").write_bytes(b"NCU report stand-in")
    print("==PROF== Connected to process 1\n==PROF== Profiling \"matmul\" - 0: 0%....50%....100% - 40 passes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
