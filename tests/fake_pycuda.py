"""A recording stand-in for what the cuda backend asks of ``pycuda.driver`` (buffers,
copies, memsets, events) and of the context, so that its upload, poison and read-back
plumbing runs on machines without a GPU. Buffers have an address (numbered from 0x2000
up, what library calls receive) and their bytes; copies copy bytes (refusing arrays that
are not plain words, as pycuda's buffer interface does for ml_dtypes' types); memsets write
their pattern. Every call is kept in ``calls``: ("htod", address, dtype, shape), ("dtoh",
dtype), ("d16" / "d32", address, pattern, count)."""
from __future__ import annotations

import numpy as np


class FakeBuffer:
    def __init__(self, address: int, nbytes: int):
        self.address, self.nbytes = address, nbytes
        self.data, self.freed = bytearray(nbytes), False

    def __int__(self):
        return self.address

    def free(self):
        self.freed = True


class FakeEvent:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    def time_till(self, other):
        return 0.25


class FakeDriver:
    Error = RuntimeError
    Event = FakeEvent

    def __init__(self):
        self.calls, self._next = [], 0x1000

    def mem_alloc(self, nbytes):
        self._next += 0x1000
        return FakeBuffer(self._next, nbytes)

    @staticmethod
    def _plain(x):
        assert x.dtype.kind in "uif" and x.dtype.type.__module__ == "numpy", x.dtype
        return x

    def memcpy_htod(self, buf, x):
        raw = self._plain(x).tobytes()
        buf.data[:len(raw)] = raw
        self.calls.append(("htod", int(buf), x.dtype, x.shape))

    def memcpy_dtoh(self, out, buf):
        self._plain(out)
        out.reshape(-1).view(np.uint8)[:] = np.frombuffer(bytes(buf.data[:out.nbytes]), np.uint8)
        self.calls.append(("dtoh", out.dtype))

    def memset_d16(self, buf, pattern, count):
        buf.data[:2 * count] = np.full(count, pattern, np.uint16).tobytes()
        self.calls.append(("d16", int(buf), pattern, count))

    def memset_d32(self, buf, pattern, count):
        buf.data[:4 * count] = np.full(count, pattern, np.uint32).tobytes()
        self.calls.append(("d32", int(buf), pattern, count))


class FakeContext:
    def synchronize(self):
        pass
