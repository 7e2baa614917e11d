"""A journal of this session's results, so that a crash or a kill loses none of them.

Every result a run delivers is appended to a journal file in the user-data folder as
one JSON line and flushed at once, so the operating system holds it even when the app
is killed a moment later.  When the results are safe by other means (the window
closed cleanly, they were cleared, or saved to a file that holds them all) the journal
is *done*: deleted.  A journal still there at the next start belongs to a session that
crashed or was killed; the window offers to restore its records.

The format is small and forgiving, because the last line of a killed session may be
torn: line 1 is a header, then one JSON object per line, ``{"run": N, "record":
{...}}`` for a result as it arrived, ``{"run": N, "final": [...]}`` for a run's
final copies (speed-ups and % of cuBLAS filled in), which replace that run's records,
and ``{"run": N, "drop": true}`` for a run whose results left the window (replaced by
the next run).
A line that does not parse, or a record that fails :func:`engine.results.records.validate`,
is skipped.  Files are named ``session-<pid>-<process start>.jsonl``: a journal whose
process is still alive (another window, another instance of the app) is never offered.

A journal that cannot be read at all (not a regular file, far too large, every line
damaged) is never deleted: it is renamed ``<name>.unreadable`` beside itself and the
window says where (:func:`scan_journals`).  A journal folder that cannot be written is
said in the window at start (:attr:`SessionJournal.problem`) and whenever a write fails.
"""
from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterable

from engine.results import records
from engine.common.files import read_bytes
from engine.results.records import ResultRecord
# The user-data folder (``$MATMUL_LAB_DATA`` in tests) holds the journal and user kernels.
from engine.kernels.user_kernels import DATA_DIR_ENV, data_dir  # noqa: F401  (re-exported)

JOURNAL_SUFFIX = ".jsonl"
JOURNAL_FORMAT = 1
#: A journal past this size is not read (a session writes about 1 KiB per result).
MAX_JOURNAL_BYTES = 256 << 20
#: What an unreadable journal is renamed to (beside itself): no longer a journal name,
#: so it is not read again at each start, and nothing in it is lost.
UNREADABLE_SUFFIX = ".unreadable"
#: Start times taken from a journal: from 2000 to a day past now (a clock set wrong, a
#: hand-edited file); others fall back to the file's time, then to now.
_EARLIEST = 946_684_800.0
#: ``session-<pid>-<process start, ms>[.<tag>].jsonl``: the writing process, a tag for a
#: second window of one process (``w1``) or a journal taken over from a crashed session
#: (``r1``).
_NAME = re.compile(r"^session-(\d+)-(\d+)(?:\.(\w+))?\.jsonl$")


def journal_dir() -> Path:
    return data_dir() / "journal"


def _process_start(pid: int) -> int | None:
    """When process ``pid`` started (ms since the epoch), or None when there is none."""
    try:
        import psutil  # noqa: PLC0415
        return int(psutil.Process(pid).create_time() * 1000)
    except Exception:  # noqa: BLE001  (no such process, no access: treat as gone)
        return None


def _owner_alive(path: Path) -> bool:
    """Whether the process that writes ``path`` still runs (pid and start time match,
    so a reused pid does not count)."""
    match = _NAME.match(path.name)
    if match is None:
        return False
    pid, started = int(match.group(1)), int(match.group(2))
    now = _process_start(pid)
    return now is not None and abs(now - started) <= 1000


@dataclass
class OrphanJournal:
    """A journal left by a session that did not end cleanly.

    Attributes
    ----------
    path
        The journal file.
    started
        When that session's journal began (seconds since the epoch).
    runs
        The records of each run, in run order (final copies where the run finished).
    skipped
        How many lines could not be read (a torn last line, a damaged record).
    """

    path: Path
    started: float
    runs: list[list[ResultRecord]] = field(default_factory=list)
    skipped: int = 0

    @property
    def records(self) -> list[ResultRecord]:
        return [r for run in self.runs for r in run]

    def when(self) -> str:
        """When the session began, as people read it: ``2026-05-01 14:03``."""
        try:
            return time.strftime("%Y-%m-%d %H:%M", time.localtime(self.started))
        except (ValueError, OverflowError, OSError, TypeError):
            return "unknown time"       # read_journal checks it; built by hand, it may not be

    def label(self) -> str:
        """``restored session (2026-05-01 14:03)``: the overlay source of its records."""
        return f"restored session ({self.when()})"


def _start_time(value: Any) -> float | None:
    """A journal's start time (seconds since the epoch), or None when ``value`` is none:
    not a number (true, "noon", a list), not finite, before 2000 or past tomorrow."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:            # an integer past float's range
        return None
    if not math.isfinite(value) or not _EARLIEST <= value <= time.time() + 86_400:
        return None
    return value


def _records_of(value: Any) -> list[ResultRecord]:
    """A ``final`` line's records: a list of record objects, each checked."""
    if not isinstance(value, list):
        raise ValueError("final is not a list of records")
    return [_record_of(d) for d in value]


def _record_of(value: Any) -> ResultRecord:
    if not isinstance(value, dict):
        raise ValueError("a record is not an object")
    return records.validate(records.from_dict(value))


def read_journal(path: Path) -> OrphanJournal:
    """Parse a journal, skipping what cannot be read (never raises for its content):
    every field of every line is checked, and a line with one that is wrong (a start
    time of NaN, a run that is no number, a record list that is no list) is skipped or,
    for the header's start time, replaced by the file's time.

    Raises
    ------
    ValueError
        ``path`` is not a regular file, cannot be read, or is far larger than a journal
        can be.
    """
    # Opened without blocking and size-bounded: a pipe or a device named like a journal
    # must not hang the start.
    data = read_bytes(path, path.name, ValueError, max_bytes=MAX_JOURNAL_BYTES)
    try:
        started = _start_time(path.stat().st_mtime)
    except (OSError, ValueError):
        started = None
    arrived: dict[int, list[ResultRecord]] = {}
    final: dict[int, list[ResultRecord]] = {}
    dropped: set[int] = set()
    skipped = 0
    for i, raw in enumerate(data.splitlines()):
        if not raw.strip():
            continue
        try:
            entry = json.loads(raw)
            if not isinstance(entry, dict):
                raise ValueError("not an object")
            if i == 0 and "journal" in entry:
                started = _start_time(entry.get("started")) or started
                continue
            run = entry.get("run")
            if not isinstance(run, int) or isinstance(run, bool):
                raise ValueError("run is not a number")
            if entry.get("drop") is True:
                dropped.add(run)
            elif "final" in entry:
                final[run] = _records_of(entry["final"])
            else:
                arrived.setdefault(run, []).append(_record_of(entry.get("record")))
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError,
                RecursionError):
            skipped += 1   # a torn last line, or a record damaged on disk
    runs = [final.get(n, arrived.get(n, [])) for n in sorted(set(arrived) | set(final))
            if n not in dropped]
    return OrphanJournal(path, started if started is not None else time.time(),
                         [r for r in runs if r], skipped)


@dataclass(frozen=True)
class UnreadableJournal:
    """A journal of an earlier session that could not be read: renamed to ``set_aside``
    (None when even that failed: it is left where it was), never deleted."""

    path: Path
    reason: str
    set_aside: Path | None = None

    def message(self) -> str:
        if self.set_aside is not None:
            return (f"results journal {self.path.name} of an earlier session cannot be read "
                    f"({self.reason}); it was set aside as {self.set_aside}, nothing deleted")
        return (f"results journal {self.path} of an earlier session cannot be read "
                f"({self.reason}) nor set aside; it is left as it is")


@dataclass
class JournalScan:
    """What the start found: journals to offer, oldest first, and unreadable ones."""

    orphans: list[OrphanJournal] = field(default_factory=list)
    unreadable: list[UnreadableJournal] = field(default_factory=list)


def _set_aside(path: Path, reason: str) -> UnreadableJournal:
    """Rename an unreadable journal beside itself (never over another file)."""
    aside = path.with_name(path.name + UNREADABLE_SUFFIX)
    n = 1
    while os.path.lexists(aside):
        n += 1
        aside = path.with_name(f"{path.name}{UNREADABLE_SUFFIX}-{n}")
    try:
        os.rename(path, aside)
    except OSError:
        return UnreadableJournal(path, reason)
    return UnreadableJournal(path, reason, aside)


def scan_journals(folder: Path | None = None) -> JournalScan:
    """Journals of sessions that ended without closing (their process is gone): those
    with records to offer, oldest first; those holding nothing (a session that never
    got a result, or whose runs were all replaced) are deleted; those that cannot be
    read (not a regular file, too large, every line damaged) are set aside, never
    deleted."""
    folder = journal_dir() if folder is None else folder
    scan = JournalScan()
    try:
        paths = sorted(p for p in folder.glob("session-*" + JOURNAL_SUFFIX)
                       if _NAME.match(p.name))
    except OSError:
        return scan
    for path in paths:
        if _owner_alive(path):
            continue
        try:
            orphan = read_journal(path)
        except (OSError, ValueError) as exc:
            scan.unreadable.append(_set_aside(path, str(exc).rstrip(".")))
            continue
        if orphan.runs:
            scan.orphans.append(orphan)
        elif orphan.skipped:
            scan.unreadable.append(_set_aside(
                path, f"none of its {orphan.skipped} line(s) holds a readable result"))
        else:
            discard(path)
    scan.orphans.sort(key=lambda o: o.started)
    return scan


def find_orphans(folder: Path | None = None) -> list[OrphanJournal]:
    """The journals :func:`scan_journals` offers (unreadable ones are set aside)."""
    return scan_journals(folder).orphans


def discard(path: Path) -> None:
    """Delete a journal; one that cannot be deleted is left (never an error at start)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


class SessionJournal:
    """This session's journal: :meth:`record` and :meth:`final` as results arrive,
    :meth:`done` when they are safe.

    The file is created at :meth:`prepare` (start-up) or with the first record.  A
    folder or file that cannot be made, or a write that fails (disk full, folder not
    writable), turns the journal off for the session: :attr:`problem` says why and
    ``on_problem`` hears it once; the window keeps working.

    Parameters
    ----------
    folder
        Where journals live; by default :func:`journal_dir`.
    on_problem
        Called with a message when journaling stops working.
    """

    def __init__(self, folder: Path | None = None, on_problem=None):
        self.folder = folder
        self.on_problem = on_problem
        self.path: Path | None = None
        self._fh: IO[str] | None = None
        self._failed = False
        #: Why journaling is off (the window shows it at start), or None while it works.
        self.problem: str | None = None
        #: Journals of earlier sessions whose records this session restored: they are
        #: done when this session's results are (until then, a crash keeps them).
        self.adopted: list[Path] = []

    def prepare(self) -> None:
        """Find (and make) the journal folder and file now, at start-up: the first result
        of a run must not wait for imports and file creation in the window's thread, and
        a folder that cannot be written is known (:attr:`problem`) before any result
        depends on it."""
        # The file too (an empty journal left by a crash is deleted, never offered):
        # creating it took a tenth of a second on a slow virtual disk, which a run's
        # first result must not wait for. Each result is then one short append.
        self._open()

    def _open(self) -> IO[str] | None:
        if self._fh is not None or self._failed:
            return self._fh
        folder = path = fh = None
        try:
            folder = self.folder if self.folder is not None else journal_dir()
            self.folder = folder
            folder.mkdir(parents=True, exist_ok=True)
            path = self._free_name(folder, "w")
            fh = open(path, "x", encoding="utf-8")  # noqa: SIM115  (kept open all session)
            fh.write(json.dumps({"journal": JOURNAL_FORMAT, "pid": os.getpid(),
                                 "started": time.time()}) + "\n")
            fh.flush()
        except Exception as exc:  # noqa: BLE001  (a journal problem must never stop a run)
            if fh is not None:          # made but not written (disk full): not left behind
                self._fh, self.path = fh, path
                self._fail(exc, folder)
                self._remove_own()
            else:
                self._fail(exc, folder)
            return None
        self.path, self._fh = path, fh
        return fh

    @staticmethod
    def _free_name(folder: Path, tag: str) -> Path:
        """A journal name of this process that is not taken (a second window of the
        process, or a journal taken over, gets a tag)."""
        pid = os.getpid()
        started = _process_start(pid) or int(time.time() * 1000)
        path = folder / f"session-{pid}-{started}{JOURNAL_SUFFIX}"
        n = 1
        while path.exists():
            path = folder / f"session-{pid}-{started}.{tag}{n}{JOURNAL_SUFFIX}"
            n += 1
        return path

    def _fail(self, exc: BaseException, folder: Path | None = None) -> None:
        self._failed = True
        if self._fh is not None:
            try:
                self._fh.close()
            except OSError:
                pass
            self._fh = None
        where = folder if folder is not None else self.folder
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        if isinstance(exc, (FileExistsError, NotADirectoryError)) and where is not None:
            why = f"{why}: a file is where a folder should be"
        self.problem = (f"results journal off for this session: "
                        f"{where if where is not None else 'the journal folder'} cannot be written "
                        f"({why}); results are not protected against a crash until saved")
        if self.on_problem is not None:
            self.on_problem(self.problem)

    def _write(self, entry: dict) -> None:
        fh = self._open()
        if fh is None:
            return
        try:
            # default=str: an odd value in a record's "extra" must not stop the journal.
            fh.write(json.dumps(entry, default=str) + "\n")
            fh.flush()          # in the OS's hands now: a kill of this process keeps it
        except Exception as exc:  # noqa: BLE001  (disk full, an odd value: journal off, run on)
            self._fail(exc)

    def record(self, run: int, rec: ResultRecord) -> None:
        """One result of run ``run``, as it arrived."""
        self._write({"run": run, "record": records.to_dict(rec)})

    def final(self, run: int, recs: Iterable[ResultRecord]) -> None:
        """Run ``run`` ended: these copies replace its records."""
        self._write({"run": run, "final": [records.to_dict(r) for r in recs]})

    def drop(self, run: int) -> None:
        """Run ``run``'s results left the window (the next run replaced them)."""
        if self._fh is not None:
            self._write({"run": run, "drop": True})

    def reset(self) -> None:
        """This session's journaled results are gone from the window (replaced by a new
        run, or cleared): start over.  Adopted journals stay until :meth:`done`."""
        self._remove_own()

    def done(self) -> None:
        """Every result is safe (or deliberately gone): remove this session's journal and
        the journals it restored from."""
        self._remove_own()
        for path in self.adopted:
            discard(path)
        self.adopted = []

    def adopt(self, path: Path) -> bool:
        """Take over an earlier session's journal whose records are shown now: it is
        renamed as this process's (so no other window or instance offers it again, and a
        crash of this session leaves it to the next start) and removed when this session
        is :meth:`done`.  False when it is gone (another instance took it first)."""
        try:
            new = self._free_name(path.parent, "r")
            os.rename(path, new)
        except OSError:
            return False
        self.adopted.append(new)
        return True

    def _remove_own(self) -> None:
        """Close this session's journal file and delete it."""
        fh, path = self._fh, self.path
        self._fh, self.path = None, None
        if fh is not None:
            try:
                fh.close()
            except OSError:
                pass
        if path is not None:
            discard(path)
