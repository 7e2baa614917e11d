"""A results file saved from the window carries the full environment block (issue 37 §1),
as ``bench --out`` writes it: the devices as the run's engines opened them (UUID, driver
where NVML knows them), versions, kernel file hashes, the timing settings and the clock
lock; reopened, the block is shown in Devices ▸ Run info. On cpu and OpenCL (PoCL)."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from dataclasses import replace  # noqa: E402

import pytest  # noqa: E402

import main  # noqa: E402
from engine.results import records  # noqa: E402
from engine.results.environment import Environment  # noqa: E402
from tests.helpers import require_backend  # noqa: E402


def run_in_window(win, qtbot, backend, variant, budget_s=None):
    cfg = win.config
    cfg.select(backend, 0)
    cfg.variants.set_only((variant,))
    cfg.sizes.set_text("32,48")
    cfg.warmup.setValue(0)
    cfg.repeats.setValue(2)
    (cfg.budget_radio if budget_s else cfg.repeats_radio).setChecked(True)
    if budget_s:
        cfg.budget.setValue(budget_s)
    cfg.inputs.set_mode("random")
    assert cfg.problems() == [], cfg.problems()
    started = []
    win.controller.started.connect(started.append)
    with qtbot.waitSignal(win.controller.finished, timeout=120_000) as done:
        assert win.start_run()
    assert done.args[0].started and len(started) == 1
    return started[0]


def comparable(env: Environment) -> Environment:
    """The block without what differs between any two saves (the time) or between two
    processes' records (the host is the same machine)."""
    return replace(env, time="")


@pytest.mark.parametrize("backend, variant", [("cpu", "cpu_numpy"), ("opencl", "naive")])
def test_a_window_saved_file_has_the_block_bench_writes(make_window, qtbot, tmp_path, capsys,
                                                        backend, variant):
    if backend == "opencl":
        require_backend("opencl")
    win = make_window()
    ev = run_in_window(win, qtbot, backend, variant)
    assert ev.devices                     # the started event brought the opened devices
    saved = tmp_path / "window.json"
    assert win.save_results(saved)
    got = records.load_file(saved)
    env = got.environment
    assert env != Environment() and not got.environment_problem
    opened = ev.devices[0]
    assert [(d.backend, d.index, d.name) for d in env.devices] == [(backend, 0, opened.name)]
    assert env.timing.warmup == "0" and env.timing.repeats == "repeats 2" and env.timing.mode == "hot"
    assert env.timing.clock_lock == ""    # not asked
    assert env.versions and env.app_version and env.host
    if backend == "opencl":
        assert any(k.endswith(".cl") for k in env.kernels)       # the kernel file's hash
    # bench on the same settings writes the same block (but for the time it was saved)
    out = tmp_path / "bench.json"
    code = main.main(["bench", "--backend", backend, "--variants", variant, "--sizes", "32,48",
                      "--warmup", "0", "--repeats", "2", "--quiet", "--out", str(out)])
    capsys.readouterr()
    assert code == 0
    assert comparable(records.load_file(out).environment) == comparable(env)
    # reopened in the window: Devices ▸ Run info shows it
    win.clear_results()
    assert win.open_results(saved)
    panel = win.devices
    panel.show_run_info("window.json")
    rows = {panel.table.item(r, 0).text(): panel.table.item(r, 1).text()
            for r in range(panel.table.rowCount())}
    assert rows[f"Device {backend} #0"].startswith(opened.name)
    assert rows["Stop rule"] == "repeats 2" and rows["Clock lock"] == "not asked"


def test_the_block_says_the_budget_and_the_clock_lock_asked(make_window, qtbot, tmp_path):
    win = make_window()
    win.config.clocks.setCurrentIndex(win.config.clocks.findData("base"))
    run_in_window(win, qtbot, "cpu", "cpu_numpy", budget_s=0.05)
    path = tmp_path / "budget.csv"
    assert win.save_results(path)
    env = records.load_file(path).environment
    assert env.timing.repeats == "budget 0.05 s"
    # a cpu device is no NVIDIA GPU: what came of the lock is said, as bench says it
    assert env.timing.clock_lock.startswith("base: no GPU to lock through NVML")


def test_the_devices_as_the_engine_opened_them_reach_the_file(make_window, qtbot, tmp_path):
    """What only the opened device knows (a CUDA engine reads UUID and driver through NVML
    in its own process) is in the window-saved block."""
    from engine.run.engines import LocalEngine

    class NamedGPU(LocalEngine):
        def open(self):
            info = super().open()
            info.extra.update(uuid="GPU-5e1f", driver="570.86", cuda_driver="12.8",
                              pci_bus_id="0000:41:00.0")
            return info

    win = make_window(engines=NamedGPU)
    run_in_window(win, qtbot, "cpu", "cpu_numpy")
    path = tmp_path / "named.json"
    assert win.save_results(path)
    (dev,) = records.load_file(path).environment.devices
    assert (dev.uuid, dev.driver, dev.cuda_driver, dev.pci_bus_id) == \
        ("GPU-5e1f", "570.86", "12.8", "0000:41:00.0")
    win.clear_results()
    win.open_results(path)
    win.devices.show_run_info("named.json")
    rows = {win.devices.table.item(r, 0).text(): win.devices.table.item(r, 1).text()
            for r in range(win.devices.table.rowCount())}
    assert "GPU-5e1f, driver 570.86, CUDA 12.8" in rows["Device cpu #0"]
