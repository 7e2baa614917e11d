"""The Hopper TF32 kernels round their inputs to TF32 to nearest, as cuBLAS does.

wgmma reads a .tf32 operand as the FP32 bit pattern and ignores its low 13 mantissa bits:
raw FP32 inputs are truncated, which made tf32_wgmma_tma's relative L2 error 2.5x cuBLAS
TF32's (6.9e-4 vs 2.7e-4 at 2048^3, uniform inputs). cuda/21_ and 22_*.cu round A and B with
cvt.rna.tf32.f32 (in their pre-pass or in shared memory; TF32_RN = 0 in a file brings
truncation back); cuda/23_*.cu has the copy engine round both (TFLOAT32 tensor maps, as
cuBLAS does; tests/test_tma_tf32.py checks the hardware's rounding bit for bit). On a GPU:
on the same inputs, every TF32 kernel's rel_l2 must be within 1.25x of cublas_tf32's.
Without one (or without nvcc), the checks below still make sure that the rounding is
compiled in (or asked of TMA) and that the kernels build for sm_90a without spills.
"""
from __future__ import annotations

import math
import shutil

import pytest

from engine.kernels import registry
from engine.measure.backends import cuda as cuda_backend
from engine.measure.kernel_check import parse_ptxas
from engine.run.runner import Plan, expand_items
from tests.code_paths import distinct_builds, distinct_items
from tests.helpers import backend_status, run_plan

#: The TF32 kernels of the ladder whose threads round the inputs, with a TF32_RN switch (the
#: experiment tf32_wgmma_tp still truncates).
ROUNDED = ("tf32_wgmma", "tf32_wgmma_ws")
#: The TF32 kernels whose inputs the copy engine rounds: every tensor map says elem = "tf32".
TMA_ROUNDED = ("tf32_wgmma_tma", "tf32_wgmma_rs")
#: Every TF32 kernel the accuracy test compares with cuBLAS: those plus tf32_mma (mma.sync,
#: which has always rounded its register fragments) and the experiment tf32_wgmma_fused (A
#: in place, B as it is transposed in shared memory; no switch).
TF32_KERNELS = ("tf32_mma",) + ROUNDED + TMA_ROUNDED + ("tf32_wgmma_fused",)
#: An odd shape (M, N, K; K % 4 != 0: the pre-pass's padded Ap path of 22/23) and 2048^3.
SHAPES = [(1000, 1500, 777), (2048, 2048, 2048)]
#: The bound: rel_l2 of a kernel <= FACTOR x rel_l2 of cublas_tf32 on the same inputs.
FACTOR = 1.25

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def _defines(name: str, extra: dict[str, str] | None = None) -> list[str]:
    v = registry.get(name)
    d = {**v.defines(v.default_params(), "float32"), **(extra or {})}
    return [f"-D{k}={val}" for k, val in d.items()]


@needs_nvcc
@pytest.mark.parametrize("rn", [None, "0"], ids=["default", "TF32_RN=0"])
@pytest.mark.parametrize("name", ROUNDED)
@pytest.mark.slow
def test_rounding_switch_builds_for_sm90a_without_spills(name, rn):
    v = registry.get(name)
    extra = {"TF32_RN": rn} if rn is not None else None
    _cubin, log = cuda_backend.nvcc_cubin(v.source_path("cuda"),
                                          _defines(name, extra) + ["-Xptxas", "-v"], "sm_90a")
    info = parse_ptxas(log)
    assert "matmul" in info, log
    for entry, e in info.items():
        assert (e["spill_stores"], e["spill_loads"], e["stack"]) == (0, 0, 0), (entry, log)


@needs_nvcc
@pytest.mark.parametrize("name", ROUNDED)
@pytest.mark.slow
def test_rounding_is_compiled_in_by_default(name, tmp_path):
    """The default build converts with cvt.rna.tf32.f32 and TF32_RN = 0 does not (PTX)."""
    import subprocess

    v = registry.get(name)
    ptx = {}
    for label, extra in (("default", None), ("off", {"TF32_RN": "0"})):
        out = tmp_path / f"{label}.ptx"
        cmd = [cuda_backend.find_nvcc(), "-ptx", "-gencode=arch=compute_90a,code=sm_90a",
               *_defines(name, extra), f"-I{registry.ROOT / 'cuda'}", "-o", str(out),
               str(v.source_path("cuda"))]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        ptx[label] = out.read_text()
    assert "cvt.rna.tf32.f32" in ptx["default"]
    assert "cvt.rna.tf32.f32" not in ptx["off"]


@pytest.mark.parametrize("shape", [(1000, 1500, 777), (2048, 2048, 2048), (1, 1, 1), (127, 253, 61)])
@pytest.mark.parametrize("name", TMA_ROUNDED)
def test_the_copy_engine_rounds_every_operand(name, shape):
    """Every tensor map that loads an operand (A's and B's, the first two), at every shape,
    asks TMA to round to TF32; a map the kernel stores C through (rs's third) copies floats
    as they are: C must not be rounded."""
    v = registry.get(name)
    for params in v.combos():
        _at, maps = v.prepass.tensor_maps(params, *shape)
        loads, stores = maps[:2], maps[2:]
        assert len(loads) == 2 and all(t.elem == "tf32" for t in loads), maps
        assert all(t.elem == "float32" for t in stores), maps


@needs_nvcc
@pytest.mark.parametrize("name", TMA_ROUNDED)
@pytest.mark.slow
def test_no_thread_rounds_what_the_copy_engine_rounds(name):
    """No cvt.rna in the PTX (rounding twice would only cost time), and no spills: every
    distinct build (tests.code_paths) of the combinations a constraint does not refuse."""
    v = registry.get(name)
    combos = [c for c in v.combos() if v.check("cuda", c, 4096, 4096, 4096, "float32") is None]
    [builds] = distinct_builds([(v, combos, "float32", "sm_90a", [v.default_params()])])
    for params in builds:
        d = [f"-D{k}={val}" for k, val in v.defines(params, "float32").items()]
        _cubin, log = cuda_backend.nvcc_cubin(v.source_path("cuda"), d + ["-Xptxas", "-v"], "sm_90a")
        info = parse_ptxas(log)
        assert "matmul" in info, log
        for entry, e in info.items():
            assert (e["spill_stores"], e["spill_loads"], e["stack"]) == (0, 0, 0), (entry, log)
    assert "tf32_rna" not in v.source_path("cuda").read_text()


@pytest.mark.gpu
def test_tf32_kernels_are_as_accurate_as_cublas_tf32():
    """One sweep, the same uniform inputs per shape for every line: each TF32 kernel (every
    parameter combination) within FACTOR x cublas_tf32's relative L2 error."""
    st = backend_status("cuda")
    if not st.available:
        pytest.skip(f"cuda backend unavailable: {st.reason}")
    # every code path and parameter value of each kernel at both shapes (tests.code_paths)
    items = [("cublas_tf32", {})] + distinct_items(expand_items("cuda", TF32_KERNELS), SHAPES, "float32")
    plan = Plan(backend="cuda", items=items, shapes=SHAPES, dtype="float32", dist="uniform",
                warmup=0, repeats=1)
    recs, _ = run_plan(plan)
    for m, n, k in SHAPES:
        at = [r for r in recs if (r.m, r.n, r.k) == (m, n, k)]
        ref = next(r for r in at if r.variant == "cublas_tf32")
        if ref.status == "skipped":
            pytest.skip(f"cublas_tf32 unavailable: {ref.error}")
        assert ref.status == "ok" and ref.passed, (ref.status, ref.error)
        assert math.isfinite(ref.rel_l2) and ref.rel_l2 > 0, ref.rel_l2
        ran = [r for r in at if r.variant != "cublas_tf32" and r.status != "skipped"]
        assert {r.variant for r in ran} >= {"tf32_mma"}, [(r.label(), r.error) for r in at]
        report = {r.label(): round(r.rel_l2 / ref.rel_l2, 3) for r in ran}
        bad = [(r.label(), r.status, r.error, r.rel_l2) for r in ran
               if r.status != "ok" or not r.passed or not r.rel_l2 <= FACTOR * ref.rel_l2]
        assert not bad, (f"{m}x{n}x{k}: cublas_tf32 rel_l2 {ref.rel_l2:.3g}; "
                         f"ratios {report}; over {FACTOR}x or failed: {bad}")
