"""Kernel builds kept on disk: a second start of the app, an engine process or a test
worker finds the cubins (and ptxas reports) an earlier one built, instead of running nvcc.

One file per build, named by a SHA-256 of everything the build read (the caller's key);
written through a temporary file and a rename, so processes share the folder safely and
a reader never sees half an entry. An entry that does not check out (truncated, foreign,
bit-flipped) is a miss: it is removed and built again. Failed builds are never stored.
The folder is ``cubins/`` in platformdirs' user cache folder, or in ``MATMUL_LAB_CACHE``
(``off`` or empty: no disk cache); beyond :data:`MAX_BYTES` or :data:`MAX_ENTRIES` the entries
used longest ago go.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.common.files import read_bytes, write_atomic

#: The environment variable that moves the lab's cache folder (autotune's too) or turns
#: the cubin cache off ("off", "").
ENV = "MATMUL_LAB_CACHE"
#: Sizes beyond which the entries used longest ago are removed (a ladder sweep is ~500
#: builds of 10-100 kB).
MAX_BYTES = 500 * 2**20
MAX_ENTRIES = 5000
#: A temporary file older than this was left by a writer that died: removed.
STALE_TMP_S = 3600.0

_MAGIC = b"matmul-lab cubin cache 1\n"
_HEADER = struct.Struct(">QQ32s")      # cubin bytes, log bytes, SHA-256 of both
_SUFFIX = ".cubin-entry"
_LOCK_SUFFIX = ".lock"
#: How often a process waiting for another's build of the same kernel looks again.
_LOCK_POLL_S = 0.05


@dataclass(frozen=True)
class CachedBuild:
    cubin: bytes
    log: str


def digest(*parts) -> str:
    """The entry name of a build described by ``parts`` (str, bytes, numbers, None and
    tuples of them: their repr is exact and stable across processes)."""
    return hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


def default_folder() -> Path | None:
    """``cubins/`` in the lab's cache folder: the one ``MATMUL_LAB_CACHE`` names (which
    autotune.json shares; a path ending in ``.json`` is that file, its folder is used),
    else the user's cache folder (platformdirs). None where the variable says ``off`` or
    is empty."""
    value = os.environ.get(ENV)
    if value is not None:
        value = value.strip()
        if value.lower() in ("", "off"):
            return None
        folder = Path(value).expanduser()
        return (folder.parent if folder.suffix == ".json" else folder) / "cubins"
    import platformdirs  # noqa: PLC0415  (only where a build needs it)
    return Path(platformdirs.user_cache_dir("matmul-lab", appauthor=False)) / "cubins"


class BuildCache:
    """The entries of one folder. Every method is safe against other processes using the
    same folder and never raises for a file-system reason: the cache is an optimisation,
    a build goes on without it."""

    def __init__(self, folder: Path, max_bytes: int = MAX_BYTES,
                 max_entries: int = MAX_ENTRIES):
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self.max_entries = max_entries

    @classmethod
    def from_env(cls) -> BuildCache | None:
        folder = default_folder()
        return cls(folder) if folder is not None else None

    def _path(self, key: str) -> Path:
        return self.folder / (key + _SUFFIX)

    def get(self, key: str) -> CachedBuild | None:
        """The build stored under ``key``, or None (none, or one that does not check out:
        then it is removed, so that the next build replaces it)."""
        path = self._path(key)
        try:
            data = read_bytes(path, "a cached build", OSError, self.max_bytes)
        except OSError:
            return None           # none there (or unreadable): a miss
        entry = _decode(data)
        if entry is None:
            path.unlink(missing_ok=True)
            return None
        try:
            os.utime(path)        # used now: eviction goes by last use
        except OSError:
            pass
        return entry

    def put(self, key: str, cubin: bytes, log: str) -> bool:
        """Store one successful build; False where the folder cannot take it."""
        body = log.encode("utf-8", "surrogatepass")
        data = (_MAGIC + _HEADER.pack(len(cubin), len(body), hashlib.sha256(cubin + body).digest())
                + cubin + body)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            write_atomic(self._path(key), data, "a cached build")
        except OSError:
            return False
        self.evict()
        return True

    @contextlib.contextmanager
    def building(self, key: str, wait_s: float) -> Iterator[None]:
        """Hold the build of ``key`` against other processes for the time of the block:
        two test workers or engines that need the same kernel at once run nvcc once, the
        second waiting (at most ``wait_s``, then it builds too) and finding the entry. A
        lock ends with its process; where none can be taken the block runs unlocked."""
        try:
            import fcntl  # noqa: PLC0415  (POSIX only)
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.folder / (key + _LOCK_SUFFIX), os.O_RDWR | os.O_CREAT, 0o666)
        except (ImportError, OSError):
            yield
            return
        try:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(_LOCK_POLL_S)
                except OSError:
                    break
            yield
        finally:
            os.close(fd)          # releases the lock

    def evict(self) -> None:
        """Remove the entries used longest ago until both bounds hold; temporary files
        of writers that died, and old build locks, go too."""
        entries, now = [], time.time()
        try:
            with os.scandir(self.folder) as it:
                for e in it:
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue          # removed by another process meanwhile
                    if e.name.endswith(_SUFFIX):
                        entries.append((st.st_mtime, st.st_size, e.path))
                    elif e.name.endswith((".tmp", _LOCK_SUFFIX)) and now - st.st_mtime > STALE_TMP_S:
                        _remove(e.path)
        except OSError:
            return
        total, count = sum(size for _t, size, _p in entries), len(entries)
        for _mtime, size, path in sorted(entries):
            if total <= self.max_bytes and count <= self.max_entries:
                break
            _remove(path)
            total, count = total - size, count - 1


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _decode(data: bytes) -> CachedBuild | None:
    head = len(_MAGIC) + _HEADER.size
    if len(data) < head or not data.startswith(_MAGIC):
        return None
    n_cubin, n_log, sha = _HEADER.unpack_from(data, len(_MAGIC))
    if head + n_cubin + n_log != len(data):
        return None
    payload = data[head:]
    if hashlib.sha256(payload).digest() != sha:
        return None
    try:
        log = payload[n_cubin:].decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    return CachedBuild(payload[:n_cubin], log)
