"""A hostile user kernel folder (issue 35, class 2, and the printing of user text, class 9):
whatever the folder holds, the window and every command start, each file that cannot be
used is one short warning line (a red row in the window's variant tree), the good kernels
beside them register, and a title or file name prints as written.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from engine.kernels import registry, user_kernels
from engine.kernels.kernel_file import KernelFileError
from tests.helpers import require_backend

ROOT = Path(__file__).resolve().parent.parent
#: Seconds a command may take before it counts as hung (a pipe read blocks forever).
HANG_S = 90
#: What must never reach a terminal or a row: escape codes and other control characters.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
#: The longest a warning line may be (the path, the line, a short message).
WARNING_LINE = 500


def kernel(name: str, title: str = "a test kernel", extra: str = "") -> str:
    return (f'/*\n+++\nname = "{name}"\ntitle = "{title}"\nsource = "tests"\n[params]\n'
            f'block = [16]\n{extra}\n[launch]\ngrid = ["cdiv(N, block)", "cdiv(M, block)"]\n'
            'block = ["block", "block"]\n+++\n*/\n'
            '__kernel void matmul(__global const ELEM *A, __global const ELEM *B, '
            '__global ELEM *C, int M, int N, int K) {}\n')


def hostile_folder(folder: Path) -> tuple[dict[str, str], list[str]]:
    """Fill ``folder`` with one file of each hostile kind: ``{file name: words its
    problem must say}`` and the variant names the good files among them make."""
    folder.mkdir(parents=True, exist_ok=True)
    bad: dict[str, str] = {}

    def put(name, content, words):
        (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        bad[name] = words

    os.mkfifo(folder / "pipe.cl")
    bad["pipe.cl"] = "named pipe"
    os.symlink("loop_b.cl", folder / "loop_a.cl")
    os.symlink("loop_a.cl", folder / "loop_b.cl")
    bad["loop_a.cl"] = bad["loop_b.cl"] = "loop of symbolic links"
    os.symlink("nowhere.cl", folder / "dangling.cl")
    bad["dangling.cl"] = "not found"
    (folder / "folder.cu").mkdir()
    bad["folder.cu"] = "directory"
    (folder / "plain").write_text("a file where a folder is expected")
    os.symlink("plain/x.cl", folder / "through_a_file.cl")       # ENOTDIR: cannot be read
    bad["through_a_file.cl"] = "cannot be read"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "socket.cl"))
    sock.close()
    bad["socket.cl"] = "socket"
    with open(folder / "huge.cl", "wb") as f:                    # sparse: no disk taken
        f.truncate(64 * 1024**2)
    bad["huge.cl"] = "more than this machine can load"
    put("binary.cl", bytes(range(256)) * 4, "not utf-8")
    put("latin1.cl", kernel("latin").replace("a test", "caf\xe9").encode("latin-1"), "not utf-8")
    put("empty.cl", "", "no kernel header")
    put("brace.cl", kernel("brace", extra='[[constraints]]\ncheck = "1"\nreason = "oops {"'),
        "without its pair")
    put("combos.cl", kernel("combos").replace(
        "block = [16]", "block = [16]\n" + "\n".join(f"p{i} = [{', '.join(map(str, range(1, 11)))}]"
                                                     for i in range(10))), "combinations")
    put("deep.cl", kernel("deep").replace('title = "a test kernel"',
                                          "title = " + "[" * 5000 + "]" * 5000), "too deeply")
    put("digits.cl", kernel("digits").replace("block = [16]", "block = [" + "9" * 6000 + "]"),
        "thousands of digits")
    put("escape_title.cl", kernel("escape_title", title="\\u001b[2J\\u001b[3J\\u001b[H"),
        "control character")
    put("long.cl", kernel("long", extra="[derived]\nd = \"" + "x" * 20000 + "\""),
        "characters long")
    put("twice.cl", kernel("twice").replace("block = [16]", "block = [16]\nblock = [8]"),
        "written twice")
    put("taken.cl", kernel("naive"), "taken")
    # Good kernels, with names a terminal or rich would act on.
    good = {":smile: [bold]loud[/bold].cl".replace("/", "|"): "smiley",
            "esc\x1b[2Jname.cl": "escname",
            "bad\udcffbyte.cl": "badbyte",
            "plain_good.cl": "plain_good"}
    for fname, vname in good.items():
        title = ":smile: [bold]b[/bold] [red]x[/red]" if vname == "smiley" else "fine"
        (folder / fname).write_text(kernel(vname, title=title))
    (folder / ".#locked.cl").symlink_to("user@host.1234:1")      # an editor's lock: not ours
    return bad, sorted(good.values())


def bench(*args, data: Path, timeout=HANG_S) -> subprocess.CompletedProcess:
    env = {**os.environ, "MATMUL_LAB_DATA": str(data), "COLUMNS": "200"}
    return subprocess.run([sys.executable, str(ROOT / "main.py"), *map(str, args)],
                          capture_output=True, timeout=timeout, cwd=ROOT, env=env)


def warnings_of(stderr: bytes) -> list[str]:
    return [line for line in stderr.decode("utf-8", "replace").splitlines()
            if line.startswith("warning: user kernel skipped")]


def check_warnings(lines: list[str], bad: dict[str, str]) -> None:
    """One short line per bad file, saying its problem, with nothing a terminal acts on."""
    assert len(lines) == len(bad), "\n".join(lines)
    for name, words in bad.items():
        mine = [line for line in lines if f"/{name}:" in line or f"/{name} " in line]
        assert len(mine) == 1, (name, lines)
        assert words in mine[0], (name, mine[0])
        assert len(mine[0]) <= WARNING_LINE and not RAW_CONTROL.search(mine[0])


# --- the command line -----------------------------------------------------------------------

def test_bench_list_starts_whatever_the_folder_holds(tmp_path):
    bad, good = hostile_folder(tmp_path / "data" / "kernels")
    done = bench("bench", "--list", data=tmp_path / "data")
    out = done.stdout.decode("utf-8", "replace")
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert "Traceback" not in done.stderr.decode("utf-8", "replace")
    check_warnings(warnings_of(done.stderr), bad)
    for name in good:
        assert name in out
    # user text printed as written: markup and emoji codes as text, escapes made visible
    # (the table's cells folded: compared without the spaces and rules between lines)
    flat = re.sub(r"[\s│┃]", "", out)
    assert ":smile:[bold]b[/bold][red]x[/red]" in flat
    assert "\\x1b[2Jname.cl" in flat and "\\udcffbyte.cl" in flat
    assert not RAW_CONTROL.search(out.replace("\n", ""))
    assert "😄" not in out


@pytest.mark.slow
def test_a_bench_run_starts_too_and_runs_the_good_kernels(tmp_path):
    bad, _good = hostile_folder(tmp_path / "data" / "kernels")
    out = tmp_path / "r.json"
    done = bench("bench", "--backend", "cpu", "--variants", "cpu_numpy", "--sizes", "8",
                 "--warmup", "0", "--repeats", "1", "--out", out, data=tmp_path / "data")
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    check_warnings(warnings_of(done.stderr), bad)
    assert out.is_file()


def test_check_kernel_starts_beside_such_a_folder(tmp_path):
    require_backend("opencl")
    folder = tmp_path / "data" / "kernels"
    hostile_folder(folder)
    done = bench("check-kernel", folder / "plain_good.cl", data=tmp_path / "data")
    assert done.returncode == 0, (done.stdout + done.stderr).decode()[-3000:]


def test_kernels_named_on_the_command_line_are_an_error_of_one_short_line_each(tmp_path):
    """--kernels FOLDER: the user named it, so a bad file there is exit 2, still one short
    line per file and nothing a terminal acts on."""
    bad, _ = hostile_folder(tmp_path / "mine")
    done = bench("bench", "--no-user-kernels", "--kernels", tmp_path / "mine", "--list",
                 data=tmp_path / "data")
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2 and "Traceback" not in err
    assert not RAW_CONTROL.search(err.replace("\n", ""))
    for name in bad:
        assert f"/{name}" in err, name


# --- the registry -----------------------------------------------------------------------

def test_every_entry_of_the_folder_is_read_or_reported(tmp_path):
    bad, good = hostile_folder(tmp_path / "kernels")
    loaded = user_kernels.reload([tmp_path / "kernels"])
    assert sorted(loaded.names) == good
    assert sorted(e.path.name for e in loaded.errors) == sorted(bad)
    assert ".#locked.cl" not in {p.name for p in loaded.files}
    for e in loaded.errors:
        assert isinstance(e, KernelFileError) and len(e.message) <= 300
        assert loaded.problem_of(e.path) == str(e)


def test_a_bug_in_the_parser_stops_only_its_file(tmp_path, monkeypatch):
    """Defence in depth: whatever one file's reading raises is that file's problem."""
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "a_good.cl").write_text(kernel("a_good"))
    (folder / "b_trips.cl").write_text(kernel("b_trips"))
    real = registry.parse_header

    def parse(path, text=None):
        if Path(path).name == "b_trips.cl":
            raise RecursionError("maximum recursion depth exceeded " + "x" * 5000)
        return real(path, text)

    monkeypatch.setattr(registry, "parse_header", parse)
    loaded = user_kernels.reload([folder])
    assert loaded.names == ["a_good"]
    [err] = loaded.errors
    assert err.path.name == "b_trips.cl" and "RecursionError" in err.message
    assert len(str(err)) < WARNING_LINE


# --- the window -----------------------------------------------------------------------------

def test_the_window_starts_with_a_red_row_per_bad_file(qtbot, make_window):
    require_backend("opencl")
    bad, good = hostile_folder(user_kernels.user_kernel_dir())
    win = make_window()
    win.config.select("opencl", 0)
    tree = win.config.variants
    for name in good:
        assert name in tree.variant_names()
    rows = dict(tree.problem_rows())
    want = {n for n in bad if n.endswith(".cl")}
    assert {Path(p).name for p in rows} == want
    for path, message in rows.items():
        assert bad[Path(path).name] in message and len(message) <= 300
    shown = [tree.topLevelItem(i).text(c) for i in range(tree.topLevelItemCount()) for c in (0, 1)]
    assert not any(RAW_CONTROL.search(t) or "\udcff" in t for t in shown)
    # every bad file, .cu too, is said once in the log
    log = win.log.plain_text()
    for name in bad:
        assert sum(f"/{name}" in line for line in log.split("\n")) == 1, name
