"""Before Qt starts on an X11 desktop: are the system libraries its xcb plugin needs there?

When one is missing, Qt prints "Could not load the Qt platform plugin xcb" and aborts the
process (exit 134) without saying which library to install. This module asks the dynamic
loader first (``ldd`` on the plugin and its Qt library, and the libraries Qt opens at run
time) and turns what is missing into the packages to install, per distribution. Nothing
here imports Qt.
"""
from __future__ import annotations

import ctypes.util
import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

#: Library → (Debian/Ubuntu, Fedora/RHEL, Arch) package.
PACKAGES = {
    "libxcb-icccm.so.4": ("libxcb-icccm4", "xcb-util-wm", "xcb-util-wm"),
    "libxcb-keysyms.so.1": ("libxcb-keysyms1", "xcb-util-keysyms", "xcb-util-keysyms"),
    "libxcb-image.so.0": ("libxcb-image0", "xcb-util-image", "xcb-util-image"),
    "libxcb-render-util.so.0": ("libxcb-render-util0", "xcb-util-renderutil", "xcb-util-renderutil"),
    "libxcb-cursor.so.0": ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor"),
    "libxkbcommon-x11.so.0": ("libxkbcommon-x11-0", "libxkbcommon-x11", "libxkbcommon-x11"),
    "libxkbcommon.so.0": ("libxkbcommon0", "libxkbcommon", "libxkbcommon"),
    "libX11-xcb.so.1": ("libx11-xcb1", "libX11-xcb", "libx11"),
    "libX11.so.6": ("libx11-6", "libX11", "libx11"),
    "libEGL.so.1": ("libegl1", "libglvnd-egl", "libglvnd"),
    "libGL.so.1": ("libgl1", "libglvnd-glx", "libglvnd"),
    "libOpenGL.so.0": ("libopengl0", "libglvnd-opengl", "libglvnd"),
    "libfontconfig.so.1": ("libfontconfig1", "fontconfig", "fontconfig"),
    "libfreetype.so.6": ("libfreetype6", "freetype", "freetype2"),
    "libdbus-1.so.3": ("libdbus-1-3", "dbus-libs", "dbus"),
    "libglib-2.0.so.0": ("libglib2.0-0", "glib2", "glib2"),
}
#: Loaded by Qt at run time (dlopen), so ldd cannot see them.
RUNTIME_LIBRARIES = {"libxcb-cursor.so.0": "xcb-cursor"}
DISTROS = ("Debian/Ubuntu", "Fedora/RHEL", "Arch")


def packages_for(library: str) -> tuple[str, str, str]:
    """The package holding ``library`` on each distribution (a best guess for the xcb
    extension libraries not in the table: Debian splits them, the others do not)."""
    if library in PACKAGES:
        return PACKAGES[library]
    m = re.fullmatch(r"lib(xcb-[\w-]+)\.so\.(\d+)", library)
    if m:
        return f"lib{m.group(1)}{m.group(2)}", "libxcb", "libxcb"
    base = library.split(".so")[0]
    return base, base, base


def parse_ldd(output: str) -> list[str]:
    """Library names that ``ldd`` reports as "not found", once each, in order."""
    found = []
    for line in output.splitlines():
        m = re.match(r"\s*(\S+)\s*=>\s*not found", line)
        if m and m.group(1) not in found:
            found.append(m.group(1))
    return found


def _qt_files() -> list[Path]:
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return []
    root = Path(list(spec.submodule_search_locations)[0]) / "Qt"
    files = [root / "plugins" / "platforms" / "libqxcb.so"]
    files += sorted((root / "lib").glob("libQt6XcbQpa.so*"))[:1]
    return [f for f in files if f.is_file()]


def missing_xcb_libraries() -> list[str]:
    """System libraries the xcb platform plugin needs and the loader cannot find."""
    missing: list[str] = []
    ldd = shutil.which("ldd")
    if ldd:
        for f in _qt_files():
            try:
                out = subprocess.run([ldd, str(f)], capture_output=True, text=True, timeout=20).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            missing += [lib for lib in parse_ldd(out) if lib not in missing]
    if _qt_files():
        for lib, short in RUNTIME_LIBRARIES.items():
            if ctypes.util.find_library(short) is None and lib not in missing:
                missing.append(lib)
    return missing


def explain(missing: list[str]) -> str:
    """The message for a user whose desktop lacks ``missing``: what, and what to install."""
    per_distro = [sorted({packages_for(lib)[i] for lib in missing}) for i in range(len(DISTROS))]
    cmds = [f"sudo apt-get install {' '.join(per_distro[0])}",
            f"sudo dnf install {' '.join(per_distro[1])}",
            f"sudo pacman -S {' '.join(per_distro[2])}"]
    lines = ["The desktop app cannot start: Qt's X11 (xcb) platform plugin needs system "
             f"libraries that are not installed: {', '.join(missing)}.", "Install them with:"]
    lines += [f"  {name}: {cmd}" for name, cmd in zip(DISTROS, cmds)]
    lines.append("Or use 'python main.py bench' for the command line, or set "
                 "QT_QPA_PLATFORM=offscreen for a headless check.")
    return "\n".join(lines)
