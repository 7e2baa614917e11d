"""Half precision and FP8 on the host (issue 39 §1 and §4): generation, files in and out
per type, overflow refused at its first entry, FP8 scales refused, the tolerance formula
against numpy's own error, records naming the types, the cpu backend's runs and the
refusals of backends that have no kernel for a type."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("ml_dtypes")

from engine.common.dtypes import (ELEMENT_NAMES, ElementType, Layout, TypeSpec,  # noqa: E402
                                  backend_refusal, check_scale)
from engine.inputs import matrices  # noqa: E402
from engine.inputs.matrices import MatrixInputError  # noqa: E402
from engine.measure.verify import Reference, type_tolerance  # noqa: E402
from engine.results import records  # noqa: E402
from engine.run.runner import Plan  # noqa: E402
from tests.helpers import run_plan  # noqa: E402

#: The float tensor-core types (int8 is exact: tests/test_int8_host.py)
LOW = [t for t in ElementType if t.is_low_precision and not t.is_integer]
FP8 = [ElementType.FLOAT8_E4M3, ElementType.FLOAT8_E5M2]


def _f64(x):
    return np.asarray(x).astype(np.float64)


# --- generation -------------------------------------------------------------------------

@pytest.mark.parametrize("element", LOW, ids=str)
def test_generated_inputs_are_in_their_type_and_fit_it(element):
    ops = matrices.generate_operands(33, 17, 29, str(element), seed=5)
    assert ops.a.dtype == element.numpy_dtype and ops.b.dtype == element.numpy_dtype
    assert ops.a.shape == (33, 29) and ops.b.shape == (29, 17)
    assert np.isfinite(_f64(ops.a)).all() and np.isfinite(_f64(ops.b)).all()
    again = matrices.generate_operands(33, 17, 29, str(element), seed=5)
    assert np.array_equal(_f64(again.a), _f64(ops.a))          # a seed fixes the set
    if element.is_float8:
        # scaled into the range: the largest magnitude is the type's largest value
        assert np.abs(_f64(ops.a)).max() == element.max_finite
        assert 0 < ops.scale_a < 1 and 0 < ops.scale_b < 1
    else:
        assert (ops.scale_a, ops.scale_b) == (1.0, 1.0)
        assert np.abs(_f64(ops.a)).max() <= 1.0                 # U[-1, 1] rounded


def test_fp8_scale_times_values_is_the_draw():
    # the float draw ≈ scale · FP8 value, within FP8's rounding
    ops = matrices.generate_operands(40, 8, 40, "float8_e4m3", seed=2)
    draw = np.random.default_rng(2).uniform(-1.0, 1.0, size=(40, 40))
    rel = np.abs(_f64(ops.a) * ops.scale_a - draw) / np.maximum(np.abs(draw), 1e-3)
    assert np.median(rel) < ElementType.FLOAT8_E4M3.unit_roundoff


# --- files ------------------------------------------------------------------------------

@pytest.mark.parametrize("element", LOW, ids=str)
def test_operands_round_trip_through_npz_and_npy(tmp_path, element):
    ops = matrices.generate_operands(9, 7, 5, str(element), seed=1)
    matrices.save_operands(tmp_path / "ab.npz", ops)
    back = matrices.load_operands(tmp_path / "ab.npz", None, str(element))
    assert back.a.dtype == element.numpy_dtype
    assert np.array_equal(_f64(back.a), _f64(ops.a)) and np.array_equal(_f64(back.b), _f64(ops.b))
    assert (back.scale_a, back.scale_b) == (ops.scale_a, ops.scale_b)
    matrices.save_operands(tmp_path / "a.npy", ops)
    assert np.array_equal(_f64(matrices.load_matrix(tmp_path / "a.npy", str(element))), _f64(ops.a))


def test_npz_of_another_type_is_refused(tmp_path):
    matrices.save_operands(tmp_path / "ab.npz",
                           matrices.generate_operands(4, 4, 4, "float8_e5m2", seed=1))
    with pytest.raises(MatrixInputError, match="holds float8_e5m2 matrices"):
        matrices.load_operands(tmp_path / "ab.npz", None, "float8_e4m3")


def test_raw_bytes_without_a_type_name_the_choice(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((3, 3), dtype="V2"))
    with pytest.raises(MatrixInputError, match="choose bfloat16"):
        matrices.load_matrix(tmp_path / "a.npy", "float32")


def test_text_is_rounded_with_a_note(tmp_path):
    (tmp_path / "a.csv").write_text("0.1,1\n2,3\n")
    (tmp_path / "b.csv").write_text("1,0\n0,1\n")
    ops = matrices.load_operands(tmp_path / "a.csv", tmp_path / "b.csv", "bfloat16")
    assert "1 of 4 values rounded to bfloat16" in ops.note
    assert _f64(ops.a)[0, 0] == float(np.array(0.1).astype(ElementType.BFLOAT16.numpy_dtype))


@pytest.mark.parametrize("element,value", [("float16", 70000.0), ("float8_e4m3", 500.0),
                                           ("float8_e5m2", 70000.0), ("bfloat16", 1e39)])
def test_overflow_is_refused_at_its_first_entry(tmp_path, element, value):
    (tmp_path / "a.csv").write_text(f"1,2,3\n4,{value!r},6\n{value!r},0,0\n")
    with pytest.raises(MatrixInputError) as info:
        matrices.load_matrix(tmp_path / "a.csv", element)
    msg = str(info.value)
    assert f"too large for {element}" in msg and "at [1, 1]" in msg and "2 values" in msg


def test_largest_value_of_each_type_loads(tmp_path):
    for element in LOW:
        np.save(tmp_path / "a.npy", np.array([[element.max_finite, -element.max_finite]]))
        out = matrices.load_matrix(tmp_path / "a.npy", str(element))
        assert _f64(out)[0, 0] == element.max_finite


@pytest.mark.parametrize("bad", [0.0, math.nan, math.inf, -math.inf, -1.0, "x"])
def test_bad_scales_are_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="scale"):
        check_scale(bad, "scale_a")
    (tmp_path / "a.csv").write_text("1,2\n3,4\n")
    with pytest.raises(MatrixInputError, match="scale_a"):
        matrices.load_operands(tmp_path / "a.csv", tmp_path / "a.csv", "float8_e4m3", scale_a=bad)
    if isinstance(bad, float):    # stored next to the matrices in an .npz
        np.savez(tmp_path / "ab.npz", a=np.ones((2, 2)), b=np.ones((2, 2)), scale_a=bad,
                 scale_b=1.0)
        with pytest.raises(MatrixInputError, match="scale_a"):
            matrices.load_operands(tmp_path / "ab.npz", None, "float8_e5m2")


def test_output_and_layout_choices():
    assert TypeSpec("float16").output is ElementType.FLOAT32
    assert TypeSpec("bfloat16", "bfloat16").output is ElementType.BFLOAT16
    assert TypeSpec("float8_e4m3").output is ElementType.BFLOAT16
    assert TypeSpec("float8_e5m2", "float32", "nk").layout is Layout.NK
    for element, out in [("float16", "bfloat16"), ("float8_e4m3", "float8_e4m3"),
                         ("float32", "float16")]:
        with pytest.raises(ValueError, match="cannot write"):
            TypeSpec(element, out)
    with pytest.raises(ValueError, match="layout"):
        TypeSpec("float16", None, "mn")


# --- the tolerance ----------------------------------------------------------------------

@pytest.mark.parametrize("element", LOW, ids=str)
@pytest.mark.parametrize("k", [16, 1000, 4096])
def test_tolerance_covers_numpy_and_is_not_loose(element, k):
    """numpy's matmul of the rounded inputs in FP32, written in each output type, passes
    the formula with room, and the formula is within 100× of that measured error where the
    output rounding dominates (a wrong tile, error ≈ 1, stays far above)."""
    ops = matrices.generate_operands(64, 48, k, str(element), seed=k)
    ref = _f64(ops.a) @ _f64(ops.b)
    for out in element.output_choices:
        spec = TypeSpec(element, out)
        c = (ops.a.astype(np.float32) @ ops.b.astype(np.float32)).astype(out.numpy_dtype)
        err = np.linalg.norm(_f64(c) - ref) / np.linalg.norm(ref)
        tol = type_tolerance(spec, k)
        assert err < tol / 2, (spec, err, tol)
        if out is not ElementType.FLOAT32:
            assert tol < 100 * err
        assert Reference(ops.a, ops.b, spec=spec, scale_a=ops.scale_a, scale_b=ops.scale_b)\
            .check(_scaled(c, ops)).passed


def _scaled(c, ops):
    """C as a kernel writes it for FP8: times the scales."""
    return (_f64(c) * ops.scale_a * ops.scale_b).astype(np.asarray(c).dtype)


def test_native_half_accumulation_needs_its_own_u():
    # accumulating in float16 itself (not FP32) is what the formula's u_acc term is for
    ops = matrices.generate_operands(32, 32, 4096, "float16", seed=3)
    ref = _f64(ops.a) @ _f64(ops.b)
    c = np.zeros((32, 32), dtype=np.float16)
    for kk in range(0, 4096, 1):     # a float16 running sum
        c = (c + np.outer(ops.a[:, kk], ops.b[kk]).astype(np.float16)).astype(np.float16)
    err = np.linalg.norm(_f64(c) - ref) / np.linalg.norm(ref)
    assert err > type_tolerance(TypeSpec("float16", "float16"), 4096)


@settings(max_examples=25, deadline=None)
@given(element=st.sampled_from(LOW), m=st.integers(1, 24), n=st.integers(1, 24),
       k=st.integers(1, 64), seed=st.integers(0, 2**16))
def test_reference_passes_a_right_c_and_fails_poison(element, m, n, k, seed):
    ops = matrices.generate_operands(m, n, k, str(element), seed=seed)
    spec = TypeSpec(element, element.output_choices[-1])
    c = (ops.a.astype(np.float32) @ ops.b.astype(np.float32)) * np.float32(ops.scale_a * ops.scale_b)
    c = c.astype(spec.output.numpy_dtype)
    ref = Reference(ops.a, ops.b, spec=spec, scale_a=ops.scale_a, scale_b=ops.scale_b)
    assert ref.check(c).passed
    poisoned = c.copy()
    poisoned[m // 2:, n // 2:] = np.nan           # an unwritten tile, poison in the output type
    assert not ref.check(poisoned).passed
    assert not ref.quick_check(poisoned).passed or ref.method == "full"


def test_unscaled_fp8_output_fails():
    ops = matrices.generate_operands(32, 32, 64, "float8_e4m3", seed=1)
    spec = TypeSpec("float8_e4m3", "float32")
    c = (ops.a.astype(np.float32) @ ops.b.astype(np.float32))     # the scales forgotten
    assert not Reference(ops.a, ops.b, spec=spec, scale_a=ops.scale_a,
                         scale_b=ops.scale_b).check(c).passed


# --- backends and records ---------------------------------------------------------------

@pytest.mark.parametrize("element,out,layout", [
    ("float16", None, "kn"), ("bfloat16", "bfloat16", "nk"), ("float8_e4m3", "float32", "nk"),
    ("float8_e5m2", None, "kn"), ("float32", None, "nk")])
def test_cpu_runs_each_type_and_records_name_it(tmp_path, element, out, layout):
    plan = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(37, 21, 45)], dtype=element,
                out_dtype=out, layout=layout, warmup=1, repeats=3)
    plan.validate()
    recs, _ = run_plan(plan)
    (rec,) = recs
    assert rec.status == "ok" and rec.passed, rec.error
    spec = TypeSpec(element, out, layout)
    assert (rec.dtype, rec.out_dtype, rec.layout) == (element, str(spec.output), layout)
    assert math.isnan(rec.scale_a) != spec.element.is_float8
    records.save(recs, tmp_path / "r.json")
    (back,) = records.load_file(tmp_path / "r.json").records
    assert (back.dtype, back.out_dtype, back.layout) == (rec.dtype, rec.out_dtype, rec.layout)
    assert back.scale_a == rec.scale_a or (math.isnan(back.scale_a) and math.isnan(rec.scale_a))


@pytest.mark.parametrize("element", ["float16", "bfloat16"])
def test_one_input_set_checks_each_output_type_with_its_own_tolerance(element):
    """Runs that share an input set (the same shape, type and seed, back to back) but write C
    in different types each get the reference of their own output type: a half C checked
    with the float32-output tolerance fails (an H200 run of cuBLAS's half line at 4096³ did),
    and a float32 C must not be let through by a half tolerance."""
    shape = [(64, 48, 80)]
    for out in ("float32", element, "float32"):
        plan = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=shape, dtype=element,
                    out_dtype=out, warmup=0, repeats=1, seed=97)
        (rec,), _ = run_plan(plan)
        assert rec.passed and rec.out_dtype == out, (out, rec.error)
        tol = type_tolerance(TypeSpec(element, out), 80)
        assert rec.rel_l2 <= tol


def test_old_records_without_the_new_fields_load(tmp_path):
    plan = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(8, 8, 8)], repeats=2)
    recs, _ = run_plan(plan)
    d = records.to_dict(recs[0])
    for key in ("out_dtype", "layout", "scale_a", "scale_b"):
        d.pop(key, None)
    (tmp_path / "old.json").write_text(json.dumps([d]))
    (back,) = records.load_file(tmp_path / "old.json").records
    assert back.out_dtype == "" and back.layout == ""
    with pytest.raises(records.RecordFieldError, match="layout"):
        records.from_dict(dict(d, layout="diagonal"))


@pytest.mark.parametrize("element", LOW, ids=str)
def test_gpu_backends_skip_with_the_reason(element):
    # the kernels and library lines that declare the type take it (the others refuse by
    # their dtypes: cuBLAS's half line, cuBLASLt's FP8 line, fp8_wgmma...)
    assert backend_refusal("cuda", element) is None
    assert backend_refusal("cuda", element, library="cublas") is None
    opencl = backend_refusal("opencl", element, opencl_fp16=False)
    assert ("cl_khr_fp16" if element is ElementType.FLOAT16 else "OpenCL C has no") in opencl
    assert backend_refusal("cpu", element) is None
    plan = Plan(backend="opencl", items=[("naive", {"block": 8})], shapes=[(16, 16, 16)],
                dtype=str(element))
    from engine.run.runner import refusal
    assert refusal("opencl", "naive", {"block": 8}, (16, 16, 16), str(element))
    assert refusal("cuda", "cublas_fp32", {}, (16, 16, 16), str(element))
    with pytest.raises(ValueError, match="no OpenCL kernel takes it"):
        Plan(backend="opencl", items=plan.items, shapes=plan.shapes, layout="nk").validate()


def test_every_name_is_a_type():
    assert [str(ElementType(n)) for n in ELEMENT_NAMES] == list(ELEMENT_NAMES)
    assert {t.itemsize for t in FP8} == {1}
    assert ElementType.BFLOAT16.unit_roundoff == 2.0**-8
    assert ElementType.FLOAT16.unit_roundoff == 2.0**-11
