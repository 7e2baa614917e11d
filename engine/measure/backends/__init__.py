"""Backends by name. Each is imported lazily, so a missing pycuda or pyopencl only
makes that backend unavailable (with the reason) and never stops the app."""
from __future__ import annotations

from engine.measure.backends.base import Backend, BackendError, BackendStatus, DeviceInfo

BACKENDS = ("cuda", "opencl", "cpu")


def get_backend(name: str) -> Backend:
    """A fresh, unopened backend object."""
    if name == "cuda":
        from engine.measure.backends.cuda import CudaBackend  # noqa: PLC0415
        return CudaBackend()
    if name == "opencl":
        from engine.measure.backends.opencl import OpenCLBackend  # noqa: PLC0415
        return OpenCLBackend()
    if name == "cpu":
        from engine.measure.backends.cpu import CpuBackend  # noqa: PLC0415
        return CpuBackend()
    raise BackendError(f"unknown backend '{name}' (choose from {', '.join(BACKENDS)})")


def probe_all() -> dict[str, BackendStatus]:
    """Status of every backend: available or not, why, and its devices."""
    out = {}
    for name in BACKENDS:
        try:
            out[name] = get_backend(name).probe()
        except Exception as exc:  # a probe must never take the app down  # noqa: BLE001
            out[name] = BackendStatus(name, False, f"probe failed: {exc}")
    return out


__all__ = ["BACKENDS", "Backend", "BackendError", "BackendStatus", "DeviceInfo",
           "get_backend", "probe_all"]
