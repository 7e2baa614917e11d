"""The variant registry: every kernel the lab can run, described once.

The GUI and the command line build their choices from :data:`REGISTRY`; the runner
asks each :class:`Variant` for its launch geometry, its compile-time defines, whether
a parameter combination is valid for a shape (and why not), and its FLOP and byte
models.

Conventions shared by every kernel file (``cuda/*.cu``, ``opencl/*.cl``):

* row-major storage; ``A`` is M×K, ``B`` is K×N, ``C`` is M×N (``aat`` kernels: C = A·Aᵀ,
  ``A`` is M×K and ``C`` is M×M);
* compile-time constants arrive as defines: ``ELEM`` (element type; not ``T``, which
  CUDA's own headers use as a template parameter name), ``ACC`` (accumulator
  type: ``float``, or ``unsigned`` for int32 so that overflow wraps modulo 2³²
  with defined behaviour) and the variant's own parameters (upper-case names);
* the entry point is called ``matmul`` with arguments ``(A, B, C, M, N, K)``, or
  ``(A, C, M, K)`` for ``aat`` kernels;
* thread x runs along columns of C (so neighbouring threads touch neighbouring
  addresses) and y along rows.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping

ROOT = Path(__file__).resolve().parent.parent
DTYPES = ("float32", "int32")
ITEMSIZE = {"float32": 4, "int32": 4}

Params = Mapping[str, int]
#: ``(grid_x, grid_y), (block_x, block_y)``: blocks in the grid, threads per block.
Geometry = tuple[tuple[int, int], tuple[int, int]]


def cdiv(a: int, b: int) -> int:
    """Ceiling division for positive integers."""
    return -(-a // b)


def gemm_flops(m: int, n: int, k: int) -> int:
    """Floating-point (or integer) operations of C = A·B: one multiply and one add per term."""
    return 2 * m * n * k


def gemm_bytes(m: int, n: int, k: int, itemsize: int) -> int:
    """Fewest bytes a GEMM must move: A and B read once, C written once."""
    return (m * k + k * n + m * n) * itemsize


def aat_flops(m: int, n: int, k: int) -> int:
    """C = A·Aᵀ computed in full (both triangles), as the seed's kernels do."""
    return 2 * m * m * k


def aat_bytes(m: int, n: int, k: int, itemsize: int) -> int:
    """A read once, the M×M result written once."""
    return (m * k + m * m) * itemsize


@dataclass(frozen=True)
class Variant:
    """One kernel of the ladder.

    Parameters
    ----------
    name
        Registry key, used on the command line (``--variants``) and in records.
    technique
        One line for the GUI's list: what the kernel does differently.
    seed
        Where the technique comes from (a seed document or a public reference).
    sources
        Backend name → kernel file relative to the repository root.
    space
        Parameter name → the values the registry offers, first one the default.
    geometry
        ``(params, m, n, k) -> ((grid_x, grid_y), (block_x, block_y))``.
    constraint
        ``(params, m, n, k, dtype) -> reason or None``; a reason means the
        combination is skipped and the reason shown.
    kind
        ``"gemm"`` (C = A·B) or ``"aat"`` (C = A·Aᵀ, B unused, N = M).
    """

    name: str
    technique: str
    seed: str
    sources: Mapping[str, str]
    space: Mapping[str, tuple[int, ...]]
    geometry: Callable[[Params, int, int, int], Geometry]
    constraint: Callable[[Params, int, int, int, str], str | None] = lambda p, m, n, k, d: None
    kind: str = "gemm"
    dtypes: tuple[str, ...] = DTYPES
    flops: Callable[[int, int, int], int] = gemm_flops
    bytes_moved: Callable[[int, int, int, int], int] = gemm_bytes
    entry: str = "matmul"
    #: Set for library reference lines (e.g. ``"cublas_sgemm"``): the backend calls the
    #: library instead of compiling ``sources``; ``sources`` then names the routine.
    library: str | None = None
    #: Arithmetic the result is checked against: "fp32" or "tf32" (looser tolerance).
    precision: str = "fp32"
    #: Extra keyword arguments for the backend (e.g. dynamic shared memory); unused by seeds.
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def backends(self) -> tuple[str, ...]:
        return tuple(self.sources)

    def source_path(self, backend: str) -> Path:
        return ROOT / self.sources[backend]

    def combos(self) -> list[dict[str, int]]:
        """Every combination of the declared parameter space, in declaration order."""
        names = list(self.space)
        return [dict(zip(names, vals)) for vals in itertools.product(*(self.space[n] for n in names))]

    def default_params(self) -> dict[str, int]:
        return {name: vals[0] for name, vals in self.space.items()}

    def output_shape(self, m: int, n: int, k: int) -> tuple[int, int]:
        return (m, m) if self.kind == "aat" else (m, n)

    def effective_n(self, m: int, n: int) -> int:
        """The N a record reports: aat kernels produce an M×M result whatever N was asked."""
        return m if self.kind == "aat" else n

    def defines(self, params: Params, dtype: str) -> dict[str, str]:
        """Compile-time constants for this parameter choice and dtype."""
        d = {"ELEM": "float" if dtype == "float32" else "int",
             "ACC": "float" if dtype == "float32" else "unsigned"}
        d.update({name.upper(): str(int(v)) for name, v in params.items()})
        return d

    def check(self, backend: str, params: Params, m: int, n: int, k: int, dtype: str) -> str | None:
        """Why this run cannot happen, or None if it can."""
        if backend not in self.sources:
            return f"{self.name} has no {backend} kernel"
        if dtype not in self.dtypes:
            return f"{self.name} does not support {dtype}"
        for name, val in params.items():
            if name not in self.space:
                return f"{self.name} has no parameter '{name}'"
            if val not in self.space[name]:
                return f"{name}={val} is not in {self.name}'s parameter space {tuple(self.space[name])}"
        missing = set(self.space) - set(params)
        if missing:
            return f"missing parameter(s) {', '.join(sorted(missing))}"
        if min(m, n, k) < 1:
            return "every dimension must be at least 1"
        n_out = self.effective_n(m, n)
        if max(m * k, k * n, m * n_out) >= 2**31:
            return "a matrix with 2³¹ or more elements overflows the kernels' 32-bit indices"
        return self.constraint(params, m, n, k, dtype)

    def label(self, params: Params) -> str:
        """Short display name, e.g. ``tiled[block=16]``."""
        if not params:
            return self.name
        return f"{self.name}[{params_to_str(params)}]"


def params_to_str(params: Params) -> str:
    """``{'ts': 32, 'wpt': 4}`` → ``'ts=32,wpt=4'`` (stable order)."""
    return ",".join(f"{k}={params[k]}" for k in params)


def params_from_str(text: str) -> dict[str, int]:
    """Inverse of :func:`params_to_str`; empty text gives ``{}``."""
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        key, _, val = part.partition("=")
        out[key.strip()] = int(val)
    return out


# --- geometry helpers ----------------------------------------------------------------

def _square_blocks(param: str):
    """One thread per C element, ``param``×``param`` threads per block."""
    def geometry(p: Params, m: int, n: int, k: int) -> Geometry:
        b = p[param]
        return (cdiv(n, b), cdiv(m, b)), (b, b)
    return geometry


def _aat_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    t = p["tile"]
    return (cdiv(m, t), cdiv(m, t)), (t, t)


def _wpt_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    ts, wpt = p["ts"], p["wpt"]
    return (cdiv(n, ts), cdiv(m, ts)), (ts // wpt, ts)


def _multiple_of_block(p: Params, m: int, n: int, k: int, dtype: str) -> str | None:
    b = p["block"]
    bad = [f"{name}={v}" for name, v in (("M", m), ("N", n), ("K", k)) if v % b]
    if bad:
        return (f"sizes must be multiples of block={b} (like the seed's CUDA sample, "
                f"no bounds checks): {', '.join(bad)}; use tiled_any for any size")
    return None


def _wpt_constraint(p: Params, m: int, n: int, k: int, dtype: str) -> str | None:
    if p["ts"] % p["wpt"]:
        return f"wpt={p['wpt']} must divide ts={p['ts']}"
    return None


REGISTRY: dict[str, Variant] = {}


def register(v: Variant) -> Variant:
    if v.name in REGISTRY:
        raise ValueError(f"variant {v.name} registered twice")
    REGISTRY[v.name] = v
    return v


BLOCKS = (16, 8, 32)

register(Variant(
    name="naive",
    technique="One thread per C element reading A and B straight from global memory; x along columns so loads of B coalesce.",
    seed="seed 000/004: the 'naive' kernel timed against the shared-memory one",
    sources={"cuda": "cuda/01_naive.cu", "opencl": "opencl/01_naive.cl"},
    space={"block": BLOCKS},
    geometry=_square_blocks("block"),
))

register(Variant(
    name="tiled",
    technique="Shared-memory tiles of A and B (BLOCK×BLOCK), two barriers per tile; sizes must be multiples of the block.",
    seed="seed 000/001: shared-memory matrixMul (CUDA sample style, no bounds checks)",
    sources={"cuda": "cuda/02_tiled.cu", "opencl": "opencl/02_tiled.cl"},
    space={"block": BLOCKS},
    geometry=_square_blocks("block"),
    constraint=_multiple_of_block,
))

register(Variant(
    name="tiled_any",
    technique="Shared-memory tiles with bounds-checked, zero-filled loads: any M, N, K.",
    seed="seed 003: matMul_SharedMem with guarded tile loads",
    sources={"cuda": "cuda/03_tiled_any.cu", "opencl": "opencl/03_tiled_any.cl"},
    space={"block": BLOCKS},
    geometry=_square_blocks("block"),
))

register(Variant(
    name="wpt",
    technique="Tiled with more work per thread: each thread computes WPT outputs of a row, TS/WPT threads per tile row.",
    seed="seed 004: OpenCL submatrix + WPT kernel",
    sources={"cuda": "cuda/04_wpt.cu", "opencl": "opencl/04_wpt.cl"},
    space={"ts": (32, 16, 8), "wpt": (4, 1, 2, 8)},
    geometry=_wpt_geometry,
    constraint=_wpt_constraint,
))

_AAT = dict(kind="aat", flops=aat_flops, bytes_moved=aat_bytes, geometry=_aat_geometry,
            space={"tile": (32, 16)})

register(Variant(
    name="aat_simple",
    technique="C = A·Aᵀ straight from global memory: the Aᵀ term is read with a stride of K (uncoalesced).",
    seed="seed 002: simpleMultiply (CUDA Best Practices, strided access)",
    sources={"cuda": "cuda/05_aat_simple.cu", "opencl": "opencl/05_aat_simple.cl"},
    **_AAT,
))

register(Variant(
    name="aat_coalesced",
    technique="C = A·Aᵀ with coalesced loads into a tile and a transposed tile in shared memory (bank conflicts on the transposed store).",
    seed="seed 002: coalescedMultiply",
    sources={"cuda": "cuda/06_aat_coalesced.cu", "opencl": "opencl/06_aat_coalesced.cl"},
    **_AAT,
))

register(Variant(
    name="aat_padded",
    technique="As aat_coalesced, the transposed tile padded to [T][T+1] so its column writes hit 32 different banks.",
    seed="seed 002: coalescedMultiply with transposedTile[TILE_DIM][TILE_DIM+1]",
    sources={"cuda": "cuda/07_aat_padded.cu", "opencl": "opencl/07_aat_padded.cl"},
    **_AAT,
))

register(Variant(
    name="cpu_numpy",
    technique="numpy.matmul on the host (BLAS for float32; numpy's own loop for int32): the CPU row of the seed tables.",
    seed="seed 000: the CPU row of the timing table",
    sources={"cpu": "numpy.matmul"},
    space={},
    geometry=lambda p, m, n, k: ((1, 1), (1, 1)),
))


def variants_for(backend: str) -> list[Variant]:
    """Variants that have a kernel for ``backend``, in registry order."""
    return [v for v in REGISTRY.values() if backend in v.sources]


def get(name: str) -> Variant:
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown variant '{name}'; known: {', '.join(REGISTRY)}") from None


def iter_plan_params(variant: Variant, overrides: Mapping[str, tuple[int, ...]] | None = None
                     ) -> Iterator[dict[str, int]]:
    """Combinations of ``variant``'s space, with ``overrides`` restricting named parameters.

    Values in ``overrides`` that are not in the space are kept, so that
    :meth:`Variant.check` reports them as skipped with a reason.
    """
    overrides = overrides or {}
    names = list(variant.space)
    pools = [tuple(overrides[n]) if n in overrides else tuple(variant.space[n]) for n in names]
    for vals in itertools.product(*pools):
        yield dict(zip(names, vals))


# The performance ladder (issue 4's kernels) lives in its own module; it registers
# into REGISTRY on import so that the GUI and CLI see one list.
from . import ladder  # noqa: E402,F401
