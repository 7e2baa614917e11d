"""When timing stops (issue 37 §2): the noise rule (relative standard error of the mean
below a target, within a minimum and a maximum time), on its own and on the cpu and
PoCL backends; what each record says about its timing; the command line's flags."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

import main
from engine.measure.timing import (NOISE_MIN_LAUNCHES, NoiseStop, StopReason, TimingLoop,
                                   TimingMode, relative_standard_error)
from engine.results import records
from engine.run.runner import Plan
from tests.helpers import require_backend, run_plan


def test_the_statistic_is_the_relative_standard_error_of_the_mean():
    times = [1.0, 2.0, 3.0, 4.0]
    want = 100 * np.std(times, ddof=1) / math.sqrt(4) / np.mean(times)
    assert relative_standard_error(times) == pytest.approx(want)
    assert relative_standard_error([5.0]) == math.inf
    loop = TimingLoop(1, None, NoiseStop(1.0))
    for t in times:
        loop.add(t)
    assert loop.noise_pct() == pytest.approx(want)


def _drive(loop: TimingLoop, sample) -> TimingLoop:
    while loop.due():
        loop.add(sample(len(loop.times)))
    return loop


def test_a_quiet_series_stops_at_the_noise_target_after_the_minimum():
    loop = _drive(TimingLoop(20, None, NoiseStop(0.5, min_s=0.0, max_s=5.0)),
                  lambda i: 1.0 + 1e-4 * (i % 2))
    assert loop.stopped_by == StopReason.NOISE
    assert len(loop.times) == NOISE_MIN_LAUNCHES and loop.final_noise_pct < 0.5


def test_the_minimum_time_holds_even_a_quiet_series():
    loop = _drive(TimingLoop(20, None, NoiseStop(0.5, min_s=0.03, max_s=5.0)), lambda i: 1.0)
    assert loop.stopped_by == StopReason.NOISE and loop.elapsed() >= 0.03
    assert len(loop.times) > NOISE_MIN_LAUNCHES


def test_a_noisy_series_runs_to_the_maximum_time():
    rng = random.Random(3)
    loop = _drive(TimingLoop(20, None, NoiseStop(0.05, min_s=0.0, max_s=0.05)),
                  lambda i: rng.uniform(1.0, 3.0))
    assert loop.stopped_by == StopReason.MAX_TIME and 0.05 <= loop.elapsed() < 1.0
    assert loop.final_noise_pct > 0.05


def test_repeats_and_budget_stop_as_before():
    loop = _drive(TimingLoop(7, None), lambda i: 1.0)
    assert loop.stopped_by == StopReason.REPEATS and len(loop.times) == 7
    loop = _drive(TimingLoop(7, 0.0), lambda i: 1.0)
    assert loop.stopped_by == StopReason.BUDGET and len(loop.times) == 3


@pytest.mark.parametrize("backend, item, mode", [
    ("cpu", ("cpu_numpy", {}), TimingMode.HOST_CLOCK),
    ("opencl", ("naive", {"block": 16}), TimingMode.EVENTS),
])
def test_backends_stop_early_when_quiet_and_at_the_maximum_when_not(backend, item, mode):
    require_backend(backend)
    shape = [(64, 64, 64)]
    # A generous target is met after the fewest launches...
    quiet = NoiseStop(50.0, min_s=0.0, max_s=5.0)
    (rec,), _ = run_plan(Plan(backend=backend, items=[item], shapes=shape, warmup=1,
                              until_noise=quiet))
    assert rec.status == "ok" and rec.stopped_by == StopReason.NOISE
    # (a busy host may add an outlier or two: a few more launches, never fewer)
    assert NOISE_MIN_LAUNCHES <= rec.repeats < 10 * NOISE_MIN_LAUNCHES and rec.timing_mode == mode
    assert rec.stop_rule == quiet.describe()
    # verified launch + warm-up + timed + the second seed's launch
    assert rec.launches == 1 + 1 + rec.repeats + 1
    # ...and one no real series reaches in 0.2 s runs to the maximum time.
    strict = NoiseStop(0.01, min_s=0.0, max_s=0.2)
    (rec,), _ = run_plan(Plan(backend=backend, items=[item], shapes=shape, warmup=1,
                              until_noise=strict))
    assert rec.stopped_by == StopReason.MAX_TIME and rec.repeats > NOISE_MIN_LAUNCHES


def test_records_say_how_they_were_timed_and_old_files_still_load(tmp_path):
    require_backend("cpu")
    (rec,), _ = run_plan(Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(32, 32, 32)],
                              warmup=0, repeats=4))
    assert (rec.stop_rule, rec.stopped_by, rec.repeats) == ("repeats 4", StopReason.REPEATS, 4)
    for ext in ("json", "csv"):
        path = records.save([rec], tmp_path / f"r.{ext}")
        (back,) = records.load(path)
        assert (back.timing_mode, back.stopped_by, back.stop_rule, back.launches, back.recheck) == \
            (rec.timing_mode, rec.stopped_by, rec.stop_rule, rec.launches, rec.recheck)
    old = {"backend": "cpu", "variant": "cpu_numpy", "m": 8, "n": 8, "k": 8, "dtype": "float32"}
    (tmp_path / "old.json").write_text(json.dumps([old]))
    (back,) = records.load(tmp_path / "old.json")
    assert (back.timing_mode, back.stopped_by, back.launches) == ("", "", 0)
    (tmp_path / "bad.json").write_text(json.dumps([{**old, "timing_mode": "by hand"}, old]))
    recs, skipped = records.load_report(tmp_path / "bad.json")
    assert len(recs) == 1 and "timing_mode" in skipped[0] and "held" in skipped[0]


def _bench(capsys, *argv):
    code = main.main(["bench", "--backend", "cpu", "--sizes", "32", "--quiet", *map(str, argv)])
    return code, capsys.readouterr()


def test_the_flag_takes_a_percentage_and_its_times(tmp_path, capsys):
    require_backend("cpu")
    out = tmp_path / "r.json"
    code, _ = _bench(capsys, "--until-noise", "40%", "--noise-min-time", "0",
                     "--noise-max-time", "2", "--out", out)
    assert code == 0
    data = json.loads(out.read_text())
    (rec,) = data["records"] if isinstance(data, dict) else data
    assert rec["stopped_by"] == "noise" and rec["stop_rule"].startswith("noise < 40%")


@pytest.mark.parametrize("argv, says", [
    (["--until-noise", "abc"], "not a percentage"),
    (["--until-noise", "0%"], "out of range"),
    (["--until-noise", "nan"], "not a percentage"),
    (["--until-noise", "1", "--budget", "0.1"], "--until-noise replaces --budget"),
    (["--until-noise", "1", "--repeats", "5"], "--until-noise replaces --repeats"),
    (["--noise-max-time", "2"], "only used with --until-noise"),
    (["--until-noise", "1", "--noise-min-time", "3", "--noise-max-time", "2"], "not below its minimum"),
])
def test_bad_flags_are_refused_with_a_reason(capsys, argv, says):
    code, (out, err) = _bench(capsys, *argv)
    assert code == 2 and says in " ".join(err.split()), err
