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


# --- the keys records once kept in ``extra``: named fields ------------------------------------

OLD_EXTRA = {"by_shape": ["crows"], "newer_source": "k.cu changed", "build_failed": True,
             "timing_note": "not back to back", "precision": "tf32", "peak_gflops": 480000.0,
             "copy_gbps": 3000.0, "note": "kept"}


@pytest.mark.parametrize("ext", ["json", "csv"])
def test_an_old_files_extra_keys_load_as_fields_and_save_as_fields(tmp_path, ext):
    row = records.to_dict(_rec(RecordStatus.OK))
    for key in records.EXTRA_FIELDS:
        del row[key]                        # a file from before these were fields
    row["extra"] = dict(OLD_EXTRA)
    old = tmp_path / "old.json"
    old.write_text(json.dumps([row]))
    (rec,) = records.load(old)
    assert (rec.by_shape, rec.newer_source, rec.build_failed, rec.timing_note, rec.precision,
            rec.peak_gflops, rec.copy_gbps) == (["crows"], "k.cu changed", True,
                                                "not back to back", "tf32", 480000.0, 3000.0)
    assert rec.extra == {"note": "kept"} and records.is_valid(rec)
    assert rec.series_label() == "naive[block=8]"        # by_shape names crows, not block
    new = records.save([rec], tmp_path / f"new.{ext}")
    (again,) = records.load(new)
    assert repr(again) == repr(rec)
    if ext == "json":
        (saved,) = json.loads(new.read_text())["records"]
        assert saved["precision"] == "tf32" and saved["extra"] == {"note": "kept"}


def test_the_new_fields_are_checked_like_every_field(tmp_path):
    rows = [dict(records.to_dict(_rec(RecordStatus.OK)), **bad) for bad in (
        {"peak_gflops": -1}, {"build_failed": "maybe"}, {"by_shape": [3]}, {"timing_note": 5})]
    rows.append(records.to_dict(_rec(RecordStatus.OK)))
    path = tmp_path / "r.json"
    path.write_text(json.dumps(rows))
    recs, skipped = records.load_report(path)
    assert len(recs) == 1
    assert [s.split(":")[1].strip() for s in skipped] == [
        "field 'peak_gflops' is -1, not a number ≥ 0",
        "field 'build_failed' is 'maybe', not a boolean (true or false)",
        "field 'by_shape' is a list, not a list of names",
        "field 'timing_note' is 5, not text"]


def test_a_record_made_in_code_with_the_old_keys_gets_its_fields():
    rec = ResultRecord(backend="cpu", device="host", variant="naive", params={}, m=1, n=1, k=1,
                       dtype="float32", extra={"precision": "int32", "other": 1})
    assert rec.precision == "int32" and rec.extra == {"other": 1}
