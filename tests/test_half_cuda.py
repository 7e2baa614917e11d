"""Issue 39's CUDA side for float16/bfloat16, on the CPU: kernel files' 16-bit dtypes and
their defines, the half_wmma ladder step (header, every build without spills), the cuda
backend's plumbing (raw 16-bit uploads, C in the output type, its poison, read-back) over a
recording stand-in of pycuda's driver, cuBLAS's half line with nvmath's binding stood in,
the FP16/BF16 peaks, the byte model and % of cuBLAS per type. The GPU runs are in
tests/test_half_gpu.py."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from engine.common.dtypes import TypeSpec, backend_refusal
from engine.kernels import registry
from engine.kernels.kernel_file import KernelFileError
from engine.measure import peaks
from engine.measure.backends import cublas as cublas_mod
from engine.measure.backends.base import BackendError, DeviceInfo
from engine.measure.backends.cuda import CudaBackend, device_words, half_poison_bits, nvcc_options
from engine.results.derived import fill_pct_of_cublas
from engine.results.records import ResultRecord
from engine.run.runner import Plan, fill_ceilings, make_record, refusal
from tests.code_paths import distinct_builds
from tests.fake_pycuda import FakeContext, FakeDriver
from tests.helpers import minimal_kernel_header, ptxas_reports

ml_dtypes = pytest.importorskip("ml_dtypes")
WMMA = registry.get("half_wmma")
MMA = registry.get("half_mma")
WGMMA = registry.get("half_wgmma")
PINGPONG = registry.get("half_wgmma_pingpong")
HALF = ("float16", "bfloat16")


# --- kernel files: 16-bit dtypes, precision and defines ---------------------------------

def _header(tmp_path, extra: str, suffix: str = ".cu"):
    return minimal_kernel_header(tmp_path, extra, "h", suffix)


def test_a_kernel_file_declares_16_bit_types(tmp_path):
    h = _header(tmp_path, 'dtypes = ["float16", "bfloat16"]')
    assert h.dtypes == ("float16", "bfloat16") and h.precision == "half"   # precision follows
    for extra, words in (('dtypes = ["float16", "float32"]', "mixes 16-bit types"),
                         ('dtypes = ["float16"]\nprecision = "fp32"', 'precision "half"'),
                         ('dtypes = ["float32"]\nprecision = "half"', 'precision "half"'),
                         ('dtypes = ["float8_e4m3", "float16"]', "mixes 16-bit types with float8_e4m3"),
                         ('dtypes = ["float8_e4m3", "float32"]', "mixes FP8 types"),
                         ('dtypes = ["float8_e4m3"]\nprecision = "half"', 'precision "fp8"'),
                         ('dtypes = ["float64"]', "dtypes must be a list of")):
        with pytest.raises(KernelFileError, match=words):
            _header(tmp_path, extra)
    with pytest.raises(KernelFileError, match="for CUDA C kernels"):
        _header(tmp_path, 'dtypes = ["float16"]', ".cl")


def test_defines_per_input_and_output_type():
    p = WMMA.default_params()
    assert WMMA.defines(p, "float16") == {"ELEM": "__half", "ACC": "float", "OUT": "float",
                                          "TILE": "128", "BK": "32"}
    assert WMMA.defines(p, "float16", "float16")["OUT"] == "__half"
    assert WMMA.defines(p, "bfloat16", "bfloat16")["ELEM"] == "__nv_bfloat16"
    assert WMMA.defines(p, "bfloat16", "float32")["OUT"] == "float"
    with pytest.raises(ValueError, match="write C as float32 or bfloat16"):
        WMMA.defines(p, "bfloat16", "float16")
    # never a float32 kernel built for 16-bit words, nor a 16-bit one for FP8 bytes
    tiled = registry.get("tiled")
    with pytest.raises(ValueError, match="not float16"):
        tiled.defines(tiled.default_params(), "float16")
    with pytest.raises(ValueError, match="not float8_e4m3"):
        WMMA.defines(p, "float8_e4m3")
    opts = nvcc_options(WMMA, p, "bfloat16", "bfloat16")
    assert "-DELEM=__nv_bfloat16" in opts and "-DOUT=__nv_bfloat16" in opts


def test_half_wmma_is_the_first_16_bit_rung():
    assert WMMA.role == "rung" and WMMA.precision == "half" and WMMA.dtypes == HALF
    assert WMMA.source_path("cuda").name == "30_half_wmma.cu"
    # the ladder's steps in order; the ping-pong step (34) is the highest
    assert registry.best_rung("cuda", "half") == "half_wgmma_pingpong"
    assert PINGPONG.order > WGMMA.order > MMA.order > WMMA.order
    assert registry.reference_for("cuda", "half") == "cublas_half"
    assert registry.best_rung("cuda", "fp32") != "half_wmma"
    assert set(WMMA.descriptions) == set(WMMA.space) and len(WMMA.technique) <= 100
    # any M, N, K: only the parameter-level constraints, at odd shapes and K % 16 != 0
    for shape in ((127, 61, 253), (1, 1, 1), (130, 131, 17), (4096, 4096, 4096)):
        for dtype in HALF:
            assert all(WMMA.check("cuda", c, *shape, dtype) is None for c in WMMA.combos())
    assert "does not support float32" in WMMA.check("cuda", WMMA.default_params(), 64, 64, 64,
                                                    "float32")
    assert WMMA.check("cuda", dict(WMMA.default_params(), bk=24), 64, 64, 64, "float16")
    assert WMMA.launch_geometry({"tile": 128, "bk": 32}, 127, 253, 61) == ((2, 1), (256, 1))
    assert WMMA.launch_geometry({"tile": 64, "bk": 16}, 130, 65, 9) == ((2, 3), (128, 1))


def test_which_backend_runs_which_type():
    shape = (16, 16, 16)
    for dtype in HALF:
        assert backend_refusal("cuda", dtype) is None
        assert refusal("cuda", "half_wmma", WMMA.default_params(), shape, dtype) is None
        assert refusal("cuda", "cublas_half", {}, shape, dtype) is None
        assert "does not support" in refusal("cuda", "cublas_fp32", {}, shape, dtype)
        assert refusal("opencl", "half_wmma", WMMA.default_params(), shape, dtype)
    # FP8: the kernels that declare it (fp8_wgmma) take it; the others say they do not
    assert "does not support float8_e4m3" in refusal("cuda", "half_wmma", WMMA.default_params(),
                                                      shape, "float8_e4m3")
    assert refusal("cuda", "fp8_wgmma", {"stages": 4, "persist": 1, "bm": 128, "bn": 256}, shape, "float8_e4m3") is None


# --- B as N×K (layout nk) ---------------------------------------------------------------

def test_layouts_in_headers_defines_and_refusals(tmp_path):
    h = _header(tmp_path, 'dtypes = ["float16"]\nlayouts = ["kn", "nk"]')
    assert h.layouts == ("kn", "nk")
    assert _header(tmp_path, 'dtypes = ["float16"]').layouts == ("kn",)
    for bad in ('["nk"]', '["kn", "kn"]', '["kn", "mn"]', '"nk"'):
        with pytest.raises(KernelFileError, match="layouts must list"):
            _header(tmp_path, f"layouts = {bad}")
    assert WMMA.layouts == ("kn", "nk")
    p = WMMA.default_params()
    assert "B_NK" not in WMMA.defines(p, "float16")            # a K×N build is as it was
    assert WMMA.defines(p, "float16", None, "nk")["B_NK"] == "1"
    assert "-DB_NK=1" in nvcc_options(WMMA, p, "bfloat16", None, "nk")
    tiled = registry.get("tiled_any")
    with pytest.raises(ValueError, match="K×N only"):
        tiled.defines(tiled.default_params(), "float32", None, "nk")
    shape = (127, 61, 253)
    for dtype in HALF:
        assert refusal("cuda", "half_wmma", p, shape, dtype, "nk") is None
        assert refusal("cuda", "cublas_half", {}, shape, dtype, "nk") is None
    assert refusal("cuda", "cublas_fp32", {}, shape, "float32", "nk") is None
    assert "K×N only" in refusal("cuda", "tiled_any", tiled.default_params(), shape, "float32", "nk")
    assert "K×N only" in refusal("cuda", "lab_fp32", {}, shape, "float32", "nk")
    Plan(backend="cuda", items=[("half_wmma", p)], shapes=[shape], dtype="float16",
         layout="nk").validate()                                  # cuda takes nk now
    with pytest.raises(ValueError, match="no OpenCL kernel"):
        Plan(backend="opencl", items=[("tiled_any", tiled.default_params())], shapes=[shape],
             layout="nk").validate()


def test_b_is_uploaded_n_by_k_where_the_run_says_so():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((5, 7)).astype(np.float16)
    b = rng.standard_normal((7, 3)).astype(np.float16)
    be = _backend("float16", None)
    be.type_spec = TypeSpec("float16", None, "nk")
    ws = be.prepare(a, b)
    assert bytes(ws.a.data) == a.tobytes() and bytes(ws.b.data) == np.ascontiguousarray(b.T).tobytes()
    be.type_spec = TypeSpec("float16", None, "kn")
    assert bytes(be.prepare(a, b).b.data) == b.tobytes()


# --- the byte model, peaks, % of peak and % of cuBLAS per type ---------------------------

def test_bytes_count_c_at_its_own_size():
    m, n, k = 127, 61, 253
    dev = DeviceInfo(backend="cuda", index=0, name="gpu")
    for out, size in (("float32", 4), ("float16", 2)):
        plan = Plan(backend="cuda", items=[("half_wmma", {})], shapes=[(m, n, k)],
                    dtype="float16", out_dtype=out)
        rec = make_record(plan, dev, "", "half_wmma", WMMA.default_params(), (m, n, k))
        assert rec.flops == 2 * m * n * k
        assert rec.bytes == (m * k + k * n) * 2 + m * n * size
    assert registry.io_bytes(registry.get("tiled"), m, n, k, "float32") == (m * k + k * n + m * n) * 4


def test_fp16_bf16_peaks_from_sms_and_clock():
    got, notes = peaks.cuda_peaks(9, 0, 132, 1830.0)
    assert got["fp16"] == got["bf16"] == pytest.approx(989_429.76)      # the H100 SXM datasheet
    assert got["fp16"] == pytest.approx(2 * got["tf32"])
    assert any("FP16/BF16 = 132 SMs × 4096" in n for n in notes)
    a100, _ = peaks.cuda_peaks(8, 0, 108, 1410.0)
    assert a100["bf16"] == pytest.approx(311_869.44)                     # 312 TFLOP/s
    turing, notes = peaks.cuda_peaks(7, 5, 40, 1590.0)
    assert turing["fp16"] == pytest.approx(40 * 1024 * 1.59) and "bf16" not in turing
    assert any("peak FP16 =" in n for n in notes)
    assert peaks.precision_of("half", "bfloat16") == "bf16"
    assert peaks.precision_of("fp32", "float16") == "fp16"
    assert peaks.precision_of("half", "float32") == "fp32"


def _rec(variant, ms, dtype, m=1024):
    return ResultRecord(backend="cuda", device="gpu", variant=variant, params={}, m=m, n=m, k=m,
                        dtype=dtype, mode="hot", warmup=0, repeats=1, timestamp="", versions="",
                        flops=2 * m ** 3, bytes=0, median_ms=ms)


def test_pct_of_peak_and_of_cublas_per_type():
    dev = DeviceInfo(backend="cuda", index=0, name="gpu", peak_gflops_fp16=1000.0,
                     peak_gflops_bf16=800.0, peak_gflops_fp32=100.0)
    rec = _rec("half_wmma", 1.0, "bfloat16")
    rec.gflops = 400.0
    fill_ceilings(rec, "half", dev)
    assert rec.precision == "bf16" and rec.pct_of_peak == pytest.approx(50.0)
    recs = [_rec("cublas_half", 1.0, "float16"), _rec("cublas_half", 2.0, "bfloat16"),
            _rec("half_wmma", 4.0, "float16"), _rec("half_wmma", 4.0, "bfloat16"),
            _rec("cublas_fp32", 8.0, "float32")]
    fill_pct_of_cublas(recs)
    assert recs[2].pct_of_cublas == pytest.approx(25.0)      # against FP16's cuBLAS line
    assert recs[3].pct_of_cublas == pytest.approx(50.0)      # against BF16's, not FP16's
    assert recs[4].pct_of_cublas == pytest.approx(100.0)


# --- the cuda backend's plumbing over a recording stand-in of pycuda's driver -------------

def _backend(dtype, out):
    be = CudaBackend()
    be.drv, be.ctx, be.type_spec = FakeDriver(), FakeContext(), TypeSpec(dtype, out)
    return be


@pytest.mark.parametrize("dtype,out", [(d, o) for d in HALF for o in ("float32", d)])
def test_uploads_raw_words_and_c_in_the_output_type(dtype, out):
    t = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float16)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((5, 7)).astype(t)
    b = rng.standard_normal((7, 3)).astype(t)
    be = _backend(dtype, out)
    ws = be.prepare(a, b)
    assert bytes(ws.a.data) == a.tobytes() and bytes(ws.b.data) == b.tobytes()
    assert [c[2] for c in be.drv.calls] == [np.uint16, np.uint16]     # their 16-bit words
    assert ws.upload_ms == 0.25 and ws.dtype == TypeSpec(dtype, out).output.numpy_dtype
    be.ensure_output(ws, (5, 3))
    assert ws.c.nbytes == 5 * 3 * ws.dtype.itemsize
    be.poison_output(ws)
    back = be.read_output(ws)
    assert back.dtype == ws.dtype and back.shape == (5, 3) and np.isnan(back.astype(np.float64)).all()
    # a written C comes back as written, in its type
    c = (a.astype(np.float32) @ b.astype(np.float32)).astype(ws.dtype)
    ws.c.data[:] = c.tobytes()
    assert back.dtype == c.dtype and np.array_equal(be.read_output(ws).view(np.uint8), c.view(np.uint8))
    # the build's output type
    assert be._out_dtype(dtype) == out and be._out_dtype("float32") is None


def test_poison_is_the_output_types_nan():
    assert half_poison_bits(np.dtype(np.float16)) == 0x7E00
    assert half_poison_bits(np.dtype(ml_dtypes.bfloat16)) == 0x7FC0
    be = _backend("bfloat16", "bfloat16")
    ws = be.prepare(np.zeros((2, 2), ml_dtypes.bfloat16), np.zeros((2, 2), ml_dtypes.bfloat16))
    be.ensure_output(ws, (2, 3))
    be.poison_output(ws)
    assert be.drv.calls[-1][0] == "d16" and be.drv.calls[-1][2:] == (0x7FC0, 6)
    be32 = _backend("float16", "float32")
    ws = be32.prepare(np.zeros((2, 2), np.float16), np.zeros((2, 2), np.float16))
    be32.ensure_output(ws, (2, 3))
    be32.poison_output(ws)
    assert be32.drv.calls[-1][0] == "d32" and be32.drv.calls[-1][3] == 6


def test_inputs_of_another_type_are_never_uploaded():
    be = _backend("bfloat16", None)
    with pytest.raises(BackendError, match="never uploaded as another type"):
        be.prepare(np.zeros((2, 2), np.float16), np.zeros((2, 2), np.float16))
    assert device_words(np.ones(3, np.float32)).dtype == np.float32


# --- cuBLAS's half line with nvmath's binding stood in -------------------------------------

class _FakeCublas:
    """nvmath.bindings.cublas as CublasGemm calls it: enums and a recorded gemm_ex."""

    class Operation:
        N = 0
        T = 1

    class ComputeType:
        COMPUTE_32F = 68
        COMPUTE_32F_FAST_TF32 = 77

    class GemmAlgo:
        DEFAULT = -1

    def __init__(self):
        self.calls = []

    def gemm_ex(self, *args):
        self.calls.append(args)


def test_cublas_half_line_passes_the_types():
    v = registry.get("cublas_half")
    assert v.library == "cublas" and v.role == "reference" and v.dtypes == HALF
    assert v.sources["cuda"] in cublas_mod.CublasGemm.ROUTINES
    assert cublas_mod.data_types("float16") == (2, 2)
    assert cublas_mod.data_types("bfloat16", "float32") == (14, 0)
    with pytest.raises(BackendError, match="no cuBLAS gemmEx line"):
        cublas_mod.data_types("bfloat16", "float16")
    g = cublas_mod.CublasGemm()
    g.lib, g.handle = _FakeCublas(), "h"
    g.gemm("gemmEx:32F", 100, 200, 300, 5, 3, 7, *cublas_mod.data_types("bfloat16", "float32"))
    (args,) = g.lib.calls
    # row-major C = A·B as Cᵀ = Bᵀ·Aᵀ: (n, m, k), B (ld N) then A (ld K), C (ld N)
    assert args[:6] == ("h", 0, 0, 3, 5, 7)
    assert args[7:10] == (200, 14, 3) and args[10:13] == (100, 14, 7)
    assert args[14:17] == (300, 0, 3) and args[17:] == (68, -1)    # FP32 compute
    assert "A and B bfloat16, C float32" in g.describe("gemmEx:32F", 14, 0)
    # B stored N×K: cuBLAS reads it column-major as B (K×N, ld K) and transposes it (op T)
    g.gemm("gemmEx:32F", 100, 200, 300, 5, 3, 7, *cublas_mod.data_types("float16"), b_nk=True)
    args = g.lib.calls[-1]
    assert args[:6] == ("h", 1, 0, 3, 5, 7) and args[7:10] == (200, 2, 7) and args[10:13] == (100, 2, 7)


# --- every build of the rung compiles without spills ---------------------------------------

NVCC = shutil.which("nvcc")


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
@pytest.mark.parametrize("arch,rung", [("sm_80", WMMA), ("sm_90", WMMA), ("sm_80", MMA),
                                       ("sm_90", MMA), ("sm_90a", WGMMA), ("sm_90a", PINGPONG)],
                         ids=lambda x: x if isinstance(x, str) else x.name)
def test_every_half_rung_build_compiles_without_spills(arch, rung):
    """Every code path and parameter value, both input types, C in the input type and B
    as K×N, C in FP32 and B as N×K (C in FP32 with B as K×N: the same builds of
    tests/test_nvcc_compile.py, not built twice)."""
    # each code path and parameter value once (tests.code_paths), not every product
    # (the combinations the header allows: stream-K only on the persistent grid)
    picked = distinct_builds([(rung, [c for c in rung.combos()
                                      if rung.check("cuda", c, 4096, 4096, 4096, dtype) is None],
                               dtype, arch, [rung.default_params()]) for dtype in HALF])
    builds = [(params, dtype, out, layout) for dtype, combos in zip(HALF, picked)
              for params in combos for out, layout in ((dtype, "kn"), ("float32", "nk"))]
    bad = [(*build, rep) for build, rep in
           zip(builds, (r.get("matmul") for r in ptxas_reports(rung, builds, arch)))
           if rep is None or rep["spill_stores"] or rep["spill_loads"] or rep["stack"]]
    assert not bad, bad


def test_half_mma_header():
    assert MMA.dtypes == HALF and MMA.layouts == ("kn", "nk") and MMA.precision == "half"
    assert MMA.role == "rung" and set(MMA.descriptions) == set(MMA.space)
    for shape in ((127, 61, 253), (1, 1, 1), (4096, 4096, 4096)):
        assert all(MMA.check("cuda", c, *shape, "bfloat16", "nk") is None for c in MMA.combos())
    assert MMA.launch_geometry({"stages": 3}, 127, 253, 61) == ((2, 1), (256, 1))
    assert MMA.dynamic_shared({"stages": 4}) == 64 * 1024


def test_half_wgmma_header_and_its_tensor_maps():
    """Step 3 reads A and B in place by TMA: no pre-pass blocks where every row is a
    multiple of 16 bytes; B's map follows its layout (NK): K×N as 64 × 64 boxes of K rows
    of N, N×K as one 64 × 256 box of N rows of K; a short row is padded into the scratch."""
    assert WGMMA.dtypes == HALF and WGMMA.layouts == ("kn", "nk") and WGMMA.arch_suffix == "a"
    assert set(WGMMA.descriptions) == set(WGMMA.space)
    pre = WGMMA.prepass
    p = {"stages": 4, "persist": 1, "bm": 128, "bn": 256, "streamk": 0, "rowpad": 16, "inplace": 0,
         "tmastore": 0, "cluster": 1}
    assert WGMMA.launch_geometry(p, 4096, 4096, 4096, 132) == ((132, 1), (384, 1))
    assert WGMMA.launch_geometry({**p, "persist": 0}, 4096, 4096, 4096, 132) == ((512, 1), (384, 1))
    assert WGMMA.dynamic_shared(p) == 4 * 49152 + 1280
    # 64 × 128 tiles: one consumer warpgroup, 96 KB, two CTAs to an SM (persistent: 2 · SMs)
    small = {**p, "bm": 64, "bn": 128}
    assert WGMMA.launch_geometry(small, 1024, 1024, 1024, 132) == ((128, 1), (256, 1))
    assert WGMMA.launch_geometry(small, 4096, 4096, 4096, 132) == ((264, 1), (256, 1))
    assert WGMMA.dynamic_shared(small) == 4 * 24576 + 1280
    _at, (a, b, _c) = pre.tensor_maps(small, 4096, 2048, 1024)
    assert (a.box0, a.box1, b.box0, b.box1) == (64, 64, 64, 64)
    _at, (a, b, _c) = pre.tensor_maps({**small, "NK": 1}, 4096, 2048, 1024)
    assert (b.box0, b.box1) == (64, 128)
    assert WGMMA.check("cuda", {**p, "bm": 96}, 64, 64, 64, "float16") is not None
    (px, py), _ = pre.geometry(p, 4096, 4096, 4096)
    assert px * py == 0                                   # nothing to pad
    at, (a, b, _c) = pre.tensor_maps(p, 4096, 2048, 1024)
    assert (a.base, a.dim0, a.dim1, a.stride, a.box0, a.box1, a.elem) == ("a", 1024, 4096, 2048, 64, 128, "b16")
    assert (b.base, b.dim0, b.dim1, b.stride, b.box0, b.box1) == ("b", 2048, 1024, 4096, 64, 64)
    at, (a, b, _c) = pre.tensor_maps({**p, "NK": 1}, 4096, 2048, 1024)
    assert (b.base, b.dim0, b.dim1, b.stride, b.box0, b.box1) == ("b", 1024, 2048, 2048, 64, 256)
    # K % 8 and N % 8: A padded to Kp = 64, B (K×N) to Np = 136, maps after both
    m, n, k = 100, 130, 61
    at, (a, b, _c) = pre.tensor_maps(p, m, n, k)
    assert (a.base, a.dim0, a.stride) == ("scratch", 64, 128)
    assert (b.base, b.offset, b.dim0, b.dim1, b.stride) == ("scratch", 2 * m * 64, 136, k, 272)
    # the maps are the kernel's first arguments (maps_in = "params"): the scratch holds the
    # copies only, and at least 256 bytes where nothing is padded
    assert at is None and pre.maps_in == "params"
    assert pre.scratch_bytes(p, m, n, k) == 2 * m * 64 + 2 * k * 136
    assert pre.scratch_bytes(p, 4096, 2048, 1024) == 256
    (px, py), _ = pre.geometry(p, m, n, k)
    assert (px, py) == (1, 4 + 2)                         # 136 / 256 up; A's 4 and B's 2 row tiles
    # N×K: B padded to N rows of Kp
    at, (a, b, _c) = pre.tensor_maps({**p, "NK": 1}, m, n, k)
    assert (b.base, b.offset, b.dim0, b.dim1, b.stride) == ("scratch", 2 * m * 64, 64, n, 128)
    # rowpad 128: rows padded to whole 128-byte lines, also where TMA could read them in
    # place (K = 3000: 6000-byte rows start 16 bytes on from a line each time)
    line = {**p, "rowpad": 128}
    at, (a, b, _c) = pre.tensor_maps(line, 3000, 3000, 3000)
    assert (a.base, a.dim0, a.stride) == ("scratch", 3008, 6016)
    assert (b.base, b.offset, b.dim0, b.dim1, b.stride) == ("scratch", 2 * 3000 * 3008, 3008, 3000, 6016)
    assert pre.scratch_bytes(line, 3000, 3000, 3000) == 4 * 3000 * 3008
    assert pre.geometry(line, 3000, 3000, 3000)[0] == (12, 94 + 94)
    at, (a, b, _c) = pre.tensor_maps(line, 4096, 2048, 1024)           # whole lines already: no copy
    assert (a.base, b.base) == ("a", "b") and pre.geometry(line, 4096, 2048, 1024)[0][1] == 0
    at, (a, b, _c) = pre.tensor_maps({**line, "NK": 1}, 4096, 3000, 1024)   # N×K: rows of K, whole
    assert (a.base, b.base) == ("a", "b")
    at, (a, b, _c) = pre.tensor_maps(line, 4096, 3000, 1024)           # B as K×N: rows of N
    assert (a.base, b.base, b.dim0, b.stride) == ("a", "scratch", 3008, 6016)
    assert WGMMA.check("cuda", {**p, "rowpad": 64}, 64, 64, 64, "float16") is not None
    # inplace 1: A stays where it lies, B still onto whole lines; a row of A that TMA cannot
    # read (K % 8) is padded to 16 bytes all the same
    for layout in (0, 1):
        keep_a = {**line, "inplace": 1, "NK": layout}
        at, (a, b, _c) = pre.tensor_maps(keep_a, 3000, 3000, 3000)
        assert (a.base, a.dim0, a.stride) == ("a", 3000, 6000)
        assert (b.base, b.offset, b.dim0, b.stride) == ("scratch", 0, 3008, 6016)
        assert pre.scratch_bytes(keep_a, 3000, 3000, 3000) == 2 * 3000 * 3008
        assert pre.geometry(keep_a, 3000, 3000, 3000)[0] == (12, 94)
        at, (a, b, _c) = pre.tensor_maps(keep_a, 100, 130, 61)       # A to 16 bytes, B to lines
        assert (a.base, a.dim0, a.stride) == ("scratch", 64, 128)
        assert (b.offset, b.stride) == (2 * 100 * 64, 2 * 64 if layout else 2 * 192)
        at, (a, b, _c) = pre.tensor_maps(keep_a, 100, 130, 4100)     # 8208-byte rows of A
        assert (a.dim0, a.stride) == (4104, 8208)
    assert WGMMA.check("cuda", {**p, "inplace": 1}, 64, 64, 64, "float16") is not None   # rowpad 16
    assert WGMMA.check("cuda", {**line, "inplace": 2}, 64, 64, 64, "float16") is not None
    # tile widths: any multiple of 32 from 128 to 256; B as K×N in whole 64-column boxes (a
    # stage has room for 192 columns at bn = 160, both layouts), as N×K one box of bn rows
    for bn in (160, 192, 224):
        assert WGMMA.check("cuda", {**p, "bn": bn}, 127, 61, 253, "bfloat16") is None
        assert WGMMA.dynamic_shared({**p, "bn": bn}) == 4 * (128 + 64 * -(-bn // 64)) * 128 + 1280
        assert pre.tensor_maps({**p, "bn": bn, "NK": 1}, 4096, 2048, 1024)[1][1].box1 == bn
    for bn in (96, 144, 288):
        assert WGMMA.check("cuda", {**p, "bn": bn}, 127, 61, 253, "bfloat16") is not None
    # tmastore: 16 KB of C's staging a consumer (4 stages of 128 × 256 just fit); C's map in
    # 4-byte units (two 16-bit values to a unit), boxes of 128 bytes × 64 rows, where C's rows
    # are whole 16-byte units, else a 16-byte stand-in in the scratch that nothing uses
    staged = {**p, "tmastore": 1}
    assert WGMMA.dynamic_shared(staged) == 4 * 49152 + 2 * 16384 + 1280 <= 227 * 1024
    assert WGMMA.check("cuda", {**staged, "bn": 256}, 4096, 4096, 4096, "bfloat16") is None
    _at, (_a, _b, c) = pre.tensor_maps(staged, 4096, 2048, 1024)
    assert (c.base, c.dim0, c.dim1, c.stride, c.box0, c.box1) == ("c", 2048, 4096, 8192, 32, 64)
    _at, (_a, _b, c) = pre.tensor_maps({**staged, "OB": 2}, 4096, 2050, 1024)   # 2050 · 2 % 16
    assert (c.base, c.dim0, c.dim1, c.stride) == ("scratch", 4, 1, 16)
    _at, (_a, _b, c) = pre.tensor_maps({**staged, "OB": 2}, 4096, 2048, 1024)
    assert (c.base, c.dim0, c.stride) == ("c", 1024, 4096)
    assert pre.scratch_bytes(staged, 4096, 2050, 1024) >= 16


def test_half_wgmma_pairs_share_b_in_clusters():
    """cluster 2: pairs of CTAs on tiles one above the other (units of 2 · bm rows) in a
    persistent grid of whole pairs, each loading half of B's k-tile into both: B's boxes
    are half as deep (K×N: 32 k rows of 64 columns; N×K: bn / 2 rows of N)."""
    p = {"stages": 4, "persist": 1, "bm": 128, "bn": 224, "streamk": 0, "rowpad": 16, "inplace": 0,
         "tmastore": 1, "cluster": 2}
    assert WGMMA.check("cuda", p, 5000, 5000, 5000, "bfloat16") is None
    # 5000³: 20 pairs of tile rows × 23 columns = 460 units over 66 pairs of SMs; 1000³:
    # 4 × 5 = 20 units (40 CTAs); 127×61: one unit, its second tile past M; 131 SMs: 65 pairs
    assert WGMMA.launch_geometry(p, 5000, 5000, 5000, 132) == ((132, 1), (384, 1))
    assert WGMMA.launch_geometry(p, 1000, 1000, 1000, 132) == ((40, 1), (384, 1))
    assert WGMMA.launch_geometry(p, 127, 61, 253, 132) == ((2, 1), (384, 1))
    assert WGMMA.launch_geometry(p, 5000, 5000, 5000, 131) == ((130, 1), (384, 1))
    assert WGMMA.dynamic_shared(p) == WGMMA.dynamic_shared({**p, "cluster": 1})
    _at, (a, b, _c) = WGMMA.prepass.tensor_maps(p, 4096, 2048, 1024)
    assert (a.box0, a.box1, b.box0, b.box1) == (64, 128, 64, 32)
    _at, (a, b, _c) = WGMMA.prepass.tensor_maps({**p, "NK": 1}, 4096, 2048, 1024)
    assert (a.box1, b.box0, b.box1) == (128, 64, 112)
    for bad in ({"persist": 0}, {"streamk": 1}, {"cluster": 4}):
        assert WGMMA.check("cuda", {**p, **bad}, 5000, 5000, 5000, "bfloat16") is not None, bad


def test_the_ping_pong_step_owns_its_tiles():
    """Step 34: 128 × bn tiles (bn 128 or 64), one consumer warpgroup each, a persistent
    grid (the consumers alternate over its tiles); 4 or 6 stages of 16 KB of A and bn · 128
    bytes of B; B's map by layout and bn."""
    v = PINGPONG
    assert (v.order, v.precision, v.dtypes, v.layouts, v.arch_suffix) == (34, "half", HALF, ("kn", "nk"), "a")
    assert set(v.descriptions) == set(v.space) and len(v.technique) <= 100
    p = {"stages": 6, "bn": 128, "cluster": 1, "rowpad": 16, "streamk": 0}
    narrow = {**p, "bn": 64}
    pair = {**p, "cluster": 2}
    assert v.launch_geometry(p, 4096, 4096, 4096, 132) == ((132, 1), (384, 1))
    assert v.launch_geometry(p, 1000, 1000, 1000, 132) == ((64, 1), (384, 1))
    assert v.launch_geometry(narrow, 1000, 1000, 1000, 132) == ((128, 1), (384, 1))
    # clusters of two on neighbouring tiles along N: 8 tile rows × 4 pairs at 1000³ (64
    # CTAs), one pair a tile row at N = 130 (its second tile past N); at 4096³ 66 pairs fill
    # 132 SMs, and an odd SM count leaves one out
    assert v.launch_geometry(pair, 1000, 1000, 1000, 132) == ((64, 1), (384, 1))
    assert v.launch_geometry(pair, 1000, 130, 1000, 132) == ((16, 1), (384, 1))
    assert v.launch_geometry(pair, 4096, 4096, 4096, 132) == ((132, 1), (384, 1))
    assert v.launch_geometry(pair, 4096, 4096, 4096, 131) == ((130, 1), (384, 1))
    assert v.check("cuda", {**pair, "cluster": 4}, 64, 64, 64, "float16") is not None
    assert v.dynamic_shared(p) == 6 * 32768 + 1280 <= 227 * 1024
    assert v.dynamic_shared(narrow) == 6 * 24576 + 1280
    assert v.check("cuda", {**p, "stages": 5}, 64, 64, 64, "float16") is not None
    assert v.check("cuda", {**p, "stages": 4, "bn": 96}, 64, 64, 64, "float16") is not None
    _at, (a, b) = v.prepass.tensor_maps(p, 4096, 2048, 1024)
    assert (a.box0, a.box1, b.box0, b.box1) == (64, 128, 64, 64)
    _at, (a, b) = v.prepass.tensor_maps({**p, "NK": 1}, 4096, 2048, 1024)
    assert (b.box0, b.box1) == (64, 128)
    _at, (a, b) = v.prepass.tensor_maps({**narrow, "NK": 1}, 4096, 2048, 1024)
    assert (b.box0, b.box1) == (64, 64)
    _at, (a, b) = v.prepass.tensor_maps(narrow, 4096, 2048, 1024)
    assert (b.box0, b.box1) == (64, 64)
    _at, (a, b) = v.prepass.tensor_maps(pair, 4096, 2048, 1024)     # each CTA half of A's rows
    assert (a.box0, a.box1, b.box0, b.box1) == (64, 64, 64, 64)
    for shape in ((127, 61, 253), (1, 1, 1), (2100, 2050, 136)):
        # every combination but stream-K in clusters (refused: a cluster walks its tiles as one)
        assert all((v.check("cuda", c, *shape, "bfloat16", "nk") is None)
                   == (c["streamk"] == 0 or c["cluster"] == 1) for c in v.combos())
