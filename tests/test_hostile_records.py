"""Issue 35, classes 8 and 11 (records): every field of a record read from a results file
is checked, and a wrong one is named in the user's words ("record 3: field
'device_index' is 1.5, not a whole number"); the Profile view shows any record it is
given without failing.

Hypothesis puts a value of the wrong type or range into each field of a good record
(JSON and CSV); the reader may keep the record (a value that means the same, "16" for
16) or skip it, and then the reason must name that field. Nothing but the app's own
ResultsFileError may come out, and Python's own wording ("invalid literal for int()",
"could not convert") never reaches the user.
"""
from __future__ import annotations

import copy
import csv
import io
import json
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from engine.results import records
from engine.results.records import FIELDS, RecordFieldError, ResultRecord

FUZZ = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
PYTHON_WORDING = ("invalid literal", "could not convert", "object has no attribute",
                  "not subscriptable", "NoneType", "unhashable", "Traceback")

GOOD = {"backend": "cuda", "device": "NVIDIA H200", "variant": "naive", "params": {"block": 16},
        "m": 64, "n": 64, "k": 64, "dtype": "float32", "mode": "hot", "warmup": 3,
        "repeats": 20, "median_ms": 1.5, "min_ms": 1.4, "max_ms": 1.6, "mean_ms": 1.5,
        "noise_pct": 2.0, "gflops": 350.0, "gbps": 10.0, "verify_method": "full",
        "rel_l2": 1e-7, "max_abs": 1e-5, "passed": True, "status": "ok", "flops": 524288,
        "bytes": 49152, "device_index": 1, "host": "gpu-host", "worker": "local",
        "extra": {"precision": "fp32", "by_shape": [], "peak_gflops": 60000.0},
        "profile": {"counters": {"dram_read_bytes": 1024.0, "achieved_occupancy": 50.0},
                    "kernels": [{"name": "matmul", "duration_ns": 1500.0}],
                    "report": "naive.ncu-rep", "tool": "ncu 2024.1", "error": ""}}

JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=3),
    max_leaves=8)
#: Values that are wrong for nearly every field: the other kinds, out-of-range numbers.
HOSTILE = (JSONISH | st.sampled_from([1.5, -1, -7, 0, 2**40, 10**30, 1e300, math.inf, "1.5",
                                      "abc", "", " ", "nan", "inf", "-1", "16x", "\x1b[2J",
                                      [1, 2], {"a": 1}, True, False, None, "auto"]))
#: Where profile and extra hide their own fields.
NESTED = [("profile", "counters"), ("profile", "kernels"), ("profile", "report"),
          ("profile", "tool"), ("profile", "error"), ("extra", "by_shape"),
          ("extra", "precision"), ("extra", "peak_gflops"), ("extra", "build_failed")]


def _write_json(tmp_path, rows, name="r.json"):
    p = tmp_path / name
    p.write_text(json.dumps(rows, allow_nan=True))
    return p


def _load(path):
    """load_report's outcome as (records, reasons): a file with no valid record gives its
    one ResultsFileError message as the reason."""
    try:
        return records.load_report(path)
    except records.ResultsFileError as exc:
        return [], [str(exc)]


def _assert_user_words(text: str) -> None:
    assert not any(w in text for w in PYTHON_WORDING), text


@FUZZ
@given(field=st.sampled_from(FIELDS), value=HOSTILE)
def test_any_value_in_any_field_is_kept_valid_or_skipped_naming_the_field(tmp_path_factory, field,
                                                                          value):
    row = dict(GOOD, **{field: value})
    try:
        path = _write_json(tmp_path_factory.mktemp("r"), [row, GOOD])
    except (ValueError, TypeError):
        return
    recs, skipped = records.load_report(path)      # GOOD keeps the file: never raises
    assert recs[-1].variant == "naive" and len(recs) + len(skipped) == 2
    if skipped:
        (reason,) = skipped
        assert reason.startswith(f"record 1: field '{field}") or (
            field in records.REQUIRED and value is None and "record 1:" in reason), reason
        _assert_user_words(reason)
    else:
        kept = recs[0]
        records.validate(copy.copy(kept))          # what is kept passes the same rules
        if field in ("m", "n", "k", "device_index", "warmup", "repeats", "flops", "bytes"):
            got = getattr(kept, field)
            assert isinstance(got, int) and not isinstance(got, bool)
            # 16.0 is 16, 1.5 never 1; a whole number is kept exactly (10**30 is not 1e30)
            assert value in (None, "", " ") or (value if isinstance(value, int) else float(value)) == got


@FUZZ
@given(where=st.sampled_from(NESTED), value=HOSTILE)
@pytest.mark.slow
def test_profile_and_extra_fields_are_checked_by_shape(tmp_path_factory, where, value):
    outer, inner = where
    row = copy.deepcopy(GOOD)
    row[outer][inner] = value
    try:
        path = _write_json(tmp_path_factory.mktemp("r"), [row, GOOD])
    except (ValueError, TypeError):
        return
    recs, skipped = records.load_report(path)
    if skipped:
        assert skipped[0].startswith(f"record 1: field '{outer}.{inner}"), skipped[0]
        _assert_user_words(skipped[0])
    else:
        # Kept: then the Profile view's typed form of it has the right shape.
        data = records.profile_data(recs[0])
        assert isinstance(data.counters, dict) and all(
            isinstance(v, float) and math.isfinite(v) for v in data.counters.values())
        assert isinstance(data.kernels, list) and all(isinstance(k, dict) for k in data.kernels)
        assert all(isinstance(x, str) for x in (data.report, data.tool, data.error))
        by_shape = recs[0].by_shape        # an old file's extra key, now the record's field
        assert isinstance(by_shape, list) and all(isinstance(x, str) for x in by_shape)


def _csv_text(rows: list[dict]) -> str:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=FIELDS)
    w.writeheader()
    for r in rows:       # as records.save writes them: params as name=value pairs
        w.writerow({k: (records.params_to_str(v) if k == "params" and isinstance(v, dict) else
                        json.dumps(v) if isinstance(v, (dict, list)) else
                        "" if v is None else v) for k, v in r.items()})
    return out.getvalue()


@FUZZ
@given(field=st.sampled_from(FIELDS), text=st.text(max_size=12) | st.sampled_from(
    ["1.5", "-1", "abc", "nan", "inf", "1e400", "16.0", "{not json", "[1]", "a=x", "=3",
     "block=16,wpt", "maybe", "9" * 500]))
def test_csv_cells_of_any_text_name_the_field_and_the_row(tmp_path_factory, field, text):
    assume("\x00" not in text)               # csv refuses NUL; a separate reader error
    row = dict(GOOD, **{field: text})
    path = tmp_path_factory.mktemp("r") / "r.csv"
    path.write_text(_csv_text([row, GOOD]), newline="")
    recs, skipped = _load(path)
    for reason in skipped:
        _assert_user_words(reason)
        assert f"field '{field}" in reason or "lacks the field" in reason or \
            "not a results file" in reason, reason
        assert "row 1 (line 2)" in reason or "not a results file" in reason, reason
    for r in recs:
        records.validate(copy.copy(r))


def test_a_whole_number_field_never_rounds(tmp_path):
    recs, skipped = records.load_report(_write_json(tmp_path, [
        dict(GOOD, device_index=1.5), dict(GOOD, device_index="1.5"), dict(GOOD, m=16.7),
        dict(GOOD, m=16.0), GOOD]))
    assert skipped == ["record 1: field 'device_index' is 1.5, not a whole number",
                       "record 2: field 'device_index' is '1.5', not a whole number",
                       "record 3: field 'm' is 16.7, not a whole number"]
    assert recs[0].m == 16 and recs[1].device_index == 1


def test_csv_params_that_are_not_numbers_name_the_parameter(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text("backend,variant,m,n,k,dtype,params\ncuda,naive,8,8,8,float32,block=x\n"
                 "cuda,naive,8,8,8,float32,block=auto\n")
    recs, skipped = records.load_report(p)
    assert skipped == ["row 1 (line 2): field 'params.block' is 'x', not a whole number"]
    assert recs[0].params == {"block": records.AUTO}


def test_profile_of_the_wrong_shape_is_skipped_with_its_field(tmp_path):
    rows = [dict(GOOD, profile={"counters": {"a": 1.0}, "kernels": "abc"}),
            dict(GOOD, profile={"counters": "abc"}), dict(GOOD, profile=[1, 2]),
            dict(GOOD, profile={"counters": {"a": "1.5"}}), dict(GOOD, extra={"by_shape": 5}),
            dict(GOOD, profile={"counters": {"a": math.inf}}), GOOD]
    recs, skipped = records.load_report(_write_json(tmp_path, rows))
    assert len(recs) == 1 and [s.split(": ", 1)[1] for s in skipped] == [
        "field 'profile.kernels' is 'abc', not a list of kernels",
        "field 'profile.counters' is 'abc', not a mapping",
        "field 'profile' is a list, not a mapping",
        "field 'profile.counters.a' is '1.5', not a number",
        "field 'extra.by_shape' is 5, not a list of names",
        "field 'profile.counters.a' is inf, not a finite number"]


def test_validate_names_the_field_of_a_record_made_in_code():
    rec = records.from_dict(GOOD)
    for field, bad in (("device_index", 1.5), ("m", "64"), ("median_ms", -1.0),
                       ("profile", "x"), ("status", "weird"), ("params", {"block": None})):
        broken = copy.copy(rec)
        setattr(broken, field, bad)
        if field == "m":          # text that means the number is normalised, not refused
            assert records.validate(broken).m == 64
            continue
        with pytest.raises(RecordFieldError) as info:
            records.validate(broken)
        assert info.value.field.startswith(field), info.value
        assert not records.is_valid(broken) and getattr(broken, field) == bad  # untouched


def test_json_nested_too_deeply_is_said_in_words(tmp_path):
    p = tmp_path / "deep.json"
    p.write_text("[" * 200_000)
    with pytest.raises(records.ResultsFileError, match="nested too deeply") as info:
        records.load_report(p)
    assert "recursion" not in str(info.value)


def test_huge_integers_in_json_name_their_field(tmp_path):
    p = tmp_path / "big.json"
    p.write_text(json.dumps([GOOD]).replace('"m": 64', '"m": ' + "9" * 5000))
    recs, skipped = _load(p)
    assert not recs and "field 'm' is" in skipped[0] and "4300" not in skipped[0]


# --- the Profile view -----------------------------------------------------------------

def _profile_record(**changes) -> ResultRecord:
    rec = records.from_dict(GOOD)
    for k, v in changes.items():
        setattr(rec, k, v)
    return rec


@st.composite
def any_record(draw):
    """A ResultRecord made in code, one or two of its fields (or its profile's) anything."""
    rec = records.from_dict(copy.deepcopy(GOOD))
    for field in draw(st.lists(st.sampled_from(FIELDS), max_size=2)):
        setattr(rec, field, draw(HOSTILE))
    if draw(st.booleans()):
        prof = dict(rec.profile) if isinstance(rec.profile, dict) else {}
        prof[draw(st.sampled_from(["counters", "kernels", "report", "tool", "error"]))] = \
            draw(HOSTILE)
        rec.profile = prof
    return rec


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(recs=st.lists(any_record(), min_size=1, max_size=4))
@pytest.mark.slow
def test_profile_view_shows_any_record_without_failing(qtbot, recs):
    pytest.importorskip("PySide6")
    from gui.profile_view import ProfileView  # noqa: PLC0415
    from gui.results_store import ResultStore  # noqa: PLC0415

    store = ResultStore()
    view = ProfileView(store)
    qtbot.addWidget(view)
    store.add(recs)                               # refresh: table, chart, tooltips
    shown = view.columns()
    assert all(records.is_valid(r) for r in shown)
    assert len(shown) <= len(recs)
    for row in range(view.table.rowCount()):
        view.table.setCurrentCell(row, 0)          # draws each metric's bars
    view.bar_values()
    view.show_report_folder()
    view.open_selected_report()
    store.clear()
    view.deleteLater()


def test_profile_view_keeps_good_columns_beside_broken_ones(qtbot):
    pytest.importorskip("PySide6")
    from gui.profile_view import ProfileView  # noqa: PLC0415
    from gui.results_store import ResultStore  # noqa: PLC0415

    store = ResultStore()
    view = ProfileView(store)
    qtbot.addWidget(view)
    good = _profile_record()
    broken = [_profile_record(profile={"counters": {"x": 1.0}, "kernels": "abc"}, variant="b1"),
              _profile_record(profile="not a mapping", variant="b2"),
              _profile_record(profile={"counters": [1, 2]}, variant="b3"),
              _profile_record(params=None, variant="b4")]
    store.add(broken + [good])       # before the fix: AttributeError on every refresh
    assert [r.variant for r in view.columns()] == ["naive"]
    assert view.table.columnCount() == 1 and "kernel matmul" in \
        view.table.horizontalHeaderItem(0).toolTip()


def test_gui_open_of_a_file_with_broken_profiles_names_them(qtbot, tmp_path):
    pytest.importorskip("PySide6")
    from gui.results_files import ResultsFiles  # noqa: PLC0415
    from gui.results_store import ResultStore  # noqa: PLC0415
    from gui.settings import AppSettings, ini_settings  # noqa: PLC0415

    path = _write_json(tmp_path, [dict(GOOD, profile={"counters": {"a": 1.0}, "kernels": 7}),
                                  dict(GOOD, device_index=1.5), GOOD])
    store = ResultStore()
    files = ResultsFiles(store, AppSettings(ini_settings(tmp_path / "s.ini")))
    recs, skipped = files.open(path)
    assert len(recs) == 1 and len(store) == 1
    assert skipped == ["record 1: field 'profile.kernels' is 7, not a list of kernels",
                       "record 2: field 'device_index' is 1.5, not a whole number"]
    files.close()
