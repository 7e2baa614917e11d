"""GUI: a Triton half-precision rung run from the window on a machine without a GPU: the
cpu backend, float16 inputs with B as N×K, triton_grouped_half through Triton's
interpreter beside cpu_numpy; every record verified, the table and the chart drawn, and
a kernel that cannot take the type says so in the tree instead of running."""
import importlib.util
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("ml_dtypes")
# not imported here: the interpreter must be chosen before Triton is imported, in the
# engine's own process (as the app runs it)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="Triton is not installed (requirements-triton.txt)")


def test_the_half_triton_rung_runs_verified_from_the_window(qtbot, make_window, configure, shots):
    win = configure(make_window(engines="process"), "cpu", ("cpu_numpy", "triton_grouped_half"), "67x45x91,33x17x65",
                    repeats=1)
    cfg = win.config
    cfg.dtype.setCurrentText("float16")
    cfg.layout_b.setCurrentIndex(cfg.layout_b.findData("nk"))
    # ticked in a type it does not take, the FP32 rung is marked, not run
    cfg.variants.set_variant_checked("triton_grouped_fp32", True)
    assert "float16" in cfg.variants.mark("triton_grouped_fp32")
    assert cfg.variants.mark("triton_grouped_half") == ""
    with qtbot.waitSignal(win.controller.finished, timeout=300_000) as done:
        assert win.start_run()
    assert not done.args[0].cancelled
    recs = win.store.records
    half = [r for r in recs if r.variant == "triton_grouped_half"]
    assert len(half) == 2 and all(r.status == "ok" and r.passed for r in half), \
        [(r.status, r.error) for r in half]
    assert all(r.dtype == "float16" and r.layout == "nk" and r.timing_mode == "interpreter"
               for r in half)
    assert not [r for r in recs if r.variant == "triton_grouped_fp32" and r.status == "ok"]
    win.resize(1280, 800)
    img = win.grab()
    assert img.save(str(shots / "triton_half_cpu.png"))


def test_the_editors_run_of_a_half_kernel_chooses_a_type_it_takes(qtbot, make_window, configure):
    """Ctrl+R on a 16-bit file while float32 is chosen: the window's input type becomes the
    file's first (as Compile builds it), the log says so, and the kernel runs in it,
    verified, instead of a skip saying it does not take float32."""
    from engine.kernels.registry import ROOT
    win = configure(make_window(engines="process"), "cpu", ("cpu_numpy",), "33x17x65", repeats=1)
    assert win.config.dtype.currentText() == "float32"
    assert win.open_kernel(ROOT / "triton" / "grouped_half.py")
    with qtbot.waitSignal(win.controller.finished, timeout=300_000):
        assert win.kernel_editor.run()
    assert win.config.dtype.currentText() == "float16"
    assert "switched the input type to float16" in win.log.plain_text()
    half = [r for r in win.store.records if r.variant == "triton_grouped_half"]
    assert half and all(r.dtype == "float16" and r.status == "ok" and r.passed for r in half), \
        [(r.dtype, r.status, r.error) for r in half]
