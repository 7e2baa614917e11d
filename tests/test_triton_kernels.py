"""Triton kernel files (.py, issue 40) without a GPU: headers and registration, the cpu
backend running them through Triton's interpreter at small odd shapes (fresh random inputs),
a wrong kernel failing verification, files that raise / exit / loop at import costing only
their own item with a file:line message, check-kernel, and Triton missing."""
from __future__ import annotations

import importlib.util
import secrets
import textwrap
from pathlib import Path

import pytest

from engine.kernels import registry, user_kernels
from engine.kernels.kernel_file import KernelFileError, parse_header
from engine.measure.kernel_check import check_kernel
from engine.measure.timing import TimingMode
from engine.run.runner import Plan
from tests.helpers import run_plan

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                  reason="Triton is not installed (requirements-triton.txt)")
SEED = secrets.randbelow(2**31)
ODD = (17, 13, 29)

GOOD = Path(registry.ROOT / "triton" / "grouped_fp32.py").read_text()


def header(name: str, params: str = "block = [16]", launch: str = 'grid = ["cdiv(M, block) * cdiv(N, block)", "1"]',
           extra: str = "") -> str:
    return (f'"""\n+++\nname = "{name}"\ntitle = "a test kernel"\nsource = "tests"\n{extra}\n'
            f"[params]\n{params}\n\n[launch]\n{launch}\n+++\n\"\"\"\n")


SIMPLE_BODY = textwrap.dedent('''
    import triton
    import triton.language as tl


    @triton.jit
    def matmul(A, B, C, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
               BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        tiles_n = tl.cdiv(N, BLOCK)
        rows = (pid // tiles_n) * BLOCK + tl.arange(0, BLOCK)
        cols = (pid % tiles_n) * BLOCK + tl.arange(0, BLOCK)
        ks = tl.arange(0, BLOCK)
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for k0 in range(0, K, BLOCK):
            kk = k0 + ks
            a = tl.load(A + rows[:, None] * stride_am + kk[None, :] * stride_ak,
                        mask=(rows[:, None] < M) & (kk[None, :] < K), other=0.0)
            b = tl.load(B + kk[:, None] * stride_bk + cols[None, :] * stride_bn,
                        mask=(kk[:, None] < K) & (cols[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc, input_precision="ieee")
        acc = acc + WRONG
        tl.store(C + rows[:, None] * stride_cm + cols[None, :] * stride_cn, acc,
                 mask=(rows[:, None] < M) & (cols[None, :] < N))
''')


def kernel_text(name: str, wrong: str = "0.0") -> str:
    return header(name) + SIMPLE_BODY.replace("acc + WRONG", f"acc + {wrong}")


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(user_kernels.DATA_DIR_ENV, str(tmp_path / "data"))
    yield tmp_path
    user_kernels.unload_user_kernels()


# --- headers and registration (no Triton needed) ---------------------------------------------

def test_builtin_triton_rungs_are_registered_for_cuda_and_the_interpreter():
    assert not registry.BUILTIN_PROBLEMS
    for name, precision in (("triton_grouped_fp32", "fp32"), ("triton_grouped_tf32", "tf32")):
        v = registry.get(name)
        assert v.is_triton and v.precision == precision and v.role == "rung"
        assert set(v.sources) == {"cuda", "cpu"} and v.dtypes == ("float32",)
        p = v.default_params()
        # one program per 64×64 tile of C; 32 threads per warp of num_warps
        assert v.launch_geometry(p, 130, 65, 7) == ((3 * 2, 1), (32 * p["num_warps"], 1))
        assert v.check("cpu", p, *ODD, "float32") is None
        assert "interpreter" in v.check("cpu", p, 512, 512, 512, "float32")
        assert v.check("cuda", p, 4096, 4096, 4096, "float32") is None
    # never in a cpu sweep unless named (the interpreter is slow)
    assert not [v for v in registry.default_variants("cpu") if v.is_triton]


@pytest.mark.parametrize("text, line, words", [
    (header("x", launch='grid = ["1", "1"]\nblock = ["16", "16"]'), 12, "num_warps"),
    (header("x", extra='dtypes = ["int32"]'), 6, "tl.dot"),
    (header("x", extra='backend = "opencl"'), 6, "CUDA devices"),
    ("import triton\n" + header("x"), 1, "module docstring"),
    ('"""\nno fences here\n"""\n', 1, "between two lines"),
    ('"""\n+++\nname = "x"\n+++\n', 1, "never ends"),
])
def test_a_bad_py_header_is_one_file_line_message(tmp_path, text, line, words):
    path = tmp_path / "k.py"
    with pytest.raises(KernelFileError) as got:
        parse_header(path, text)
    assert got.value.line == line and words in got.value.message, str(got.value)


def test_listing_a_py_file_never_runs_it(folder):
    """A user folder's .py file registers from its header alone: code that would write a
    file (or exit) at import has not run."""
    marker = folder / "ran"
    path = user_kernels.user_kernel_dir()
    path.mkdir(parents=True)
    (path / "sneaky.py").write_text(header("sneaky") + f"open({str(marker)!r}, 'w').close()\n"
                                    "raise SystemExit(3)\n")
    (path / "__init__.py").write_text("")
    loaded = user_kernels.reload([path])
    assert loaded.names == ["sneaky"] and not loaded.errors
    assert registry.get("sneaky").is_triton and not marker.exists()


# --- the interpreter (needs Triton) ----------------------------------------------------------

@needs_triton
@pytest.mark.parametrize("name", ["triton_grouped_fp32", "triton_grouped_tf32"])
def test_builtin_rungs_verify_through_the_interpreter_at_an_odd_shape(name):
    v = registry.get(name)
    plan = Plan(backend="cpu", items=[(name, v.default_params())], shapes=[ODD], warmup=0,
                repeats=1, seed=SEED)
    recs, _events = run_plan(plan)
    (r,) = recs
    assert r.status == "ok" and r.passed is True and r.verify_method == "full", (SEED, r.error)
    assert r.timing_mode == TimingMode.INTERPRETER and "interpreter" in r.timing_note


@needs_triton
def test_a_wrong_kernel_fails_verification_and_a_right_one_passes(folder):
    good, bad = folder / "good_tri.py", folder / "bad_tri.py"
    good.write_text(kernel_text("good_tri"))
    bad.write_text(kernel_text("bad_tri", wrong="0.001"))     # off by far more than FP32's error
    plan = Plan(backend="cpu", items=[("good_tri", {"block": 16}), ("bad_tri", {"block": 16})],
                shapes=[ODD, (5, 33, 3)], warmup=0, repeats=1, seed=SEED,
                kernel_files=(str(good), str(bad)))
    recs, _ = run_plan(plan)
    by = {(r.variant, r.m): r for r in recs}
    for m in (17, 5):
        assert by[("good_tri", m)].passed is True, (SEED, by[("good_tri", m)].error)
        assert by[("bad_tri", m)].passed is False, SEED


IMPORT_FAILURES = {
    "raises": ("x = 1\nraise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here"),
    "exits": ("import sys\nsys.exit(4)\n", "sys.exit(4)"),
    "syntax": ("def broken(:\n    pass\n", "syntax error"),
}


@needs_triton
@pytest.mark.parametrize("how", sorted(IMPORT_FAILURES))
def test_a_file_failing_at_import_costs_only_its_item(folder, how):
    code, words = IMPORT_FAILURES[how]
    text = header("broken_tri") + code
    path = folder / "broken_tri.py"
    path.write_text(text)
    line = text.split("\n").index(code.split("\n")[-2 if how != "syntax" else 0]) + 1
    plan = Plan(backend="cpu", items=[("broken_tri", {"block": 16}), ("cpu_numpy", {})],
                shapes=[ODD], warmup=0, repeats=1, seed=SEED, kernel_files=(str(path),))
    recs, _ = run_plan(plan)
    by = {r.variant: r for r in recs}
    assert by["cpu_numpy"].status == "ok" and by["cpu_numpy"].passed is True
    err = by["broken_tri"].error or ""
    assert f"{path}:{line}:" in err and words in err, err


@needs_triton
@pytest.mark.slow
def test_an_endless_loop_at_import_is_stopped_and_said(folder):
    text = header("loop_tri") + "while True:\n    pass\n"
    path = folder / "loop_tri.py"
    path.write_text(text)
    plan = Plan(backend="cpu", items=[("loop_tri", {"block": 16}), ("cpu_numpy", {})],
                shapes=[ODD], warmup=0, repeats=1, seed=SEED, kernel_files=(str(path),),
                build_timeout_s=3.0)
    recs, _ = run_plan(plan)
    by = {r.variant: r for r in recs}
    assert by["cpu_numpy"].passed is True
    assert f"{path}:1:" in by["loop_tri"].error and "did not finish" in by["loop_tri"].error


@needs_triton
def test_check_kernel_imports_in_a_child_and_matches_the_signature(tmp_path):
    two = [dict(block_m=64, block_n=64, block_k=32, num_warps=4),
           dict(block_m=128, block_n=128, block_k=64, num_warps=4)]
    ok = check_kernel(registry.ROOT / "triton" / "grouped_tf32.py", combos=two, arch="sm_90")
    assert ok.ok and len(ok.combos) == 2 and all(c.ok and c.built for c in ok.combos), ok.text()
    # Compiled by Triton for sm_90a (no GPU here): registers from ptxas -v, Triton's
    # shared memory for the stages, threads from num_warps.
    small, big = ok.combos
    assert 0 < small.registers <= 255 and small.block_threads == 128
    assert small.shared_dynamic > 0 and big.shared_dynamic > small.shared_dynamic
    assert ok.target == "Triton for sm_90a"
    bad = tmp_path / "sig.py"
    text = header("sig", params="block = [16]\ntile = [2]") + SIMPLE_BODY.replace("WRONG", "0.0")
    bad.write_text(text)
    got = check_kernel(bad)
    assert not got.ok and "TILE" in got.problem
    (d,) = got.diagnostics
    assert d.path == str(bad) and d.line == text.split("\n").index(
        next(x for x in text.split("\n") if x.startswith("def matmul"))) + 1


@needs_triton
def test_check_kernel_puts_a_triton_compile_error_on_its_line(tmp_path):
    """An error Triton finds only when it compiles (a name tl lacks, inside the kernel) is
    one diagnostic at its line of the file, naming every combination it fails."""
    text = (registry.ROOT / "triton" / "grouped_fp32.py").read_text().replace(
        "acc = tl.dot(a, b, acc", "acc = tl.dot_typo(a, b, acc")
    bad = tmp_path / "typo_tri.py"
    bad.write_text(text.replace('name = "triton_grouped_fp32"', 'name = "typo_tri"'))
    two = [dict(block_m=32, block_n=32, block_k=16, num_warps=4), dict(block_m=64, block_n=32, block_k=16, num_warps=4)]
    got = check_kernel(bad, combos=two)
    assert not got.ok and not got.problem
    (d,) = got.diagnostics
    assert d.line == text.split("\n").index(next(x for x in text.split("\n") if "tl.dot_typo" in x)) + 1
    assert "dot_typo" in d.message and d.severity == "error" and len(d.combos) == 2
    assert all(not c.ok for c in got.combos)


def test_without_triton_py_kernels_say_why(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "triton" else real(name, *a))
    got = check_kernel(registry.ROOT / "triton" / "grouped_fp32.py")
    assert not got.ok and "Triton is not installed" in got.problem
    plan = Plan(backend="cpu", items=[("triton_grouped_fp32", registry.get("triton_grouped_fp32")
                                       .default_params()), ("cpu_numpy", {})],
                shapes=[ODD], warmup=0, repeats=1, seed=SEED)
    recs, _ = run_plan(plan)
    by = {r.variant: r for r in recs}
    assert by["cpu_numpy"].passed is True
    assert "Triton is not installed" in (by["triton_grouped_fp32"].error or ""), by["triton_grouped_fp32"]
