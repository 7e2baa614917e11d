"""Property-based fuzzing (Hypothesis) of everything that reads user input: size and
parameter parsers, matrix loaders, results readers. No input may raise anything but the
app's own error type, and what is accepted must be what was asked for."""
from __future__ import annotations

import io
import json
import string

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.inputs import matrices
from engine.results import records
from cli.bench import UsageError, parse_devices, parse_param_overrides
from engine.inputs.sizes import MAX_DIM, SizeSpecError, parse_sizes

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
SIZE_ALPHABET = string.digits + "x:,+ *X-.\t"


@FUZZ
@given(st.text(alphabet=SIZE_ALPHABET, max_size=40) | st.text(max_size=30))
def test_parse_sizes_never_raises_anything_else(text):
    try:
        shapes = parse_sizes(text)
    except SizeSpecError:
        return
    assert shapes and all(len(s) == 3 and all(1 <= d <= MAX_DIM for d in s) for s in shapes)


@FUZZ
@given(st.lists(st.integers(1, MAX_DIM), min_size=1, max_size=6, unique=True))
def test_parse_sizes_round_trips_plain_lists(dims):
    assert parse_sizes(",".join(map(str, dims))) == [(d, d, d) for d in dims]


@FUZZ
@given(st.text(alphabet=string.ascii_lowercase + string.digits + "=,; -_", max_size=40)
       | st.text(max_size=30))
def test_parse_param_overrides_never_raises_anything_else(text):
    try:
        out = parse_param_overrides(text)
    except UsageError:
        return
    assert all(isinstance(k, str) and vals and all(isinstance(v, int) for v in vals)
               for k, vals in out.items())


@FUZZ
@given(st.text(max_size=20), st.integers(-5, 5), st.integers(0, 4))
def test_parse_devices_never_raises_anything_else(text, single, count):
    try:
        out = parse_devices(text, single, count, "cuda")
    except UsageError:
        return
    assert out and len(set(out)) == len(out) and all(0 <= d < count for d in out)


def _write(tmp_path, name, payload: bytes):
    p = tmp_path / name
    p.write_bytes(payload)
    return p


TEXTY = st.text(alphabet=string.digits + " ,.-+eE#\n\tnaif;x[]\"'", max_size=200)


@FUZZ
@given(st.sampled_from([".csv", ".txt", ".mtx", ".npy", ".npz"]),
       TEXTY.map(str.encode) | st.binary(max_size=300),
       st.sampled_from(["float32", "int32"]))
def test_matrix_loader_never_raises_anything_else(tmp_path_factory, ext, payload, dtype):
    p = _write(tmp_path_factory.mktemp("m"), "a" + ext, payload)
    try:
        a = matrices.load_matrix(p, dtype)
    except matrices.MatrixInputError:
        return
    assert a.ndim == 2 and a.size > 0 and a.dtype == np.dtype(dtype) and a.flags.c_contiguous


@FUZZ
@given(st.lists(st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=3, max_size=3),
                min_size=1, max_size=5))
@pytest.mark.slow
def test_matrix_loader_reads_back_what_was_written(tmp_path_factory, rows):
    arr = np.array(rows, dtype=np.float32)
    buf = io.StringIO()
    np.savetxt(buf, arr, delimiter=",", fmt="%.9g")
    p = _write(tmp_path_factory.mktemp("m"), "a.csv", buf.getvalue().encode())
    assert np.array_equal(matrices.load_matrix(p, "float32"), arr)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)
FIELD_VALUES = st.none() | st.booleans() | st.integers(-3, 1 << 33) | st.floats() | st.text(max_size=6)


@st.composite
def record_like(draw):
    base = {"backend": "cuda", "variant": "naive", "device": "GPU", "m": 8, "n": 8, "k": 8,
            "dtype": "float32", "params": {"block": 8}, "median_ms": 1.0, "status": "ok"}
    for key in draw(st.lists(st.sampled_from(list(records.FIELDS)), max_size=4)):
        base[key] = draw(FIELD_VALUES | st.dictionaries(st.text(max_size=3), FIELD_VALUES, max_size=2))
    return base


@FUZZ
@given(st.lists(record_like(), max_size=5) | JSONISH)
@pytest.mark.slow
def test_results_reader_json_never_raises_anything_else(tmp_path_factory, data):
    try:
        payload = json.dumps(data).encode()
    except (ValueError, TypeError):
        return
    p = _write(tmp_path_factory.mktemp("r"), "r.json", payload)
    try:
        recs, skipped = records.load_report(p)
    except records.ResultsFileError:
        return
    for r in recs:
        records.validate(r)               # what is accepted is valid, field by field
        assert r.m >= 1 and r.dtype in ("float32", "int32") and r.label()
    assert len(recs) + len(skipped) == len(data)


@FUZZ
@given(st.binary(max_size=400) | TEXTY.map(str.encode))
def test_results_reader_csv_and_garbage_never_raise_anything_else(tmp_path_factory, payload):
    d = tmp_path_factory.mktemp("r")
    for name in ("r.csv", "r.json"):
        p = _write(d, name, b"backend,variant,m,n,k,dtype\n" + payload if name == "r.csv" else payload)
        try:
            records.load_report(p)
        except records.ResultsFileError:
            pass


def test_a_huge_range_is_refused_before_it_is_expanded():
    import time
    t0 = time.perf_counter()
    with pytest.raises(SizeSpecError, match="at most 10000"):
        parse_sizes(f"1:{MAX_DIM}:1")
    assert time.perf_counter() - t0 < 0.5


@pytest.mark.parametrize("text", ["1e400", "nan", "-0", "0x10", "١٢٣", "9" * 400])
def test_odd_numbers_in_sizes(text):
    with pytest.raises(SizeSpecError):
        parse_sizes(text)
