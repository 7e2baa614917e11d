"""What the window remembers between sessions, kept in a QSettings, read field by field.

The configuration is one JSON string (a dict from
:meth:`gui.config_panel.ConfigPanel.state`), so that nested state (per-variant
parameter choices) survives every QSettings backend unchanged.  Window geometry and
dock/splitter layout are Qt's own byte blobs; recent files are a plain list.

A settings file can be edited by hand, truncated, or come from another version of the
app, so nothing read here is trusted: every value is checked against what the window
can use (:func:`clean_config`, :meth:`AppSettings.flag`, ...).  A bad value falls back
to its default and adds a line to :attr:`AppSettings.problems`, which the window shows
in its Log.  Before Qt reads an ini file, :func:`screen_settings_file` keeps out what
Qt itself cannot read safely: anything but a regular file, a file far larger than
settings can be, and serialized objects (``@Variant(...)``), which PySide rebuilds with
``pickle`` (an exception at an unpredictable later call, or code run from the file).
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QSettings, QStandardPaths

from engine.kernels import registry
from engine.measure.backends import BACKENDS
from engine.common.files import check_regular_file, read_bytes, write_atomic
from engine.run.dispatch import MODES as DEVICE_MODES
from engine.inputs.matrices import DISTRIBUTIONS
from engine.run.runner import BUDGET_RANGE, REPEATS_RANGE, SEED_RANGE, WARMUP_RANGE
from engine.measure.conditions import ClockMode
from engine.measure.timing import NOISE_PCT_RANGE

ORGANIZATION = "matmul-lab"
APPLICATION = "Matmul Lab"
MAX_RECENT = 8
#: Bumped when the layout of saved state changes incompatibly.
STATE_VERSION = 1

#: The app writes a few kilobytes; a settings file far beyond this is not one of ours,
#: and Qt would read all of it into memory at start.
MAX_SETTINGS_FILE_BYTES = 4 << 20
#: Qt's geometry and dock-state blobs are a few hundred bytes.
MAX_BLOB_BYTES = 64 << 10
#: The configuration JSON is a few kilobytes (variant choices included).
MAX_CONFIG_JSON_CHARS = 256 << 10
#: Longest path or address taken from the settings.
MAX_TEXT_CHARS = 4096
#: Longest sizes text taken from the settings (the editor flags bad text inline).
MAX_SIZES_CHARS = 10_000
#: Device indices a saved choice may name (more than any machine has).
MAX_DEVICE_INDEX = 1023


# --- opening a store ---------------------------------------------------------------


def default_settings() -> QSettings:
    """The user's settings store (registry, plist or ini, as the OS prefers).

    Where the store is an ini file (Linux and other Unixes), the file is screened first
    (:func:`screen_settings_file`); problems found are kept for :class:`AppSettings`.
    """
    problems: list[str] = []
    if not sys.platform.startswith(("win", "darwin")):
        # Qt's own rule for the native (ini) store on Unix; constructing a QSettings to
        # ask it would already read the file.
        config_dir = QStandardPaths.writableLocation(
            QStandardPaths.StandardLocation.GenericConfigLocation)
        if config_dir:
            path = Path(config_dir) / ORGANIZATION / f"{APPLICATION}.conf"
            usable, problems = screen_settings_file(path)
            if usable != path:
                return _opened(QSettings(str(usable), QSettings.Format.IniFormat), problems)
    return _opened(QSettings(ORGANIZATION, APPLICATION), problems)


def ini_settings(path: str | Path) -> QSettings:
    """An isolated ini-file store (tests, portable installs), screened first."""
    usable, problems = screen_settings_file(Path(path))
    return _opened(QSettings(str(usable), QSettings.Format.IniFormat), problems)


def _opened(q: QSettings, problems: list[str]) -> QSettings:
    """Attach the screening's problems and surface what Qt's parse left behind.

    PySide reports an exception raised while Qt parsed the file (a stored object it could
    not rebuild) at the *next* call into it, wherever that is; one call here takes it.
    """
    try:
        q.allKeys()
    except Exception as exc:  # noqa: BLE001  (whatever the stored object raised)
        problems.append(f"settings: a stored value could not be read ({type(exc).__name__}: "
                        f"{exc}); it is ignored")
    status = q.status()
    if status == QSettings.Status.FormatError:
        problems.append(f"settings: {q.fileName()} is not a valid settings file; "
                        "what could not be read uses its default")
    elif status == QSettings.Status.AccessError:
        problems.append(f"settings: {q.fileName()} cannot be read or written")
    q.opening_problems = problems   # read by AppSettings
    return q


def screen_settings_file(path: Path) -> tuple[Path, list[str]]:
    """Make ``path`` safe for Qt to read; returns the path to use and what was wrong.

    A missing file is fine (Qt creates it).  Something that is not a regular file (a
    named pipe would block the start forever) is left alone and a fresh file in a
    temporary folder is used instead.  A file larger than
    :data:`MAX_SETTINGS_FILE_BYTES` is moved aside (``NAME.too-large``).  Lines holding
    a serialized object are removed from the file (the app never writes one).
    """
    try:
        os.stat(path)
    except FileNotFoundError:
        return path, []
    except (OSError, ValueError):
        pass                    # a link loop, no permission: check_regular_file words it
    try:
        st = check_regular_file(path, f"settings: {path}", _Unreadable)
    except _Unreadable as exc:
        return _scratch_settings(str(exc).rstrip("."))
    if st.st_size > MAX_SETTINGS_FILE_BYTES:
        aside = path.with_name(path.name + ".too-large")
        n = 1
        while os.path.lexists(aside):       # an earlier one set aside is kept too
            n += 1
            aside = path.with_name(f"{path.name}.too-large-{n}")
        try:
            os.replace(path, aside)
        except OSError as exc:
            return _scratch_settings(f"settings: {path} is {st.st_size >> 20} MiB, not a "
                                     f"settings file, and cannot be moved aside ({exc})")
        return path, [f"settings: {path} was {st.st_size >> 20} MiB, far more than settings "
                      f"take; moved to {aside.name}, starting from defaults"]
    try:
        # Opened without blocking: a pipe swapped in since the stat must not hang the start.
        data = read_bytes(path, f"settings: {path}", _Unreadable, MAX_SETTINGS_FILE_BYTES)
    except _Unreadable as exc:
        return _scratch_settings(str(exc).rstrip("."))
    kept, dropped = [], []
    section = ""
    for line in _logical_lines(data):
        head = line.strip()
        if head.startswith(b"[") and head.endswith(b"]"):
            section = head[1:-1].decode("utf-8", "replace")
        if _holds_stored_object(line):
            key = line.split(b"=", 1)[0].strip().decode("utf-8", "replace")
            dropped.append((f"{section}/{key}" if section and section != "General" else key)[:80])
        else:
            kept.append(line)
    if not dropped:
        return path, []
    problems = [f"settings: {key or '(a line)'} held a stored object, which this app never "
                "writes; removed" for key in dropped]
    try:
        # Followed through a link: the settings file is where the user keeps it (a
        # dotfiles link), and Qt writes it through the link too.
        write_atomic(path, b"\n".join(kept) + b"\n", f"settings: {path}", _Unreadable,
                     follow_links=True)
    except _Unreadable as exc:
        return _scratch_settings(problems[0] + f", but it cannot be rewritten ({exc})")
    return path, problems


class _Unreadable(Exception):
    """engine.common.files' message for a settings file that cannot be read or rewritten."""


def _scratch_settings(problem: str) -> tuple[Path, list[str]]:
    """A fresh settings file for this session only, when the real one cannot be used."""
    folder = Path(tempfile.mkdtemp(prefix="matmul-lab-settings-"))
    return folder / "settings.ini", [problem + "; settings are not kept this session"]


def _logical_lines(data: bytes) -> list[bytes]:
    """The file's lines, a line ending in a backslash joined with the next (Qt does)."""
    out: list[bytes] = []
    pending = b""
    for raw in data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n"):
        line = pending + raw
        trailing = len(line) - len(line.rstrip(b"\\"))
        if trailing % 2:
            pending = line + b"\n"
            continue
        pending = b""
        out.append(line)
    if pending:
        out.append(pending.rstrip(b"\n"))
    while out and not out[-1]:
        out.pop()
    return out


_HEX = re.compile(r"\\[xX]([0-9a-fA-F]+)")
_OCT = re.compile(r"\\([0-7]+)")


def _holds_stored_object(line: bytes) -> bool:
    """Whether an ini line's value is (or lists) an ``@Variant(...)``, however escaped."""
    if b"=" not in line:
        return False
    value = line.split(b"=", 1)[1].decode("latin-1")

    def char(match: re.Match, base: int) -> str:
        code = int(match.group(1), base)
        return chr(code) if code <= sys.maxunicode else "\ufffd"

    text = _HEX.sub(lambda m: char(m, 16), value)
    text = _OCT.sub(lambda m: char(m, 8), text)
    text = text.replace("\\\n", "")
    # Conservative: any element starting with it, quoted or not, after a comma or not.
    return "@variant(" in text.lower().replace(" ", "")


# --- checking values -----------------------------------------------------------------


def _show(val: Any, limit: int = 60) -> str:
    text = repr(val)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _is_int(val: Any) -> bool:
    return isinstance(val, int) and not isinstance(val, bool)


def _is_text(val: Any, limit: int = MAX_TEXT_CHARS) -> bool:
    return isinstance(val, str) and len(val) <= limit and "\x00" not in val


def clean_config(state: Any) -> tuple[dict, list[str]]:
    """The fields of a saved configuration that the Configure panel can use, and a line
    for each one that it cannot (wrong type, out of range, unknown choice).

    The result holds only good fields; the panel keeps its default for the others.
    Keys this version does not know are ignored (a newer version may have written them).
    """
    problems: list[str] = []
    if not isinstance(state, dict):
        return {}, ["settings: config/state is not a JSON object; using the defaults"]
    out: dict[str, Any] = {}

    def bad(key: str, why: str) -> None:
        problems.append(f"settings: config {key} = {_show(state[key])} {why}; using the default")

    def choice(key: str, allowed) -> None:
        if key in state:
            if isinstance(state[key], str) and state[key] in allowed:
                out[key] = state[key]
            else:
                bad(key, f"is not one of {', '.join(allowed)}")

    def integer(key: str, low: int, high: int) -> None:
        if key in state:
            val = state[key]
            if _is_int(val) and low <= val <= high:
                out[key] = val
            else:
                bad(key, f"is not a whole number from {low} to {high}")

    def flag(key: str) -> None:
        if key in state:
            if isinstance(state[key], bool):
                out[key] = state[key]
            else:
                bad(key, "is not true or false")

    def text(key: str, limit: int = MAX_TEXT_CHARS) -> None:
        if key in state:
            if _is_text(state[key], limit):
                out[key] = state[key]
            else:
                bad(key, f"is not text of at most {limit} characters")

    choice("backend", BACKENDS)
    integer("device", 0, MAX_DEVICE_INDEX)
    if "devices" in state:
        devs = state["devices"]
        # Empty is what a window closed before its backends were probed saves.
        if (isinstance(devs, list) and len(devs) <= MAX_DEVICE_INDEX + 1
                and all(_is_int(d) and 0 <= d <= MAX_DEVICE_INDEX for d in devs)
                and len(set(devs)) == len(devs)):
            out["devices"] = devs
        else:
            bad("devices", "is not a list of distinct device numbers")
    choice("device_mode", DEVICE_MODES)
    flag("ray")
    text("ray_address", 512)
    if "variants" in state:
        variants = _clean_variants(state["variants"], problems)
        if variants is not None:
            out["variants"] = variants
    text("sizes", MAX_SIZES_CHARS)
    choice("dtype", registry.DTYPES)
    choice("mode", ("hot", "cold"))
    integer("warmup", *WARMUP_RANGE)
    integer("repeats", *REPEATS_RANGE)
    flag("use_budget")
    if "budget_s" in state:
        val = state["budget_s"]
        low, high = BUDGET_RANGE
        if (isinstance(val, (int, float)) and not isinstance(val, bool) and math.isfinite(val)
                and low <= val <= high):
            out["budget_s"] = float(val)
        else:
            bad("budget_s", f"is not a number of seconds from {low} to {high:g}")
    flag("use_noise")
    if "noise_pct" in state:
        val = state["noise_pct"]
        low, high = NOISE_PCT_RANGE
        if (isinstance(val, (int, float)) and not isinstance(val, bool) and math.isfinite(val)
                and low <= val <= high):
            out["noise_pct"] = float(val)
        else:
            bad("noise_pct", f"is not a per cent from {low:g} to {high:g}")
    choice("clock_lock", tuple(m.value for m in ClockMode))
    flag("verify")
    flag("autotune")
    flag("guess")
    if "inputs" in state:
        inputs = state["inputs"]
        if isinstance(inputs, dict):
            sub, more = clean_config_inputs(inputs)
            out["inputs"] = sub
            problems.extend(more)
        else:
            bad("inputs", "is not a JSON object")
    return out, problems


def clean_config_inputs(state: dict) -> tuple[dict, list[str]]:
    """The ``inputs`` part of :func:`clean_config`: random or files, distribution, seed,
    and the two file paths."""
    out: dict[str, Any] = {}
    problems: list[str] = []

    def bad(key: str, why: str) -> None:
        problems.append(f"settings: config inputs.{key} = {_show(state[key])} {why}; "
                        "using the default")

    for key, allowed in (("mode", ("random", "files")), ("dist", DISTRIBUTIONS)):
        if key in state:
            if isinstance(state[key], str) and state[key] in allowed:
                out[key] = state[key]
            else:
                bad(key, f"is not one of {', '.join(allowed)}")
    if "seed" in state:
        low, high = SEED_RANGE
        if _is_int(state["seed"]) and low <= state["seed"] <= high:
            out["seed"] = state["seed"]
        else:
            bad("seed", f"is not a whole number from {low} to {high}")
    for key in ("a", "b"):
        if key in state:
            if _is_text(state[key]):
                out[key] = state[key]
            else:
                bad(key, f"is not a file path of at most {MAX_TEXT_CHARS} characters")
    return out, problems


def _clean_variants(state: Any, problems: list[str]) -> dict | None:
    """Variant choices: ``{"checked": {name: bool}, "values": {name: {param: [int]}}}``
    (``"ticks"``: what the variants not named show, :class:`engine.kernels.registry.Ticks`;
    and ``"explicit": true``: the values are the user's own choices, see
    :meth:`gui.variant_tree.VariantTree.set_state`) with unknown variants, parameters and
    values dropped (said once, with a count); None when there are none at all."""
    if not isinstance(state, dict):
        problems.append(f"settings: config variants = {_show(state)} is not a JSON object; "
                        "using the default")
        return None
    dropped: list[str] = []
    checked: dict[str, bool] = {}
    raw_checked = state.get("checked", {})
    if isinstance(raw_checked, dict):
        for name, on in raw_checked.items():
            if name in registry.REGISTRY and isinstance(on, bool):
                checked[name] = on
            else:
                dropped.append(f"{_show(name, 30)}: {_show(on, 20)}")
    else:
        dropped.append(f"checked = {_show(raw_checked, 30)}")
    values: dict[str, dict[str, list[int]]] = {}
    raw_values = state.get("values", {})
    if isinstance(raw_values, dict):
        for name, params in raw_values.items():
            if name not in registry.REGISTRY or not isinstance(params, dict):
                dropped.append(f"values of {_show(name, 30)}")
                continue
            space = registry.REGISTRY[name].space
            chosen: dict[str, list[int]] = {}
            for pname, vals in params.items():
                if pname not in space or not isinstance(vals, list):
                    dropped.append(f"{name}.{_show(pname, 30)}")
                    continue
                good = sorted({v for v in vals if _is_int(v) and v in space[pname]})
                if len(good) != len(vals):
                    dropped.append(f"values of {name}.{pname} outside {list(space[pname])}")
                chosen[pname] = good
            values[name] = chosen
    else:
        dropped.append(f"values = {_show(raw_values, 30)}")
    if dropped:
        shown = "; ".join(dropped[:5]) + (f"; and {len(dropped) - 5} more" if len(dropped) > 5 else "")
        problems.append(f"settings: config variants: ignored {len(dropped)} unusable "
                        f"entr{'y' if len(dropped) == 1 else 'ies'} ({shown})")
    out: dict[str, Any] = {"checked": checked, "values": values}
    if state.get("explicit") is True:      # values hold the user's own choices only
        out["explicit"] = True
    ticks = state.get("ticks")      # absent: saved before the newcomer defaults
    if isinstance(ticks, str) and ticks in {t.value for t in registry.Ticks}:
        out["ticks"] = ticks
    elif ticks is not None:
        problems.append(f"settings: config variants.ticks = {_show(ticks)} is not one of "
                        f"{', '.join(t.value for t in registry.Ticks)}; ticking every variant "
                        "but the experiments")
    return out


def clean_chart_options(state: Any) -> tuple[dict, list[str]]:
    """Chart options (log axes, min–max bars, best per variant, tab, compare metric)."""
    if not isinstance(state, dict):
        return {}, [f"settings: charts/options_json = {_show(state)} is not a JSON object; "
                    "using the defaults"]
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key in ("log", "error_bars", "best"):
        if key in state:
            if isinstance(state[key], bool):
                out[key] = state[key]
            else:
                problems.append(f"settings: chart option {key} = {_show(state[key])} is not "
                                "true or false; using the default")
    for key in ("tab", "metric"):
        if key in state:
            if _is_text(state[key], 64):
                out[key] = state[key]
            else:
                problems.append(f"settings: chart option {key} = {_show(state[key])} is not a "
                                "name; using the default")
    return out, problems


def parse_flag(val: Any) -> bool | None:
    """A boolean as QSettings hands it back (``True``, ``"true"``, ``"1"``...), or None
    when it is none."""
    if isinstance(val, bool):
        return val
    if _is_int(val) and val in (0, 1):
        return bool(val)
    if isinstance(val, str) and val.strip().lower() in ("true", "1", "yes", "false", "0", "no"):
        return val.strip().lower() in ("true", "1", "yes")
    return None


# --- the store ---------------------------------------------------------------------


class AppSettings:
    """Typed, checked access to the window's QSettings.

    Attributes
    ----------
    problems
        One line per setting that could not be used (and so took its default), in the
        order found; the window logs them.  Each setting is reported once per session.
    on_problem
        Called with each line found from then on (the window sets it once it has logged
        the problems found at start).
    """

    def __init__(self, qsettings: QSettings):
        self.q = qsettings
        self.problems: list[str] = list(getattr(qsettings, "opening_problems", []))
        self.on_problem = None
        self._reported: set[str] = set()

    def _problem(self, key: str, text: str) -> None:
        if key not in self._reported:
            self._reported.add(key)
            self.problems.append(text)
            if self.on_problem is not None:
                self.on_problem(text)

    def _raw(self, key: str, default=None):
        """``q.value(key)``, or ``default`` when reading it raises (PySide rebuilding a
        stored object) — reported once."""
        try:
            val = self.q.value(key, default)
        except Exception as exc:  # noqa: BLE001
            self._problem(key, f"settings: {key} could not be read ({type(exc).__name__}); "
                               "using the default")
            return default
        return default if val is None else val

    def _text(self, key: str, limit: int) -> str | None:
        """A text value, or None when missing or unusable (reported)."""
        val = self._raw(key)
        if val is None or val == "":
            return None
        if _is_text(val, limit):
            return val
        self._problem(key, f"settings: {key} = {_show(val)} is not text of at most {limit} "
                           "characters; using the default")
        return None

    def _json_object(self, key: str, limit: int) -> dict | None:
        raw = self._text(key, limit)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            self._problem(key, f"settings: {key} is not valid JSON; using the defaults")
            return None
        if not isinstance(data, dict):
            self._problem(key, f"settings: {key} = {_show(data)} is not a JSON object; "
                               "using the defaults")
            return None
        return data

    # --- configuration ----------------------------------------------------------------

    def load_config(self) -> dict:
        """The last saved configuration with every unusable field left out, or ``{}``."""
        data = self._json_object("config/state", MAX_CONFIG_JSON_CHARS)
        if data is None:
            return {}
        clean, problems = clean_config(data)
        for line in problems:
            self._problem(line, line)
        return clean

    def save_config(self, state: dict) -> None:
        self.q.setValue("config/state", json.dumps(state))
        self.q.setValue("config/version", STATE_VERSION)

    def chart_options(self) -> dict:
        """Saved chart options, unusable ones left out."""
        data = self._json_object("charts/options_json", 64 << 10)
        if data is None:
            return {}
        clean, problems = clean_chart_options(data)
        for line in problems:
            self._problem(line, line)
        return clean

    def save_chart_options(self, state: dict) -> None:
        self.q.setValue("charts/options_json", json.dumps(state))

    def flag(self, key: str, default: bool = False) -> bool:
        """A saved true/false setting (``run/keep_previous``, ``view/dark``)."""
        val = self._raw(key)
        if val is None or val == "":
            return default
        parsed = parse_flag(val)
        if parsed is None:
            self._problem(key, f"settings: {key} = {_show(val)} is not true or false; "
                               f"using {str(default).lower()}")
            return default
        return parsed

    # --- window --------------------------------------------------------------------

    def _bytes(self, key: str) -> QByteArray | None:
        val = self._raw(key)
        if val is None or (isinstance(val, str) and not val):
            return None
        if not isinstance(val, QByteArray):
            self._problem(key, f"settings: {key} = {_show(val)} is not Qt's saved layout; "
                               "using the default")
            return None
        if val.isEmpty():
            return None
        if val.size() > MAX_BLOB_BYTES:
            self._problem(key, f"settings: {key} is {val.size()} bytes, far more than a saved "
                               "layout takes; using the default")
            return None
        return val

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
        """An unchecked value (for keys without a typed reader here)."""
        return self._raw(key, default)

    def set_value(self, key: str, value) -> None:
        self.q.setValue(key, value)

    def report_layout_problem(self, key: str, text: str) -> None:
        """The window found a saved layout Qt would not restore."""
        self._problem(key, f"settings: {key} {text}; using the default")

    # --- recent files and folders ----------------------------------------------------

    def _paths(self, key: str, what: str) -> list[str]:
        """A saved list of distinct paths; entries that are no path are dropped and said."""
        val = self._raw(key, [])
        if isinstance(val, str):  # QSettings returns a 1-item list as a bare string
            val = [val] if val else []
        if not isinstance(val, list):
            self._problem(key, f"settings: {key} = {_show(val)} is not a list of {what}s; "
                               "starting an empty list")
            return []
        out: list[str] = []
        bad = 0
        for v in val:
            if _is_text(v) and v:
                if v not in out:
                    out.append(v)
            else:
                bad += 1
        if bad:
            self._problem(key, f"settings: {key}: ignored {bad} "
                               + ("entry that is" if bad == 1 else "entries that are")
                               + f" not a {what} path")
        return out

    def recent_files(self) -> list[str]:
        """Saved recent files: distinct paths, at most :data:`MAX_RECENT`."""
        return self._paths("recent/files", "file")[:MAX_RECENT]

    def kernel_folders(self) -> list[str]:
        """Folders of kernel files the user added (the user kernel folder is not listed:
        it is always read)."""
        return self._paths("kernels/folders", "folder")

    def set_kernel_folders(self, folders) -> None:
        self.q.setValue("kernels/folders", [str(f) for f in folders])

    def add_recent(self, path: str | Path) -> list[str]:
        path = str(Path(path))
        files = [path] + [f for f in self.recent_files() if f != path]
        files = files[:MAX_RECENT]
        self.q.setValue("recent/files", files)
        return files

    def clear_recent(self) -> None:
        self.q.setValue("recent/files", [])

    def last_dir(self, kind: str) -> str:
        """The folder last used for ``kind`` (``results`` or ``export``), or ''."""
        return self._text(f"dirs/{kind}", MAX_TEXT_CHARS) or ""

    def set_last_dir(self, kind: str, folder: str | Path) -> None:
        self.q.setValue(f"dirs/{kind}", str(folder))

    def sync(self) -> None:
        self.q.sync()
