"""Reading and writing the user's files without hanging, tearing or following strange links.

Reading: a named pipe blocks ``open()`` until a writer comes (forever, usually), a device
never ends, a loop of symbolic links fails late with an unclear message. Every reader of
user files (kernel files and their includes, matrices, results, the autotune cache,
journals, settings, profile reports) goes through :func:`check_regular_file` or
:func:`read_bytes` / :func:`read_text`, which also open without blocking and bound the size.

Writing: :func:`write_atomic` writes a temporary file beside the target and renames it
over, so a full disk or a crash leaves the earlier file whole; it never writes through a
symbolic link unless the caller says the link was the user's choice.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from engine.common.units import format_bytes

#: The most a text file the app reads for itself may hold (kernel files, includes,
#: caches, journals): far above any real one, far below what would exhaust memory.
TEXT_FILE_LIMIT = 16 * 1024**2


def _kind_of(mode: int) -> str:
    return ("a named pipe" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file")


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
    except ValueError as err:       # an embedded NUL in the name
        raise error(f"{label} is not a usable file name ({err}).") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{label} is a directory, not a file.")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{label} is {_kind_of(st.st_mode)}; only regular files are read.")
    if max_bytes is not None and st.st_size > max_bytes:
        raise error(f"{label} is {format_bytes(st.st_size)}, more than this machine can load "
                    f"({format_bytes(max_bytes)} at most now).")
    return st


def read_bytes(path: Path | str, label: str, error: type[Exception] = ValueError,
               max_bytes: int = TEXT_FILE_LIMIT) -> bytes:
    """The whole content of a regular file, or ``error`` (never a hang, never more than
    ``max_bytes``): the file is checked, then opened without blocking and checked again,
    so a pipe swapped in between cannot stall the read."""
    check_regular_file(Path(path), label, error, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise error(f"{label} is a loop of symbolic links.") from None
        raise error(f"{label} cannot be read: {err.strerror or err}.") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{label} is {_kind_of(st.st_mode)}; only regular files are read.")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:     # grew after the check
                raise error(f"{label} is more than {format_bytes(max_bytes)}; it is not read.")
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as err:
        raise error(f"{label} cannot be read: {err.strerror or err}.") from None
    finally:
        os.close(fd)


def read_text(path: Path | str, label: str, error: type[Exception] = ValueError,
              max_bytes: int = TEXT_FILE_LIMIT, encoding: str = "utf-8") -> str:
    """:func:`read_bytes` decoded; text that is not ``encoding`` is ``error`` too."""
    data = read_bytes(path, label, error, max_bytes)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise error(f"{label} is not {encoding} text (byte {err.start}, line {line}).") from None


def write_atomic(path: Path | str, data: bytes | str, label: str,
                 error: type[Exception] = OSError, follow_links: bool = False,
                 encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename:
    a failure (a full disk, a read-only folder) leaves the earlier file as it was and
    raises ``error`` with the reason. A symbolic link at ``path`` is refused unless
    ``follow_links`` (the user chose the link, e.g. opened a kernel through it): then its
    target is replaced. Returns the path written. The earlier file's permissions are kept."""
    path = Path(path)
    if isinstance(data, str):
        data = data.encode(encoding)
    try:
        is_link = path.is_symlink()
    except (OSError, ValueError) as err:
        raise error(f"{label} cannot be written: {err}.") from None
    if is_link:
        if not follow_links:
            raise error(f"{label} is a symbolic link ({path} → {os.readlink(path)}); it is not "
                        "written through. Remove the link or choose another name.")
        try:
            path = path.resolve(strict=False)
        except (OSError, RuntimeError):
            raise error(f"{label} is a loop of symbolic links.") from None
    mode = None
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{label} is a folder ({path}); choose a file name.")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{label} is {_kind_of(st.st_mode)}; only regular files are written.")
        mode = stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        pass
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise error(f"{label} is a loop of symbolic links.") from None
        raise error(f"{label} cannot be written: {err.strerror or err}.") from None
    folder = path.parent
    existed = mode is not None
    # The temporary name is short (a name near the 255-byte limit still fits) and opened
    # with 0666, which the umask trims as open() would: no process-wide umask change.
    for _ in range(100):
        tmp = str(folder / f".{path.name[:32]}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                         0o666 if mode is None else mode)
            break
        except FileExistsError:
            continue
        except OSError as err:
            raise error(f"{label} cannot be written in {folder}: {err.strerror or err}.") from None
    else:
        raise error(f"{label} cannot be written in {folder}: no free temporary name.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)         # the earlier file's mode, whatever the umask
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise error(f"{label} was not written ({err.strerror or err}); "
                    + ("the earlier file is unchanged." if existed else "nothing was left behind.")) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
