"""engine.common.cpus: an engine process's CPU thread budget (the window keeps its cores)."""
import os
import subprocess
import sys
import textwrap

import pytest

from engine.common import cpus
from engine.run.engines import LocalEngine

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("total,engines,reserve,want", [
    (16, 1, 2, 14), (16, 2, 2, 7), (16, 3, 2, 4), (16, 2, 0, 8),
    (2, 1, 2, 1), (1, 4, 2, 1), (64, 8, 2, 7),
])
def test_engine_threads_share_what_the_window_leaves(total, engines, reserve, want):
    assert cpus.engine_threads(engines, reserve, cpus=total) == want


def test_engine_threads_refuses_nonsense():
    with pytest.raises(ValueError):
        cpus.engine_threads(0, 2, cpus=8)
    with pytest.raises(ValueError):
        cpus.engine_threads(1, -1, cpus=8)


def test_usable_cpus_is_within_the_machine():
    n = cpus.usable_cpus()
    assert 1 <= n <= (os.cpu_count() or 1)


@pytest.mark.parametrize("files,want", [
    ({"cpu.max": "max 100000\n"}, None),
    ({"cpu.max": "250000 100000\n"}, 2.5),
    ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
    ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3.0),
    ({"cpu.max": "garbage\n"}, None),
    ({}, None),
])
def test_cgroup_quota_v1_and_v2(tmp_path, files, want):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cpus._cgroup_quota(tmp_path) == want


def _in_fresh_python(code: str, env=None) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_a_budget_bounds_numpys_blas_pool_and_the_environment():
    pytest.importorskip("threadpoolctl")
    out = _in_fresh_python("""
        import os
        os.environ.pop("OMP_NUM_THREADS", None); os.environ.pop("POCL_CPU_MAX_CU_COUNT", None)
        import numpy as np
        from threadpoolctl import threadpool_info
        from engine.common import cpus
        said = cpus.set_thread_budget(1)
        pools = threadpool_info()
        assert pools, "numpy loaded no BLAS pool"
        assert all(p["num_threads"] == 1 for p in pools), pools
        assert os.environ["POCL_CPU_MAX_CU_COUNT"] == "1" and os.environ["OMP_NUM_THREADS"] == "1"
        assert os.environ["MKL_NUM_THREADS"] == "7"          # the user's own value stays
        assert cpus.thread_budget() == 1 and cpus.build_workers(10) == 1
        cpus.set_thread_budget(2)                            # a later budget replaces it
        assert all(p["num_threads"] == 2 for p in threadpool_info())
        assert os.environ["POCL_CPU_MAX_CU_COUNT"] == "2"
        print("SAID", "; ".join(said))
    """, env={"MKL_NUM_THREADS": "7"})
    assert "POCL_CPU_MAX_CU_COUNT" in out and "MKL_NUM_THREADS" not in out


def test_without_a_budget_builds_leave_one_core():
    out = _in_fresh_python("""
        from engine.common import cpus
        print(cpus.build_workers(1000), cpus.usable_cpus(), cpus.thread_budget())
    """)
    workers, usable, budget = map(int, out.split())
    assert workers == max(1, usable - 1) and budget == usable


def test_an_engine_process_runs_within_its_budget():
    from engine.run.process import ProcessEngine
    eng = ProcessEngine("cpu", 0, cpu_threads=1)
    try:
        info = eng.open()
        assert info.compute_units == 1       # the cpu backend's threads: the budget
    finally:
        eng.close()


def test_a_changed_budget_is_sent_before_the_next_run(monkeypatch):
    from engine.run.process import ProcessEngine
    from engine.run.engines import RemoteEngine
    from engine.run.messages import SetThreads
    eng = ProcessEngine("cpu", 0, cpu_threads=3)
    sent = []
    monkeypatch.setattr(eng, "alive", lambda: True)
    monkeypatch.setattr(eng, "_send", sent.append)
    monkeypatch.setattr(RemoteEngine, "run", lambda self, plan, emit, cancel: [])
    eng._threads_sent = 3
    eng.run(None, None, None)
    assert sent == []                       # unchanged: nothing to say
    eng.cpu_threads = 5
    eng.run(None, None, None)
    eng.run(None, None, None)
    assert sent == [SetThreads(5)]


def test_the_window_shares_the_cores_among_its_engines(qapp):
    from gui.run_controller import RunController, RunTarget
    ctl = RunController(engine_factory=LocalEngine)
    try:
        one = ctl.engines_for(RunTarget("cpu", (0,)))
        assert one[0].cpu_threads == cpus.engine_threads(1, cpus.WINDOW_CPUS)
        two = ctl.engines_for(RunTarget("cpu", (0, 0), "compare"))
        assert [e.cpu_threads for e in two] == [cpus.engine_threads(2, cpus.WINDOW_CPUS)] * 2
    finally:
        ctl.close()
