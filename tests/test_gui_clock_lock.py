"""The window's clock lock (issue 37 §1, bench's --lock-clocks): the Clocks choice of the
Measurement box, held by the window's process (the run controller), never by an engine.
With the pynvml double of tests/test_conditions.py: the lock is taken at the run's start
and restored at its end, on Cancel, when an engine crashes (held on, restored at the end),
when the window closes, and after an exception; a refusal is a Log message and the run
goes on unlocked; a device NVML cannot find is said."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from engine.measure import conditions  # noqa: E402
from engine.measure.conditions import ClockMode  # noqa: E402
from engine.run.engines import EngineLost, LocalEngine  # noqa: E402
from engine.run.runner import Plan, expand_items  # noqa: E402
from gui.run_controller import RunController, RunTarget  # noqa: E402
from tests.test_conditions import FakeNVML, NVMLError_NoPermission  # noqa: E402

BUS = "0000:41:00.0"          # the GPU the double knows


@pytest.fixture
def nvml(monkeypatch):
    """The pynvml double as the one NVML this process sees."""
    fake = FakeNVML()
    monkeypatch.setattr(conditions, "import_nvml", lambda: (fake, ""))
    return fake


def as_nvidia(win, backend="cpu"):
    """The probed device carries a PCI bus id, as a CUDA device's info does."""
    for info in win.config.statuses[backend].devices:
        info.extra["pci_bus_id"] = BUS


def cpu_setup(win, sizes="32,48", budget_s=None, mode=ClockMode.BASE):
    cfg = win.config
    cfg.select("cpu", 0)
    cfg.variants.set_only(("cpu_numpy",))
    cfg.sizes.set_text(sizes)
    cfg.warmup.setValue(0)
    cfg.repeats.setValue(2)
    (cfg.budget_radio if budget_s else cfg.repeats_radio).setChecked(True)
    if budget_s:
        cfg.budget.setValue(budget_s)
    cfg.clocks.setCurrentIndex(cfg.clocks.findData(mode.value))
    assert cfg.problems() == [], cfg.problems()


def log_text(win) -> str:
    return " ".join(win.log.plain_text().split())


def test_locked_at_the_start_and_restored_at_the_end(make_window, nvml, qtbot):
    win = make_window()
    as_nvidia(win)
    cpu_setup(win)
    with qtbot.waitSignal(win.controller.finished, timeout=60_000):
        assert win.start_run()
        assert nvml.locked == (nvml.NVML_CLOCK_LIMIT_ID_TDP,) * 2     # taken before any launch
        assert win.controller.clocks_locked
    assert nvml.locked is None and not win.controller.clocks_locked
    text = log_text(win)
    assert "Clock lock (base): SM clock locked at the base (TDP) clock" in text
    assert "GPU clocks restored" in text
    assert win.controller.clock_lock_text == "base: SM clock locked at the base (TDP) clock"


def test_max_locks_at_the_highest_clock_and_cancel_restores_at_once(make_window, nvml, qtbot):
    win = make_window()
    as_nvidia(win)
    cpu_setup(win, sizes="64,96,128,160,192,224", budget_s=0.3, mode=ClockMode.MAX)
    with qtbot.waitSignal(win.controller.result, timeout=60_000):
        assert win.start_run()
    assert nvml.locked == (1980, 1980)
    win.cancel_run()
    assert nvml.locked is None                 # at Cancel, not when the run has wound down
    with qtbot.waitSignal(win.controller.finished, timeout=60_000):
        pass
    assert nvml.locked is None


def test_closing_the_window_restores_the_clocks(make_window, nvml, qtbot):
    win = make_window()
    as_nvidia(win)
    cpu_setup(win, sizes="64,96,128,160,192,224", budget_s=0.3)
    with qtbot.waitSignal(win.controller.result, timeout=60_000):
        assert win.start_run()
    assert nvml.locked is not None
    win.close()                                # closeEvent: cancel, close engines on a thread
    assert nvml.locked is None
    qtbot.waitUntil(lambda: win.controller.is_closed, timeout=30_000)
    assert nvml.locked is None


def test_a_refusal_is_said_and_the_run_goes_on_unlocked(make_window, monkeypatch, qtbot):
    fake = FakeNVML(lock_error=NVMLError_NoPermission("Insufficient Permissions"))
    monkeypatch.setattr(conditions, "import_nvml", lambda: (fake, ""))
    win = make_window()
    as_nvidia(win)
    cpu_setup(win)
    with qtbot.waitSignal(win.controller.finished, timeout=60_000) as done:
        assert win.start_run()
    assert fake.locked is None and done.args[0].started
    assert len(win.files.live_records) == 2              # the run went on
    text = log_text(win)
    assert "the clocks were not locked (base): the driver refuses it without root" in text
    assert "nvidia-smi -lgc" in text and "The run goes on unlocked" in text
    assert "GPU clocks restored" not in text              # nothing was locked
    assert win.controller.clock_lock_text.startswith("base: the clocks were not locked")


def test_a_device_nvml_cannot_find_and_no_nvml_are_said(make_window, monkeypatch, qtbot):
    win = make_window()
    cpu_setup(win)                             # a cpu device: no PCI bus id
    with qtbot.waitSignal(win.controller.finished, timeout=60_000):
        assert win.start_run()
    assert "the device has no PCI bus id (not an NVIDIA GPU); its clocks are left as they are" \
        in log_text(win)
    monkeypatch.setattr(conditions, "import_nvml", lambda: (None, "nvidia-ml-py is not installed"))
    as_nvidia(win)
    with qtbot.waitSignal(win.controller.finished, timeout=60_000):
        assert win.start_run()
    assert "nvidia-ml-py is not installed" in log_text(win)


def test_the_clocks_choice_is_saved_with_the_settings(make_window, gui_settings):
    win = make_window()
    win.config.clocks.setCurrentIndex(win.config.clocks.findData("max"))
    assert win.config.state()["clock_lock"] == "max"
    win.save_settings()
    again = make_window(gui_settings)
    assert again.config.clock_mode() is ClockMode.MAX
    again.config.set_state({"clock_lock": "sideways"})      # unknown: kept as it was
    assert again.config.clock_mode() is ClockMode.MAX
    # the noise rule is restored too, and a hand-edited bad value is said, not used
    from gui.settings import clean_config
    assert clean_config({"use_noise": True, "noise_pct": 1.5}) == (
        {"use_noise": True, "noise_pct": 1.5}, [])
    clean, problems = clean_config({"clock_lock": "sideways", "noise_pct": float("nan")})
    assert clean == {} and len(problems) == 2 and "clock_lock" in " ".join(problems)


# --- the controller on its own: an engine crash, an exception ------------------------------

def _plan(sizes=(32, 48, 64)):
    return Plan(backend="cpu", items=expand_items("cpu", ["cpu_numpy"]),
                shapes=[(s, s, s) for s in sizes], warmup=0, repeats=2)


class CrashingOnce(LocalEngine):
    """An engine whose first run is lost as a crashed process's is; it restarts."""

    crashes = 0
    locked_at_restart: list = []

    def run(self, plan, emit, cancel):
        if CrashingOnce.crashes == 0:
            CrashingOnce.crashes += 1
            raise EngineLost("the engine process was killed (SIGKILL)",
                             item=(plan.items[0][0], plan.items[0][1], plan.shapes[0]))
        return super().run(plan, emit, cancel)

    def restart(self):
        CrashingOnce.locked_at_restart.append(self.nvml.locked)
        return self.info


def _gpu(index=0):
    from engine.measure.backends import DeviceInfo
    return DeviceInfo(backend="cpu", index=index, name="a GPU", extra={"pci_bus_id": BUS})


def test_an_engine_crash_keeps_the_lock_to_the_runs_end(qtbot, nvml):
    CrashingOnce.crashes, CrashingOnce.locked_at_restart = 0, []
    CrashingOnce.nvml = nvml
    ctl = RunController(engine_factory=CrashingOnce)
    try:
        with qtbot.waitSignal(ctl.finished, timeout=60_000) as done:
            assert ctl.start(_plan(), RunTarget("cpu", (0,)), ClockMode.BASE, [_gpu()])
        assert CrashingOnce.crashes == 1
        assert CrashingOnce.locked_at_restart == [(nvml.NVML_CLOCK_LIMIT_ID_TDP,) * 2]
        recs = done.args[0].records
        assert any(r.status == "error" and "SIGKILL" in r.error for r in recs)
        assert sum(r.status == "ok" for r in recs) == 2      # the rest ran after the restart
        assert nvml.locked is None
    finally:
        ctl.close()


def test_an_exception_while_starting_restores_the_clocks(qtbot, nvml, monkeypatch):
    ctl = RunController(engine_factory=LocalEngine)

    def broken(*a, **kw):
        raise RuntimeError("the pool broke")
    monkeypatch.setattr(ctl.pool, "start_run", broken)
    try:
        with pytest.raises(RuntimeError, match="the pool broke"):
            ctl.start(_plan(), RunTarget("cpu", (0,)), ClockMode.BASE, [_gpu()])
        assert nvml.locked is None and not ctl.running
    finally:
        ctl.close()


def test_closing_the_controller_restores_and_a_ray_target_is_not_locked(qtbot, nvml):
    ctl = RunController(engine_factory=LocalEngine)
    with qtbot.waitSignal(ctl.result, timeout=60_000):
        ctl.start(_plan((64, 96, 128, 160, 192)), RunTarget("cpu", (0,)), ClockMode.BASE, [_gpu()])
    assert nvml.locked is not None
    assert ctl.close()
    assert nvml.locked is None
    other = RunController(engine_factory=LocalEngine)
    said = []
    other.log.connect(lambda level, text: said.append(text))
    try:
        with qtbot.waitSignal(other.finished, timeout=60_000):
            other.start(_plan(), RunTarget("cpu", (0,), "share", "127.0.0.1:1"), ClockMode.MAX,
                        [_gpu()])
        assert nvml.locked is None and any("not used with a Ray cluster" in s for s in said)
    finally:
        other.close()
