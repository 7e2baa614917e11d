"""Stream-K in ladder steps 32 (half_wgmma) and 34 (half_wgmma_pingpong), streamk = 1: the last
partial wave's tiles shared along K by every CTA of the persistent grid, each tile summed in
k order by the CTA that finishes its last piece (step 34: by the consumer warpgroup that
does, its pieces in ranges of at least 8 k-tiles).

On the CPU: half.cuh's TileWalk, compiled by nvcc as host code, over many grids, tile and
k-tile counts (every k-tile of every tile computed once, a shared tile's pieces from a run of
consecutive CTAs in k order, distinct partial slots under 2 G); the header's rules. On a GPU
(``gpu``): verified where every tile is shared, where whole tiles and shared ones mix, at odd
shapes, and bitwise the same launch after launch with the counters back at zero."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from engine.common.dtypes import TypeSpec
from engine.kernels import registry
from engine.kernels.registry import ROOT
from tests.helpers import assert_relaunches_bitwise, require_backend

HW = registry.get("half_wgmma")
SK = dict(HW.default_params(), persist=1, streamk=1)
PP = registry.get("half_wgmma_pingpong")
PP_SK = dict(PP.default_params(), stages=4, streamk=1)
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@needs_nvcc
def test_the_walk_computes_every_k_tile_once_and_sums_in_k_order(tmp_path):
    exe = tmp_path / "tile_walk"
    build = subprocess.run(["nvcc", "-std=c++17", f"-I{ROOT / 'cuda'}", "-o", str(exe),
                            str(ROOT / "tests" / "cuda_host" / "tile_walk.cu")],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.startswith("ok "), run.stdout[-2000:]
    assert int(run.stdout.split()[1]) > 5000


def test_the_header_grid_and_workspace():
    # stream-K needs the persistent grid; it takes every SM slot, even with fewer tiles
    assert "persist = 1" in HW.check("cuda", dict(SK, persist=0), 4096, 4096, 4096, "bfloat16")
    for (m, n, k), sms in [((1536, 1536, 1536), 132), ((3000, 3000, 3000), 132), ((127, 61, 253), 114)]:
        tiles = -(-m // 128) * -(-n // 256)
        (gx, _), (bx, _) = HW.geometry(SK, m, n, k, sms)
        assert gx == sms and bx == 384
        assert HW.geometry(dict(SK, streamk=0), m, n, k, sms)[0][0] == min(tiles, sms)
        # the counters (256-byte aligned), then 2 · grid partial tiles of 128 × 256 floats
        assert HW.workspace_bytes(SK, m, n, k, sms) == -(-4 * tiles // 256) * 256 + 2 * sms * 128 * 256 * 4
        assert HW.workspace_bytes(dict(SK, streamk=0), m, n, k, sms) == 0
    small = dict(SK, bm=64, bn=128)                      # two CTAs an SM: twice the grid
    assert HW.geometry(small, 1024, 1024, 1024, 132)[0][0] == 264


def test_the_ping_pong_steps_stream_k_header():
    # every SM, even with fewer tiles; 128 × bn partial tiles; no clusters with stream-K
    for bn in (128, 64):
        p = dict(PP_SK, bn=bn)
        for (m, n, k), sms in [((1536, 1536, 1536), 132), ((1000, 1000, 1000), 132), ((127, 61, 253), 114)]:
            tiles = -(-m // 128) * -(-n // bn)
            assert PP.geometry(p, m, n, k, sms)[0][0] == sms
            assert PP.geometry(dict(p, streamk=0), m, n, k, sms)[0][0] == min(tiles, sms)
            assert PP.workspace_bytes(p, m, n, k, sms) == -(-4 * tiles // 256) * 256 + 2 * sms * 128 * bn * 4
            assert PP.workspace_bytes(dict(p, streamk=0), m, n, k, sms) == 0
    assert "clusters" in PP.check("cuda", dict(PP_SK, cluster=2), 4096, 4096, 4096, "bfloat16")


#: every tile shared (72 tiles, 132 SMs); whole tiles and 21 shared of 3 k-tiles each (fewer
#: k-tiles than CTAs); 24 shared of 16 k-tiles; one tile in 4 pieces; N % 4 == 0 at a partial tile
SHAPES = [(1536, 1536, 1536), (2100, 2050, 136), (3000, 3000, 1000), (127, 61, 253), (129, 260, 40)]


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", ["half_wgmma", "half_wgmma_pingpong"])
def test_streamk_verifies_is_bitwise_repeatable_and_leaves_its_counters_zero(shape, name):
    require_backend("cuda")
    from engine.inputs import matrices
    from engine.measure.backends.cuda import CudaBackend
    from engine.measure.verify import Reference

    m, n, k = shape
    be = CudaBackend()
    be.open(0)
    ws = None
    try:
        be.type_spec = TypeSpec("bfloat16")
        variant, params = (HW, SK) if name == "half_wgmma" else (PP, PP_SK)
        kern = be.compile(variant, params, "bfloat16")
        a, b = matrices.generate_pair(m, n, k, "bfloat16", seed=23)
        ws = be.prepare(a, b)
        be.ensure_output(ws, (m, n))
        be.poison_output(ws)
        first = be.run_once(kern, ws, m, n, k)
        verdict = Reference(a, b, spec=be.type_spec).check(first, variant.precision)
        assert verdict.passed, verdict
        bn = 256 if name == "half_wgmma" else params["bn"]
        assert_relaunches_bitwise(be, kern, ws, shape, first, -(-m // 128) * -(-n // bn), rounds=2)
    finally:
        if ws is not None:
            be.release(ws)
        be.close()
