"""Runs are sized before anything is allocated: host and device memory, with the numbers
and the largest size that fits in the refusal."""
from __future__ import annotations

import re
import time

import pytest

from engine.common import host_memory
from engine.inputs import memory
from engine.inputs.matrices import MatrixInputError
from engine.run.runner import Plan, Sweep


@pytest.mark.parametrize("verify", [True, False])
@pytest.mark.parametrize("budget", [10_000, 3 * 2**20, 5 * 2**30])
def test_largest_square_is_the_boundary(verify, budget):
    need = lambda m, n, k: memory.host_bytes(m, n, k, 4, verify)  # noqa: E731
    n = memory.largest_square(need, budget)
    assert need(n, n, n) <= budget < need(n + 1, n + 1, n + 1)


def test_refusal_names_the_numbers_and_a_size_that_fits():
    avail = 2**30
    with pytest.raises(MatrixInputError) as err:
        memory.check_host_fit((20000, 20000, 20000), 4, True, available=avail)
    text = str(err.value)
    assert "20000×20000×20000 needs" in text and "1.00 GiB available" in text
    fits = int(re.search(r"largest square size that fits is (\d+)", text).group(1))
    memory.check_host_fit((fits, fits, fits), 4, True, available=avail)      # it does fit
    with pytest.raises(MatrixInputError, match="for each of 2 engines"):
        memory.check_host_fit((fits, fits, fits), 4, True, copies=2, available=avail)
    memory.check_host_fit((fits, fits, fits), 4, False, available=avail)


def test_c_is_sized_in_its_own_type():
    """16-bit inputs with an FP32 C: C counts 4 bytes an element, not 2 (the check once
    sized C at the input type and let through runs whose C did not fit)."""
    m, n, k = 3000, 5000, 16
    assert memory.host_bytes(m, n, k, 2, False, 4) - memory.host_bytes(m, n, k, 2, False) == m * n * 2
    assert memory.host_bytes(m, n, k, 2, False, 2) == memory.host_bytes(m, n, k, 2, False)
    avail = int(memory.host_bytes(m, n, k, 2, False, 2) / memory.HOST_SHARE) + 1
    memory.check_host_fit((m, n, k), 2, False, available=avail, out_itemsize=2)
    with pytest.raises(MatrixInputError, match="largest square size that fits"):
        memory.check_host_fit((m, n, k), 2, False, available=avail, out_itemsize=4)


def test_available_memory_is_positive_and_bounded():
    import psutil
    avail = host_memory.host_available_bytes()
    assert 0 < avail <= psutil.virtual_memory().total


def test_a_size_beyond_memory_is_refused_at_once_by_the_sweep():
    """200000³ on the cpu backend: refused in milliseconds with a record per item, and
    the sweep goes on to the next size."""
    events = []
    s = Sweep()
    try:
        t0 = time.perf_counter()
        recs = s.run(Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(200000,) * 3, (33, 17, 9)],
                          warmup=0, repeats=1), events.append)
        assert time.perf_counter() - t0 < 5
    finally:
        s.close()
    assert [r.status for r in recs] == ["error", "ok"]
    assert "largest square size that fits" in recs[0].error
    assert recs[1].passed


def test_opencl_buffer_limit_is_checked_before_allocating(monkeypatch):
    """A matrix larger than the OpenCL device allocates in one buffer is refused at once."""
    from tests.helpers import require_backend
    require_backend("opencl")
    from engine.measure.backends.opencl import OpenCLBackend
    monkeypatch.setattr(OpenCLBackend, "max_buffer_bytes", lambda self: 64 * 64 * 4)
    s = Sweep()
    try:
        recs = s.run(Plan(backend="opencl", items=[("naive", {"block": 16})],
                          shapes=[(65, 64, 64), (64, 64, 64)], warmup=0, repeats=1), lambda e: None)
    finally:
        s.close()
    assert recs[0].status == "error" and "in one buffer" in recs[0].error
    assert "largest square size that fits is 64" in recs[0].error
    assert recs[1].passed
