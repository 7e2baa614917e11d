"""Timing statistics and the throughput models."""
from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from engine.measure import metrics
from engine.kernels import registry


def test_summarize_known_data():
    st = metrics.summarize([4.0, 1.0, 3.0, 2.0])
    assert st.median_ms == 2.5 and st.min_ms == 1.0 and st.max_ms == 4.0
    assert st.mean_ms == 2.5 and st.count == 4
    assert st.noise_pct == pytest.approx(100 * statistics.stdev([1, 2, 3, 4]) / 2.5)
    assert st.noise_pct == pytest.approx(51.639777949432225)


def test_summarize_odd_count_and_outlier():
    st = metrics.summarize([1.0, 1.0, 1.0, 1.0, 100.0])
    assert st.median_ms == 1.0            # the median ignores the outlier
    assert st.mean_ms == pytest.approx(20.8)
    assert st.max_ms == 100.0 and st.count == 5


def test_summarize_single_and_constant():
    st = metrics.summarize([0.125])
    assert (st.median_ms, st.min_ms, st.max_ms, st.mean_ms, st.noise_pct, st.count) == \
        (0.125, 0.125, 0.125, 0.125, 0.0, 1)
    assert metrics.summarize([2.0, 2.0, 2.0]).noise_pct == 0.0
    assert metrics.summarize([0.0, 0.0]).noise_pct == 0.0      # no division by a zero mean


def test_summarize_random_data_matches_numpy():
    rng = np.random.default_rng()
    t = rng.uniform(0.01, 5.0, 37)
    st = metrics.summarize(list(t))
    assert st.median_ms == pytest.approx(np.median(t))
    assert st.mean_ms == pytest.approx(t.mean())
    assert st.noise_pct == pytest.approx(100 * t.std(ddof=1) / t.mean())
    assert (st.min_ms, st.max_ms) == (t.min(), t.max())


@pytest.mark.parametrize("bad", [[], [1.0, math.nan], [math.inf], [1.0, -0.5]])
def test_summarize_rejects_bad_series(bad):
    with pytest.raises(ValueError):
        metrics.summarize(bad)


def test_summarize_messages():
    with pytest.raises(ValueError, match="no timed launches"):
        metrics.summarize([])
    with pytest.raises(ValueError, match="invalid launch times"):
        metrics.summarize([1.0, float("nan")])


def test_gflops_and_gbps_formulas():
    # 2·1024³ flops in 1 ms → 2147.483648 GFLOP/s.
    assert metrics.gflops(2 * 1024**3, 1.0) == pytest.approx(2147.483648)
    assert metrics.gflops(1e9, 1000.0) == pytest.approx(1.0)
    assert metrics.gbps(3 * 4 * 1024**2, 0.5) == pytest.approx(3 * 4 * 1024**2 / 0.5e-3 / 1e9)
    assert metrics.gbps(1e9, 1000.0) == pytest.approx(1.0)   # 10⁹ bytes, not 2³⁰
    for fn in (metrics.gflops, metrics.gbps):
        assert math.isnan(fn(1e9, 0.0)) and math.isnan(fn(1e9, -1.0))


def test_arithmetic_intensity():
    assert metrics.arithmetic_intensity(2 * 64**3, 3 * 64 * 64 * 4) == pytest.approx(64 / 6)
    assert math.isnan(metrics.arithmetic_intensity(10, 0))


SHAPES = [(127, 253, 61), (61, 127, 253), (1, 1, 1), (4096, 4096, 4096)]


@pytest.mark.parametrize("name", list(registry.REGISTRY))
def test_flop_and_byte_model_per_variant(name):
    """Each input is read once and the output written once; one multiply-add per term."""
    v = registry.get(name)
    for m, n, k in SHAPES:
        n_out = m if v.kind == "aat" else n
        inputs = m * k + (0 if v.kind == "aat" else k * n)   # aat reads A only
        for dtype, size in registry.ITEMSIZE.items():
            assert size == {"float16": 2, "bfloat16": 2, "float8_e4m3": 1, "float8_e5m2": 1,
                            "int8": 1}.get(dtype, 4)
            assert v.bytes_moved(m, n_out, k, size) == (inputs + m * n_out) * size, (name, dtype)
        assert v.flops(m, n_out, k) == 2 * m * n_out * k, name
        assert v.output_shape(m, n, k) == (m, n_out)


def test_model_helpers():
    assert registry.gemm_flops(2, 3, 4) == 48
    assert registry.gemm_bytes(2, 3, 4, 4) == (8 + 12 + 6) * 4
    assert registry.aat_flops(2, 99, 4) == 2 * 2 * 2 * 4          # N ignored: M×M result
    assert registry.aat_bytes(2, 99, 4, 4) == (8 + 4) * 4
