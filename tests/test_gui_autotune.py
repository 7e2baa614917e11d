"""Autotune from the GUI: one best record per (variant, size), remembered on disk."""
from __future__ import annotations

import json

from PySide6.QtCore import Qt

from engine.run import autotune


def test_autotune_reports_the_best_parameters_and_caches_them(qtbot, make_window, configure,
                                                              tmp_path, monkeypatch):
    monkeypatch.setenv(autotune.CACHE_ENV, str(tmp_path))
    win = configure(make_window(), "opencl", ("naive", "wpt"), "32,48",
                    params={("naive", "block"): [8, 16], ("wpt", "ts"): [16], ("wpt", "wpt"): [2, 4]})
    win.config.autotune.setChecked(True)
    assert win.config.build_plan().autotune is True
    with qtbot.waitSignal(win.controller.finished, timeout=60_000) as done:
        qtbot.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    assert done.args[0].cancelled is False
    recs = win.store.records
    # One record per (variant, size): the winner of its search, verified.
    assert sorted((r.variant, r.m) for r in recs) == [("naive", 32), ("naive", 48),
                                                       ("wpt", 32), ("wpt", 48)]
    assert all(r.passed for r in recs)
    assert {r.params["block"] for r in recs if r.variant == "naive"} <= {8, 16}
    cache = json.loads((tmp_path / autotune.CACHE_FILE).read_text())
    assert len(cache) == 4
    for r in recs:
        key = autotune.cache_key("opencl", r.device, r.variant, "float32", (r.m, r.n, r.k))
        assert cache[key]["params"] == r.params

    # Loaded matrices cannot be autotuned: the box is disabled in file mode.
    win.config.inputs.set_mode("files")
    assert not win.config.autotune.isEnabled()
    win.config.inputs.set_mode("random")
    assert win.config.autotune.isEnabled()


def test_autotune_choice_persists(make_window, gui_settings):
    win = make_window()
    win.config.autotune.setChecked(True)
    win.close()
    again = make_window(gui_settings)
    assert again.config.autotune.isChecked()


def test_guess_times_only_what_the_shape_class_learnt(qtbot, make_window, configure, tmp_path,
                                                      monkeypatch):
    """Search two 4-aligned small shapes, then ask the window to guess a third of the same
    class: only the class's winners (and the default) are timed, the result is one verified
    record per variant, and nothing new is stored for the guessed shape."""
    monkeypatch.setenv(autotune.CACHE_ENV, str(tmp_path))
    params = {("wpt", "ts"): [8, 16], ("wpt", "wpt"): [1, 2, 4, 8]}
    win = configure(make_window(), "opencl", ("wpt",), "40x36x28,44x40x32", params=params)
    win.config.autotune.setChecked(True)
    assert win.config.guess.isEnabled() and not win.config.guess.isChecked()
    with qtbot.waitSignal(win.controller.finished, timeout=120_000):
        qtbot.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    searched = json.loads((tmp_path / autotune.CACHE_FILE).read_text())
    assert len(searched) == 2
    configure(win, "opencl", ("wpt",), "48x52x36", params=params)
    win.config.autotune.setChecked(True)
    win.config.guess.setChecked(True)
    plan = win.config.build_plan()
    assert plan.autotune and plan.tune == "guess"
    with qtbot.waitSignal(win.controller.finished, timeout=120_000):
        qtbot.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    (rec,) = [r for r in win.store.records if (r.m, r.n, r.k) == (48, 52, 36)]
    assert rec.passed is True
    g = autotune.guess_candidates("opencl", rec.device, "wpt", "float32", (48, 52, 36), top=3,
                                  combos=[{"ts": t, "wpt": w} for t in (8, 16) for w in (1, 2, 4, 8)])
    assert g.source == "class" and g.shapes == 2
    assert rec.params in g.candidates or rec.params == autotune.registry.get("wpt").default_params()
    assert json.loads((tmp_path / autotune.CACHE_FILE).read_text()) == searched   # guesses not stored
    # The choice is kept with the window's state.
    assert win.config.state()["guess"] is True
