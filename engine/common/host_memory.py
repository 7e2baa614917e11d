"""The memory this process may still allocate on the host: what the OS says is
available, this process's own cgroup (v1 and v2) and its resource limits (RLIMIT_AS,
RLIMIT_DATA), the smallest of them with what sets it."""
from __future__ import annotations

import os
import re
import resource
from dataclasses import dataclass
from pathlib import Path

from engine.common.files import read_text

#: What the OS says is available (psutil), as a :class:`HostLimit` names it.
MACHINE_MEMORY = "the memory available on this machine"


#: A cgroup limit at or above this is "no limit" (v1 writes 2^63 rounded to a page).
UNLIMITED = 1 << 60


@dataclass(frozen=True)
class HostLimit:
    """One bound on the memory this process may still allocate."""

    #: What sets it, in the user's words (``the cgroup limit of /user.slice``, ``RLIMIT_AS``).
    what: str
    #: Bytes left under it now.
    room: int


def _read(path: Path) -> str | None:
    try:
        return read_text(path, str(path), max_bytes=1 << 20)
    except ValueError:
        return None


def _unescape(field: str) -> str:
    """A mountinfo path field: spaces and tabs are written as octal escapes (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _memory_hierarchies(root: Path) -> list[tuple[str, Path, Path]]:
    """(``v2`` or ``v1``, this process's own memory cgroup folder, the mount's folder) for
    each hierarchy that controls memory, from ``/proc/self/cgroup`` and
    ``/proc/self/mountinfo`` under ``root``. A process's limit is its own cgroup's (and
    its ancestors'), not the root's: outside a cgroup namespace the root is the host's."""
    own = _read(root / "proc/self/cgroup")
    if own is None:
        return []
    paths: dict[str, str] = {}
    for line in own.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _hid, controllers, cg = parts
        if controllers == "" and parts[0] == "0":
            paths.setdefault("v2", cg)
        elif "memory" in controllers.split(","):
            paths["v1"] = cg
    mounts: dict[str, tuple[Path, str]] = {}
    for line in (_read(root / "proc/self/mountinfo") or "").splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 1:
            continue
        fstype = tail[0]
        opts = tail[2].split(",") if len(tail) > 2 else []
        version = ("v2" if fstype == "cgroup2" else
                   "v1" if fstype == "cgroup" and "memory" in opts else None)
        if version and version not in mounts:
            mounts[version] = (root / _unescape(fields[4]).lstrip("/"), _unescape(fields[3]))
    defaults = {"v2": root / "sys/fs/cgroup", "v1": root / "sys/fs/cgroup/memory"}
    out = []
    for version in ("v2", "v1"):
        if version not in paths:
            continue
        mount, mount_root = mounts.get(version, (defaults[version], "/"))
        cg = paths[version]
        rel = os.path.relpath(cg, mount_root) if cg.startswith(mount_root) else "."
        own_dir = mount if rel in (".", "") or rel.startswith("..") else mount / rel
        if not own_dir.is_dir():       # a path from outside this mount namespace's view
            own_dir = mount
        out.append((version, own_dir, mount))
    return out


def cgroup_limits(root: Path = Path("/")) -> list[HostLimit]:
    """The memory limits of this process's own cgroup and each of its ancestors (cgroup v2
    ``memory.max``, v1 ``memory.limit_in_bytes``), each with its room: the limit less the
    usage, where the usage leaves out page cache the kernel can drop (``inactive_file``)."""
    files = {"v2": ("memory.max", "memory.current", "inactive_file"),
             "v1": ("memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file")}
    out: list[HostLimit] = []
    for version, folder, mount in _memory_hierarchies(root):
        limit_file, usage_file, cache_key = files[version]
        while True:
            limit, usage = _read(folder / limit_file), _read(folder / usage_file)
            if limit is not None and usage is not None and limit.strip().isdigit() \
                    and usage.strip().isdigit() and int(limit) < UNLIMITED:
                cache = 0
                for line in (_read(folder / "memory.stat") or "").splitlines():
                    key, _, value = line.partition(" ")
                    if key == cache_key and value.strip().isdigit():
                        cache = int(value)
                used = max(int(usage) - cache, 0)
                where = "/" + folder.relative_to(mount).as_posix() if folder != mount else "/"
                out.append(HostLimit(f"the memory limit of cgroup {where}",
                                     max(int(limit) - used, 0)))
            if folder == mount or folder.parent == folder:
                break
            folder = folder.parent
    return out


def rlimit_limits(root: Path = Path("/"), getrlimit=resource.getrlimit) -> list[HostLimit]:
    """This process's address-space and data-segment limits (``RLIMIT_AS``, ``RLIMIT_DATA``),
    each with its room: the limit less what is mapped now (``VmSize``, ``VmData``)."""
    status = _read(root / "proc/self/status") or ""
    sizes = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        parts = value.split()
        if parts and parts[0].isdigit():
            sizes[key] = int(parts[0]) * 1024          # /proc writes kB
    out = []
    for name, key in (("RLIMIT_AS", "VmSize"), ("RLIMIT_DATA", "VmData")):
        soft, _hard = getrlimit(getattr(resource, name))
        if soft != resource.RLIM_INFINITY and soft >= 0:
            out.append(HostLimit(f"this process's {name} limit",
                                 max(soft - sizes.get(key, 0), 0)))
    return out


def host_limit(root: Path = Path("/")) -> HostLimit:
    """The tightest bound on what this process can still allocate: the OS's available memory
    (psutil), its own cgroup's limits, its resource limits."""
    try:
        import psutil  # noqa: PLC0415
        avail = int(psutil.virtual_memory().available)
    except ImportError:                         # psutil is a requirement; be safe anyway
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError):
            avail = 1 << 34
    bounds = [HostLimit(MACHINE_MEMORY, avail),
              *cgroup_limits(root), *rlimit_limits(root)]
    return min(bounds, key=lambda b: b.room)


def host_available_bytes() -> int:
    """Memory this process can still allocate (:func:`host_limit`)."""
    return host_limit().room
