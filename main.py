"""GPU matmul lab.

    python main.py            open the desktop app
    python main.py bench ...  run a sweep without Qt (python main.py bench --help)
    python main.py new-kernel --from VARIANT PATH   an editable copy of a kernel file
    python main.py check-kernel PATH [--json]       compile a kernel file for every
                                                    parameter combination, without running it
    python main.py bench --profile ...              time, then profile each kernel with
                                                    Nsight Compute (hardware counters)
    python main.py compare BASE NEW [--threshold PCT] [--fail-on-slower] [--markdown]
                                                    two results files, kernel by kernel:
                                                    SAME / FASTER / SLOWER beyond the noise
"""
from __future__ import annotations

import os
import sys


def main(argv: list[str]) -> int:
    if argv and argv[0] == "bench":
        from cli.bench import run_bench  # noqa: PLC0415
        return run_bench(argv[1:])
    if argv and argv[0] == "new-kernel":
        from cli.new_kernel import run_new_kernel  # noqa: PLC0415
        return run_new_kernel(argv[1:])
    if argv and argv[0] == "check-kernel":
        from cli.check_kernel import run_check_kernel  # noqa: PLC0415
        return run_check_kernel(argv[1:])
    if argv and argv[0] == "compare":
        from cli.compare import run_compare  # noqa: PLC0415
        return run_compare(argv[1:])
    if argv and argv[0] == "profile-target":
        from cli.profile_target import target_main  # noqa: PLC0415
        return target_main(argv[1:])
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if (sys.platform.startswith("linux") and not os.environ.get("DISPLAY")
            and not os.environ.get("WAYLAND_DISPLAY") and not os.environ.get("QT_QPA_PLATFORM")):
        # Qt would abort with a platform-plugin error; say it in words instead.
        print("The desktop app needs a display (no DISPLAY or WAYLAND_DISPLAY is set).\n"
              "Run it in a desktop session, set QT_QPA_PLATFORM=offscreen for a headless "
              "check, or use 'python main.py bench' for the command line.", file=sys.stderr)
        return 1
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if (sys.platform.startswith("linux") and os.environ.get("DISPLAY")
            and platform in ("", "xcb") and not os.environ.get("WAYLAND_DISPLAY")):
        # Qt aborts (exit 134) without naming the library when one is missing: ask first.
        from gui.desktop_check import explain, missing_xcb_libraries  # noqa: PLC0415
        missing = missing_xcb_libraries()
        if missing:
            print(explain(missing), file=sys.stderr)
            return 1
    try:
        from gui.app import main as gui_main  # noqa: PLC0415
    except ImportError as exc:
        print(f"The desktop app cannot start: {exc}.\n"
              "Install the GUI requirements (pip install -r requirements.txt), or use "
              "'python main.py bench' for the command line.", file=sys.stderr)
        return 1
    return gui_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
