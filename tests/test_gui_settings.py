"""GUI: a hand-edited, damaged or hostile settings file never stops the app: each bad
setting takes its default and says so in the Log (field by field, Hypothesis-fuzzed)."""
import json
import math
import os
import string
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from PySide6.QtCore import QByteArray  # noqa: E402

from engine.kernels import registry  # noqa: E402
from engine.measure.backends import BACKENDS  # noqa: E402
from engine.run.runner import BUDGET_RANGE, REPEATS_RANGE, WARMUP_RANGE  # noqa: E402
from gui.settings import (MAX_BLOB_BYTES, MAX_RECENT, AppSettings, clean_chart_options,  # noqa: E402
                          clean_config, ini_settings)

FAST = settings(max_examples=200, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
#: Through Qt (an ini file written and read, or a panel set) each example costs more.
QT = settings(max_examples=100, deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
WINDOWS = settings(max_examples=12, deadline=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# --- strategies ---------------------------------------------------------------------

NASTY_NUMBERS = st.sampled_from([-1, 0, 1, 2**31, 2**63, 10**30, -10**30, math.nan, math.inf,
                                 -math.inf, 1e308, -0.0, 0.5, 3.0])
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | NASTY_NUMBERS | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8)
VARIANT_NAMES = st.sampled_from(sorted(registry.REGISTRY)) | st.text(max_size=10)
VARIANTS = st.fixed_dictionaries({}, optional={
    "checked": st.dictionaries(VARIANT_NAMES, st.booleans() | JSONISH, max_size=4) | JSONISH,
    "values": st.dictionaries(
        VARIANT_NAMES,
        st.dictionaries(st.sampled_from(["block", "tile", "ts", "wpt", "bm"]) | st.text(max_size=5),
                        st.lists(st.integers(-4, 300) | JSONISH, max_size=5) | JSONISH, max_size=3)
        | JSONISH, max_size=4) | JSONISH,
    "ticks": st.sampled_from(["newcomer", "all"]) | JSONISH,
})
INPUTS = st.fixed_dictionaries({}, optional={
    "mode": st.sampled_from(["random", "files"]) | JSONISH,
    "dist": st.sampled_from(["uniform", "normal", "int"]) | JSONISH,
    "seed": st.integers(-2**40, 2**40) | JSONISH,
    "a": st.text(max_size=30) | JSONISH, "b": st.text(max_size=30) | JSONISH,
})
CONFIG = st.fixed_dictionaries({}, optional={
    "backend": st.sampled_from(BACKENDS) | JSONISH,
    "device": st.integers(-5, 5) | JSONISH,
    "devices": st.lists(st.integers(-2, 3), max_size=4) | JSONISH,
    "device_mode": st.sampled_from(["compare", "share"]) | JSONISH,
    "ray": st.booleans() | JSONISH, "ray_address": st.text(max_size=20) | JSONISH,
    "variants": VARIANTS | JSONISH,
    "sizes": st.text(alphabet=string.digits + "x:,", max_size=20) | JSONISH,
    "dtype": st.sampled_from(registry.DTYPES) | JSONISH,
    "mode": st.sampled_from(["hot", "cold"]) | JSONISH,
    "warmup": st.integers(-10, 20_000) | JSONISH,
    "repeats": st.integers(-10, 200_000) | JSONISH,
    "use_budget": st.booleans() | JSONISH,
    "budget_s": st.floats() | NASTY_NUMBERS | JSONISH,
    "verify": st.booleans() | JSONISH, "autotune": st.booleans() | JSONISH,
    "inputs": INPUTS | JSONISH,
})


def ini_quote(text: str) -> str:
    """A string as Qt writes it into an ini value."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def byte_array(data: bytes) -> str:
    return "@ByteArray(" + "".join(f"\\x{b:x}" for b in data) + ")"


RAW_VALUE = (st.text(max_size=40).map(lambda t: t.replace("\n", " "))
             | st.sampled_from(["true", "false", "maybe", "1, 2", "@Size(1 2)", "@Rect(0 0 -5 9)",
                                "@Point(1 2)", "@Invalid()", "@ByteArray()", "@Variant(\\0\\0\\0\\n)",
                                "@Variant(garbage)", "\"unterminated", "@@text", ""])
             | st.binary(max_size=40).map(byte_array)
             | st.just(byte_array(b"\x01\xd9\xd0\xcb" * (MAX_BLOB_BYTES // 4 + 10))))
JSON_VALUE = (CONFIG.map(json.dumps) | JSONISH.map(json.dumps)
              | st.text(max_size=30)).map(ini_quote)
KEYS = {"config": ["state", "version"], "window": ["geometry", "state", "splitter"],
        "charts": ["options_json"], "run": ["keep_previous"], "view": ["dark"],
        "recent": ["files"], "dirs": ["results", "export"]}


@st.composite
def ini_files(draw) -> str:
    lines = []
    for section, keys in KEYS.items():
        if draw(st.booleans()):
            lines.append(f"[{section}]")
        for key in keys:
            if draw(st.booleans()):
                value = draw(JSON_VALUE if key in ("state", "options_json") and section != "window"
                             else RAW_VALUE | JSON_VALUE)
                lines.append(f"{key}={value}")
        if draw(st.booleans()):
            lines.append(draw(st.text(max_size=30).map(lambda t: t.replace("\n", " "))))
    return "\n".join(lines) + "\n"


# --- the checks ----------------------------------------------------------------------


def assert_clean_config(state: dict) -> None:
    """What the Configure panel is given is exactly what it can use."""
    again, problems = clean_config(state)
    assert problems == [] and again == state
    for key in ("warmup", "repeats"):
        if key in state:
            low, high = WARMUP_RANGE if key == "warmup" else REPEATS_RANGE
            assert isinstance(state[key], int) and low <= state[key] <= high
    if "budget_s" in state:
        assert math.isfinite(state["budget_s"]) and BUDGET_RANGE[0] <= state["budget_s"] <= BUDGET_RANGE[1]


@FAST
@given(CONFIG | JSONISH)
@pytest.mark.slow
def test_clean_config_keeps_only_usable_fields(state):
    clean, problems = clean_config(state)
    assert isinstance(clean, dict) and all(isinstance(p, str) for p in problems)
    assert_clean_config(clean)
    if isinstance(state, dict):
        # Every field given is either kept as it was or reported.
        for key in state.keys() & {"backend", "dtype", "mode", "warmup", "repeats", "verify"}:
            assert clean.get(key, object()) == state[key] or any(f" {key} = " in p for p in problems)


@pytest.fixture(scope="module")
def panel():
    from PySide6.QtWidgets import QApplication

    from gui.config_panel import ConfigPanel

    QApplication.instance() or QApplication([])
    p = ConfigPanel()
    yield p
    p.shutdown()


@QT
@given(CONFIG | JSONISH)
@pytest.mark.slow
def test_the_panel_takes_any_cleaned_configuration(panel, state):
    clean, _ = clean_config(state)
    panel.set_state(clean)
    assert_clean_config(clean_config(panel.state())[0])
    assert clean_config(panel.state())[1] == []
    panel.problems()
    panel.run_count()


@FAST
@given(st.dictionaries(st.sampled_from(["log", "error_bars", "best", "tab", "metric", "x"]), JSONISH)
       | JSONISH)
@pytest.mark.slow
def test_clean_chart_options(state):
    clean, problems = clean_chart_options(state)
    assert all(isinstance(clean[k], bool) for k in ("log", "error_bars", "best") if k in clean)
    assert all(isinstance(clean[k], str) for k in ("tab", "metric") if k in clean)


def read_everything(s: AppSettings) -> None:
    """Every reader the window uses, with the types the window relies on."""
    for blob in (s.geometry(), s.window_state(), s.splitter_state()):
        assert blob is None or (isinstance(blob, QByteArray) and 0 < blob.size() <= MAX_BLOB_BYTES)
    assert_clean_config(s.load_config())
    options = s.chart_options()
    assert clean_chart_options(options) == (options, [])
    assert isinstance(s.flag("run/keep_previous"), bool) and isinstance(s.flag("view/dark"), bool)
    recent = s.recent_files()
    assert len(recent) <= MAX_RECENT and all(isinstance(f, str) and f for f in recent)
    assert isinstance(s.last_dir("results"), str) and isinstance(s.last_dir("export"), str)
    assert all(isinstance(p, str) and p.startswith("settings: ") for p in s.problems)


@QT
@given(ini_files())
@pytest.mark.slow
def test_any_ini_file_reads_as_usable_settings(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("ini") / "settings.ini"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    read_everything(AppSettings(ini_settings(path)))


@WINDOWS
@given(ini_files())
@pytest.mark.slow
def test_any_ini_file_starts_the_window_with_a_valid_configuration(make_window, tmp_path_factory,
                                                                   error_dialogs, text):
    path = tmp_path_factory.mktemp("ini") / "settings.ini"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    win = make_window(ini_settings(path))
    assert_clean_config(clean_config(win.config.state())[0])
    assert clean_config(win.config.state())[1] == []
    win.config.problems()
    log = win.log.plain_text()
    for line in win.settings.problems:
        assert line in log
    assert error_dialogs == []
    win.shutdown()
    win.close()


def write_ini(path: Path, entries: dict[str, str]) -> None:
    sections: dict[str, list[str]] = {}
    for key, value in entries.items():
        section, name = key.split("/")
        sections.setdefault(section, []).append(f"{name}={value}")
    path.write_text("".join(f"[{s}]\n" + "\n".join(lines) + "\n" for s, lines in sections.items()))


@pytest.mark.slow
def test_each_bad_setting_takes_its_default_with_a_log_line(make_window, tmp_path):
    config = {"backend": "quantum", "warmup": -5, "repeats": 10**12, "budget_s": math.inf,
              "dtype": "float16", "mode": "lukewarm", "verify": "yes please", "sizes": 256,
              "devices": [0, 0], "variants": {"checked": {"naive": False, "nope": True},
                                              "values": {"naive": {"block": [16, 7, "x"]}}},
              "inputs": {"seed": -1, "mode": "sideways", "dist": "cauchy", "a": 12}}
    ini = tmp_path / "settings.ini"
    write_ini(ini, {
        "config/state": ini_quote(json.dumps(config).replace("Infinity", "1e999")),
        "window/geometry": "@Size(1 2)",
        "window/state": byte_array(b"\x00" * (MAX_BLOB_BYTES + 1)),
        "window/splitter": byte_array(b"not a splitter state"),
        "charts/options_json": ini_quote("{not json"),
        "run/keep_previous": "perhaps",
        "view/dark": "@Point(1 2)",
        "recent/files": f"{tmp_path / 'a.json'}, @Rect(1 2 3 4)",
        "dirs/results": "@Size(3 4)",
    })
    win = make_window(ini_settings(ini))
    cfg = win.config
    assert (cfg.warmup.value(), cfg.repeats.value(), cfg.budget.value()) == (3, 20, 0.5)
    assert cfg.dtype.currentText() == "float32" and cfg.mode.currentData() == "hot"
    assert cfg.verify.isChecked() and cfg.inputs.mode == "random" and cfg.inputs.seed.value() == 0
    assert cfg.variants.chosen_values("naive") == {"block": [16]}
    assert "naive" not in cfg.variants.checked_variants()          # the good field was kept
    assert not win.keep_runs_action.isChecked() and not win.dark_action.isChecked()
    assert win.settings.recent_files() == [str(tmp_path / "a.json")]
    log = win.log.plain_text()
    for words in ("config backend = 'quantum'", "config warmup = -5", "config repeats",
                  "config budget_s = inf", "config dtype = 'float16'", "config mode = 'lukewarm'",
                  "config verify = 'yes please'", "config sizes = 256", "config devices",
                  "config variants: ignored 2", "inputs.seed = -1", "inputs.mode = 'sideways'", "inputs.dist = 'cauchy'",
                  "inputs.a = 12", "window/geometry", "window/state is", "window/splitter",
                  "charts/options_json is not valid JSON", "run/keep_previous = 'perhaps'",
                  "view/dark", "recent/files: ignored 1 entry", "dirs/results"):
        assert words in log, words
    assert cfg.problems() == [] or cfg.problems()[0].startswith("The")   # still runnable
    # Closing writes good values back over the bad ones.
    win.close()
    again = AppSettings(ini_settings(ini))
    again.load_config()
    again.geometry()
    assert again.problems == []


@pytest.mark.slow
def test_garbage_json_and_wrong_shapes(make_window, tmp_path):
    ini = tmp_path / "settings.ini"
    write_ini(ini, {"config/state": ini_quote("[1, 2, 3]"),
                    "charts/options_json": ini_quote('"text"')})
    win = make_window(ini_settings(ini))
    log = win.log.plain_text()
    assert "config/state = [1, 2, 3] is not a JSON object" in log
    assert "charts/options_json = 'text' is not a JSON object" in log
    write_ini(ini, {"config/state": ini_quote("{" * 100_000)})
    win = make_window(ini_settings(ini))
    assert "config/state is not valid JSON" in win.log.plain_text()


def test_a_stored_python_object_is_removed_not_run(make_window, tmp_path):
    """PySide rebuilds ``@Variant(PySide::PyObjectWrapper …)`` with pickle: a settings file
    could run code at start.  The screen removes such lines before Qt reads the file."""
    from PySide6.QtCore import QSettings

    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (Path.touch, (marker,))

    crafted = tmp_path / "crafted.ini"
    q = QSettings(str(crafted), QSettings.Format.IniFormat)
    q.setValue("window/state", Payload())
    q.setValue("view/dark", True)
    q.sync()
    del q
    assert "PyObjectWrapper" in crafted.read_text()
    win = make_window(ini_settings(crafted))
    assert not marker.exists()
    assert "window/state held a stored object" in win.log.plain_text()
    assert win.dark_action.isChecked()          # the rest of the file is used
    assert "PyObjectWrapper" not in crafted.read_text()
    # Escaped so that no "@Variant(" appears literally: found all the same.
    sneaky = tmp_path / "sneaky.ini"
    sneaky.write_text("[window]\nstate=\\x40Var\\\niant(\\0\\0\\0\\x7f\\0\\0\\0\\x18"
                      "PySide::PyObjectWrapper\\0\\0\\0\\0\\x3)\n")
    assert AppSettings(ini_settings(sneaky)).problems


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes here")
@pytest.mark.slow
def test_a_pipe_or_a_huge_file_as_settings_does_not_stop_the_start(make_window, tmp_path):
    pipe = tmp_path / "pipe.ini"
    os.mkfifo(pipe)
    win = make_window(ini_settings(pipe))            # would block forever if Qt opened it
    assert "is a named pipe; only regular files are read" in win.log.plain_text()
    huge = tmp_path / "huge.ini"
    with huge.open("wb") as fh:
        fh.write(b"[window]\ngeometry=@ByteArray(")
        fh.write(b"\\x1" * (2 << 20))
        fh.write(b")\n")
    win = make_window(ini_settings(huge))
    assert "moved to huge.ini.too-large" in win.log.plain_text()
    assert (tmp_path / "huge.ini.too-large").exists()
