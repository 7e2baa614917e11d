"""Triton in half precision and FP8 without a GPU: the built-in rungs triton_grouped_half
and triton_grouped_fp8 (registration, types, layouts), the signature and strides the
backends hand a kernel in each type and layout (FP8's scale after K), check-kernel's
compile of each distinct code path for sm_90 (no spills), and the cpu backend's
interpreter at an odd shape: float16 and FP8 verify in both layouts, bfloat16 is refused
with its reason, and wrong kernels fail. Fresh random inputs. On a GPU:
tests/test_triton_gpu.py."""
from __future__ import annotations

import importlib.util
import secrets

import pytest

from engine.common.dtypes import TypeSpec
from engine.kernels import registry, user_kernels
from engine.kernels.kernel_file import parse_header
from engine.measure import peaks, triton_kernels as tk
from engine.measure.kernel_check import check_kernel
from engine.measure.timing import TimingMode
from engine.run.runner import Plan
from tests.helpers import run_plan

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                  reason="Triton is not installed (requirements-triton.txt)")
SEED = secrets.randbelow(2**31)
#: M, N, K: 67×45 · 45×91, partial tiles on every side and K shorter than one k-step
ODD = (67, 91, 45)
HALF, FP8 = "triton_grouped_half", "triton_grouped_fp8"
HALF_FILE = registry.ROOT / "triton" / "grouped_half.py"
FP8_FILE = registry.ROOT / "triton" / "grouped_fp8.py"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(user_kernels.DATA_DIR_ENV, str(tmp_path / "data"))
    yield tmp_path
    user_kernels.unload_user_kernels()


# --- registration (no Triton needed) ------------------------------------------------------

@pytest.mark.parametrize("name, precision, dtypes", [
    (HALF, "half", ("float16", "bfloat16")), (FP8, "fp8", ("float8_e4m3", "float8_e5m2"))])
def test_the_half_and_fp8_rungs_are_registered_in_their_types_and_both_layouts(name, precision,
                                                                               dtypes):
    assert not registry.BUILTIN_PROBLEMS
    v = registry.get(name)
    assert v.is_triton and v.role == "rung" and v.precision == precision
    assert v.dtypes == dtypes and v.layouts == ("kn", "nk")
    assert set(v.sources) == {"cuda", "cpu"} and len(v.technique) <= 100
    assert set(v.descriptions) == set(v.space)
    p = v.default_params()
    for dtype in dtypes:
        for layout in ("kn", "nk"):
            assert v.check("cuda", p, 4096, 4096, 4096, dtype, layout) is None
            assert v.check("cpu", p, *ODD, dtype, layout) is None
    assert v.check("cuda", p, 4096, 4096, 4096, "float32") is not None
    # a 128×256 tile on 4 warps would need 256 FP32 accumulators a thread: left out
    spills = dict(p, block_m=128, block_n=256, num_warps=4)
    assert "accumulators" in v.check("cuda", spills, 4096, 4096, 4096, dtypes[0])
    # they stand beside the CUDA ladder of their precision, not atop it
    assert registry.best_rung("cuda", precision) != name
    assert name not in registry.ladder_names()


def test_a_triton_header_takes_half_and_fp8_types_and_b_as_nk_but_not_int32(tmp_path):
    def text(extra: str) -> str:
        return (f'"""\n+++\nname = "x"\ntitle = "t"\nsource = "s"\n{extra}\n[params]\n'
                'block = [16]\n\n[launch]\ngrid = ["1", "1"]\n+++\n"""\n')
    h = parse_header(tmp_path / "k.py", text('dtypes = ["bfloat16", "float16"]\nlayouts = ["kn", "nk"]'))
    assert h.dtypes == ("bfloat16", "float16") and h.layouts == ("kn", "nk") and h.precision == "half"
    h = parse_header(tmp_path / "k.py", text('dtypes = ["float8_e5m2"]'))
    assert h.precision == "fp8" and h.layouts == ("kn",)
    with pytest.raises(Exception, match="tl.dot multiplies no int32"):
        parse_header(tmp_path / "k.py", text('dtypes = ["int32"]'))


# --- what the launch hands a kernel (no Triton needed) ------------------------------------

@pytest.mark.parametrize("name, dtype, output, a_ptr, c_ptr", [
    (HALF, "float16", None, "*fp16", "*fp32"),
    (HALF, "float16", "float16", "*fp16", "*fp16"),
    (HALF, "bfloat16", None, "*bf16", "*fp32"),
    (HALF, "bfloat16", "bfloat16", "*bf16", "*bf16"),
    (FP8, "float8_e4m3", None, "*fp8e4nv", "*bf16"),
    (FP8, "float8_e5m2", "float32", "*fp8e5", "*fp32"),
    ("triton_grouped_fp32", "float32", None, "*fp32", "*fp32"),
])
def test_the_signature_types_the_pointers_as_the_launch_does(name, dtype, output, a_ptr, c_ptr):
    v = registry.get(name)
    sig = tk.signature(v, dtype, output)
    assert (sig["A"], sig["B"], sig["C"]) == (a_ptr, a_ptr, c_ptr)
    scale = ["scale"] if v.precision == "fp8" else []
    assert list(sig)[:6 + len(scale)] == ["A", "B", "C", "M", "N", "K", *scale]
    assert all(sig[s] == "i32" for s in ("M", "N", "K", "stride_am", "stride_bk", "stride_bn"))
    if scale:
        assert sig["scale"] == "fp32"
    # the launch's arguments, in the same order and types (no GPU: the objects alone)
    kern = tk.GpuTritonKernel(v, v.default_params(), fn=None,
                              types=TypeSpec(dtype, output, "nk"))
    args = kern._args((4096, 8192, 12288), 67, 91, 45, scale=0.25)
    assert ["*" + a.dtype for a in args[:3]] == [a_ptr, a_ptr, c_ptr]
    assert [a.data_ptr() for a in args[:3]] == [4096, 8192, 12288]
    assert args[3:6] == (67, 91, 45)
    assert args[6:6 + len(scale)] == ((0.25,) if scale else ())
    assert args[6 + len(scale):] == (45, 1, 1, 45, 91, 1)
    assert len(args) == len(sig) - len(tk.expected_arguments(v)[1])


def test_b_as_nk_is_handed_over_by_its_strides():
    v = registry.get(HALF)
    m, n, k = ODD
    assert tk.strides(v, m, n, k) == (k, 1, n, 1, n, 1)
    assert tk.strides(v, m, n, k, "nk") == (k, 1, 1, k, n, 1)     # stride_bk = 1, stride_bn = K
    assert tk.unit_strides(v, "kn") == ("stride_ak", "stride_bn", "stride_cn")
    assert tk.unit_strides(v, "nk") == ("stride_ak", "stride_bk", "stride_cn")
    special = tk.aligned_specialization(registry.get(FP8), "nk")
    assert "scale" not in special.multiples_of_16 and "stride_bk" not in special.multiples_of_16
    assert {"A", "B", "C", "M", "N", "K", "stride_bn"} <= set(special.multiples_of_16)


def test_the_interpreter_refuses_bfloat16_and_says_why():
    assert tk.interpreter_type_problem("float16") is None
    assert tk.interpreter_type_problem("float8_e4m3") is None
    assert tk.interpreter_type_problem("float32") is None
    why = tk.interpreter_type_problem("bfloat16")
    assert "bfloat16" in why and "integers" in why and "cuda" in why


# --- check-kernel: Triton's compile for sm_90, one combination per code path ----------------

#: the default tile, and the widest one each file allows on 4 warps (its most registers;
#: FP8 keeps partial sums beside its sums: 64 × 128)
CHECKED = {HALF_FILE: [dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3),
                       dict(block_m=64, block_n=256, block_k=64, num_warps=4, num_stages=3)],
           FP8_FILE: [dict(block_m=128, block_n=128, block_k=128, num_warps=8, num_stages=3),
                      dict(block_m=64, block_n=128, block_k=128, num_warps=4, num_stages=3)]}


@needs_triton
@pytest.mark.parametrize("path, dtype, layout", [
    (HALF_FILE, "float16", "kn"), (HALF_FILE, "bfloat16", "nk"),
    (FP8_FILE, "float8_e4m3", "kn"), (FP8_FILE, "float8_e4m3", "nk")])
def test_check_kernel_compiles_the_new_rungs_for_sm_90_without_spills(path, dtype, layout):
    rep = check_kernel(path, dtype=dtype, layout=layout, combos=CHECKED[path], arch="sm_90", workers=2)
    assert rep.ok and rep.target == "Triton for sm_90a" and rep.layout == layout, rep.text()
    assert len(rep.combos) == 2 and all(c.built for c in rep.combos), rep.text()
    for c in rep.combos:
        assert 0 < c.registers <= 255 and c.spill_stores == 0 and c.spill_loads == 0, rep.text()
        assert c.shared_dynamic > 0 and c.block_threads == 32 * c.params["num_warps"]
    if path == FP8_FILE:
        # FP8 wgmma reads B K-major: as N×K cp.async stages B's tiles like A's; as K×N
        # Triton transposes each B tile through registers and stages only A's
        deep = rep.combos[0].params["num_stages"] * (128 + 128) * 128
        assert (rep.combos[0].shared_dynamic == deep) == (layout == "nk"), rep.text()


@needs_triton
def test_check_kernel_takes_the_headers_first_type_and_refuses_a_layout_it_lacks():
    rep = check_kernel(HALF_FILE, combos=CHECKED[HALF_FILE][:1], workers=1)
    assert rep.ok and rep.dtype == "float16" and rep.layout == "kn", rep.text()
    fp32 = registry.ROOT / "triton" / "grouped_fp32.py"
    refused = check_kernel(fp32, layout="nk")
    assert not refused.ok and "K×N only" in refused.problem


# --- the interpreter (the cpu backend) -----------------------------------------------------

def _cpu_plan(items, dtype, layout, out_dtype=None, kernel_files=()) -> Plan:
    return Plan(backend="cpu", items=items, shapes=[ODD], warmup=0, repeats=1, seed=SEED,
                dtype=dtype, out_dtype=out_dtype, layout=layout, kernel_files=kernel_files)


@needs_triton
@pytest.mark.parametrize("name, dtype, out_dtype, layout", [
    (HALF, "float16", None, "kn"), (HALF, "float16", None, "nk"),
    (HALF, "float16", "float16", "nk"),
    (FP8, "float8_e4m3", None, "kn"), (FP8, "float8_e5m2", "float32", "nk")])
def test_the_rungs_verify_through_the_interpreter_at_an_odd_shape(name, dtype, out_dtype, layout):
    v = registry.get(name)
    recs, _ = run_plan(_cpu_plan([(name, v.default_params())], dtype, layout, out_dtype))
    (r,) = recs
    assert r.status == "ok" and r.passed is True and r.verify_method == "full", (SEED, r.error)
    assert r.precision == peaks.precision_of(v.precision, dtype) and r.dtype == dtype
    assert r.timing_mode == TimingMode.INTERPRETER


@needs_triton
def test_bfloat16_is_refused_by_the_interpreter_with_its_reason():
    v = registry.get(HALF)
    recs, _ = run_plan(_cpu_plan([(HALF, v.default_params()), ("cpu_numpy", {})], "bfloat16", "kn"))
    by = {r.variant: r for r in recs}
    assert by["cpu_numpy"].passed is True
    err = by[HALF].error or ""
    assert by[HALF].passed is not True and "bfloat16" in err and "interpreter" in err, err


@needs_triton
@pytest.mark.parametrize("name, dtype, wrong", [
    # C off by 1 %: far beyond FP16 inputs' FP32-output tolerance
    (HALF, "float16", ("acc.to(C.dtype.element_ty)", "(acc * 1.01).to(C.dtype.element_ty)")),
    # FP8 without the per-tensor scales (C = A·B, not scale_a·scale_b·A·B)
    (FP8, "float8_e4m3", ("c = acc * scale", "c = acc")),
])
def test_a_wrong_half_or_fp8_kernel_fails_verification_beside_the_right_one(folder, name, dtype,
                                                                             wrong):
    text = (HALF_FILE if name == HALF else FP8_FILE).read_text()
    assert wrong[0] in text
    bad_name = "bad_" + name
    bad = folder / f"{bad_name}.py"
    bad.write_text(text.replace(wrong[0], wrong[1]).replace(f'name = "{name}"', f'name = "{bad_name}"'))
    params = registry.get(name).default_params()
    recs, _ = run_plan(_cpu_plan([(name, params), (bad_name, params)], dtype, "nk",
                                 kernel_files=(str(bad),)))
    by = {r.variant: r for r in recs}
    assert by[name].passed is True, (SEED, by[name].error)
    assert by[bad_name].passed is False and "wrong result" in by[bad_name].error, SEED
