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

from .registry import REGISTRY, Geometry, Params, Variant, cdiv, register

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


def regdb_threads(p: Params) -> int:
    return (p["bm"] // 8) * (128 // p["tn"])


def regdb_splits(p: Params, m: int, n: int) -> int:
    return p["splitk"] if cdiv(m, p["bm"]) * cdiv(n, 128) <= FFMA_MAX_TILES else 1


def _regdb_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    return (cdiv(n, 128), cdiv(m, p["bm"]) * regdb_splits(p, m, n)), (regdb_threads(p), 1)


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


def _regdb_constraint(p, m, n, k, dtype):
    if p["bm"] not in (64, 128) or p["tn"] not in (8, 16) or p["bk"] not in (8, 16) or p["splitk"] < 1:
        return "bm must be 64 or 128, tn 8 or 16, bk 8 or 16, splitk ≥ 1"
    if regdb_threads(p) < 128:
        return "bm=64 with tn=16 is 64 threads per block: too few warps per SM"
    if p["bm"] == 128 and p["tn"] == 8 and p["splitk"] > 1:
        return "split-K with the 256-thread 128×128 tile needs more than 128 registers (spills at 2 blocks/SM)"
    if p["bm"] == 128 and p["tn"] == 8 and p["bk"] == 16:
        return "bk=16 with the 256-thread 128×128 tile spills at 128 registers (2 blocks/SM)"
    return None


# --- dynamic shared memory (bytes), passed by the cuda backend at launch ----------------

def pipelined_shared_bytes(p: Params) -> int:
    return p["stages"] * (p["bk"] * (p["bm"] + PAD) + p["bk"] * p["bn"]) * 4


def ffma_shared_bytes(p: Params) -> int:
    return 3 * (p["bm"] * 16 + 16 * 128) * 4          # STAGES=3, BK=16, BN=128


def regdb_stages(p: Params) -> int:
    return 4 if p["bk"] == 8 else 3                    # cuda/20_ffma_regdb.cu's STAGES default


def regdb_shared_bytes(p: Params) -> int:
    return regdb_stages(p) * p["bk"] * (p["bm"] + 4 + 128) * 4


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

#: FP32 kernels of ladder v4 (cuda/2x_*.cu: outside LADDER, whose tests expect 1x_ files).
FP32_V4 = ("ffma_regdb", "ffma_wide")

register(Variant(
    name="ffma_regdb",
    technique="FP32 SIMT with register double buffering (fragments of k+1 read while the FFMAs of k run), A transposed in shared memory so both fragments are LDS.128, 8×TN per thread in strided 4×4 pieces, BM×128 tiles, cp.async pipeline with one barrier per k-tile, optional serial split-K.",
    seed="register double buffering of hand-tuned SGEMMs (YHs_Sample sgemm, CUTLASS SIMT fragment prefetch); CUTLASS multistage mainloop and serial split-K",
    sources={"cuda": "cuda/20_ffma_regdb.cu"},
    space={"bm": (128, 64), "tn": (8,), "bk": (8,), "splitk": (1, 2, 3)},  # tn=16, bk=16: v4 notes
    geometry=_regdb_geometry,
    constraint=_regdb_constraint,
    extra={"dynamic_shared": regdb_shared_bytes},
))

# --- ladder v5, FP32: ffma_wide (cuda/23_ffma_wide.cu), the 256×128 one-block-per-SM tile ---

def wide_splits(p: Params, m: int, n: int) -> int:
    return p["splitk"] if cdiv(m, p["bm"]) * cdiv(n, 128) <= FFMA_MAX_TILES else 1


def _wide_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    return (cdiv(n, 128), cdiv(m, p["bm"]) * wide_splits(p, m, n)), (256, 1)


def wide_shared_bytes(p: Params) -> int:
    return p["stages"] * p["bk"] * (p["bm"] + 4 + 128) * 4


def _wide_constraint(p, m, n, k, dtype):
    if p["bm"] != 256:
        return "bm must be 256 (bm=128 spills 8 bytes at 128 registers on sm_90; use ffma_regdb)"
    if p["bk"] not in (8, 16) or p["stages"] < 2 or p["sw"] < 1 or p["splitk"] < 1:
        return "bk must be 8 or 16, stages ≥ 2, sw ≥ 1, splitk ≥ 1"
    if wide_shared_bytes(p) > 227 * 1024:
        return f"{wide_shared_bytes(p)} B of shared memory (> 227 KB)"
    return None


register(Variant(
    name="ffma_wide",
    technique="FP32 SIMT with cuBLAS's shape: 256×128 tiles, 256 threads of 8×16 (128 accumulators, 1 block/SM), register double buffering, LDS.128 fragments of transposed A, interior tiles copied from running pointers (9.6 % non-FFMA instructions per k-tile), optional grouped block order (sw) and serial split-K.",
    seed="cuBLAS sm80 256x128x8 FFMA kernel shape (ncu, v4 notes); register double buffering of hand-tuned SGEMMs; Triton grouped block order; CUTLASS multistage mainloop and serial split-K",
    sources={"cuda": "cuda/23_ffma_wide.cu"},
    space={"bm": (256,), "bk": (8, 16), "stages": (4,), "sw": (1, 8), "splitk": (1, 4)},  # v5 notes
    geometry=_wide_geometry,
    constraint=_wide_constraint,
    extra={"dynamic_shared": wide_shared_bytes},
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


# --- ladder v4, TF32 (issue 4): warp-specialized wgmma with a B-transposing pre-pass -----
# Registered outside LADDER for now: tests/test_ladder.py checks LADDER files against
# 1\d_*.cu; tests/test_ladder.py's v4 section covers this entry instead.

def wgmma_ws_scratch_bytes(m: int, n: int, k: int) -> int:
    """Bt (N × Kp) and, when K % 4, a padded copy of A (M × Kp); Kp = roundup(K, 4)."""
    kp = (k + 3) // 4 * 4
    return 4 * kp * (n + (m if k % 4 else 0))


def _wgmma_ws_prepass_geometry(m: int, n: int, k: int) -> Geometry:
    kp = (k + 3) // 4 * 4
    return (cdiv(kp, 32), cdiv(n, 32) + (cdiv(m, 32) if k % 4 else 0)), (32, 8)


def _wgmma_ws_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    cl = p.get("cl", 1)                               # clusters of cl CTAs along M
    return (cdiv(n, p["bn"]), cdiv(cdiv(m, 128), cl) * cl), (384, 1)


def wgmma_ws_shared_bytes(p: Params) -> int:
    return p["stages"] * (128 + p["bn"]) * 32 * 4 + 1024 + 256   # + atom alignment, mbarriers


def _wgmma_ws_constraint(p, m, n, k, dtype):
    if wgmma_ws_shared_bytes(p) > 227 * 1024:
        return f"bn={p['bn']} with {p['stages']} stages needs {wgmma_ws_shared_bytes(p)} B of shared memory (> 227 KB)"
    return None


TF32_V4 = ("tf32_wgmma_ws", "tf32_wgmma_rs", "tf32_wgmma_tp", "tf32_wgmma_tma")

register(Variant(
    name="tf32_wgmma_ws",
    technique="TF32 wgmma (m64nBNk8, sm_90a), warp-specialized: a producer warpgroup fills STAGES 128B-swizzled stages with 16-byte cp.async (B pre-transposed to K-major by a one-off pre-pass kernel, timed with the GEMM), full/empty mbarriers per stage, 2 consumer warpgroups with one wgmma group in flight; cl=2: 2-CTA clusters along M share the B tile (each loads half, DSMEM bulk copy to the peer).",
    seed="PTX ISA wgmma.mma_async, mbarrier, fence.proxy.async; CUTLASS sm90 warp-specialized GMMA mainloop (cp.async instead of TMA)",
    sources={"cuda": "cuda/21_tf32_wgmma_ws.cu"},
    space={"bn": (256, 128), "stages": (4, 3), "cl": (1, 2)},
    geometry=_wgmma_ws_geometry,
    constraint=_wgmma_ws_constraint,
    dtypes=FLOAT,
    precision="tf32",
    extra={"dynamic_shared": wgmma_ws_shared_bytes, "arch_suffix": "a",
           "prepass": {"entry": "prepass", "geometry": _wgmma_ws_prepass_geometry,
                       "scratch_bytes": wgmma_ws_scratch_bytes}},
))


# --- ladder v5, TF32 (issue 4): no pre-pass -- C^T = B^T A^T with wgmma's A from registers ---

#: SMs of an H100/H200 SXM: the persistent grid of tf32_wgmma_rs (a GPU with fewer SMs
#: only queues the extra CTAs; with more, some SMs stay idle).
RS_SMS = 132


def rs_tiles(m: int, n: int) -> int:
    return cdiv(m, 256) * cdiv(n, 128)               # 256 (M) × 128 (N) tiles of C


def _wgmma_rs_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    tiles = rs_tiles(m, n)
    return (min(tiles, RS_SMS) if p["persist"] else tiles, 1), (384, 1)


def wgmma_rs_shared_bytes(p: Params) -> int:
    # per stage: the A tile (256 × 32, 128B-swizzled) + the B tile (32 × 136 floats)
    return p["stages"] * (256 * 32 * 4 + 32 * 136 * 4) + 1024 + 256   # + alignment, mbarriers


def _wgmma_rs_constraint(p, m, n, k, dtype):
    if p["stages"] not in (3, 4) or p["persist"] not in (0, 1):
        return "stages must be 3 or 4 (5 exceeds 227 KB of shared memory), persist 0 or 1"
    return None


register(Variant(
    name="tf32_wgmma_rs",
    technique="TF32 wgmma without a pre-pass: computes C^T = B^T·A^T so that A's K-major rows are wgmma's shared-memory operand (16-byte cp.async, 128B swizzle) and B's N-major tile feeds wgmma's register operand (conflict-free ld.shared.v2 fragments, rows paired onto adjacent columns); m64n256k8, 256×128 tiles of C, producer + 2 consumer warpgroups (setmaxnreg 40/232), full/empty mbarriers, two 8-register fragment sets with one commit group always queued, transposed float2 epilogue; persist=1: persistent grid, the next tile's loads overlap the epilogue.",
    seed="PTX ISA wgmma.mma_async (A in registers, .m64nNk8 fragment layouts), mbarrier, setmaxnreg; CUTLASS sm90 RS warp-specialized mainloops and swap-AB",
    sources={"cuda": "cuda/22_tf32_wgmma_rs.cu"},
    space={"stages": (4, 3), "persist": (1, 0)},
    geometry=_wgmma_rs_geometry,
    constraint=_wgmma_rs_constraint,
    dtypes=FLOAT,
    precision="tf32",
    extra={"dynamic_shared": wgmma_rs_shared_bytes, "arch_suffix": "a"},
))


def _wgmma_tp_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    return (cdiv(n, 256), cdiv(m, 128)), (384, 1)


def wgmma_tp_shared_bytes(p: Params) -> int:
    return p["stages"] * (128 + 256) * 32 * 4 + 1024 + 256   # + atom alignment, mbarriers


def _wgmma_tp_constraint(p, m, n, k, dtype):
    if p["stages"] < 3 or wgmma_tp_shared_bytes(p) > 227 * 1024:
        return f"stages={p['stages']}: need 3 or 4 (≥ 3 for the pipeline, ≤ 4 for 227 KB of shared memory)"
    return None


register(Variant(
    name="tf32_wgmma_tp",
    technique="tf32_wgmma_ws without its pre-pass: the producer warpgroup loads B's 32×256 k-tiles with 16-byte read-only loads one k-tile ahead, transposes 4×4 blocks in registers and stores K-major 16-byte chunks (st.shared.v4, conflict-free) into the 128B-swizzled stage; A by 16-byte cp.async; fence.proxy.async + full/empty mbarriers; consumers unchanged (2 × wgmma.m64n256k8, 128×256 tiles).",
    seed="PTX ISA wgmma.mma_async, mbarrier, fence.proxy.async; CUTLASS sm90 warp-specialized GMMA mainloop with a transposing producer; cuda/21_tf32_wgmma_ws.cu",
    sources={"cuda": "cuda/22_tf32_wgmma_tp.cu"},
    space={"stages": (4, 3)},
    geometry=_wgmma_tp_geometry,
    constraint=_wgmma_tp_constraint,
    dtypes=FLOAT,
    precision="tf32",
    extra={"dynamic_shared": wgmma_tp_shared_bytes, "arch_suffix": "a"},
))


# --- ladder v6, TF32: tf32_wgmma_ws's pipeline fed by TMA, persistent rasterised tiles ---

def tma_tiles(m: int, n: int) -> int:
    return cdiv(m, 128) * cdiv(n, 256)               # 128 (M) × 256 (N) tiles of C


def _wgmma_tma_geometry(p: Params, m: int, n: int, k: int) -> Geometry:
    tiles = tma_tiles(m, n)
    return (min(tiles, RS_SMS) if p["persist"] else tiles, 1), (384, 1)


def wgmma_tma_shared_bytes(p: Params) -> int:
    return p["stages"] * (128 + 256) * 32 * 4 + 1024 + 256   # + atom alignment, mbarriers


def wgmma_tma_maps_offset(m: int, n: int, k: int) -> int:
    """Byte offset of the two tensor maps in the scratch: after the pre-pass's Bt (and Ap)."""
    return (wgmma_ws_scratch_bytes(m, n, k) + 127) // 128 * 128


def wgmma_tma_scratch_bytes(m: int, n: int, k: int) -> int:
    return wgmma_tma_maps_offset(m, n, k) + 2 * 128


def wgmma_tma_tensor_maps(p: Params, m: int, n: int, k: int):
    """The backend's tensor-map spec: A (or its padded copy Ap when K % 4) as M rows of Kp
    floats, box 32 × 128; Bt as N rows of Kp floats, box 32 × 256; 128B swizzle."""
    kp = (k + 3) // 4 * 4
    a = ("scratch", 4 * kp * n) if k % 4 else ("a", 0)
    return wgmma_tma_maps_offset(m, n, k), [
        (*a, kp, m, 4 * kp, 32, 128),
        ("scratch", 0, kp, n, 4 * kp, 32, 256),
    ]


def _wgmma_tma_constraint(p, m, n, k, dtype):
    if p["stages"] not in (3, 4) or p["persist"] not in (0, 1):
        return "stages must be 3 or 4 (5 exceeds 227 KB of shared memory), persist 0 or 1"
    return None


register(Variant(
    name="tf32_wgmma_tma",
    technique="tf32_wgmma_ws with its producer replaced by TMA: one elected thread issues cp.async.bulk.tensor.2d loads (128B-swizzle tensor maps for A and the pre-transposed Bt, encoded on the host with cuTensorMapEncodeTiled and stored in the scratch tail) completing as tx bytes on the stage's full mbarrier; 2 consumer warpgroups × wgmma.m64n256k8, 128×256 tiles; persist=1: persistent grid of #SMs CTAs looping over tiles rasterised in groups of 8 tile rows, the stage ring running on across tiles.",
    seed="PTX ISA cp.async.bulk.tensor, mbarrier expect_tx, fence.proxy.tensormap, wgmma.mma_async; CUDA driver cuTensorMapEncodeTiled; CUTLASS sm90 TMA warp-specialized persistent GMMA kernels; cuda/21_tf32_wgmma_ws.cu",
    sources={"cuda": "cuda/24_tf32_wgmma_tma.cu"},
    space={"stages": (4, 3), "persist": (1, 0)},
    geometry=_wgmma_tma_geometry,
    constraint=_wgmma_tma_constraint,
    dtypes=FLOAT,
    precision="tf32",
    extra={"dynamic_shared": wgmma_tma_shared_bytes, "arch_suffix": "a",
           "prepass": {"entry": "prepass", "geometry": _wgmma_ws_prepass_geometry,
                       "scratch_bytes": wgmma_tma_scratch_bytes,
                       "tensor_maps": wgmma_tma_tensor_maps}},
))

# Ladder v4's kernels (cuda/2x_*.cu) close the ladder: the GUI, the CLI and the ladder
# benchmark see one list, in the order the techniques build on each other.
LADDER = tuple(n for n in REGISTRY if n in set(LADDER + FP32_V4 + TF32_V4))
