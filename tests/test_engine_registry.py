"""The variant registry: sources, descriptions, parameter spaces, validity checks,
parameter text, plan expansion."""
from __future__ import annotations

import dataclasses
import itertools
import math
import re

import numpy as np
import pytest

from engine.common.dtypes import ElementType

from engine.kernels import registry
from engine.kernels.registry import params_from_str, params_to_str
from engine.kernels.kernel_file import KERNEL_DTYPES
from engine.run.runner import expand_items

VARIANTS = list(registry.REGISTRY.values())
IDS = [v.name for v in VARIANTS]
KERNEL_BACKENDS = ("cuda", "opencl")


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_variant_describes_itself(v):
    assert v.name and registry.REGISTRY[v.name] is v
    assert v.technique.strip() and "\n" not in v.technique, "technique: one line"
    assert v.seed.strip()
    assert v.kind in ("gemm", "aat")
    # kernel files take float32 and int32, or float16 and bfloat16; the numpy line every type
    assert set(v.dtypes) <= (set(ElementType) if not v.headers else set(KERNEL_DTYPES)) and v.dtypes
    assert v.sources, "a variant needs at least one backend"
    assert set(v.backends) <= {"cuda", "opencl", "cpu"}


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_sources_exist_and_define_the_parameters(v):
    for backend, src in v.sources.items():
        if v.is_triton:       # tests/test_triton_kernels.py checks the .py files' signatures
            assert v.source_path(backend).is_file() and re.search(rf"def {v.entry}\(", v.source_text(backend))
            continue
        if backend == "cpu":
            # The cpu "source" names a numpy function.
            mod, _, fn = src.partition(".")
            assert mod == "numpy" and callable(getattr(np, fn)), src
            continue
        if getattr(v, "library", None) or v.dispatch is not None:
            continue      # library lines (cuBLAS) name a routine; dispatch lines their table
        path = v.source_path(backend)
        assert path.is_file(), f"{v.name}: {src} does not exist"
        assert not re.match(r"^/|^[A-Za-z]:", src), "sources are relative to the repository"
        text = path.read_text()
        assert re.search(rf"\b{v.entry}\s*\(", text), f"{src} has no entry point {v.entry}"
        for name in v.space:
            assert re.search(rf"\b{name.upper()}\b", text), f"{src} never uses {name.upper()}"
        assert "ELEM" in text and "ACC" in text, f"{src} ignores ELEM/ACC"


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_combos_cover_the_space(v):
    combos = v.combos()
    assert len(combos) == math.prod(len(vals) for vals in v.space.values())
    assert len({params_to_str(c) for c in combos}) == len(combos), "duplicates"
    assert combos[0] == v.default_params()
    for c in combos:
        assert list(c) == list(v.space)
        assert all(c[name] in v.space[name] for name in c)
    expected = [dict(zip(v.space, vals)) for vals in itertools.product(*v.space.values())]
    assert combos == expected


def test_parameter_spaces_of_the_seed_kernels():
    r = registry.REGISTRY
    assert r["cpu_numpy"].combos() == [{}]
    assert len(r["wpt"].combos()) == len(r["wpt"].space["ts"]) * len(r["wpt"].space["wpt"])
    for name in ("naive", "tiled", "tiled_any"):
        assert r[name].default_params() == {"block": 16}


@pytest.mark.parametrize("v", VARIANTS, ids=IDS)
def test_every_combo_is_valid_at_a_friendly_shape(v):
    """At 256³ nothing but a deliberate constraint may refuse a combination."""
    for backend in v.backends:
        for p in v.combos():
            for dtype in v.dtypes:
                reason = v.check(backend, p, 256, 256, 256, dtype)
                if v.name == "wpt":
                    assert (reason is None) == (p["ts"] % p["wpt"] == 0), (p, reason)
                elif reason is not None:
                    # A later variant may refuse a combination, but must say why.
                    assert isinstance(reason, str) and reason.strip()
                else:
                    (gx, gy), (bx, by) = v.geometry(p, 256, 256, 256)
                    assert gx >= 1 and gy >= 1 and 1 <= bx * by <= 1024, (p, bx, by)


def test_check_reasons():
    naive, tiled, cpu = (registry.REGISTRY[n] for n in ("naive", "tiled", "cpu_numpy"))
    assert naive.check("opencl", {"block": 16}, 127, 253, 61, "float32") is None
    assert cpu.check("opencl", {}, 8, 8, 8, "float32") == "cpu_numpy has no opencl kernel"
    assert naive.check("cpu", {"block": 16}, 8, 8, 8, "float32") == "naive has no cpu kernel"
    assert naive.check("opencl", {"block": 16, "wpt": 4}, 64, 64, 64, "float32") == \
        "naive has no parameter 'wpt'"
    assert naive.check("opencl", {"block": 7}, 64, 64, 64, "float32") == \
        "block=7 is not in naive's parameter space (16, 8, 32)"
    assert naive.check("opencl", {}, 64, 64, 64, "float32") == "missing parameter(s) block"
    assert "does not support int32" in dataclasses.replace(naive, dtypes=("float32",)).check(
        "opencl", {"block": 16}, 64, 64, 64, "int32")
    assert naive.check("opencl", {"block": 16}, 0, 4, 4, "float32") == \
        "every dimension must be at least 1"
    # 32-bit indices: a matrix of 2³¹ elements is refused, one element less is not.
    big = naive.check("opencl", {"block": 16}, 2**16, 16, 2**15, "float32")
    assert big and "32-bit indices" in big
    assert naive.check("opencl", {"block": 16}, 2**16, 16, 2**15 - 1, "float32") is None
    assert "32-bit" in naive.check("opencl", {"block": 16}, 16, 2**16, 2**15, "float32")  # B
    assert "32-bit" in naive.check("opencl", {"block": 16}, 2**16, 2**15, 16, "float32")  # C
    aat = registry.REGISTRY["aat_simple"]
    # aat: C is M×M whatever N was asked.
    assert "32-bit" in aat.check("opencl", {"tile": 16}, 2**16, 1, 2**15, "float32")
    assert aat.check("opencl", {"tile": 16}, 2**15, 2**20, 16, "float32") is None
    # tiled: every dimension a multiple of the block, and the reason names the culprits.
    assert tiled.check("opencl", {"block": 16}, 64, 32, 48, "float32") is None
    why = tiled.check("opencl", {"block": 16}, 64, 33, 47, "int32")
    assert "multiples of block=16" in why and "N=33" in why and "K=47" in why
    assert "tiled_any" in why                          # points to the alternative


def test_wpt_constraint_reason():
    v = registry.REGISTRY["wpt"]
    assert v.constraint({"ts": 8, "wpt": 3}, 64, 64, 64, "float32") == "wpt=3 must divide ts=8"
    assert v.constraint({"ts": 32, "wpt": 8}, 64, 64, 64, "float32") is None


def test_params_text_round_trip():
    for v in VARIANTS:
        for p in v.combos():
            text = params_to_str(p)
            assert params_from_str(text) == p
            assert v.label(p) == (f"{v.name}[{text}]" if p else v.name)
    assert params_to_str({"ts": 32, "wpt": 4}) == "ts=32,wpt=4"
    assert params_to_str({"wpt": 4, "ts": 32}) == "wpt=4,ts=32"     # the given order
    assert params_from_str(" ts = 32 , wpt=4 ,") == {"ts": 32, "wpt": 4}
    assert params_from_str("") == {} and params_from_str(None) == {}
    with pytest.raises(ValueError):
        params_from_str("block=sixteen")


def test_defines():
    v = registry.REGISTRY["wpt"]
    assert v.defines({"ts": 32, "wpt": 4}, "float32") == \
        {"ELEM": "float", "ACC": "float", "TS": "32", "WPT": "4"}
    assert v.defines({"ts": 16, "wpt": 2}, "int32") == \
        {"ELEM": "int", "ACC": "unsigned", "TS": "16", "WPT": "2"}


def test_output_shape_and_effective_n():
    aat, naive = registry.REGISTRY["aat_padded"], registry.REGISTRY["naive"]
    assert aat.output_shape(127, 253, 61) == (127, 127) and aat.effective_n(127, 253) == 127
    assert naive.output_shape(127, 253, 61) == (127, 253) and naive.effective_n(127, 253) == 253


def test_expand_items_defaults_and_names():
    items = expand_items("opencl")
    expected = [(v.name, p) for v in registry.variants_for("opencl") for p in v.combos()]
    assert items == expected
    assert expand_items("opencl", ["aat_padded", "naive"]) == \
        [("aat_padded", {"tile": 32}), ("aat_padded", {"tile": 16}),
         ("naive", {"block": 16}), ("naive", {"block": 8}), ("naive", {"block": 32})]
    with pytest.raises(KeyError, match="unknown variant 'nope'"):
        expand_items("opencl", ["nope"])


def test_expand_items_with_overrides():
    items = expand_items("opencl", ["naive", "wpt", "aat_simple"], {"block": [32], "ts": (16, 8)})
    assert items[0] == ("naive", {"block": 32})
    wpt = [p for n, p in items if n == "wpt"]
    assert wpt == [{"ts": t, "wpt": w} for t in (16, 8) for w in registry.REGISTRY["wpt"].space["wpt"]]
    # aat_simple has no block/ts: its whole space stays.
    assert [p for n, p in items if n == "aat_simple"] == registry.REGISTRY["aat_simple"].combos()
    # A value outside the space is kept so that check() can report it as skipped.
    (item,) = expand_items("opencl", ["naive"], {"block": (7,)})
    assert item == ("naive", {"block": 7})
    assert "not in naive's parameter space" in registry.get("naive").check(
        "opencl", item[1], 64, 64, 64, "float32")


def test_variants_for():
    assert [v.name for v in registry.variants_for("cpu") if not v.is_triton] == ["cpu_numpy"]
    ocl = registry.variants_for("opencl")
    assert [v.name for v in ocl] == [v.name for v in VARIANTS if "opencl" in v.sources]
    assert {"naive", "tiled", "tiled_any", "wpt", "aat_simple", "aat_coalesced",
            "aat_padded"} <= {v.name for v in ocl}
    assert registry.variants_for("nope") == []


def test_get_and_register():
    assert registry.get("naive") is registry.REGISTRY["naive"]
    with pytest.raises(KeyError) as info:
        registry.get("nope")
    assert "unknown variant 'nope'" in str(info.value) and "naive" in str(info.value)
    before = dict(registry.REGISTRY)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(registry.REGISTRY["naive"])
    assert registry.REGISTRY == before


def test_cdiv():
    assert [registry.cdiv(a, 16) for a in (1, 15, 16, 17, 32, 33)] == [1, 1, 1, 2, 2, 3]


# --- default parameters per GPU architecture ([defaults] tables) --------------------------

ARCH_KERNEL = '''/*
+++
name = "arch_kernel"
title = "A kernel with defaults per architecture"
source = "tests"

[params]
bk = [8, 16]
sw = [1, 8]
splitk = [1, 4]

[defaults.sm_9x]
sw = 8
splitk = 4

[defaults.sm_90]
bk = 16
splitk = 1

[defaults.sm_120]
bk = 16

[launch]
grid = ["cdiv(N, 16)", "cdiv(M, 16)"]
block = [16, 16]
+++
*/
__global__ void matmul() {}
'''


def _arch_variant(tmp_path, text=ARCH_KERNEL, name="arch.cu"):
    from engine.kernels.kernel_file import parse_header
    path = tmp_path / name
    path.write_text(text)
    return registry.variant_from_headers([parse_header(path)])


def test_arch_names():
    for given, want in (("9.0", "sm_90"), ("sm_90", "sm_90"), ("sm_90a", "sm_90"),
                        ("compute_90", "sm_90"), ("8.6", "sm_86"), ("12.0", "sm_120"),
                        (" SM_89 ", "sm_89"), (None, None), ("", None), ("9", None),
                        ("sm_9", None), ("gfx90a", None)):
        assert registry.arch_name(given) == want, given


def test_default_params_per_architecture(tmp_path):
    v = _arch_variant(tmp_path)
    portable = {"bk": 8, "sw": 1, "splitk": 1}
    assert v.arch_defaults == {"sm_9x": {"sw": 8, "splitk": 4}, "sm_90": {"bk": 16, "splitk": 1},
                               "sm_120": {"bk": 16}}
    assert v.default_params() == v.default_params(None) == portable == v.combos()[0]
    # the exact table over the major one, parameter by parameter
    assert v.default_params("sm_90") == v.default_params("9.0") == {"bk": 16, "sw": 8, "splitk": 1}
    assert v.default_params("sm_90a") == v.default_params("sm_90")
    assert v.default_params("9.2") == {"bk": 8, "sw": 8, "splitk": 4}     # sm_9x only
    assert v.default_params("12.0") == {"bk": 16, "sw": 1, "splitk": 1}   # no sm_12x
    assert v.default_params("1.2") == v.default_params("8.0") == portable
    assert v.default_params("what") == portable
    assert v.arch_overrides("sm_86") == {} and v.arch_overrides("9.0") == {"bk": 16, "sw": 8,
                                                                          "splitk": 1}


@pytest.mark.parametrize("mutate,words,line", [
    (lambda t: t.replace("[defaults.sm_120]", "[defaults.sm120]"),
     "'sm120' is not an architecture", 20),
    (lambda t: t.replace("[defaults.sm_120]", "[defaults.gfx90a]"), "not an architecture", 20),
    (lambda t: t.replace("[defaults.sm_90]\nbk = 16", "[defaults.sm_90]\nbq = 16"),
     "defaults.sm_90: 'bq' is not a parameter of this kernel (parameters: bk, sw, splitk)", 17),
    (lambda t: t.replace("[defaults.sm_90]\nbk = 16", "[defaults.sm_90]\nbk = 12"),
     "defaults.sm_90.bk = 12 is not one of bk's values [8, 16]", 17),
    (lambda t: t.replace("sw = 8\n", "sw = [1, 8]\n"), "defaults.sm_9x.sw must be one whole number", 13),
    (lambda t: t.replace("sw = 8\n", "sw = true\n"), "must be one whole number", 13),
    (lambda t: t.replace("[defaults.sm_120]\nbk = 16", "[defaults]\nsm_120 = 3"),
     "defaults.sm_120 must be a table", 21),
    (lambda t: t.replace("[defaults.sm_120]\nbk = 16", "[defaults]\nsm_120 = {bk = 32}"),
     "defaults.sm_120.bk = 32 is not one of", 21),
    (lambda t: t.replace("[defaults.sm_9x]\nsw = 8\nsplitk = 4\n\n[defaults.sm_90]\nbk = 16\n"
                         "splitk = 1\n\n[defaults.sm_120]\nbk = 16\n", "")
     .replace('source = "tests"\n', 'source = "tests"\ndefaults = 5\n'),
     "[defaults] must hold one table per architecture", 6),
])
def test_bad_defaults_say_what_and_where(tmp_path, mutate, words, line):
    from engine.kernels.kernel_file import KernelFileError, parse_header
    path = tmp_path / "arch.cu"
    text = mutate(ARCH_KERNEL)
    assert text != ARCH_KERNEL
    path.write_text(text)
    with pytest.raises(KernelFileError) as err:
        parse_header(path)
    assert words in err.value.message
    assert err.value.line == line, str(err.value)
    assert str(err.value).startswith(f"{path}:{line}: ")


def test_builtin_sm90_defaults_are_the_h200_winners():
    """[defaults.sm_90] of the rungs: the autotuned winners at 4096³/8192³ on an H200
    (benchmarks/NOTES.md, benchmarks/results/h*_shapes.json, tests/data/h200_ladder_v2.json); the
    first values stay the portable defaults."""
    want = {"blocktile_1d": {"tm": 16}, "blocktile_2d": {"bm": 64, "bn": 128},
            "vectorized": {"bk": 16}, "bankfree": {"bk": 16}, "pipelined": {"bm": 64},
            "ffma_tuned": {"kv": 2}, "ffma_wide": {"bk": 16}}
    for name in registry.ladder_names(include_experiments=True):
        v = registry.get(name)
        if v.order is not None and 11 <= v.order <= 20:
            assert v.arch_overrides("9.0") == want.get(name, {}), name
        assert v.default_params() == v.combos()[0], name
        d = v.default_params("9.0")
        for backend in v.backends:
            for dtype in v.dtypes:
                for shape in ((4096, 4096, 4096), (127, 253, 61)):
                    if v.check(backend, v.default_params(), *shape, dtype) is None:
                        assert v.check(backend, d, *shape, dtype) is None, (name, shape)
    assert {n for n in want if registry.get(n).arch_overrides("sm_90")} == set(want)
    assert registry.get("ffma_wide").default_params("9.0") == {
        "bm": 256, "bk": 16, "stages": 4, "sw": 1, "splitk": 1, "tailk": 8, "bcopy": 0, "crows": 0}
    assert registry.get("ffma_wide").default_params("8.0")["bk"] == 8


def test_cuda_files_defaults_win_over_the_opencl_files(tmp_path):
    from engine.kernels.kernel_file import parse_header
    cu = tmp_path / "k.cu"
    cl = tmp_path / "k.cl"
    cu.write_text(ARCH_KERNEL)
    cl.write_text(ARCH_KERNEL.replace("[defaults.sm_120]\nbk = 16", "[defaults.sm_120]\nbk = 8\n"
                                      "[defaults.sm_80]\nsw = 8")
                  .replace("__global__ void", "__kernel void"))
    v = registry.variant_from_headers([parse_header(cl), parse_header(cu)])
    assert set(v.sources) == {"cuda", "opencl"}
    assert v.default_params("12.0")["bk"] == 16 and v.default_params("8.0")["sw"] == 8
