"""GUI: configuration built from the engine's tables, inline validation, backend
status, and settings that survive a restart."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402

from engine.common.dtypes import ELEMENT_NAMES  # noqa: E402
from engine.inputs import matrices  # noqa: E402
from engine.kernels import registry  # noqa: E402
from engine.measure.backends import BACKENDS  # noqa: E402
from engine.inputs.sizes import PRESETS  # noqa: E402


def test_choices_come_from_the_engine(make_window):
    win = make_window()
    cfg = win.config
    for backend in ("opencl", "cpu"):
        cfg.select(backend, 0)
        assert cfg.variants.variant_names() == [v.name for v in registry.variants_for(backend)]
    cfg.select("opencl", 0)
    top = cfg.variants.topLevelItem(0)
    naive = registry.get("naive")
    assert top.text(1) == naive.technique
    assert [top.child(i).text(0) for i in range(top.childCount())] == list(naive.space)
    boxes = cfg.variants._value_widgets[("naive", "block")].boxes
    assert sorted(boxes) == sorted(naive.space["block"])
    assert [v for v, b in boxes.items() if b.isChecked()] == [naive.space["block"][0]]
    assert [cfg.dtype.itemText(i) for i in range(cfg.dtype.count())] == list(ELEMENT_NAMES)
    presets = [cfg.sizes.preset.itemText(i) for i in range(1, cfg.sizes.preset.count())]
    assert presets == list(PRESETS)
    dists = [cfg.inputs.dist.itemText(i) for i in range(cfg.inputs.dist.count())]
    assert dists == list(matrices.DISTRIBUTIONS)
    # Per-variant parameter choices reach the plan.
    cfg.variants.set_only(["naive", "wpt"])
    cfg.variants.set_param_values("naive", "block", [8, 32])
    cfg.variants.set_param_values("wpt", "ts", [16])
    cfg.variants.set_param_values("wpt", "wpt", [2, 4])
    cfg.sizes.set_text("64")
    plan = cfg.build_plan()
    assert plan.items == [("naive", {"block": 8}), ("naive", {"block": 32}),
                          ("wpt", {"ts": 16, "wpt": 2}), ("wpt", {"ts": 16, "wpt": 4})]
    cfg.variants.set_param_values("wpt", "wpt", [])
    assert "wpt: choose at least one value of wpt." in cfg.problems()
    cfg.variants.set_all(False)
    assert win.run_bar.status.text() == "Choose at least one variant."
    assert not win.run_bar.run_button.isEnabled()


def test_backend_status_says_what_is_available_and_why_not(make_window):
    win = make_window()
    statuses = win.statuses
    assert set(statuses) == set(BACKENDS)
    combo = win.config.backend
    for i in range(combo.count()):
        st = statuses[combo.itemData(i)]
        assert combo.model().item(i).isEnabled() == st.available
        if not st.available:
            assert "unavailable" in combo.itemText(i)
            assert combo.itemData(i, Qt.ItemDataRole.ToolTipRole) == st.reason
    for name, st in statuses.items():
        text = win.devices.status_text(name)
        if st.available:
            assert "available" in text and all(d.name in text for d in st.devices)
        else:
            assert "unavailable" in text and st.reason in text
    assert all(f"{n} {'✓' if s.available else '✗'}" in win.backend_button.text() for n, s in statuses.items())
    # The device panel shows the chosen device's properties.
    win.config.select("cpu", 0)
    table = win.devices.table
    labels = [table.item(r, 0).text() for r in range(table.rowCount())]
    for wanted in ("Name", "Compute units", "Memory", "Peak FP32 (est.)", "Bandwidth (est.)"):
        assert wanted in labels
    assert "compute units" in win.config.device_note.text()


def test_invalid_sizes_are_flagged_inline(make_window):
    win = make_window()
    win.config.select("cpu", 0)
    sizes = win.config.sizes
    sizes.set_text("32, 6x4, 1:8:x2")
    assert sizes.error() and "6x4" in sizes.error()
    assert sizes.text.property("invalid") is True
    assert sizes.message.text() == sizes.error()
    assert not win.run_bar.run_button.isEnabled()
    assert win.run_bar.status.text().startswith("Sizes: ")
    sizes.set_text("127x253x61, 16:64:x2")
    assert sizes.error() == "" and sizes.text.property("invalid") is False
    assert sizes.shapes() == [(127, 253, 61), (16, 16, 16), (32, 32, 32), (64, 64, 64)]
    assert sizes.message.text().startswith("4 sizes")
    assert sizes.preset.currentText() == "Custom"
    sizes.preset.setCurrentText("seed table 16/160/1600")
    assert sizes.shapes() == PRESETS["seed table 16/160/1600"]
    assert win.run_bar.status.text() == "Ready: 3 runs"


def test_settings_persist_across_a_restart(make_window, gui_settings, tmp_path, qtbot):
    win = make_window()
    cfg = win.config
    cfg.select("opencl", 0)
    cfg.variants.set_only(["tiled", "wpt"])
    cfg.variants.set_param_values("tiled", "block", [8, 32])
    cfg.sizes.set_text("64:256:x2, 100x50x25")
    cfg.dtype.setCurrentText("int32")
    cfg.mode.setCurrentIndex(cfg.mode.findData("cold"))
    cfg.warmup.setValue(5)
    cfg.budget_radio.setChecked(True)
    cfg.budget.setValue(1.25)
    cfg.repeats.setValue(7)
    cfg.verify.setChecked(False)
    cfg.inputs.dist.setCurrentText("normal")
    cfg.inputs.seed.setValue(42)
    win.charts.log_axes.setChecked(False)
    win.charts.set_current("roofline")
    win.keep_runs_action.setChecked(True)
    results = tmp_path / "r.json"
    results.write_text("[]")
    win.settings.add_recent(results)
    win.resize(1100, 700)
    win.close()
    assert win.controller.is_closed

    again = make_window()
    again.resize(100, 100)  # the fixture's size; restoreGeometry happened at construction
    c2 = again.config
    assert c2.backend_name() == "opencl"
    assert c2.variants.checked_variants() == ["tiled", "wpt"]
    assert c2.variants.chosen_values("tiled") == {"block": [8, 32]}
    assert c2.sizes.text.text() == "64:256:x2, 100x50x25"
    assert c2.dtype.currentText() == "int32"
    assert c2.mode.currentData() == "cold"
    assert (c2.warmup.value(), c2.repeats.value(), c2.budget.value()) == (5, 7, 1.25)
    assert c2.budget_radio.isChecked() and not c2.verify.isChecked()
    assert (c2.inputs.dist.currentText(), c2.inputs.seed.value()) == ("normal", 42)
    assert not again.charts.log_axes.isChecked() and again.charts.current_kind == "roofline"
    assert again.keep_runs_action.isChecked()
    assert again.settings.recent_files() == [str(results)]
    assert [a.text() for a in again.recent_menu.actions()][0] == "r.json"
    assert again.settings.geometry() is not None


def test_restart_geometry_is_restored(qtbot, gui_settings, error_dialogs):
    from gui.app import MainWindow

    first = MainWindow(gui_settings)
    qtbot.addWidget(first)
    first.show()
    first.resize(900, 610)
    qtbot.waitUntil(lambda: first.height() == 610)
    first.close()
    second = MainWindow(gui_settings)
    qtbot.addWidget(second)
    # The offscreen platform's screen is 800 px wide and restoreGeometry() keeps a
    # window on its screen, so only the height comes back exactly there.
    assert second.height() == 610 and second.width() >= min(900, second.screen().size().width() - 10)
    second.close()


def test_keep_previous_runs_overlays_them(qtbot, make_window, configure):
    win = configure(make_window(), "cpu", ("cpu_numpy",), "32,48")
    win.keep_runs_action.setChecked(True)
    for _ in range(2):
        with qtbot.waitSignal(win.controller.finished, timeout=30_000):
            win.start_run()
    labels = sorted(win.charts.curves("runtime"))
    assert len(labels) == 2 and len(win.store) == 4
    assert labels[0].startswith("cpu_numpy · run 1 (") and labels[1] == "cpu_numpy · this session"
    win.keep_runs_action.setChecked(False)
    with qtbot.waitSignal(win.controller.finished, timeout=30_000):
        win.start_run()
    # Replacing drops only the live run; kept runs stay until cleared.
    assert len(win.charts.curves("runtime")) == 2
    win.clear_results()
    assert len(win.store) == 0


def test_parameter_defaults_follow_the_devices_architecture(qtbot):
    """A CUDA device of compute capability 9.0 shows its kernels' [defaults.sm_90]
    values checked (ffma_wide bk=16); another GPU, or another backend, the first values;
    values the user chose stay chosen whatever the device."""
    from engine.measure.backends.base import BackendStatus, DeviceInfo
    from gui.config_panel import ConfigPanel

    cfg = ConfigPanel()
    qtbot.addWidget(cfg)
    cuda = [DeviceInfo("cuda", 0, "NVIDIA H200", compute_capability="9.0"),
            DeviceInfo("cuda", 1, "NVIDIA A100", compute_capability="8.0")]
    cfg.set_statuses({"cuda": BackendStatus("cuda", True, devices=cuda),
                      "opencl": BackendStatus("opencl", True, devices=[
                          DeviceInfo("opencl", 0, "NVIDIA H200", compute_capability="9.0")]),
                      "cpu": BackendStatus("cpu", True, devices=[DeviceInfo("cpu", 0, "CPU")])})

    def checked(name, pname):
        boxes = cfg.variants._value_widgets[(name, pname)].boxes
        return [v for v, b in boxes.items() if b.isChecked()]

    def bk_tip():
        top = next(cfg.variants.topLevelItem(i) for i in range(cfg.variants.topLevelItemCount())
                   if cfg.variants.topLevelItem(i).text(0) == "ffma_wide")
        return next(top.child(i) for i in range(top.childCount())
                    if top.child(i).text(0) == "bk").toolTip(0)

    cfg.select("cuda", 0)
    assert cfg.device_arch() == "sm_90" and cfg.variants.arch == "sm_90"
    assert checked("ffma_wide", "bk") == [16] and checked("ffma_wide", "sw") == [1]
    assert checked("pipelined", "bm") == [64] and checked("blocktile_2d", "bn") == [128]
    assert checked("warptile", "bk") == [16]                   # no sm_90 table: first value
    assert "16 is the default on sm_90 (8 elsewhere)" in bk_tip()
    cfg.variants.set_only(["ffma_wide"])
    cfg.sizes.set_text("4096")
    # B's copies and C's store are left to the shape (auto), the rest at sm_90's defaults
    assert cfg.build_plan().items == [("ffma_wide", dict(registry.get("ffma_wide").default_params("9.0"),
                                                         bcopy=registry.AUTO, crows=registry.AUTO))]
    assert cfg.build_plan().items[0][1]["bk"] == 16

    cfg.select("cuda", 1)                                       # compute capability 8.0
    assert cfg.device_arch() == "sm_80" and checked("ffma_wide", "bk") == [8]
    assert "8 is the default" in bk_tip() and cfg.variants.chosen_values("ffma_wide")["bk"] == [8]
    cfg.select("opencl", 0)                                     # not a CUDA device
    assert cfg.device_arch() is None and cfg.variants.arch is None

    cfg.select("cuda", 0)
    cfg.variants.set_param_values("pipelined", "bm", [128])     # the user's own choice
    cfg.select("cuda", 1)
    cfg.select("cuda", 0)
    assert checked("pipelined", "bm") == [128] and checked("ffma_wide", "bk") == [16]
    state = cfg.variants.state()
    assert state["explicit"] is True and state["values"] == {"pipelined": {"bm": [128]}}

    # A state saved before defaults per architecture held every value shown, untouched
    # ones at their first value: those follow the device now, the others stay.
    cfg.variants.set_state({"checked": {"ffma_wide": True},
                            "values": {"ffma_wide": {"bk": [8], "sw": [1], "splitk": [1, 4]}}})
    assert cfg.variants.chosen_values("ffma_wide") == {   # tailk, newer than the state: its default
        "bm": [256], "bk": [16], "stages": [4], "sw": [1], "splitk": [1, 4], "tailk": [8],
        "bcopy": [registry.AUTO], "crows": [registry.AUTO]}           # newer too: the shape's
    cfg.variants.set_state({"checked": {}, "values": {"ffma_wide": {"bk": [8]}}, "explicit": True})
    assert cfg.variants.chosen_values("ffma_wide")["bk"] == [8]
    # The settings file keeps the mark (so a chosen first value is not taken for an old
    # state's untouched one after a restart).
    from gui.settings import clean_config
    clean, problems = clean_config(cfg.state())
    assert problems == [] and clean["variants"]["explicit"] is True
    assert clean["variants"]["values"] == {"ffma_wide": {"bk": [8]}}
