"""GUI: results are never lost: the journal, and restoring a session that was killed."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from engine.results import records  # noqa: E402
from engine.results.records import ResultRecord  # noqa: E402
from gui.journal import SessionJournal, find_orphans, journal_dir, read_journal  # noqa: E402

REPO = Path(__file__).resolve().parent.parent

#: The app as a user starts it (gui.app.main, the app's own engine processes), driven
#: to run a small cpu sweep; after WANT results it holds its GUI thread (so that no
#: further result is journaled) and says so; the test then kills it.
CRASHING_SESSION = r"""
import json, sys, time
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from gui.app import MainWindow, main

settings, want = sys.argv[1], int(sys.argv[2])
got = []

def on_result(rec):
    got.append(rec)
    print("RESULT " + json.dumps([rec.variant, rec.m, rec.n, rec.k, rec.median_ms]), flush=True)
    if len(got) == want:
        print("HOLDING", flush=True)
        time.sleep(300)

def drive():
    wins = [w for w in QApplication.topLevelWidgets()
            if isinstance(w, MainWindow) and w.isVisible()]
    if not wins or not wins[0].backends_ready():
        QTimer.singleShot(20, drive)
        return
    win = wins[0]
    cfg = win.config
    cfg.select("cpu", 0)
    cfg.variants.set_only(["cpu_numpy"])
    cfg.sizes.set_text("16:640:16")
    cfg.warmup.setValue(0)
    cfg.repeats.setValue(2)
    win.controller.result.connect(on_result)   # after the window's own slot: journaled first
    assert win.start_run()

QTimer.singleShot(0, drive)
sys.exit(main(["--settings", settings]))
"""


def _record(i: int, **kw) -> ResultRecord:
    base = dict(backend="cpu", device="CPU", variant="cpu_numpy", params={}, m=16 * i, n=16 * i,
                k=16 * i, dtype="float32", median_ms=0.1 * i, status="ok")
    base.update(kw)
    return ResultRecord(**base)


def _journals() -> list[Path]:
    folder = journal_dir()
    return sorted(folder.glob("*.jsonl")) if folder.is_dir() else []


def _dead_session_journal(recs_per_run: list[list[ResultRecord]], pid: int = 999_999_999) -> Path:
    """A journal as a session whose process is gone leaves it."""
    folder = journal_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"session-{pid}-1700000000000.jsonl"
    lines = [json.dumps({"journal": 1, "pid": pid, "started": 1_700_000_000.0})]
    for run, recs in enumerate(recs_per_run, 1):
        lines += [json.dumps({"run": run, "record": records.to_dict(r)}) for r in recs]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_a_killed_session_is_offered_and_restored(qtbot, tmp_path, make_window, questions):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", CRASHING_SESSION, str(tmp_path / "app.ini"), "3"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    seen = []
    try:
        for line in proc.stdout:
            if line.startswith("RESULT "):
                seen.append(tuple(json.loads(line[7:])))
            elif line.startswith("HOLDING"):
                break
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert len(seen) == 3, "the app did not get to three results"
    assert len(_journals()) == 1

    questions.answer = "Restore"
    win = make_window()
    qtbot.waitUntil(lambda: len(win.store) == 3, timeout=10_000)
    assert len(questions.asked) == 1
    title, text = questions.asked[0]
    assert title == "Restore results?" and "3 results had not been saved" in text
    got = sorted((r.variant, r.m, r.n, r.k, r.median_ms) for r in win.store.records)
    assert got == sorted(seen)
    (source,) = win.store.sources()
    assert source.startswith("restored session (")
    assert win.charts.curves("runtime")             # drawn like an opened file
    assert "restored 3 results" in win.log.plain_text()

    # Taken over by this window: a second one is not offered them again...
    other = make_window()
    qtbot.wait(50)
    assert len(questions.asked) == 1 and len(other.store) == 0
    # ...and a clean close of the window that shows them marks them done (the other
    # window's own journal, empty, goes with its own close).
    win.close()
    qtbot.waitUntil(lambda: not win.isVisible(), timeout=10_000)
    other.close()
    qtbot.waitUntil(lambda: not other.isVisible(), timeout=10_000)
    assert _journals() == []


def test_live_results_are_journaled_until_saved_cleared_or_closed(qtbot, make_window, configure,
                                                                  tmp_path):
    win = configure(make_window(), "cpu", ("cpu_numpy",), "32,48,64")
    with qtbot.waitSignal(win.controller.finished, timeout=30_000):
        win.start_run()
    (path,) = _journals()
    journal = read_journal(path)
    # The run's final copies, field for field, as the window shows them.
    assert [records.to_dict(r) for r in journal.records] == \
        [records.to_dict(r) for r in win.store.records]
    # A journal of a live process is never offered (this one is ours).
    assert find_orphans() == []

    assert win.save_results(tmp_path / "all.json")     # a file holding everything: done
    assert _journals() == []
    with qtbot.waitSignal(win.controller.finished, timeout=30_000):
        win.start_run()
    assert len(_journals()) == 1
    win.clear_results()                                  # cleared by choice: done
    assert _journals() == []
    with qtbot.waitSignal(win.controller.finished, timeout=30_000):
        win.start_run()
    assert len(_journals()) == 1
    win.close()                                          # a clean close: done
    qtbot.waitUntil(lambda: not win.isVisible(), timeout=10_000)
    assert _journals() == []


def test_a_replaced_run_is_not_restored_but_a_kept_one_is(qtbot, make_window, configure):
    win = configure(make_window(), "cpu", ("cpu_numpy",), "32,48")
    win.keep_runs_action.setChecked(True)
    for sizes in ("32,48", "64"):
        win.config.sizes.set_text(sizes)
        with qtbot.waitSignal(win.controller.finished, timeout=30_000):
            win.start_run()
    win.keep_runs_action.setChecked(False)                # the third run replaces the second
    win.config.sizes.set_text("80")
    with qtbot.waitSignal(win.controller.finished, timeout=30_000):
        win.start_run()
    (path,) = _journals()
    runs = read_journal(path).runs
    assert [[r.m for r in run] for run in runs] == [[32, 48], [80]]
    assert sorted(r.m for r in win.store.records) == [32, 48, 80]


def test_torn_lines_and_damaged_records_are_skipped(tmp_path):
    path = _dead_session_journal([[_record(1), _record(2)], [_record(3)]])
    with path.open("a") as fh:
        fh.write(json.dumps({"run": 2, "record": records.to_dict(_record(4, m=0))}) + "\n")
        fh.write('{"run": 2, "record": {"backend": "cpu", "vari')      # killed mid-write
    journal = read_journal(path)
    assert [[r.m for r in run] for run in journal.runs] == [[16, 32], [48]]
    assert journal.skipped == 2
    assert journal.label().startswith("restored session (2023-11-")


def test_a_run_that_finished_restores_its_final_copies(tmp_path):
    journal = SessionJournal(folder=tmp_path)
    first = [_record(1), _record(2)]
    for r in first:
        journal.record(1, r)
    final = [_record(1, speedup_vs_naive=1.0), _record(2, speedup_vs_naive=2.5)]
    journal.final(1, final)
    journal.record(2, _record(3))
    restored = read_journal(journal.path)
    assert [[r.speedup_vs_naive for r in run] for run in restored.runs][0] == [1.0, 2.5]
    assert [r.m for r in restored.runs[1]] == [48]
    journal.done()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("answer", ["Not now", "Discard"])
def test_not_now_keeps_the_journal_and_discard_deletes_it(qtbot, make_window, questions, answer):
    path = _dead_session_journal([[_record(1), _record(2)]])
    questions.answer = answer
    win = make_window()
    qtbot.waitUntil(lambda: bool(questions.asked), timeout=10_000)
    assert len(win.store) == 0
    assert path.exists() == (answer == "Not now")


def test_several_runs_restore_as_sources_of_their_own(qtbot, make_window, questions):
    _dead_session_journal([[_record(1), _record(2)], [_record(1), _record(2)]])
    questions.answer = "Restore"
    win = make_window()
    qtbot.waitUntil(lambda: len(win.store) == 4, timeout=10_000)
    sources = win.store.sources()
    assert len(sources) == 2 and all(s.startswith("restored session (") for s in sources)
    assert sources[0].endswith("run 1") and sources[1].endswith("run 2")


def test_an_unwritable_data_folder_turns_the_journal_off_and_the_run_goes_on(
        qtbot, make_window, configure, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    monkeypatch.setenv("MATMUL_LAB_DATA", str(blocker))
    win = configure(make_window(), "cpu", ("cpu_numpy",), "32,48")
    with qtbot.waitSignal(win.controller.finished, timeout=30_000):
        win.start_run()
    assert len(win.store) == 2
    log = win.log.plain_text()
    assert log.count("results journal off for this session") == 1
