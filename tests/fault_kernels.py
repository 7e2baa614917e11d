"""Kernels that fail on purpose, for the engine-isolation tests.

``fault_hang`` (CUDA and OpenCL) never finishes; ``fault_illegal_address`` and
``fault_trap`` (CUDA) lose the device context. :func:`variants` describes them; an engine
process registers them when started with ``preload=(PRELOAD,)``, and a test registers
them in its own process with ``monkeypatch.setitem(registry.REGISTRY, ...)`` so that
other tests never see them.
"""
from __future__ import annotations

import dataclasses

from engine.kernels import registry

#: The module an engine process imports to register the fault kernels.
PRELOAD = "tests.fault_kernels_preload"

FAULTS = {
    "fault_hang": {"cuda": "tests/kernels/fault_hang.cu", "opencl": "tests/kernels/fault_hang.cl"},
    "fault_illegal_address": {"cuda": "tests/kernels/fault_illegal_address.cu"},
    "fault_trap": {"cuda": "tests/kernels/fault_trap.cu"},
}


def variants() -> list[registry.Variant]:
    """The fault kernels as variants shaped like ``naive`` (one thread per C element)."""
    return [dataclasses.replace(
        registry.REGISTRY["naive"], name=name, sources=sources, space={"block": (16,)},
        technique="a kernel that fails on purpose (engine isolation test)",
        seed="tests/fault_kernels.py", dtypes=("float32",)) for name, sources in FAULTS.items()]
