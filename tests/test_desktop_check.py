"""A desktop start that explains itself: missing xcb libraries are named with the
packages to install, instead of Qt aborting with exit 134."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import main
from gui import desktop_check as dc

LDD = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-randr.so.0 => /lib/x86_64-linux-gnu/libxcb-randr.so.0 (0x1)
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxcb-xinerama.so.0 => not found
"""


def test_parse_ldd_lists_each_missing_library_once():
    assert dc.parse_ldd(LDD) == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-xinerama.so.0"]
    assert dc.parse_ldd("\tlibc.so.6 => /lib/libc.so.6 (0x1)\n") == []


def test_packages_per_distro_including_unlisted_xcb_extensions():
    assert dc.packages_for("libxcb-cursor.so.0") == ("libxcb-cursor0", "xcb-util-cursor", "xcb-util-cursor")
    assert dc.packages_for("libxcb-xinerama.so.0") == ("libxcb-xinerama0", "libxcb", "libxcb")
    text = dc.explain(dc.parse_ldd(LDD))
    assert "sudo apt-get install libxcb-icccm4 libxcb-keysyms1 libxcb-xinerama0" in text
    assert "sudo dnf install libxcb xcb-util-keysyms xcb-util-wm" in text
    assert "sudo pacman -S" in text and "python main.py bench" in text


def test_main_explains_instead_of_aborting(monkeypatch, capsys):
    monkeypatch.setenv("DISPLAY", ":99")
    monkeypatch.delenv("QT_QPA_PLATFORM", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(dc, "missing_xcb_libraries", lambda: ["libxcb-icccm.so.4"])
    assert main.main([]) == 1
    assert "sudo apt-get install libxcb-icccm4" in capsys.readouterr().err


def test_real_start_on_this_machine_names_what_is_missing():
    missing = dc.missing_xcb_libraries()
    if not missing:
        pytest.skip("every xcb library is installed here")
    env = dict(os.environ, DISPLAY=":99")
    env.pop("QT_QPA_PLATFORM", None)
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.run([sys.executable, str(Path(main.__file__))], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert missing[0] in proc.stderr and "apt-get install" in proc.stderr
