"""How responsive the window stays while it runs a real sweep.

Drives the app's own :class:`gui.main_window.MainWindow` offscreen (engines in their own
processes, as in the app), runs one sweep, and times a 5 ms QTimer in the GUI thread: the
largest gap between two beats is the longest the window froze. Saves a screenshot of the
window at the end and prints one line::

    python3 benchmarks/gui_event_loop.py                       # cuda, the ladder's best
    python3 benchmarks/gui_event_loop.py --backend cpu --variants cpu_numpy --sizes 256,512
    python3 benchmarks/gui_event_loop.py --screenshot shots/h200_gui.png --devices 0,1

Variants the backend does not have are skipped (and named). Exit status: 0 when the sweep
finished with every verified result correct (and, with ``--max-gap-ms``, the event loop
stayed within it), 1 otherwise, 2 when the sweep could not start.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_VARIANTS = ("naive,tiled_any,wpt,ffma_regdb,ffma_wide,tf32_wgmma_tma,"
                    "cublas_fp32,cublas_tf32")
DEFAULT_SIZES = "1000,2048,4096"
HEARTBEAT_MS = 5


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", default="cuda")
    p.add_argument("--variants", default=DEFAULT_VARIANTS,
                   help="comma-separated; ones the backend lacks are skipped")
    p.add_argument("--sizes", default=DEFAULT_SIZES, help="as in the app: 1000,2048 or 256:4096:x2")
    p.add_argument("--devices", default="0", help="device indices, e.g. 0,1")
    p.add_argument("--mode", default="compare", choices=("compare", "share"))
    p.add_argument("--no-verify", action="store_true")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--screenshot", default="gui_event_loop.png", help="PNG of the window at the end")
    p.add_argument("--in-process", action="store_true",
                   help="engines as threads of the GUI process (LocalEngine), not processes")
    p.add_argument("--timeout", type=float, default=1800.0, help="give up after this many seconds")
    p.add_argument("--max-gap-ms", type=float, default=None,
                   help="exit 1 when the largest event-loop gap is longer")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    try:
        import numpy as np
        from PySide6.QtCore import QEventLoop, QTimer
        from PySide6.QtWidgets import QApplication
    except ImportError as exc:
        print(f"gui_event_loop: needs the GUI requirements (pip install -r requirements.txt): {exc}",
              file=sys.stderr)
        return 2
    from engine.kernels import registry
    from engine.run.engines import LocalEngine
    from gui.main_window import MainWindow
    from gui.settings import ini_settings

    app = QApplication.instance() or QApplication(["gui_event_loop"])
    settings_dir = tempfile.mkdtemp(prefix="matmul-lab-gui-bench-")
    # Its own data folder too: a results journal left by another session would stop the
    # measurement at a "restore results?" question.
    os.environ["MATMUL_LAB_DATA"] = settings_dir
    win = MainWindow(ini_settings(Path(settings_dir) / "settings.ini"),
                     engine_factory=LocalEngine if opts.in_process else None)
    win.resize(1280, 800)
    win.show()

    def pump_until(cond, seconds: float) -> bool:
        end = time.monotonic() + seconds
        while not cond() and time.monotonic() < end:
            app.processEvents()
            time.sleep(0.005)
        return cond()

    def fail(text: str) -> int:
        print(f"gui_event_loop: {text}", file=sys.stderr)
        win.shutdown()
        return 2

    if not pump_until(win.backends_ready, 120):
        return fail("probing the backends took more than 120 s")
    st = win.statuses.get(opts.backend)
    if st is None or not st.available:
        return fail(f"the {opts.backend} backend is unavailable: "
                    f"{st.reason if st else 'unknown backend'}")
    have = {v.name for v in registry.variants_for(opts.backend)}
    wanted = [v.strip() for v in opts.variants.split(",") if v.strip()]
    variants = [v for v in wanted if v in have]
    skipped = [v for v in wanted if v not in have]
    if not variants:
        return fail(f"none of {', '.join(wanted)} runs on {opts.backend}")

    cfg = win.config
    devices = [int(d) for d in opts.devices.split(",") if d.strip()]
    cfg.select_devices(opts.backend, devices, opts.mode)
    cfg.variants.set_only(variants)
    cfg.sizes.set_text(opts.sizes)
    cfg.warmup.setValue(opts.warmup)
    cfg.repeats_radio.setChecked(True)
    cfg.repeats.setValue(opts.repeats)
    cfg.verify.setChecked(not opts.no_verify)
    cfg.inputs.set_mode("random")
    if cfg.problems():
        return fail("; ".join(cfg.problems()))

    gaps: list[float] = []
    last = [time.perf_counter()]
    finished: list = []

    def beat() -> None:
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    heart = QTimer()
    heart.setInterval(HEARTBEAT_MS)
    heart.timeout.connect(beat)
    # A loop of its own: QApplication.quit() would close the window (and its engines).
    loop = QEventLoop()
    win.controller.finished.connect(lambda ev: (finished.append(ev),
                                                QTimer.singleShot(500, loop.quit)))
    QTimer.singleShot(int(opts.timeout * 1000), lambda: (win.cancel_run(),
                                                         QTimer.singleShot(5000, loop.quit)))
    t0 = time.perf_counter()
    heart.start()
    last[0] = time.perf_counter()
    if not win.start_run():
        return fail("the run did not start")
    loop.exec()                    # until the run finished (and the charts had 0.5 s)
    heart.stop()
    took = time.perf_counter() - t0

    win.charts.redraw()
    shot = Path(opts.screenshot)
    shot.parent.mkdir(parents=True, exist_ok=True)
    win.grab().save(str(shot))

    recs = list(win.store.records)
    ev = finished[0] if finished else None
    g = np.asarray(gaps) * 1e3
    counts = {s: sum(r.status == s for r in recs) for s in ("ok", "failed", "error", "skipped",
                                                            "unverified")}
    names = sorted({r.device_label() for r in recs}) or ["?"]
    state = ("cancelled (timeout)" if ev is not None and ev.cancelled
             else "finished" if ev is not None else "did not finish")
    print(f"gui_event_loop: {opts.backend} on {', '.join(names)}; {len(variants)} variants"
          + (f" (skipped {', '.join(skipped)})" if skipped else "")
          + f" × {len(cfg.sizes.shapes())} sizes, verify {'off' if opts.no_verify else 'on'}: "
          f"{state}, {len(recs)} results ({', '.join(f'{n} {s}' for s, n in counts.items() if n)}) "
          f"in {took:.1f} s; event loop max gap {g.max() if g.size else float('nan'):.1f} ms, "
          f"p99 {np.percentile(g, 99) if g.size else float('nan'):.1f} ms, "
          f"median {np.median(g) if g.size else float('nan'):.1f} ms over {g.size} beats "
          f"of {HEARTBEAT_MS} ms; screenshot {shot}")
    win.shutdown()
    ok = ev is not None and not ev.cancelled and ev.started and not counts["failed"]
    if opts.max_gap_ms is not None and g.size and g.max() > opts.max_gap_ms:
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":   # the engine processes are spawned: they import this module
    sys.exit(main())
