"""Issue 35, classes 3-5: hostile autotune caches, journals, settings and profile files.

No failure of these files loses measurements quietly: the autotune cache, the results
journal, the settings file and the profile reports are read guarded (a pipe never hangs,
a folder or a link loop is said) and written atomically; a cache or journal that cannot
be read is set aside (renamed), never deleted; one that cannot be written is said before
the work and when a write fails, and the work's results are kept all the same.
"""
from __future__ import annotations

import json
import os
import re
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.run import autotune as at
from cli import profile_target
from engine.profile import nsight as profile
from engine.results import records
from engine.results.records import ResultRecord
from engine.run.runner import Plan, Sweep
from tests.conftest import gc_only_between_tests
from tests.helpers import require_backend

REPO = Path(__file__).resolve().parent.parent
#: A one-combination search on the cpu backend, in this process: the cache's problems
#: are the test, not the search (a second or so).
BENCH = ["--in-process", "--backend", "cpu", "--variants", "cpu_numpy", "--sizes", "32",
         "--warmup", "0", "--repeats", "1", "--quiet", "--autotune"]
HOSTILE_KINDS = ["folder", "fifo", "link_loop", "device"]


def _make(path: Path, kind: str) -> None:
    """Something that is not a readable file, at ``path``."""
    if kind == "folder":
        path.mkdir(parents=True)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link_loop":
        other = path.with_name(path.name + ".other")
        os.symlink(other.name, path)
        os.symlink(path.name, other)
    elif kind == "device":
        os.symlink("/dev/zero", path)        # would never end if read
    else:
        raise AssertionError(kind)


def _kind_of(path: Path) -> str:
    """What ``path`` is now, to check that nothing was written over it."""
    if path.is_symlink():
        return "link"
    if path.is_dir():
        return "folder"
    if path.is_fifo():
        return "fifo"
    return "file" if path.is_file() else "none"


def _bench(args: list[str], capsys) -> tuple[int, str, str]:
    from cli.bench import run_bench

    rc = run_bench(args)
    got = capsys.readouterr()
    return rc, got.out, got.err


def _flat(text: str) -> str:
    """Terminal output with rich's line wrapping undone."""
    return " ".join(text.split())


def _limited(limit: int):
    """preexec_fn: files of at most ``limit`` bytes (a full disk, for root too); the write
    past it fails with EFBIG instead of killing the process."""
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
                **extra)


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch):
    """Messages on one line: rich wraps at the terminal's width, inside long paths too."""
    monkeypatch.setenv("COLUMNS", "4000")


# --- the autotune cache ---------------------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", HOSTILE_KINDS)
def test_a_cache_that_cannot_be_read_is_said_up_front_and_the_results_are_kept(
        kind, tmp_path, monkeypatch, capsys):
    cache = tmp_path / "autotune.json"
    _make(cache, kind)
    before = _kind_of(cache)
    monkeypatch.setenv(at.CACHE_ENV, str(cache))
    out = tmp_path / "out.json"
    rc, stdout, stderr = _bench(BENCH + ["--out", str(out)], capsys)
    said = _flat(stderr)
    assert rc == 1, said                          # documented: results not cached
    words = {"folder": "is a directory", "fifo": "is a named pipe",
             "link_loop": "is a loop of symbolic links", "device": "is a device"}[kind]
    assert f"the autotune cache {cache} {words}" in said
    assert "results will not be cached" in said
    assert said.count(words) == 1                 # said once, though every search met it
    assert "internal error" not in said
    assert "cpu_numpy" in stdout                  # the table
    saved = json.loads(out.read_text())["records"]
    assert [(r["variant"], r["m"], r["status"]) for r in saved] == [("cpu_numpy", 32, "ok")]
    assert _kind_of(cache) == before              # left as it is, nothing written over it


@pytest.mark.parametrize("content", [b'{"opencl|dev|naive": {"params": ', b"[1, 2, 3]",
                                     b"\xff\xfe not text", b"[" * 100_000, b"", b'"text"'],
                         ids=["torn", "list", "binary", "deep", "empty", "string"])
def test_a_malformed_cache_is_set_aside_and_a_new_one_started(content, tmp_path, monkeypatch,
                                                              capsys):
    cache = tmp_path / "autotune.json"
    cache.write_bytes(content)
    monkeypatch.setenv(at.CACHE_ENV, str(cache))
    rc, stdout, stderr = _bench(BENCH, capsys)
    said = _flat(stderr)
    assert rc == 0, said
    (aside,) = tmp_path.glob("autotune.json.malformed-*")
    assert aside.read_bytes() == content          # kept, byte for byte
    assert f"set aside as {aside.name}" in said and str(tmp_path) in said
    assert "cpu_numpy" in stdout
    fresh = json.loads(cache.read_text())
    assert [k.split("|")[2] for k in fresh] == ["cpu_numpy"]


def test_a_cache_that_cannot_be_written_is_said_up_front_and_the_results_are_kept(
        tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache's folder should be")
    cache = blocker / "autotune.json"
    monkeypatch.setenv(at.CACHE_ENV, str(cache))
    out = tmp_path / "out.csv"
    rc, stdout, stderr = _bench(BENCH + ["--out", str(out)], capsys)
    said = _flat(stderr)
    assert rc == 1
    assert f"the autotune cache {cache} cannot be written" in said
    assert "results will not be cached" in said and said.count("cannot be written") == 1
    assert "cpu_numpy" in stdout and "cpu_numpy" in out.read_text()
    assert blocker.read_text() == "a file where the cache's folder should be"


@pytest.mark.timeout(120)
def test_a_full_disk_while_storing_keeps_the_results_and_the_old_cache(tmp_path):
    """The cache is written after the search: the disk fills then (simulated with a file
    size limit, which stops root too). The old cache stays whole, the records reach the
    table and --out, and the exit code says they were not cached."""
    cache = tmp_path / "autotune.json"
    old = {f"cpu|CPU|cpu_numpy|float32|{n}x{n}x{n}": {"params": {}, "median_ms": 1.0,
                                                     "note": "x" * 200} for n in range(1, 200)}
    cache.write_text(json.dumps(old, indent=1))
    before = cache.read_bytes()
    assert len(before) > 40_000
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "main.py", "bench", *BENCH, "--out", str(out)],
                          cwd=REPO, env=_env(**{at.CACHE_ENV: str(cache)}), capture_output=True,
                          text=True, timeout=100, preexec_fn=_limited(32_000))
    said = _flat(proc.stderr)
    assert proc.returncode == 1, said
    assert f"the autotune cache {cache} was not written" in said
    assert "results will not be cached" in said and "Traceback" not in said
    assert cache.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".autotune.json")]  # no temp left
    assert "cpu_numpy" in proc.stdout
    assert [r["variant"] for r in json.loads(out.read_text())["records"]] == ["cpu_numpy"]


def test_a_search_says_the_cache_problem_before_its_first_result_once_per_run(tmp_path):
    """The engine's own flow (the window's path): run_autotuned says the problem as a
    typed warning before any result, once for the whole run, and returns every winner."""
    cache = tmp_path / "autotune.json"
    cache.mkdir()
    events = []
    sweep = Sweep()
    try:
        plan = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(16, 16, 16), (32, 32, 32)],
                    warmup=0, repeats=1, autotune=True)
        got = at.run_autotuned(sweep, plan, events.append, cache=cache)
    finally:
        sweep.close()
    assert [(r.variant, r.m, r.status) for r in got] == [("cpu_numpy", 16, "ok"), ("cpu_numpy", 32, "ok")]
    warned = [i for i, e in enumerate(events) if isinstance(e, at.CacheEvent)]
    first_result = next(i for i, e in enumerate(events) if e.kind == "result")
    assert len(warned) == 1 and warned[0] < first_result
    problem = events[warned[0]].problem
    assert problem.issue is at.CacheIssue.UNREADABLE and problem.lost and problem.path == cache
    assert events[warned[0]].level == "warning"
    assert cache.is_dir() and not any(cache.iterdir())


def test_a_whole_search_keeps_every_record_when_the_cache_cannot_be_written(tmp_path):
    require_backend("opencl")
    blocker = tmp_path / "file"
    blocker.write_text("")
    events = []
    sweep = Sweep()
    try:
        best, recs = at.autotune(sweep, "opencl", 0, "naive", (16, 24, 8), warmup=0, repeats=1,
                                 cache=blocker / "autotune.json", emit=events.append)
    finally:
        sweep.close()
    from engine.kernels import registry
    assert best is not None
    assert len(recs) == len(registry.get("naive").combos())       # every measurement
    (problem,) = [e.problem for e in events if isinstance(e, at.CacheEvent)]
    assert problem.issue is at.CacheIssue.UNWRITABLE


def test_the_window_says_a_cache_problem_before_the_search_and_keeps_the_results(
        gui, qtbot, make_window, configure, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(at.CACHE_ENV, str(blocker / "autotune.json"))
    win = configure(make_window(), "cpu", ("cpu_numpy",), "16,32")
    win.config.autotune.setChecked(True)
    assert win.config.build_plan().autotune
    with qtbot.waitSignal(win.controller.finished, timeout=60_000):
        win.start_run()
    assert sorted(r.m for r in win.store.records) == [16, 32]
    log = win.log.plain_text()
    assert log.count(f"the autotune cache {blocker / 'autotune.json'} cannot be written") == 1
    warned = log.index("cannot be written")
    assert "results will not be cached" in log[warned:] and warned < log.index("Finished 2 runs")
    assert "not cached" in win.statusBar().currentMessage()


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
_params = st.dictionaries(st.sampled_from(["block", "bk", "x", ""]), _json, max_size=3)
_relative = st.dictionaries(st.sampled_from(["block=8", "block=16", "block=x", "block=1e9",
                                             "garbage", "block=99999999999999999999", ""]),
                            _json | st.integers(min_value=10**300, max_value=10**310), max_size=4)
_entry = st.one_of(_json, st.fixed_dictionaries({"params": _params | _json},
                                                optional={"relative": _relative | _json}))
_shapes = st.sampled_from(["16x16x16", "32x32x32", "16x16", "x", "１６x1x1", "0x0x0", "16x24x8"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.dictionaries(_shapes, _entry, max_size=5), top=_json)
@pytest.mark.slow
def test_any_cache_content_is_read_without_an_error(entries, top, tmp_path):
    """Hand-edited entries (any JSON in any field) never stop a lookup or a guess: what
    is not a cache entry is skipped."""
    prefix = at.cache_key("opencl", "dev", "naive", "float32", (0, 0, 0))[:-len("0x0x0")]
    data = {prefix + shape: entry for shape, entry in entries.items()}
    data["something else"] = top
    cache = tmp_path / "autotune.json"
    cache.write_text(json.dumps(data))
    state = at.prepare_cache(cache, writing=False)
    assert set(state.data) == set(data) and not state.problems
    for shape in ((16, 16, 16), (16, 24, 8), (100, 7, 3)):
        at.lookup("opencl", "dev", "naive", "float32", shape, data=state.data)
        g = at.guess_candidates("opencl", "dev", "naive", "float32", shape, data=state.data, top=3)
        assert g.source in ("exact", "class", "nearest", "default", "none")
        at.relative_speed("opencl", "dev", "naive", "float32", shape, {"block": 16}, path=cache)


# --- the results journal ----------------------------------------------------------------


@pytest.fixture
def gui():
    """For the window tests in this file: Qt present, and Python's cyclic GC only between
    tests (as tests/conftest.py does for test_gui* files)."""
    pytest.importorskip("PySide6")
    with gc_only_between_tests():
        yield


def _record(i: int, **kw) -> ResultRecord:
    base = dict(backend="cpu", device="CPU", variant="cpu_numpy", params={}, m=16 * i, n=16 * i,
                k=16 * i, dtype="float32", median_ms=0.1 * i, status="ok")
    base.update(kw)
    return ResultRecord(**base)


def _journal_folder() -> Path:
    from gui.journal import journal_dir

    folder = journal_dir()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _dead_journal(header: str | None = None, lines: list[str] | None = None) -> Path:
    """A journal as a session whose process is gone leaves it."""
    path = _journal_folder() / "session-999999999-1700000000000.jsonl"
    header = header if header is not None else json.dumps({"journal": 1, "pid": 999_999_999,
                                                          "started": 1_700_000_000.0})
    if lines is None:
        lines = [json.dumps({"run": 1, "record": records.to_dict(_record(i))}) for i in (1, 2)]
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def test_a_journal_folder_that_cannot_be_written_is_said_at_start(gui, qtbot, make_window,
                                                                   configure):
    from gui.journal import journal_dir

    journal_dir().parent.mkdir(parents=True, exist_ok=True)
    journal_dir().write_text("a file where the journal folder should be")
    win = make_window()
    log = win.log.plain_text()
    assert "results journal off for this session" in log     # before any run
    assert str(journal_dir()) in log and "not protected against a crash" in log
    configure(win, "cpu", ("cpu_numpy",), "32")
    with qtbot.waitSignal(win.controller.finished, timeout=30_000):
        win.start_run()
    assert len(win.store) == 1                                 # the run goes on
    assert win.log.plain_text().count("results journal off for this session") == 1


JOURNAL_FILLS_UP = textwrap.dedent(r"""
    import json, resource, sys
    from pathlib import Path
    from gui.journal import SessionJournal
    from engine.results.records import ResultRecord

    said = []
    journal = SessionJournal(folder=Path(sys.argv[1]), on_problem=said.append)
    journal.prepare()
    assert journal.problem is None and journal.path.is_file()
    limit = journal.path.stat().st_size + 3000
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    for i in range(1, 40):
        journal.record(1, ResultRecord(backend="cpu", device="CPU", variant="cpu_numpy", params={},
                                       m=i, n=i, k=i, dtype="float32", median_ms=0.1, status="ok"))
    print(json.dumps({"said": said, "problem": journal.problem}))
""")


def test_a_journal_write_that_fails_mid_session_is_said_once(tmp_path):
    proc = subprocess.run([sys.executable, "-c", JOURNAL_FILLS_UP, str(tmp_path / "journal")],
                          cwd=REPO, env=_env(), capture_output=True, text=True, timeout=60,
                          preexec_fn=_limited(resource.RLIM_INFINITY))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    (said,) = got["said"]
    assert said == got["problem"]
    assert "results journal off for this session" in said and "File too large" in said
    assert str(tmp_path / "journal") in said


UNREADABLE_KINDS = ["damaged", "binary", "folder", "fifo", "too_large"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", UNREADABLE_KINDS)
def test_an_unreadable_journal_is_set_aside_never_deleted(kind, monkeypatch):
    from gui import journal

    path = _journal_folder() / "session-999999999-1700000000000.jsonl"
    content = None
    if kind == "damaged":        # a header, then lines a disk error left unreadable
        content = (json.dumps({"journal": 1, "started": 1_700_000_000}) + "\n"
                   + '{"run": 1, "record": {"backend": "cp\n{"run": 1, "final": 7}\n').encode()
    elif kind == "binary":
        content = bytes(range(256)) * 8
    elif kind == "too_large":
        monkeypatch.setattr(journal, "MAX_JOURNAL_BYTES", 1000)
        content = (json.dumps({"run": 1, "record": records.to_dict(_record(1))}) + "\n").encode() * 10
    if content is not None:
        path.write_bytes(content)
    else:
        _make(path, kind)
    scan = journal.scan_journals()
    assert scan.orphans == []
    (bad,) = scan.unreadable
    assert not os.path.lexists(path)
    assert bad.set_aside is not None and bad.set_aside.name == path.name + ".unreadable"
    assert _kind_of(bad.set_aside) == {"folder": "folder", "fifo": "fifo"}.get(kind, "file")
    if content is not None:
        assert bad.set_aside.read_bytes() == content          # nothing lost
    assert str(bad.set_aside) in bad.message()
    assert journal.scan_journals().unreadable == []          # not read again at each start


def test_the_window_says_where_an_unreadable_journal_went(gui, qtbot, make_window, questions):
    path = _dead_journal(lines=["{torn", "\x00\x01"])
    win = make_window()
    qtbot.waitUntil(lambda: "set aside" in win.log.plain_text(), timeout=10_000)
    assert str(path) + ".unreadable" in win.log.plain_text()
    assert Path(str(path) + ".unreadable").is_file() and questions.asked == []


BAD_STARTS = ["NaN", "Infinity", "-Infinity", "1e400", '"noon"', "[1]", "true", "-5", "1e30",
              "null", "{}", "99999999999999999999999999999999999999999"]


@pytest.mark.parametrize("started", BAD_STARTS)
def test_a_start_time_of_the_wrong_kind_is_replaced_not_a_traceback(started):
    from gui.journal import find_orphans

    path = _dead_journal(header='{"journal": 1, "pid": 5, "started": %s}' % started)
    (orphan,) = find_orphans()
    assert orphan.path == path and [r.m for r in orphan.records] == [16, 32]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", orphan.when())
    assert orphan.label().startswith("restored session (")


BAD_LINES = ['{"run": 1, "final": "ab"}', '{"run": 1, "final": {"backend": "cpu"}}',
             '{"run": 1, "final": [1, 2]}', '{"run": 1.5, "record": {}}', '{"run": true, "drop": true}',
             '{"run": "1", "drop": true}', '{"run": 1, "record": [1]}', '{"run": 1, "record": null}',
             '{"run": 1}', '[1]', '"x"', 'NaN', '{"run": 1, "drop": "yes", "record": 5}']


@pytest.mark.parametrize("line", BAD_LINES)
def test_a_line_with_a_field_of_the_wrong_type_is_skipped(line):
    from gui.journal import read_journal

    good = json.dumps({"run": 2, "record": records.to_dict(_record(3))})
    journal = read_journal(_dead_journal(lines=[line, good]))
    assert [r.m for r in journal.records] == [48] and journal.skipped == 1


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.dictionaries(st.sampled_from(["journal", "started", "pid"]), _json),
       lines=st.lists(st.dictionaries(st.sampled_from(["run", "record", "final", "drop"]), _json),
                      max_size=4))
@pytest.mark.slow
def test_any_journal_fields_read_without_a_traceback(header, lines):
    from gui.journal import read_journal

    path = _dead_journal(header=json.dumps({"journal": 1, **header}),
                         lines=[json.dumps(x) for x in lines])
    journal = read_journal(path)
    journal.when()
    assert journal.skipped <= len(lines)


def test_a_dead_session_with_a_nan_start_is_offered_with_its_date(gui, qtbot, make_window, questions):
    _dead_journal(header='{"journal": 1, "pid": 5, "started": NaN}')
    questions.answer = "Restore"
    win = make_window()
    qtbot.waitUntil(lambda: len(win.store) == 2, timeout=10_000)
    (title, text), = questions.asked
    assert re.search(r"\(\d{4}-\d\d-\d\d \d\d:\d\d\)", text)


# --- settings ---------------------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", HOSTILE_KINDS + ["garbage"])
def test_a_settings_file_that_is_no_settings_file_still_starts_the_window(gui, kind, make_window,
                                                                          tmp_path):
    from gui.settings import ini_settings

    path = tmp_path / "settings.ini"
    if kind == "garbage":
        path.write_bytes(b"\x00\xff[window\n=\x7f@Variant(\n" + bytes(range(256)) * 16)
    else:
        _make(path, kind)
    win = make_window(ini_settings(path))
    log = _flat(win.log.plain_text())
    assert win.isVisible() and win.config.build_plan() is not None
    if kind != "garbage":
        words = {"folder": "is a directory", "fifo": "is a named pipe",
                 "link_loop": "is a loop of symbolic links", "device": "is a device"}[kind]
        assert f"settings: {path} {words}" in log and "settings are not kept this session" in log
        assert _kind_of(path) == {"folder": "folder", "fifo": "fifo"}.get(kind, "link")


@pytest.mark.slow
def test_a_settings_file_reached_through_a_link_is_rewritten_through_it(gui, make_window, tmp_path):
    """Screening removes a stored object from the file; a settings file kept elsewhere and
    linked (dotfiles) stays linked: its target is rewritten."""
    from gui.settings import ini_settings

    target = tmp_path / "dotfiles" / "matmul.ini"
    target.parent.mkdir()
    target.write_text("[view]\ndark=true\n[window]\nstate=@Variant(\\0\\0\\0\\x7f)\n")
    link = tmp_path / "settings.ini"
    link.symlink_to(target)
    win = make_window(ini_settings(link))
    assert "window/state held a stored object" in win.log.plain_text()
    assert link.is_symlink() and "@Variant" not in target.read_text()
    assert win.dark_action.isChecked()


# --- profile reports --------------------------------------------------------------------


def test_a_report_folder_that_cannot_be_used_fails_the_profile_not_the_app(fake_ncu, tmp_path):
    req = profile.ProfileRequest("naive", {"block": 16}, 64, 64, 64)
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = profile.run_profile(req, blocker / "reports")
    assert not res.ok and f"the report folder {blocker / 'reports'} cannot be used" in res.error
    (tmp_path / "reports" / f"{req.stem()}.target.json").mkdir(parents=True)
    res = profile.run_profile(req, tmp_path / "reports")
    assert not res.ok and "cannot be used" in res.error


def test_a_csv_copy_that_cannot_be_written_keeps_the_counters(fake_ncu, tmp_path):
    req = profile.ProfileRequest("naive", {"block": 16}, 2048, 2048, 2048)
    (tmp_path / f"{req.stem()}.csv").mkdir()
    res = profile.run_profile(req, tmp_path)
    assert res.ok and res.counters and not res.csv_path
    assert "the counters' CSV" in res.warning and "is a folder" in res.warning
    rec = ResultRecord(backend="cuda", device="GPU", variant="naive", params={"block": 16},
                       m=2048, n=2048, k=2048, dtype="float32", status="ok", median_ms=1.0,
                       host=profile_host())
    said = []
    profile.profile_records([rec], tmp_path, log=lambda level, text: said.append((level, text)))
    assert rec.profile["counters"]
    assert any(level == "warning" and "CSV" in text for level, text in said)


def profile_host() -> str:
    from engine.run.runner import HOST
    return HOST


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", HOSTILE_KINDS + ["list", "garbage"])
def test_the_profiled_process_report_is_read_guarded(kind, tmp_path):
    path = tmp_path / "x.target.json"
    if kind == "list":
        path.write_text('[{"error": "x"}]')
    elif kind == "garbage":
        path.write_bytes(b"\xff{")
    else:
        _make(path, kind)
    assert profile._target_said(path) == {}


def test_the_profiled_process_says_when_it_cannot_write_its_report(tmp_path, capsys):
    folder = tmp_path / "said.json"
    folder.mkdir()
    assert profile_target.target_main(["--variant", "no_such_variant", "--shape", "8x8x8",
                                "--json", str(folder)]) == 1
    assert "the profile target's report" in capsys.readouterr().err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", HOSTILE_KINDS)
def test_driver_params_that_are_no_file_do_not_hang(kind, tmp_path):
    path = tmp_path / "params"
    _make(path, kind)
    assert profile.counters_restricted(path) is False


# --- results files (records.save) ---------------------------------------------------------


SAVE_WHEN_FULL = textwrap.dedent(r"""
    import resource, sys
    from engine.results import records
    from engine.results.records import ResultRecord

    recs = [ResultRecord(backend="cpu", device="CPU", variant="cpu_numpy", params={}, m=i, n=i,
                         k=i, dtype="float32", median_ms=0.1, status="ok") for i in range(1, 200)]
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))
    try:
        records.save(recs, sys.argv[1])
    except OSError as exc:
        print(exc)
""")


def test_a_results_file_is_written_through_its_link_and_kept_whole_on_a_full_disk(tmp_path):
    target = tmp_path / "elsewhere" / "results.json"
    target.parent.mkdir()
    link = tmp_path / "results.json"
    link.symlink_to(target)
    records.save([_record(1)], link)
    assert link.is_symlink() and [r["m"] for r in json.loads(target.read_text())["records"]] == [16]
    before = target.read_bytes()
    proc = subprocess.run([sys.executable, "-c", SAVE_WHEN_FULL, str(link)], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=60,
                          preexec_fn=_limited(resource.RLIM_INFINITY))
    assert "was not written (File too large); the earlier file is unchanged" in proc.stdout, proc.stderr
    assert target.read_bytes() == before and link.is_symlink()
    assert sorted(p.name for p in target.parent.iterdir()) == ["results.json"]
