"""``compare``: two runs paired kernel by kernel, with SAME / FASTER / SLOWER beyond the
threshold and the combined noise (engine.results.compare), and ``python main.py compare``
(exit codes 0, 1 with --fail-on-slower, 2 for bad inputs; Markdown)."""
from __future__ import annotations

import copy
import json
import math

import pytest

import main
from engine.results import records
from engine.results.compare import (DEFAULT_THRESHOLD_PCT, Verdict, combined_noise_pct, compare,
                                    record_noise_pct, verdict_of)
from engine.results.records import RecordStatus, ResultRecord


def rec(variant="ffma_wide", ms=1.0, noise=1.0, size=1024, device="NVIDIA H200", **kw) -> ResultRecord:
    params = kw.pop("params", {"bm": 256} if variant == "ffma_wide" else {})
    return ResultRecord(backend="cuda", device=device, variant=variant, params=params, m=size, n=size,
                        k=size, dtype="float32", median_ms=ms, min_ms=ms * 0.99, max_ms=ms * 1.01,
                        noise_pct=noise, repeats=20, passed=True, **kw)


def run_set() -> list[ResultRecord]:
    return [rec("naive", 10.0), rec("tiled", 5.0), rec("ffma_wide", 1.0), rec("ffma_wide", 4.0, size=2048),
            rec("cublas_fp32", 0.9)]


def cli(capsys, *args):
    code = main.main(["compare", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())


def saved(tmp_path, name, recs):
    return records.save(recs, tmp_path / name)


# --- the rule ---------------------------------------------------------------------------------

def test_a_run_against_itself_is_all_same():
    c = compare(run_set(), run_set())
    assert len(c.pairs) == 5 and not c.only_base and not c.only_new
    assert {p.verdict for p in c.pairs} == {Verdict.SAME}
    assert all(p.ratio == 1.0 for p in c.pairs)
    assert c.differences == [] and c.problem() is None


def test_one_kernel_twenty_percent_slower_is_slower_and_others_same():
    new = run_set()
    new[2].median_ms *= 1.2
    c = compare(run_set(), new)
    verdicts = {p.key.label(): p.verdict for p in c.pairs}
    assert verdicts["ffma_wide[bm=256] 1024 float32"] == Verdict.SLOWER
    assert [p.key.variant for p in c.with_verdict(Verdict.SLOWER)] == ["ffma_wide"]
    assert c.with_verdict(Verdict.SLOWER)[0].change_pct == pytest.approx(20.0)
    faster = run_set()
    faster[0].median_ms *= 0.5
    assert compare(run_set(), faster).pairs[0].verdict == Verdict.FASTER


@pytest.mark.parametrize("change, noise_each, threshold, verdict", [
    (3.0, 5.0, 2.0, Verdict.SAME),      # beyond the threshold, within the noise
    (3.0, 0.5, 2.0, Verdict.SLOWER),    # beyond both
    (3.0, 0.5, 5.0, Verdict.SAME),      # within the threshold, beyond the noise
    (-8.0, 4.0, 2.0, Verdict.FASTER),   # noise √(4²+4²) = 5.7 < 8
    (-5.0, 4.0, 2.0, Verdict.SAME),     # 5 < 5.7: within the combined noise
])
def test_noise_aware_threshold(change, noise_each, threshold, verdict):
    base = [rec(ms=1.0, noise=noise_each)]
    new = [rec(ms=1.0 + change / 100, noise=noise_each)]
    assert compare(base, new, threshold).pairs[0].verdict == verdict


def test_the_rule_itself():
    assert verdict_of(5.1, 5.0, 5.0) == Verdict.SLOWER
    assert verdict_of(5.0, 5.0, 5.0) == Verdict.SAME
    assert verdict_of(6.0, math.nan, 5.0) == Verdict.SLOWER     # no noise known: the threshold
    assert verdict_of(-6.0, 7.0, 5.0) == Verdict.SAME
    a, b = rec(noise=3.0), rec(noise=4.0)
    assert combined_noise_pct(a, b) == pytest.approx(5.0)
    # No noise_pct (an old file): half the min–max spread over the median.
    old = rec(ms=2.0, noise=math.nan)
    old.min_ms, old.max_ms = 1.9, 2.3
    assert record_noise_pct(old) == pytest.approx(10.0)
    bare = rec(noise=math.nan)
    bare.min_ms = bare.max_ms = math.nan
    assert math.isnan(record_noise_pct(bare))
    assert DEFAULT_THRESHOLD_PCT == 5.0


def test_unmatched_rows_of_each_side_are_listed():
    base = run_set()
    new = run_set()[1:] + [rec("wpt", 3.0, params={"ts": 32})]
    new[0].params = {}
    c = compare(base, new)
    assert [r.variant for r in c.only_base] == ["naive"]
    assert [r.variant for r in c.only_new] == ["wpt"]
    assert len(c.pairs) == 4
    # Parameters, dtype and mode are part of the key.
    other = run_set()
    other[2].params = {"bm": 128}
    other[3].mode = "cold"
    c = compare(run_set(), other)
    assert {r.params.get("bm") for r in c.only_new} == {128, 256} and len(c.only_base) == 2


def test_different_devices_pair_by_the_other_keys_and_the_header_says_so():
    base = run_set()
    new = [copy.copy(r) for r in run_set()]
    for r in new:
        r.device = "NVIDIA H100 80GB HBM3"
        r.versions = "numpy 2.0; CUDA 12.4; driver 550"
    for r in base:
        r.versions = "numpy 2.0; CUDA 13.0; driver 580"
    c = compare(base, new)
    assert not c.by_device and len(c.pairs) == 5
    what = {d.what: (d.base, d.new) for d in c.differences}
    gpu = next(k for k in what if k.startswith("GPU"))
    assert "no device in common" in gpu and what[gpu] == ("NVIDIA H200", "NVIDIA H100 80GB HBM3")
    assert what["driver"] == ("580", "550") and what["CUDA"] == ("13.0", "12.4")
    assert "numpy" not in what


def test_clock_fields_where_records_carry_them():
    base, new = run_set(), run_set()
    for r in base:
        r.sm_clock_median_mhz = 1980.0        # the NVML fields of another part of the issue
    for r in new:
        r.sm_clock_median_mhz = 1600.0
        r.throttled = True
    what = {d.what: (d.base, d.new) for d in compare(base, new).differences}
    assert what["SM clock MHz (median of records)"] == ("1980", "1600")
    assert what["throttled (power or thermal cap)"] == ("none", "5 of 5 records")


def test_environment_blocks_differences():
    from engine.results.environment import DeviceEnvironment, Environment, TimingSettings

    def env(uuid, driver, digest, repeats, lock=""):
        return Environment(app_version="0.37 (abc)", host="vm",
                           devices=(DeviceEnvironment("cuda", 0, "NVIDIA H200", uuid=uuid, driver=driver),),
                           kernels={"cuda/lab/ffma_wide.cu": digest, "cuda/ladder/01_naive.cu": "aa"},
                           timing=TimingSettings(warmup="3", repeats=repeats, mode="hot", clock_lock=lock))

    base = env("GPU-1", "570.1", "1111", "20")
    same = compare(run_set(), run_set(), base_environment=base, new_environment=base)
    assert same.differences == []
    other = env("GPU-2", "580.2", "2222", "budget 1 s", "max (locked)")
    what = {d.what: (d.base, d.new) for d in compare(run_set(), run_set(), base_environment=base,
                                                      new_environment=other).differences}
    assert what == {"GPU UUID": ("GPU-1", "GPU-2"), "driver": ("570.1", "580.2"),
                    "stop rule": ("20", "budget 1 s"), "clock lock": ("—", "max (locked)"),
                    "kernel file cuda/lab/ffma_wide.cu (SHA-256)": ("1111", "2222")}
    old = compare(run_set(), run_set(), base_environment=None, new_environment=other).differences
    assert [(d.what, d.base, d.new) for d in old] == [("environment block", "none (an older file)", "yes")]


def test_failed_and_untimed_records_get_their_own_verdict():
    base, new = run_set(), run_set()
    new[0].status, new[0].passed = RecordStatus.FAILED, False
    new[1].status, new[1].median_ms, new[1].error = RecordStatus.ERROR, math.nan, "launch failed\nmore"
    base[2].median_ms = math.nan
    c = compare(base, new)
    v = [p.verdict for p in c.pairs]
    assert v[:3] == [Verdict.FAILED, Verdict.NOT_TIMED, Verdict.NOT_TIMED]
    assert c.pairs[1].note == "NEW: error (launch failed)"
    assert c.pairs[2].note == "BASE: no finite median time"
    assert math.isnan(c.pairs[2].ratio) and c.problem() is None


def test_problems_no_pair_and_no_time():
    assert "no result in common" in compare([rec("naive")], [rec("tiled")]).problem()
    nan = [rec(ms=math.nan)]
    assert "usable time" in compare(nan, nan).problem()
    with pytest.raises(ValueError):
        compare(run_set(), run_set(), math.nan)


# --- the command ------------------------------------------------------------------------------

def test_cli_file_against_itself(capsys, tmp_path):
    path = saved(tmp_path, "a.json", run_set())
    code, out, err = cli(capsys, path, path, "--fail-on-slower")
    assert code == 0, err
    assert out.count("SAME") == 5 and "5 pairs: 5 same" in " ".join(out.split())


def test_cli_slower_copy_and_fail_on_slower(capsys, tmp_path):
    base = saved(tmp_path, "base.csv", run_set())
    data = json.loads(json.dumps([records.to_dict(r) for r in run_set()]))
    data[2]["median_ms"] *= 1.2
    new = tmp_path / "new.json"
    new.write_text(json.dumps(data))
    code, out, _ = cli(capsys, base, new)
    assert code == 0 and "SLOWER" in out
    code, out, _ = cli(capsys, base, new, "--fail-on-slower")
    assert code == 1
    code, _, _ = cli(capsys, base, new, "--fail-on-slower", "--threshold", "25%")
    assert code == 0          # 20% is within a 25% threshold


def test_cli_markdown(capsys, tmp_path):
    base = saved(tmp_path, "base.json", run_set())
    new_recs = run_set()
    new_recs[0].median_ms *= 0.5
    new_recs[0].device = "NVIDIA H200"
    new = saved(tmp_path, "new.json", new_recs[:-1])
    code, out, _ = cli(capsys, base, new, "--markdown")
    assert code == 0
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("| kernel"))
    assert lines[head + 1].startswith("|:--|--:|")
    assert "| naive 1024 float32 | 10.0000 | 5.0000 | 0.500 | -50.0 |" in out
    assert "**FASTER**" in out and "Only in BASE (1): cublas_fp32 1024 float32 on NVIDIA H200" in out
    assert all(line.count("|") - line.count("\\|") == 9 for line in lines[head:head + 6])


def test_cli_header_for_different_devices(capsys, tmp_path):
    base = saved(tmp_path, "base.json", run_set())
    other = run_set()
    for r in other:
        r.device = "NVIDIA H100"
    new = saved(tmp_path, "new.json", other)
    code, out, _ = cli(capsys, base, new)
    text = " ".join(out.split())
    assert code == 0 and "The runs differ" in text
    assert "BASE NVIDIA H200 · NEW NVIDIA H100" in text


@pytest.mark.parametrize("make, message", [
    (lambda d: d, "is a folder, not a results file"),
    (lambda d: (d / "x.json").write_text("{\"not\": \"a list\"}") and d / "x.json",
     "does not hold a JSON list of records"),
    (lambda d: (d / "x.json").write_text("[{\"variant\": \"naive\"}]") and d / "x.json",
     "no valid record"),
    (lambda d: (d / "x.txt").write_text("hello") and d / "x.txt", "results files are .json or .csv"),
    (lambda d: d / "missing.json", "was not found"),
    (lambda d: (d / "x.json").write_bytes(b"\xff\xfe[") and d / "x.json", "not utf-8 text"),
    (lambda d: (d / "x.json").write_text(json.dumps({"format": 3, "records": []})) and d / "x.json",
     "results format 3 is not one this version reads"),
])
def test_cli_bad_inputs_exit_2_with_one_line(capsys, tmp_path, make, message):
    good = saved(tmp_path, "good.json", run_set())
    bad = make(tmp_path)
    for args in ((bad, good), (good, bad)):
        code, out, err = cli(capsys, *args)
        assert code == 2 and message in err, err
        assert "Traceback" not in err and err.startswith("error: ")
        assert err.split(": ")[1].split()[0] in ("BASE", "BASE:", "NEW", "NEW:")


def test_cli_huge_file_no_pair_nan_only_and_bad_threshold(capsys, tmp_path, monkeypatch):
    a = saved(tmp_path, "a.json", [rec("naive")])
    b = saved(tmp_path, "b.json", [rec("tiled")])
    code, _, err = cli(capsys, a, b)
    assert code == 2 and "no result in common" in err
    nan = saved(tmp_path, "nan.json", [rec(ms=math.nan), rec("naive", ms=math.nan)])
    code, _, err = cli(capsys, nan, nan)
    assert code == 2 and "usable time" in err
    code, _, err = cli(capsys, a, a, "--threshold", "nan")
    assert code == 2 and "--threshold" in err
    import engine.common.host_memory as host_memory
    monkeypatch.setattr(host_memory, "host_available_bytes", lambda: 1000)
    code, _, err = cli(capsys, a, a)
    assert code == 2 and "more than this machine can load" in err


def test_cli_environment_block_of_new_files_against_an_old_one(capsys, tmp_path):
    new = saved(tmp_path, "new.csv", run_set())          # save() writes the block
    old = tmp_path / "old.json"                           # a bare list: an older file
    old.write_text(json.dumps([records.to_dict(r) for r in run_set()]))
    code, out, _ = cli(capsys, old, new)
    assert code == 0 and "environment block: BASE none (an older file) · NEW yes" in " ".join(out.split())
    code, out, _ = cli(capsys, new, saved(tmp_path, "again.json", run_set()))
    assert code == 0 and "The runs differ" not in out


def test_cli_fail_on_slower_catches_a_kernel_that_became_wrong(capsys, tmp_path):
    base = saved(tmp_path, "base.json", run_set())
    wrong = run_set()
    wrong[2].status, wrong[2].passed = RecordStatus.FAILED, False     # same time, wrong C
    new = saved(tmp_path, "new.json", wrong)
    assert [p.key.variant for p in compare(run_set(), wrong).newly_failed()] == ["ffma_wide"]
    code, out, _ = cli(capsys, base, new)
    assert code == 0 and "FAILED" in out                 # without the gate: said, not failed
    code, _, err = cli(capsys, base, new, "--fail-on-slower")
    assert code == 1 and "passed verification in BASE and failed it in NEW" in err
    # failing on both sides is no new regression; nor is one that was never verified
    code, _, _ = cli(capsys, new, new, "--fail-on-slower")
    assert code == 0
    unverified = run_set()
    unverified[2].passed = None
    code, _, _ = cli(capsys, saved(tmp_path, "unverified.json", unverified), new, "--fail-on-slower")
    assert code == 0
    # the gate's only pair newly failing: exit 1 (a regression), not 2 (no usable time)
    one_base, one_new = saved(tmp_path, "b1.json", run_set()[2:3]), saved(tmp_path, "n1.json", wrong[2:3])
    code, _, _ = cli(capsys, one_base, one_new, "--fail-on-slower")
    assert code == 1
    code, _, _ = cli(capsys, one_base, one_new)
    assert code == 2


def test_ignore_params_pairs_one_parameter_choice_against_another(capsys, tmp_path):
    """A kernel with its default against a slower parameter: no pair unless parameters are
    ignored; then SLOWER, labelled with both choices, and the gate fails."""
    base = [rec("ffma_wide", 1.0, params={"splitk": 1}), rec("cublas_fp32", 0.9)]
    new = [rec("ffma_wide", 1.3, params={"splitk": 4}), rec("cublas_fp32", 0.9)]
    plain = compare(base, new)
    assert [p.key.variant for p in plain.pairs] == ["cublas_fp32"] and len(plain.only_new) == 1
    c = compare(base, new, ignore_params=True)
    assert {p.key.variant: p.verdict for p in c.pairs} == {"ffma_wide": Verdict.SLOWER,
                                                            "cublas_fp32": Verdict.SAME}
    a, b = saved(tmp_path, "a.json", base), saved(tmp_path, "b.json", new)
    code, out, _ = cli(capsys, a, b, "--ignore-params", "--fail-on-slower", "--markdown")
    assert code == 1 and "ffma_wide[splitk=1] → [splitk=4] 1024" in out and "SLOWER" in out
    code, out, _ = cli(capsys, b, a, "--ignore-params")
    assert code == 0 and "FASTER" in out
