"""Issue 35, classes 9, 10 and 11 on the command line (``python main.py bench``):

* every number option is checked where it is read, in words naming the option (no
  "invalid int value", no run started with --timeout nan);
* nothing the user asks is ignored in silence: an option that others make meaningless is
  refused (exit 2) or warned about, an .npz of three arrays is not A = first, B = second,
  the autotune cache's winner outside --params is said, a long ETA shows hours and days;
* user text (file names, variant names, errors, table cells) is printed literally: no
  escape code reaches the terminal, no ``:smile:`` becomes an emoji, no ``[bold]`` is
  read as markup;
* a Ray address is read before Ray is: an empty or malformed one, or a port where no
  Ray answers, is one line in words.
"""
from __future__ import annotations

import argparse
import json
import math
import socket
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import main
from cli import bench as cli
from engine.run import cluster
from engine.results import records
from engine.common import terminal
from cli.args import Number, WholeNumber

ESC = "\x1b"
HOSTILE_TEXT = ["\x1b[2J\x1b[H", ":smile:", "[bold]loud[/bold]", "tab\there", "cr\rhidden",
                "rtl\u202eevil", "bell\x07", "nul\x00byte", "bad\udcffbyte", "csi\x9b31m"]


def bench(capsys, *args):
    code = main.main(["bench", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def flat(text: str) -> str:
    return " ".join(text.split())          # rich wraps long lines


def assert_literal(text: str) -> None:
    """Nothing in ``text`` acts on a terminal; emoji codes stayed text."""
    assert ESC not in text and "\x9b" not in text and "\r" not in text, repr(text)
    assert "\u202e" not in text and "\x07" not in text and "\x00" not in text, repr(text)
    assert "😄" not in text and not any(0x1F300 <= ord(c) <= 0x1FAFF for c in text), repr(text)
    assert "Traceback" not in text, text


# --- class 11: numbers -----------------------------------------------------------------

NUMBER_CASES = [
    ("--warmup", "-1"), ("--warmup", "1.5"), ("--warmup", "nan"), ("--warmup", "1e400"),
    ("--warmup", "10001"), ("--warmup", "abc"), ("--repeats", "0"), ("--repeats", "inf"),
    ("--repeats", "9" * 300), ("--budget", "nan"), ("--budget", "inf"), ("--budget", "0"),
    ("--budget", "-1"), ("--budget", "1e9"), ("--seed", "9" * 40), ("--seed", "-3"),
    ("--seed", "0.5"), ("--launch-timeout", "nan"), ("--launch-timeout", "inf"),
    ("--launch-timeout", "0"), ("--launch-timeout=-5", None), ("--launch-timeout", "1e300"),
    ("--device", "1.5"), ("--device", "-1"), ("--device", "x"),
]


@pytest.mark.parametrize("option,value", NUMBER_CASES)
def test_every_number_option_refuses_a_bad_number_naming_it(capsys, option, value):
    args = [option] if value is None else [option, value]
    t0 = time.monotonic()
    code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "8", "--quiet", *args)
    assert code == 2 and not out
    name = option.split("=")[0]
    assert f"argument {name}:" in flat(err) and "(write " in flat(err), err
    assert "invalid" not in err and "Traceback" not in err
    assert time.monotonic() - t0 < 5          # refused as read, before any backend starts


@settings(max_examples=300, deadline=None)
@given(option=st.sampled_from(["--warmup", "--repeats", "--seed", "--budget",
                               "--launch-timeout", "--device"]),
       text=st.text(max_size=30) | st.from_regex(r"[+-]?[0-9]{0,50}(\.[0-9]*)?(e[+-]?[0-9]+)?",
                                                   fullmatch=True))
@pytest.mark.slow
def test_number_options_accept_only_their_range(option, text):
    parser = cli.build_parser()
    action = next(a for a in parser._actions if option in a.option_strings)
    kind = action.type
    try:
        value = kind(text)
    except argparse.ArgumentTypeError as exc:
        assert "(write " in str(exc) and ESC not in str(exc)
        return
    if isinstance(kind, WholeNumber):
        assert isinstance(value, int) and kind.low <= value <= kind.high
        # 1e3 is 1000, 1.5 is never 1 (the ends stripped as str.strip does: it takes \x1c-\x1f, float() not)
        assert float(text.strip()) == value
    else:
        assert isinstance(kind, Number) and math.isfinite(value)
        assert kind.low <= value <= kind.high and (kind.low_included or value > kind.low)


# --- class 10: nothing ignored in silence -----------------------------------------------

REFUSED = [
    (["--device", "0", "--devices", "0"], "--device and --devices both given"),
    (["--profile-metrics", "dram_read_bytes"], "--profile-metrics is only used with --profile"),
    (["--profile-dir", "p"], "--profile-dir is only used with --profile"),
    (["--mode", "share"], "--mode divides or repeats the work among several devices"),
    (["--budget", "1", "--repeats", "5"], "--budget replaces --repeats"),
    (["--in-process", "--launch-timeout", "5"], "with --in-process there is none"),
]


@pytest.mark.parametrize("args,message", REFUSED)
def test_options_that_others_make_meaningless_are_refused(capsys, tmp_path, monkeypatch, args,
                                                           message):
    monkeypatch.chdir(tmp_path)
    code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "8", "--quiet", *args)
    assert code == 2 and message in flat(err), err
    assert "Results" not in out and not list(tmp_path.iterdir())


def _two_arrays(tmp_path, **arrays):
    path = tmp_path / "pair.npz"
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("args,warning", [
    (["--sizes", "64"], "--sizes is not used: with --a the size is the matrices' own"),
    (["--dist", "normal"], "--dist is not used"),
    (["--seed", "5"], "--seed: A and B come from the files"),
])
def test_options_unused_with_matrix_files_are_said(capsys, tmp_path, args, warning):
    path = _two_arrays(tmp_path, a=np.ones((4, 3), np.float32), b=np.ones((3, 5), np.float32))
    code, out, err = bench(capsys, "--backend", "cpu", "--a", path, "--quiet", "--repeats", 1,
                           "--warmup", 0, "--in-process", *args)
    assert code == 0, err
    assert f"warning: {warning}" in flat(err) and "4x5x3" in out


def test_params_values_no_variant_offers_are_refused(capsys):
    from tests.helpers import require_backend  # noqa: PLC0415

    require_backend("opencl")
    for value in ("-5", "7", "16,9", "9" * 60):
        code, out, err = bench(capsys, "--backend", "opencl", "--variants", "naive,tiled",
                               "--sizes", 8, "--params", f"block={value}", "--quiet")
        assert code == 2 and "Results" not in out, err      # not a sweep of skips
        assert "is not a value of naive, tiled (they offer block=" in flat(err), err


def test_mode_with_one_device_is_said(capsys):
    code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "8", "--devices", "0",
                           "--mode", "share", "--quiet", "--repeats", 1, "--warmup", 0)
    assert code == 0 and "--mode share: one device (0) runs every item" in flat(err)


def test_int32_with_a_float_distribution_is_said(capsys):
    code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "8", "--dtype", "int32",
                           "--dist", "normal", "--quiet", "--repeats", 1, "--warmup", 0,
                           "--in-process")
    assert code == 0 and "--dist normal: int32 matrices are always whole numbers" in flat(err)


def test_list_says_which_options_it_does_not_use(capsys):
    code, out, err = bench(capsys, "--list", "--sizes", "64", "--warmup", "2")
    assert code == 0 and "Variants" in out
    assert "--list lists and exits; not used: --sizes, --warmup" in flat(err)


def test_npz_of_other_arrays_is_refused_saying_what_it_holds(capsys, tmp_path):
    m = np.ones((3, 3), np.float32)
    path = _two_arrays(tmp_path, x=m, y=m, z=m)
    code, out, err = bench(capsys, "--backend", "cpu", "--a", path, "--quiet", "--in-process")
    assert code == 2
    assert "holds 3 arrays ('x', 'y', 'z')" in flat(err) and "named 'a' and 'b'" in flat(err)
    path = _two_arrays(tmp_path, a=m, A=m, b=m)
    code, out, err = bench(capsys, "--backend", "cpu", "--a", path, "--quiet", "--in-process")
    assert code == 2 and "holds both 'a' and 'A'" in flat(err)
    # Exactly two arrays: A first, and the run says which is which.
    path = _two_arrays(tmp_path, x=np.ones((2, 3), np.float32), y=np.ones((3, 4), np.float32))
    code, out, err = bench(capsys, "--backend", "cpu", "--a", path, "--quiet", "--in-process",
                           "--repeats", 1, "--warmup", 0)
    assert code == 0 and "A is array 'x' and B is array 'y' of pair.npz" in flat(err)


def test_cached_winner_outside_params_is_said(capsys, tmp_path, monkeypatch):
    from engine.run import autotune  # noqa: PLC0415
    from engine.kernels import registry  # noqa: PLC0415
    from engine.measure.backends import probe_all  # noqa: PLC0415
    from tests.helpers import require_backend  # noqa: PLC0415

    require_backend("opencl")
    monkeypatch.setenv(autotune.CACHE_ENV, str(tmp_path / "cache.json"))
    device = probe_all()["opencl"].devices[0].name
    key = autotune.cache_key("opencl", device, "tiled", "float32", (16, 16, 16))
    (tmp_path / "cache.json").write_text(json.dumps({key: {"params": {"block": 8}}}))
    assert registry.get("tiled").space["block"] != (8,)
    code, out, err = bench(capsys, "--backend", "opencl", "--variants", "tiled", "--sizes", 16,
                           "--autotune", "--params", "block=16", "--quiet", "--repeats", 1,
                           "--warmup", 0)
    assert code == 0, err
    assert ("the cache's best, tiled[block=8], is not among the parameters asked for; it is "
            "used") in flat(err) and "tiled[block=8]" in out


def test_eta_of_hours_and_days_is_shown_in_hours_and_days(qtbot):
    pytest.importorskip("PySide6")
    from gui.run_bar import RunBar, format_duration  # noqa: PLC0415

    assert format_duration(5 * 3600 + 120) == "5 h 02 min"
    assert format_duration(3 * 86400 + 4 * 3600) == "3 d 04 h"
    assert format_duration(1e12) == "over 100 days" and format_duration(math.inf) == ""
    bar = RunBar()
    qtbot.addWidget(bar)
    bar.resize(400, 30)
    bar.set_running(True)
    bar.progressed(3, 1000, "x" * 300 + "[block=16] @ 4096", 30 * 3600.0)
    # The ETA comes before the item's (long) name: eliding cuts the name, not the ETA.
    text = bar.status.text()
    assert text.index("ETA 1 d 06 h") < text.index("xxx")
    assert "ETA 1 d 06 h" in bar.status.toolTip()


# --- class 9: user text printed literally ----------------------------------------------

@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_file_names_in_messages_are_printed_literally(capsys, tmp_path, monkeypatch, text):
    monkeypatch.chdir(tmp_path)
    name = text.replace("\x00", "").replace("/", "-") + ".npy"
    code, out, err = bench(capsys, "--backend", "cpu", "--a", name, "--quiet")
    assert code == 2 and "was not found" in err
    assert_literal(err)
    shown = terminal.visible(name)                     # the name as typed, made visible
    assert shown in err.replace("\n", "") or shown in err.replace("\n", " "), err


def test_saved_file_name_with_markup_and_emoji_is_printed_literally(capsys, tmp_path):
    for name in (":smile:.json", "[bold]x.json", "e\x1b[2J.json"):
        code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "8", "--quiet",
                               "--repeats", 1, "--warmup", 0, "--in-process",
                               "--out", tmp_path / name)
        assert code == 0, err
        assert_literal(err)
        # rich may wrap a long path anywhere: compare without the white space
        want = f"saved 1 records to {terminal.visible(tmp_path / name)}"
        assert "".join(want.split()) in "".join(err.split())


@pytest.mark.parametrize("args", [
    ["--variants", "x\x1b[2Jy"], ["--variants", ":smile:"], ["--kernels", "no\x1b[31mdir"],
    ["--sizes", "8\x1b[2J"], ["\x1b[2Jstray"], ["--backend", "\x1b[2J"], ["--params", ":smile:=1"],
    ["--ray", "\x1b[2J:1"], ["--out", "\x1b]0;title\x07.txt"],
])
def test_error_messages_quote_user_text_literally(capsys, args):
    code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "8", "--quiet", *args)
    assert code == 2
    assert_literal(out + err)
    assert "\\x1b" in err or ":smile:" in err


def _record(label_text: str, error: str = "") -> records.ResultRecord:
    return records.ResultRecord(
        backend="cpu", device=f"dev {label_text}", variant=f"v{label_text}",
        params={f"p{label_text}": 1}, m=8, n=8, k=8, dtype="float32", median_ms=1.0,
        gflops=1.0, passed=True, verify_method=f"full{label_text}", rel_l2=1e-7,
        status="ok" if not error else "error", error=error, worker=f"w{label_text}",
        host=f"h{label_text}", device_index=0,
        profile={"counters": {"dram_read_bytes": 10.0}, "tool": label_text})


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_tables_print_every_cell_literally(capsys, text):
    recs = [_record(text, error=f"failed on {text}"), _record(text + "2"),
            dataclass_with_other_device(_record(text + "3"))]
    console = terminal.console()
    console.print(cli._results_table(recs))
    best = cli.lab_best_table(recs)
    if best is not None:
        console.print(best)
    for table in cli.profile_tables(recs):
        console.print(table)
    cli._say_error(terminal.console(stderr=True), ValueError(f"bad {text}\nsecond line"))
    out, err = capsys.readouterr()
    assert_literal(out + err)
    shown = terminal.visible(text)
    assert shown[:6] in out and shown[:6] in err          # the text is there, as text


def dataclass_with_other_device(rec):
    rec.device_index, rec.host = 1, "other host"
    return rec


def test_literal_keeps_text_and_escapes_only_what_acts():
    assert terminal.visible("a\x1b[2Jb\r\n") == "a\\x1b[2Jb\\r\\n"
    assert terminal.visible("x\ny", keep_newlines=True) == "x\ny"
    assert terminal.visible("\u202e\udcff\x9b") == "\\u202e\\udcff\\x9b"
    assert terminal.visible("plain äö 中文 ✓") == "plain äö 中文 ✓"
    con = terminal.console()
    with con.capture() as cap:
        con.print(terminal.literal(":smile: [bold]x[/bold] \\"))
    assert cap.get().strip() == ":smile: [bold]x[/bold] \\"


# --- class 11: Ray addresses -------------------------------------------------------------

@pytest.mark.parametrize("address,message", [
    ("", "the Ray address is empty"), ("   ", "the Ray address is empty"),
    ("foo", "the port is missing"), ("http://h:1", "http:// is not Ray's"),
    ("h:99999", "is not a number from 1 to 65535"), ("h:0", "from 1 to 65535"),
    (":6379", "the host name before the port is missing"), ("ray://", "the port is missing"),
    ("a b:1", "'a b' is no host name"), ("h:port:1", "is no host name"),
])
def test_ray_addresses_are_read_before_ray(capsys, address, message):
    t0 = time.monotonic()
    code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "8", "--ray", address)
    assert code == 2 and f"error: --ray: " in flat(err) and message in flat(err), err
    assert "ValueError" not in err and "Invalid address format" not in err
    assert len(err.strip().splitlines()) <= 3            # one message, no Ray log before it
    assert time.monotonic() - t0 < 5


@pytest.fixture
def silent_port():
    """A TCP port that accepts connections and never says anything (no Ray there)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    stop = threading.Event()
    conns = []

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    for c in conns:
        c.close()
    srv.close()


@pytest.mark.slow
def test_a_port_where_no_ray_answers_is_said_without_rays_log(capsys, monkeypatch, silent_port):
    ok, _why = cluster.ray_status()
    if not ok:
        pytest.skip("Ray is not installed")
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 1.0)
    t0 = time.monotonic()
    code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "8",
                           "--ray", f"127.0.0.1:{silent_port}")
    assert code == 2, err
    assert f"127.0.0.1:{silent_port} answers, but not as a Ray head" in flat(err)
    assert "rpc_client" not in err and "GCS" not in err and len(err.strip().splitlines()) <= 3
    assert time.monotonic() - t0 < 10          # ray.init would retry for minutes
