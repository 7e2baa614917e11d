"""Checking a kernel's output against a float64 (or exact integer) reference.

Small problems are compared element by element with a full reference product.
Above :data:`FULL_REFERENCE_LIMIT` multiply-adds the full product would cost more
than the kernel run itself, so the check switches to Freivalds' randomized test
(``C·R`` against ``A·(B·R)`` for a few random vectors, in float64, or modulo 2³²
for int32) plus a sample of entries recomputed exactly. The record names the method.

float32 tolerance: the relative L2 error of a float32 dot product of length K grows
about like ``sqrt(K)·eps``; we allow ``max(1e-5, 2e-6·sqrt(K))`` (1.8e-4 at K=8192),
far under what a wrong kernel (an unwritten tile, a swapped index) produces (≈1).
int32 is exact: the kernels wrap modulo 2³², and so does the reference. So is int8: its
products are summed in int32 (exact; nothing wraps below K = 2³¹ / 128² = 131072), the
reference is the exact product of the int8 inputs wrapped to int32, compared for equality.

Half precision and FP8 (:func:`type_tolerance`, the one place of the formula; docs/
precisions.md derives it): the reference is the float64 product of the ROUNDED inputs
(times FP8's scales), so rounding A and B to their type costs nothing here; what is
left is the FP32 accumulation over K terms and the rounding of C to its output type:
``tol = 2·u_out + 32·u_acc·√K`` with ``u`` each type's unit roundoff.

FP8 on Hopper's tensor cores adds in less than FP32 (:data:`FP8_TENSOR_CORE_U`): each
element may be off by up to :data:`ROW_NOISE_FACTOR`·u_tc·sqrt(Σ (a·b)²) more, and the
relative L2 tolerance grows by :data:`TENSOR_CORE_REL_FACTOR`·u_tc (docs/precisions.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.common.dtypes import ElementType, TypeSpec

#: Above this many multiply-adds (M·N·K) the full float64 reference is replaced by Freivalds.
FULL_REFERENCE_LIMIT = 1024 ** 3
#: int32 references without BLAS help (values too large for exact float64) stay small.
INT_EXACT_LIMIT = 256 ** 3
FREIVALDS_VECTORS = 4
SAMPLED_ENTRIES = 256
#: A projected row may differ from the reference by this many times its rounding-noise scale.
ROW_NOISE_FACTOR = 30.0


def float32_tolerance(k: int) -> float:
    """Relative L2 tolerance for a float32 product with inner dimension ``k``."""
    return max(1e-5, 2e-6 * math.sqrt(max(k, 1)))


#: Machine epsilon of TF32 (10 explicit mantissa bits; as numpy's eps is 2⁻²³ for float32):
#: tensor cores read A and B rounded (or truncated) to it.
TF32_EPS = 2.0 ** -10


def tf32_tolerance(k: int) -> float:
    """Relative L2 tolerance for TF32 inputs with FP32 accumulation (precision="tf32").

    Rounding A and B to TF32 gives each product a relative error up to 2⁻¹⁰; over K
    terms of mixed sign the relative L2 error of C stays near that (≈5e-4 measured for
    uniform inputs), so 5e-3 leaves a 10× margin and is still far under a wrong kernel (≈1).
    """
    return max(5e-3, float32_tolerance(k))


#: The formula's factors: output rounding leaves a relative L2 error near u_out/√3 (a
#: uniformly spread error of at most u per element), so 2·u_out is a 3.5× margin; the
#: accumulation term's 32 is float32_tolerance's own (2e-6 ≈ 33.5·2⁻²⁴ per √K).
OUTPUT_FACTOR = 2.0
ACCUMULATION_FACTOR = 32.0


#: What Hopper's FP8 tensor cores keep of a sum: about 13 bits below the largest of the
#: running sum and the products added to it (the rest truncated). A model adding 32
#: products at a time this way reproduced an H200's FP8 wgmma errors (largest 808–1,060
#: against 964 measured; 3,400–4,100 elements beyond FP32 noise against 3,571). With the
#: sum moved into FP32 registers every 128 of K, as fp8_wgmma does, an element's error
#: stays under 6·u_tc·sqrt(Σ (a·b)²) and the relative L2 error under u_tc at any K.
FP8_TENSOR_CORE_U = 2.0 ** -13
#: The relative L2 term for it: 4·u_tc, about 5 times the modelled error.
TENSOR_CORE_REL_FACTOR = 4.0


def tensor_core_u(spec: TypeSpec | None) -> float:
    """The tensor cores' accumulation roundoff beyond FP32 for ``spec``'s inputs: FP8's
    (:data:`FP8_TENSOR_CORE_U`), else 0 (FP16/BF16/TF32 tensor cores add in FP32)."""
    return FP8_TENSOR_CORE_U if spec is not None and spec.element.is_float8 else 0.0


def type_tolerance(spec: TypeSpec, k: int) -> float:
    """Relative L2 tolerance of C for ``spec``'s input, accumulation and output types with
    inner dimension ``k``: ``OUTPUT_FACTOR·u_out + ACCUMULATION_FACTOR·u_acc·√K``. The
    input type's u enters where C is written in it (FP16/BF16 output = input); products
    of two FP16, BF16 or FP8 values are exact in FP32, so the rounded-input reference
    leaves no other input term."""
    u_out = spec.output.unit_roundoff
    u_acc = spec.accumulator.unit_roundoff
    return (OUTPUT_FACTOR * u_out + ACCUMULATION_FACTOR * u_acc * math.sqrt(max(k, 1))
            + TENSOR_CORE_REL_FACTOR * tensor_core_u(spec))


def type_noise_eps(spec: TypeSpec) -> float:
    """The accumulation's per-element rounding scale (as numpy's eps is 2u for float32):
    each element of C may be off by about this × √K × sqrt(Σ (a·b)²); rounding to the
    output type adds at most u_out·|c| (:data:`OUTPUT_ELEMENT_FACTOR` of it allowed)."""
    return 2.0 * spec.accumulator.unit_roundoff


#: An element may differ from the reference by this many u_out of its own size, on top of
#: the accumulation's noise: 1 is the rounding's own bound, 4 leaves room for an
#: accumulation order that lands on the other side of a rounding boundary.
OUTPUT_ELEMENT_FACTOR = 4.0


@dataclass(frozen=True)
class Verdict:
    """Outcome of one verification."""

    method: str          # "full", "freivalds+sampled" or "none"
    rel_l2: float
    max_abs: float
    passed: bool
    tolerance: float
    detail: str = ""     # why it failed, in words


class Reference:
    """The expected result for one input set, computed once and shared by all variants.

    Parameters
    ----------
    a, b
        Host inputs (float32, int32, int8, or a half or FP8 type). ``b`` may be None when
        only C = A·Aᵀ is needed. Integer inputs (int32, int8) are checked exactly against
        int32 sums.
    kind
        ``"gemm"`` for A·B, ``"aat"`` for A·Aᵀ.
    force_method
        ``"full"`` or ``"freivalds"`` to override the size rule (tests use it).
    seed
        Seed for the random vectors and sampled entries.
    spec, scale_a, scale_b
        The run's types (half precision, FP8: :func:`type_tolerance` applies) and FP8's
        per-tensor scales: the product meant is ``scale_a·scale_b·A·B``.
    """

    def __init__(self, a: np.ndarray, b: np.ndarray | None, kind: str = "gemm",
                 force_method: str | None = None, seed: int = 12345,
                 spec: TypeSpec | None = None, scale_a: float = 1.0, scale_b: float = 1.0):
        # the type tolerance is for the float tensor-core types; integers compare exactly
        self.spec = spec if spec is not None and spec.element.is_low_precision \
            and not spec.element.is_integer else None
        self.scale = float(scale_a) * float(scale_b)
        if kind == "aat":
            b = a.T
        if b is None:
            raise ValueError("B is required for C = A·B")
        self.a, self.b, self.kind = a, b, kind
        self.is_int = np.issubdtype(a.dtype, np.integer)
        m, k = a.shape
        n = b.shape[1]
        self.shape = (m, n)
        self.k = k
        work = m * n * k
        if force_method:
            self.method = force_method
        elif self.is_int:
            self.method = "full" if (work <= FULL_REFERENCE_LIMIT and self._int_fits_float64()) \
                or work <= INT_EXACT_LIMIT else "freivalds"
        else:
            self.method = "full" if work <= FULL_REFERENCE_LIMIT else "freivalds"
        self._rng = np.random.default_rng(seed)
        self._full: np.ndarray | None = None
        self._scale: np.ndarray | None = None
        self._proj: tuple[np.ndarray, np.ndarray] | None = None
        self._samples: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    # -- exact integer helpers --------------------------------------------------------

    def _int_fits_float64(self) -> bool:
        """True when every partial sum of the int product is exact in float64 (< 2**53)."""
        amax = float(np.abs(self.a.astype(np.int64)).max(initial=0))
        bmax = float(np.abs(self.b.astype(np.int64)).max(initial=0))
        return amax * bmax * self.k < 2.0 ** 52

    def _full_product(self) -> np.ndarray:
        if self._full is None:
            if self.is_int:
                if self._int_fits_float64():
                    prod = (self.a.astype(np.float64) @ self.b.astype(np.float64)).astype(np.int64)
                else:
                    # int64 arithmetic wraps modulo 2**64, which keeps it right modulo 2**32.
                    prod = self.a.astype(np.int64) @ self.b.astype(np.int64)
                self._full = prod.astype(np.int32)  # wrap to the kernels' int32
            else:
                self._full = self.a.astype(np.float64) @ self.b.astype(np.float64)
        return self._full

    def _element_scale(self) -> np.ndarray:
        """sqrt(sum_k (a_ik b_kj)^2) per element: the scale of its rounding error."""
        if self._scale is None:
            a2 = self.a.astype(np.float64) ** 2
            b2 = self.b.astype(np.float64) ** 2
            self._scale = np.sqrt(a2 @ b2)
        return self._scale

    @property
    def expected(self) -> np.ndarray:
        """The full reference product (computed on first use; costly above the limit)."""
        return self._full_product()

    # -- checks -----------------------------------------------------------------------

    @property
    def method_label(self) -> str:
        """The method as records name it: "full" or "freivalds+sampled"."""
        return "full" if self.method == "full" else "freivalds+sampled"

    def check(self, c: np.ndarray, precision: str = "fp32") -> Verdict:
        """Compare a kernel output with the reference (``precision="tf32"``: looser bound)."""
        if c.shape != self.shape:
            return Verdict(self.method_label, math.inf, math.inf, False, 0.0,
                           f"output is {c.shape}, expected {self.shape}")
        if self.is_int:
            return self._check_int(c)
        c = self._unscaled(c)
        tol = self._tolerance(precision)
        bad = ~np.isfinite(c)
        if bad.any():
            idx = np.argwhere(bad)[0]
            return Verdict(self.method_label, math.nan, math.nan, False, tol,
                           f"{int(bad.sum())} NaN/Inf element(s), first at [{idx[0]}, {idx[1]}]"
                           " (unwritten or overflowed)")
        eps = self._eps(precision)
        if self.method == "full":
            ref = self._full_product()
            diff = c.astype(np.float64) - ref
            rel = float(np.linalg.norm(diff) / max(np.linalg.norm(ref), 1e-300))
            mabs = float(np.abs(diff).max(initial=0.0))
            # Element by element too: a few wrong elements can hide under the global norm.
            limit = (ROW_NOISE_FACTOR * self._noise(eps) * self._element_scale()
                     + self._output_slack(ref) + 1e-30)
            wrong = np.abs(diff) > limit
            passed = rel <= tol and not wrong.any()
            detail = ""
            if not passed:
                detail = _worst(diff)
                if wrong.any():
                    i, j = np.argwhere(wrong)[0]
                    detail += (f"; {int(wrong.sum())} element(s) far above rounding noise, "
                               f"first at [{i}, {j}]")
            return Verdict("full", rel, mabs, passed, tol, detail)
        return self._freivalds_float(c, tol, eps)

    def _unscaled(self, c: np.ndarray) -> np.ndarray:
        """C of a half/FP8 run in float64 (divided by FP8's scales, so that it compares
        with the product of the stored inputs); other outputs as they are."""
        if self.spec is None and self.scale == 1.0:
            return c
        c = c.astype(np.float64)
        return c / self.scale if self.scale != 1.0 else c

    def _noise(self, eps: float) -> float:
        """An element's rounding noise per unit of sqrt(Σ (a·b)²): the accumulation's
        eps·√K, plus the FP8 tensor cores' own (:func:`tensor_core_u`)."""
        return eps * math.sqrt(self.k) + tensor_core_u(self.spec)

    def _output_slack(self, values: np.ndarray):
        """What rounding C to a half output type may move each element (0 otherwise)."""
        if self.spec is None:
            return 0.0
        return OUTPUT_ELEMENT_FACTOR * self.spec.output.unit_roundoff * np.abs(values)

    def _tolerance(self, precision: str) -> float:
        if self.spec is not None:
            return type_tolerance(self.spec, self.k)
        return tf32_tolerance(self.k) if precision == "tf32" else float32_tolerance(self.k)

    def _eps(self, precision: str) -> float:
        if self.spec is not None:
            return type_noise_eps(self.spec)
        return TF32_EPS if precision == "tf32" else float(np.finfo(np.float32).eps)

    def quick_check(self, c: np.ndarray, precision: str = "fp32") -> Verdict:
        """:meth:`check` where the full reference is cheap (``method == "full"``), else only
        the :data:`SAMPLED_ENTRIES` sampled entries, each against its float64 (or exact
        int) value and its own rounding-noise bound: a re-check whose cost stays small at
        any size (the row and column of each entry, no product of whole matrices)."""
        if self.method == "full" or c.shape != self.shape:
            return self.check(c, precision)
        rows, cols, exact = self._sampled()
        if not self.is_int:
            c = self._unscaled(c)
        picked = c[rows, cols]
        if self.is_int:
            wrong = picked != exact
            mabs = float(np.abs(picked.astype(np.int64) - exact.astype(np.int64)).max(initial=0))
            detail = "" if not wrong.any() else (f"{int(wrong.sum())} of {len(rows)} sampled entries "
                                                 f"wrong, first at [{rows[wrong][0]}, {cols[wrong][0]}]")
            return Verdict("sampled", 0.0 if not wrong.any() else math.nan, mabs, not wrong.any(),
                           0.0, detail)
        tol = self._tolerance(precision)
        eps = self._eps(precision)
        got = picked.astype(np.float64)
        diff = np.abs(got - exact)
        av = self.a[rows].astype(np.float64)
        bv = np.ascontiguousarray(self.b[:, cols].T).astype(np.float64)
        scale = np.sqrt(((av * bv) ** 2).sum(axis=1))
        limit = ROW_NOISE_FACTOR * self._noise(eps) * scale + self._output_slack(exact) + 1e-30
        wrong = ~(diff <= limit)                       # NaN (unwritten) is wrong too
        rel = float(np.linalg.norm(np.nan_to_num(got - exact, nan=np.inf))
                    / max(np.linalg.norm(exact), 1e-300))
        passed = not wrong.any()
        detail = "" if passed else (f"{int(wrong.sum())} of {len(rows)} sampled entries far above "
                                    f"rounding noise, first at [{rows[wrong][0]}, {cols[wrong][0]}]")
        return Verdict("sampled", rel, float(np.nanmax(diff, initial=0.0)), passed, tol, detail)

    def _freivalds_float(self, c: np.ndarray, tol: float, eps: float) -> Verdict:
        if self._proj is None:
            r = self._rng.standard_normal((self.shape[1], FREIVALDS_VECTORS))
            # Per-row noise scale of the projection: the float32 rounding error of C[i, j]
            # is about eps·sqrt(K)·sqrt(sum_k (a_ik b_kj)^2), so that of (C·r)_i is that
            # times r_j in quadrature: sqrt((A∘A)·((B∘B)·(r∘r))). A row far above it holds
            # a wrong element even when the global norm hides it. Each float64 block of a
            # matrix serves both products, so every input is converted once.
            r2 = r * r
            if self.kind == "aat":
                br, b2r2 = _f64_matmul_t_pair(self.a, r, r2)
            else:
                br, b2r2 = _f64_matmul_pair(self.b, r, r2)
            abr, a2b2r2 = _f64_matmul_pair(self.a, br, b2r2)
            self._proj = (r, abr, np.sqrt(a2b2r2))
        r, expected, scale = self._proj
        got = _f64_matmul(c, r)
        rel_proj = float(np.linalg.norm(got - expected) / max(np.linalg.norm(expected), 1e-300))
        row_limit = ROW_NOISE_FACTOR * self._noise(eps) * scale
        if self.spec is not None:   # output rounding, in quadrature over the row: |C|·|r|
            row_limit = row_limit + OUTPUT_ELEMENT_FACTOR * self.spec.output.unit_roundoff * \
                np.sqrt(_f64_matmul(c * c, r * r))
        row_excess = np.abs(got - expected) - row_limit - 1e-30
        bad_rows = np.flatnonzero((row_excess > 0).any(axis=1))
        rows, cols, exact = self._sampled()
        picked = c[rows, cols].astype(np.float64)
        mabs = float(np.abs(picked - exact).max(initial=0.0))
        rel_samp = float(np.linalg.norm(picked - exact) / max(np.linalg.norm(exact), 1e-300))
        rel = max(rel_proj, rel_samp)
        passed = rel <= tol and bad_rows.size == 0
        detail = "" if passed else (f"Freivalds projection error {rel_proj:.3g}, sampled entries "
                                    f"error {rel_samp:.3g} (tolerance {tol:.3g}); "
                                    f"{bad_rows.size} row(s) far above rounding noise"
                                    + (f", first row {bad_rows[0]}" if bad_rows.size else ""))
        return Verdict("freivalds+sampled", rel, mabs, passed, tol, detail)

    def _sampled(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._samples is None:
            m, n = self.shape
            count = min(SAMPLED_ENTRIES, m * n)
            rows = self._rng.integers(0, m, count)
            cols = self._rng.integers(0, n, count)
            if self.is_int:
                av = self.a[rows].astype(np.int64)
                bv = np.ascontiguousarray(self.b[:, cols].T).astype(np.int64)
                exact = (av * bv).sum(axis=1).astype(np.int32)
            else:
                av = self.a[rows].astype(np.float64)
                bv = np.ascontiguousarray(self.b[:, cols].T).astype(np.float64)
                exact = (av * bv).sum(axis=1)
            self._samples = (rows, cols, exact)
        return self._samples

    def _check_int(self, c: np.ndarray) -> Verdict:
        if self.method == "full":
            ref = self._full_product()
            wrong = c != ref
            count = int(wrong.sum())
            diff = c.astype(np.int64) - ref.astype(np.int64)
            mabs = float(np.abs(diff).max(initial=0))
            rel = float(np.linalg.norm(diff.astype(np.float64))
                        / max(np.linalg.norm(ref.astype(np.float64)), 1e-300))
            detail = ""
            if count:
                i, j = np.argwhere(wrong)[0]
                detail = (f"{count} wrong element(s); first at [{i}, {j}]: got {int(c[i, j])},"
                          f" expected {int(ref[i, j])}")
            return Verdict("full", rel, mabs, count == 0, 0.0, detail)
        # Freivalds modulo 2**32: int64 arithmetic wraps modulo 2**64, a multiple of 2**32.
        if self._proj is None:
            r = self._rng.integers(-(2 ** 31), 2 ** 31, (self.shape[1], FREIVALDS_VECTORS),
                                   dtype=np.int64)
            br = _int_matmul(self.b, r)
            expected = _int_matmul(self.a, br).astype(np.int32)
            self._proj = (r, expected)
        r, expected = self._proj
        got = _int_matmul(c, r).astype(np.int32)
        proj_ok = bool(np.array_equal(got, expected))
        rows, cols, exact = self._sampled()
        picked = c[rows, cols]
        samp_wrong = int((picked != exact).sum())
        mabs = float(np.abs(picked.astype(np.int64) - exact.astype(np.int64)).max(initial=0))
        passed = proj_ok and samp_wrong == 0
        detail = "" if passed else (f"Freivalds projection {'matches' if proj_ok else 'differs'} "
                                    f"modulo 2^32; {samp_wrong} of {len(rows)} sampled entries wrong")
        return Verdict("freivalds+sampled", 0.0 if passed else math.nan, mabs, passed, 0.0, detail)


def _worst(diff: np.ndarray) -> str:
    i, j = np.unravel_index(int(np.argmax(np.abs(diff))), diff.shape)
    return f"largest error {abs(diff[i, j]):.3g} at [{i}, {j}]"


def _f64_matmul(x: np.ndarray, r: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """``x @ r`` in float64, converting ``x`` a block of rows at a time to bound memory."""
    out = np.empty((x.shape[0], r.shape[1]), dtype=np.float64)
    for s in range(0, x.shape[0], chunk):
        out[s:s + chunk] = x[s:s + chunk].astype(np.float64) @ r
    return out


def _f64_matmul_pair(x: np.ndarray, r: np.ndarray, r2: np.ndarray, chunk: int = 2048):
    """``(x @ r, (x∘x) @ r2)`` in float64, one conversion of each block of rows."""
    out = np.empty((x.shape[0], r.shape[1]), dtype=np.float64)
    out2 = np.empty((x.shape[0], r2.shape[1]), dtype=np.float64)
    for s in range(0, x.shape[0], chunk):
        block = x[s:s + chunk].astype(np.float64)
        out[s:s + chunk] = block @ r
        block *= block
        out2[s:s + chunk] = block @ r2
    return out, out2


def _f64_matmul_t_pair(a: np.ndarray, r: np.ndarray, r2: np.ndarray, chunk: int = 2048):
    """``(a.T @ r, (a∘a).T @ r2)`` in float64, a block of a's rows at a time."""
    out = np.zeros((a.shape[1], r.shape[1]), dtype=np.float64)
    out2 = np.zeros((a.shape[1], r2.shape[1]), dtype=np.float64)
    for s in range(0, a.shape[0], chunk):
        block = a[s:s + chunk].astype(np.float64)
        out += block.T @ r[s:s + chunk]
        block *= block
        out2 += block.T @ r2[s:s + chunk]
    return out, out2


def _int_matmul(x: np.ndarray, r: np.ndarray, chunk: int = 1024) -> np.ndarray:
    """``x @ r`` in wrapping int64, by row blocks (numpy's integer matmul has no BLAS)."""
    out = np.empty((x.shape[0], r.shape[1]), dtype=np.int64)
    for s in range(0, x.shape[0], chunk):
        out[s:s + chunk] = x[s:s + chunk].astype(np.int64) @ r
    return out
