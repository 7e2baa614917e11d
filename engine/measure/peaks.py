"""Honest ceilings: one peak per arithmetic (FP32 SIMT, TF32 tensor cores, int32), and the
measured copy bandwidth.

A TF32 kernel measured against the FP32 SIMT peak reads 500 % of peak; each record is
compared with the peak of the units that do its arithmetic instead:

* ``fp32``  -- FP32 SIMT lanes: SMs × lanes per SM × 2 (an FFMA is two FLOPs) × clock;
* ``tf32``  -- dense TF32 tensor-core throughput: SMs × TF32 FLOP per clock per SM × clock;
* ``int32`` -- 32-bit integer multiply-add (IMAD) units: SMs × IMAD lanes per SM × 2 × clock;
* ``fp8`` -- dense FP8 (e4m3, e5m2) tensor-core throughput with FP32 accumulation;
* ``int8`` -- dense int8 tensor-core operations with int32 accumulation (an H100 SXM:
  132 × 8192 × 1830 MHz = 1979 TOPS; an A100: 108 × 4096 × 1410 MHz = 624 TOPS);
* ``fp16``, ``bf16`` -- dense FP16 / BF16 tensor-core throughput with FP32 accumulation:
  SMs × FP16 FLOP per clock per SM × clock (an H100/H200 SXM: 132 × 4096 × 1830 MHz =
  989 TFLOP/s, the datasheet's figure at its 1830 MHz; 1070 at the 1980 MHz the device
  reports as its maximum). BF16 runs at the FP16 rate wherever it exists (sm_80 on).

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

from engine.common.dtypes import ElementType

#: The arithmetic a record's peak is taken for.
PRECISIONS = ("fp32", "tf32", "int32", "fp16", "bf16", "fp8", "int8")
LABELS = {"fp32": "FP32 SIMT", "tf32": "TF32 tensor core", "int32": "int32",
          "fp16": "FP16 tensor core", "bf16": "BF16 tensor core", "fp8": "FP8 tensor core",
          "int8": "int8 tensor core"}
#: The arithmetic of a run whose inputs are 16-bit floats, whatever its kernel's precision.
HALF_PRECISION = {"float16": "fp16", "bfloat16": "bf16"}
#: The arithmetic of a run whose inputs are FP8 (either kind: one rate).
FP8_INPUTS = tuple(e.value for e in ElementType if e.is_float8)

_FP32_LANES = {(5, 0): 128, (5, 2): 128, (5, 3): 128, (6, 0): 64, (6, 1): 128, (6, 2): 128,
               (7, 0): 64, (7, 2): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128,
               (8, 9): 128, (9, 0): 128, (10, 0): 128, (10, 3): 128, (11, 0): 128,
               (12, 0): 128, (12, 1): 128}
#: Dense TF32 FLOP per clock per SM. sm_86 is the data-centre figure (A10, A40): GeForce
#: parts of that architecture accumulate TF32 in FP32 at half of it.
_TF32_FLOP = {(8, 0): 1024, (8, 6): 512, (8, 7): 512, (8, 9): 256, (9, 0): 2048,
              (10, 0): 4096, (10, 3): 4096, (12, 0): 256, (12, 1): 256}
#: Dense FP16 FLOP per clock per SM with FP32 accumulation: twice the TF32 figure on each
#: architecture (A100 312 TFLOP/s = 108 × 2048 × 1410 MHz; H100 SXM 989 = 132 × 4096 ×
#: 1830 MHz; B200 8192). Volta and Turing have FP16 tensor cores (V100 125 = 80 × 1024 ×
#: 1530 MHz; T4 65 = 40 × 1024 × 1590 MHz) but no TF32 and no BF16. sm_86 is the
#: data-centre figure (A10, A40), sm_89 and sm_12x L40's and GeForce's: their FP32
#: accumulation runs at half the FP16-accumulate rate (L40S doubles sm_89's: a lower bound).
_FP16_FLOP = {(7, 0): 1024, (7, 2): 1024, (7, 5): 1024, (8, 0): 2048, (8, 6): 1024,
              (8, 7): 1024, (8, 9): 512, (9, 0): 4096, (10, 0): 8192, (10, 3): 8192,
              (12, 0): 512, (12, 1): 512}
#: Dense FP8 FLOP per clock per SM with FP32 accumulation: twice FP16's where the tensor
#: cores take FP8 (H100 SXM 1979 TFLOP/s = 132 × 8192 × 1830 MHz; L40 362 = 142 × 1024 ×
#: 2490 MHz; B200 16384).
_FP8_FLOP = {(8, 9): 1024, (9, 0): 8192, (10, 0): 16384, (10, 3): 16384}
#: Dense int8 operations per clock per SM with int32 accumulation (Turing on): twice FP16's
#: on the data-centre parts (T4 130 TOPS = 40 × 2048 × 1590 MHz; A100 624 = 108 × 4096 ×
#: 1410 MHz; H100 SXM 1979 = 132 × 8192 × 1830 MHz; B200 16384); sm_86/87 at A10's and
#: Orin's 2048, sm_89 at L40's 1024 (362 TOPS = 142 × 1024 × 2490 MHz).
_INT8_OPS = {(7, 5): 2048, (8, 0): 4096, (8, 6): 2048, (8, 7): 2048, (8, 9): 1024,
             (9, 0): 8192, (10, 0): 16384, (10, 3): 16384}
#: Architectures with BF16 tensor cores (Ampere on); at the FP16 rate there.
_BF16_FROM = (8, 0)
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


def half_flops_per_clock(major: int, minor: int, precision: str = "fp16") -> int | None:
    """Dense FP16 (or BF16) tensor-core FLOP per clock per SM with FP32 accumulation (None:
    no such tensor cores, e.g. BF16 before sm_80, or unknown)."""
    if precision == "bf16" and (major, minor) < _BF16_FROM:
        return None
    return _FP16_FLOP.get((major, minor))


def int8_ops_per_clock(major: int, minor: int) -> int | None:
    """Dense int8 tensor-core operations per clock per SM with int32 accumulation (None: no
    int8 tensor cores, or unknown)."""
    return _INT8_OPS.get((major, minor))


def imad_lanes_per_sm(major: int, minor: int) -> int | None:
    """32-bit integer multiply-add lanes per SM."""
    return _IMAD_LANES.get((major, minor))


def cuda_peaks(major: int, minor: int, sms: int | None, clock_mhz: float | None
               ) -> tuple[dict[str, float], list[str]]:
    """``({precision: GFLOP/s (GOP/s for int32 and int8)}, notes saying how)`` for a CUDA
    device."""
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
    for half in ("fp16", "bf16"):
        rate = half_flops_per_clock(major, minor, half)
        if rate:
            out[half] = sms * rate * ghz
    if out.get("fp16"):
        both = "FP16/BF16" if out.get("bf16") else "FP16"
        notes.append(f"peak {both} = {sms} SMs × {half_flops_per_clock(major, minor)} dense "
                     f"tensor FLOP/clock (FP32 accumulation) × {clock_mhz:.0f} MHz")
    fp8 = _FP8_FLOP.get((major, minor))
    if fp8:
        out["fp8"] = sms * fp8 * ghz
        notes.append(f"peak FP8 = {sms} SMs × {fp8} dense tensor FLOP/clock (FP32 "
                     f"accumulation) × {clock_mhz:.0f} MHz")
    int8 = int8_ops_per_clock(major, minor)
    if int8:
        out["int8"] = sms * int8 * ghz
        notes.append(f"peak int8 = {sms} SMs × {int8} dense tensor OP/clock (int32 "
                     f"accumulation) × {clock_mhz:.0f} MHz")
    imad = imad_lanes_per_sm(major, minor)
    if imad:
        out["int32"] = sms * imad * 2 * ghz
        notes.append(f"peak int32 = {sms} SMs × {imad} IMAD lanes × 2 × {clock_mhz:.0f} MHz")
    return out, notes


def precision_of(variant_precision: str, dtype: str) -> str:
    """The arithmetic of a run: int32 for int32 data, int8 for int8 inputs (tensor cores,
    int32 accumulation), fp16/bf16 for 16-bit float inputs (tensor cores, FP32
    accumulation), else the variant's (fp32 or tf32)."""
    if dtype in ("int32", "int8"):
        return dtype
    if dtype in HALF_PRECISION:
        return HALF_PRECISION[dtype]
    if dtype in FP8_INPUTS:
        return "fp8"
    return variant_precision if variant_precision in ("fp32", "tf32") else "fp32"


def peak_for(peaks: Mapping[str, float | None], precision: str) -> float | None:
    """The peak of ``precision`` among ``peaks``, or None when unknown (never another
    precision's: a TF32 kernel is not measured against the FP32 peak)."""
    value = peaks.get(precision)
    return float(value) if value else None


def copy_gbps(nbytes: int, ms: float) -> float:
    """Copy bandwidth in GB/s: ``nbytes`` read and ``nbytes`` written in ``ms``."""
    return 2.0 * nbytes / (ms * 1e-3) / 1e9 if ms > 0 else float("nan")
