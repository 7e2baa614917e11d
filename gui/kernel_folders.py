"""The user's kernel folders in the window: read them, watch them, say what is wrong.

The engine side (:mod:`engine.kernels.user_kernels`) registers the files; this object keeps the
list of folders (the user kernel folder plus the ones added, remembered in the
settings), re-reads them when a file appears, changes or goes (``QFileSystemWatcher``),
and tells the window through :attr:`KernelFolders.changed`.  While a run is going the
re-read waits for its end (:meth:`hold`), so a sweep never sees its variants swapped.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QFileSystemWatcher, QObject, QTimer, Signal

from engine.kernels import registry, user_kernels
from engine.kernels.user_kernels import Loaded

from .settings import AppSettings

#: A burst of file events (an editor's save: write, rename, chmod) makes one re-read.
SETTLE_MS = 250


class KernelFolders(QObject):
    """The folders the user's kernels come from.

    Signals
    -------
    changed(object)
        The user variants were re-read; the argument is the :class:`Loaded` result.
    """

    changed = Signal(object)

    def __init__(self, settings: AppSettings, parent=None):
        super().__init__(parent)
        self.settings = settings
        self.added: list[str] = list(settings.kernel_folders())
        #: Kernel files opened from elsewhere (the editor): read like the folders' files.
        self.extra_files: list[str] = []
        self.loaded = Loaded()
        self._held = False
        self._pending = False
        self.watcher = QFileSystemWatcher(self)
        self.watcher.directoryChanged.connect(self._soon)
        self.watcher.fileChanged.connect(self._soon)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(SETTLE_MS)
        self._timer.timeout.connect(self.reload)

    # --- the folders ------------------------------------------------------------------

    @staticmethod
    def user_folder() -> Path:
        return user_kernels.user_kernel_dir()

    def folders(self) -> list[Path]:
        return [self.user_folder(), *map(Path, self.added)]

    def add_folder(self, folder: str | Path) -> Loaded:
        folder = str(registry.resolved(folder))
        if folder not in self.added and Path(folder) != registry.resolved(self.user_folder()):
            self.added.append(folder)
            self.settings.set_kernel_folders(self.added)
        return self.reload()

    def remove_folder(self, folder: str | Path) -> Loaded:
        folder = str(registry.resolved(folder))
        self.added = [f for f in self.added if f != folder]
        self.settings.set_kernel_folders(self.added)
        return self.reload()

    def add_file(self, path: str | Path) -> None:
        """Read a kernel file outside the folders too (one the editor opened)."""
        if registry.is_builtin_file(path):
            return                    # a built-in stays a built-in
        path = str(registry.resolved(path))
        if path not in self.extra_files and not any(
                Path(path).parent == registry.resolved(f) for f in self.folders()):
            self.extra_files.append(path)

    # --- reading ----------------------------------------------------------------------

    def hold(self, held: bool) -> None:
        """While held (a run is going) changes wait; released, a waiting re-read runs."""
        self._held = held
        if not held and self._pending:
            self._soon()

    def _soon(self, *_):
        self._pending = True
        if not self._held:
            self._timer.start()

    def reload(self) -> Loaded:
        """Re-read every folder now (synchronous: headers only, no compiling)."""
        self._timer.stop()
        self._pending = False
        self.loaded = user_kernels.reload(self.folders(), self.extra_files)
        self._watch()
        self.changed.emit(self.loaded)
        return self.loaded

    def problems(self) -> list[tuple[str, str]]:
        """``(path, "line N: message")`` for each file that could not be used."""
        return [(str(e.path), f"line {e.line}: {e.message}" if e.line else e.message)
                for e in self.loaded.errors]

    def _watch(self) -> None:
        want = [str(f) for f in self.folders() if f.is_dir()]
        want += [str(p) for p in self.loaded.files] + self.extra_files
        have = set(self.watcher.files()) | set(self.watcher.directories())
        gone = [p for p in have if p not in want]
        if gone:
            self.watcher.removePaths(gone)
        new = [p for p in dict.fromkeys(want) if p not in have and Path(p).exists()]
        if new:
            self.watcher.addPaths(new)
