"""Backends: probing, unknown and unavailable backends, and the device-memory check."""
from __future__ import annotations

import numpy as np
import pytest

from engine.inputs import matrices
from engine.kernels import registry
from engine.measure.backends import BACKENDS, BackendError, get_backend, probe_all
from engine.measure.backends.base import FLOAT_POISON_BITS, INT_POISON, keep_timing
from engine.measure.backends.opencl import OpenCLBackend
from engine.run.runner import Plan, expand_items
from tests.helpers import require_backend, run_plan


@pytest.fixture(scope="module")
def status():
    return probe_all()


def test_probe_all_reports_every_backend(status):
    assert list(status) == list(BACKENDS) == ["cuda", "opencl", "cpu"]
    for name, st in status.items():
        assert st.name == name
        assert st.available == bool(st.devices), name
        if not st.available:
            assert st.reason.strip(), f"{name} unavailable without a reason"


def test_opencl_probe_finds_a_pocl_device(status):
    require_backend("opencl")
    st = status["opencl"]
    assert st.available and st.reason == "" and "pyopencl" in st.versions
    pocl = [d for d in st.devices if "Portable Computing Language" in d.name]
    assert pocl, [d.name for d in st.devices]
    d = pocl[0]
    assert d.backend == "opencl" and d.index == st.devices.index(d)
    assert d.compute_units >= 1 and d.memory_bytes > 2**20 and d.clock_mhz > 0
    assert d.l2_bytes is None or d.l2_bytes > 0
    assert d.notes and d.extra["max_work_group_size"] >= 256 and "OpenCL" in d.extra["version"]
    rows = dict(d.rows())
    assert rows["Name"] == d.name and rows["Compute units"] == str(d.compute_units)
    assert rows["Memory"].endswith(("GiB", "MiB"))


def test_cpu_probe(status):
    st = status["cpu"]
    assert st.available and len(st.devices) == 1
    d = st.devices[0]
    assert d.backend == "cpu" and d.compute_units >= 1 and d.memory_bytes > 0 and d.name


def test_cuda_unavailable_here_with_a_clear_reason(status):
    st = status["cuda"]
    if st.available:
        pytest.skip("cuda is available on this machine")
    assert not st.devices
    assert any(w in st.reason.lower() for w in ("pycuda", "cuda", "driver", "device")), st.reason


def test_get_backend():
    with pytest.raises(BackendError, match="unknown backend 'nope'.*cuda, opencl, cpu"):
        get_backend("nope")
    for name in BACKENDS:
        be = get_backend(name)
        assert be.name == name and get_backend(name) is not be   # fresh, unopened


@pytest.mark.parametrize("backend", ["nope", "cuda"])
def test_plan_on_an_unavailable_backend_ends_with_an_error_log(status, backend):
    if backend == "cuda" and status["cuda"].available:
        pytest.skip("cuda is available on this machine")
    plan = Plan(backend=backend, items=[("naive", {"block": 16})], shapes=[(16, 16, 16)])
    recs, events = run_plan(plan)                  # must not raise
    assert recs == []
    assert [e.kind for e in events] == ["log", "finished"]
    assert events[0].level == "error" and events[0].message.startswith(f"{backend}: ")
    assert not events[1].cancelled


def test_missing_opencl_device_index():
    require_backend("opencl")
    recs, events = run_plan(Plan(backend="opencl", items=[("naive", {"block": 16})],
                                 shapes=[(16, 16, 16)], device=99))
    assert recs == [] and "OpenCL device 99 does not exist" in events[0].message


def test_device_memory_check_errors_the_shape_and_the_sweep_goes_on(monkeypatch):
    require_backend("opencl")
    small, big = (16, 16, 16), (64, 48, 32)
    fits = matrices.matmul_bytes(*small, "float32")
    monkeypatch.setattr(OpenCLBackend, "free_memory", lambda self: fits)
    items = [("naive", {"block": 16}), ("tiled_any", {"block": 8})]
    recs, events = run_plan(Plan(backend="opencl", items=items, shapes=[big, small, big],
                                 warmup=0, repeats=1))
    assert len(recs) == 6
    for r in recs[:2] + recs[4:]:
        assert (r.m, r.k) == (64, 32) and r.status == "error" and r.passed is None
        assert "device memory" in r.error and "64×48×32" in r.error, r.error
    for r in recs[2:4]:
        assert (r.m, r.n, r.k) == small and r.status == "ok" and r.passed is True, r.error
    errors = [e.message for e in events if e.kind == "log" and e.level == "error"]
    assert len(errors) == 2 and all("device memory" in m for m in errors)
    finished = events[-1]
    assert finished.kind == "finished" and finished.done == finished.total == 6


def test_device_memory_check_counts_inputs_and_the_largest_output(monkeypatch):
    """aat-only sets upload no B; the need is A + the largest C."""
    require_backend("opencl")
    m, n, k = 40, 8, 24
    need_aat = (m * k + m * m) * 4
    monkeypatch.setattr(OpenCLBackend, "free_memory", lambda self: need_aat)
    recs, _ = run_plan(Plan(backend="opencl", items=[("aat_simple", {"tile": 16})],
                            shapes=[(m, n, k)], warmup=0, repeats=1))
    assert recs[0].passed is True, recs[0].error
    monkeypatch.setattr(OpenCLBackend, "free_memory", lambda self: need_aat - 1)
    recs, _ = run_plan(Plan(backend="opencl", items=[("aat_simple", {"tile": 16})],
                            shapes=[(m, n, k)], warmup=0, repeats=1))
    assert recs[0].status == "error" and "device memory" in recs[0].error


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_opencl_poison_fills_the_output(dtype):
    require_backend("opencl")
    be = OpenCLBackend()
    be.open(0)
    try:
        a, b = matrices.generate_pair(5, 7, 3, dtype, seed=1)
        ws = be.prepare(a, b)
        be.ensure_output(ws, (5, 7))
        be.poison_output(ws)
        out = np.empty((5, 7), dtype=a.dtype)
        be.cl.enqueue_copy(be.queue, out, ws.c)
        be.queue.finish()
        if dtype == "int32":
            assert (out == INT_POISON).all()
        else:
            assert (out.view(np.uint32) == FLOAT_POISON_BITS).all() and np.isnan(out).all()
        k = be.compile(registry.get("naive"), {"block": 8}, dtype)
        assert be.compile(registry.get("naive"), {"block": 8}, dtype) is k    # cached
        assert "local memory" in k.report and k.max_threads >= 64
        c = be.run_once(k, ws, 5, 7, 3)
        assert np.array_equal(c, a @ b) if dtype == "int32" else np.allclose(c, a @ b, rtol=1e-5, atol=1e-6)
        be.release(ws)
        assert ws.a is None and ws.c is None
    finally:
        be.close()


def test_compile_error_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch):
    require_backend("opencl")
    import dataclasses
    bad = tmp_path / "broken.cl"
    bad.write_text("__kernel void matmul(__global const ELEM* A) { this is not C; }\n")
    v = dataclasses.replace(registry.get("naive"), name="broken", sources={"opencl": str(bad)})
    monkeypatch.setitem(registry.REGISTRY, "broken", v)
    recs, events = run_plan(Plan(backend="opencl", items=[("broken", {"block": 8}),
                                                          ("naive", {"block": 8})],
                                 shapes=[(9, 10, 11)], warmup=0, repeats=1))
    assert recs[0].status == "error" and "OpenCL build of broken.cl failed" in recs[0].error
    assert recs[0].passed is None
    assert recs[1].status == "ok" and recs[1].passed is True


def test_opencl_cold_mode(tmp_path):
    require_backend("opencl")
    recs, _ = run_plan(Plan(backend="opencl", items=[("tiled_any", {"block": 16})],
                            shapes=[(40, 50, 60)], cold=True, warmup=1, repeats=3))
    assert recs[0].mode == "cold" and recs[0].passed and recs[0].repeats == 3


def test_keep_timing():
    assert [keep_timing(c, 3, None, 99.0) for c in range(5)] == [True] * 3 + [False] * 2
    assert keep_timing(0, 0, None, 0.0) and not keep_timing(1, 0, None, 0.0)   # at least one
    assert [keep_timing(c, 1, 0.5, 9.0) for c in range(4)] == [True, True, True, False]
    assert keep_timing(10, 1, 0.5, 0.4) and not keep_timing(10, 1, 0.5, 0.5)
    assert not keep_timing(100_000, 1, 1e9, 0.0)                    # a hard cap
