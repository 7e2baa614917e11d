"""The user's kernels: a folder in the platform's user-data directory plus folders added.

Kernel files (``.cu``/``.cl`` with a header, :mod:`engine.kernels.kernel_file`) in these folders
register as variants with the ``user`` role, next to the built-ins, so they run in
sweeps, autotune, charts and results files like any other variant.

The user folder is ``<user data>/kernels``: ``~/.local/share/matmul-lab/kernels`` on
Linux, or ``$MATMUL_LAB_DATA/kernels`` where that variable is set (tests set it).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from engine.kernels import registry
from engine.kernels.kernel_file import KernelFileError

#: Overrides the user-data folder (the journal and the user kernels live under it).
DATA_DIR_ENV = "MATMUL_LAB_DATA"


def data_dir() -> Path:
    """The user-data folder: ``$MATMUL_LAB_DATA``, else the platform's own
    (``~/.local/share/matmul-lab`` on Linux)."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    from platformdirs import user_data_dir  # noqa: PLC0415  (only when asked)
    return Path(user_data_dir("matmul-lab", appauthor=False))


def user_kernel_dir() -> Path:
    """Where the user's own kernels live (created when first saved into)."""
    return data_dir() / "kernels"


@dataclass
class Loaded:
    """What :func:`reload` found.

    Attributes
    ----------
    names
        Variants registered, in file order.
    errors
        One :class:`~engine.kernels.kernel_file.KernelFileError` per file that could not be
        used (``problems`` has them as ``path:line: message`` lines).
    files
        Every kernel file looked at (good or bad), for a watcher.
    by_file
        Resolved file path → the variant it made (files that failed are absent).
    """

    names: list[str] = field(default_factory=list)
    errors: list[KernelFileError] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    by_file: dict[Path, str] = field(default_factory=dict)

    @property
    def problems(self) -> list[str]:
        return [str(e) for e in self.errors]

    def problem_of(self, path: Path) -> str | None:
        """The problem reported for ``path``, or None."""
        path = registry.resolved(path)
        return next((str(e) for e in self.errors if registry.resolved(e.path) == path), None)


def unload_user_kernels() -> list[str]:
    """Remove every ``user`` variant from the registry; returns their names."""
    gone = [n for n, v in registry.REGISTRY.items() if v.role == "user"]
    for n in gone:
        del registry.REGISTRY[n]
    return gone


def reload(folders: Iterable[Path | str], files: Iterable[Path | str] = ()) -> Loaded:
    """Register the kernel files of ``folders`` (missing ones are skipped) and ``files``,
    replacing every user variant registered before (a file deleted or renamed since
    leaves no stale variant behind)."""
    seen: set[Path] = set()
    paths: list[Path] = []
    for folder in folders:
        for p in registry.kernel_files_in(Path(folder)):
            if registry.resolved(p) not in seen:
                seen.add(registry.resolved(p))
                paths.append(p)
    for p in map(Path, files):
        if p.is_file() and registry.resolved(p) not in seen:
            seen.add(registry.resolved(p))
            paths.append(p)
    unload_user_kernels()
    out = Loaded(files=paths)
    if not paths:
        return out
    out.names, out.errors = registry.register_kernel_files(paths)
    for name in out.names:
        for h in registry.REGISTRY[name].headers:
            out.by_file[registry.resolved(h.path)] = name
    return out


def kernel_files_of(names: Iterable[str]) -> tuple[str, ...]:
    """The kernel files an engine must register to run the user variants among ``names``
    (built-ins need none: every engine has them)."""
    out: list[str] = []
    for name in names:
        v = registry.REGISTRY.get(name)
        if v is None or v.role != "user":
            continue
        for h in v.headers:
            p = str(registry.resolved(h.path))
            if p not in out:
                out.append(p)
    return tuple(out)
