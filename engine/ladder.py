"""The CUDA performance ladder: from naive toward cuBLAS, one technique per step.

Registered into :data:`engine.registry.REGISTRY` on import. Every kernel handles any
M, N, K (bounds checks, zero-filled loads, guarded stores; vector paths only where the
data is in bounds and aligned), so no variant here has a shape constraint; the
constraints below only reject inconsistent parameter combinations.

The two cuBLAS lines (``cublas_fp32``, ``cublas_tf32``) are library variants: the cuda
backend calls cuBLAS through nvmath-python (:mod:`engine.backends.cublas`) on its own
context and buffers; where nvmath or cuBLAS is missing the run is *skipped* with the
reason. :func:`engine.runner._fill_pct_of_cublas` compares every kernel with them.
"""
from __future__ import annotations

from .registry import Geometry, Params, Variant, cdiv, register

SIBOEHM = "siboehm's SGEMM_CUDA worklog (https://siboehm.com/articles/22/CUDA-MMM)"
FLOAT = ("float32",)
#: Padding of the transposed A tile in 14..16 (the kernels' default PAD).
PAD = 4


# --- geometry ------------------------------------------------------------------------

def _uncoalesced_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    b = p["block"]
    return (cdiv(m, b), cdiv(n, b)), (b, b)          # x over rows, on purpose


def _blocktile_1d_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    return (cdiv(n, p["bn"]), cdiv(m, p["bm"])), (p["bn"], p["bm"] // p["tm"])


def _blocktile_2d_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    return (cdiv(n, p["bn"]), cdiv(m, p["bm"])), (p["bn"] // p["tn"], p["bm"] // p["tm"])


def _warptile_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    warps = (p["bm"] // p["wm"]) * (p["bn"] // p["wn"])
    return (cdiv(n, p["bn"]), cdiv(m, p["bm"])), (32 * warps, 1)


def _tf32_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    return (cdiv(n, 128), cdiv(m, 128)), (256, 1)


#: ffma_tuned's split-K counters (cuda/18_ffma_tuned.cu MAX_TILES): more tiles, no split.
FFMA_MAX_TILES = 65536


def ffma_splits(p: Params, m: int, n: int) -> int:
    return p["splitk"] if cdiv(m, p["bm"]) * cdiv(n, 128) <= FFMA_MAX_TILES else 1


def _ffma_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    return (cdiv(n, 128), cdiv(m, p["bm"]) * ffma_splits(p, m, n)), (256, 1)


def _wgmma_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    return (cdiv(n, p["bn"]), cdiv(m, 128)), (256, 1)


def _library_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    return (1, 1), (1, 1)                             # cuBLAS picks its own


# --- parameter constraints (never shape constraints) ------------------------------------

def _threads_ok(threads: int) -> str | None:
    return None if 32 <= threads <= 1024 else f"{threads} threads per block (need 32..1024)"


def _bt1d_constraint(p, m, n, k, dtype):
    if p["bm"] % p["tm"]:
        return f"tm={p['tm']} must divide bm={p['bm']}"
    return _threads_ok(p["bn"] * p["bm"] // p["tm"])


def _bt2d_constraint(p, m, n, k, dtype):
    if p["bm"] % p["tm"] or p["bn"] % p["tn"]:
        return "tm must divide bm and tn must divide bn"
    return _threads_ok((p["bn"] // p["tn"]) * (p["bm"] // p["tm"]))


def _vec_constraint(p, m, n, k, dtype):
    if p["tm"] % 4 or p["tn"] % 4 or p["bk"] % 4:
        return "tm, tn and bk must be multiples of 4 (128-bit accesses)"
    return _bt2d_constraint(p, m, n, k, dtype)


def warptile_derived(p: Params) -> dict[str, int] | str:
    """WMITER, WSUBM, WSUBN of a warptile parameter set, or why the set is invalid."""
    bm, bn, wm, wn = p["bm"], p["bn"], p["wm"], p["wn"]
    tm, tn, wniter = p["tm"], p["tn"], p["wniter"]
    if bm % wm or bn % wn:
        return "wm must divide bm and wn must divide bn"
    if (wm * wn) % (32 * tm * tn * wniter):
        return f"a {wm}×{wn} warp tile does not split into 32 lanes × {tm}×{tn} × wniter={wniter}"
    wmiter = (wm * wn) // (32 * tm * tn * wniter)
    if wmiter < 1 or wm % wmiter or wn % wniter:
        return f"wniter={wniter} leaves no whole sub-tile (wmiter={wmiter})"
    wsubm, wsubn = wm // wmiter, wn // wniter
    if wsubm % tm or wsubn % tn or (wsubm // tm) * (wsubn // tn) != 32:
        return f"a {wsubm}×{wsubn} sub-tile is not 32 lanes of {tm}×{tn}"
    return {"wmiter": wmiter, "wsubm": wsubm, "wsubn": wsubn}


def _warptile_constraint(p, m, n, k, dtype):
    d = warptile_derived(p)
    if isinstance(d, str):
        return d
    if p["tm"] % 4 or p["tn"] % 4 or p["bk"] % 4:
        return "tm, tn and bk must be multiples of 4 (128-bit accesses)"
    return _threads_ok(32 * (p["bm"] // p["wm"]) * (p["bn"] // p["wn"]))


def _pipelined_constraint(p, m, n, k, dtype):
    if p["stages"] < 2 or p["minb"] < 1:
        return "stages must be at least 2 and minb at least 1"
    return _warptile_constraint(p, m, n, k, dtype)


def _tf32_constraint(p, m, n, k, dtype):
    if p["bk"] % 8 or p["stages"] < 2:
        return "bk must be a multiple of 8 and stages ≥ 2"
    return None


def _ffma_constraint(p, m, n, k, dtype):
    if p["bm"] not in (64, 128) or p["kv"] not in (2, 4) or p["splitk"] < 1:
        return "bm must be 64 or 128, kv 2 or 4, splitk ≥ 1"
    if p["bm"] == 128 and p["splitk"] > 1:
        return "split-K with bm=128 needs more than 128 registers (spills at 2 blocks/SM)"
    return None


# --- dynamic shared memory (bytes), passed by the cuda backend at launch ----------------

def pipelined_shared_bytes(p: Params) -> int:
    return p["stages"] * (p["bk"] * (p["bm"] + PAD) + p["bk"] * p["bn"]) * 4


def ffma_shared_bytes(p: Params) -> int:
    return 3 * (p["bm"] * 16 + 16 * 128) * 4          # STAGES=3, BK=16, BN=128


def wgmma_shared_bytes(p: Params) -> int:
    return p["stages"] * (128 + p["bn"]) * 32 * 4 + 1024   # + 1024: swizzle-atom alignment


def tf32_shared_bytes(p: Params) -> int:
    return p["stages"] * (128 * (p["bk"] + 4) + p["bk"] * (128 + 8)) * 4


# --- the ladder ------------------------------------------------------------------------

LADDER = ("naive_uncoalesced", "blocktile_1d", "blocktile_2d", "vectorized", "bankfree",
          "warptile", "pipelined", "ffma_tuned", "tf32_mma", "tf32_wgmma")
CUBLAS = ("cublas_fp32", "cublas_tf32")

register(Variant(
    name="cublas_fp32",
    technique="cuBLAS SGEMM reference (gemmEx, CUBLAS_COMPUTE_32F, default math: strict FP32), via nvmath-python on the engine's context.",
    seed="issue 4: the cuBLAS reference line",
    sources={"cuda": "gemmEx:32F"},
    space={},
    geometry=_library_geometry,
    dtypes=FLOAT,
    library="cublas",
))

register(Variant(
    name="cublas_tf32",
    technique="cuBLAS with TF32 tensor cores (gemmEx, CUBLAS_COMPUTE_32F_FAST_TF32; FP32 storage and accumulation).",
    seed="issue 4: the cuBLAS reference line",
    sources={"cuda": "gemmEx:32F_FAST_TF32"},
    space={},
    geometry=_library_geometry,
    dtypes=FLOAT,
    library="cublas",
    precision="tf32",
))

register(Variant(
    name="naive_uncoalesced",
    technique="One thread per C element with x along ROWS: loads of A and stores of C are strided (uncoalesced); compare with naive.",
    seed=f"{SIBOEHM}, kernel 1",
    sources={"cuda": "cuda/10_naive_uncoalesced.cu"},
    space={"block": (32, 16)},
    geometry=_uncoalesced_geometry,
))

register(Variant(
    name="blocktile_1d",
    technique="1-D blocktiling: BM×BK and BK×BN shared tiles, each thread TM rows of one column (TM FMAs per shared load of B).",
    seed=f"{SIBOEHM}, kernel 4",
    sources={"cuda": "cuda/11_blocktile_1d.cu"},
    space={"bm": (64,), "bn": (64,), "bk": (8,), "tm": (8, 16)},  # tm=4: 1024 threads, 32-register cap, spills
    geometry=_blocktile_1d_geometry,
    constraint=_bt1d_constraint,
))

register(Variant(
    name="blocktile_2d",
    technique="2-D blocktiling: each thread a TM×TN sub-tile, an outer product of register-cached A and B values per k.",
    seed=f"{SIBOEHM}, kernel 5",
    sources={"cuda": "cuda/12_blocktile_2d.cu"},
    space={"bm": (128, 64), "bn": (128, 64), "bk": (8,), "tm": (8,), "tn": (8,)},
    geometry=_blocktile_2d_geometry,
    constraint=_bt2d_constraint,
))

register(Variant(
    name="vectorized",
    technique="2-D blocktiling with 128-bit global and shared accesses and A transposed in shared memory; scalar guarded tails (fast path at N, K % 4 == 0).",
    seed=f"{SIBOEHM}, kernel 6",
    sources={"cuda": "cuda/13_vectorized.cu"},
    space={"bm": (128, 64), "bn": (128,), "bk": (8, 16), "tm": (8,), "tn": (8,)},
    geometry=_blocktile_2d_geometry,
    constraint=_vec_constraint,
))

register(Variant(
    name="bankfree",
    technique="vectorized with a bank-conflict-free shared layout: padded transposed A tile, per-thread columns split into strided groups of 4.",
    seed=f"{SIBOEHM}, kernels 7-8; CUDA Best Practices padded tile",
    sources={"cuda": "cuda/14_bankfree.cu"},
    space={"bm": (128, 64), "bn": (128,), "bk": (8, 16), "tm": (8,), "tn": (8,)},
    geometry=_blocktile_2d_geometry,
    constraint=_vec_constraint,
))

register(Variant(
    name="warptile",
    technique="Warptiling: block tile → warp tiles → per-thread TM×TN pieces of WMITER×WNITER sub-tiles; 128-bit loads, padded transposed A.",
    seed=f"{SIBOEHM}, kernel 10; CUTLASS hierarchy",
    sources={"cuda": "cuda/15_warptile.cu"},
    space={"bm": (128,), "bn": (128,), "bk": (16, 8), "wm": (64,), "wn": (32, 64),
           "wniter": (2,), "tm": (8,), "tn": (4,)},
    geometry=_warptile_geometry,
    constraint=_warptile_constraint,
))

register(Variant(
    name="pipelined",
    technique="warptile fed by a STAGES-deep cp.async pipeline (sm_80+): copies of the next tiles overlap the FMAs, one barrier per tile.",
    seed="CUTLASS sm80 multistage mainloop; CUDA Programming Guide async copies; "
         f"{SIBOEHM}, kernel 11",
    sources={"cuda": "cuda/16_pipelined.cu"},
    space={"bm": (128, 64), "bn": (128,), "bk": (16,), "wm": (64,), "wn": (32,),
           "wniter": (2,), "tm": (8,), "tn": (4,), "stages": (3,), "minb": (2, 1)},
    geometry=_warptile_geometry,
    constraint=_pipelined_constraint,
    extra={"dynamic_shared": pipelined_shared_bytes},
))

register(Variant(
    name="ffma_tuned",
    technique="FP32 SIMT tuned for Hopper: A un-transposed with 16-byte cp.async, 3-stage pipeline, BM×128 tiles of 256 threads, (BM/16)×8 per thread in strided 4×4 pieces (conflict-free LDS.64/128), optional deterministic serial split-K.",
    seed="classic 128×128 8×8-per-thread SGEMM layout; CUTLASS multistage mainloop and serial split-K",
    sources={"cuda": "cuda/18_ffma_tuned.cu"},
    space={"bm": (128, 64), "kv": (4, 2), "splitk": (1, 2)},
    geometry=_ffma_geometry,
    constraint=_ffma_constraint,
    extra={"dynamic_shared": ffma_shared_bytes},
))

register(Variant(
    name="tf32_mma",
    technique="TF32 tensor cores via mma.sync.m16n8k8 (FP32 accumulate), 128×128 block, 64×32 warp tiles, cp.async pipeline.",
    seed="PTX ISA mma.m16n8k8 .tf32 fragment layouts; CUTLASS sm80 TF32 GEMM",
    sources={"cuda": "cuda/17_tf32_mma.cu"},
    space={"bk": (32, 16), "stages": (3, 4)},
    geometry=_tf32_geometry,
    constraint=_tf32_constraint,
    dtypes=FLOAT,
    precision="tf32",
    extra={"dynamic_shared": tf32_shared_bytes},
))

register(Variant(
    name="tf32_wgmma",
    technique="TF32 on Hopper's warpgroup MMA (wgmma.m64n128k8, sm_90a): 128×BN tiles, 2 warpgroups, operands in 128B-swizzled shared memory fed by a cp.async pipeline (B transposed to K-major on the way).",
    seed="PTX ISA wgmma.mma_async + matrix descriptors; CUTLASS sm90 GMMA mainloop (cp.async instead of TMA)",
    sources={"cuda": "cuda/19_tf32_wgmma.cu"},
    space={"bn": (128, 256), "stages": (4, 3)},
    geometry=_wgmma_geometry,
    dtypes=FLOAT,
    precision="tf32",
    extra={"dynamic_shared": wgmma_shared_bytes, "arch_suffix": "a"},
))
