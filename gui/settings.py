"""What the window remembers between sessions, kept in a QSettings.

The configuration is one JSON string (a dict from
:meth:`gui.config_panel.ConfigPanel.state`), so that nested state (per-variant
parameter choices) survives every QSettings backend unchanged.  Window geometry and
dock/splitter layout are Qt's own byte blobs; recent files are a plain list.
"""
from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings

ORGANIZATION = "matmul-lab"
APPLICATION = "Matmul Lab"
MAX_RECENT = 8
#: Bumped when the layout of saved state changes incompatibly.
STATE_VERSION = 1


def default_settings() -> QSettings:
    """The user's settings store (registry, plist or ini, as the OS prefers)."""
    return QSettings(ORGANIZATION, APPLICATION)


def ini_settings(path: str | Path) -> QSettings:
    """An isolated ini-file store (tests, portable installs)."""
    return QSettings(str(path), QSettings.Format.IniFormat)


class AppSettings:
    """Typed access to the window's QSettings."""

    def __init__(self, qsettings: QSettings):
        self.q = qsettings

    # --- configuration ----------------------------------------------------------------

    def load_config(self) -> dict:
        """The last saved configuration, or ``{}`` when none (or unreadable)."""
        raw = self.q.value("config/state", "")
        if not raw:
            return {}
        try:
            data = json.loads(str(raw))
        except ValueError:
            return {}  # a hand-edited or truncated file must not stop the app
        return data if isinstance(data, dict) else {}

    def save_config(self, state: dict) -> None:
        self.q.setValue("config/state", json.dumps(state))
        self.q.setValue("config/version", STATE_VERSION)

    # --- window --------------------------------------------------------------------

    def _bytes(self, key: str) -> QByteArray | None:
        val = self.q.value(key)
        return val if isinstance(val, QByteArray) and not val.isEmpty() else None

    def geometry(self) -> QByteArray | None:
        return self._bytes("window/geometry")

    def window_state(self) -> QByteArray | None:
        return self._bytes("window/state")

    def splitter_state(self) -> QByteArray | None:
        return self._bytes("window/splitter")

    def save_window(self, geometry: QByteArray, state: QByteArray, splitter: QByteArray) -> None:
        self.q.setValue("window/geometry", geometry)
        self.q.setValue("window/state", state)
        self.q.setValue("window/splitter", splitter)

    def value(self, key: str, default=None):
        return self.q.value(key, default)

    def set_value(self, key: str, value) -> None:
        self.q.setValue(key, value)

    # --- recent files --------------------------------------------------------------

    def recent_files(self) -> list[str]:
        val = self.q.value("recent/files", [])
        if isinstance(val, str):  # QSettings returns a 1-item list as a bare string
            val = [val]
        return [str(v) for v in (val or []) if v]

    def add_recent(self, path: str | Path) -> list[str]:
        path = str(Path(path))
        files = [path] + [f for f in self.recent_files() if f != path]
        files = files[:MAX_RECENT]
        self.q.setValue("recent/files", files)
        return files

    def clear_recent(self) -> None:
        self.q.setValue("recent/files", [])

    def sync(self) -> None:
        self.q.sync()
