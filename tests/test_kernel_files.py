"""Kernel files that describe themselves (engine.kernels.kernel_file) and the registry built from
them: every built-in discovered with its parameter space, bad headers refused with the
file and line, value-dependent failures turned into skips with a reason, user kernels
registered next to the built-ins."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.kernels import registry
from engine.kernels.kernel_file import KernelFileError, parse_header

ROOT = Path(__file__).resolve().parent.parent
SPACES = json.loads((Path(__file__).parent / "data" / "builtin_spaces.json").read_text())

GOOD = '''/*
+++
name = "my_kernel"
title = "A test kernel"
source = "tests"

[params]
block = [16, 8]

[derived]
threads = "block * block"

[[constraints]]
check = "threads <= 1024"
reason = "block={block} is {threads} threads"

[launch]
grid = ["cdiv(N, block)", "cdiv(M, block)"]
block = ["block", "block"]
+++
*/
__kernel void matmul() {}
'''


def write(tmp_path, text, name="k.cl"):
    p = tmp_path / name
    p.write_text(text)
    return p


# --- built-ins ---------------------------------------------------------------------------

def test_every_builtin_kernel_file_is_read_without_problems():
    assert registry.BUILTIN_PROBLEMS == []


def test_builtins_keep_their_names_spaces_and_order():
    """The same kernels with the same parameter spaces (names, values, defaults, order) as
    before kernels described themselves (tests/data/builtin_spaces.json)."""
    for name, (keys, values) in SPACES.items():
        v = registry.get(name)
        assert list(v.space) == keys, name
        assert [list(x) for x in v.space.values()] == values, name


def test_roles_come_from_the_files():
    assert registry.baseline_name() == "naive"
    assert registry.references_by_precision() == {"fp32": "cublas_fp32", "tf32": "cublas_tf32",
                                                  "half": "cublas_half", "fp8": "cublaslt_fp8",
                                                  "int8": "cublaslt_int8"}
    assert registry.get("tf32_wgmma_rs").role == "rung"           # promoted in round 6
    assert registry.get("tf32_wgmma_tp").role == "experiment"
    ladder = registry.ladder_names()
    assert "tf32_wgmma_tp" not in ladder and "tf32_wgmma_rs" in ladder
    assert ladder[0] == "naive_uncoalesced"
    orders = [registry.get(n).order for n in ladder]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)
    # experiments leave the default sweeps but stay discoverable
    default = {v.name for v in registry.default_variants("cuda")}
    assert "tf32_wgmma_tp" not in default and "tf32_wgmma_tp" in registry.REGISTRY
    assert "tf32_wgmma_rs" in default
    assert "ffma_wide" in default


def test_cuda_and_opencl_files_of_one_name_make_one_variant():
    v = registry.get("tiled_any")
    assert set(v.sources) == {"cuda", "opencl"}
    assert len(v.headers) == 2


def test_experiments_live_in_their_folder():
    for name in ("tf32_wgmma_tp", "tf32_wgmma_fused"):
        path = registry.get(name).source_path("cuda")
        assert path.parent.name == "experiments" and path.is_file()


# --- the header format -------------------------------------------------------------------

def test_a_good_header_builds_a_working_variant(tmp_path):
    h = parse_header(write(tmp_path, GOOD))
    assert h.backend == "opencl" and h.name == "my_kernel" and h.role == "user"
    assert h.geometry({"block": 16}, 100, 50, 7) == ((4, 7), (16, 16))
    v = registry.variant_from_headers([h])
    assert v.check("opencl", {"block": 16}, 127, 61, 253, "float32") is None
    assert v.flops(2, 3, 4) == 48 and v.bytes_moved(2, 3, 4, 4) == (8 + 12 + 6) * 4


def test_grids_can_be_sized_to_the_devices_multiprocessors(tmp_path):
    """SMS in an expression is the device's multiprocessor count where a backend works the
    launch out (DEFAULT_SMS where no device is known: checks, listings)."""
    from engine.kernels.kernel_file import DEFAULT_SMS
    text = GOOD.replace('grid = ["cdiv(N, block)", "cdiv(M, block)"]',
                        'grid = ["min(cdiv(N, block) * cdiv(M, block), SMS)", 1]')
    h = parse_header(write(tmp_path, text))
    v = registry.variant_from_headers([h])
    assert v.launch_geometry({"block": 16}, 1000, 1000, 7, 20) == ((20, 1), (16, 16))
    assert v.launch_geometry({"block": 16}, 1000, 1000, 7, 114) == ((114, 1), (16, 16))
    assert v.launch_geometry({"block": 16}, 1000, 1000, 7) == ((DEFAULT_SMS, 1), (16, 16))
    assert v.launch_geometry({"block": 16}, 40, 40, 7, 114) == ((9, 1), (16, 16))
    assert v.check("opencl", {"block": 16}, 1000, 1000, 7, "float32") is None
    # a derived name over SMS; shared memory stays a function of the parameters alone
    d = text.replace('threads = "block * block"', 'threads = "block * block"\nwave = "2 * SMS"')
    d = d.replace('min(cdiv(N, block) * cdiv(M, block), SMS)', 'wave')
    assert parse_header(write(tmp_path, d, "d.cl")).geometry({"block": 8}, 9, 9, 9, sms=7) == \
        ((14, 1), (8, 8))
    with pytest.raises(KernelFileError, match="parameters only, not SMS"):
        parse_header(write(tmp_path, text.replace("[launch]", '[launch]\nshared = "SMS * 4"'), "s.cl"))


@pytest.mark.parametrize("mutate,words,line", [
    (lambda t: t.replace("+++\n", "", 1), "no kernel header", None),
    (lambda t: "// a comment first\n" + t, "must start with a /*", 1),
    (lambda t: t.replace('name = "my_kernel"', 'name = "my_kernel'), "not valid TOML", 3),
    (lambda t: t.replace('source = "tests"', 'source = "tests"\ncolour = "red"'), "unknown key 'colour'", 6),
    (lambda t: t.replace('title = "A test kernel"\n', ""), "'title' is required", None),
    (lambda t: t.replace('grid = ["cdiv(N, block)"', 'grid = ["cdiv(N, blk)"'), "unknown name 'blk'", 18),
    (lambda t: t.replace('"block * block"', '"block * * block"'), "does not parse", 11),
    (lambda t: t.replace("block = [16, 8]", "block = [16, 16]"), "lists a value twice", 8),
    (lambda t: t.replace("block = [16, 8]", "block = [16, 8.5]"), "whole numbers", 8),
    (lambda t: t.replace('[launch]', '[launch]\nthreads = 3'), "unknown key 'threads' in [launch]", 18),
    (lambda t: t.replace('name = "my_kernel"', 'name = "My Kernel"'), "lower-case", 3),
    (lambda t: t.replace('source = "tests"', 'source = "tests"\nrole = "boss"'), "role must be", 6),
    (lambda t: t.replace('[launch]', '[launch]\nshared = "M * 4"'), "parameters only", 18),
    # B's layout and C's element bytes reach a pre-pass's expressions only: a grid, block,
    # constraint or [chosen] value naming them (directly or through [derived]) would read 0
    # or 4 in every run
    (lambda t: t.replace('grid = ["cdiv(N, block)"', 'grid = ["cdiv(N, block) * (1 + NK)"'),
     "NK is a name of the pre-pass's expressions only", 18),
    (lambda t: t.replace('check = "threads <= 1024"', 'check = "threads * OB <= 4096"'),
     "OB is a name of the pre-pass's expressions only", None),
    (lambda t: t.replace('threads = "block * block"', 'threads = "block * block * OB // 4"'),
     "OB is a name of the pre-pass's expressions only", None),
])
def test_bad_headers_say_what_and_where(tmp_path, mutate, words, line):
    path = write(tmp_path, mutate(GOOD))
    with pytest.raises(KernelFileError) as err:
        parse_header(path)
    assert words in str(err.value), str(err.value)
    assert str(path) in str(err.value)
    if line is not None:
        assert err.value.line == line, str(err.value)


def test_value_dependent_failures_are_skips_with_a_reason(tmp_path):
    text = GOOD.replace('grid = ["cdiv(N, block)", "cdiv(M, block)"]',
                        'grid = ["N // (block - 16)", "M / 3"]')
    v = registry.variant_from_headers([parse_header(write(tmp_path, text))])
    why = v.check("opencl", {"block": 16}, 64, 64, 64, "float32")
    assert "division by zero" in why and "launch.grid[0]" in why
    why = v.check("opencl", {"block": 8}, 64, 64, 64, "float32")
    assert "not a whole number" in why and "launch.grid[1]" in why


def test_constraints_quote_their_values(tmp_path):
    text = GOOD.replace("block = [16, 8]", "block = [16, 8, 64]")
    v = registry.variant_from_headers([parse_header(write(tmp_path, text))])
    assert v.check("opencl", {"block": 64}, 64, 64, 64, "float32") == "block=64 is 4096 threads"


def test_a_geometry_past_cuda_limits_is_refused(tmp_path):
    text = GOOD.replace('check = "threads <= 1024"', 'check = "threads > 0"')
    text = text.replace("block = [16, 8]", "block = [64]")
    v = registry.variant_from_headers([parse_header(write(tmp_path, text, "k.cu"))])
    assert "at most 1024" in v.check("cuda", {"block": 64}, 64, 64, 64, "float32")
    big = text.replace('"cdiv(M, block)"', '"M"').replace("block = [64]", "block = [16]")
    v = registry.variant_from_headers([parse_header(write(tmp_path, big, "k2.cu"))])
    assert "past CUDA's limits" in v.check("cuda", {"block": 16}, 70000, 64, 64, "float32")


# --- user kernels ----------------------------------------------------------------------------

def test_user_kernel_files_join_the_registry_and_cannot_take_a_builtin_name(tmp_path, monkeypatch):
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    folder = tmp_path / "kernels"
    folder.mkdir()
    write(folder, GOOD)
    write(folder, GOOD.replace('"my_kernel"', '"naive"'), "clash.cl")
    write(folder, "not a kernel", "broken.cl")
    names, problems = registry.load_kernel_files([folder])
    assert names == ["my_kernel"]
    assert registry.get("my_kernel").role == "user"
    assert any("clash.cl" in p and "taken by" in p for p in problems), problems
    assert any("broken.cl" in p and "no kernel header" in p for p in problems), problems
    # read again after an edit: the file replaces its own variant
    write(folder, GOOD.replace("block = [16, 8]", "block = [8]"))
    names, problems = registry.load_kernel_files([folder / "k.cl"])
    assert names == ["my_kernel"] and registry.get("my_kernel").space == {"block": (8,)}
