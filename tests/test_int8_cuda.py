"""int8 on CUDA without a GPU: the integer ladder step's header, its defines (ELEM, OUT,
ACC, B_NK), its tensor maps and pre-pass in each layout (the 8-bit pre-pass it shares with
the FP8 step), no scale argument, the lab's int8 line, and every build compiled for sm_90a
without spills. The GPU side: tests/test_int8_gpu.py."""
from __future__ import annotations

import shutil

import pytest

from engine.kernels import registry
from engine.measure.backends.base import argument_mismatch
from engine.measure.backends.cuda import takes_scale
from engine.measure.kernel_check import parse_ptxas
from tests.code_paths import distinct_builds

V = registry.get("int8_wgmma")
FP8 = registry.get("fp8_wgmma")
NVCC = shutil.which("nvcc")
P = {"stages": 4, "persist": 1, "bm": 128, "bn": 256}


def test_header_defines_and_refusals():
    assert V.dtypes == ("int8",) and V.layouts == ("kn", "nk") and V.precision == "int8"
    assert V.arch_suffix == "a" and V.order == 35 and set(V.descriptions) == set(V.space)
    d = V.defines(P, "int8")
    assert (d["ELEM"], d["OUT"], d["ACC"]) == ("signed char", "int", "int") and "B_NK" not in d
    assert V.defines(P, "int8", None, "nk")["B_NK"] == "1"
    assert "does not support float8_e4m3" in V.check("cuda", P, 64, 64, 64, "float8_e4m3")
    assert "does not support int8" in FP8.check("cuda", P, 64, 64, 64, "int8")
    for shape in ((127, 61, 253), (1, 1, 1), (4096, 4096, 4096)):
        assert all(V.check("cuda", c, *shape, "int8", lay) is None
                   for c in V.combos() for lay in ("kn", "nk"))
    assert registry.best_rung("cuda", "int8") == "int8_wgmma"


def test_no_scale_argument_and_launch():
    assert not takes_scale(V)
    assert argument_mismatch(V, 8, scale=False) is None            # the two tensor maps first
    assert V.launch_geometry(P, 4096, 4096, 4096, 132) == ((132, 1), (384, 1))
    assert V.launch_geometry({**P, "persist": 0, "bm": 64, "bn": 128}, 1000, 1000, 1000, 132) == ((128, 1), (256, 1))
    assert V.dynamic_shared(P) == 4 * 48 * 1024 + 1280 <= 227 * 1024


def test_tensor_maps_and_prepass_match_the_fp8_steps():
    """The same byte operands as step 33 (eight_bit.cuh): B as N×K read in place where K %
    16 == 0, else transposed or padded into the scratch; the maps the kernel's first arguments."""
    pre, fp8 = V.prepass, FP8.prepass
    for p in (P, {**P, "NK": 1}, {**P, "bm": 64, "bn": 128}):
        for shape in ((4096, 2048, 1024), (100, 130, 61), (127, 61, 253), (1, 1, 1)):
            assert pre.tensor_maps(p, *shape) == fp8.tensor_maps(p, *shape)
            assert pre.geometry(p, *shape) == fp8.geometry(p, *shape)
            assert pre.scratch_bytes(p, *shape) == fp8.scratch_bytes(p, *shape)
    _at, (a, b) = pre.tensor_maps({**P, "NK": 1}, 4096, 2048, 1024)
    assert (a.base, b.base, b.box0, b.box1, b.elem) == ("a", "b", 128, 256, "b8")
    assert pre.geometry({**P, "NK": 1}, 4096, 2048, 1024)[0][0] * pre.geometry({**P, "NK": 1}, 4096, 2048, 1024)[0][1] == 0


def test_the_int8_line_routes_to_the_rung():
    line = registry.get("lab_int8")
    assert line.role == "dispatch" and line.precision == "int8" and line.dtypes == ("int8",)
    for shape in ((4096, 4096, 4096), (127, 61, 253), (8192, 8192, 8192)):
        assert line.check("cuda", {}, *shape, "int8", "nk") is None
    assert registry.dispatch_for("cuda", "int8") == "lab_int8"


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
def test_every_int8_build_compiles_without_spills():
    """B as N×K (B_NK = 1): the builds with B as K×N are tests/test_nvcc_compile.py's (the
    same spill check), not built twice."""
    from engine.measure.backends.cuda import nvcc_cubin, nvcc_options
    src = V.source_path("cuda")
    bad = []
    # each code path and parameter value once (tests.code_paths), not every product
    (picked,) = distinct_builds([(V, V.combos(), "int8", "sm_90a", [V.default_params()])])
    assert len(picked) >= 2
    for params in picked:
        for layout in ("nk",):
            _cubin, log = nvcc_cubin(src, nvcc_options(V, params, "int8", None, layout), "sm_90a")
            stats = parse_ptxas(log)
            for entry in ("matmul", "prepass"):
                rep = stats.get(entry)
                if rep is None or rep["spill_stores"] or rep["spill_loads"] or rep["stack"]:
                    bad.append((params, layout, entry, rep))
    assert not bad, bad
