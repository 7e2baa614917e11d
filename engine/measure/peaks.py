"""Honest ceilings: one peak per arithmetic (FP32 SIMT, TF32 tensor cores, int32), and the
measured copy bandwidth.

A TF32 kernel measured against the FP32 SIMT peak reads 500 % of peak; each record is
compared with the peak of the units that do its arithmetic instead:

* ``fp32``  -- FP32 SIMT lanes: SMs × lanes per SM × 2 (an FFMA is two FLOPs) × clock;
* ``tf32``  -- dense TF32 tensor-core throughput: SMs × TF32 FLOP per clock per SM × clock;
* ``int32`` -- 32-bit integer multiply-add (IMAD) units: SMs × IMAD lanes per SM × 2 × clock.

The per-SM figures are the CUDA C Programming Guide's arithmetic-instruction throughput
table (FP32, IMAD) and NVIDIA's architecture whitepapers (dense TF32 tensor FLOP per
clock: A100, H100, L40, B200, RTX 50). The clock is the device's reported maximum, so each
peak is an upper bound the chip reaches only at its boost clock.

Bandwidth has two roofs: the datasheet-style estimate (2 × memory clock × bus width) and
the measured device-to-device copy bandwidth (bytes read + bytes written per second, a
copy of buffers several times the L2), which is what a streaming kernel can hope to reach.
"""
from __future__ import annotations

from typing import Mapping

#: The arithmetic a record's peak is taken for.
PRECISIONS = ("fp32", "tf32", "int32")
LABELS = {"fp32": "FP32 SIMT", "tf32": "TF32 tensor core", "int32": "int32"}

_FP32_LANES = {(5, 0): 128, (5, 2): 128, (5, 3): 128, (6, 0): 64, (6, 1): 128, (6, 2): 128,
               (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128,
               (8, 9): 128, (9, 0): 128, (10, 0): 128, (10, 3): 128, (11, 0): 128,
               (12, 0): 128, (12, 1): 128}
#: Dense TF32 FLOP per clock per SM. sm_86 is the data-centre figure (A10, A40): GeForce
#: parts of that architecture accumulate TF32 in FP32 at half of it.
_TF32_FLOP = {(8, 0): 1024, (8, 6): 512, (8, 7): 512, (8, 9): 256, (9, 0): 2048,
              (10, 0): 4096, (10, 3): 4096, (12, 0): 256, (12, 1): 256}
#: 32-bit integer multiply-add lanes per SM (IMAD). Maxwell and Pascal emulate it with
#: several instructions: no simple peak there.
_IMAD_LANES = {(7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 64, (8, 7): 64,
               (8, 9): 64, (9, 0): 64, (10, 0): 64, (10, 3): 64, (11, 0): 64,
               (12, 0): 64, (12, 1): 64}


def fp32_lanes_per_sm(major: int, minor: int) -> int | None:
    """FP32 lanes per SM by compute capability."""
    return _FP32_LANES.get((major, minor))


def tf32_flops_per_clock(major: int, minor: int) -> int | None:
    """Dense TF32 tensor-core FLOP per clock per SM (None: no TF32 tensor cores, or unknown)."""
    return _TF32_FLOP.get((major, minor))


def imad_lanes_per_sm(major: int, minor: int) -> int | None:
    """32-bit integer multiply-add lanes per SM."""
    return _IMAD_LANES.get((major, minor))


def cuda_peaks(major: int, minor: int, sms: int | None, clock_mhz: float | None
               ) -> tuple[dict[str, float], list[str]]:
    """``({precision: GFLOP/s (GOP/s for int32)}, notes saying how)`` for a CUDA device."""
    out: dict[str, float] = {}
    notes: list[str] = []
    if not sms or not clock_mhz:
        return out, notes
    ghz = clock_mhz / 1e3
    lanes = fp32_lanes_per_sm(major, minor)
    if lanes:
        out["fp32"] = sms * lanes * 2 * ghz
        notes.append(f"peak FP32 = {sms} SMs × {lanes} lanes × 2 × {clock_mhz:.0f} MHz")
    tf32 = tf32_flops_per_clock(major, minor)
    if tf32:
        out["tf32"] = sms * tf32 * ghz
        notes.append(f"peak TF32 = {sms} SMs × {tf32} dense tensor FLOP/clock × {clock_mhz:.0f} MHz")
    imad = imad_lanes_per_sm(major, minor)
    if imad:
        out["int32"] = sms * imad * 2 * ghz
        notes.append(f"peak int32 = {sms} SMs × {imad} IMAD lanes × 2 × {clock_mhz:.0f} MHz")
    return out, notes


def precision_of(variant_precision: str, dtype: str) -> str:
    """The arithmetic of a run: int32 for integer data, else the variant's (fp32 or tf32)."""
    return "int32" if dtype == "int32" else (variant_precision if variant_precision in PRECISIONS
                                             else "fp32")


def peak_for(peaks: Mapping[str, float | None], precision: str) -> float | None:
    """The peak of ``precision`` among ``peaks``, or None when unknown (never another
    precision's: a TF32 kernel is not measured against the FP32 peak)."""
    value = peaks.get(precision)
    return float(value) if value else None


def copy_gbps(nbytes: int, ms: float) -> float:
    """Copy bandwidth in GB/s: ``nbytes`` read and ``nbytes`` written in ``ms``."""
    return 2.0 * nbytes / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")
