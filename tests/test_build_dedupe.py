"""Builds whose defines leave the device text unchanged share one nvcc run
(engine.measure.backends.cuda.device_text_digest): a parameter that only the launch
geometry reads (tf32_wgmma_tma's ``persist``, skinny's ``fill`` in its register stream)
costs no second build, in memory and through the disk cache."""
from __future__ import annotations

import shutil

import pytest

from engine.kernels import registry
from engine.measure.backends import cuda as cuda_backend

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

TMA = "tf32_wgmma_tma"
SAME = ({"stages": 4, "persist": 1}, {"stages": 4, "persist": 0})   # persist: the grid only
OTHER = {"stages": 3, "persist": 1}                                  # another pipeline depth


def _digest(name, params, dtype="float32"):
    v = registry.get(name)
    return cuda_backend.device_text_digest(v.source_path("cuda"),
                                           cuda_backend.nvcc_options(v, params, dtype),
                                           cuda_backend.target_arch(v, "sm_90"))


def test_device_text_tells_which_defines_matter():
    a, b = (_digest(TMA, p) for p in SAME)
    assert a is not None and a == b
    assert _digest(TMA, OTHER) != a
    assert _digest(TMA, SAME[0], "int32") != a if "int32" in registry.get(TMA).dtypes else True
    base = {"stream": 0, "tile": 16, "unroll": 8, "fill": 2, "stages": 3}
    assert _digest("skinny", base) == _digest("skinny", dict(base, fill=1))
    assert _digest("skinny", base) != _digest("skinny", dict(base, unroll=4))
    assert _digest("skinny", base) != _digest("skinny", dict(base, tile=32))
    # a define set the file refuses (#error) has no digest: it is built, and fails, as always
    v = registry.get("ffma_wide")
    bad = dict(v.default_params(), bcopy=0, crows=1)
    assert _digest("ffma_wide", bad) is None


def test_same_device_text_gives_the_same_cubin():
    """The premise, checked with nvcc: both define sets build byte-identical cubins."""
    v = registry.get(TMA)
    arch = cuda_backend.target_arch(v, "sm_90")
    one, two = (cuda_backend.nvcc_cubin(v.source_path("cuda"), cuda_backend.nvcc_options(v, p, "float32"), arch)
                for p in SAME)
    assert one[0] == two[0]                 # (their ptxas reports differ in compile time only)
    strip = lambda log: [l for l in log.splitlines() if "Compile time" not in l]  # noqa: E731
    assert strip(one[1]) == strip(two[1])


@pytest.mark.parametrize("disk", [False, True])
def test_the_second_build_of_the_same_text_runs_no_nvcc(monkeypatch, tmp_path, disk, nvcc_runs):
    calls = nvcc_runs
    monkeypatch.setenv("MATMUL_LAB_CACHE", str(tmp_path) if disk else "off")
    v = registry.get(TMA)

    def backend():
        be = cuda_backend.CudaBackend()
        be.arch = "sm_90"
        return be

    be = backend()
    keys = [be._build(v, p, "float32")[0] for p in SAME]
    assert len(calls) == 1 and keys[0] != keys[1]           # two builds, one nvcc run
    assert be._cubins[keys[0]] == be._cubins[keys[1]]
    be._build(v, OTHER, "float32")
    assert len(calls) == 2                                   # another text: its own nvcc
    if disk:           # another process (a fresh backend) finds both through the disk cache
        again = backend()
        again._build(v, dict(SAME[1]), "float32")
        again._build(v, {"stages": 3, "persist": 0}, "float32")
        assert len(calls) == 2


def test_precompile_runs_one_nvcc_for_builds_of_the_same_text(monkeypatch, nvcc_runs):
    """The parallel precompile of a sweep: builds that differ only in a parameter the
    device text does not read wait for one another's nvcc instead of each running it."""
    calls = nvcc_runs
    monkeypatch.setenv("MATMUL_LAB_CACHE", "off")
    be = cuda_backend.CudaBackend()
    be.arch = "sm_90"
    v = registry.get(TMA)
    built, _seconds = be.precompile([(v, dict(p), "float32") for p in SAME], workers=2)
    assert built == 2 and len(calls) == 1
