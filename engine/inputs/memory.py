"""Sizing a run before anything is allocated: host memory as the OS, this process's own
cgroup and its resource limits see it, with the largest size that fits in the refusal
(device memory: the runner asks the open backend, ``matrices.check_device_fit``).

A run at one shape holds, on the host: A and B, the output's host copy, and the
verification's float64 work (the full reference below
:data:`~engine.measure.verify.FULL_REFERENCE_LIMIT` multiply-adds: A and B in float64, the
product and its per-element noise scale; above it, Freivalds' projections and a
float64 copy of the output in row blocks). On the device: A, B and C.
"""
from __future__ import annotations

from engine.common.host_memory import MACHINE_MEMORY, HostLimit, host_limit
from engine.inputs.errors import MatrixInputError
from engine.common.units import format_bytes as _format_bytes
from engine.measure.verify import FULL_REFERENCE_LIMIT

#: Part of the available host memory a run may plan to use (the rest is for everything
#: else on the machine, and for numpy's temporaries this model does not count).
HOST_SHARE = 0.8


def host_bytes(m: int, n: int, k: int, itemsize: int = 4, verify: bool = True,
               out_itemsize: int | None = None) -> int:
    """Host bytes one shape needs: inputs (``itemsize`` each), the output's copy (its own
    type's ``out_itemsize``; default the inputs'), and verification's float64 work."""
    need = (m * k + k * n) * itemsize + m * n * (itemsize if out_itemsize is None else out_itemsize)
    if verify:
        if m * n * k <= FULL_REFERENCE_LIMIT:
            need += (m * k + k * n) * 8 * 2 + m * n * 8 * 3   # A, B, A², B² in f64; C, scale, diff
        else:
            need += m * n * 8 // 4 + (m + n + k) * 8 * 16        # blocks of C in f64; projections
    return need


def largest_square(need, budget: int) -> int:
    """The largest n with ``need(n, n, n) <= budget`` (0 when not even 1 fits)."""
    lo, hi = 0, 1
    while need(hi, hi, hi) <= budget and hi < 1 << 24:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if need(mid, mid, mid) <= budget:
            lo = mid
        else:
            hi = mid
    return lo


def check_host_fit(shape, itemsize: int = 4, verify: bool = True, copies: int = 1,
                   available: int | None = None, out_itemsize: int | None = None) -> None:
    """Raise MatrixInputError (with the numbers and the largest square size that fits)
    when ``copies`` engines on this host cannot hold the run at ``shape``."""
    m, n, k = shape
    bound = host_limit() if available is None else HostLimit(MACHINE_MEMORY, available)
    avail = bound.room
    budget = int(avail * HOST_SHARE) // max(copies, 1)
    need = host_bytes(m, n, k, itemsize, verify, out_itemsize)
    if need > budget:
        fits = largest_square(lambda a, b, c: host_bytes(a, b, c, itemsize, verify, out_itemsize),
                              budget)
        who = f" for each of {copies} engines" if copies > 1 else ""
        raise MatrixInputError(
            f"{m}×{n}×{k} needs {_format_bytes(need)} of host memory{who} (inputs, output and "
            f"{'verification' if verify else 'no verification'}), but only "
            f"{_format_bytes(budget)} can be used ({_format_bytes(avail)} available"
            + (f" under {bound.what}" if bound.what != MACHINE_MEMORY else "")
            + "); the largest "
            f"square size that fits is {fits}" + (" (or turn verification off)" if verify else ""))
