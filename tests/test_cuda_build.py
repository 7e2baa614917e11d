"""Building CUDA kernels without a GPU: nvcc per kernel file, and the parallel precompile
that a sweep runs before its first launch."""
from __future__ import annotations

import shutil

import pytest

from engine.kernels import registry
from engine.measure.backends.base import BackendError
from engine.measure.backends import cuda as cuda_backend
from engine.run.runner import expand_items

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def _backend(arch="sm_90"):
    be = cuda_backend.CudaBackend()
    be.arch = arch  # as open() would set it for an H100/H200, without a device
    return be


def test_nvcc_cubin_builds_and_reports_resources():
    v = registry.get("tiled_any")
    cubin, log = cuda_backend.nvcc_cubin(v.source_path("cuda"),
                                         [f"-D{k}={val}" for k, val in v.defines({"block": 16}, "int32").items()]
                                         + ["-Xptxas", "-v"], "sm_90")
    assert cubin[:4] == b"\x7fELF"
    assert "Used" in log and "registers" in log and "0 bytes spill stores" in log


def test_nvcc_failure_names_the_file(tmp_path):
    bad = tmp_path / "broken_kernel.cu"
    bad.write_text('extern "C" __global__ void matmul() { this is not C++; }\n')
    with pytest.raises(BackendError, match="broken_kernel.cu"):
        cuda_backend.nvcc_cubin(bad, [], "sm_90")


def test_sm90a_variants_need_sm90():
    v = registry.get("tf32_wgmma_ws")
    with pytest.raises(cuda_backend.ArchUnavailable):
        _backend("sm_80")._nvcc_job(v, v.default_params(), "float32")
    _key, _opts, arch = _backend("sm_90")._nvcc_job(v, v.default_params(), "float32")
    assert arch == "sm_90a"


@pytest.mark.slow
def test_precompile_builds_each_kernel_once_in_parallel(monkeypatch):
    calls = []
    real = cuda_backend.nvcc_cubin

    def counting(source, options, arch, **kw):
        calls.append((source.name, tuple(options), arch))
        return real(source, options, arch, **kw)

    monkeypatch.setattr(cuda_backend, "nvcc_cubin", counting)
    monkeypatch.setenv("MATMUL_LAB_CACHE", "off")  # every build runs nvcc: none from disk
    be = _backend()
    items = expand_items("cuda", ["naive", "tiled", "aat_padded", "cublas_fp32"])
    jobs = [(registry.get(n), p, "float32") for n, p in items] * 2   # duplicates too
    built, seconds = be.precompile(jobs, workers=2)
    kernels = [(n, p) for n, p in items if not registry.get(n).library]
    assert built == len(kernels) == len(calls) == len(set(calls))
    assert seconds > 0
    # compile() then finds every cubin built: no second nvcc run for the same kernel.
    for n, p in kernels:
        be._build(registry.get(n), p, "float32")
    assert len(calls) == len(kernels)
    assert be.precompile(jobs) == (0, 0.0)
