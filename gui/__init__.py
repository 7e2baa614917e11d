"""The Qt desktop front end of the matmul lab.

Everything here runs in the GUI thread except what :mod:`gui.run_controller` hands
to worker threads and engine processes; no widget is touched from another thread, and
no widget waits on a device.  Entry point: :func:`gui.app.main`.
"""
from .qt_compat import guard_singletons

#: Whether the PySide6 reference-count guard was needed here (see gui.qt_compat).
SINGLETON_GUARD = guard_singletons()
