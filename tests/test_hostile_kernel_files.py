"""Hostile kernel files (issue 35, classes 3 and 4, and the kernel tools' options).

Every kernel file the app reads, and what it ``#include``s, is guarded: a named pipe, a
device, a folder, a loop of links, a missing, huge, binary or non-UTF-8 file is one clear
line (``check-kernel``, ``bench --kernel``, ``new-kernel``) or a message in the editor,
never a hang or a traceback. Every kernel file the app writes is written whole or not at
all and never through a symbolic link it did not choose: ``new-kernel --force`` refuses a
link (its target is some other file of the user's), a pipe, a folder; the editor on a full
disk keeps the old file and the unsaved text. The editor follows a link the user opened a
kernel through (its target is the file Save replaces) and one picked in Save as.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import main
from engine.kernels import registry
from engine.measure.kernel_check import CheckReport, check_kernel
from engine.kernels.sources import check_includes, read_kernel_text
from engine.kernels.kernel_file import KERNEL_FILE_LIMIT, KernelFileError, parse_header
from engine.kernels.new_kernel import make_copy

ROOT = Path(__file__).resolve().parent.parent
#: Seconds any one of these may take before it counts as a hang (each takes well under one).
HANG_S = 20
#: What a terminal must never receive from a message: an escape code or another control
#: character but the line break.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@contextmanager
def no_hang(seconds: int = HANG_S):
    """Fail (TimeoutError) when the block takes longer: SIGALRM interrupts a blocking
    open() of a pipe, which a hang here would be."""
    def on_alarm(_signum, _frame):
        raise TimeoutError(f"still blocked after {seconds} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def bounded(fn, *args, seconds: int = HANG_S, **kwargs):
    """``fn(*args, **kwargs)`` on a thread, failing the test when it has not returned after
    ``seconds``: a compiler blocked on a pipe waits in C code, which no signal ends."""
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001  (re-raised on the test's thread)
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"still running after {seconds} s: a hang")
    if "error" in box:
        raise box["error"]
    return box.get("value")


@pytest.fixture(autouse=True)
def own_registry(monkeypatch):
    """Kernels a test registers stay in that test."""
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))


def run(capsys, *argv):
    with no_hang():
        code = main.main([*map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code: int, out: str, err: str) -> str:
    """The message of a refused input: exit 2, ``error:`` first, no traceback, nothing a
    terminal would act on; returned with rich's wrapping undone."""
    assert code == 2, (out, err)
    assert "Traceback" not in out + err
    assert not RAW_CONTROL.search(out + err.replace("\n", "")), repr(err)
    text = " ".join(err.split())
    assert "error:" in text, err
    return text


# --- class 3: what a kernel path can be --------------------------------------------------

def hostile_path(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A kernel path of ``kind`` and a regular expression its message matches."""
    p = tmp_path / "k.cu"
    if kind == "pipe":
        os.mkfifo(p)
        return p, "named pipe"
    if kind == "link loop":
        os.symlink(tmp_path / "k2.cu", p)
        os.symlink(p, tmp_path / "k2.cu")
        return p, "loop of symbolic links"
    if kind == "folder":
        p.mkdir()
        return p, "directory|folder"
    if kind == "missing":
        return p, "not found"
    if kind == "device":                         # /dev/zero's class, harmless if read
        return Path("/dev/null"), "device"
    if kind == "huge":
        with open(p, "wb") as fh:                # sparse: no disk space taken
            fh.truncate(KERNEL_FILE_LIMIT + 1)
        return p, "more than"
    if kind == "non-utf8":
        p.write_bytes(b"/*\n+++\nname = \"caf\xe9\"\n+++\n*/\n")
        return p, "not utf-8"
    if kind == "under a file":                   # unreadable as a path, even for root
        (tmp_path / "plain").write_text("x")
        return tmp_path / "plain" / "k.cu", "Not a directory"
    raise AssertionError(kind)


KINDS = ["pipe", "link loop", "folder", "missing", "device", "huge", "non-utf8", "under a file"]


@pytest.mark.parametrize("kind", KINDS)
def test_check_kernel_refuses_a_path_that_is_no_kernel_file_in_one_line(tmp_path, capsys, kind):
    path, words = hostile_path(tmp_path, kind)
    text = one_line_error(*run(capsys, "check-kernel", path))
    assert re.search(words, text, re.IGNORECASE), text
    assert str(path) in text
    # --json (what the editor reads) keeps it in the report instead, still exit 2
    code, out, _err = run(capsys, "check-kernel", path, "--json")
    data = json.loads(out)
    assert code == 2 and not data["ok"] and re.search(words, data["header_error"], re.IGNORECASE)


@pytest.mark.parametrize("kind", KINDS)
def test_bench_kernel_refuses_a_path_that_is_no_kernel_file_in_one_line(tmp_path, capsys, kind):
    path, words = hostile_path(tmp_path, kind)
    text = one_line_error(*run(capsys, "bench", "--backend", "cpu", "--quiet", "--sizes", "8",
                               "--kernel", path))
    assert re.search(words, text, re.IGNORECASE), text


def test_a_binary_kernel_is_refused_at_its_nul_byte(tmp_path, capsys):
    path = make_copy("tiled_any", tmp_path / "k.cl")
    path.write_bytes(path.read_bytes().replace(b"__kernel", b"__ker\0nel", 1))
    line = next(i for i, t in enumerate(path.read_bytes().split(b"\n"), 1) if b"\0" in t)
    text = one_line_error(*run(capsys, "check-kernel", path))
    assert f"{path}:{line}:" in text and "binary" in text
    with pytest.raises(KernelFileError, match="binary"):
        read_kernel_text(path)


def test_check_kernel_stdin_is_bounded_and_utf8(tmp_path, capsys, monkeypatch):
    class Stdin:
        def __init__(self, data: bytes):
            self.buffer = __import__("io").BytesIO(data)

    monkeypatch.setattr(sys, "stdin", Stdin(b"/* caf\xe9 */\n"))
    text = one_line_error(*run(capsys, "check-kernel", tmp_path / "k.cl", "--stdin"))
    assert "not UTF-8" in text
    monkeypatch.setattr(sys, "stdin", Stdin(b" " * (KERNEL_FILE_LIMIT + 1)))
    text = one_line_error(*run(capsys, "check-kernel", tmp_path / "k.cl", "--stdin"))
    assert "more than" in text
    monkeypatch.setattr(sys, "stdin", None)           # started with stdin closed
    assert "no standard input" in one_line_error(*run(capsys, "check-kernel", "k.cl", "--stdin"))


# --- class 3: what a kernel includes --------------------------------------------------

def hostile_include(folder: Path, kind: str) -> tuple[str, str]:
    """(the #include line, a regular expression its message matches) for a header of
    ``kind`` in ``folder``."""
    if kind == "pipe":
        os.mkfifo(folder / "h.h")
        return '#include "h.h"', "named pipe"
    if kind == "angle pipe":
        os.mkfifo(folder / "h.h")
        return "#include <h.h>", "named pipe"
    if kind == "link loop":
        os.symlink(folder / "h2.h", folder / "h.h")
        os.symlink(folder / "h.h", folder / "h2.h")
        return '#include "h.h"', "loop of symbolic links"
    if kind == "folder":
        (folder / "h.h").mkdir()
        return '#include "h.h"', "directory"
    if kind == "device":
        return '#  include "/dev/null"', "device"
    if kind == "nested pipe":
        os.mkfifo(folder / "deep.h")
        (folder / "h.h").write_text('#pragma once\n// a helper\n#include "deep.h"\n')
        return '#include "h.h"', "named pipe"
    raise AssertionError(kind)


INCLUDE_KINDS = ["pipe", "angle pipe", "link loop", "folder", "device", "nested pipe"]


def with_include(path: Path, include: str) -> int:
    """Put ``include`` on the line after the header; returns its line number."""
    lines = path.read_text().split("\n")
    at = lines.index("*/") + 1
    lines.insert(at, include)
    path.write_text("\n".join(lines))
    return at + 1


def check_in_a_process(path: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    """``main.py ARGV`` in a process of its own: PoCL blocked on a pipe holds the
    interpreter's lock, so only a timeout on another process can see that hang."""
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *argv, str(path)],
                          capture_output=True, text=True, timeout=90, cwd=cwd)


@pytest.mark.parametrize("suffix", [".cu", ".cl"])
@pytest.mark.parametrize("kind", INCLUDE_KINDS)
def test_an_include_that_is_no_regular_file_is_refused_at_its_line(tmp_path, kind, suffix):
    path = make_copy("tiled_any", tmp_path / f"k{suffix}")
    include, words = hostile_include(tmp_path, kind)
    line = with_include(path, include)
    if suffix == ".cu":
        rep = bounded(check_kernel, path, timeout=5)     # a regression: nvcc stopped soon
    else:              # as the editor runs it; OpenCL resolves a relative include from cwd
        proc = check_in_a_process(path, "check-kernel", "--json", cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        rep = CheckReport.from_dict(json.loads(proc.stdout))
    assert not rep.ok and "include" in rep.problem and not any(c.built for c in rep.combos)
    (d,) = rep.diagnostics
    assert d.severity == "error" and re.search(words, d.message), d
    if kind == "nested pipe":
        assert (d.path, d.line) == (str(tmp_path / "h.h"), 3)
    else:
        assert (d.path, d.line) == (str(path), line)


def test_includes_found_nowhere_or_regular_are_left_to_the_compiler(tmp_path):
    (tmp_path / "ok.h").write_text('#include "ok.h"\n#include <cuda_runtime.h>\n')  # itself
    text = '#include "ok.h"\n#include "nowhere.h"\n#include MACRO\n'
    with no_hang():
        check_includes(text, tmp_path / "k.cu", tmp_path, [ROOT / "cuda"])


def test_an_opencl_run_with_a_pipe_include_is_a_build_error_not_a_hang(tmp_path):
    from tests.helpers import require_backend
    require_backend("opencl")
    path = make_copy("tiled_any", tmp_path / "k.cl")
    os.mkfifo(tmp_path / "h.h")
    with_include(path, f'#include "{tmp_path / "h.h"}"')    # found by the compiler alone
    proc = check_in_a_process(path, "bench", "--backend", "opencl", "--in-process", "--quiet",
                              "--sizes", "16", "--warmup", "0", "--repeats", "1", "--params",
                              "block=8", "--kernel", cwd=tmp_path)
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "named pipe" in err and "Traceback" not in err, err


# --- class 4: what new-kernel writes ----------------------------------------------------

def test_new_kernel_force_refuses_a_symbolic_link_and_leaves_its_target(tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("the user's own file\n")
    link = tmp_path / "mine.cl"
    link.symlink_to(target)
    text = one_line_error(*run(capsys, "new-kernel", "--from", "tiled_any", link, "--force"))
    assert "symbolic link" in text and "not written through" in text
    assert target.read_text() == "the user's own file\n" and link.is_symlink()
    # a link to nowhere is taken too: nothing appears where it points
    dangling = tmp_path / "gone.cl"
    dangling.symlink_to(tmp_path / "elsewhere.cl")
    assert "exists" in one_line_error(*run(capsys, "new-kernel", "--from", "tiled_any", dangling))
    one_line_error(*run(capsys, "new-kernel", "--from", "tiled_any", dangling, "--force"))
    assert not (tmp_path / "elsewhere.cl").exists()


@pytest.mark.parametrize("kind", ["pipe", "folder", "folder/", "under a file", "link loop"])
def test_new_kernel_refuses_what_is_no_file_to_replace(tmp_path, capsys, kind):
    path = tmp_path / "k.cl"
    arg = str(path)
    if kind == "pipe":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "folder/":
        arg = str(tmp_path / "new") + "/"
    elif kind == "under a file":
        (tmp_path / "plain").write_text("x")
        arg = str(tmp_path / "plain" / "k.cl")
    elif kind == "link loop":
        os.symlink(tmp_path / "k2.cl", path)
        os.symlink(path, tmp_path / "k2.cl")
    text = one_line_error(*run(capsys, "new-kernel", "--from", "tiled_any", arg, "--force"))
    assert re.search(r"named pipe|folder|symbolic link", text), text
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_new_kernel_on_a_full_disk_keeps_the_old_file(tmp_path):
    old = make_copy("naive", tmp_path / "k.cl")
    old.write_text(old.read_text() + "// the user's edits\n")
    old.chmod(0o640)
    before = old.read_bytes()
    # A file-size limit under the copy's size stands in for a full disk (root ignores chmod).
    script = textwrap.dedent(f"""
        import resource, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
        import main
        sys.exit(main.main(["new-kernel", "--from", "tiled_any", {str(old)!r}, "--force",
                            "--name", "k"]))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "not written" in proc.stderr and "unchanged" in proc.stderr
    assert old.read_bytes() == before and (old.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["k.cl"]       # no temporary file left
    # with room, --force replaces the file whole and keeps its mode
    assert main.main(["new-kernel", "--from", "tiled_any", str(old), "--force", "--name", "k"]) == 0
    assert parse_header(old).name == "k" and (old.stat().st_mode & 0o777) == 0o640


@pytest.mark.parametrize("name", ["ä.cl", "123.cl", "____.cl", "-.cl"])
def test_new_kernel_asks_for_a_name_when_the_file_name_gives_none(tmp_path, capsys, name):
    text = one_line_error(*run(capsys, "new-kernel", "--from", "tiled_any", tmp_path / name))
    assert "--name" in text
    assert list(tmp_path.iterdir()) == []
    assert run(capsys, "new-kernel", "--from", "tiled_any", tmp_path / name, "--name", "fine")[0] == 0


@pytest.mark.parametrize("name", ["new\x1b[31mred.cl", "a\u202eb.cl", "line\nbreak.cl",
                                  "bad\udcff.cl"])
def test_new_kernel_refuses_file_names_with_control_characters(tmp_path, capsys, name):
    text = one_line_error(*run(capsys, "new-kernel", "--from", "tiled_any", tmp_path / name))
    assert "control character" in text and "\\" in text       # shown as an escape
    assert list(tmp_path.iterdir()) == []


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(min_size=0, max_size=24))
def test_new_kernel_names_are_refused_or_read_back_exactly(tmp_path_factory, capsys, name):
    """Any --name: exit 2 in one line and nothing written, or a file whose header reads
    back with exactly that name."""
    folder = tmp_path_factory.mktemp("names")
    path = folder / "k.cl"
    code, out, err = run(capsys, "new-kernel", "--from", "tiled_any", path, "--name", name)
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in registry.REGISTRY:
        assert code == 0, err
        assert parse_header(path).name == name
    else:
        one_line_error(code, out, err)
        assert not path.exists()


# --- the tools' options ----------------------------------------------------------------

@pytest.mark.parametrize("option,value", [
    ("--workers", "-5"), ("--workers", "0"), ("--workers", "10" * 20), ("--workers", "four"),
    ("--workers", "1.5"), ("--timeout", "nan"), ("--timeout", "-1"), ("--timeout", "0"),
    ("--timeout", "inf"), ("--device", "-1"), ("--arch", "sm_\x1b[2J"), ("--display-path", " "),
])
def test_check_kernel_refuses_option_values_it_would_use_in_silence(tmp_path, capsys, option,
                                                                    value):
    path = make_copy("tiled_any", tmp_path / "k.cl")
    code, out, err = run(capsys, "check-kernel", path, f"{option}={value}")
    text = " ".join(err.split())
    assert code == 2 and out == "" and option.lstrip("-") in text and "Traceback" not in text
    assert not RAW_CONTROL.search(err.replace("\n", ""))


def test_check_kernel_output_shows_the_users_text_literally(tmp_path, capsys):
    path = make_copy("tiled_any", tmp_path / "k.cl")
    path.write_text(path.read_text().replace("[launch]", "[launch]\ncolour\x1b[2J = 3"))
    code, out, err = run(capsys, "check-kernel", path, "--display-path", "shown\x1b[31m.cl")
    assert code == 2 and "shown\\x1b[31m.cl" in out
    assert not RAW_CONTROL.search(out.replace("\n", ""))


# --- the editor ----------------------------------------------------------------------------

@pytest.fixture
def editor(qtbot, tmp_path, error_dialogs):
    from gui.kernel_editor import KernelEditor
    from gui.kernel_folders import KernelFolders
    from gui.settings import AppSettings, ini_settings

    ed = KernelEditor(KernelFolders(AppSettings(ini_settings(tmp_path / "settings.ini"))))
    qtbot.addWidget(ed)
    ed.shown_errors = error_dialogs
    return ed


def _type(ed, text: str) -> None:
    from PySide6.QtGui import QTextCursor

    cursor = ed.editor.textCursor()
    cursor.movePosition(QTextCursor.MoveOperation.End)
    ed.editor.setTextCursor(cursor)
    ed.editor.insertPlainText(text)


@pytest.mark.parametrize("kind", KINDS)
def test_the_editor_opens_no_hostile_path_and_says_why(editor, tmp_path, kind):
    path, words = hostile_path(tmp_path, kind)
    with no_hang():
        assert editor.open_file(path) is False
    (title, message), = editor.shown_errors
    assert title == "Cannot open the kernel" and re.search(words, message, re.IGNORECASE)
    assert editor.path is None and "Not opened" in editor.status.text()
    from gui.code_editor import CodeEditor
    pane = CodeEditor()
    pane.setPlainText("kept")
    with no_hang(), pytest.raises(KernelFileError):
        pane.load_file(path)
    assert pane.toPlainText() == "kept"


def test_a_file_replaced_by_a_pipe_is_not_reloaded_and_the_text_stays(editor, tmp_path):
    path = make_copy("tiled_any", tmp_path / "k.cl")
    assert editor.open_file(path)
    text = editor.text()
    path.unlink()
    os.mkfifo(path)
    with no_hang():
        editor._disk_changed()
    assert editor.text() == text and "cannot be read" in editor.status.text()
    assert "named pipe" in editor.status.text()


def test_the_editor_saves_through_the_link_it_opened_and_refuses_one_it_did_not(editor,
                                                                              tmp_path):
    real = make_copy("tiled_any", tmp_path / "real.cl")
    link = tmp_path / "link.cl"
    link.symlink_to(real)
    assert editor.open_file(link)
    _type(editor, "\n// edited through the link\n")
    assert editor.save()
    assert link.is_symlink() and real.read_text().endswith("// edited through the link\n")
    # a new kernel's suggested file that is a dangling link is not written through
    elsewhere = tmp_path / "elsewhere.cl"
    editor.new_from_template("tiled_any", "fresh", ".cl")
    editor.suggested_path = tmp_path / "fresh.cl"
    editor.suggested_path.symlink_to(elsewhere)
    assert editor.save_to(editor.suggested_path) is False
    assert not elsewhere.exists() and editor.modified
    assert "symbolic link" in editor.status.text()


def test_saving_on_a_full_disk_keeps_the_old_file_and_the_editors_text(tmp_path):
    """The editor's Save with a file-size limit under the text's size (a full disk): the
    old kernel stays whole, the text stays in the editor, unsaved, and it says why."""
    path = make_copy("tiled_any", tmp_path / "k.cl")
    before = path.read_bytes()
    script = textwrap.dedent(f"""
        import json, os, resource, signal, sys
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
        sys.path.insert(0, {str(ROOT)!r})
        from PySide6.QtWidgets import QApplication
        from PySide6.QtGui import QTextCursor
        app = QApplication([])
        from gui import dialogs
        shown = []
        dialogs.show_error = lambda parent, title, text, details="": shown.append(text)
        from gui.kernel_editor import KernelEditor
        from gui.kernel_folders import KernelFolders
        from gui.settings import AppSettings, ini_settings
        ed = KernelEditor(KernelFolders(AppSettings(ini_settings({str(tmp_path / "s.ini")!r}))))
        assert ed.open_file({str(path)!r})
        cursor = ed.editor.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        ed.editor.setTextCursor(cursor)
        ed.editor.insertPlainText("\\n// " + "x" * 8000 + "\\n")
        typed = ed.text()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        saved = ed.save()
        print(json.dumps(dict(saved=saved, kept=ed.text() == typed, modified=ed.modified,
                              status=ed.status.text(), shown=shown)))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["saved"] is False and got["kept"] and got["modified"]
    assert "Not saved" in got["status"] and "File too large" in got["shown"][0]
    assert path.read_bytes() == before                     # not a torn 4 KB file
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp file
