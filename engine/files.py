"""Opening only what can be read: regular files, of a size this machine can hold.

A named pipe blocks ``open()`` until a writer comes (forever, usually), a device never
ends, a loop of symbolic links fails late with an unclear message. Every reader of user
files (matrices, results) asks :func:`check_regular_file` first.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def check_regular_file(path: Path, label: str, error: type[Exception] = ValueError,
                       max_bytes: int | None = None) -> os.stat_result:
    """The file's stat, or ``error`` with a message starting with ``label`` when ``path``
    is missing, a folder, a pipe, a socket, a device, a link loop, or larger than
    ``max_bytes``."""
    try:
        st = os.stat(path)         # follows links; a loop of links fails here
    except FileNotFoundError:
        raise error(f"{label} was not found (looked for {os.path.abspath(path)}).") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise error(f"{label} is a loop of symbolic links.") from None
        raise error(f"{label} cannot be read: {err.strerror or err}.") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{label} is a directory, not a file.")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a named pipe" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
                else "not a regular file")
        raise error(f"{label} is {kind}; only regular files are read.")
    if max_bytes is not None and st.st_size > max_bytes:
        from .matrices import _format_bytes  # noqa: PLC0415
        raise error(f"{label} is {_format_bytes(st.st_size)}, more than this machine can load "
                    f"({_format_bytes(max_bytes)} at most now).")
    return st
