"""GUI: the type picker lists every type; one the backend cannot run is greyed with the
reason; the output type follows the input type; the plan carries both."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

pytest.importorskip("ml_dtypes")

from engine.common.dtypes import ELEMENT_NAMES  # noqa: E402


def _enabled(cfg) -> dict[str, bool]:
    return {cfg.dtype.itemText(i): cfg.dtype.model().item(i).isEnabled()
            for i in range(cfg.dtype.count())}


def _tip(cfg, name: str) -> str:
    from PySide6.QtCore import Qt
    return cfg.dtype.itemData(ELEMENT_NAMES.index(name), Qt.ItemDataRole.ToolTipRole) or ""


def test_type_picker_per_backend(make_window, tmp_path):
    cfg = make_window().config
    cfg.select("cpu", 0)
    assert list(_enabled(cfg)) == list(ELEMENT_NAMES)
    assert all(_enabled(cfg).values())                     # the cpu row runs every type
    cfg.dtype.setCurrentText("bfloat16")
    assert [cfg.out_dtype.itemText(i) for i in range(cfg.out_dtype.count())] == ["float32", "bfloat16"]
    cfg.out_dtype.setCurrentText("bfloat16")
    cfg.sizes.set_text("32")
    plan = cfg.build_plan()
    assert (plan.dtype, plan.out_dtype) == ("bfloat16", "bfloat16")
    plan.validate()
    cfg.select("opencl", 0)
    on = _enabled(cfg)
    assert on["float32"] and on["int32"]
    assert not on["bfloat16"] and not on["float8_e4m3"]
    assert "OpenCL C has no bfloat16" in _tip(cfg, "bfloat16")
    if not on["float16"]:
        assert "cl_khr_fp16" in _tip(cfg, "float16")
    assert cfg.dtype.currentText() == "float32"            # bfloat16 cannot run here
    assert not cfg.out_dtype.isEnabled()
    if os.environ.get("MATMUL_LAB_SHOTS"):
        w = cfg.window()
        w.resize(1280, 800)
        w.grab().save(os.path.join(os.environ["MATMUL_LAB_SHOTS"], "type_picker.png"))


def test_layout_picker_per_backend_and_in_the_plan(make_window, tmp_path):
    """B's layout: N×K on the cpu backend goes into the plan and the settings; kernels that
    take only K×N are marked in the tree; on OpenCL N×K is greyed with the reason and a
    choice of it goes back to K×N."""
    from PySide6.QtCore import Qt
    from engine.run.runner import item_fit
    win = make_window()
    cfg = win.config
    cfg.select("cpu", 0)
    nk = cfg.layout_b.findData("nk")
    assert cfg.layout_b.model().item(nk).isEnabled()
    cfg.layout_b.setCurrentIndex(nk)
    cfg.sizes.set_text("32")
    plan = cfg.build_plan()
    assert plan.layout == "nk"
    plan.validate()
    assert cfg.state()["layout"] == "nk"
    # the tree's context carries it: a K×N-only kernel fits none of the sizes
    assert cfg.variants._layout == "nk"
    assert "K×N only" in item_fit("cuda", "tiled_any", {"block": 16}, [(32, 32, 32)], "float32",
                                  "nk").reason
    cfg.select("opencl", 0)
    assert not cfg.layout_b.model().item(nk).isEnabled()
    assert "no OpenCL kernel" in cfg.layout_b.itemData(nk, Qt.ItemDataRole.ToolTipRole)
    assert cfg.layout_b.currentData() == "kn"
    cfg.select("cpu", 0)
    cfg.set_state({"layout": "nk"})
    assert cfg.layout_b.currentData() == "nk"
    if os.environ.get("MATMUL_LAB_SHOTS"):
        w = cfg.window()
        w.resize(1280, 800)
        w.grab().save(os.path.join(os.environ["MATMUL_LAB_SHOTS"], "layout_picker.png"))
