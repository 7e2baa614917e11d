"""int8 on the host (issue 39 §1, "int8 → int32 on tensor cores"): the type and its one
output type, random inputs over int8's range, matrix files converted or refused at their
first bad entry, exact verification (a wrong entry and an unwritten tile fail), the defines
and header rules of int8 kernel files, cuBLASLt's int8 line over a stand-in of nvmath's
binding, the int8 peaks, the cpu backend's exact product, OpenCL's and Triton's refusals,
records and the command line. The GPU side: tests/test_int8_gpu.py."""
from __future__ import annotations

import ctypes
import json
import math

import numpy as np
import pytest

import main
from engine.common.dtypes import INTEGER_NAMES, ElementType, TypeSpec, backend_refusal
from engine.inputs import matrices
from engine.inputs.matrices import MatrixInputError
from engine.kernels import registry
from engine.kernels.kernel_file import KernelFileError, parse_header
from engine.measure import peaks
from engine.measure.backends import cublas as cublas_mod
from engine.measure.backends.base import INT_POISON, BackendError, DeviceInfo
from engine.measure.backends.cpu import CpuBackend
from engine.measure.backends.cuda import CudaBackend
from engine.measure.backends.opencl import OpenCLBackend
from engine.measure.verify import Reference
from engine.results import records
from engine.results.derived import fill_pct_of_cublas
from engine.results.records import ResultRecord
from engine.run.runner import Plan, fill_ceilings, refusal
from tests.helpers import require_backend, run_plan
from tests.fake_pycuda import FakeContext, FakeDriver
from tests.helpers import minimal_kernel_header

INT8 = ElementType.INT8


def _exact(a, b) -> np.ndarray:
    """The int8 product as the kernels' int32 sums hold it (int64, wrapped to int32)."""
    return (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)


# --- the type ---------------------------------------------------------------------------

def test_the_type_is_exact_with_int32_sums_and_int32_c():
    assert INT8.numpy_dtype == np.int8 and INT8.itemsize == 1 and INT8.max_finite == 127
    assert INT8.is_integer and INT8.is_low_precision and not INT8.is_float8
    assert INT8.accumulator is ElementType.INT32 and INT8.output_choices == (ElementType.INT32,)
    assert INT8.unit_roundoff == 0.0 and "int32 accumulation (exact)" in INT8.description
    assert INTEGER_NAMES == ("int32", "int8")
    spec = TypeSpec("int8", None, "nk")
    assert spec.output is ElementType.INT32 and spec.out_dtype is None and spec.label == "int8 → int32, B N×K"
    for out in ("float32", "int8", "bfloat16"):
        with pytest.raises(ValueError, match="int8 cannot write"):
            TypeSpec("int8", out)
    assert registry.ITEMSIZE["int8"] == 1


# --- random inputs ----------------------------------------------------------------------

def test_random_inputs_are_uniform_over_int8s_whole_range():
    ops = matrices.generate_operands(200, 150, 100, "int8", seed=4)
    assert ops.a.dtype == np.int8 and ops.b.dtype == np.int8 and (ops.scale_a, ops.scale_b) == (1.0, 1.0)
    both = np.concatenate([ops.a.ravel(), ops.b.ravel()]).astype(np.int64)
    assert both.min() == -128 and both.max() == 127
    counts = np.bincount(both + 128, minlength=256)
    assert counts.min() > 0.5 * counts.mean()          # every value, about equally often
    again = matrices.generate_operands(200, 150, 100, "int8", seed=4)
    assert np.array_equal(again.a, ops.a) and np.array_equal(again.b, ops.b)
    # whole numbers whatever the distribution says, as for int32
    assert matrices.generate(30, 30, "int8", dist="normal", seed=1).min() < -100
    # the run's range options replace int8's range, inside it only; int32 keeps -8..8
    small = matrices.generate(40, 40, "int8", seed=2, low=-3, high=5)
    assert small.dtype == np.int8 and small.min() == -3 and small.max() == 5
    with pytest.raises(MatrixInputError, match="int8 matrices hold whole numbers from -128 to 127"):
        matrices.generate(4, 4, "int8", low=-129)
    i32 = matrices.generate(40, 40, "int32", seed=2)
    assert i32.min() == -8 and i32.max() == 8


# --- files ------------------------------------------------------------------------------

def test_an_int8_npy_loads_as_it_is_and_other_integer_arrays_convert(tmp_path):
    a = np.array([[-128, 0, 127], [5, -7, 1]], dtype=np.int8)
    np.save(tmp_path / "a.npy", a)
    got = matrices.load_matrix(tmp_path / "a.npy", "int8")
    assert got.dtype == np.int8 and np.array_equal(got, a)
    np.save(tmp_path / "wide.npy", a.astype(np.int64))
    np.save(tmp_path / "float.npy", a.astype(np.float32))
    for name in ("wide.npy", "float.npy"):
        got = matrices.load_matrix(tmp_path / name, "int8")
        assert got.dtype == np.int8 and np.array_equal(got, a), name
    ops = matrices.generate_operands(9, 7, 5, "int8", seed=1)
    matrices.save_operands(tmp_path / "ab.npz", ops)
    back = matrices.load_operands(tmp_path / "ab.npz", None, "int8")
    assert back.element is INT8 and np.array_equal(back.a, ops.a) and np.array_equal(back.b, ops.b)
    with pytest.raises(MatrixInputError, match="holds int8 matrices"):
        matrices.load_operands(tmp_path / "ab.npz", None, "int32")


@pytest.mark.parametrize("value,words", [("128", ["outside the int8 range [-128, 127]", "128"]),
                                         ("-129", ["outside the int8 range", "-129"]),
                                         ("2.5", ["not a whole number", "2.5"])])
def test_a_text_file_with_a_value_int8_cannot_hold_is_refused_at_its_first_entry(tmp_path, value, words):
    (tmp_path / "a.csv").write_text(f"1,2,3\n4,5,{value}\n{value},0,0\n")
    with pytest.raises(MatrixInputError) as info:
        matrices.load_matrix(tmp_path / "a.csv", "int8")
    msg = str(info.value)
    assert all(w in msg for w in words) and "at [1, 2]" in msg and "2 values" in msg, msg
    (tmp_path / "ok.csv").write_text("1,2,3\n4,5,127\n-128,0,0\n")
    assert matrices.load_matrix(tmp_path / "ok.csv", "int8").dtype == np.int8


def test_raw_bytes_are_not_read_as_int8(tmp_path):
    # an FP8 array saved as raw bytes names no type: int8 would misread its bits
    np.save(tmp_path / "a.npy", np.zeros((3, 3), dtype="V1"))
    with pytest.raises(MatrixInputError, match="choose float8_e4m3 or float8_e5m2"):
        matrices.load_matrix(tmp_path / "a.npy", "int8")


# --- verification -----------------------------------------------------------------------

@pytest.mark.parametrize("method", ["full", "freivalds"])
def test_verification_is_exact(method):
    ops = matrices.generate_operands(67, 45, 300, "int8", seed=9)
    ref = Reference(ops.a, ops.b, spec=TypeSpec("int8"), force_method=method)
    c = _exact(ops.a, ops.b)
    verdict = ref.check(c)
    assert verdict.passed and verdict.tolerance == 0.0 and verdict.max_abs == 0.0
    wrong = c.copy()
    wrong[40, 17] += 1                                       # one entry off by one
    assert not ref.check(wrong).passed
    if method == "full":
        assert "first at [40, 17]" in ref.check(wrong).detail
    poisoned = c.copy()
    poisoned[32:, 16:] = INT_POISON                          # an unwritten tile
    assert not ref.check(poisoned).passed
    assert not ref.quick_check(poisoned).passed


def test_a_float32_sum_is_not_exact_enough():
    # 4096 products of 100..127 sum to about 2²⁶: FP32 rounds them, the exact check sees it
    ops = matrices.generate_operands(16, 16, 4096, "int8", seed=3, low=100, high=127)
    c = (ops.a.astype(np.float32) @ ops.b.astype(np.float32)).astype(np.int32)
    assert not np.array_equal(c, _exact(ops.a, ops.b))
    assert not Reference(ops.a, ops.b, spec=TypeSpec("int8")).check(c).passed


def test_the_reference_wraps_to_int32_as_the_kernels_do():
    k = 140_000                                              # 140000 · 128² > 2³¹
    a = np.full((1, k), -128, dtype=np.int8)
    ref = Reference(a, a.T.copy(), spec=TypeSpec("int8"))
    assert int(ref.expected[0, 0]) == (k * 128 * 128 + 2**31) % 2**32 - 2**31


# --- kernel files and their defines ------------------------------------------------------

def _cuda_header(tmp_path, extra: str, suffix: str = ".cu"):
    return minimal_kernel_header(tmp_path, extra, "my_int8", suffix)


def test_a_cuda_file_declares_int8_with_precision_int8_and_only_so(tmp_path):
    h = _cuda_header(tmp_path, 'dtypes = ["int8"]\nlayouts = ["kn", "nk"]\nprecision = "int8"')
    assert h.dtypes == ("int8",) and h.precision == "int8" and h.layouts == ("kn", "nk")
    assert _cuda_header(tmp_path, 'dtypes = ["int8"]').precision == "int8"      # its default
    for extra, words in [('dtypes = ["int8"]\nprecision = "fp8"', 'precision "int8" goes with'),
                         ('dtypes = ["float32"]\nprecision = "int8"', 'precision "int8" goes with'),
                         ('dtypes = ["int8", "int32"]', "mixes int8 with int32")]:
        with pytest.raises(KernelFileError, match=words):
            _cuda_header(tmp_path, extra)


def test_opencl_and_triton_files_declaring_int8_are_refused(tmp_path):
    with pytest.raises(KernelFileError, match="int8 is for CUDA C kernels"):
        _cuda_header(tmp_path, 'dtypes = ["int8"]', ".cl")
    text = ('"""\n+++\nname = "x"\ntitle = "t"\nsource = "s"\ndtypes = ["int8"]\n[params]\n'
            'block = [16]\n\n[launch]\ngrid = ["1", "1"]\n+++\n"""\n')
    with pytest.raises(KernelFileError, match="int8 is for CUDA C kernels"):
        parse_header(tmp_path / "k.py", text)


def test_defines_build_int8_with_an_int32_c_only(tmp_path):
    v = registry.variant_from_headers([_cuda_header(tmp_path, 'dtypes = ["int8"]\nlayouts = ["kn", "nk"]')])
    assert v.defines({"bs": 16}, "int8") == {"ELEM": "signed char", "ACC": "int", "OUT": "int", "BS": "16"}
    assert v.defines({"bs": 16}, "int8", "int32", "nk")["B_NK"] == "1"
    for out in ("float32", "bfloat16"):
        with pytest.raises(ValueError, match="int8 inputs write C as int32"):
            v.defines({"bs": 16}, "int8", out)
    with pytest.raises(ValueError, match="not int8"):         # a float32 kernel is never built for bytes
        registry.get("tiled").defines({"block": 16}, "int8")
    assert v.check("cuda", {"bs": 16}, 127, 61, 253, "int8", "nk") is None
    assert "does not support int8" in registry.get("tiled").check("cuda", {"block": 16}, 16, 16, 16, "int8")
    assert not registry.takes_scale(v)           # (A, B, C, M, N, K): no FP8 scale argument


# --- cuBLASLt's int8 line, nvmath's binding stood in ---------------------------------------

class _FakeLt:
    """nvmath.bindings.cublasLt as CublasLt calls it: enums, handles as numbers, every call
    recorded (the attribute values read from the memory they point at)."""

    class MatmulDescAttribute:
        TRANSA = 3
        TRANSB = 4

    class MatmulPreferenceAttribute:
        MAX_WORKSPACE_BYTES = 1

    class MatmulHeuristicResult:
        def __init__(self, count):
            self.ptr = 4242

    def __init__(self):
        self.calls = []

    def create(self):
        return 7

    def get_version(self):
        return 130000

    def destroy(self, handle):
        self.calls.append(("destroy", handle))

    def matmul_desc_create(self, compute, scale):
        self.calls.append(("desc", compute, scale))
        return 11

    def matmul_desc_set_attribute(self, desc, attr, ptr, size):
        self.calls.append(("desc_attr", attr, ctypes.c_int32.from_address(ptr).value))

    def matrix_layout_create(self, dtype, rows, cols, ld):
        self.calls.append(("layout", dtype, rows, cols, ld))
        return 20 + len([c for c in self.calls if c[0] == "layout"])

    def matmul_preference_create(self):
        return 30

    def matmul_preference_set_attribute(self, pref, attr, ptr, size):
        pass

    def matmul_algo_get_heuristic(self, handle, desc, a, b, c, d, pref, wanted, found, count_ptr):
        ctypes.c_int32.from_address(count_ptr).value = 1

    def matmul(self, handle, desc, alpha, a, a_l, b, b_l, beta, c, c_l, d, d_l, algo, ws, ws_bytes, stream):
        self.calls.append(("matmul", ctypes.c_int32.from_address(alpha).value,
                           ctypes.c_int32.from_address(beta).value, a, a_l, b, b_l, c, d, stream))

    def matmul_desc_destroy(self, obj):
        pass

    def matrix_layout_destroy(self, obj):
        pass

    def matmul_preference_destroy(self, obj):
        pass


def _cuda_backend(layout: str, monkeypatch) -> tuple[CudaBackend, _FakeLt]:
    lt = _FakeLt()
    monkeypatch.setattr(cublas_mod, "_import_binding", lambda name, what, library: lt)
    be = CudaBackend()
    be.drv, be.ctx, be.arch, be.type_spec = FakeDriver(), FakeContext(), "sm_90", TypeSpec("int8", None, layout)
    return be, lt


def test_cublaslt_int8_line_calls_cublaslt_in_the_tn_form_with_int32_sums(monkeypatch):
    v = registry.get("cublaslt_int8")
    assert (v.library, v.precision, v.role, v.dtypes) == ("cublaslt", "int8", "reference", ("int8",))
    assert registry.reference_for("cuda", "int8") == "cublaslt_int8"
    assert registry.references_by_precision()["int8"] == "cublaslt_int8"
    be, lt = _cuda_backend("nk", monkeypatch)
    kernel = be.compile(v, {}, "int8")
    types = kernel.handle[2]
    assert (types.ab, types.c, types.compute, types.scale) == (3, 10, 72, 10)   # 8I, 32I, COMPUTE_32I, 32I
    assert "A and B int8, C int32, int32 accumulation" in kernel.report
    m, n, k = 8, 12, 16
    a = np.arange(m * k, dtype=np.int64).reshape(m, k).astype(np.int8)
    b = np.arange(k * n, dtype=np.int64).reshape(k, n).astype(np.int8)
    ws = be.prepare(a, b)
    assert [(c[2], c[3]) for c in be.drv.calls] == [(np.int8, (m, k)), (np.int8, (n, k))]   # B as N×K
    be.ensure_output(ws, (m, n))
    assert ws.dtype == np.int32 and ws.c.nbytes == m * n * 4
    be.poison_output(ws)
    assert be.drv.calls[-1] == ("d32", int(ws.c), int(INT_POISON.view(np.uint32)), m * n)
    be._launch(kernel, ws, m, n, k)
    assert ("desc", 72, 10) in lt.calls
    assert ("desc_attr", 3, 1) in lt.calls and ("desc_attr", 4, 0) in lt.calls      # TRANSA = T, TRANSB = N
    layouts = [c[1:] for c in lt.calls if c[0] == "layout"]
    assert layouts == [(3, k, n, k), (3, k, m, k), (10, n, m, n)]   # B (ld K), A (ld K), C (ld N)
    (call,) = [c for c in lt.calls if c[0] == "matmul"]
    _, alpha, beta, first, _al, second, _bl, c_ptr, d_ptr, stream = call
    assert (alpha, beta) == (1, 0) and (first, second) == (int(ws.b), int(ws.a))
    assert c_ptr == d_ptr == int(ws.c) and stream == 0


def test_cublaslt_int8_refuses_b_as_k_by_n_other_outputs_and_scales(monkeypatch):
    be, lt = _cuda_backend("kn", monkeypatch)
    with pytest.raises(cublas_mod.LibraryUnavailable, match="int8 GEMM takes B as N×K only"):
        be.compile(registry.get("cublaslt_int8"), {}, "int8")
    with pytest.raises(BackendError, match="writes C as int32, not float32"):
        cublas_mod.lt_types("int8", "float32")
    g = cublas_mod.CublasLt().ensure()
    with pytest.raises(BackendError, match="takes no scale"):
        g.gemm(1, 2, 3, 4, 4, 4, cublas_mod.lt_types("int8"), 0.5, 0, 0)
    assert not [c for c in lt.calls if c[0] == "matmul"]
    # FP8 keeps its own types through the same class
    fp8 = cublas_mod.lt_types("float8_e4m3")
    assert (fp8.ab, fp8.c, fp8.compute, fp8.scale) == (28, 14, 68, 0)


def test_cublaslt_int8_skips_k_off_its_multiples_of_4():
    why = refusal("cuda", "cublaslt_int8", {}, (127, 61, 253), "int8", "nk")
    assert "multiple of 4" in why and "K = 253" in why
    assert "K = 18" in refusal("cuda", "cublaslt_int8", {}, (128, 64, 18), "int8", "nk")
    # M and N are free (cuBLASLt 13.1 ran 127×64×256 and 128×62×256 exactly on an H200)
    for shape in ((127, 64, 256), (128, 62, 256), (127, 61, 20)):
        assert refusal("cuda", "cublaslt_int8", {}, shape, "int8", "nk") is None, shape
    assert "does not support float8_e4m3" in refusal("cuda", "cublaslt_int8", {}, (64, 64, 64),
                                                     "float8_e4m3", "nk")
    assert "does not support int8" in refusal("cuda", "cublaslt_fp8", {}, (64, 64, 64), "int8", "nk")


# --- peaks, % of peak and of cuBLAS ------------------------------------------------------

def test_int8_peaks_per_architecture():
    h100, notes = peaks.cuda_peaks(9, 0, 132, 1830.0)
    assert h100["int8"] == pytest.approx(1_978_859.52)               # 1979 TOPS
    assert any("peak int8 = 132 SMs × 8192" in n for n in notes)
    a100, _ = peaks.cuda_peaks(8, 0, 108, 1410.0)
    assert a100["int8"] == pytest.approx(623_738.88)                 # 624 TOPS
    assert peaks.int8_ops_per_clock(8, 9) == 1024 and peaks.int8_ops_per_clock(10, 0) == 16384
    assert peaks.int8_ops_per_clock(7, 5) == 2048 and "int8" not in peaks.cuda_peaks(7, 0, 80, 1530.0)[0]
    assert peaks.precision_of("int8", "int8") == "int8" == peaks.precision_of("fp32", "int8")
    assert peaks.LABELS["int8"] == "int8 tensor core" and "int8" in peaks.PRECISIONS
    dev = DeviceInfo(backend="cuda", index=0, name="gpu", peak_gops_int8=2000.0, peak_gops_int32=100.0)
    assert dev.peaks()["int8"] == 2000.0 and dict(dev.rows())["Peak int8 tensor (est.)"] == "2,000 GOP/s"
    rec = _rec("cublaslt_int8", 1.0)
    rec.gflops = 500.0
    fill_ceilings(rec, "int8", dev)
    assert rec.precision == "int8" and rec.pct_of_peak == pytest.approx(25.0)


def _rec(variant, ms, dtype="int8", m=1024):
    return ResultRecord(backend="cuda", device="gpu", variant=variant, params={}, m=m, n=m, k=m,
                        dtype=dtype, mode="hot", warmup=0, repeats=1, timestamp="", versions="",
                        flops=2 * m ** 3, bytes=0, median_ms=ms)


def test_pct_of_cublas_is_of_cublaslts_int8_line(tmp_path, monkeypatch):
    mine = registry.variant_from_headers([_cuda_header(tmp_path, 'dtypes = ["int8"]')])
    monkeypatch.setitem(registry.REGISTRY, mine.name, mine)
    recs = [_rec("cublaslt_int8", 1.0), _rec("my_int8", 4.0), _rec("cublas_fp32", 0.5, "float32")]
    fill_pct_of_cublas(recs)
    assert recs[1].pct_of_cublas == pytest.approx(25.0)      # against int8's line, not FP32's
    assert registry.best_rung("cuda", "int8") in (None, "int8_wgmma")


# --- the cpu backend ---------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("m,n,k,low", [(127, 253, 61, None),     # odd, int8's whole range
                                       (16, 16, 4096, 100)])     # sums past FP32's 2²⁴
def test_cpu_backend_computes_the_exact_int8_product(layout, m, n, k, low):
    ops = matrices.generate_operands(m, n, k, "int8", seed=11, low=low)
    be = CpuBackend()
    be.type_spec = TypeSpec("int8", None, layout)
    ws = be.prepare(ops.a, ops.b)
    be.ensure_output(ws, (m, n))
    be.poison_output(ws)
    assert (ws.c == INT_POISON).all()
    c = be.run_once(be.compile(registry.get("cpu_numpy"), {}, "int8"), ws, m, n, k)
    assert c.dtype == np.int32 and np.array_equal(c, _exact(ops.a, ops.b))


def test_cpu_backend_wraps_long_sums_as_the_kernels_do():
    k = 140_000
    a = np.full((1, k), -128, dtype=np.int8)
    be = CpuBackend()
    be.type_spec = TypeSpec("int8")
    ws = be.prepare(a, a.T.copy())
    be.ensure_output(ws, (1, 1))
    c = be.run_once(be.compile(registry.get("cpu_numpy"), {}, "int8"), ws, 1, 1, k)
    assert int(c[0, 0]) == (k * 128 * 128 + 2**31) % 2**32 - 2**31


def test_a_cpu_run_records_int8_exactly_and_its_file_keeps_it(tmp_path):
    plan = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(127, 253, 61)], dtype="int8",
                layout="nk", warmup=1, repeats=2)
    plan.validate()
    (rec,), _ = run_plan(plan)
    assert rec.status == "ok" and rec.passed, rec.error
    assert (rec.dtype, rec.out_dtype, rec.layout, rec.precision) == ("int8", "int32", "nk", "int8")
    assert rec.max_abs == 0.0 and rec.bytes == (127 * 61 + 61 * 253) + 127 * 253 * 4
    assert math.isnan(rec.scale_a)
    records.save([rec], tmp_path / "r.json")
    (back,) = records.load_file(tmp_path / "r.json").records
    assert (back.dtype, back.out_dtype, back.precision) == ("int8", "int32", "int8")


# --- backends that take no int8 ------------------------------------------------------------

def test_opencl_skips_int8_with_the_reason():
    why = backend_refusal("opencl", INT8)
    assert "no OpenCL kernel of the lab takes int8" in why and "never run as int32" in why
    assert backend_refusal("cuda", INT8) is None and backend_refusal("cpu", INT8) is None
    assert refusal("opencl", "naive", {"block": 8}, (16, 16, 16), "int8") == why
    with pytest.raises(BackendError, match="no OpenCL kernel of the lab takes int8"):
        OpenCLBackend().compile(registry.get("naive"), {"block": 8}, "int8")


def test_an_opencl_run_of_int8_is_skipped_saying_why():
    require_backend("opencl")
    plan = Plan(backend="opencl", items=[("naive", {"block": 8})], shapes=[(16, 16, 16)],
                dtype="int8", warmup=0, repeats=1)
    (rec,), _ = run_plan(plan)
    assert rec.status == "skipped" and "no OpenCL kernel of the lab takes int8" in rec.error


def test_no_triton_kernel_takes_int8():
    tritons = [v for v in registry.REGISTRY.values() if v.is_triton]
    assert tritons
    for v in tritons:
        for backend in v.backends:
            assert "does not support int8" in refusal(backend, v.name, v.default_params(),
                                                      (16, 16, 16), "int8")


# --- the command line ----------------------------------------------------------------------

def test_bench_runs_int8_and_says_it_is_exact(capsys, tmp_path):
    out_path = tmp_path / "r.json"
    code = main.main(["bench", "--backend", "cpu", "--sizes", "24", "--dtype", "int8", "--dist",
                      "normal", "--quiet", "--repeats", "1", "--warmup", "0", "--in-process",
                      "--out", str(out_path)])
    out, err = capsys.readouterr()
    flat_err, flat_out = " ".join(err.split()), " ".join(out.split())
    assert code == 0, err
    assert "--dist normal: int8 matrices are always whole numbers from -128 to 127" in flat_err
    assert "exact" in flat_out
    saved = json.loads(out_path.read_text())
    rows = saved["records"] if isinstance(saved, dict) else saved
    assert {(r["dtype"], r["out_dtype"]) for r in rows} == {("int8", "int32")}
    code = main.main(["bench", "--backend", "cpu", "--sizes", "24", "--dtype", "int8",
                      "--out-dtype", "float32", "--quiet", "--in-process"])
    _out, err = capsys.readouterr()
    assert code == 2 and "int8 cannot write float32" in " ".join(err.split())
