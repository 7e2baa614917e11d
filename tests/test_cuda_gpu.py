"""CUDA backend on a real GPU: every variant verified at odd shapes (the ladder's in
test_ladder.py) and at 4096, the context owned by the engine thread, and the kernel timer
checked against a bare loop.

Marked ``gpu``: skipped cleanly where pycuda or a CUDA device is missing.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from engine.kernels import registry
from engine.run.runner import Plan, expand_items
from engine.run.worker import EngineThread
from tests.code_paths import distinct_items
from tests.helpers import backend_status, run_plan

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module", autouse=True)
def _need_cuda():
    st = backend_status("cuda")
    if not st.available:
        pytest.skip(f"cuda backend unavailable: {st.reason}")


ODD_SHAPES = [(127, 253, 61), (61, 127, 253), (1, 1, 1), (33, 1, 65)]


#: The ladder's rungs: verified at these shapes and more, both dtypes, by test_ladder.py's
#: test_ladder_verifies_at_odd_shapes (and each rung's own test); not run again here.
LADDER = set(registry.ladder_names(include_experiments=True))


#: The variants the two tests below cover one by one (one test each: the GPU suite spreads
#: them over its workers). Triton's rungs are verified at odd shapes, every value of every
#: parameter, by tests/test_triton_gpu.py (each Triton compile takes seconds).
CUDA_NAMES = sorted({name for name, _ in expand_items("cuda")})
OTHER_NAMES = [n for n in CUDA_NAMES if n not in LADDER and not registry.get(n).is_triton]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("name", OTHER_NAMES)
def test_every_cuda_variant_verifies_at_odd_shapes(dtype, name):
    # every code path and parameter value of each variant but the ladder's at every shape
    # (tests.code_paths), not every product of the values
    items = distinct_items(expand_items("cuda", [name]), ODD_SHAPES, dtype)
    plan = Plan(backend="cuda", items=items, shapes=ODD_SHAPES, dtype=dtype,
                warmup=1, repeats=2, dist="int" if dtype == "int32" else "uniform")
    recs, _ = run_plan(plan)
    ran = [r for r in recs if r.status != "skipped"]
    # something ran wherever the registry lets an item run (tiled takes whole tiles only)
    v = registry.get(name)
    assert bool(ran) == any(v.check("cuda", p, *s, dtype) is None for _, p in items for s in ODD_SHAPES)
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in ran if not r.passed]
    assert not bad, bad
    _skips_are_the_registrys(recs, dtype)


def _skips_are_the_registrys(recs, dtype):
    """Every skip is one the registry declares for that shape (a constraint with its
    reason, or a dtype the variant lacks): the runner never skips on its own."""
    for r in recs:
        if r.status == "skipped":
            v = registry.REGISTRY[r.variant]
            reason = v.check("cuda", r.params, r.m, r.n, r.k, dtype)
            assert reason and reason == r.error, (r.label(), r.error, reason)


#: skinny (skinny.cu) refuses min(M, N) > 64, so ODD_SHAPES reach it only at three shapes:
#: here its register stream (stream 0, both tiles; the shared-memory stream's shapes are
#: tests/test_ladder.py's), both paths at odd sizes, every TN of the rows path, N % 4 != 0,
#: K % 4 != 0, a partial last chunk, and serial split-K (1x253x5000: 8 blocks, K split 9 ways, some slices empty);
#: the columns path's full chunks of A (16-byte copies at K % 4 == 0, 4-byte ones else) at 16
#: and 17 rows (an M-group of 16 and one of 1), with split-K at 16x300x1100.
SKINNY_SHAPES = [(1, 253, 127), (61, 7, 1000), (3, 50, 701), (64, 300, 129), (33, 97, 2049),
                 (200, 3, 301), (500, 7, 999), (130, 12, 260), (300, 61, 515), (1, 253, 5000),
                 (1000, 1, 3001), (16, 300, 1100), (17, 97, 1543), (48, 130, 2052),
                 # the rows path's 4 rows per lane at 16 columns (tall A: >= 66 blocks of 64
                 # rows): K % 4 != 0, two 16-column tiles (tile 16), the boundary at K % 4 == 0
                 (4300, 13, 1001), (2200, 21, 777), (4224, 16, 2048)]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
@pytest.mark.parametrize("tile", [16, 32])     # one test each: spread over the suite's workers
def test_skinny_verifies_at_skinny_odd_shapes(dtype, tile):
    items = distinct_items(expand_items("cuda", ["skinny"], {"stream": (0,), "tile": (tile,), "stages": (3,)}),
                           SKINNY_SHAPES, dtype)
    plan = Plan(backend="cuda", items=items, shapes=SKINNY_SHAPES,
                dtype=dtype, warmup=1, repeats=2, dist="int" if dtype == "int32" else "uniform")
    recs, _ = run_plan(plan)
    assert recs and all(r.status != "skipped" for r in recs), \
        [(r.label(), r.error) for r in recs if r.status == "skipped"]
    bad = [(r.label(), r.m, r.n, r.k, r.status, r.error) for r in recs if not r.passed]
    assert not bad, bad


@pytest.mark.parametrize("name", CUDA_NAMES)
def test_every_cuda_variant_verifies_at_4096(name):
    shapes = [(4096, 4096, 4096)]
    plan = Plan(backend="cuda", items=distinct_items(expand_items("cuda", [name]), shapes, "float32"), shapes=shapes,
                dtype="float32", warmup=1, repeats=3)
    recs, _ = run_plan(plan)
    bad = [(r.label(), r.status, r.error) for r in recs if r.status != "skipped" and not r.passed]
    assert not bad, bad
    _skips_are_the_registrys(recs, "float32")
    assert all(r.verify_method == "freivalds+sampled" for r in recs if r.status != "skipped")


def test_int32_wraps_modulo_2_32_on_gpu():
    rng = np.random.default_rng(7)
    a = rng.integers(-2**31, 2**31, (70, 45), dtype=np.int64).astype(np.int32)
    b = rng.integers(-2**31, 2**31, (45, 90), dtype=np.int64).astype(np.int32)
    plan = Plan(backend="cuda", items=expand_items("cuda", ["naive", "tiled_any", "wpt"]),
                dtype="int32", matrices=(a, b), warmup=0, repeats=1)
    recs, _ = run_plan(plan)
    assert recs and all(r.passed for r in recs), [(r.label(), r.error) for r in recs]


def test_planted_faults_are_caught_on_gpu(tmp_path, monkeypatch):
    """A kernel that skips the last row, and one that writes NaN, must fail verification."""
    src = (registry.ROOT / "cuda" / "ladder" / "01_naive.cu").read_text()
    bad_row = tmp_path / "bad_row.cu"
    bad_row.write_text(src.replace("matmul(", "matmul_real(", 1) + """
extern "C" __global__ void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M - 1 || col >= N) return;  /* planted: last row never written */
    ACC acc = 0; for (int k = 0; k < K; ++k) acc += (ACC)A[row * K + k] * (ACC)B[k * N + col];
    C[row * N + col] = (ELEM)acc;
}
""")
    v = registry.REGISTRY["naive"]
    fake = registry.Variant(**{**v.__dict__, "name": "planted_bad_row",
                               "sources": {"cuda": str(bad_row)}})
    monkeypatch.setitem(registry.REGISTRY, "planted_bad_row", fake)
    for dtype in ("float32", "int32"):
        plan = Plan(backend="cuda", items=[("planted_bad_row", {"block": 16})],
                    shapes=[(127, 253, 61), (2048, 2048, 2048)], dtype=dtype, warmup=0, repeats=1)
        recs, _ = run_plan(plan)
        assert [r.passed for r in recs] == [False, False], [(r.verify_method, r.error) for r in recs]


def test_context_lives_on_engine_thread_and_shuts_down_cleanly():
    eng = EngineThread().start()
    seen = {}

    def where():
        seen["thread"] = threading.current_thread().name
        import pycuda.driver as drv
        return drv.Context.get_current() is not None

    plan = Plan(backend="cuda", items=[("naive", {"block": 16})], shapes=[(256, 256, 256)],
                warmup=1, repeats=3)
    recs = eng.submit(plan, lambda e: None).result(120)
    assert recs[0].passed
    assert eng.call(where).result(30) is True
    assert seen["thread"] == "engine"
    assert eng.shutdown(30)


@pytest.mark.serial  # compares two timings: another test's kernels would skew them
def test_reported_time_matches_bare_event_loop():
    """The sweep's median must be the kernel's time: within 5% of a bare pycuda
    event-timed loop's, the best of five alternating rounds of each."""
    import pycuda.driver as drv

    from engine.measure.backends.cuda import CudaBackend
    from engine.inputs import matrices

    n = 2048
    be = CudaBackend()
    be.open(0)
    try:
        v = registry.REGISTRY["tiled"]
        kern = be.compile(v, {"block": 32}, "float32")
        a, b = matrices.generate_pair(n, n, n, "float32", seed=3)
        ws = be.prepare(a, b)
        be.ensure_output(ws, (n, n))
        _mod, fn = kern.handle
        (gx, gy), (bx, by) = v.geometry({"block": 32}, n, n, n)

        def bare_loop(warmup: int, repeats: int) -> float:
            times = []
            for i in range(warmup + repeats):
                e0, e1 = drv.Event(), drv.Event()
                e0.record()
                fn.prepared_call((gx, gy, 1), (bx, by, 1), ws.a, ws.b, ws.c,
                                 np.int32(n), np.int32(n), np.int32(n))
                e1.record()
                e1.synchronize()
                if i >= warmup:
                    times.append(e0.time_till(e1))
            return float(np.median(times))

        # Alternate the two, five rounds each, and compare the best round of each: a clock
        # or power-state change, or another process on a shared GPU, only ever adds time
        # (2% between two medians did not hold on a shared machine).
        engine_runs, bare_runs = [], []
        for _ in range(5):
            engine_runs.append(float(np.median(be.time_launches(kern, ws, n, n, n, 5, 50,
                                                                False, None))))
            bare_runs.append(bare_loop(5, 50))
        be.release(ws)
    finally:
        be.close()
    ratio = min(engine_runs) / min(bare_runs)
    assert 0.95 < ratio < 1.05, (ratio, engine_runs, bare_runs)
