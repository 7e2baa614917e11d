"""The performance ladder (its kernel files' headers): registry entries, constraints, sources, the
pct_of_cublas post-processing, the TF32 tolerance; and, on a GPU, every ladder kernel
verified at odd shapes and at 4096 and the cuBLAS lines running on the engine's context.

CPU-side tests run everywhere; GPU tests are marked ``gpu`` and skip cleanly without
pycuda or a device (the cuBLAS ones also without nvmath-python).
"""
from __future__ import annotations

import itertools
import math
import re

import numpy as np
import pytest

from engine.kernels import registry
from engine.results.records import ResultRecord
from engine.results.derived import fill_pct_of_cublas
from engine.run.runner import Plan, expand_items
from engine.measure.verify import Reference, float32_tolerance, tf32_tolerance

#: The ladder's rungs in the order taught, then the experiments (kept and tested).
LADDER = tuple(registry.ladder_names(include_experiments=True))
CUBLAS = tuple(v.name for v in registry.REGISTRY.values() if v.role == "reference"
               and "float32" in v.dtypes)
#: The rungs of float32 inputs (FP32 and TF32; most take int32 too): the tests below run
#: them as float32. The 16-bit rungs (half_wmma) have tests/test_half_cuda.py.
KERNELS = [registry.get(n) for n in LADDER if "float32" in registry.get(n).dtypes]
ALL_RUNGS = [registry.get(n) for n in LADDER]
#: SMs of an H100/H200 SXM: the persistent grids' size in the kernel headers.
SMS = 132


def shared_bytes(v, params):
    return v.dynamic_shared(params) if v.dynamic_shared else 0


def scratch_ws(m, n, k):
    """tf32_wgmma_ws's scratch: Bt (N × Kp) and, when K % 4, a padded A (M × Kp)."""
    kp = (k + 3) // 4 * 4
    return 4 * kp * (n + (m if k % 4 else 0))
ODD_SHAPES = [(127, 253, 61), (61, 127, 253), (1, 1, 1), (33, 1, 65), (130, 131, 17)]
#: Odd skinny shapes (M or N ≤ 64): matrix-vector products, K not a multiple of 4.
SKINNY_SHAPES = [(1, 253, 127), (61, 7, 1000), (64, 129, 4099), (7, 3000, 65), (1000, 1, 33)]

#: Rungs made for one class of shapes, dispatched to by shape (the lab best): the class,
#: and the shape they are tested at instead of 4096³. Every other rung takes any shape.
SPECIALISTS = {"skinny": (lambda m, n, k: min(m, n) <= 64, (1, 4096, 4096))}
#: Rungs whose header picks a parameter by shape within the class, and the words of that
#: constraint: ffma_regdb splits only a
#: last partial wave's tiles where the tiles make more than a wave (hybrid); ffma_small splits
#: K across CTAs only where its tiles leave SMs idle and K is long; skinny's stream follows the
#: shape (each stream built once: the other stream's parameters at one value), and its
#: shared-memory stream's tile width N, and with it the rows a block holds (the ring of
#: stages that fits).
CHOSEN_BY_SHAPE = {"ffma_regdb": ("chosen by the shape",),
                   "ffma_small": ("chosen by the shape",),
                   "skinny": ("built once", "(M = 1 or N = 1)")}


def chosen_by_shape(name: str, why: str | None) -> bool:
    """Whether a rung's reason to skip is one of its parameters' shape rules."""
    return any(s in (why or "") for s in CHOSEN_BY_SHAPE.get(name, ()))


def home(v) -> tuple[int, int, int]:
    """The shape a rung is checked at: 4096³, or its class's for a specialist."""
    return SPECIALISTS[v.name][1] if v.name in SPECIALISTS else (4096, 4096, 4096)


def in_class(v, shape) -> bool:
    return SPECIALISTS[v.name][0](*shape) if v.name in SPECIALISTS else True


# --- CPU side ---------------------------------------------------------------------------

def test_ladder_registered_in_order():
    names = list(registry.REGISTRY)
    for n in LADDER + CUBLAS:
        assert n in names, n
    idx = [names.index(n) for n in LADDER]
    assert idx == sorted(idx)


@pytest.mark.parametrize("v", ALL_RUNGS, ids=lambda v: v.name)
def test_kernel_source_exists_with_header(v):
    path = v.source_path("cuda")
    assert path.is_file(), path
    # the teaching steps are numbered in ladder/; the production techniques are named in
    # lab/; experiments keep their name in experiments/
    folder = path.parent.name
    assert folder in ("ladder", "lab", "experiments"), path
    if folder == "ladder":
        assert re.fullmatch(r"[0-3]\d_[a-z0-9_]+\.cu", path.name), path
    else:
        assert path.name == f"{v.name}.cu", path
    text = path.read_text()
    assert text.lstrip().startswith("/*")
    # the header (TOML) first, then the prose: what the technique is, in words
    second = text[text.find("*/") + 2:]
    assert "technique" in second[:second.find("*/")].lower() or "Technique" in second
    # every parameter of the space is a define the kernel reads
    for name in v.space:
        assert re.search(rf"\b{name.upper()}\b", text), f"{v.name}: {name.upper()} unused"


@pytest.mark.parametrize("v", KERNELS, ids=lambda v: v.name)
def test_space_small_and_valid(v):
    combos = v.combos()
    valid = [c for c in combos if v.check("cuda", c, *home(v), "float32") is None]
    assert valid, f"{v.name}: no valid parameter combination"
    # a full search stays short: at most 12 combinations at the rung's home shape, 16 at
    # any shape. tf32_wgmma_rs: 4 more, its ping-pong tiles; stream-K's second form (streamk
    # 2), valid wherever its first is, not counted; its 432 declared: its clusters only where
    # the tiles leave most SMs idle. ffma_regdb's 960: its 80- and 96-row tiles are for M <= 96
    # only, its narrow tiles for N <= 64, each N taking one or two tile widths, and B's copies
    # other than as it lies for N % 4 != 0. skinny's 180: each of its three streams ignores
    # the others' parameters, which its constraints hold at one value
    extra = 4 if v.name == "tf32_wgmma_rs" else 0

    def counted(cs):
        """cs without tf32_wgmma_rs's streamk 2 (checked to be streamk 1's combinations again)"""
        if v.name == "tf32_wgmma_rs":
            first = [dict(c, streamk=2) for c in cs if c["streamk"] == 1]
            assert sorted(map(str, first)) == sorted(str(c) for c in cs if c["streamk"] == 2)
            return [c for c in cs if c["streamk"] != 2]
        return cs
    valid = counted(valid)
    assert len(valid) <= 12 + extra and len(combos) <= {"ffma_regdb": 960, "skinny": 180,
                                                        "tf32_wgmma_rs": 432}.get(v.name, 96), (
        v.name, len(valid), len(combos))
    for shape in ODD_SHAPES + SKINNY_SHAPES + [(90, 4096, 4096), (80, 4095, 4096)]:
        at = counted([c for c in combos if v.check("cuda", c, *shape, "float32") is None])
        # where N % 4 != 0 ffma_wide's 36 and ffma_regdb's 40: their three copies of B (once
        # three rungs each), and ffma_regdb's narrow tiles for N <= 64 (once two rungs)
        most = {"ffma_wide": 36, "ffma_regdb": 40}.get(v.name, 16) if shape[1] % 4 else 16
        # tf32_wgmma_rs's rows padded onto whole lines: 6 more where K % 8 or N % 8
        pad = 6 if v.name == "tf32_wgmma_rs" and (shape[1] % 8 or shape[2] % 8) else 0
        assert len(at) <= most + extra + pad, (v.name, shape, len(at))
    assert v.check("cuda", v.default_params(), *home(v), "float32") is None


@pytest.mark.parametrize("v", KERNELS, ids=lambda v: v.name)
@pytest.mark.parametrize("shape", ODD_SHAPES + SKINNY_SHAPES)
def test_no_shape_constraints(v, shape):
    """Every ladder kernel handles any M, N, K of its class (a specialist's class is its
    first constraint, which names the rung to use instead): only parameter-level reasons
    may skip."""
    for c in v.combos():
        if v.check("cuda", c, *home(v), "float32") is None:
            why = v.check("cuda", c, *shape, "float32")
            if in_class(v, shape):
                assert why is None or chosen_by_shape(v.name, why), why
            else:
                assert why and ("use ffma_" in why or "runs the same without the copy" in why), why
    if in_class(v, shape):           # some combination always runs in the class
        assert any(v.check("cuda", c, *shape, "float32") is None for c in v.combos()), v.name


@pytest.mark.parametrize("v", KERNELS, ids=lambda v: v.name)
def test_geometry_fits_a_block(v):
    for c in v.combos():
        if v.check("cuda", c, *home(v), "float32"):
            continue
        (gx, gy), (bx, by) = v.geometry(c, *((1000, 3000, 17) if in_class(v, (1000, 3000, 17))
                                            else (1000, 3001, 17) if v.name.endswith("_padb")
                                            else (1000, 30, 17)))
        assert 32 <= bx * by <= 1024 and gx >= 1 and gy >= 1
        if v.dynamic_shared:         # skinny's many-warps stream: static shared memory only
            assert 0 < v.dynamic_shared(c) <= 227 * 1024 or (v.name, c.get("stream")) == ("skinny", 2)


def test_dtypes_and_precision():
    assert registry.get("tf32_wgmma").dtypes == ("float32",)
    assert registry.get("tf32_wgmma").precision == "tf32"
    assert registry.get("tf32_wgmma").arch_suffix == "a"
    assert "int32" in registry.get("ffma_tuned").dtypes
    assert registry.get("tf32_mma").dtypes == ("float32",)
    assert registry.get("tf32_mma").precision == "tf32"
    assert registry.get("cublas_tf32").precision == "tf32"
    assert registry.get("cublas_fp32").precision == "fp32"
    for n in ("naive_uncoalesced", "blocktile_1d", "blocktile_2d", "vectorized", "bankfree",
              "warptile", "pipelined"):
        assert "int32" in registry.get(n).dtypes
    assert "does not support int32" in registry.get("tf32_mma").check(
        "cuda", registry.get("tf32_mma").default_params(), 64, 64, 64, "int32")


def test_cublas_variants_are_library_lines():
    for n in CUBLAS:
        v = registry.get(n)
        assert v.library == "cublas" and v.space == {} and v.dtypes == ("float32",)
        from engine.measure.backends.cublas import CublasGemm
        assert v.sources["cuda"] in CublasGemm.ROUTINES


def test_warptile_constraint_reasons():
    v = registry.get("warptile")
    p = dict(v.default_params(), wn=32, wniter=4)
    assert "warp tile" in v.constraint(p, 64, 64, 64, "float32")
    # every offered combination is valid (no skips in the GPU tests' odd-shape sweep)
    assert all(v.check("cuda", c, 64, 64, 64, "float32") is None for c in v.combos())


def _rec(variant, ms, dtype="float32", m=1024):
    return ResultRecord(backend="cuda", device="gpu", variant=variant, params={}, m=m, n=m, k=m,
                        dtype=dtype, mode="hot", warmup=0, repeats=1, timestamp="", versions="",
                        flops=2 * m ** 3, bytes=0, median_ms=ms)


def test_pct_of_cublas_pairs_by_precision():
    recs = [_rec("cublas_fp32", 2.0), _rec("cublas_tf32", 0.5), _rec("warptile", 4.0),
            _rec("tf32_mma", 1.0), _rec("naive", 20.0, m=2048), _rec("warptile", 2.5, dtype="int32")]
    fill_pct_of_cublas(recs)
    assert recs[0].pct_of_cublas == pytest.approx(100.0)
    assert recs[1].pct_of_cublas == pytest.approx(100.0)
    assert recs[2].pct_of_cublas == pytest.approx(50.0)
    assert recs[3].pct_of_cublas == pytest.approx(50.0)
    assert math.isnan(recs[4].pct_of_cublas)      # no cuBLAS run at that shape
    assert math.isnan(recs[5].pct_of_cublas)      # no int32 cuBLAS


def test_tf32_tolerance_looser_but_catches_errors():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (64, 96)).astype(np.float32)
    b = rng.uniform(-1, 1, (96, 80)).astype(np.float32)

    def tf32(x):  # round to nearest TF32 (10 mantissa bits)
        u = x.view(np.uint32).astype(np.uint64)
        return ((u + 0x1000) & 0xFFFFE000).astype(np.uint32).view(np.float32)

    c = (tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)).astype(np.float32)
    ref = Reference(a, b)
    assert tf32_tolerance(96) > float32_tolerance(96)
    assert not ref.check(c).passed                       # too far for strict FP32
    assert ref.check(c, precision="tf32").passed
    bad = c.copy()
    bad[5, :] = 0.0                                      # an unwritten row
    assert not ref.check(bad, precision="tf32").passed
    big = Reference(a, b, force_method="freivalds")
    assert big.check(c, precision="tf32").passed
    assert not big.check(bad, precision="tf32").passed


# --- GPU ---------------------------------------------------------------------------------

def _need_cuda():
    from tests.helpers import backend_status
    st = backend_status("cuda")
    if not st.available:
        pytest.skip(f"cuda backend unavailable: {st.reason}")


def _run(plan):
    from tests.helpers import run_plan
    return run_plan(plan)[0]


def _distinct(items, shapes, dtype, also=None):
    """``items`` reduced to distinct code paths at each shape (tests.code_paths: the
    defaults, every code path of the build and every value of every parameter, at every
    shape they can run at; ``also``: a feature, e.g. a pair of values, a test asserts)."""
    from tests.code_paths import distinct_items
    return distinct_items(items, shapes, dtype, also=also)


def _assert_every_valid_combo_verifies(v, shapes):
    """Run every distinct build of ``v``'s space that its constraints allow at ``shapes``
    (float32, one launch each) and require every record verified."""
    items = _distinct([(v.name, c) for c in v.combos()
                       if v.check("cuda", c, 4096, 4096, 4096, "float32") is None], shapes, "float32")
    plan = Plan(backend="cuda", items=items, shapes=shapes, dtype="float32", warmup=0, repeats=1)
    recs = _run(plan)
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in recs if not r.passed]
    assert not bad, bad


def _verified_wherever_valid(v, shapes, dtype, also=None, combos=None):
    """Run every distinct build of ``v`` (:func:`_distinct`; of ``combos``, else its whole
    space) at ``shapes`` (two launches each, float32 or int32 inputs); require every record
    that ran verified and every shape run by some combination. The records that ran (a
    combination its header gives another shape is skipped)."""
    items = _distinct([(v.name, c) for c in (v.combos() if combos is None else combos)],
                      shapes, dtype, also)
    plan = Plan(backend="cuda", items=items, shapes=shapes, dtype=dtype,
                warmup=0, repeats=2, dist="int" if dtype == "int32" else "uniform")
    ran = [r for r in _run(plan) if r.status != "skipped"]
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in ran if not r.passed]
    assert not bad, bad
    assert {(r.m, r.n, r.k) for r in ran} == set(shapes)
    return ran


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,rung", [(d, v.name) for d in ("float32", "int32")
                                        for v in KERNELS if d in v.dtypes])
def test_ladder_verifies_at_odd_shapes(dtype, rung):
    """Each rung (one test each, so that the GPU suite spreads them over its workers)."""
    _need_cuda()
    names = [rung]
    # the combinations valid at each rung's home shape; for a rung whose header picks a
    # parameter by shape, those valid at one of these shapes (ffma_narrow's 64-column home
    # tiles cannot hold N = 1)
    shapes = ODD_SHAPES + SKINNY_SHAPES
    items = [(n, p) for n, p in expand_items("cuda", names)
             if registry.get(n).check("cuda", p, *home(registry.get(n)), dtype) is None
             or (n in CHOSEN_BY_SHAPE and any(registry.get(n).check("cuda", p, *s, dtype) is None
                                              for s in shapes))]
    items = _distinct(items, shapes, dtype)     # every code path and value, at every shape
    plan = Plan(backend="cuda", items=items, shapes=shapes,
                dtype=dtype, warmup=0, repeats=1, dist="int" if dtype == "int32" else "uniform")
    recs = _run(plan)
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in recs
           if r.status != "skipped" and not r.passed]
    assert not bad, bad
    # only a specialist outside its class is skipped, or a parameter value made for another
    # class of shapes (a narrow tile where N fills 128 columns), or one its header gives
    # another shape of the class: at every shape of its class each rung ran some value
    ran_at = {(r.variant, r.m, r.n, r.k) for r in recs if r.status == "ok"}
    skipped = [(r.label(), r.m, r.n, r.k, r.error) for r in recs if r.status == "skipped"
               and in_class(registry.get(r.variant), (r.m, r.n, r.k))
               and not chosen_by_shape(r.variant, r.error)
               and (r.variant, r.m, r.n, r.k) not in ran_at]
    assert not skipped, skipped
    for v in KERNELS:
        if v.name == rung and v.name in SPECIALISTS and dtype in v.dtypes:
            ran = [r for r in recs if r.variant == v.name and r.status == "ok"]
            assert ran and all(in_class(v, (r.m, r.n, r.k)) for r in ran), v.name


@pytest.mark.gpu
def test_ladder_and_cublas_verify_at_4096():
    _need_cuda()
    names = list(CUBLAS) + [v.name for v in KERNELS if v.name not in SPECIALISTS]
    items = [(n, registry.get(n).default_params()) for n in names]
    plan = Plan(backend="cuda", items=items, shapes=[(4096, 4096, 4096)], dtype="float32",
                warmup=1, repeats=3)
    recs = _run(plan)
    byname = {r.variant: r for r in recs}
    if byname["cublas_fp32"].status == "skipped":
        pytest.skip(byname["cublas_fp32"].error)
    bad = [(r.label(), r.status, r.error) for r in recs if not r.passed]
    assert not bad, bad
    assert byname["cublas_fp32"].pct_of_cublas == pytest.approx(100.0)
    assert all(math.isfinite(r.pct_of_cublas) for r in recs)


@pytest.mark.gpu
def test_cublas_on_engine_thread_context():
    """cuBLAS handle made lazily on the engine thread and destroyed in close()."""
    _need_cuda()
    from engine.run.worker import EngineThread
    eng = EngineThread().start()
    plan = Plan(backend="cuda", items=[("cublas_fp32", {}), ("cublas_tf32", {})],
                shapes=[(300, 257, 129)], warmup=1, repeats=2)
    recs = eng.submit(plan, lambda e: None).result(120)
    assert eng.shutdown(30)
    if recs[0].status == "skipped":
        pytest.skip(recs[0].error)
    assert all(r.passed for r in recs), [(r.variant, r.error) for r in recs]


# --- ladder v4, TF32: tf32_wgmma_ws (cuda/ladder/22_tf32_wgmma_ws.cu) ---------------------------

WS = registry.get("tf32_wgmma_ws")
#: odd shapes plus K % 4 == 0 ones (no A pre-pass copy) and several 32-deep k-tiles
WS_SHAPES = ODD_SHAPES + [(129, 257, 64), (128, 256, 36), (257, 513, 1000), (300, 200, 100)]


def test_wgmma_ws_registered():
    assert WS.role == "rung"
    assert WS.dtypes == ("float32",) and WS.precision == "tf32"
    assert WS.arch_suffix == "a"
    path = WS.source_path("cuda")
    assert path.is_file() and re.fullmatch(r"(?:[12]\d_)?[a-z0-9_]+\.cu", path.name)
    text = path.read_text()
    assert text.lstrip().startswith("/*") and "Technique" in text
    for name in WS.space:
        assert re.search(rf"\b{name.upper()}\b", text)
    assert re.search(r'extern\s+"C"\s+__global__\b[^;{]*?\bvoid\s+prepass\s*\(', text)


def test_wgmma_ws_space_and_shapes():
    combos = WS.combos()
    assert 1 <= len(combos) <= 8
    valid = [c for c in combos if WS.check("cuda", c, 4096, 4096, 4096, "float32") is None]
    assert valid and WS.check("cuda", WS.default_params(), 4096, 4096, 4096, "float32") is None
    assert "shared memory" in WS.constraint({"bn": 256, "stages": 6, "cl": 1}, 64, 64, 64, "float32")
    for c in valid:
        assert shared_bytes(WS, c) <= 227 * 1024
        for shape in WS_SHAPES:
            assert WS.check("cuda", c, *shape, "float32") is None
            (gx, gy), (bx, by) = WS.geometry(c, *shape)
            m, n, _k = shape
            assert bx * by == 384 and gx * c["bn"] >= n and gy * 128 >= m
            assert gy % c["cl"] == 0                       # whole clusters along M


@pytest.mark.parametrize("shape", WS_SHAPES + [(4096, 4096, 4096)])
def test_wgmma_ws_prepass_covers_scratch(shape):
    """The pre-pass grid covers Bt (N × Kp) and, when K % 4, Ap (M × Kp); the scratch fits."""
    m, n, k = shape
    pre = WS.prepass
    kp = (k + 3) // 4 * 4
    (gx, gy), (bx, by) = pre.geometry(WS.default_params(), m, n, k)
    assert (bx, by) == (32, 8) and gx * 32 >= kp
    rows = n + (m if k % 4 else 0)
    assert pre.scratch_bytes(WS.default_params(), m, n, k) == 4 * kp * rows
    nby = -(-n // 32)
    assert gy == nby + ((-(-m // 32)) if k % 4 else 0)


@pytest.mark.gpu
def test_wgmma_ws_verifies_at_odd_shapes():
    _need_cuda()
    _assert_every_valid_combo_verifies(WS, WS_SHAPES)


@pytest.mark.gpu
def test_wgmma_ws_and_cublas_tf32_verify_at_4096():
    _need_cuda()
    items = [("cublas_tf32", {}), (WS.name, WS.default_params())]
    plan = Plan(backend="cuda", items=items, shapes=[(4096, 4096, 4096)], dtype="float32",
                warmup=1, repeats=3)
    recs = _run(plan)
    byname = {r.variant: r for r in recs}
    assert byname[WS.name].passed, (byname[WS.name].status, byname[WS.name].error)
    if byname["cublas_tf32"].status != "skipped":
        assert math.isfinite(byname[WS.name].pct_of_cublas)


# --- ladder v4, FP32: ffma_regdb (cuda/lab/ffma_regdb.cu) -----------------------------------

RD = registry.get("ffma_regdb")
#: odd shapes, N % 4 != 0 (4-byte B copies), several k-tiles, split-K with uneven slices
RD_SHAPES = ODD_SHAPES + [(129, 257, 64), (257, 130, 1000), (300, 200, 100), (1024, 1024, 1024),
                          # N % 4 == 0 with partial tiles: EDGE_CLAMP's clamped bounds-free copies
                          (130, 132, 17), (1000, 1000, 1000), (65, 260, 37), (4, 4, 9),
                          # parallel split-K: long K with uneven slices, 1 row, several tiles
                          (64, 300, 5000), (1, 257, 3001), (100, 4096, 999),
                          # 80- and 96-row tiles: M in (64, 96], the B rows left to the
                          # last copy round (160, 192 threads), N % 4 == 0 and != 0
                          (90, 4095, 1000), (77, 388, 130)]
#: grids of more than a wave of 64-row tiles (396 CTAs on 132 SMs): split-K of the last
#: partial wave's tiles only (hybrid), N % 4 == 0 and != 0, a K tail
HYBRID_SHAPES = [(1300, 2600, 300), (2047, 2049, 77)]


def test_regdb_registered():
    """One file for the technique: the tile widths, B's copies and C through shared memory
    are its parameters (once five files), each described in one line."""
    assert RD.role == "rung"
    path = RD.source_path("cuda")
    assert path.is_file() and re.fullmatch(r"(?:[12]\d_)?[a-z0-9_]+\.cu", path.name)
    text = path.read_text()
    assert text.lstrip().startswith("/*") and "Technique" in text
    for name in RD.space:
        assert re.search(rf"\b{name.upper()}\b", text)
    for gone in ("ffma_regdb_padb", "ffma_regdb_b4", "ffma_narrow", "ffma_narrow_padb"):
        assert gone not in registry.REGISTRY and not (path.parent / f"{gone}.cu").exists()
    assert set(RD.headers[0].descriptions) == set(RD.space)
    assert {bm_of(c) for c in RD.combos()} == {64, 80, 96, 128, 256}
    assert {bn_of(c) for c in RD.combos()} == {16, 32, 48, 64, 128}


def test_regdb_space_and_shapes():
    combos = rd_combos(bcopy=0, crows=0, wide=True)
    assert {bm_of(c) for c in combos} == {64, 80, 96, 128}
    valid = [c for c in combos if RD.check("cuda", c, 4096, 4096, 4096, "float32") is None]
    assert valid and RD.check("cuda", RD.default_params(), 4096, 4096, 4096, "float32") is None
    assert "spills" in RD.check("cuda", rd(bm=128, splitk=2), 64, 64, 64, "float32")
    assert "at most 8 ways" in RD.check("cuda", rd(bm=64, splitk=12), 64, 4096, 4096, "float32")
    for c in valid:
        assert shared_bytes(RD, c) <= 227 * 1024
    for shape in RD_SHAPES + HYBRID_SHAPES:
        m, n, _k = shape
        ran = [c for c in combos if RD.check("cuda", c, *shape, "float32") is None]
        # a split-K of every tile height the shape takes, hybrid where the 64-row tiles make
        # more than a wave (396 CTAs on 132 SMs)
        tiles64 = -(-m // 64) * -(-n // 128)
        assert {c["hybrid"] for c in ran if c["splitk"] > 1 and bm_of(c) == 64} == {int(tiles64 > 396)}
        for c in ran:
            (gx, gy), (bx, by) = RD.geometry(c, *shape)
            assert bx * by == 2 * bm_of(c)
            tiles = -(-m // bm_of(c)) * -(-n // 128)
            if c["hybrid"]:    # whole tiles, then the last wave's tiles in splitk slices
                rem = tiles % (132 * (3 if bm_of(c) == 64 else 2))
                assert gy == 1 and gx == tiles + rem * (c["splitk"] - 1) and 0 < rem
            else:
                assert gx * 128 >= n and gy * bm_of(c) >= m and gx * gy == tiles * c["splitk"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_regdb_verifies_at_odd_shapes(dtype):
    _need_cuda()
    shapes = RD_SHAPES + HYBRID_SHAPES
    items = _distinct([(RD.name, c) for c in rd_combos(bcopy=0, crows=0, wide=True)
                       if any(RD.check("cuda", c, *s, dtype) is None for s in shapes)], shapes, dtype)
    plan = Plan(backend="cuda", items=items, shapes=shapes, dtype=dtype, warmup=0, repeats=2,
                dist="int" if dtype == "int32" else "uniform")
    recs = _run(plan)
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in recs
           if r.status != "skipped" and not r.passed]
    assert not bad, bad
    # only the other build of split-K (by the grid) or another tile height is skipped
    skipped = [(r.label(), r.m, r.n, r.k, r.error) for r in recs if r.status == "skipped"
               and "chosen by the shape" not in (r.error or "") and "-row tiles are for" not in (r.error or "")]
    assert not skipped, skipped
    assert {(r.params["hybrid"], r.m, r.n, r.k) for r in recs if r.status == "ok" and r.params["hybrid"]} \
        == {(1,) + s for s in HYBRID_SHAPES}


@pytest.mark.gpu
@pytest.mark.parametrize("shape,splitk", [((64, 4096, 1000), 8), ((1000, 1000, 1000), 3),
                                          ((127, 253, 61), 8)])
def test_regdb_parallel_splitk_is_deterministic_and_leaves_its_counters_zero(shape, splitk):
    """Launch after launch (the timed ones, no zeroing between) C is bitwise the first
    verified run's, and the per-tile arrival counters are back to zero after each."""
    _need_cuda()
    tiles = -(-shape[0] // 64) * -(-shape[1] // 128)
    _assert_bitwise_repeatable(RD, rd(bm=64, splitk=splitk), shape, tiles, "fp32", seed=11)


def _assert_bitwise_repeatable(v, params, shape, tiles, precision, seed):
    """A kernel whose tiles are summed from parts (split-K, stream-K, rung 26's clusters): the
    first run verifies; then, three times, timed launches (no zeroing between) leave every
    per-tile arrival counter of the workspace at zero (tiles = 0: none to check), and one
    more launch into a poisoned C gives C bitwise again."""
    from engine.measure.verify import Reference
    from tests.helpers import assert_relaunches_bitwise, cuda_kernel_on_inputs

    m, n, k = shape
    with cuda_kernel_on_inputs(v, params, shape, seed) as (be, kern, ws, a, b):
        be.poison_output(ws)
        first = be.run_once(kern, ws, m, n, k)
        assert Reference(a, b).check(first, precision).passed
        assert_relaunches_bitwise(be, kern, ws, shape, first, tiles)   # tiles 0: rung 26's clusters


@pytest.mark.gpu
@pytest.mark.parametrize("shape,params", [((2047, 2049, 1023), dict(bm=64, splitk=3)),
                                          ((1000, 1001, 1000), dict(bm=64, splitk=4)),
                                          ((90, 4099, 4001), dict(bm=96, splitk=8))])
def test_regdb_warp_row_splitk_is_deterministic_and_leaves_its_counters_zero(shape, params):
    _need_cuda()
    from engine.measure.backends.cuda import CudaBackend
    c = rd(bcopy=2, crows=int(shape[2] <= 2560), **params)
    be = CudaBackend()
    sms = be.open(0).compute_units
    be.close()
    tiles = -(-shape[0] // bm_of(c)) * -(-shape[1] // 128)
    wave = sms * (3 if bm_of(c) == 64 else 2)
    c["hybrid"] = int(tiles > wave)
    _assert_bitwise_repeatable(RD, c, shape, tiles if tiles <= wave else tiles % wave, "fp32", seed=14)


def rd(**kw) -> dict:
    """ffma_regdb's default parameters with ``kw`` (``bm``, ``bn``: the tile they make)."""
    bm, bn = kw.pop("bm", None), kw.pop("bn", 128)
    out = dict(RD.default_params(), **kw)
    if bm is not None:
        out["tile"] = bm * 1000 + bn
    return out


def bm_of(c) -> int:
    return c["tile"] // 1000


def bn_of(c) -> int:
    return c["tile"] % 1000


def rd_combos(**fixed) -> list[dict]:
    """ffma_regdb's combinations with ``fixed`` values; ``wide`` True or False: the
    128-column tiles or the narrow ones."""
    wide = fixed.pop("wide", None)
    return [c for c in RD.combos() if all(c[k] == v for k, v in fixed.items())
            and (wide is None or (bn_of(c) == 128) == wide)]


def test_regdb_padded_b_is_a_pre_pass_only_where_asked():
    """bcopy = 1, for N % 4 != 0 only: B read from the padded copy a pre-pass makes (a
    scratch of K × roundup(N, 4) floats); every combination with B as it lies (bcopy = 0)
    runs so too, with the same grid, block and workspace. Only bcopy = 1 has a pre-pass:
    the 128-column tiles' pads a row per block, the narrow tiles' a 16-byte vector per
    thread."""
    assert RD.prepass is not None and RD.prepass.entry == "pad_b"
    text = RD.source_path("cuda").read_text()
    assert text.index("#define PAD_B (BCOPY == 1)") < text.index('#include "lab_ptx.cuh"')
    assert "void pad_b(" in text
    for shape in [(1000, 3001, 2000), (4096, 50, 4096), (77, 63, 3001), (1, 5, 7)]:
        m, n, k = shape
        for c in rd_combos(bcopy=0):
            want = RD.check("cuda", c, *shape, "float32")
            assert not RD.prepass.applies(c, *shape)
            d = dict(c, bcopy=1)
            assert "copies them 16 bytes" in RD.check("cuda", d, m, n + 4 - n % 4, k, "float32")
            got = RD.check("cuda", d, *shape, "float32")
            assert (want is None) == (got is None), (c, shape, want, got)
            if got is None:
                assert RD.prepass.applies(d, *shape)
                assert RD.geometry(d, *shape) == RD.geometry(c, *shape)
                assert RD.workspace_bytes(d, *shape) == RD.workspace_bytes(c, *shape)
                assert RD.prepass.scratch_bytes(d, *shape) == 4 * k * ((n + 3) // 4 * 4)
                (gx, gy), (bx, by) = RD.prepass.geometry(d, *shape)
                if bn_of(d) == 128:           # a block per row (or 65535 rows apart)
                    assert (gx * bx * 4 >= n, gy, bx * by) == (True, min(k, 65535), 128)
                else:                         # a thread per 16-byte vector
                    assert gy == 1 and gx * bx >= k * ((n + 3) // 4)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_regdb_padded_b_verifies_at_odd_shapes(dtype):
    _need_cuda()
    shapes = [s for s in RD_SHAPES if s[1] % 4] + [(1000, 3001, 2000), (129, 1025, 77), (64, 301, 5000)]
    items = _distinct([(RD.name, c) for c in rd_combos(bcopy=1, wide=True)
                       if any(RD.check("cuda", c, *s, dtype) is None for s in shapes)], shapes, dtype)
    plan = Plan(backend="cuda", items=items, shapes=shapes, dtype=dtype, warmup=0, repeats=2,
                dist="int" if dtype == "int32" else "uniform")
    ran = [r for r in _run(plan) if r.status != "skipped"]
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in ran if not r.passed]
    assert not bad, bad
    assert {(r.m, r.n, r.k) for r in ran} == set(shapes)


def test_regdb_warp_row_copies_read_b_in_place():
    """bcopy = 2, for N % 4 != 0 and the 128-column tiles of 64-96 rows only, B read where it
    lies (no pre-pass, no scratch): the same grid, block and split-K workspace as with B
    copied as it lies (bcopy = 0) at every combination both offer; C by rows through shared
    memory (crows = 1) where K <= 2560, from the registers past it and with the other copies."""
    text = RD.source_path("cuda").read_text()
    assert "#define B4 (BCOPY == 2)" in text
    for shape in [(1000, 1001, 1000), (80, 4099, 999), (2047, 2049, 1023), (1, 5, 7), (97, 4099, 4096),
                  (300, 2561, 2561)]:
        m, n, k = shape
        for c in rd_combos(bcopy=0, crows=0, wide=True):
            want = RD.check("cuda", c, *shape, "float32")      # hybrid by the grid, as here
            for crows in (0, 1):
                d = dict(c, bcopy=2, crows=crows)
                assert "copies them 16 bytes" in RD.check("cuda", d, m, n + 4 - n % 4, k, "float32")
                got = RD.check("cuda", d, *shape, "float32")
                by_k = crows == (k <= 2560)                     # C by rows where K is short
                ok = want is None and by_k and bm_of(c) < 128
                assert (got is None) == ok, (d, shape, got, want)
                if want is None and bm_of(c) == 128:
                    assert "no register for their pointers" in got
                elif want is None and not by_k:
                    assert f"crows={crows} with bcopy=2" in got
                if got is None:
                    assert not RD.prepass.applies(d, *shape)
                    assert RD.geometry(d, *shape) == RD.geometry(c, *shape)
                    assert RD.workspace_bytes(d, *shape) == RD.workspace_bytes(c, *shape)
            if want is None:
                assert "crows=1 with bcopy=0" in RD.check("cuda", dict(c, crows=1), *shape, "float32")
    # 2047 x 2049: 544 tiles of 64 x 128, 396 CTAs a wave on 132 SMs: 148 split at split-K 3
    c = rd(bm=64, splitk=3, hybrid=1, bcopy=2, crows=1)
    assert RD.check("cuda", c, 2047, 2049, 1023, "float32") is None
    assert RD.geometry(c, 2047, 2049, 1023)[0] == (396 + 3 * 148, 1)
    assert RD.workspace_bytes(c, 2047, 2049, 1023) == 768 + 3 * 148 * 64 * 128 * 4
    # tiles that fill two whole waves (768 x 8447: 12 x 66 = 792) leave nothing to split
    assert "no tile of a partial wave" in RD.check("cuda", c, 768, 8447, 1000, "float32")
    assert RD.check("cuda", rd(bm=64, bcopy=2, crows=1), 768, 8447, 1000, "float32") is None


def test_regdb_b_copies_chosen_by_the_shape():
    """Left to the shape, B's copies are: as it lies where N % 4 == 0; where not, for the
    128-column tiles the padded copy where the hybrid split runs (many tiles) or the tile
    has 128 rows, else the warp-row copies; for the narrow tiles the padded copy where M is
    4096 or more and N above 32 (many row tiles share one small pre-pass), else as it lies.
    The value picked is one the constraints accept."""
    cases = [(rd(bm=64, splitk=3), (1000, 1001, 1000), 2), (rd(bm=64, splitk=1), (3001, 1999, 777), 2),
             (rd(bm=64, splitk=6), (2047, 2049, 1023), 1), (rd(bm=128), (2048, 2047, 1024), 1),
             (rd(bm=64, splitk=3), (1000, 1000, 1000), 0), (rd(bm=128, bn=64, splitk=6), (8192, 50, 8192), 1),
             (rd(bm=128, bn=32, splitk=16), (3000, 17, 5000), 0), (rd(bm=64, bn=64, splitk=8), (1000, 61, 3000), 0)]
    for c, shape, want in cases:
        p = dict(c, **{name: registry.AUTO for name in RD.chosen})
        got = RD.resolve(p, *shape)
        assert got["bcopy"] == want, (c, shape, got)
        assert got["crows"] == int(want == 2 and shape[2] <= 2560)
        assert RD.check("cuda", p, *shape, "float32") is None, (c, shape)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_regdb_warp_row_copies_verify_at_odd_shapes(dtype):
    """Every warp-row combination at shapes whose edge column tile holds 1..127 columns (the
    copies past N predicated off), K tails, M tails of each tile height, split-K."""
    _need_cuda()
    # (2047, 2049, 1023): whole tiles in the first wave, split ones after (544 tiles for 396
    # slots on 132 SMs)
    shapes = [s for s in RD_SHAPES if s[1] % 4] + [(1000, 1001, 1000), (129, 1025, 77), (64, 301, 5000),
                                                   (77, 4099, 999), (90, 131, 4001), (200, 255, 37),
                                                   (70, 515, 3001), (2047, 2049, 1023)]
    items = _distinct([(RD.name, c) for c in rd_combos(bcopy=2)], shapes, dtype,
                      also=lambda c: (c["tile"], c["splitk"] > 1, c["crows"]))
    plan = Plan(backend="cuda", items=items, shapes=shapes, dtype=dtype,
                warmup=0, repeats=2, dist="int" if dtype == "int32" else "uniform")
    ran = [r for r in _run(plan) if r.status != "skipped"]
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in ran if not r.passed]
    assert not bad, bad
    assert {(r.m, r.n, r.k) for r in ran} == set(shapes)
    # every tile height ran, with and without split-K, C stored both ways; split-K of the
    # last wave only (2047 x 2049 x 1023) and of every tile
    assert {(bm_of(r.params), r.params["splitk"] > 1, r.params["crows"]) for r in ran} >= {
        (bm, sk, cr) for bm in (64, 80, 96) for sk in (False, True) for cr in (0, 1)}
    assert {(r.params["hybrid"], r.params["splitk"] > 1) for r in ran} == {(0, False), (0, True), (1, True)}


# --- ffma_regdb's narrow tiles (N <= 64) ----------------------------------------------------

#: narrow N at every tile width (16, 32, 48, 64 columns) and N % 4 != 0 (4-byte B copies); partial
#: row tiles (clamped copies); K % 8 != 0; split-K with uneven and empty slices; one row
NW_SHAPES = [(127, 61, 253), (1000, 1, 33), (61, 7, 1000), (1000, 64, 1000), (4097, 33, 1001),
             (300, 17, 5000), (2049, 48, 777), (1025, 63, 129), (513, 16, 4096), (129, 32, 2000),
             (1, 50, 100), (257, 20, 3), (2048, 64, 2048), (1025, 40, 777), (300, 45, 2000)]


def test_regdb_narrow_tiles_hold_n():
    """The mainloop at 16-64 columns, 128 threads, for N <= 64 only; each N gets the tiles
    that hold it with few empty columns, and some combination runs at every N of the class."""
    narrow = rd_combos(bcopy=0, wide=False)
    assert {bn_of(c) for c in narrow} == {16, 32, 48, 64} and {bm_of(c) for c in narrow} == {64, 128, 256}
    assert all(c["hybrid"] == 0 or RD.check("cuda", c, 4096, 16, 4096, "float32") for c in narrow)
    assert "are for narrow N" in RD.check("cuda", rd(bm=128, bn=64), 8192, 65, 8192, "float32")
    for n in range(1, 65):
        ok = [c for c in narrow if RD.check("cuda", c, 4096, n, 4096, "float32") is None]
        assert ok, n
        assert {bn_of(c) for c in ok} == {bn for bn in (16, 32, 48, 64)
                                          if n <= bn and (bn - n < 16 or bn == 64 and n > 32)}, n
        for c in ok:
            (gx, gy), (bx, by) = RD.geometry(c, 4096, n, 4096)
            assert (bx, by) == (128, 1) and gx == 1 and gy == -(-4096 // bm_of(c)) * c["splitk"]
            assert bm_of(c) * bn_of(c) in (4096, 8192, 12288)   # 8 × 4, 8 or 12 per thread
            assert gx * gy <= 4 * SMS or c["splitk"] == 1
            assert RD.dynamic_shared(c) == 4 * 8 * (bm_of(c) + 4 + bn_of(c)) * 4


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("bcopy", [0, 1])
def test_regdb_narrow_tiles_verify_at_odd_shapes(dtype, bcopy):
    """As B lies (four clamped 4-byte copies where N % 4 != 0) and from the padded copy."""
    _need_cuda()
    shapes = NW_SHAPES if bcopy == 0 else [s for s in NW_SHAPES if s[1] % 4] + [(8192, 50, 1000), (77, 63, 3001)]
    items = _distinct([(RD.name, c) for c in rd_combos(bcopy=bcopy, wide=False)], shapes, dtype,
                      also=lambda c: (bn_of(c), c["splitk"] > 1))
    plan = Plan(backend="cuda", items=items, shapes=shapes, dtype=dtype,
                warmup=0, repeats=2, dist="int" if dtype == "int32" else "uniform")
    ran = [r for r in _run(plan) if r.status != "skipped"]
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in ran if not r.passed]
    assert not bad, bad
    assert {(r.m, r.n, r.k) for r in ran} == set(shapes)
    # every tile width ran, with and without split-K
    assert {(bn_of(r.params), r.params["splitk"] > 1) for r in ran} >= {
        (bn, sk) for bn in (16, 32, 48, 64) for sk in (False, True)}


@pytest.mark.gpu
@pytest.mark.parametrize("shape,params", [((2049, 48, 3001), dict(bn=64, bm=128, splitk=6)),
                                          ((513, 20, 4096), dict(bn=32, bm=256, splitk=8)),
                                          ((1000, 7, 999), dict(bn=16, bm=256, splitk=3)),
                                          ((700, 41, 2500), dict(bn=48, bm=256, splitk=4))])
def test_narrow_splitk_is_deterministic_and_leaves_its_counters_zero(shape, params):
    _need_cuda()
    tiles = -(-shape[0] // params["bm"])
    _assert_bitwise_repeatable(RD, rd(**params), shape, tiles, "fp32", seed=12)


# --- ladder v5, FP32: ffma_wide (cuda/lab/ffma_wide.cu) --------------------------------------

WD = registry.get("ffma_wide")
#: ffma_wide's warp-row copies of B (bcopy = 2) store C by rows through shared memory where K
#: is at most this (its header: crows)
WIDE_CROWS_K = 3072


def test_wide_registered():
    assert WD.role == "rung" and WD.name in LADDER
    path = WD.source_path("cuda")
    assert path.is_file() and re.fullmatch(r"(?:[12]\d_)?[a-z0-9_]+\.cu", path.name)
    for name in WD.space:
        assert re.search(rf"\b{name.upper()}\b", path.read_text())


#: T tiles of 256×128 past one wave with T % SMS != 0: whole tiles, then the split last wave;
#: K = 77 leaves some of the 8 k-slices of a tail tile empty (5 k-tiles at bk=16)
TAIL_SHAPES = [(2300, 2000, 77), (2300, 1999, 301), (4100, 4090, 95)]


def strip_rows(m, bm=256):
    """ffma_wide's strip: the rows past a multiple of bm that strip CTAs compute (1..16)."""
    return m % bm if m > bm and m % bm <= 16 else 0


def tail_grid(c, m, n, sms=SMS):
    """ffma_wide's CTAs with tailk: T tiles (of the rows above the strip), tailk k-slices for
    the T % sms of the partial last wave, then the strip's CTAs."""
    s_rows = strip_rows(m, c["bm"])
    tiles = -(-(m - s_rows) // c["bm"]) * -(-n // 128)
    r, s = tiles % sms, c["tailk"]
    return tiles + (r * (s - 1) if 2 * -(-r * s // sms) <= s else 0) + (-(-n // 128) if s_rows else 0)


def test_wide_space_and_shapes():
    combos = WD.combos()
    valid = [c for c in combos if WD.constraint(c, 4096, 4096, 4096, "float32") is None]
    assert 1 <= len(valid) <= 16 and any(c["tailk"] > 1 for c in valid)
    assert all(WD.check("cuda", c, 4096, 4096, 4096, "float32") is None for c in valid)
    assert "bm must be 256" in WD.constraint(dict(WD.default_params(), bm=128), 64, 64, 64, "float32")
    assert "excludes" in WD.constraint(dict(WD.default_params(), splitk=4, tailk=8), 64, 64, 64,
                                       "float32")
    for c in valid:
        assert shared_bytes(WD, c) <= 227 * 1024
        for shape in RD_SHAPES + TAIL_SHAPES:
            assert WD.check("cuda", c, *shape, "float32") is None
            m, n, _k = shape
            for sms in (SMS, 114, 78):
                (gx, gy), (bx, by) = WD.launch_geometry(c, *shape, sms)
                assert bx * by == 256
                if c["tailk"] > 1:
                    assert gy == 1 and gx == tail_grid(c, m, n, sms)
                else:
                    assert gx * 128 >= n and gy * c["bm"] >= m
    # 4100×4090: 512 tiles of the first 4096 rows (the last wave 116 of 132: left whole), and
    # the 4 rows past them in 32 strip CTAs; 4352 + 17 rows: a row of tiles, no strip
    c = dict(WD.default_params(), tailk=8)
    assert WD.launch_geometry(c, 4100, 4090, 4095, 132)[0] == (512 + 32, 1)
    assert WD.launch_geometry(c, 4369, 4090, 4095, 132)[0] == (18 * 32 + 48 * 7, 1)   # tail split
    assert WD.launch_geometry(dict(c, tailk=1), 4100, 4090, 4095, 132)[0] == (32, 16 + 1)
    assert WD.launch_geometry(dict(c, tailk=1, splitk=4), 4100, 4090, 4095, 132)[0] == (32, 16 * 4 + 1)
    one = dict(c, tailk=1)
    assert WD.launch_geometry(one, 256 + 16, 300, 64, 132)[0] == (3, 1 + 1)   # 16 rows: strip
    assert WD.launch_geometry(one, 256, 300, 64, 132)[0] == (3, 1)           # none past 256
    assert WD.launch_geometry(one, 100, 300, 64, 132)[0] == (3, 1)           # M < bm: a tile row
    assert WD.launch_geometry(c, 256 + 16, 300, 64, 132)[0] == (3 + 3 * 7 + 3, 1)   # with tail
    assert WD.launch_geometry(c, 4096, 4096, 4096, 128)[0] == (512, 1)     # whole waves: no split
    # 512 tiles at 4096²: the last wave is 116 of 132 tiles, 928 slices would take 8 rounds of
    # 1/8: left whole; 288 at 3000²: 24 tiles, 192 slices in 2 rounds of 1/8: split
    assert WD.launch_geometry(c, 4096, 4096, 4096, 132)[0] == (512, 1)
    assert WD.launch_geometry(c, 3000, 3000, 3000, 132)[0] == (288 + 24 * 7, 1)


def test_wide_b_copies_by_shape():
    """bcopy, where N % 4 != 0: B as it lies (0), a padded copy that the pre-pass makes (1:
    the only value with a pre-pass, and so a scratch), or warp-row copies (2), each with the
    grid and block of bcopy = 0; crows (C by rows through shared memory) only with 2 and K ≤
    3072; where a run leaves them to the shape it picks both, and they are accepted."""
    text = WD.source_path("cuda").read_text()
    assert text.index("#define PAD_B 1") < text.index('#include "lab_ptx.cuh"')
    assert "void pad_b(" in text and WD.prepass.entry == "pad_b"
    base = [c for c in WD.combos() if c["bcopy"] == 0 and c["crows"] == 0
            and WD.check("cuda", c, 4096, 4096, 4096, "float32") is None]
    for shape in [(2048, 2047, 1024), (4097, 4095, 4093), (300, 2561, 2561), (4100, 4090, 95),
                  (2300, 1999, 301), (1, 5, 7), (97, 4099, 4096)]:
        m, n, k = shape
        for c in base:
            want = WD.check("cuda", c, *shape, "float32")
            assert not WD.prepass.applies(c, *shape)
            for bcopy, crows in itertools.product((1, 2), (0, 1)):
                d = dict(c, bcopy=bcopy, crows=crows)
                assert "copies them 16 bytes" in WD.check("cuda", d, m, n + 4 - n % 4, k, "float32")
                got = WD.check("cuda", d, *shape, "float32")
                by_k = crows == (bcopy == 2 and k <= WIDE_CROWS_K)
                assert (got is None) == (want is None and by_k), (d, shape, got, want)
                if want is None and not by_k:
                    assert f"crows={crows} with bcopy={bcopy}" in got
                if got is None:
                    assert WD.geometry(d, *shape) == WD.geometry(c, *shape)
                    assert WD.workspace_bytes(d, *shape) == 0
                    assert WD.prepass.applies(d, *shape) == (bcopy == 1)
                    if bcopy == 1:       # every row of B, roundup(N, 4) floats each
                        ldb = n + (-n) % 4
                        (px, py), (bx, by) = WD.prepass.geometry(d, *shape)
                        assert WD.prepass.scratch_bytes(d, *shape) == 4 * k * ldb
                        assert px * bx * 4 >= ldb and py == min(k, 65535) and by == 1
    # the shape's picks: aligned B as it lies; the warp-row copies where one row of tiles
    # reads B once, or where K ≤ 1024 and no slices add through C (then with C by rows); the
    # padded copy elsewhere: longer K, split-K, the tail split of a last wave
    auto = dict(WD.default_params("9.0"), bcopy=registry.AUTO, crows=registry.AUTO)
    for shape, named, want in [((4096, 4096, 4096), {}, (0, 0)), ((2048, 2047, 1024), {}, (2, 1)),
                               ((4097, 4095, 4093), {}, (1, 0)), ((97, 4099, 4096), {}, (2, 0)),
                               ((264, 4099, 4096), {"splitk": 4, "tailk": 1}, (2, 0)),
                               ((600, 131, 3100), {}, (1, 0)), ((3000, 3001, 3000), {}, (1, 0)),
                               ((1000, 1001, 1000), {}, (1, 0)),             # 32 tiles: all split
                               ((1000, 1001, 1000), {"tailk": 1}, (2, 1)),
                               ((1000, 1001, 1000), {"splitk": 4, "tailk": 1}, (1, 0))]:
        got = WD.resolve(dict(auto, **named), *shape)
        assert (got["bcopy"], got["crows"]) == want, (shape, named, got)
        assert WD.check("cuda", dict(auto, **named), *shape, "float32") is None
    # crows follows a named bcopy: B as it lies keeps C's store from the registers
    assert WD.resolve(dict(auto, bcopy=0), 2048, 2047, 1024)["crows"] == 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_wide_verifies_at_odd_shapes(dtype):
    """B as it lies and the padded copy (bcopy 0 and 1), every distinct build at odd shapes:
    the padded copy wherever N % 4 != 0 (its header refuses the others)."""
    _need_cuda()
    items = [(WD.name, c) for c in WD.combos()
             if c["bcopy"] in (0, 1) and WD.constraint(c, 64, 63, 63, dtype) is None]
    # (1300, 900): a partial group of sw=8 rows; M ≥ 256 with M % 256 and N % 128: shifted edge tiles
    # (257, 301, 77), (528, 130, 203), (4100, 4090, 95): strips of 1, 16 and 4 rows (N % 4 or
    # not, K % 4 or not); (529, 129, 33): 17 rows past 512, a row of tiles
    shapes = RD_SHAPES + [(513, 385, 129), (1300, 900, 77), (1000, 3001, 17), (257, 301, 77),
                          (528, 130, 203), (529, 129, 33)] + TAIL_SHAPES
    items = _distinct(items, shapes, dtype)
    plan = Plan(backend="cuda", items=items, shapes=shapes, dtype=dtype, warmup=0, repeats=2,
                dist="int" if dtype == "int32" else "uniform")
    recs = _run(plan)
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in recs
           if not r.passed and not (r.status == "skipped" and r.params["bcopy"] == 1 and r.n % 4 == 0)]
    assert not bad, bad
    assert {(r.m, r.n, r.k) for r in recs if r.params["bcopy"] == 1 and r.passed} == \
        {s for s in shapes if s[1] % 4}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_wide_warp_row_copies_verify_at_odd_shapes(dtype):
    """The warp-row copies (bcopy = 2), every distinct build at N % 4 != 0 shapes: shifted
    edge column tiles (N % 128 of 1..127 columns, no copy predicated), tiles under 256 rows
    or 128 columns (the checked copies), K tails, the strip (1, 4 and 16 rows), the tail
    split and split-K adding through C, and C stored both ways (K on either side of the
    header's bound)."""
    _need_cuda()
    shapes = [s for s in RD_SHAPES if s[1] % 4] + [
        (513, 385, 129), (1300, 901, 77), (1000, 3001, 17), (257, 301, 77), (528, 130, 203),
        (529, 129, 33), (2300, 1999, 301), (4100, 4090, 95), (300, 1027, WIDE_CROWS_K + 7),
        (600, 131, WIDE_CROWS_K + 41)]
    items = _distinct([(WD.name, c) for c in WD.combos() if c["bcopy"] == 2], shapes, dtype)
    plan = Plan(backend="cuda", items=items, shapes=shapes, dtype=dtype, warmup=0, repeats=2,
                dist="int" if dtype == "int32" else "uniform")
    ran = [r for r in _run(plan) if r.status != "skipped"]
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in ran if not r.passed]
    assert not bad, bad
    assert {(r.m, r.n, r.k) for r in ran} == set(shapes)
    assert {(r.params["crows"], r.params["splitk"] > 1 or r.params["tailk"] > 1) for r in ran} == {
        (cr, split) for cr in (0, 1) for split in (False, True)}


# --- TF32 rung 26: tf32_wgmma_rs (cuda/lab/tf32_wgmma_rs.cu) ---------------------------------

RS = registry.get("tf32_wgmma_rs")
#: odd shapes; K % 4 != 0 and N % 4 != 0 (4-byte copy paths) next to aligned ones; several
#: k-tiles; (2049, 2100, 36): 153 tiles > 132, so the persistent grid loops over tiles;
#: stream-K on 132 SMs: (3000, 3000, 2001) 288 tiles, the last 24 shared with 108 spare CTAs
#: (tails of 52 k-tiles, ~6 contributors a tile), (1500, 4093, 2001) 192 tiles, the last
#: 60 with 72 spares (N % 4 != 0, K % 4 != 0: the padded copies)
RS_SHAPES = ODD_SHAPES + [(129, 257, 64), (256, 128, 36), (257, 513, 1000), (300, 200, 100),
                          (2049, 2100, 36), (513, 260, 130), (3000, 3000, 2001), (1500, 4093, 2001),
                          # stream-K at bm 128 and 64 (all tiles shared): the last contributor
                          # sums into its accumulators and leaves by the staged TMA epilogue
                          # (N % 4 == 0) or the register one (N % 4 != 0)
                          (100, 4096, 1100), (97, 4093, 2051), (1000, 1000, 1000)]
#: (shape, bm) pairs at which stream-K shares every tile (checked by the walk below)
RS_SK_ALL = [((100, 4096, 1100), 64), ((100, 4096, 1100), 128), ((97, 4093, 2051), 64),
             ((97, 4093, 2051), 128), ((1000, 1000, 1000), 128)]


def test_wgmma_rs_registered():
    assert RS.role == "rung" and RS.name in LADDER
    assert RS.dtypes == ("float32",) and RS.precision == "tf32"
    assert RS.arch_suffix == "a" and RS.prepass is not None     # pads unaligned inputs only
    path = RS.source_path("cuda")
    assert path.is_file() and re.fullmatch(r"(?:[12]\d_)?[a-z0-9_]+\.cu", path.name)
    text = path.read_text()
    assert text.lstrip().startswith("/*") and "Technique" in text
    for name in RS.space:
        assert re.search(rf"\b{name.upper()}\b", text)


def test_wgmma_rs_space_and_shapes():
    combos = [c for c in RS.combos() if RS.check("cuda", c, 4096, 4096, 4096, "float32") is None]
    # stream-K needs persist=1; 64-column tiles run one tile per CTA (persist=0) or are a
    # ping-pong consumer's own; clusters only where the tiles leave most SMs idle (not at
    # 4096³); ping-pong on a persistent grid without stream-K, a consumer's tile holding 128
    # or 64 accumulators a thread
    assert len(RS.combos()) == 432 and len(combos) == 16 + sum(c["streamk"] == 1 for c in combos)
    assert {(c["persist"], c["bn"], c["ks"], c["pingpong"]) for c in combos} == {
        (1, 128, 1, 0), (0, 128, 1, 0), (0, 64, 1, 0), (1, 128, 1, 1), (1, 64, 1, 1)}
    assert {(c["bm"], c["bn"]) for c in combos if c["pingpong"]} == {(256, 64), (128, 128), (128, 64), (64, 128)}
    assert all(c["streamk"] == 0 for c in combos if c["pingpong"])
    pp = {"persist": 1, "streamk": 0, "bm": 256, "bn": 64, "ks": 1, "pingpong": 1, "rowpad": 16}
    assert "persist=1, streamk=0 and ks=1" in RS.constraint(dict(pp, streamk=1), 4096, 4096, 4096, "float32")
    assert "persist=1, streamk=0 and ks=1" in RS.constraint(dict(pp, persist=0), 4096, 4096, 4096, "float32")
    assert "128 accumulators" in RS.constraint(dict(pp, bn=128), 4096, 4096, 4096, "float32")

    def clusters(m, n, k):
        return {(c["bm"], c["ks"]) for c in RS.combos()
                if c["ks"] > 1 and RS.check("cuda", c, m, n, k, "float32") is None}
    assert clusters(100, 4096, 4096) == {(256, 2), (128, 2), (64, 2)}     # 4 x 32 tiles: too many
    assert clusters(500, 500, 8000) == {(256, 2), (128, 2), (64, 2), (128, 4)}
    assert clusters(1000, 1000, 1000) == {(256, 2), (128, 2)}
    pair = {"persist": 0, "streamk": 0, "bm": 256, "bn": 128, "ks": 2, "pingpong": 0, "rowpad": 16}
    assert "leave 1 of every 2 of the 132 SMs idle (512 tiles)" in RS.constraint(pair, 4096, 4096, 4096, "float32")
    assert "persist=0 and bn=128" in RS.constraint(dict(pair, bn=64), 100, 4096, 4096, "float32")
    assert "only with bm=128" in RS.constraint(dict(pair, ks=4), 500, 500, 8000, "float32")
    assert "at most 115 CTAs (128 here)" in RS.constraint(dict(pair, ks=4, bm=128), 100, 4096, 4096, "float32")
    assert (128, 4) in clusters(100, 3072, 4096)                          # 24 tiles: 96 CTAs
    assert "persist" in RS.constraint({"persist": 2, "streamk": 0, "bm": 256, "bn": 128, "ks": 1, "pingpong": 0, "rowpad": 16}, 64, 64, 64, "float32")
    assert "stream-K" in RS.constraint({"persist": 0, "streamk": 1, "bm": 256, "bn": 128, "ks": 1, "pingpong": 0, "rowpad": 16}, 64, 64, 64, "float32")
    assert "one tile per CTA" in RS.constraint({"persist": 1, "streamk": 0, "bm": 128, "bn": 64, "pingpong": 0, "rowpad": 16}, 64, 64, 64, "float32")
    assert RS.workspace_bytes({"persist": 1, "streamk": 0, "bm": 256, "bn": 128, "ks": 1, "pingpong": 0, "rowpad": 16}, 4096, 4096, 4096) == 0
    persistent_stages = {256: 4, 128: 6, 64: 8}   # the kernel's STAGES per BM beside the staging area
    text = RS.source_path("cuda").read_text()
    for bm, st in persistent_stages.items():
        assert f"#elif BM == {bm}\n#define STAGES {st} " in text
    assert "#define STAGES (STAGES_FIT < 5 ? STAGES_FIT : 5)" in text
    assert "#define KS_PART_BYTES (BM * 512)" in text
    for c in combos:
        bm, bn = c["bm"], c["bn"]
        stage = (bm + bn) * 128                   # A's bm x 32 and B's 32 x bn floats
        if c["pingpong"]:
            # as many stages as fit beside the 64 KB staging area (the kernel's STAGES_FIT), at most 8
            st = min(8, (227 * 1024 - 32 - 1280 - 65536) // stage)
            assert shared_bytes(RS, c) == st * stage + 65536 + 1280
            assert {(256, 64): 4, (128, 128): 5, (128, 64): 6, (64, 128): 6}[(bm, bn)] == st
        elif c["persist"]:
            # the stages, the 32 KB staging area apart (one buffer a consumer), atom alignment
            # and barriers: 225.25 KB at every bm
            assert shared_bytes(RS, c) == persistent_stages[bm] * stage + 32768 + 1280 == 230656
        else:
            # one tile per CTA: 5 stages (4 where 5 do not fit), the staging area inside them
            st = 4 if (bm, bn) == (256, 128) else 5
            assert shared_bytes(RS, c) == st * stage + 1280
            # the ring holds the staging area, and past it a 2-CTA cluster's partial
            assert st * stage >= 512 * bn + (512 * bm if bn == 128 else 0) and 2 * st * 8 <= 256
        assert shared_bytes(RS, c) <= 227 * 1024 - 32          # Walk is 32 static bytes
        for m, n, k in RS_SHAPES + [(4096, 4096, 4096)]:
            assert RS.check("cuda", c, m, n, k, "float32") is None
            (gx, gy), (bx, by) = RS.geometry(c, m, n, k)
            tiles = -(-m // bm) * -(-n // bn)
            assert bx * by == (384 if c["pingpong"] else 128 * (1 + bn // 64)) and gy == 1
            if c["streamk"]:
                assert gx == SMS                      # every SM: a last wave's idle ones share it
            else:
                assert gx == (min(tiles, SMS) if c["persist"] else tiles)


@pytest.mark.parametrize("shape", RS_SHAPES + [(4096, 4096, 4096)])
def test_wgmma_rs_prepass_only_pads_what_tma_cannot_read(shape):
    """No pre-pass blocks unless a row stride is not a multiple of 16 bytes (K % 4 for A,
    N % 4 for B); the maps then read the padded copies, else A and B in place. The maps are
    the kernel's first arguments: the scratch holds the copies only (at least 256 bytes)."""
    m, n, k = shape
    p = RS.default_params()
    (px, py), (bx, by) = RS.prepass.geometry(p, m, n, k)
    assert (px * py == 0) == (k % 4 == 0 and n % 4 == 0) and bx * by == 256
    at, maps = RS.prepass.tensor_maps(p, m, n, k)
    kp, np_ = -(-k // 4) * 4, -(-n // 4) * 4
    ap, bp = (4 * m * kp if k % 4 else 0), (4 * k * np_ if n % 4 else 0)
    assert RS.prepass.maps_in == "params" and at is None
    assert RS.prepass.scratch_bytes(p, m, n, k) == max(ap + bp, 256)
    a_map, b_map, c_map = maps
    assert (a_map.base, a_map.offset) == (("scratch", 0) if k % 4 else ("a", 0))
    assert (b_map.base, b_map.offset) == (("scratch", ap) if n % 4 else ("b", 0))
    assert (a_map.dim0, a_map.dim1, a_map.stride) == (kp, m, 4 * kp)
    assert (b_map.dim0, b_map.dim1, b_map.stride) == (np_, k, 4 * np_)
    for t in maps:
        assert t.stride % 16 == 0 and t.offset % 16 == 0 and t.swizzle == 128
    # the epilogue's TMA stores: C itself where its rows are 16-byte multiples (else a
    # stand-in the kernel never uses: it stores from registers then), never rounded
    assert c_map.elem == "float32" and (c_map.box0, c_map.box1) == (32, 64)
    if n % 4 == 0:
        assert (c_map.base, c_map.offset, c_map.dim0, c_map.dim1, c_map.stride) == ("c", 0, n, m, 4 * n)
    else:
        assert c_map.base == "scratch" and c_map.dim1 == 1
        # the stand-in lies inside the scratch
        assert c_map.offset + c_map.stride <= RS.prepass.scratch_bytes(p, m, n, k)
    assert (a_map.box0, a_map.box1, b_map.box0, b_map.box1) == (32, 64, 32, 32)
    assert a_map.elem == b_map.elem == "tf32"                                # TMA rounds both


@pytest.mark.parametrize("shape", [(3100, 3700, 4500), (1900, 4500, 3800), (2049, 2100, 36),
                                   (127, 253, 61), (4100, 4090, 4095), (3000, 3000, 3000)])
def test_wgmma_rs_rowpad_moves_only_rows_inside_a_sector(shape):
    """rowpad=128: A is copied onto rows of whole 128-byte lines where K % 8 != 0 (its rows
    start inside a 32-byte sector), B where N % 8 != 0; rows on whole sectors are read in
    place, and where nothing is padded the parameter is refused (it would change nothing)."""
    m, n, k = shape
    p = dict(RS.default_params(), rowpad=128)
    why = RS.check("cuda", p, m, n, k, "float32")
    if k % 8 == 0 and n % 8 == 0:
        assert why is not None and "pads nothing" in why
        return
    assert why is None
    at, (a_map, b_map, _c) = RS.prepass.tensor_maps(p, m, n, k)
    kp = -(-k // 32) * 32 if k % 8 else k
    np_ = -(-n // 32) * 32 if n % 8 else n
    ap = 4 * m * kp if k % 8 else 0
    assert (a_map.base, a_map.dim0, a_map.stride) == (("scratch", kp, 4 * kp) if k % 8 else ("a", k, 4 * k))
    assert (b_map.base, b_map.offset, b_map.dim0) == (("scratch", ap, np_) if n % 8 else ("b", 0, n))
    assert at is None                                   # the maps are arguments
    assert RS.prepass.scratch_bytes(p, m, n, k) == max(ap + (4 * k * np_ if n % 8 else 0), 256)
    for t in (a_map, b_map):
        assert t.stride % (128 if t.base == "scratch" else 16) == 0
    (px, py), _ = RS.prepass.geometry(p, m, n, k)
    assert py == (-(-m // 32) if k % 8 else 0) + (-(-k // 32) if n % 8 else 0)
    assert px == -(-max(kp if k % 8 else 0, np_ if n % 8 else 0) // 128)        # 32 rows x 128 columns a block
    # only with the persistent, shared-tile grid
    assert "persist=1, pingpong=0 and ks=1" in RS.constraint(dict(p, pingpong=1, bn=64), m, n, k, "float32")
    text = RS.source_path("cuda").read_text()
    assert "pad_for_tma<ROWPAD / 4, ROWPAD == 128 ? 8 : 4>" in text


def _rs_walk(tiles, ktiles, grid, streamk=1):
    """rs's stream-K choice and Walk, transcribed from the kernel: per CTA its items
    (tile, kb, ke) in order; and (dp, rem, qm, tl, L, g)."""
    rem = tiles % grid
    qm = rem * ktiles // grid
    g = grid // rem if rem else 0
    if streamk == 2:
        sk = rem > 0 and 2 <= g <= 10 and ktiles >= 8 * g              # SK_MIN_KTILES 8
    else:
        sk = rem > 0 and qm >= 8 and grid <= 9 * rem and 4 * rem <= 3 * grid
    dp = tiles - rem if sk else tiles
    rem = rem if sk else 0
    tl, L = ktiles - qm, rem * (ktiles - qm)
    walks = []
    for b in range(grid):
        ndp = (dp - b + grid - 1) // grid if dp > b else 0
        items = [(b + n * grid, 0, ktiles) for n in range(ndp)]
        if rem and streamk == 2:
            if b < g * rem:
                items.append((dp + b % rem, (b // rem) * ktiles // g, (b // rem + 1) * ktiles // g))
        elif rem and b < rem:
            items.append((dp + b, 0, qm))
        elif rem:
            S, j = grid - rem, b - rem
            s_, e_ = j * L // S, (j + 1) * L // S
            n = 0
            while True:
                y = s_ if n == 0 else (s_ // tl + n) * tl
                if y >= e_:
                    break
                a = y // tl
                items.append((dp + a, qm + y - a * tl, qm + min(tl, e_ - a * tl)))
                n += 1
        walks.append(items)
    return walks, dp, rem, qm, tl, L, g


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 256),
                                   (2048, 2048, 2048), (3000, 3000, 3000), (3000, 3000, 2001),
                                   (1500, 4093, 2001), (2049, 2100, 36), (4100, 4090, 4095),
                                   (12288, 1024, 4096), (300, 200, 1001), (9000, 9000, 777),
                                   (1800, 3000, 6000), (1900, 4500, 3800)])
@pytest.mark.parametrize("sms", [132, 114, 78])
@pytest.mark.parametrize("bm", [256, 128, 64])
@pytest.mark.parametrize("streamk", [1, 2])
def test_wgmma_rs_stream_k_covers_every_k_tile_once(shape, sms, bm, streamk):
    """Stream-K's walk, emulated from the kernel's expressions: every k-tile of every tile is
    computed by exactly one CTA; the tiles shared are the last wave's, each by the CTAs whose
    partial slots sk_store reads, distinct and in the order of their k-tiles (STREAMK 1: its
    head's CTA and the spare CTAs that sk_spare_of finds, slots rem + j + a; STREAMK 2: the g
    CTAs r rem + a, each 1/g of K); and the workspace holds every slot."""
    text = RS.source_path("cuda").read_text()
    for line in ("const bool sk = STREAMK && rem > 0 && qm >= SK_MIN_KTILES && G <= 9 * rem && 4 * rem <= 3 * G;",
                 "const bool sk2 = rem > 0 && g >= 2 && g <= 10 && ktiles >= g * SK_MIN_KTILES;",
                 "const int y = n == 0 ? s : (s / tl + n) * tl;",
                 "return (int)(((long long)(y + 1) * S + L - 1) / L) - 1;",
                 "const int slot = kb == 0 ? a : walk.rem + ((int)blockIdx.x - walk.rem) + a;",
                 "const SkParts sp = {a, walk.rem + j0 + a, 1, j1 - j0 + 1};",
                 "const SkParts sp = {a, walk.rem + a, walk.rem, walk.g - 1};",
                 "tile = dp + b % rem;",
                 "kb = (int)((long long)(b / rem) * ktiles / g);",
                 "#define SK_MIN_KTILES 8"):
        assert line in text, line
    m, n, k = shape
    c = {"persist": 1, "streamk": streamk, "bm": bm, "bn": 128, "ks": 1, "pingpong": 0, "rowpad": 16}
    (grid, _), _ = RS.geometry(c, m, n, k, sms=sms)
    assert grid == sms
    tiles, ktiles = -(-m // bm) * -(-n // 128), -(-k // 32)
    walks, dp, rem, qm, tl, L, g = _rs_walk(tiles, ktiles, grid, streamk)
    done, slots, pieces = {}, set(), {}
    for b, items in enumerate(walks):
        for t, kb, ke in items:
            assert 0 <= kb < ke <= ktiles and t < tiles
            for kt in range(kb, ke):
                assert (t, kt) not in done
                done[(t, kt)] = b
            if kb > 0 or ke < ktiles:
                a = t - dp
                assert 0 <= a < rem
                if streamk == 2:
                    slot = b
                else:
                    slot = a if kb == 0 else rem + (b - rem) + a
                assert slot not in slots and slot < 2 * sms
                slots.add(slot)
                pieces.setdefault(a, []).append((kb, slot))
    assert len(done) == tiles * ktiles
    for a, got in pieces.items():
        if streamk == 2:
            order = [a] + [a + rem * r for r in range(1, g)]
        else:
            S = grid - rem
            j0 = ((a * tl + 1) * S + L - 1) // L - 1
            j1 = (((a + 1) * tl) * S + L - 1) // L - 1
            order = [a] + [rem + j + a for j in range(j0, j1 + 1)]
        assert [slot for _kb, slot in sorted(got)] == order
        assert len(got) == len(order) <= 11
    if streamk == 2 and rem:
        # every part of K is as long as the others, within a k-tile: the CTAs of one part
        # read the same slab of K
        lengths = {ke - kb for items in walks for t, kb, ke in items if t >= dp}
        assert max(lengths) - min(lengths) <= 1 and min(lengths) >= 8
    if shape in ((8192, 8192, 8192), (3000, 3000, 2001), (1500, 4093, 2001)) and sms == 132 and bm == 256:
        assert rem > 0 or streamk == 2                  # the shapes meant to be shared are
    if shape in ((1800, 3000, 6000), (1900, 4500, 3800)) and sms == 132 and bm == 256:
        assert rem > 0                                  # ... in both ways (last waves 45%, 18% full)
    if shape == (8192, 8192, 8192) and sms == 132 and bm == 256 and streamk == 2:
        assert rem == 0                                 # a last wave over half full: g = 1
    if shape in ((4096, 4096, 4096), (8192, 8192, 256)) and sms == 132 and bm == 256:
        assert rem == 0                                 # ... and these are not (see the kernel)
    assert RS.workspace_bytes(c, m, n, k, sms=sms) >= -(-4 * tiles // 256) * 256 + len(slots) * bm * 128 * 4


@pytest.mark.parametrize("shape,bm", RS_SK_ALL)
@pytest.mark.parametrize("streamk", [1, 2])
def test_wgmma_rs_stream_k_shares_every_tile_at_the_small_shapes(shape, bm, streamk):
    """The shapes RS_SHAPES adds for the stream-K fix-up through the epilogue do exercise it
    on a 132-SM GPU, both ways: every tile is in the shared last wave (dp = 0)."""
    m, n, k = shape
    tiles, ktiles = -(-m // bm) * -(-n // 128), -(-k // 32)
    _walks, dp, rem, *_ = _rs_walk(tiles, ktiles, 132, streamk)
    assert rem == tiles and dp == 0


@pytest.mark.gpu
@pytest.mark.parametrize("shape,bm", [((100, 4096, 1100), 64), ((100, 4096, 1100), 128),
                                      ((97, 4093, 2051), 128)])
@pytest.mark.parametrize("streamk", [1, 2])
def test_wgmma_rs_stream_k_is_deterministic_and_leaves_its_counters_zero(shape, bm, streamk):
    """Stream-K's last contributor sums the partials in k order, whichever CTA arrives last
    (staged epilogue, and N % 4's register one): C is bitwise the first verified run's,
    launch after launch, and every tile's arrival counter is back to zero."""
    _need_cuda()
    tiles = -(-shape[0] // bm) * -(-shape[1] // 128)
    _assert_bitwise_repeatable(RS, {"persist": 1, "streamk": streamk, "bm": bm, "bn": 128, "ks": 1, "pingpong": 0, "rowpad": 16},
                               shape, tiles, "tf32", seed=5)


@pytest.mark.gpu
@pytest.mark.parametrize("shape,bm,ks", [((100, 4096, 1100), 64, 2), ((97, 4093, 2051), 128, 2),
                                         ((500, 500, 3001), 128, 4)])
def test_wgmma_rs_cluster_sum_is_deterministic(shape, bm, ks):
    """A tile shared by a cluster is summed in one order (a tree over the ranks' parts of K)
    whichever CTA finishes first: C is bitwise the first verified run's, launch after launch
    (staged epilogue, N % 4's register one, K % 4's padded A)."""
    _need_cuda()
    c = {"persist": 0, "streamk": 0, "bm": bm, "bn": 128, "ks": ks, "pingpong": 0, "rowpad": 16}
    assert RS.check("cuda", c, *shape, "float32") is None
    _assert_bitwise_repeatable(RS, c, shape, 0, "tf32", seed=7)


def _rs_lane_chunk(w, g):
    """rung 26's 16-byte chunk (of its 32-column box) for lane group g of warp w"""
    return (2 * (w % 2) + g // 4) ^ (5 * ((g >> 1) & 1))


def _wavefronts(accesses):
    """Shared-memory wavefronts of one warp request of 8-byte accesses (word addresses, the
    lane order): each half-warp is one phase, and a phase takes as many wavefronts as the
    most accesses that fall into one bank (distinct words)."""
    total = 0
    for half in (accesses[:16], accesses[16:]):
        per_bank = {}
        for word in half:
            for w in (word, word + 1):
                per_bank.setdefault(w % 32, set()).add(w)
        total += max(len(v) for v in per_bank.values())
    return total


def test_wgmma_rs_fragment_rows_are_a_permutation_and_conflict_free():
    """The header's map of fragment rows to tile columns, emulated: every column of the
    128-wide tile is one fragment row of one lane; rows g and g + 8 of a lane are the two
    words of one 8-byte pair (one LDS.64 gives a0 and a1, or a2 and a3); each LDS.64 of a
    warp takes the minimum two wavefronts of the 128B-swizzled B boxes (a (k, n) element at
    word ((n % 32) / 4 ^ k % 8) * 4 + n % 4 of its 128-byte row), and so does each
    STS.64 of the epilogue into the staging boxes (C's rows m, 128B swizzle)."""
    text = RS.source_path("cuda").read_text()
    assert "const unsigned chunk = (2 * (warp % 2) + g / 4) ^ (5 * ((g >> 1) & 1));" in text
    # slab s (below: cw) is consumer cw's 64 columns, or a ping-pong consumer's slab s: its
    # columns from 64 s, its box 2 s + w / 2 (box + s * 2 * BBOX_BYTES)
    assert "ncol[h] = 32 * (2 * slab0 + warp / 2) + 4 * chunk + 2 * (g % 2) + h;" in text
    assert "const int slab0 = PINGPONG ? 0 : cw;" in text
    assert "box + sl * 2 * BBOX_BYTES" in text and "col0 + 64 * sl" in text and "col0 + 64 * (slab0 + sl)" in text
    assert "const unsigned pair = 8 * (g % 2);" in text
    assert "ld.shared.v2.u32" in text and "st.shared.v2.f32" in text
    cols = []
    for cw in range(2):
        for w in range(4):
            for lane in range(32):
                g = lane // 4
                n = [32 * (2 * cw + w // 2) + 4 * _rs_lane_chunk(w, g) + 2 * (g % 2) + h
                     for h in range(2)]
                assert n[1] == n[0] + 1 and n[0] % 2 == 0             # one 8-byte pair
                if lane % 4 == 0:
                    cols += n
            for kk, q in itertools.product(range(4), range(2)):      # the fragment loads
                words = []
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    k = kk * 8 + t + 4 * q
                    words.append(k * 32 + (_rs_lane_chunk(w, g) ^ (k % 8)) * 4 + 2 * (g % 2))
                assert _wavefronts(words) == 2, (cw, w, kk, q)
            for jj in (j for j in range(32) if j % 4 < 2):            # the staging stores
                words = []
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    r = (jj >> 2) * 8 + 2 * t + (jj & 1)
                    words.append(r * 32 + (_rs_lane_chunk(w, g) ^ (r % 8)) * 4 + 2 * (g % 2))
                assert _wavefronts(words) == 2, (cw, w, jj)
    assert sorted(cols) == list(range(128))


@pytest.mark.gpu
def test_wgmma_rs_verifies_at_odd_shapes():
    _need_cuda()
    _assert_every_valid_combo_verifies(RS, RS_SHAPES)


@pytest.mark.gpu
def test_wgmma_rs_and_cublas_tf32_verify_at_4096():
    _need_cuda()
    items = [("cublas_tf32", {})] + _distinct(
        [(RS.name, c) for c in RS.combos() if RS.check("cuda", c, 4096, 4096, 4096, "float32") is None],
        [(4096, 4096, 4096)], "float32")
    plan = Plan(backend="cuda", items=items, shapes=[(4096, 4096, 4096)], dtype="float32",
                warmup=1, repeats=3)
    recs = _run(plan)
    for r in recs:
        if r.variant == RS.name:
            assert r.passed, (r.label(), r.status, r.error)
            if recs[0].status != "skipped":
                assert math.isfinite(r.pct_of_cublas)


# --- TF32 experiment: tf32_wgmma_fused (cuda/experiments/tf32_wgmma_fused.cu) -------------

FUSED = registry.get("tf32_wgmma_fused")


def test_wgmma_fused_registered():
    assert FUSED.role == "experiment" and FUSED.name in LADDER
    assert FUSED.dtypes == ("float32",) and FUSED.precision == "tf32"
    assert FUSED.arch_suffix == "a" and FUSED.prepass is not None     # pads unaligned inputs only
    text = FUSED.source_path("cuda").read_text()
    assert text.lstrip().startswith("/*") and "Technique" in text
    for name in FUSED.space:
        assert re.search(rf"\b{name.upper()}\b", text)


def test_wgmma_fused_space_fits_shared_memory_and_grids():
    combos = [c for c in FUSED.combos() if FUSED.check("cuda", c, 64, 64, 64, "float32") is None]
    assert len(FUSED.combos()) == 16 and len(combos) == 12   # (astages, 3, 3): too much shared memory
    too_big = {"astages": 4, "bstages": 3, "raws": 3, "persist": 1}
    assert "shared memory" in FUSED.constraint(too_big, 64, 64, 64, "float32")
    for c in combos:
        assert shared_bytes(FUSED, c) <= 227 * 1024
        for m, n, k in RS_SHAPES + [(4096, 4096, 4096)]:
            assert FUSED.check("cuda", c, m, n, k, "float32") is None
            (gx, gy), (bx, by) = FUSED.geometry(c, m, n, k)
            tiles = -(-m // 128) * -(-n // 256)
            assert bx * by == 384 and gy == 1
            assert gx == (min(tiles, SMS) if c["persist"] else tiles)
        (px, py), _ = FUSED.prepass.geometry(c, 4096, 4096, 4096)
        assert px * py == 0                                     # one launch when aligned
        (px, py), _ = FUSED.prepass.geometry(c, 1000, 1502, 777)
        assert px * py > 0


def test_wgmma_fused_transpose_covers_every_block_without_bank_conflicts():
    """The transposers' task map, emulated from the kernel's expressions: every (box, n-quad,
    k-quad) 4 x 4 block of a k-tile's raw B is moved exactly once, and in every quarter-warp
    the 8 lanes' 16-byte loads (raw rows k = 4c + i, chunk q ^ k % 8) and stores (Bt rows
    n = 32 nb + 4q + j, chunk c ^ n % 8) hit 8 distinct 16-byte bank groups."""
    text = FUSED.source_path("cuda").read_text()
    assert "const int task = round * 12 + xw * 4 + (lane >> 3);" in text
    assert "const int nb = task >> 3, c = (q >> 1) ^ (task & 7);" in text
    assert "#define XROUNDS 6" in text and "const int q = lane & 7;" in text
    seen = []
    for rnd, xw in itertools.product(range(6), range(3)):
        for quarter in range(4):
            loads = {i: set() for i in range(4)}
            stores = {j: set() for j in range(4)}
            for l8 in range(8):
                lane = 8 * quarter + l8
                task = rnd * 12 + xw * 4 + (lane >> 3)
                if task >= 64:
                    continue
                q = lane & 7
                nb, c = task >> 3, (q >> 1) ^ (task & 7)
                seen.append((nb, q, c))
                for i in range(4):
                    k = 4 * c + i
                    loads[i].add(q ^ (k % 8))
                for j in range(4):
                    n = 32 * nb + 4 * q + j
                    stores[j].add(c ^ (n % 8))
            for groups in list(loads.values()) + list(stores.values()):
                assert len(groups) in (0, 8)
    assert sorted(seen) == sorted(itertools.product(range(8), range(8), range(8)))


@pytest.mark.gpu
def test_wgmma_fused_verifies_at_odd_shapes():
    _need_cuda()
    _assert_every_valid_combo_verifies(FUSED, RS_SHAPES)


# --- ladder v5, TF32: tf32_wgmma_tp (cuda/experiments/tf32_wgmma_tp.cu) -----------------------------

TP = registry.get("tf32_wgmma_tp")


def test_wgmma_tp_registered_and_shapes():
    assert TP.role == "experiment" and TP.name in LADDER
    assert TP.dtypes == ("float32",) and TP.precision == "tf32"
    assert TP.arch_suffix == "a" and TP.prepass is None
    path = TP.source_path("cuda")
    assert re.fullmatch(r"(?:[12]\d_)?[a-z0-9_]+\.cu", path.name)
    text = path.read_text()
    assert text.lstrip().startswith("/*") and "Technique" in text
    assert "stages" in TP.constraint({"stages": 5}, 64, 64, 64, "float32")
    for c in TP.combos():
        assert TP.check("cuda", c, 4096, 4096, 4096, "float32") is None
        assert shared_bytes(TP, c) <= 227 * 1024
        for m, n, k in RS_SHAPES:
            assert TP.check("cuda", c, m, n, k, "float32") is None
            (gx, gy), (bx, by) = TP.geometry(c, m, n, k)
            assert bx * by == 384 and gx * 256 >= n and gy * 128 >= m


@pytest.mark.gpu
def test_wgmma_tp_verifies_at_odd_shapes_and_4096():
    _need_cuda()
    items = [(TP.name, c) for c in TP.combos()]
    plan = Plan(backend="cuda", items=items, shapes=RS_SHAPES + [(4096, 4096, 4096)],
                dtype="float32", warmup=0, repeats=1)
    recs = _run(plan)
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in recs if not r.passed]
    assert not bad, bad


# --- ladder v6, TF32: tf32_wgmma_tma (cuda/ladder/23_tf32_wgmma_tma.cu) ---------------------------

TMA = registry.get("tf32_wgmma_tma")


def test_wgmma_tma_registered_and_shapes():
    assert TMA.role == "rung" and TMA.name in LADDER
    assert TMA.dtypes == ("float32",) and TMA.precision == "tf32"
    assert TMA.arch_suffix == "a"
    text = TMA.source_path("cuda").read_text()
    assert re.search(r'extern\s+"C"\s+__global__\b[^;{]*?\bvoid\s+prepass\s*\(', text)
    assert "cp.async.bulk.tensor.2d" in text
    assert "stages" in TMA.constraint({"stages": 5, "persist": 1}, 64, 64, 64, "float32")
    for c in TMA.combos():
        assert TMA.check("cuda", c, 4096, 4096, 4096, "float32") is None
        assert shared_bytes(TMA, c) <= 227 * 1024
        for m, n, k in WS_SHAPES + [(4096, 4096, 4096)]:
            (gx, gy), (bx, by) = TMA.geometry(c, m, n, k)
            tiles = -(-m // 128) * -(-n // 256)
            assert bx * by == 384 and gy == 1
            assert gx == (min(tiles, SMS) if c["persist"] else tiles)


@pytest.mark.parametrize("shape", WS_SHAPES + [(4096, 4096, 4096)])
def test_wgmma_tma_tensor_maps_fit_scratch(shape):
    """The two 128-byte maps sit 128-aligned after Bt (and Ap) inside the scratch; TMA's rules:
    16-byte row strides and base offsets, inner box 32 floats (= the 128B swizzle span)."""
    m, n, k = shape
    pre = TMA.prepass
    offset, maps = pre.tensor_maps(TMA.default_params(), m, n, k)
    kp = (k + 3) // 4 * 4
    assert offset % 128 == 0 and offset >= scratch_ws(m, n, k)
    assert pre.scratch_bytes(TMA.default_params(), m, n, k) == offset + 128 * len(maps) and len(maps) == 2
    (sa, oa, a0, a1, sta, ba0, ba1, ea, wa), (sb, ob, b0, b1, stb, bb0, bb1, eb, wb) = maps
    assert wa == wb == 128
    assert ea == eb == "tf32"            # TMA rounds both operands to TF32 as it copies
    assert (sa, oa) == (("scratch", 4 * kp * n) if k % 4 else ("a", 0))
    assert (sb, ob) == ("scratch", 0)
    assert (a0, a1, b0, b1) == (kp, m, kp, n)
    assert sta == stb == 4 * kp and sta % 16 == 0 and oa % 16 == 0
    assert (ba0, ba1, bb0, bb1) == (32, 128, 32, 256)


@pytest.mark.gpu
def test_wgmma_tma_verifies_at_odd_shapes_and_4096():
    _need_cuda()
    items = [(TMA.name, c) for c in TMA.combos()]
    plan = Plan(backend="cuda", items=items, shapes=WS_SHAPES + [(4096, 4096, 4096)],
                dtype="float32", warmup=0, repeats=1)
    recs = _run(plan)
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in recs if not r.passed]
    assert not bad, bad


# --- rung 32: ffma_small (cuda/lab/ffma_small.cu) -----------------------------------------------

SM32 = registry.get("ffma_small")
#: odd shapes (4-byte copies where K or N % 4 != 0), one stage and many, tiles past M and N, each group's k slice
#: partly past K (K = 17, 61, 253), matrix-vector-like shapes
SMALL_SHAPES = ODD_SHAPES + [(255, 257, 253), (256, 256, 256), (100, 1000, 100), (1000, 100, 300),
                             (33, 7, 1001), (7, 33, 130)]
#: shapes whose few tiles split K across CTAs (at bm = 16: 2, 4, 8, 16 and 32 slices; K % 4 != 0
#: and N % 4 != 0 among them), slices of whole stages
SPLIT_SHAPES = [(200, 300, 1500), (128, 130, 900), (100, 70, 3001), (64, 64, 2048), (33, 7, 8193)]


def test_small_is_a_rung_for_any_shape():
    """Rung 32 takes every shape and both dtypes; its tiles are 32 columns by bm rows, its
    block 64 threads per k group, its shared memory the stages or the groups' partial tiles,
    whichever is larger (the kernel traps on a launch that gives less). K is split across
    CTAs only where the tiles make under 2 CTAs per SM and K >= 512, each slice >= 128 k: one
    split-K value per shape (chosen by the shape), so 12 combinations run at any shape."""
    assert SM32.role == "rung" and SM32.order == 25 and SM32.precision == "fp32"
    assert set(SM32.dtypes) == {"float32", "int32"} and "splitk" in SM32.chosen
    text = SM32.source_path("cuda").read_text()
    assert "4u * (unsigned)max(STAGES * STAGE_WORDS, KG * BM * BN) > dyn_smem_bytes()" in text
    for m, n, k in SMALL_SHAPES + SPLIT_SHAPES + [(4096, 4096, 4096), (1024, 1024, 1024)]:
        valid = [c for c in SM32.combos() if SM32.check("cuda", c, m, n, k, "float32") is None]
        assert len(valid) == 12
        for c in valid:
            tiles = -(-m // c["bm"]) * -(-n // 32)
            want = 1 if k < 512 else max(1, min(32, 2 * SMS // tiles, k // 128))
            assert c["splitk"] == max(p for p in (1, 2, 4, 8, 16, 32) if p <= want)
            assert SM32.resolve(dict(c, splitk=registry.AUTO), m, n, k) == c
            (gx, gy, *_), (bx, by, *_) = SM32.geometry(c, m, n, k)
            assert (gx, gy) == (-(-n // 32), -(-m // c["bm"]) * c["splitk"])
            assert (bx, by) == (64 * c["kg"], 1)
            words = max(2 * (c["bm"] * (c["ks"] + 4) + 32 * c["ks"]), c["kg"] * c["bm"] * 32)
            assert shared_bytes(SM32, c) == 4 * words <= 227 * 1024
            assert c["ks"] // c["kg"] >= 8 and c["ks"] % (4 * c["kg"]) == 0
            qpt = -(-c["bm"] * 8 // (64 * c["kg"]))
            assert SM32.workspace_bytes(c, m, n, k) == (
                0 if c["splitk"] == 1 else
                -(-4 * tiles // 256) * 256 + c["splitk"] * tiles * qpt * 64 * c["kg"] * 16)
            # slices of floor or ceil(stages / splitk) whole stages: >= 128 k, none empty
            stages = -(-k // c["ks"])
            assert stages // c["splitk"] * c["ks"] >= (128 if c["splitk"] > 1 else 0)
    # the shapes that split: few tiles and a long K
    assert {SM32.resolve({"bm": 16, "kg": 4, "ks": 64, "splitk": registry.AUTO}, *s)["splitk"]
            for s in SPLIT_SHAPES} == {2, 4, 8, 16, 32}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_small_verifies_at_odd_and_small_shapes(dtype):
    _need_cuda()
    ran = _verified_wherever_valid(SM32, SMALL_SHAPES + SPLIT_SHAPES, dtype,
                                   also=lambda c: (c["bm"], c["kg"], c["ks"]))
    assert {(r.params["bm"], r.params["kg"], r.params["ks"]) for r in ran} == {
        tuple(c[p] for p in ("bm", "kg", "ks")) for c in SM32.combos()}
    assert {r.params["splitk"] for r in ran} == {1, 2, 4, 8, 16, 32}


# --- rung 24: skinny (cuda/lab/skinny.cu), its two streams --------------------------------------

SK = registry.get("skinny")
#: the shared-memory stream (stream = 1) at N <= 64 at every tile width (8, 16, 24, 32, 64
#: columns, one tile or two), K % 4 != 0 (4-byte A copies), rows past M in the last block, k
#: past K in the last chunk, one chunk and many
ASYNC_SHAPES = [(61, 7, 1000), (1000, 1, 33), (1, 1, 1), (33, 1, 65), (4300, 13, 1001),
                (2200, 21, 777), (3000, 17, 5000), (1037, 64, 300), (777, 40, 129), (8192, 16, 1024)]
#: shapes of few blocks and long K: K split across blocks (5-15 slices at 4 warps, the split
#: rule's least waves x (k a slice + 256); K % 4 != 0 and N % 4 != 0 among them)
ASYNC_SPLIT_SHAPES = [(500, 40, 4100), (129, 9, 3001), (3000, 16, 5000), (64, 30, 8193)]
#: the combinations of the shared-memory stream
SK1 = [c for c in SK.combos() if c["stream"] == 1]


def sk1(**kw) -> dict:
    """The shared-memory stream's parameters: ``tile`` (columns of B a block; auto: the
    shape's), ``warps`` (4 or 8 a block: fill 2 or 1), ``stages``."""
    return dict(dict(stream=1, tile=registry.AUTO, unroll=8, stages=3),
                fill=8 // kw.pop("warps", 4), **kw)


def _async_lanes(c):
    """The shared-memory stream's lanes for a parameter choice: (k-lanes, k per chunk, rows
    per block)."""
    tl = 8 if c["tile"] == 8 else 12 if c["tile"] == 24 else 16
    kl = 32 * tl // c["tile"]
    return kl, 4 * kl, 8 // c["fill"] * (16 if tl == 8 else 8)


def _async_ring(c, stages=None):
    """Chunks in the shared-memory stream's ring: stages x 128 k, or as many as fit in 227 KB."""
    _, kc, rb = _async_lanes(c)
    return min((stages or c["stages"]) * 128 // kc, 227 * 1024 // (4 * kc * (rb + c["tile"])))


def _async_geometry(c, m, n, k, sms=SMS):
    """The shared-memory stream's lanes and grid at a shape: (k-lanes, k per chunk, rows per
    block, blocks, slices)."""
    kl, kc, rb = _async_lanes(c)
    blocks = -(-m // rb) * -(-n // c["tile"])
    smem = _async_ring(c) * 4 * kc * (rb + c["tile"])
    slots = min(c["fill"], 228 * 1024 // (smem + 1024)) * sms
    ldk = -(-k // kc) * kc
    chunks, smax = ldk // kc, max(1, min(16, ldk // 512))
    if c["tile"] == 8:                           # one wave of slices where the grid is short
        want = max(1, min(slots // blocks, smax)) if 2 * blocks <= slots else 1
    else:                                        # the least waves x (k a slice + 256)
        costs = {s: -(-s * blocks // slots) * (-(-chunks // s) * kc + 256)
                 for s in (1, 2, 3, 4, 5, 6, 7, 8, 12, 16) if s <= smax}
        want = min(costs, key=lambda s: (costs[s], s))
    return kl, kc, rb, blocks, -(-chunks // -(-chunks // want))


def _async_splits(c, m, n, k):
    return _async_geometry(c, m, n, k)[3:]


def _tile_pick(n):
    return 8 if n <= 8 else 16 if n <= 16 else 24 if n <= 24 else 32 if n <= 32 else 64


def test_skinny_streams_and_their_parameters():
    """One file, three streams of the large operand: the shape picks many warps (stream 2) for
    matrix-vector products, shared memory (stream 1) where A is the large operand and N is
    5-64, registers (stream 0) elsewhere, and the tile with it (the tile that holds N, or
    16); each stream is built once whatever the others' parameters (unroll is stream 0's and
    2's, stages stream 1's); stream 1 has the pre-pass and the workspace, stream 0 neither;
    fill sets stream 1's warps a block (8 / fill)."""
    assert SK.role == "rung" and SK.order == 24 and SK.precision == "fp32"
    assert list(SK.chosen) == ["stream", "tile"] and set(SK.dtypes) == {"float32", "int32"}
    assert set(SK.space) == {"stream", "tile", "unroll", "fill", "stages"}
    auto = dict(stream=registry.AUTO, tile=registry.AUTO, unroll=8, fill=2, stages=3)
    for (m, n, k), stream in {(8192, 16, 8192): 1, (8192, 5, 8192): 1, (8192, 64, 8192): 1,
                              (61, 7, 1000): 1, (8192, 4, 8192): 0, (8192, 1, 8192): 2,
                              (1, 8192, 8192): 2, (1, 1, 1): 2, (2, 8192, 8192): 0,
                              (16, 8192, 8192): 0, (64, 64, 2048): 0,
                              (30, 64, 1000): 0, (8192, 65, 8192): 0}.items():
        p = SK.resolve(auto, m, n, k)
        assert (p["stream"], p["tile"]) == (stream, _tile_pick(n) if stream == 1 else 16), (m, n, k)
        assert SK.prepass.applies(p, m, n, k) == (stream == 1)
        assert stream != 0 or SK.workspace_bytes(p, m, n, k) == 0
    s0 = dict(stream=0, tile=16, unroll=8, fill=2, stages=3)
    assert SK.check("cuda", s0, 16, 65, 8192, "float32") is None
    assert "N ≤ 64" in SK.check("cuda", dict(s0, stream=1), 16, 65, 8192, "float32")
    assert "use ffma_wide" in SK.check("cuda", s0, 65, 65, 8192, "float32")
    assert "tile = 16 or 32" in SK.check("cuda", dict(s0, tile=8), 1, 4096, 4096, "float32")
    assert "built once" in SK.check("cuda", dict(s0, stages=4), 1, 4096, 4096, "float32")
    assert "built once" in SK.check("cuda", sk1(tile=16, unroll=4), 8192, 16, 8192, "float32")
    # stream 0: block (8, 32) on the columns path, (32 wr, 8 / wr) on the rows path, two
    # stages of its largest instantiation; no pre-pass, no workspace, at any split
    for (m, n, k) in [(1, 4096, 4096), (16, 300, 1100), (1, 253, 5000), (1000, 1, 3001), (4300, 13, 1001)]:
        for c in (s0, dict(s0, tile=32, unroll=4, fill=1)):
            (gx, gy), (bx, by) = SK.geometry(c, m, n, k)
            assert bx * by == 256 and (bx, by) == ((8, 32) if m <= n else (bx, 256 // bx)), (m, n, k)
            assert shared_bytes(SK, c) == 8192 * c["unroll"] and SK.workspace_bytes(c, m, n, k) == 0
            assert not SK.prepass.applies(c, m, n, k)
    assert SK.geometry(s0, 1, 253, 5000)[0][1] > 1         # serial split-K on a short grid


def test_skinny_smem_stream_header():
    """stream = 1 takes N <= 64 (A the large operand); its tile (columns per block) is the
    smallest that holds N unless named (or two tiles of 16 or 32); a lane holds 8 or 16 rows x
    8, 12 or 16 columns, the warp's lanes are k-lanes x column groups (32 x 1 up to 16
    columns, 16 x 2 at 24 and 32, 8 x 4 at 64), a chunk 4 k a k-lane; the pre-pass writes Bᵀ
    padded to whole tiles and whole chunks, the grid is blocks x slices, and K is split where
    the blocks fill under half of the SMs' slots or where 2-4 slices fill the waves better
    (none empty), the workspace then holding counters and every slice's partials."""
    assert SK.prepass is not None and SK.prepass.entry == "transpose_b"
    text = SK.source_path("cuda").read_text()
    assert "4u * RING * STAGE_WORDS > dyn_smem_bytes()" in text
    for m, n, k in ASYNC_SHAPES + ASYNC_SPLIT_SHAPES + [(8192, 8, 8192), (20000, 32, 1000), (8192, 64, 8192)]:
        tn = SK.resolve(sk1(), m, n, k)["tile"]
        assert tn == _tile_pick(n)
        valid = [c for c in SK1 if SK.check("cuda", c, m, n, k, "float32") is None]
        assert {c["tile"] for c in valid} == {tn} | {t for t in (16, 32) if -(-n // t) == 2}
        assert len(valid) <= 12 and all(c["unroll"] == 8 for c in valid)
        for c in valid:
            kl, kc, rb, blocks, splits = _async_geometry(c, m, n, k)
            warps = 8 // c["fill"]
            vp = -(-(rb // warps) * (c["tile"] * kl // 32) // kl // 4) * 4   # outputs a thread, whole 4-vectors
            (gx, gy), (bx, by) = SK.geometry(c, m, n, k)
            assert (gx, gy, bx, by) == (blocks, splits, 32 * warps, 1)
            ring = _async_ring(c)
            assert shared_bytes(SK, c) == ring * 4 * kc * (rb + c["tile"]) <= 227 * 1024 and ring >= 3
            # no two stages values make the same ring (the larger one is refused)
            assert c["stages"] == 3 or ring > _async_ring(c, 4 if c["stages"] == 6 else 3)
            assert SK.workspace_bytes(c, m, n, k) == (
                0 if splits == 1 else -(-4 * blocks // 256) * 256 + splits * blocks * bx * vp * 4)
            np_, ldk = -(-n // c["tile"]) * c["tile"], -(-k // kc) * kc
            assert SK.prepass.applies(c, m, n, k) and SK.prepass.scratch_bytes(c, m, n, k) == 4 * np_ * ldk
            (px, py), (pbx, pby) = SK.prepass.geometry(c, m, n, k)
            assert px * 32 == ldk and py * 32 >= np_ and pbx * pby == 128
            if splits > 1:                  # >= 512 k a slice, none empty
                per = -(-(ldk // kc) // splits)
                assert per * kc >= 512 and (splits - 1) * per < ldk // kc
    assert {_async_splits(sk1(tile=_tile_pick(s[1]), stages=4), *s)[1] for s in ASYNC_SPLIT_SHAPES} == {5, 6, 8, 15}
    # the slices that the H200 ran fastest (of 1-12) at 8 warps, 3 stages, but 10000x16x4096
    # (3 fastest, 4 chosen: 1.6% slower)
    fastest = {(3000, 17, 5000): 5, (3000, 16, 5000): 5, (2000, 21, 6000): 4, (4096, 16, 4096): 2,
               (1500, 24, 8000): 5, (6000, 13, 6000): 4, (10000, 16, 4096): 4, (12000, 16, 4000): 2,
               (8192, 16, 8192): 1, (5000, 9, 3000): 3, (6000, 8, 6000): 2, (4224, 16, 2048): 2,
               (20000, 16, 1000): 1, (16384, 16, 4096): 1}
    for shape, slices in fastest.items():
        c = sk1(tile=_tile_pick(shape[1]), warps=8, stages=3)
        assert _async_splits(c, *shape)[1] == slices and SK.geometry(c, *shape)[0][1] == slices, shape


#: matrix-vector shapes for the many-warps stream (stream = 2): N % 4 != 0 (B's rows
#: unaligned), K % 4 != 0 (A's rows start off a 16-byte boundary), K split or not, a dot
#: product, rows past M in the last group, a long K split 16 ways, slices whose last pass
#: is partial (K = 129, 161, 4444 in 5 slices)
GEMV_SHAPES = [(1, 1, 1), (1, 253, 5000), (1, 4095, 3001), (1, 4096, 129), (3001, 1, 4093),
               (4093, 1, 3001), (5, 1, 7), (100000, 1, 37), (1, 7, 70001), (3, 1, 100000),
               (1, 3333, 4444), (1, 33, 161),
               # N % 4 != 0 in 124-column strips: one column in the last strip, N of 2 and 3
               # (every row's words reach rows ahead: all passes predicated), K = 1
               (1, 125, 3001), (1, 2, 999), (1, 3, 1), (1, 6001, 2500)]


def _gemv_geometry(m, n, k, sms=SMS):
    """The many-warps stream's grid: (strips of 32 columns at M = 1, 124 where N % 4 != 0,
    else 8-row groups; slices of K that keep the grid within one wave of 4 blocks an SM,
    >= 128 k each)."""
    tiles = -(-n // _gemv_out(m, n)) if m == 1 else -(-m // 8)
    return tiles, max(1, min(-(-k // 128), 4 * sms // tiles))


def _gemv_out(m, n):
    """Outputs a block of the many-warps stream computes."""
    return (32 if n % 4 == 0 else 124) if m == 1 else 8


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 61, 125, 126, 127, 3001, 4094])
def test_skinny_gemv_shifted_strips_cover_each_column_once(n):
    """A model of strip_shifted's index math (skinny.cu, M = 1 with N % 4 != 0): row k of a
    124-column strip is read as the 32 16-byte words from the one its first column lies in;
    with passes starting at multiples of 4, the offset o of that column in its word depends
    on k % 4 only, so the sums kept per residue land, through red[4L + j - o_r + 3], on each
    of the strip's columns exactly once a row; words of rows below ksafe end within B."""
    k_rows = 13
    total = k_rows * n
    ksafe = max(0, k_rows - (128 + n - 1) // n)
    for col0 in range(0, n, 124):
        for k in range(k_rows):
            e = k * n + col0
            o = e & 3
            assert o == ((k % 4) * n + col0) & 3        # the residue's offset, o_r
            seen = {}
            for lane in range(32):
                w = (e & ~3) + 4 * lane
                if k < ksafe:
                    assert w + 4 <= total
                for j in range(4):
                    p = 4 * lane + j - o + 3            # its slot in red[warp]
                    assert 0 <= p < 124 + 8
                    if 3 <= p < 124 + 3 and col0 + p - 3 < n:
                        assert w + j == e + p - 3       # the element of column col0 + p - 3
                        seen[p - 3] = seen.get(p - 3, 0) + 1
            assert seen == {c: 1 for c in range(min(124, n - col0))}


def test_skinny_gemv_stream_header():
    """stream = 2 takes M = 1 or N = 1 only, is built once (tile 16, fill 1, stages 3; unroll
    4 or 8), runs blocks of 256 threads on a grid of strips (or row groups) x slices of K,
    has no pre-pass and no dynamic shared memory, and a workspace (counters, then each
    slice's 32, 124 or 8 sums a block) only where K is split."""
    s2 = dict(stream=2, tile=16, unroll=8, fill=1, stages=3)
    for m, n, k in GEMV_SHAPES + [(1, 2048, 2048), (1, 8192, 8192), (8192, 1, 8192), (1, 3000, 5000),
                                  (1, 3001, 5000)]:
        tiles, splits = _gemv_geometry(m, n, k)
        for c in (s2, dict(s2, unroll=4)):
            assert SK.check("cuda", c, m, n, k, "float32") is None, (m, n, k)
            assert SK.geometry(c, m, n, k) == ((tiles, splits), (256, 1)), (m, n, k)
            assert shared_bytes(SK, c) == 0 and not SK.prepass.applies(c, m, n, k)
            assert SK.workspace_bytes(c, m, n, k) == (
                0 if splits == 1 else -(-4 * tiles // 256) * 256 + splits * tiles * _gemv_out(m, n) * 4)
    assert _gemv_geometry(1, 2048, 2048) == (64, 8) and _gemv_geometry(8192, 1, 8192) == (1024, 1)
    assert "M = 1 or N = 1" in SK.check("cuda", s2, 2, 4096, 4096, "float32")
    assert "built once" in SK.check("cuda", dict(s2, tile=32), 1, 4096, 4096, "float32")
    assert "built once" in SK.check("cuda", dict(s2, fill=2), 1, 4096, 4096, "float32")
    assert "built once" in SK.check("cuda", dict(s2, stages=4), 1, 4096, 4096, "float32")
    # the lab's dispatch runs it with 8 loads a thread at M = 1, 4 at N = 1 (H200, NOTES.md)
    for table in ("lab_fp32", "lab_tf32"):
        for shape, unroll in [((1, 3000, 5000), 8), ((1, 3333, 4444), 8), ((5000, 1, 3000), 4),
                              ((1, 1, 4096), 8)]:
            name, params = registry.concrete(table, {}, *shape, SMS)
            assert name == "skinny" and (params["stream"], params["unroll"]) == (2, unroll), (shape, name, params)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_skinny_gemv_stream_verifies_and_is_deterministic(dtype):
    _need_cuda()
    s2 = [dict(stream=2, tile=16, unroll=u, fill=1, stages=3) for u in (8, 4)]
    ran = _verified_wherever_valid(SK, GEMV_SHAPES, dtype, combos=s2)
    assert {r.params["unroll"] for r in ran} == {4, 8}
    if dtype == "float32":       # split K (a fix-up in slice order): bitwise the same every launch
        for shape in [(1, 4095, 3001), (3, 1, 100000)]:
            tiles, splits = _gemv_geometry(*shape)
            assert splits > 1
            _assert_bitwise_repeatable(SK, s2[1], shape, tiles, "fp32", seed=35)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_skinny_smem_stream_verifies_at_odd_shapes(dtype):
    _need_cuda()
    ran = _verified_wherever_valid(SK, ASYNC_SHAPES + ASYNC_SPLIT_SHAPES, dtype,
                                   also=lambda c: (c["fill"], c["stages"]), combos=SK1)
    assert {r.params["tile"] for r in ran} == {8, 16, 24, 32, 64}
    assert {(r.params["fill"], r.params["stages"]) for r in ran} == {
        (c["fill"], c["stages"]) for c in SK1
        if any(SK.check("cuda", c, *s, dtype) is None for s in ASYNC_SHAPES)}


@pytest.mark.gpu
@pytest.mark.parametrize("shape,params", [((500, 40, 4100), sk1(tile=64, warps=4, stages=4)),
                                          ((500, 40, 4100), sk1(tile=32, warps=4, stages=3)),
                                          ((129, 9, 3001), sk1(tile=16, warps=8, stages=3)),
                                          ((64, 30, 8193), sk1(tile=32, warps=8, stages=3)),
                                          ((6000, 13, 6001), sk1(tile=16, warps=8, stages=3)),
                                          ((2200, 21, 3001), sk1(tile=24, warps=8, stages=3))])
def test_skinny_smem_stream_splitk_is_deterministic_and_leaves_its_counters_zero(shape, params):
    _need_cuda()
    blocks, splits = _async_splits(params, *shape)
    assert splits > 1
    _assert_bitwise_repeatable(SK, params, shape, blocks, "fp32", seed=33)
