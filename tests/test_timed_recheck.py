"""Re-check what was timed (issue 37 §3): kernels that are right only when verified fail,
each with the check that caught it, and good kernels pass every check.

The planted kernels (tests/kernels/planted_*) are honest faults, not hard-coded answers:
one keeps any finite value it finds in C (caught by the second seed, whose launch writes
over the first inputs' answer), one adds A·B to C (caught by the last timed launch's
output: C is poisoned before the warm-up), and on CUDA one computes on its first launch
only, through a counter in device memory (caught by the timed output too).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import main
from engine.kernels import registry
from engine.measure.verify import Reference
from engine.results.records import RecordStatus
from engine.run import runner
from engine.run.runner import Plan
from tests.helpers import require_backend, run_plan

KERNELS = Path(__file__).parent / "kernels"


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """The planted kernels registered by a test stay in that test."""
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))


def _bench(capsys, tmp_path, backend, kernel, *extra, sizes="64,61x45x33"):
    out = tmp_path / "r.json"
    code = main.main(["bench", "--backend", backend, "--kernel", str(kernel), "--variants",
                      f"{kernel.stem},naive", "--params", "block=16", "--sizes", sizes,
                      "--warmup", "1", "--repeats", "3", "--quiet", "--out", str(out), *extra])
    capsys.readouterr()
    data = json.loads(out.read_text())
    recs = data["records"] if isinstance(data, dict) else data
    return code, {(r["variant"], r["m"]): r for r in recs}


@pytest.mark.parametrize("planted, caught_by", [
    ("planted_keeps_answer", "re-check on fresh inputs"),
    ("planted_accumulates", "re-check of the timed launches"),
])
def test_planted_kernels_fail_with_the_check_that_caught_them(tmp_path, capsys, planted, caught_by):
    require_backend("opencl")
    code, recs = _bench(capsys, tmp_path, "opencl", KERNELS / f"{planted}.cl")
    assert code == 1
    for m in (64, 61):
        bad, good = recs[(planted, m)], recs[("naive", m)]
        # the first (verified) launch was right: only the re-check says what is wrong
        assert bad["status"] == "failed" and bad["passed"] is False, bad
        assert bad["error"].startswith(caught_by), bad["error"]
        assert bad["recheck"] == ""
        assert good["status"] == "ok" and good["passed"] is True
        assert good["recheck"] == "last timed launch, second seed (full)"
        # verified launch + 1 warm-up + 3 timed + the second seed's launch
        assert good["launches"] == 6 and good["repeats"] == 3


def test_without_the_recheck_the_planted_kernels_pass(tmp_path, capsys, monkeypatch):
    """The faults hide from the single verified launch: without the re-check (stubbed
    out here) both planted kernels are reported right. This is why the re-check exists."""
    require_backend("opencl")
    monkeypatch.setattr(runner.Sweep, "_recheck", lambda self, rec, *a, **k: None)
    for planted in ("planted_keeps_answer", "planted_accumulates"):
        code, recs = _bench(capsys, tmp_path, "opencl", KERNELS / f"{planted}.cl", "--in-process")
        assert code == 0 and recs[(planted, 64)]["status"] == "ok"


def test_the_second_seed_check_runs_on_fresh_inputs_and_says_which(tmp_path):
    """The second input set differs from the run's, comes from another seed, and its
    check is the sampled one at sizes where the full product would be costly."""
    require_backend("cpu")
    plan = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(48, 40, 32)], warmup=0,
                repeats=2, seed=5)
    made = []
    real = runner.SecondInputs.workspace

    def workspace(self):
        ws = real(self)
        made.append((self.seed, self._pair))
        return ws

    runner.SecondInputs.workspace = workspace
    try:
        recs, _ = run_plan(plan)
    finally:
        runner.SecondInputs.workspace = real
    (rec,) = recs
    assert rec.status == RecordStatus.OK and rec.recheck == "last timed launch, second seed (full)"
    seed, (a2, b2) = made[0]
    assert seed != plan.seed
    from engine.inputs.matrices import generate_pair
    a, b = generate_pair(48, 40, 32, "float32", seed=5)
    assert a2.shape == a.shape and not np.array_equal(a2, a) and not np.array_equal(b2, b)


def test_the_sampled_check_catches_a_wrong_output_and_passes_a_right_one():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 500)).astype(np.float32)
    b = rng.standard_normal((500, 200)).astype(np.float32)
    ref = Reference(a, b, force_method="freivalds")
    right = a @ b
    assert ref.quick_check(right).passed and ref.quick_check(right).method == "sampled"
    for wrong in (right * 2, np.full_like(right, np.nan), np.zeros_like(right)):
        verdict = ref.quick_check(wrong)
        assert not verdict.passed and "sampled entries" in verdict.detail


@pytest.mark.gpu
def test_a_cuda_kernel_that_computes_on_its_first_launch_only_fails(tmp_path, capsys):
    require_backend("cuda")
    # One size: the counter outlives the launch, so at a second size even the verified
    # launch would do nothing (and fail the first check, not the re-check).
    code, recs = _bench(capsys, tmp_path, "cuda", KERNELS / "planted_first_launch_only.cu",
                        sizes="64")
    assert code == 1
    bad = recs[("planted_first_launch_only", 64)]
    assert bad["status"] == "failed" and bad["error"].startswith("re-check of the timed launches"), bad
    assert recs[("naive", 64)]["status"] == "ok"
    assert recs[("naive", 64)]["timing_mode"] in ("held", "events")
