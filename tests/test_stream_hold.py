"""Timed launches held back to back (engine/measure/backends/stream_hold.py).

Without a GPU: the cuda backend's timing loop, on a recording driver, queues every batch
behind the hold and releases it before waiting; a hold that cannot be made, or that timed
out, is said in the record's timing note. On a GPU (marked ``gpu``): the hold keeps the
stream from running until released, gives up after its timeout and says so, and a host
that takes 2 ms to issue each launch no longer shows in the timed kernel.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from engine.kernels import registry
from engine.measure.backends.base import CompiledKernel, Workspace
from engine.measure.backends.stream_hold import HOLD_PTX
from tests.helpers import require_backend
from tests.recording_driver import Entry, recording_backend


class _Event:
    def __init__(self, log):
        self.log = log

    def record(self):
        self.log.append(("record",))

    def synchronize(self):
        self.log.append(("sync",))

    def time_till(self, other):
        return 1.0


class _Hold:
    def __init__(self, log, time_out=False):
        self.log, self.time_out, self.timeouts = log, time_out, 0

    def hold(self, stream=None):
        self.log.append(("hold",))

    def release(self):
        self.log.append(("release",))

    def timed_out(self):
        if self.time_out:
            self.timeouts += 1
        return self.time_out


def _backend(log, hold):
    be = recording_backend()
    be.drv.Event = lambda: _Event(log)
    be._hold = hold
    be.hold_note = ""
    be._check = lambda what: None
    v = registry.REGISTRY["tiled"]
    kern = CompiledKernel(v, {"block": 16}, "float32", (None, Entry("matmul", log)), "")
    ws = Workspace(np.ones((64, 64), np.float32), np.ones((64, 64), np.float32))
    ws.a, ws.b, ws.c = (be.drv.mem_alloc(64 * 64 * 4) for _ in range(3))
    ws.c_shape = (64, 64)
    return be, kern, ws


def _batches(log):
    """The log after the warm-up, cut at each hold."""
    first = next(i for i, x in enumerate(log) if x[0] == "hold")
    out, cur = [], None
    for x in log[first:]:
        if x[0] == "hold":
            cur = []
            out.append(cur)
        cur.append(x[0])
    return out


@pytest.mark.parametrize("repeats, budget", [(20, None), (70, None), (5, 0.0)])
def test_every_batch_is_queued_behind_the_hold_and_released_before_the_wait(repeats, budget):
    log = []
    be, kern, ws = _backend(log, _Hold(log))
    times = be.time_launches(kern, ws, 64, 64, 64, 2, repeats, False, budget)
    batches = _batches(log)
    assert [x[0] for x in log[:3]] == ["matmul", "matmul", "hold"]     # the warm-up is not held
    launches = 0
    for b in batches:
        n = b.count("matmul")
        assert b == ["hold"] + ["record", "matmul", "record"] * n + ["release", "sync"]
        assert 1 <= n <= (8 if budget is not None else 32)
        launches += n
    assert launches == len(times) >= (repeats if budget is None else 3)
    assert be.timing_note() == ""


def test_a_hold_that_timed_out_is_noted_and_a_missing_hold_too():
    log = []
    be, kern, ws = _backend(log, _Hold(log, time_out=True))
    be.time_launches(kern, ws, 64, 64, 64, 0, 10, False, None)
    assert "timed out in 1 batch" in be.timing_note()
    be._hold = False
    be.hold_note = "timed launches are not held back to back: no mapped memory"
    log.clear()
    times = be.time_launches(kern, ws, 64, 64, 64, 0, 10, False, None)
    assert len(times) == 10 and not any(x[0] in ("hold", "release") for x in log)
    assert be.timing_note() == be.hold_note


def test_the_hold_kernel_is_ptx_with_a_timeout_and_a_report():
    assert ".entry lab_hold_stream" in HOLD_PTX
    assert "%globaltimer" in HOLD_PTX and "ld.volatile.global.u32" in HOLD_PTX
    assert "st.volatile.global.u32 [flag+4], 1" in HOLD_PTX


# -- on a GPU --------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.serial  # bounds a wait in milliseconds
def test_the_hold_holds_until_released_and_times_out_otherwise():
    require_backend("cuda")
    from engine.measure.backends.cuda import CudaBackend
    from engine.measure.backends.stream_hold import StreamHold

    be = CudaBackend()
    be.open(0)
    try:
        drv = be.drv
        hold = StreamHold(drv)
        hold.hold()
        after = drv.Event()
        after.record()
        time.sleep(0.05)
        assert not after.query()                # the stream waits behind the hold
        hold.release()
        after.synchronize()
        assert not hold.timed_out()
        hold.close()

        quick = StreamHold(drv, timeout_ns=20_000_000)
        t0 = time.perf_counter()
        quick.hold()
        drv.Context.synchronize()               # never released: gives up after 20 ms
        assert time.perf_counter() - t0 >= 0.015
        assert quick.timed_out() and quick.timeouts == 1
        quick.close()
    finally:
        be.close()


@pytest.mark.gpu
@pytest.mark.serial  # compares kernel times with 1 ms
def test_a_slow_host_no_longer_shows_in_the_timed_kernel():
    """Each launch issued 2 ms after its start event: held, the kernel's own time (far
    under 2 ms); without the hold, the 2 ms as well."""
    require_backend("cuda")
    from engine.inputs import matrices
    from engine.measure.backends.cuda import CudaBackend

    n = 256
    be = CudaBackend()
    be.open(0)
    try:
        v = registry.REGISTRY["tiled"]
        kern = be.compile(v, {"block": 16}, "float32")
        a, b = matrices.generate_pair(n, n, n, "float32", seed=5)
        ws = be.prepare(a, b)
        be.ensure_output(ws, (n, n))
        launch = be._launch

        def slow_launch(*args, **kw):
            time.sleep(0.002)
            return launch(*args, **kw)

        be._launch = slow_launch
        held = float(np.median(be.time_launches(kern, ws, n, n, n, 1, 16, False, None)))
        assert be.timing_note() == ""
        hold, be._hold = be._hold, False
        unheld = float(np.median(be.time_launches(kern, ws, n, n, n, 1, 16, False, None)))
        be._hold = hold
        be._launch = launch
        be.release(ws)
    finally:
        be.close()
    assert held < 1.0 <= unheld, (held, unheld)
