"""Tests for engine.inputs.matrices: generation, loading and every user-facing error."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import scipy.io
import scipy.sparse

from engine.inputs import matrices
from engine.inputs.matrices import (DTYPES, SUPPORTED_EXTENSIONS, MatrixInputError,
                                    check_device_fit, describe, generate, generate_pair,
                                    load_matrix, load_pair, matmul_bytes)

DTYPE_NAMES = ["float32", "int32"]   # half precision and FP8: tests/test_dtypes_host.py


def _odd_matrix(dtype: str, rows: int = 7, cols: int = 5, seed: int = 1) -> np.ndarray:
    """A random odd-shaped matrix whose values survive text round trips."""
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(-1000, 1000, size=(rows, cols)).astype(np.int32)
    return rng.uniform(-10, 10, size=(rows, cols)).astype(np.float32)


def _write(path, text: str):
    path.write_text(text, encoding="utf-8")
    return path


def _assert_result(arr: np.ndarray, dtype: str, shape) -> None:
    assert arr.dtype == DTYPES[dtype]
    assert arr.shape == shape
    assert arr.flags.c_contiguous


def _raises(match: str):
    """pytest.raises for MatrixInputError; `match` is a literal fragment."""
    return pytest.raises(MatrixInputError, match=re.escape(match))


# ---------------------------------------------------------------------------
# generate / generate_pair
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("dist", ["uniform", "normal", "int"])
def test_generate_deterministic_by_seed(dtype, dist):
    a = generate(13, 9, dtype, dist, seed=42)
    b = generate(13, 9, dtype, dist, seed=42)
    c = generate(13, 9, dtype, dist, seed=43)
    _assert_result(a, dtype, (13, 9))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_generate_distributions_in_range():
    u = generate(200, 100, "float32", "uniform", seed=3)
    assert u.min() >= -1 and u.max() <= 1
    assert abs(float(u.mean())) < 0.05
    n = generate(200, 100, "float32", "normal", seed=3)
    assert abs(float(n.mean())) < 0.05 and 0.9 < float(n.std()) < 1.1
    f = generate(50, 40, "float32", "int", seed=3, low=-3, high=5)
    assert f.dtype == np.float32
    np.testing.assert_array_equal(f, np.round(f))
    assert f.min() >= -3 and f.max() <= 5
    # Bounds are inclusive: both ends show up in a large enough draw.
    assert f.min() == -3 and f.max() == 5


@pytest.mark.parametrize("dist", ["uniform", "normal", "int"])
def test_generate_int32_always_draws_integers(dist):
    a = generate(40, 30, "int32", dist, seed=5, low=-2, high=2)
    assert a.dtype == np.int32
    assert a.min() >= -2 and a.max() <= 2
    assert len(np.unique(a)) == 5


def test_generate_never_all_zeros():
    # Tiny matrices with a range around zero: some seeds would draw zeros.
    for seed in range(200):
        assert generate(1, 1, "int32", seed=seed, low=-1, high=1).any()
        assert generate(1, 2, "float32", "int", seed=seed, low=0, high=1).any()
    # A range that only allows zero or a negative value stays in range.
    a = generate(1, 1, "int32", seed=0, low=-1, high=0)
    assert a.any() and a.min() >= -1


def test_generate_seed_none_is_random():
    a = generate(8, 8, "float32", seed=None)
    b = generate(8, 8, "float32", seed=None)
    assert not np.array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(rows=0, cols=3, dtype="float32"), "rows must be at least 1, got 0"),
        (dict(rows=3, cols=2.5, dtype="float32"), "columns must be a whole number"),
        (dict(rows=3, cols=3, dtype="float64"), "Unsupported dtype 'float64'"),
        (dict(rows=3, cols=3, dtype="float32", dist="cauchy"), "Unknown distribution"),
        (dict(rows=3, cols=3, dtype="int32", low=5, high=1), "low (5) must not be greater"),
        (dict(rows=3, cols=3, dtype="int32", low=0, high=0), "[0, 0] only contains zero"),
        (dict(rows=3, cols=3, dtype="int32", high=2**31), "outside the int32 range"),
        (dict(rows=3, cols=3, dtype="float32", seed=-1), "seed must be"),
    ],
)
def test_generate_bad_arguments(kwargs, fragment):
    with _raises(fragment):
        generate(**kwargs)


def test_generate_pair_shapes_and_one_stream():
    a, b = generate_pair(127, 253, 61, "float32", seed=7)
    _assert_result(a, "float32", (127, 61))
    _assert_result(b, "float32", (61, 253))
    a2, b2 = generate_pair(127, 253, 61, "float32", seed=7)
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)
    # A is drawn first from the same stream as a lone generate() call.
    np.testing.assert_array_equal(a, generate(127, 61, "float32", seed=7))
    # Square pair from one stream: A and B differ.
    sa, sb = generate_pair(16, 16, 16, "int32", seed=7)
    assert not np.array_equal(sa, sb)


def test_generate_pair_bad_dimension():
    with _raises("k (columns of A, rows of B) must be at least 1"):
        generate_pair(4, 4, 0, "float32")


# ---------------------------------------------------------------------------
# describe / check_device_fit
# ---------------------------------------------------------------------------


def test_describe():
    assert describe(np.zeros((127, 61), np.float32)) == "127\u00d761 float32"
    assert describe(np.zeros(5, np.int32)) == "5 int32"
    assert describe(np.float32(1)) == "scalar float32"


def test_check_device_fit():
    check_device_fit(100, 100)
    check_device_fit(0, 0)
    with _raises("for the matrices: 3.00 GiB needed but only 512.0 MiB free"):
        check_device_fit(3 * 1024**3, 512 * 1024**2)
    with _raises("for matrix C: 2.0 MiB needed but only 1.0 MiB free"):
        check_device_fit(2 * 1024**2, 1024**2, what="matrix C")
    with pytest.raises(ValueError):
        check_device_fit(-1, 10)


def test_matmul_bytes():
    assert matmul_bytes(2, 3, 4, "float32") == (2 * 4 + 4 * 3 + 2 * 3) * 4


# ---------------------------------------------------------------------------
# Good paths: every format round-trips, both dtypes
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_roundtrip_npy(tmp_path, dtype):
    m = _odd_matrix(dtype)
    np.save(tmp_path / "m.npy", np.asfortranarray(m))  # non-C order on disk
    out = load_matrix(tmp_path / "m.npy", dtype)
    _assert_result(out, dtype, (7, 5))
    np.testing.assert_array_equal(out, m)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_roundtrip_npz_single_and_key(tmp_path, dtype):
    m = _odd_matrix(dtype)
    np.savez(tmp_path / "one.npz", m)
    np.testing.assert_array_equal(load_matrix(tmp_path / "one.npz", dtype), m)
    np.savez(tmp_path / "many.npz", x=m, y=m + 1)
    out = load_matrix(tmp_path / "many.npz", dtype, npz_key="y")
    _assert_result(out, dtype, (7, 5))
    np.testing.assert_array_equal(out, m + 1)
    np.testing.assert_array_equal(load_matrix(tmp_path / "many.npz", dtype, npz_key=0), m)
    np.testing.assert_array_equal(
        load_matrix(tmp_path / "many.npz", dtype, npz_key="y.npy"), m + 1
    )


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_roundtrip_csv(tmp_path, dtype):
    m = _odd_matrix(dtype)
    fmt = "%d" if dtype == "int32" else "%.9g"  # %.9g is exact for float32
    np.savetxt(tmp_path / "m.csv", m, delimiter=",", fmt=fmt)
    out = load_matrix(tmp_path / "m.csv", dtype)
    _assert_result(out, dtype, (7, 5))
    np.testing.assert_array_equal(out, m)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("delimiter", [" ", "\t", ", "])
def test_roundtrip_txt(tmp_path, dtype, delimiter):
    m = _odd_matrix(dtype)
    fmt = "%d" if dtype == "int32" else "%.9g"
    np.savetxt(tmp_path / "m.txt", m, delimiter=delimiter, fmt=fmt, header="made by test")
    out = load_matrix(tmp_path / "m.txt", dtype)
    _assert_result(out, dtype, (7, 5))
    np.testing.assert_array_equal(out, m)


def test_csv_comments_blank_lines_bom_and_quotes(tmp_path):
    text = "\ufeff# a comment\n\n1, 2 ,3\n   \n  # indented comment\n\"4\",5,6\n"
    out = load_matrix(_write(tmp_path / "m.csv", text), "int32")
    np.testing.assert_array_equal(out, [[1, 2, 3], [4, 5, 6]])


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_roundtrip_mtx_dense(tmp_path, dtype):
    m = _odd_matrix(dtype)
    scipy.io.mmwrite(tmp_path / "m.mtx", m.astype(np.float64 if dtype == "float32" else np.int64))
    out = load_matrix(tmp_path / "m.mtx", dtype)
    _assert_result(out, dtype, (7, 5))
    np.testing.assert_array_equal(out, m)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_mtx_sparse_becomes_dense(tmp_path, dtype):
    sparse = scipy.sparse.random(7, 5, density=0.3, format="coo", random_state=0)
    sparse.data = np.round(sparse.data * 10) + 1  # integral, nonzero
    scipy.io.mmwrite(tmp_path / "s.mtx", sparse)
    out = load_matrix(tmp_path / "s.mtx", dtype)
    _assert_result(out, dtype, (7, 5))
    np.testing.assert_array_equal(out, sparse.toarray())


def test_mtx_pattern_gives_ones(tmp_path):
    text = "%%MatrixMarket matrix coordinate pattern general\n3 4 2\n1 1\n2 3\n"
    out = load_matrix(_write(tmp_path / "p.mtx", text), "int32")
    expected = np.zeros((3, 4), np.int32)
    expected[0, 0] = expected[1, 2] = 1
    np.testing.assert_array_equal(out, expected)


def test_bools_and_integer_floats_are_converted(tmp_path):
    np.save(tmp_path / "b.npy", np.array([[True, False], [False, True]]))
    np.testing.assert_array_equal(load_matrix(tmp_path / "b.npy", "int32"), np.eye(2))
    np.testing.assert_array_equal(load_matrix(tmp_path / "b.npy", "float32"), np.eye(2))
    np.save(tmp_path / "f.npy", np.array([[1.0, -2.0], [2.0**31 - 1, -(2.0**31)]]))
    out = load_matrix(tmp_path / "f.npy", "int32")
    assert out[1, 0] == 2**31 - 1 and out[1, 1] == -(2**31)


def test_extension_is_case_insensitive(tmp_path):
    _write(tmp_path / "M.CSV", "1,2\n3,4\n")
    assert load_matrix(tmp_path / "M.CSV", "float32").shape == (2, 2)


def test_load_pair_separate_files(tmp_path):
    a, b = _odd_matrix("float32", 7, 5), _odd_matrix("float32", 5, 3, seed=2)
    np.save(tmp_path / "a.npy", a)
    np.savetxt(tmp_path / "b.csv", b, delimiter=",", fmt="%.9g")
    la, lb = load_pair(tmp_path / "a.npy", tmp_path / "b.csv", "float32")
    np.testing.assert_array_equal(la, a)
    np.testing.assert_array_equal(lb, b)


@pytest.mark.parametrize("names", [("a", "b"), ("A", "B")])
def test_load_pair_npz_named(tmp_path, names):
    a, b = _odd_matrix("int32", 7, 5), _odd_matrix("int32", 5, 3, seed=2)
    # Extra array first in the file: the names must win over file order.
    np.savez(tmp_path / "p.npz", other=np.ones((2, 2)), **{names[1]: b, names[0]: a})
    la, lb = load_pair(tmp_path / "p.npz", None, "int32")
    np.testing.assert_array_equal(la, a)
    np.testing.assert_array_equal(lb, b)


def test_load_pair_npz_unnamed_uses_file_order(tmp_path):
    a, b = _odd_matrix("int32", 7, 5), _odd_matrix("int32", 5, 3, seed=2)
    np.savez(tmp_path / "p.npz", a, b)
    la, lb = load_pair(tmp_path / "p.npz", None, "int32")
    _assert_result(la, "int32", (7, 5))
    _assert_result(lb, "int32", (5, 3))
    np.testing.assert_array_equal(la, a)
    np.testing.assert_array_equal(lb, b)


def test_load_matrix_npz_by_name(tmp_path):
    a, b = _odd_matrix("float32", 7, 5), _odd_matrix("float32", 5, 3, seed=2)
    np.savez(tmp_path / "p.npz", a=a, b=b)
    np.testing.assert_array_equal(load_matrix(tmp_path / "p.npz", "float32", name="B"), b)


# ---------------------------------------------------------------------------
# File-level errors
# ---------------------------------------------------------------------------


def test_missing_file(tmp_path):
    with _raises("A: nope.csv was not found"):
        load_matrix(tmp_path / "nope.csv", "float32")


def test_no_file_given():
    with _raises("B: no file was given"):
        load_matrix("", "float32", name="B")


def test_directory(tmp_path):
    (tmp_path / "d.npy").mkdir()
    with _raises("A: d.npy is a directory"):
        load_matrix(tmp_path / "d.npy", "float32")


def test_unreadable(tmp_path, monkeypatch):
    path = _write(tmp_path / "secret.csv", "1,2\n")
    os.chmod(path, 0)
    try:
        if os.access(path, os.R_OK):
            # Running as root: permissions are not enforced, so simulate.
            def denied(*args, **kwargs):
                raise PermissionError(13, "Permission denied")

            monkeypatch.setattr(matrices, "open", denied, raising=False)
        with _raises("A: secret.csv cannot be read: permission denied"):
            load_matrix(path, "float32")
    finally:
        os.chmod(path, 0o600)


@pytest.mark.parametrize("filename", ["m.xlsx", "m"])
def test_unknown_extension_lists_supported(tmp_path, filename):
    _write(tmp_path / filename, "1,2\n")
    with pytest.raises(MatrixInputError) as info:
        load_matrix(tmp_path / filename, "float32")
    msg = str(info.value)
    assert filename in msg
    for ext in SUPPORTED_EXTENSIONS:
        assert ext in msg


def test_bad_dtype_name(tmp_path):
    with _raises("Unsupported dtype 'float64'; choose one of: float32, int32, float16, "
                 "bfloat16, float8_e4m3, float8_e5m2"):
        load_matrix(tmp_path / "x.npy", "float64")


def test_npz_key_on_non_npz(tmp_path):
    np.save(tmp_path / "m.npy", np.ones((2, 2)))
    with _raises("only applies to .npz"):
        load_matrix(tmp_path / "m.npy", "float32", npz_key="a")


# ---------------------------------------------------------------------------
# CSV / TXT errors
# ---------------------------------------------------------------------------


def test_csv_non_numeric_cell(tmp_path):
    _write(tmp_path / "data.csv", "1,2,3\n4,5,6\n7,abc,9\n")
    with _raises("A: data.csv, row 3, column 2: 'abc' is not a number"):
        load_matrix(tmp_path / "data.csv", "float32")


def test_csv_row_and_line_differ_after_comments(tmp_path):
    _write(tmp_path / "data.csv", "# header\n1,2\n\n3,x\n")
    with _raises("B: data.csv, row 2 (line 4), column 2: 'x' is not a number"):
        load_matrix(tmp_path / "data.csv", "float32", name="B")


def test_csv_space_separated_hint(tmp_path):
    _write(tmp_path / "data.csv", "1 2 3\n")
    with _raises("must be separated by commas"):
        load_matrix(tmp_path / "data.csv", "float32")


def test_csv_empty_cell(tmp_path):
    _write(tmp_path / "data.csv", "1,2,3\n4,,6\n")
    with _raises("data.csv, row 2, column 2 is empty"):
        load_matrix(tmp_path / "data.csv", "float32")


def test_csv_ragged_rows(tmp_path):
    _write(tmp_path / "data.csv", "1,2,3\n4,5,6\n7,8\n")
    with _raises("A: data.csv, row 3 has 2 columns but row 1 has 3"):
        load_matrix(tmp_path / "data.csv", "float32")


def test_txt_ragged_rows(tmp_path):
    _write(tmp_path / "data.txt", "1 2\n3 4 5\n")
    with _raises("data.txt, row 2 has 3 columns but row 1 has 2"):
        load_matrix(tmp_path / "data.txt", "int32")


def test_txt_non_numeric(tmp_path):
    _write(tmp_path / "data.txt", "1 2\n3 1e\n")
    with _raises("data.txt, row 2, column 2: '1e' is not a number"):
        load_matrix(tmp_path / "data.txt", "float32")


@pytest.mark.parametrize("text", ["", "\n\n  \n", "# only a comment\n\n"])
@pytest.mark.parametrize("ext", [".csv", ".txt"])
def test_text_empty_file(tmp_path, text, ext):
    _write(tmp_path / f"empty{ext}", text)
    with _raises(f"A: empty{ext} is empty: it has no data rows"):
        load_matrix(tmp_path / f"empty{ext}", "float32")


def test_text_not_utf8(tmp_path):
    (tmp_path / "bin.csv").write_bytes(b"1,2\n\xff\xfe\x00\x80\n")
    with _raises("bin.csv is not a UTF-8 text file"):
        load_matrix(tmp_path / "bin.csv", "float32")


def test_single_column_csv_is_a_matrix(tmp_path):
    _write(tmp_path / "col.csv", "1\n2\n3\n")
    _assert_result(load_matrix(tmp_path / "col.csv", "int32"), "int32", (3, 1))


# ---------------------------------------------------------------------------
# .npy / .npz errors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("keep", [8, 60, -12])
def test_npy_truncated(tmp_path, keep):
    np.save(tmp_path / "full.npy", np.arange(35.0).reshape(7, 5))
    data = (tmp_path / "full.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[:keep])
    with _raises("A: cut.npy is truncated or corrupt"):
        load_matrix(tmp_path / "cut.npy", "float32")


def test_npy_garbage(tmp_path):
    (tmp_path / "junk.npy").write_bytes(b"this is not numpy at all")
    with _raises("junk.npy is not a valid NumPy .npy file: it lacks the .npy header"):
        load_matrix(tmp_path / "junk.npy", "float32")


def test_npy_that_is_really_npz(tmp_path):
    np.savez(tmp_path / "z.npz", a=np.ones((2, 2)))
    (tmp_path / "z.npy").write_bytes((tmp_path / "z.npz").read_bytes())
    with _raises("z.npy is not a valid NumPy .npy file: it is a zip archive"):
        load_matrix(tmp_path / "z.npy", "float32")


def test_npz_that_is_not_a_zip(tmp_path):
    np.save(tmp_path / "m.npy", np.ones((2, 2)))
    (tmp_path / "m.npz").write_bytes((tmp_path / "m.npy").read_bytes())
    with _raises("m.npz is not a valid NumPy .npz file (not a zip archive)"):
        load_matrix(tmp_path / "m.npz", "float32")


def test_npy_object_array_refused(tmp_path):
    obj = np.array([[{"x": 1}, None]], dtype=object)
    np.save(tmp_path / "obj.npy", obj, allow_pickle=True)
    with _raises(
        "A: obj.npy holds Python objects (pickled data), which is refused for safety"
    ):
        load_matrix(tmp_path / "obj.npy", "float32")


def test_npz_object_array_refused(tmp_path):
    obj = np.array([[1, None]], dtype=object)
    np.savez(tmp_path / "obj.npz", a=obj, b=np.ones((2, 2)))
    with _raises("obj.npz, array 'a' holds Python objects (pickled data)"):
        load_pair(tmp_path / "obj.npz", None, "float32")


def test_npz_truncated(tmp_path):
    np.savez(tmp_path / "full.npz", a=np.ones((7, 5)), b=np.ones((5, 3)))
    data = (tmp_path / "full.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with _raises("cut.npz"):
        load_matrix(tmp_path / "cut.npz", "float32")
    with pytest.raises(MatrixInputError, match="truncated|corrupt"):
        load_pair(tmp_path / "cut.npz", None, "float32")


def test_npz_corrupt_member(tmp_path):
    np.savez_compressed(tmp_path / "z.npz", a=np.arange(400.0).reshape(20, 20))
    data = bytearray((tmp_path / "z.npz").read_bytes())
    data[100] ^= 0xFF  # inside the compressed payload of 'a'
    data[101] ^= 0xFF
    (tmp_path / "bad.npz").write_bytes(bytes(data))
    with _raises("A: bad.npz, array 'a' is truncated or corrupt"):
        load_matrix(tmp_path / "bad.npz", "float32")


def test_npz_fewer_than_two_arrays_for_pair(tmp_path):
    np.savez(tmp_path / "one.npz", only=np.ones((3, 3)))
    with _raises("B: one.npz holds 1 array ('only')"):
        load_pair(tmp_path / "one.npz", None, "float32")


def test_npz_missing_key(tmp_path):
    np.savez(tmp_path / "k.npz", x=np.ones((2, 2)), y=np.ones((2, 2)))
    with _raises("A: k.npz has no array named 'z'; it holds 'x', 'y'"):
        load_matrix(tmp_path / "k.npz", "float32", npz_key="z")
    with _raises("has no array number 5"):
        load_matrix(tmp_path / "k.npz", "float32", npz_key=5)


def test_npz_ambiguous_without_key(tmp_path):
    np.savez(tmp_path / "k.npz", x=np.ones((2, 2)), y=np.ones((2, 2)))
    with _raises("holds 2 arrays ('x', 'y') and none is named 'a'; choose one with npz_key"):
        load_matrix(tmp_path / "k.npz", "float32")


def test_npz_empty_archive(tmp_path):
    np.savez(tmp_path / "none.npz")
    with _raises("none.npz is an .npz archive with no arrays"):
        load_matrix(tmp_path / "none.npz", "float32")


def test_pair_without_b_needs_npz(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((2, 2)))
    with _raises("B: no file was given"):
        load_pair(tmp_path / "a.npy", None, "float32")


# ---------------------------------------------------------------------------
# .mtx errors
# ---------------------------------------------------------------------------


def test_mtx_malformed_header(tmp_path):
    _write(tmp_path / "bad.mtx", "this is not matrix market\n1 2\n")
    with _raises("A: bad.mtx has a malformed Matrix Market header"):
        load_matrix(tmp_path / "bad.mtx", "float32")


def test_mtx_bad_header_field(tmp_path):
    _write(tmp_path / "bad.mtx", "%%MatrixMarket matrix coordinate banana general\n1 1 1\n1 1 2\n")
    with _raises("bad.mtx has a malformed Matrix Market header"):
        load_matrix(tmp_path / "bad.mtx", "float32")


def test_mtx_bad_body(tmp_path):
    _write(tmp_path / "body.mtx", "%%MatrixMarket matrix array real general\n2 2\n1\nx\n2\n3\n")
    with _raises("body.mtx could not be read as a Matrix Market file"):
        load_matrix(tmp_path / "body.mtx", "float32")


def test_mtx_complex_refused(tmp_path):
    scipy.io.mmwrite(tmp_path / "c.mtx", np.ones((2, 3)) + 1j)
    with _raises("A: c.mtx holds complex numbers"):
        load_matrix(tmp_path / "c.mtx", "float32")


# ---------------------------------------------------------------------------
# Content errors (shape, dtype, values)
# ---------------------------------------------------------------------------


def test_one_d_vector_refused(tmp_path):
    np.save(tmp_path / "v.npy", np.arange(5.0))
    with _raises("A: v.npy is a 1-D vector of length 5, not a 2-D matrix"):
        load_matrix(tmp_path / "v.npy", "float32")


def test_zero_d_refused(tmp_path):
    np.save(tmp_path / "s.npy", np.float64(3.0))
    with _raises("s.npy holds a single number (a 0-D array)"):
        load_matrix(tmp_path / "s.npy", "float32")


def test_three_d_refused(tmp_path):
    np.save(tmp_path / "t.npy", np.zeros((2, 3, 4)))
    with _raises("t.npy is 3-D with shape 2\u00d73\u00d74"):
        load_matrix(tmp_path / "t.npy", "float32")


@pytest.mark.parametrize("shape, missing", [((0, 5), "rows"), ((4, 0), "columns")])
def test_empty_array_refused(tmp_path, shape, missing):
    np.save(tmp_path / "e.npy", np.zeros(shape))
    rows, cols = shape
    with _raises(f"e.npy is empty: its shape is {rows}\u00d7{cols} (no {missing})"):
        load_matrix(tmp_path / "e.npy", "float32")


def test_complex_dtype_refused(tmp_path):
    np.save(tmp_path / "c.npy", np.ones((2, 2), dtype=np.complex64))
    with _raises("c.npy holds complex numbers (complex64)"):
        load_matrix(tmp_path / "c.npy", "float32")


def test_string_dtype_refused(tmp_path):
    np.save(tmp_path / "s.npy", np.array([["a", "b"], ["c", "d"]]))
    with _raises("s.npy holds text (<U1), not numbers"):
        load_matrix(tmp_path / "s.npy", "float32")


def test_nan_inf_count_and_first_position(tmp_path):
    m = np.ones((5, 9))
    m[3, 7] = np.nan
    m[4, 1] = np.inf
    np.save(tmp_path / "n.npy", m)
    with _raises(
        "A: n.npy contains 2 NaN/Inf values; the first is nan at [3, 7] "
        "(0-based [row, column])"
    ):
        load_matrix(tmp_path / "n.npy", "float32")


def test_nan_in_csv(tmp_path):
    _write(tmp_path / "n.csv", "1,2\n3,-inf\n")
    with _raises("contains 1 NaN/Inf value; the first is -inf at [1, 1]"):
        load_matrix(tmp_path / "n.csv", "int32")


def test_int32_non_integral(tmp_path):
    _write(tmp_path / "f.csv", "1,2,3\n4,1.5,6\n7,8,9.25\n")
    with _raises("f.csv has 2 values that are not a whole number, e.g. 1.5 at [1, 1]"):
        load_matrix(tmp_path / "f.csv", "int32")
    # The same file is fine as float32.
    assert load_matrix(tmp_path / "f.csv", "float32")[1, 1] == 1.5


@pytest.mark.parametrize(
    "values, shown",
    [
        (np.array([[1, 2], [3, 2**31]], dtype=np.int64), "2147483648 at [1, 1]"),
        (np.array([[1, -(2**31) - 1]], dtype=np.int64), "-2147483649 at [0, 1]"),
        (np.array([[2**63, 1]], dtype=np.uint64), "9223372036854775808 at [0, 0]"),
        (np.array([[1.0, 3e9]], dtype=np.float64), "3000000000 at [0, 1]"),
        (np.array([[1.0, 2.0**31]], dtype=np.float32), "2147483648 at [0, 1]"),
    ],
)
def test_int32_out_of_range(tmp_path, values, shown):
    np.save(tmp_path / "big.npy", values)
    with _raises("big.npy has 1 value outside the int32 range"):
        load_matrix(tmp_path / "big.npy", "int32")
    with _raises(shown):
        load_matrix(tmp_path / "big.npy", "int32")


def test_float32_overflow(tmp_path):
    m = np.ones((3, 3))
    m[2, 0] = -1e39
    np.save(tmp_path / "o.npy", m)
    with _raises("o.npy has 1 value too large for float32"):
        load_matrix(tmp_path / "o.npy", "float32")
    with _raises("at [2, 0] (0-based [row, column])"):
        load_matrix(tmp_path / "o.npy", "float32")


def test_float32_max_is_fine(tmp_path):
    m = np.array([[np.finfo(np.float32).max, -1.0]], dtype=np.float64)
    np.save(tmp_path / "ok.npy", m)
    assert np.isfinite(load_matrix(tmp_path / "ok.npy", "float32")).all()


def test_load_pair_inner_dimension_mismatch(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((3, 4)))
    np.save(tmp_path / "b.npy", np.ones((5, 2)))
    with _raises(
        "A is 3\u00d74 but B is 5\u00d72: A's columns (4) must equal B's rows (5)"
    ):
        load_pair(tmp_path / "a.npy", tmp_path / "b.npy", "float32")


def test_load_pair_names_b_in_errors(tmp_path):
    np.save(tmp_path / "a.npy", np.ones((3, 4)))
    _write(tmp_path / "b.csv", "1,2\nq,4\n")
    with _raises("B: b.csv, row 2, column 1: 'q' is not a number"):
        load_pair(tmp_path / "a.npy", tmp_path / "b.csv", "float32")


def test_errors_are_value_errors_with_single_line_messages(tmp_path):
    _write(tmp_path / "data.csv", "1,2\n3\n")
    with pytest.raises(ValueError) as info:
        load_matrix(tmp_path / "data.csv", "float32")
    assert isinstance(info.value, MatrixInputError)
    assert "\n" not in str(info.value)


# --- special files: refused at once, never opened --------------------------------------

def test_special_files_are_refused_without_blocking(tmp_path):
    import os
    import time
    fifo = tmp_path / "pipe.npy"
    os.mkfifo(fifo)
    (tmp_path / "l1.npy").symlink_to(tmp_path / "l2.npy")
    (tmp_path / "l2.npy").symlink_to(tmp_path / "l1.npy")
    cases = [(fifo, "is a named pipe; only regular files are read"),
             (tmp_path / "l1.npy", "is a loop of symbolic links")]
    if os.path.exists("/dev/zero"):
        cases.append(("/dev/zero", "is a device; only regular files are read"))
    for path, message in cases:
        t0 = time.monotonic()
        with pytest.raises(matrices.MatrixInputError, match=message):
            matrices.load_matrix(path, "float32")
        assert time.monotonic() - t0 < 2


def test_a_file_larger_than_memory_allows_is_refused(tmp_path, monkeypatch):
    from engine.common import host_memory as memory
    p = tmp_path / "big.npy"
    np.save(p, np.ones((64, 64), np.float32))
    monkeypatch.setattr(memory, "host_available_bytes", lambda: 4096)
    with pytest.raises(matrices.MatrixInputError, match="more than this machine can load"):
        matrices.load_matrix(p, "float32")
