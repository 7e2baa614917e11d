"""A kernel's workspace argument (``launch.workspace``), without a GPU.

What the header promises a CUDA kernel: the size it asks for at each shape, as one more
argument after K (a null pointer where it asks for 0 bytes); zero when allocated, when
another compiled kernel used it last, and before every verified run; kept between the
timed launches of one kernel (whose counters must come back to zero by themselves); grown
and freed with the inputs. The header side: only CUDA files may ask; a size that cannot be
computed, or is negative, makes that combination a skip with the reason. A recording
driver stands in for pycuda (ffma_regdb's parallel split-K is the built-in user).
"""
from __future__ import annotations

import numpy as np
import pytest

from engine.kernels import registry
from engine.measure.backends.base import CompiledKernel, Workspace
from engine.kernels.kernel_file import KernelFileError, parse_header
from tests.recording_driver import Entry, recording_backend

RD = registry.get("ffma_regdb")


@pytest.fixture
def backend():
    return recording_backend()


def kernel_of(params, log):
    return CompiledKernel(RD, dict(RD.default_params(), **params), "float32",
                          (None, Entry("matmul", log)), "")


def workspace(be, m, n, k):
    ws = Workspace(np.ones((m, k), np.float32), np.ones((k, n), np.float32))
    ws.a, ws.b, ws.c = (be.drv.mem_alloc(4 * x) for x in (m * k, k * n, m * n))
    ws.c_shape = (m, n)
    be.drv.allocs.clear()
    return ws


def expected_bytes(m, n, bm, splitk):
    tiles = -(-m // bm) * -(-n // 128)
    return 0 if splitk == 1 else -(-4 * tiles // 256) * 256 + splitk * tiles * bm * 128 * 4


@pytest.mark.parametrize("shape", [(64, 4096, 4096), (1000, 1000, 1000), (127, 253, 61), (1, 1, 1)])
@pytest.mark.parametrize("splitk", [2, 3, 8])
def test_the_kernel_gets_the_workspace_its_header_asks_for(backend, shape, splitk):
    m, n, k = shape
    log: list = []
    kern = kernel_of({"tile": 64128, "splitk": splitk}, log)
    ws = workspace(backend, m, n, k)
    backend._launch(kern, ws, m, n, k)
    _name, grid, block, args = log[0]
    assert args[:3] == (ws.a, ws.b, ws.c) and [int(x) for x in args[3:6]] == [m, n, k]
    assert len(args) == 7 and args[6] is ws.kernel_workspace
    assert ws.kernel_workspace.nbytes == expected_bytes(m, n, 64, splitk)
    assert RD.workspace_bytes(kern.params, m, n, k) == expected_bytes(m, n, 64, splitk)
    assert grid == (-(-n // 128), -(-m // 64) * splitk, 1)
    # zeroed once, when allocated, all of it
    assert backend.drv.memsets == [(int(ws.kernel_workspace), 0, ws.kernel_workspace.nbytes)]


def test_no_split_passes_a_null_pointer_and_allocates_nothing(backend):
    log: list = []
    kern = kernel_of({"bm": 128, "splitk": 1}, log)
    ws = workspace(backend, 300, 200, 100)
    backend._launch(kern, ws, 300, 200, 100)
    args = log[0][3]
    assert len(args) == 7 and int(args[6]) == 0
    assert backend.drv.allocs == [] and backend.drv.memsets == [] and ws.kernel_workspace is None


def test_zeroed_for_a_new_owner_and_before_verified_runs_only(backend):
    m, n, k = 64, 4096, 4096
    log: list = []
    k8, k4 = kernel_of({"tile": 64128, "splitk": 8}, log), kernel_of({"tile": 64128, "splitk": 4}, log)
    ws = workspace(backend, m, n, k)
    memsets = backend.drv.memsets
    for _ in range(5):                       # timed launches of one build: no memset between
        backend._launch(k8, ws, m, n, k)
    assert len(memsets) == 1 and len(backend.drv.allocs) == 1
    buf = ws.kernel_workspace
    backend._launch(k4, ws, m, n, k)         # smaller: the same buffer, zeroed for its new owner
    assert ws.kernel_workspace is buf and len(memsets) == 2 and backend.drv.allocs == [buf]
    backend._launch(k4, ws, m, n, k)
    assert len(memsets) == 2
    backend._launch(k4, ws, m, n, k, zero_workspace=True)     # what run_once asks for
    assert len(memsets) == 3 and memsets[-1] == (int(buf), 0, buf.nbytes)
    backend._launch(k8, ws, m, n, k)         # back to the first build: zeroed again
    assert len(memsets) == 4


def test_grows_frees_the_old_buffer_and_release_frees_it(backend):
    log: list = []
    kern = kernel_of({"tile": 64128, "splitk": 8}, log)
    ws = workspace(backend, 1000, 1000, 1000)
    backend._launch(kern, ws, 64, 256, 100)
    small = ws.kernel_workspace
    backend._launch(kern, ws, 1000, 1000, 1000)
    big = ws.kernel_workspace
    assert small.freed and not big.freed and big.nbytes == expected_bytes(1000, 1000, 64, 8)
    assert backend.drv.memsets[-1] == (int(big), 0, big.nbytes)
    backend.release(ws)
    assert big.freed and ws.kernel_workspace is None and ws.kernel_workspace_bytes == 0


def test_regdb_bounds_its_workspace_with_a_reason():
    """Split-K of every tile is for grids short of a wave; past a wave only the last partial
    wave's tiles are split (hybrid), so the partial tiles stay within a wave's worth."""
    c = dict(RD.default_params(), tile=64128, splitk=8)
    assert RD.check("cuda", c, 64, 4096, 4096, "float32") is None
    why = RD.check("cuda", c, 8192, 8192, 8192, "float32")
    assert why and "chosen by the shape" in why and "8192 tiles" in why
    c["hybrid"] = 1
    assert RD.check("cuda", c, 8192, 8192, 8192, "float32") is None
    rem = 8192 % 396                                  # 132 SMs, 3 CTAs each
    assert RD.workspace_bytes(c, 8192, 8192, 8192) == 1280 + 8 * rem * 64 * 128 * 4
    assert RD.workspace_bytes(c, 8192, 8192, 8192) < 2**28
    assert "no tile of a partial wave" in RD.check("cuda", c, 768, 8448, 1000, "float32")


HEADER = '''/*
+++
name = "ws_kernel"
title = "t"
source = "tests"

[params]
s = [2, 1]

[launch]
grid = ["cdiv(N, 16)", "cdiv(M, 16) * s"]
block = [16, 16]
workspace = "{ws}"
+++
*/
'''


def test_header_workspace_parses_and_evaluates(tmp_path):
    p = tmp_path / "k.cu"
    p.write_text(HEADER.format(ws="0 if s == 1 else s * M * N * 4"))
    h = parse_header(p)
    assert h.workspace_bytes({"s": 2}, 10, 20, 30) == 1600
    assert h.workspace_bytes({"s": 1}, 10, 20, 30) == 0
    v = registry.variant_from_headers([h])
    assert v.workspace_bytes({"s": 2}, 3, 5, 7) == 120


def test_header_workspace_problems(tmp_path):
    cl = tmp_path / "k.cl"
    cl.write_text(HEADER.format(ws="64"))
    with pytest.raises(KernelFileError, match="CUDA C kernels only"):
        parse_header(cl)
    bad = tmp_path / "bad.cu"
    bad.write_text(HEADER.format(ws="s * Q"))
    with pytest.raises(KernelFileError, match="unknown name 'Q'"):
        parse_header(bad)
    neg = tmp_path / "neg.cu"
    neg.write_text(HEADER.format(ws="M - 100"))
    h = parse_header(neg)
    assert "must be ≥ 0" in h.constraint({"s": 2}, 10, 20, 30, "float32")
    assert h.constraint({"s": 2}, 200, 20, 30, "float32") is None
