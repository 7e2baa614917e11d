"""FP8 on CUDA without a GPU: the FP8 ladder step's header, its defines (ELEM, OUT, B_NK),
its tensor maps and pre-pass in each layout, the scale argument the backend adds, and every
build compiled for sm_90a without spills. The GPU side: tests/test_fp8_gpu.py."""
from __future__ import annotations

import shutil

import pytest

from engine.kernels import registry
from engine.measure import peaks
from engine.measure.backends.base import argument_mismatch
from engine.measure.backends.cuda import takes_scale
from tests.code_paths import distinct_builds

FP8 = ("float8_e4m3", "float8_e5m2")
V = registry.get("fp8_wgmma")
NVCC = shutil.which("nvcc")


def test_header_defines_and_refusals():
    assert V.dtypes == FP8 and V.layouts == ("kn", "nk") and V.precision == "fp8"
    assert V.arch_suffix == "a" and set(V.descriptions) == set(V.space)
    p = {"stages": 4, "persist": 1, "bm": 128, "bn": 256}
    d = V.defines(p, "float8_e4m3")
    assert d["ELEM"] == "__nv_fp8_e4m3" and d["OUT"] == "__nv_bfloat16" and "B_NK" not in d
    d = V.defines(p, "float8_e5m2", "float32", "nk")
    assert d["ELEM"] == "__nv_fp8_e5m2" and d["OUT"] == "float" and d["B_NK"] == "1"
    with pytest.raises(ValueError, match="bfloat16 or float32"):
        V.defines(p, "float8_e4m3", "float16")
    assert "does not support float32" in V.check("cuda", p, 64, 64, 64, "float32")
    assert "does not support float8_e5m2" in registry.get("half_mma").check(
        "cuda", {"stages": 3}, 64, 64, 64, "float8_e5m2")
    assert V.check("cuda", p, 127, 61, 253, "float8_e4m3", "kn") is None
    assert registry.best_rung("cuda", "fp8") == "fp8_wgmma"


def test_the_kernel_takes_the_scales_product_after_the_sizes():
    assert takes_scale(V) and not takes_scale(registry.get("half_wgmma"))
    # the two tensor maps first (maps_in = "params"), then A, B, C, M, N, K and the scale
    assert argument_mismatch(V, 9, scale=True) is None
    assert "launches matmul(map0, map1, A, B, C, M, N, K, scale)" in argument_mismatch(V, 8, scale=True)


def test_peak_and_precision():
    assert peaks.precision_of("fp8", "float8_e5m2") == "fp8"
    got, notes = peaks.cuda_peaks(9, 0, 132, 1830)
    assert got["fp8"] == pytest.approx(2 * got["fp16"]) and got["fp8"] == pytest.approx(132 * 8192 * 1.83)
    assert any("FP8" in n for n in notes)


def test_tensor_maps_and_prepass_per_layout():
    pre, p = V.prepass, {"stages": 4, "persist": 1, "bm": 128, "bn": 256}
    # B as N×K, K % 16 == 0: read in place, no pre-pass blocks
    at, (a, b) = pre.tensor_maps({**p, "NK": 1}, 4096, 2048, 1024)
    assert (a.base, a.dim0, a.dim1, a.stride, a.box0, a.box1, a.elem) == ("a", 1024, 4096, 1024, 128, 128, "b8")
    assert (b.base, b.dim0, b.dim1, b.stride, b.box0, b.box1) == ("b", 1024, 2048, 1024, 128, 256)
    (px, py), _ = pre.geometry({**p, "NK": 1}, 4096, 2048, 1024)
    assert px * py == 0
    # B as K×N: always transposed into Bt (N × Kp) in the scratch
    at, (a, b) = pre.tensor_maps(p, 4096, 2048, 1024)
    assert (b.base, b.offset, b.dim0, b.dim1, b.stride) == ("scratch", 0, 1024, 2048, 1024)
    assert pre.geometry(p, 4096, 2048, 1024)[0] == (32, 64)
    # K % 16: A and B padded to Kp = 64
    m, n, k = 100, 130, 61
    at, (a, b) = pre.tensor_maps(p, m, n, k)
    assert (a.base, a.dim0, a.stride) == ("scratch", 64, 64)
    assert (b.base, b.offset, b.dim0, b.dim1) == ("scratch", m * 64, 64, n)
    # the maps are the kernel's arguments, not in the scratch: it holds the copies only
    assert at is None and pre.maps_in == "params" and pre.scratch_bytes(p, m, n, k) == m * 64 + n * 64
    assert pre.geometry(p, m, n, k)[0] == (2, 4 + 5)


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_every_fp8_build_compiles_without_spills():
    from tests.helpers import ptxas_reports
    # each code path and parameter value once (tests.code_paths), not every product
    picked = distinct_builds([(V, V.combos(), dtype, "sm_90a", [V.default_params()]) for dtype in FP8])
    builds = [(params, dtype, out, layout) for dtype, combos in zip(FP8, picked) for params in combos
              for out, layout in (("bfloat16", "kn"), ("float32", "kn"), ("bfloat16", "nk"))]
    bad = [(*build, entry, stats.get(entry))
           for build, stats in zip(builds, ptxas_reports(V, builds, "sm_90a"))
           for entry in ("matmul", "prepass")
           if stats.get(entry) is None or any(stats[entry][x] for x in ("spill_stores", "spill_loads", "stack"))]
    assert not bad, bad


def test_cublaslt_is_fp8s_reference_line():
    """cuBLASLt's FP8 GEMM is the FP8 line (% of cuBLAS for the FP8 kernels); it refuses
    e5m2 × e5m2 (cuBLASLt has no such product) with the reason; B as K×N is a skip at its
    build (the TN form FP8 takes needs B as N×K)."""
    lt = registry.get("cublaslt_fp8")
    assert registry.reference_for("cuda", "fp8") == "cublaslt_fp8" and lt.library == "cublaslt"
    assert lt.check("cuda", {}, 4096, 4096, 4096, "float8_e4m3", "nk") is None
    assert "e5m2 by e5m2" in lt.check("cuda", {}, 4096, 4096, 4096, "float8_e5m2", "nk")
    assert "does not support float16" in lt.check("cuda", {}, 64, 64, 64, "float16", "nk")
