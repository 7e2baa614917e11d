"""A guard against a reference-counting bug in some PySide6 builds on CPython < 3.12.

PySide6 6.12.0 (the abi3 wheel) returns ``None``, ``True`` and ``False`` from Qt
calls without taking a reference: every ``label.setText(...)`` (returns None) or
``signal.emit(...)`` (returns True) takes one reference away.  On Python 3.12+ these
objects are immortal and nothing happens; on 3.11 the count reaches zero after a few
thousand calls and the interpreter aborts with "Fatal Python error: none_dealloc"
(or "bool_dealloc").

:func:`guard_singletons` measures whether this build leaks and, only then, adds a
very large number of references to the three objects, which makes them immortal in
effect, just as 3.12 does.  It touches nothing else.
"""
from __future__ import annotations

import ctypes
import sys

#: References added: at a million leaked references a second, enough for 35 years.
_PAD = 1 << 50
_guarded = False


def _leaks() -> bool:
    """Whether Qt calls returning None/True take references they do not own."""
    from PySide6.QtCore import QObject, Signal  # noqa: PLC0415

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    none0, true0 = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(64):
        probe.setObjectName("probe")  # returns None
        probe.ping.emit()             # returns True
    none1, true1 = sys.getrefcount(None), sys.getrefcount(True)
    # Restore what the probe itself took, so that the measurement leaves no trace.
    for obj, lost in ((None, none0 - none1), (True, true0 - true1)):
        for _ in range(max(lost, 0)):
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    return none1 < none0 - 32 or true1 < true0 - 32


def guard_singletons() -> bool:
    """Make None/True/False immortal when this PySide6 build needs it.

    Returns True when the guard was applied (now or by an earlier call).
    """
    global _guarded
    if _guarded:
        return True
    if (sys.implementation.name != "cpython" or sys.version_info >= (3, 12)
            or hasattr(sys, "gettotalrefcount")):  # 3.12+: immortal; debug builds: other layout
        return False
    if not _leaks():
        return False
    for obj in (None, True, False):
        # ob_refcnt is the first field of every object in a release build of CPython.
        ctypes.c_ssize_t.from_address(id(obj)).value += _PAD
    _guarded = True
    return True
