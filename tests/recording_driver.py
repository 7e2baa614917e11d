"""A recording stand-in for pycuda's driver, for the cuda backend's launch logic on a CPU.

``recording_backend()`` is a :class:`engine.measure.backends.cuda.CudaBackend` that was never opened
(132 SMs), whose driver records allocations, host-to-device copies and memsets instead of
making them; prepared kernel entries (:class:`Entry`) record each launch.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from engine.measure.backends import cuda as cuda_backend


class Buf:
    """A device allocation: an address that int() gives, as pycuda's DeviceAllocation."""

    def __init__(self, addr: int, nbytes: int):
        self.addr, self.nbytes, self.freed = addr, nbytes, False

    def __int__(self) -> int:
        return self.addr

    def free(self) -> None:
        self.freed = True


class RecordingDriver:
    class Error(Exception):
        pass

    def __init__(self):
        self.next_addr = 0x10_0000
        self.allocs: list[Buf] = []
        self.copies: list[tuple[int, bytes]] = []
        self.memsets: list[tuple[int, int, int]] = []

    def mem_alloc(self, nbytes: int) -> Buf:
        buf = Buf(self.next_addr, nbytes)
        self.next_addr += (nbytes + 0xFFFF) // 0x10000 * 0x10000 + 0x10000
        self.allocs.append(buf)
        return buf

    def memcpy_htod(self, dst, src) -> None:
        self.copies.append((int(dst), bytes(np.asarray(src).tobytes())))

    def memset_d8(self, dst, value: int, count: int) -> None:
        self.memsets.append((int(dst), value, count))


class Entry:
    """A prepared kernel entry: records each launch as (name, grid, block, arguments)."""

    def __init__(self, name: str, log: list):
        self.name, self.log = name, log

    def prepared_async_call(self, grid, block, stream, *args, shared_size=None):
        self.log.append((self.name, grid, block, args))


def recording_backend() -> cuda_backend.CudaBackend:
    be = object.__new__(cuda_backend.CudaBackend)
    be.drv = RecordingDriver()
    be.info = SimpleNamespace(compute_units=132)
    be._monitor = None              # no NVML behind a recording driver
    return be
