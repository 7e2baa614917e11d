"""GUI compare (issue 37 §4): the threshold control (File ▸ Compare threshold, default as
``compare --threshold``) applies at once; the Log lists how the two runs' conditions
differ — the files' environment blocks and the records' clocks — as the command's header
does (engine.results.compare)."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from dataclasses import replace  # noqa: E402

from engine.results import records  # noqa: E402
from engine.results.compare import DEFAULT_THRESHOLD_PCT  # noqa: E402
from engine.results.environment import DeviceEnvironment, Environment, TimingSettings  # noqa: E402
from tests.test_gui_compare import BASE, cells, rec  # noqa: E402


def env(uuid, driver, lock="", kernel_hash="1111") -> Environment:
    return Environment(app_version="0.37 (abc)", host="lab", time="2025-01-01T00:00:00",
                       devices=(DeviceEnvironment("cuda", 0, "NVIDIA H200", uuid=uuid, driver=driver),),
                       kernels={"cuda/lab/ffma_wide.cu": kernel_hash},
                       timing=TimingSettings("3", "20", "hot", lock))


def log_text(win) -> str:
    return " ".join(win.log.plain_text().split())


def test_the_threshold_control_applies_at_once(make_window, tmp_path):
    base = records.save([rec(v, ms) for v, ms in BASE], tmp_path / "base.json")
    # tiled 8% slower: SLOWER at the default 5%, SAME at 10%
    new = records.save([rec(v, ms * (1.08 if v == "tiled" else 1.0)) for v, ms in BASE],
                       tmp_path / "new.json")
    win = make_window()
    flow = win.compare_flow
    assert flow.threshold.value() == DEFAULT_THRESHOLD_PCT
    assert flow.threshold_action in win.menuBar().actions()[0].menu().actions()
    assert win.results_flow.open(new) and flow.compare_with(base)
    assert cells(win, "Verdict")["tiled"] == "SLOWER"
    flow.threshold.setValue(10.0)
    assert cells(win, "Verdict")["tiled"] == "SAME"
    assert "threshold 10%" in win.statusBar().currentMessage()
    assert all(c.threshold_pct == 10.0 for c in flow.comparisons.values())
    flow.threshold.setValue(2.0)
    assert cells(win, "Verdict")["tiled"] == "SLOWER"


def test_the_environment_differences_are_in_the_log(make_window, tmp_path):
    base = records.save([rec(v, ms) for v, ms in BASE], tmp_path / "base.json",
                        environment=env("GPU-aaaa", "570.1"))
    new = records.save([replace(rec(v, ms), sm_clock_median_mhz=1500.0) for v, ms in BASE],
                       tmp_path / "new.json",
                       environment=env("GPU-bbbb", "575.2", "max: SM clock locked at 1980 MHz",
                                       kernel_hash="2222"))
    win = make_window()
    assert win.results_flow.open(new) and win.compare_flow.compare_with(base)
    text = log_text(win)
    for line in ("GPU UUID differs: BASE GPU-aaaa · new.json GPU-bbbb",
                 "driver differs: BASE 570.1 · new.json 575.2",
                 "clock lock differs: BASE — · new.json max: SM clock locked at 1980 MHz",
                 "kernel file cuda/lab/ffma_wide.cu (SHA-256) differs: BASE 1111 · new.json 2222",
                 "SM clock MHz (median of records) differs: BASE — · new.json 1500"):
        assert f"compare with base.json: {line}" in text, line
    # an older file without a block is said as such
    old = tmp_path / "old.json"
    old.write_text(records_json_list([rec(v, ms) for v, ms in BASE]))
    win.log.clear()
    assert win.compare_flow.compare_with(old)
    assert ("environment block differs: BASE none (an older file) · new.json yes"
            in log_text(win))


def test_the_window_runs_own_block_is_compared(make_window, qtbot, tmp_path):
    """Against a file saved from an earlier run, this run's block (as saving it would
    write) is the shown side: the same settings differ in nothing of the block."""
    from tests.test_gui_environment import run_in_window

    win = make_window()
    run_in_window(win, qtbot, "cpu", "cpu_numpy")
    first = tmp_path / "first.json"
    assert win.save_results(first)
    saved_env = records.load_file(first).environment
    assert saved_env != Environment()
    win.compare_flow.compare_with(first)
    live = win.compare_flow._environments[""]
    assert replace(live, time="") == replace(saved_env, time="")
    win.log.clear()
    changed = replace(saved_env, timing=replace(saved_env.timing, clock_lock="locked at base"))
    win.compare_flow.set_base(first, records.load_file(first).records, changed)
    assert f"clock lock differs: BASE locked at base · this run {saved_env.timing.clock_lock}" in log_text(win)


def records_json_list(recs) -> str:
    import json
    return json.dumps([records.to_dict(r) for r in recs])
