"""GUI and int8: the type picker offers int8 where the backend runs it (greyed on OpenCL
with the reason), its output picker shows int32 alone, the plan carries it, and the
roofline draws the int8 tensor-core ceiling its records carry."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pyqtgraph as pg  # noqa: E402
import pytest  # noqa: E402

from engine.common.dtypes import ELEMENT_NAMES  # noqa: E402
from engine.results.records import ResultRecord  # noqa: E402


def _enabled(cfg, name: str) -> bool:
    return cfg.dtype.model().item(ELEMENT_NAMES.index(name)).isEnabled()


def _tip(cfg, name: str) -> str:
    from PySide6.QtCore import Qt
    return cfg.dtype.itemData(ELEMENT_NAMES.index(name), Qt.ItemDataRole.ToolTipRole) or ""


def _outputs(cfg) -> list[str]:
    return [cfg.out_dtype.itemText(i) for i in range(cfg.out_dtype.count())]


def test_the_type_picker_offers_int8_with_an_int32_c(make_window):
    cfg = make_window().config
    cfg.select("cpu", 0)
    assert "int8" in [cfg.dtype.itemText(i) for i in range(cfg.dtype.count())]
    assert _enabled(cfg, "int8") and "int32 accumulation (exact)" in _tip(cfg, "int8")
    cfg.dtype.setCurrentText("bfloat16")
    assert _outputs(cfg) == ["float32", "bfloat16"] and cfg.out_dtype.isEnabled()
    cfg.dtype.setCurrentText("int8")
    assert _outputs(cfg) == ["int32"] and not cfg.out_dtype.isEnabled()
    cfg.sizes.set_text("32")
    plan = cfg.build_plan()
    assert (plan.dtype, plan.out_dtype, str(plan.type_spec.output)) == ("int8", "int32", "int32")
    plan.validate()
    if os.environ.get("MATMUL_LAB_SHOTS"):
        w = cfg.window()
        w.resize(1280, 800)
        w.grab().save(os.path.join(os.environ["MATMUL_LAB_SHOTS"], "int8_type_picker.png"))
    # OpenCL has no int8 kernel: greyed with the reason, and the choice goes back to float32
    cfg.select("opencl", 0)
    assert not _enabled(cfg, "int8")
    assert "no OpenCL kernel of the lab takes int8" in _tip(cfg, "int8")
    assert cfg.dtype.currentText() == "float32" and _outputs(cfg) == ["float32"]


def test_the_roofline_draws_the_int8_ceiling(qtbot):
    from gui.chart_data import build_series, record_ceilings
    from gui.chart_render import ChartOptions, render, roofs_for
    from gui.chart_view import ChartView

    m = 1024
    recs = [ResultRecord(backend="cuda", device="dev A", variant="cublaslt_int8", params={}, m=m,
                         n=m, k=m, dtype="int8", median_ms=0.01, gflops=2 * m**3 / 1e4,
                         flops=2 * m**3, bytes=6 * m * m, repeats=3, status="ok", passed=True,
                         extra={"precision": "int8", "peak_gflops": 1_979_000.0, "copy_gbps": 4000.0})]
    ceilings = record_ceilings(recs)
    assert ceilings == {"dev A": {"int8": 1_979_000.0, "copy": 4000.0}}
    opts = ChartOptions(peak_gflops=67_000, peak_gbps=4800, peak_device="dev A",
                        ceilings=tuple((d, w, v) for d, per in ceilings.items() for w, v in per.items()))
    series = build_series(recs)
    (rf,) = roofs_for(series, opts)
    assert rf.peak_of("int8") == pytest.approx(1_979_000.0)
    view = ChartView("roofline")
    qtbot.addWidget(view)
    render(view, "roofline", series, opts)
    texts = [i.textItem.toPlainText() for i in view.getPlotItem().items if isinstance(i, pg.TextItem)]
    assert any("int8 tensor-core peak" in t for t in texts), texts
