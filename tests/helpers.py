"""Shared test helpers: which backends this machine can run, and small sweeps."""
from __future__ import annotations

import contextlib
import functools
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.measure.backends import probe_all
from engine.run.runner import Plan, Sweep


@functools.lru_cache(maxsize=None)
def backend_status(name: str):
    return probe_all()[name]


def require_backend(name: str):
    """Skip the test (with the backend's own reason) when ``name`` is unavailable."""
    st = backend_status(name)
    if not st.available:
        pytest.skip(f"{name} backend unavailable: {st.reason}")
    return st


def run_plan(plan: Plan, sweep: Sweep | None = None):
    """Run ``plan`` on this thread; returns (records, events)."""
    events = []
    own = sweep is None
    sweep = sweep or Sweep()
    try:
        recs = sweep.run(plan, events.append)
    finally:
        if own:
            sweep.close()
    return recs, events


@contextlib.contextmanager
def cuda_kernel_on_inputs(variant, params, shape, seed: int, dtype: str = "float32"):
    """The cuda backend opened on device 0, ``variant`` built with ``params``, fresh inputs
    of ``shape`` (M, N, K) from ``seed`` uploaded and C allocated: yields (backend, kernel,
    workspace, A, B); the workspace is released and the backend closed afterwards."""
    from engine.inputs import matrices  # noqa: PLC0415
    from engine.measure.backends.cuda import CudaBackend  # noqa: PLC0415
    m, n, k = shape
    be = CudaBackend()
    be.open(0)
    ws = None
    try:
        kern = be.compile(variant, params, dtype)
        a, b = matrices.generate_pair(m, n, k, dtype, seed=seed)
        ws = be.prepare(a, b)
        be.ensure_output(ws, (m, n))
        yield be, kern, ws, a, b
    finally:
        if ws is not None:
            be.release(ws)
        be.close()


def assert_relaunches_bitwise(be, kern, ws, shape, first, tiles: int, rounds: int = 3) -> None:
    """A kernel whose tiles are summed from parts (split-K, stream-K, clusters), after a
    verified first run whose C is ``first``: ``rounds`` times, timed launches (no zeroing
    between) leave the ``tiles`` arrival counters at the workspace's start at zero (0: none
    to check), and one more launch into a poisoned C gives C bitwise again."""
    import numpy as np  # noqa: PLC0415
    m, n, k = shape
    for _ in range(rounds):
        be.time_launches(kern, ws, m, n, k, 1, 7, False, None)
        if tiles:
            counters = np.empty(tiles, np.uint32)
            be.drv.memcpy_dtoh(counters, ws.kernel_workspace)
            assert not counters.any()
        be.poison_output(ws)
        be._launch(kern, ws, m, n, k)               # as a timed launch: no zeroing
        be._check("launch")
        again = np.empty((m, n), first.dtype)
        be.drv.memcpy_dtoh(again, ws.c)
        assert again.tobytes() == first.tobytes()


#: A kernel file with the fewest header fields (a parameter, a launch) and ``{extra}`` lines
#: where a test puts the fields it checks (dtypes, precision, layouts).
MINIMAL_KERNEL = """/*
+++
name = "{name}"
title = "t"
source = "s"
{extra}
[params]
bs = [16]
[launch]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
block = [32, 1]
+++
*/
extern "C" __global__ void matmul(const ELEM* A, const ELEM* B, OUT* C, int M, int N, int K) {{}}
"""


def minimal_kernel_header(tmp_path, extra: str, name: str = "h", suffix: str = ".cu"):
    """The parsed header of MINIMAL_KERNEL with ``extra`` fields, written as ``name + suffix``
    (``.cl``: an OpenCL file, ``.py``: the parser's Triton rules)."""
    from engine.kernels.kernel_file import parse_header
    p = tmp_path / f"{name}{suffix}"
    p.write_text(MINIMAL_KERNEL.format(name=name, extra=extra))
    return parse_header(p)


def ptxas_reports(variant, builds, arch: str) -> list[dict]:
    """parse_ptxas's figures of each of ``builds`` ((params, dtype, C's type, B's layout)) of
    ``variant``'s CUDA file for ``arch``, one nvcc a core (nvcc itself runs on one: on the
    2-core CI machine two at a time take half the time of one after another)."""
    from engine.measure.backends.cuda import nvcc_cubin, nvcc_options
    from engine.measure.kernel_check import parse_ptxas

    src = variant.source_path("cuda")

    def report(build):
        params, dtype, out, layout = build
        _cubin, log = nvcc_cubin(src, nvcc_options(variant, params, dtype, out, layout), arch)
        return parse_ptxas(log)

    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        return list(pool.map(report, builds))
