"""Hold a CUDA stream while a batch of timed launches is queued (nvbench's "blocking kernel").

Why: a timed launch is ``event, kernel, event`` on the stream. When the GPU has drained the
stream, the first event completes as soon as the host records it, and the kernel starts
only once the host has finished issuing it: the pair then measures the host's launch path
(Python, argument packing, a pre-pass) as well as the kernel. For kernels of tens of
microseconds that gap is as long as the kernel, and it varies, so medians moved by up to 2×
between runs of the same kernel (``benchmarks/NOTES.md``, issue 11 rounds 7–9).

How: before a batch, one thread of a tiny kernel spins on a flag in mapped (page-locked,
device-visible) host memory; the host queues the batch behind it, then sets the flag. The
batch's launches then run back to back, each between its own pair of events, so each pair
measures that launch on the GPU and nothing of the host. The spinning kernel gives up after
``timeout_ns`` (a host that stalls, or a queue that cannot hold the batch, would otherwise
deadlock) and says so in the flag's second word; :meth:`StreamHold.release` reports it.

The kernel is PTX text, compiled by the driver (no nvcc), so any CUDA device can hold.
"""
from __future__ import annotations

import numpy as np

#: One thread: spin until word 0 of ``flag`` is non-zero or ``timeout_ns`` have passed on the
#: GPU's global timer; on a timeout write 1 to word 1.
HOLD_PTX = r"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry lab_hold_stream(.param .u64 flag_ptr, .param .u64 timeout_ns)
{
    .reg .pred p;
    .reg .b32 r;
    .reg .b64 flag, lim, t0, t1, dt;
    ld.param.u64 flag, [flag_ptr];
    ld.param.u64 lim, [timeout_ns];
    cvta.to.global.u64 flag, flag;
    mov.u64 t0, %globaltimer;
WAIT:
    ld.volatile.global.u32 r, [flag];
    setp.ne.u32 p, r, 0;
    @p bra DONE;
    mov.u64 t1, %globaltimer;
    sub.u64 dt, t1, t0;
    setp.lt.u64 p, dt, lim;
    @p bra WAIT;
    st.volatile.global.u32 [flag+4], 1;
DONE:
    ret;
}
"""

#: Longer than any host needs to queue a batch, short enough that a stall shows up at once.
DEFAULT_TIMEOUT_NS = 1_000_000_000


class StreamHold:
    """The holding kernel and its flag on the current context (make it on the engine thread).

    Parameters
    ----------
    drv
        ``pycuda.driver`` (or a stand-in with ``module_from_buffer``, ``pagelocked_zeros``
        and ``host_alloc_flags``).
    timeout_ns
        How long the kernel holds the stream at most.

    Raises
    ------
    drv.Error
        Where the driver cannot compile the PTX or map host memory (the caller then times
        without holding).
    """

    def __init__(self, drv, timeout_ns: int = DEFAULT_TIMEOUT_NS):
        self._module = drv.module_from_buffer(HOLD_PTX.encode())
        self._fn = self._module.get_function("lab_hold_stream")
        self._fn.prepare("PQ")
        self.flag = drv.pagelocked_zeros(2, np.uint32, mem_flags=drv.host_alloc_flags.DEVICEMAP)
        self._ptr = np.uintp(self.flag.base.get_device_pointer())
        self._timeout = np.uint64(timeout_ns)
        self.timeouts = 0

    def hold(self, stream=None) -> None:
        """Queue the holding kernel: the stream's later work waits for :meth:`release`."""
        self.flag[0] = 0
        self.flag[1] = 0
        self._fn.prepared_async_call((1, 1, 1), (1, 1, 1), stream, self._ptr, self._timeout)

    def release(self) -> None:
        """Let the held stream run."""
        self.flag[0] = 1

    def timed_out(self) -> bool:
        """After the batch has completed: whether the kernel gave up before the release (the
        batch's first launches may then include host time). Counted in ``timeouts``."""
        if self.flag[1]:
            self.flag[1] = 0
            self.timeouts += 1
            return True
        return False

    def close(self) -> None:
        """Free the flag's page-locked memory (before the context goes)."""
        base = getattr(self.flag, "base", None)
        if base is not None and hasattr(base, "free"):
            base.free()
        self._module = self._fn = None
