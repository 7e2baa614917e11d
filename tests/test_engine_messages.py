"""The typed words and messages where data travels: enums through results files, and the
process protocol's dataclasses through pickle and a real engine process."""
import dataclasses
import json
import pickle

import pytest

from engine.results import records
from engine.results.records import RecordStatus, ResultRecord
from engine.run import messages as msg
from engine.run.events import EventKind, LogLevel, Phase
from engine.run.runner import Event, Plan


def _rec(status) -> ResultRecord:
    return ResultRecord(backend="cpu", device="host", variant="naive", params={"block": 8},
                        m=4, n=5, k=6, dtype="float32", status=status, median_ms=1.5)


@pytest.mark.parametrize("ext", ["json", "csv"])
def test_statuses_travel_through_a_results_file_as_their_words(tmp_path, ext):
    path = records.save([_rec(s) for s in RecordStatus], tmp_path / f"r.{ext}")
    text = path.read_text()
    for s in RecordStatus:
        assert (f'"status": "{s.value}"' if ext == "json" else f",{s.value},") in text
    back = records.load(path)
    assert [r.status for r in back] == list(RecordStatus)
    assert all(type(r.status) is RecordStatus for r in back)


def test_an_unknown_status_is_the_field_error_it_always_was(tmp_path):
    path = tmp_path / "r.json"
    rows = [records.to_dict(_rec(RecordStatus.OK)), records.to_dict(_rec(RecordStatus.OK))]
    rows[1]["status"] = "exploded"
    path.write_text(json.dumps(rows))
    recs, skipped = records.load_report(path)
    assert len(recs) == 1 and type(recs[0].status) is RecordStatus
    assert skipped == ["record 2: field 'status' is 'exploded', not one of "
                       "ok, failed, error, skipped, unverified"]


def test_words_given_as_text_become_the_enums():
    assert type(_rec("failed").status) is RecordStatus
    ev = Event("phase", "compile", level="warning")
    assert (ev.kind, ev.message, ev.level) == (EventKind.PHASE, Phase.COMPILE, LogLevel.WARNING)
    assert type(ev.message) is Phase and ev.kind == "phase"      # still the plain word
    with pytest.raises(ValueError):
        Event("exploded")


def _every_message():
    from engine.measure.backends.base import DeviceInfo
    info = DeviceInfo(backend="cpu", index=0, name="host")
    plan = Plan(backend="cpu", items=[("naive", {"block": 8})], shapes=[(4, 5, 6)])
    ev = Event(EventKind.RESULT, record=_rec(RecordStatus.OK), done=1, total=1)
    return [msg.OpenDevice("cpu", 0), msg.RunTask(plan), msg.Cancel(), msg.SetThreads(3),
            msg.Shutdown(), msg.Opened(info, "numpy 2", "host"), msg.EventMessage(ev),
            msg.Done([_rec(RecordStatus.FAILED)]), msg.Lost("gone", _rec(RecordStatus.ERROR)),
            msg.Failed("no")]


def test_every_message_pickles_to_an_equal_one():
    for m in _every_message():
        back = pickle.loads(pickle.dumps(m))
        assert type(back) is type(m) and dataclasses.is_dataclass(back)
        assert repr(back) == repr(m)         # NaN fields differ under ==, not in repr
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(back, "x", 1)


def test_an_engine_process_speaks_the_messages():
    """The child's end and the parent's end agree: open, run, replies by type, shut down."""
    from engine.run.process import ProcessEngine
    eng = ProcessEngine("cpu", 0)
    try:
        eng._start()
        eng._send(msg.OpenDevice("cpu", 0))
        got = None
        while got is None:
            got = eng._receive(60.0)
        assert isinstance(got, msg.Opened) and got.info.backend == "cpu"
        eng._send(msg.RunTask(Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(8, 8, 8)],
                                   warmup=0, repeats=2)))
        replies = []
        while not replies or not isinstance(replies[-1], (msg.Done, msg.Failed, msg.Lost)):
            r = eng._receive(60.0)
            if r is not None:
                replies.append(r)
        assert isinstance(replies[-1], msg.Done), replies[-1]
        kinds = [r.event.kind for r in replies[:-1]]
        assert all(isinstance(r, msg.EventMessage) for r in replies[:-1])
        assert EventKind.RESULT in kinds and EventKind.FINISHED in kinds
        (rec,) = replies[-1].records
        assert rec.status is RecordStatus.OK and rec.passed is True
    finally:
        assert eng.close(10.0)
