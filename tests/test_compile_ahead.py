"""A share run over several GPUs builds its kernels ahead (engine.run.dispatch.compile_ahead):
while the first tasks are timed, a thread of the dispatching process builds every lab
kernel of the plan into the disk cache, so the engines (other processes) find them there
instead of running nvcc when their later tasks start. Checked without a GPU: after the
head start, a fresh backend of the engines' kind builds the whole plan with no nvcc run."""
from __future__ import annotations

import shutil

import pytest

from engine.measure.backends import cuda as cuda_backend
from engine.measure.backends.base import DeviceInfo
from engine.run.dispatch import compile_ahead
from engine.run.runner import Plan, build_jobs

H200 = [DeviceInfo("cuda", i, "NVIDIA H200", compute_units=132, compute_capability="9.0")
        for i in (0, 1)]
PLAN = Plan(backend="cuda", items=[("tiled_any", {"block": 16}), ("naive", {"block": 16}),
                                   ("lab_fp32", {}), ("cublas_fp32", {})],
            shapes=[(127, 61, 253), (64, 64, 64)])


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_the_engines_find_every_kernel_built_ahead(tmp_path, monkeypatch, request):
    monkeypatch.setenv("MATMUL_LAB_CACHE", str(tmp_path))
    thread = compile_ahead(PLAN, H200)
    assert thread is not None
    thread.join(timeout=600)
    assert not thread.is_alive()
    runs = request.getfixturevalue("nvcc_runs")      # counted from here on
    engine = cuda_backend.CudaBackend()          # as an engine process would open it
    engine.arch, engine.type_spec = "sm_90", PLAN.type_spec
    jobs = build_jobs(PLAN, H200[0], PLAN.shapes)
    names = {v.name for v, _p, _d in jobs}
    assert {"tiled_any", "naive", "ffma_small"} <= names      # lab_fp32 as its pick, resolved
    for v, params, dtype in jobs:
        if not v.library:
            engine._build(v, params, dtype)
    assert runs == []


def test_nothing_is_built_ahead_where_it_cannot_help(monkeypatch, tmp_path):
    monkeypatch.setenv("MATMUL_LAB_CACHE", "off")              # the engines could not see it
    assert compile_ahead(PLAN, H200) is None
    monkeypatch.setenv("MATMUL_LAB_CACHE", str(tmp_path))
    cpu = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(8, 8, 8)])
    assert compile_ahead(cpu, H200) is None                     # no nvcc on the cpu backend
    assert compile_ahead(PLAN, [DeviceInfo("cuda", 0, "?")]) is None   # no architecture known
    only_library = Plan(backend="cuda", items=[("cublas_fp32", {})], shapes=[(8, 8, 8)])
    thread = compile_ahead(only_library, H200)
    if thread is not None:
        thread.join(timeout=60)
    assert not list(tmp_path.glob("cubins/*.cubin-entry"))     # nothing of its own to build
