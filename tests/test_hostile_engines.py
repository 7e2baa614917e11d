"""Issue 35, classes 6, 7 and part of 11: a sweep runs the code it started with; builds and
engines are bounded.

* a kernel file (or a file it includes) edited during a sweep: the rest of the sweep, an
  engine restarted mid-sweep too, builds the text read at the start, and says a newer
  version exists;
* a build that never ends (a preprocessor macro bomb) fails its item after the build time
  limit and the sweep goes on; an nvcc build past it is stopped;
* ``#include`` of a file beside the kernel is found, and an error inside it names that
  file and line (OpenCL on PoCL; CUDA through nvcc, without a GPU);
* an engine that dies before its first item is retried a few times, then the task fails
  with the reason;
* host memory is bounded by this process's own cgroup (not the root's) and its
  RLIMIT_AS / RLIMIT_DATA;
* a kernel file without the header's entry point, or whose entry takes the arguments of
  the other ``kind``, says so in the user's words.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.common import host_memory
from engine.inputs import memory
from engine.kernels import registry, sources
from engine.measure.backends.base import BuildError
from engine.run.dispatch import EARLY_DEATHS_MAX, start_run
from engine.run.process import ProcessEngine
from engine.run.runner import Plan, Sweep
from tests.helpers import require_backend

ROOT = Path(__file__).resolve().parent.parent
NAIVE_CL = (ROOT / "opencl" / "01_naive.cl").read_text()
NAIVE_CU = (ROOT / "cuda" / "ladder" / "01_naive.cu").read_text()
#: A line of the kernel body whose change gives a wrong result (every element off by one).
STORE = "C[row * N + col] = (ELEM)acc;"
OFF_BY_ONE = "C[row * N + col] = (ELEM)acc + (ELEM)1;"
#: 2^40 empty expansions: the preprocessor never finishes (PoCL's memory grows meanwhile,
#: ~100 MB/s, so the limits below are a few seconds).
MACRO_BOMB = "\n".join(["#define A0"] + [f"#define A{i} A{i - 1} A{i - 1}" for i in range(1, 41)]
                       + ["A40"]) + "\n"

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


def user_kernel(folder: Path, name: str, base: str = NAIVE_CL, suffix: str = ".cl",
                before_body: str = "", edit=lambda t: t) -> Path:
    """A copy of the naive kernel as the user's ``name``, ``before_body`` (includes, a
    macro bomb) inserted ahead of its first #ifndef."""
    text = base.replace('name = "naive"', f'name = "{name}"').replace(
        'role = "baseline"', 'role = "user"').replace("block = [16, 8, 32]", "block = [8]")
    text = edit(text.replace("#ifndef ELEM", before_body + "#ifndef ELEM", 1))
    path = folder / f"{name}{suffix}"
    path.write_text(text)
    return path


def run(plan: Plan, engines, timeout: float = 90.0, on_event=lambda ev: None):
    """The run's records and events (share mode); fails the test past ``timeout``."""
    events = []

    def emit(ev):
        events.append(ev)
        on_event(ev)

    r = start_run(plan, engines, emit, mode="share")
    try:
        recs = r.result(timeout)
    finally:
        for e in engines:
            e.close()
    return recs, events


def logs(events, level=None):
    return [e.message for e in events if e.kind == "log" and (level is None or e.level == level)]


# --- class 6: a kernel edited during a sweep --------------------------------------------------

KINDS_OF_FILE = {"opencl": (NAIVE_CL, ".cl"), "cuda": (NAIVE_CU, ".cu")}


@pytest.mark.parametrize("backend", ["opencl", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.slow
def test_kernel_edited_mid_sweep_runs_the_start_text_and_says_so(tmp_path, backend):
    """The kernel and a file it includes are edited after the first item (the edit makes
    every element wrong), and the engine process is killed there too, so that a fresh
    one registers the kernel again: every size still runs the start's text and passes;
    the records after the edit say the file changed."""
    require_backend(backend)
    base, suffix = KINDS_OF_FILE[backend]
    (tmp_path / "one.h").write_text("#define ONE 0\n")
    path = user_kernel(tmp_path, "edited", base, suffix, before_body='#include "one.h"\n',
                       edit=lambda t: t.replace(STORE, "C[row * N + col] = (ELEM)acc + ONE;"))
    plan = Plan(backend=backend, items=[("edited", {"block": 8})],
                shapes=[(16, 16, 16), (24, 24, 24), (32, 32, 32)], warmup=0, repeats=1,
                kernel_files=(str(path),))
    engine = ProcessEngine(backend, 0)
    state = {"edited": False}

    def on_event(ev):
        if ev.kind == "result" and not state["edited"]:
            state["edited"] = True
            path.write_text(path.read_text().replace("acc + ONE;", "acc + ONE + (ELEM)1;"))
            (tmp_path / "one.h").write_text("#define ONE 1\n")
            engine.kill()                       # the next task starts a fresh engine

    recs, events = run(plan, [engine], on_event=on_event)
    assert engine.starts >= 2
    assert [(r.m, r.status, r.passed) for r in recs] == [(16, "ok", True), (24, "ok", True),
                                                         (32, "ok", True)]
    assert recs[0].newer_source == ""
    for r in recs[1:]:
        note = r.newer_source
        assert str(path) in note and str(tmp_path / "one.h") in note
        assert "the version it read then" in note
    assert any("changed on disk after the run started" in m for m in logs(events, "warning"))


def test_in_process_sweep_reads_the_kernel_once(tmp_path):
    """The same in one sweep on this thread: the edit after the first size changes nothing."""
    require_backend("opencl")
    path = user_kernel(tmp_path, "edited_here")
    plan = Plan(backend="opencl", items=[("edited_here", {"block": 8})],
                shapes=[(16, 16, 16), (24, 24, 24)], warmup=0, repeats=1,
                kernel_files=(str(path),))
    events = []

    def emit(ev):
        events.append(ev)
        if ev.kind == "result" and len([e for e in events if e.kind == "result"]) == 1:
            path.write_text(path.read_text().replace(STORE, OFF_BY_ONE))

    s = Sweep()
    try:
        recs = s.run(plan, emit)
    finally:
        s.close()
    assert [r.passed for r in recs] == [True, True]
    assert str(path) in recs[1].newer_source


# --- class 7: builds are bounded -----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("backend", ["opencl", pytest.param("cuda", marks=[pytest.mark.gpu,
                                                                       pytest.mark.serial])])
def test_macro_bomb_build_ends_within_the_limit_and_the_sweep_goes_on(tmp_path, backend):
    """A preprocessor macro bomb never finishes building (PoCL, nvcc): past the build limit
    the build is stopped (OpenCL: its engine is ended), the item fails saying so, the
    other kernel runs, and the bomb's item at the next size is not built again (it would
    cost the limit once more)."""
    require_backend(backend)
    base, suffix = KINDS_OF_FILE[backend]
    path = user_kernel(tmp_path, "bomb", base, suffix, before_body=MACRO_BOMB)
    limit = 2.0
    plan = Plan(backend=backend, items=[("bomb", {"block": 8}), ("naive", {"block": 8})],
                shapes=[(16, 16, 16), (24, 24, 24)], warmup=0, repeats=1,
                kernel_files=(str(path),), build_timeout_s=limit)
    t0 = time.monotonic()
    recs, events = run(plan, [ProcessEngine(backend, 0)], timeout=60)
    took = time.monotonic() - t0
    bomb = [r for r in recs if r.variant == "bomb"]
    naive = [r for r in recs if r.variant == "naive"]
    assert [r.status for r in bomb] == ["error", "error"]
    assert "took longer than 2 s" in bomb[0].error and "took longer than 2 s" in bomb[1].error
    if backend == "opencl":      # the engine was ended: the next task was told
        assert "not built again" in bomb[1].error and "at 16×16×16" in bomb[1].error
    assert [r.passed for r in naive] == [True, True]
    # One limit (and the watchdog's slack, and one engine restart), not one per size.
    assert took < 2 * limit + 15, took


@needs_nvcc
@pytest.mark.slow
def test_nvcc_build_past_the_limit_is_stopped_and_not_run_again(tmp_path):
    from engine.measure.backends import cuda as cuda_backend

    path = user_kernel(tmp_path, "cu_bomb", NAIVE_CU, ".cu", before_body=MACRO_BOMB)
    names, problems = registry.load_kernel_files([str(path)])
    assert names == ["cu_bomb"] and not problems
    be = cuda_backend.CudaBackend()
    be.arch, be.build_timeout_s = "sm_90", 1.5
    v = registry.get("cu_bomb")
    t0 = time.monotonic()
    with pytest.raises(BuildError, match=r"the build of cu_bomb.cu took longer than 1.5 s"):
        be._build(v, {"block": 8}, "float32")
    assert time.monotonic() - t0 < 10
    t1 = time.monotonic()
    with pytest.raises(BuildError, match="took longer than"):
        be._build(v, {"block": 8}, "float32")           # remembered: no second nvcc
    assert time.monotonic() - t1 < 0.5


# --- class 7: #include beside the kernel -------------------------------------------------------

def test_opencl_include_beside_the_kernel_is_found_and_errors_name_the_included_file(tmp_path):
    """Quoted includes resolve beside the kernel, nested ones beside their includer (one
    level up too), include guards and a loop of guarded includes are fine; an error in an
    included file names that file and its line, not the kernel's."""
    require_backend("opencl")
    (tmp_path / "common").mkdir()
    (tmp_path / "k").mkdir()
    (tmp_path / "common" / "zero.h").write_text(
        "#ifndef ZERO_H\n#define ZERO_H\n#include \"loop.h\"\n#define ZERO 0\n#endif\n")
    (tmp_path / "common" / "loop.h").write_text(
        "#ifndef LOOP_H\n#define LOOP_H\n#include \"zero.h\"\n#endif\n")
    (tmp_path / "k" / "helper.h").write_text('#include "../common/zero.h"\n')
    (tmp_path / "k" / "bad.h").write_text("// fine\n\nint broken = ;\n")
    good = user_kernel(tmp_path / "k", "inc_good", before_body='#include "helper.h"\n',
                       edit=lambda t: t.replace(STORE, "C[row * N + col] = (ELEM)acc + ZERO;"))
    bad = user_kernel(tmp_path / "k", "inc_bad", before_body='#include "bad.h"\n')
    plan = Plan(backend="opencl", items=[("inc_good", {"block": 8}), ("inc_bad", {"block": 8})],
                shapes=[(16, 16, 16)], warmup=0, repeats=1, kernel_files=(str(good), str(bad)))
    s = Sweep()
    try:
        recs = s.run(plan, lambda ev: None)
    finally:
        s.close()
    assert recs[0].passed, recs[0].error
    assert recs[1].status == "error" and recs[1].build_failed
    assert f"{tmp_path / 'k' / 'bad.h'}:3:" in recs[1].error
    assert f"{bad}:" not in recs[1].error.split("(options")[0]      # not at the kernel
    assert "matmul-lab-src" not in recs[1].error                    # no staging path shown


def test_opencl_include_of_a_named_pipe_does_not_hang(tmp_path):
    """A FIFO beside the kernel, included: the run says so at the #include when it starts
    (no engine waits on the pipe); the editor's build path (no run) says the same."""
    require_backend("opencl")
    os.mkfifo(tmp_path / "pipe.h")
    (tmp_path / "fine.h").write_text("#define FINE 1\n")
    path = user_kernel(tmp_path, "inc_pipe", before_body='#include "fine.h"\n#include "pipe.h"\n')
    registry.load_kernel_files([str(path)])        # the window registered it before the run
    plan = Plan(backend="opencl", items=[("inc_pipe", {"block": 8})], shapes=[(16, 16, 16)],
                warmup=0, repeats=1, kernel_files=(str(path),))
    recs, events = run(plan, [ProcessEngine("opencl", 0)], timeout=60)
    assert recs == []
    line = path.read_text().split("\n").index('#include "pipe.h"') + 1
    assert any(f"{path}:{line}: #include \"pipe.h\"" in m and "named pipe" in m
               for m in logs(events, "error"))
    from engine.measure.backends.opencl import OpenCLBackend

    be = OpenCLBackend()
    be.open(0)
    try:
        with pytest.raises(BuildError, match="named pipe"):
            be.compile(registry.get("inc_pipe"), {"block": 8}, "float32")
    finally:
        be.close()


@needs_nvcc
def test_cuda_include_beside_the_kernel_and_errors_in_it(tmp_path):
    from engine.measure.backends import cuda as cuda_backend

    (tmp_path / "helper.cuh").write_text("#define ZERO 0\n")
    (tmp_path / "bad.cuh").write_text("// fine\n\nint broken = ;\n")
    good = user_kernel(tmp_path, "cu_inc_good", NAIVE_CU, ".cu",
                       before_body="#include <helper.cuh>\n",
                       edit=lambda t: t.replace("C[row * N + col] = (ELEM)acc;",
                                                "C[row * N + col] = (ELEM)acc + ZERO;"))
    bad = user_kernel(tmp_path, "cu_inc_bad", NAIVE_CU, ".cu", before_body='#include "bad.cuh"\n')
    plan = Plan(backend="cuda", items=[], kernel_files=(str(good), str(bad))).with_sources()
    assert plan.load_kernels() == []
    be = cuda_backend.CudaBackend()
    be.arch = "sm_90"
    be._build(registry.get("cu_inc_good"), {"block": 8}, "float32")
    with pytest.raises(BuildError) as err:
        be._build(registry.get("cu_inc_bad"), {"block": 8}, "float32")
    assert f"{tmp_path / 'bad.cuh'}(3)" in str(err.value)
    assert "matmul-lab-src" not in str(err.value)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rels=st.lists(st.tuples(st.integers(0, 3), st.lists(st.sampled_from(["a", "b", "k", "src"]),
                                                          max_size=2),
                               st.sampled_from(["x.h", "y.cuh", "k"])),
                     min_size=1, max_size=6))
def test_staged_includes_keep_their_places(rels, tmp_path_factory):
    """Whatever the layout (files beside the kernel, below it, folders up), each included
    file is staged where its relative name from the kernel's folder finds it, with its text,
    and the staged paths map back to the user's."""
    base = tmp_path_factory.mktemp("layout") / "p" / "q" / "r" / "kern"
    includes, seen = [], set()
    for ups, folders, name in rels:
        rel = os.path.join(*([".."] * ups), *folders, name)
        user = os.path.normpath(os.path.join(base, rel))
        if user in seen or user == str(base / "k.cl") or any(
                u.startswith(user + os.sep) or user.startswith(u + os.sep) for u in seen):
            continue        # one path cannot be both a file and a folder
        seen.add(user)
        includes.append((rel, sources.SourceFile(user, f"// {rel}\n")))
    with sources.staged(base / "k.cl", "// kernel\n", tuple(f for _r, f in includes)) as stg:
        assert stg.main.read_text() == "// kernel\n"
        for rel, f in includes:
            placed = Path(os.path.normpath(stg.folder / rel))
            assert placed.read_text() == f.text
            assert stg.user_paths(f"{placed}:3:1: error") == f"{f.path}:3:1: error"
    assert not stg.folder.exists()


# --- class 7: engines are bounded --------------------------------------------------------------

@pytest.mark.slow
def test_engine_dying_before_its_first_item_is_retried_a_few_times_then_fails(tmp_path):
    """An engine killed as it makes a sweep's inputs (the OOM killer of a memory-limited
    container) used to be restarted for ever; now each task is tried EARLY_DEATHS_MAX
    times, then its items fail with the reason, and the run ends."""
    require_backend("cpu")
    engine = ProcessEngine("cpu", 0, preload=("tests.engine_oom_preload",))
    plan = Plan(backend="cpu", items=[("cpu_numpy", {})], shapes=[(16, 16, 16), (24, 24, 24)],
                warmup=0, repeats=1)
    recs, events = run(plan, [engine], timeout=90)
    assert [r.status for r in recs] == ["error", "error"]
    for r in recs:
        assert r.error.startswith(f"the engine process died before its first item "
                                  f"{EARLY_DEATHS_MAX} times: ")
        assert "SIGKILL" in r.error
    # One start, then one restart per death (each task's last death restarts it too).
    assert engine.starts <= 1 + 2 * EARLY_DEATHS_MAX
    assert any(e.kind == "finished" for e in events)


# --- class 7: host memory of this process ------------------------------------------------------

def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


V1_MOUNTS = ("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
             "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
             "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")


def test_memory_limit_is_read_from_the_process_own_cgroup_v1(tmp_path):
    """cgroup v1 (this CI's layout): the root is unlimited, the process's own memory
    cgroup (/proc/self/cgroup) is limited to 2 GiB with 512 MiB used, 128 MiB of it
    droppable page cache."""
    root = _tree(tmp_path, {
        "proc/self/cgroup": "4:memory:/process_api/abc\n0::/\n",
        "proc/self/mountinfo": V1_MOUNTS,
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/fs/cgroup/memory/memory.usage_in_bytes": "5000000000\n",
        "sys/fs/cgroup/memory/process_api/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/fs/cgroup/memory/process_api/memory.usage_in_bytes": "600000000\n",
        "sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": str(2 << 30),
        "sys/fs/cgroup/memory/process_api/abc/memory.usage_in_bytes": str(512 << 20),
        "sys/fs/cgroup/memory/process_api/abc/memory.stat":
            f"cache 1\ntotal_inactive_file {128 << 20}\n",
    })
    limits = host_memory.cgroup_limits(root)
    assert [(lim.what, lim.room) for lim in limits] == [
        ("the memory limit of cgroup /process_api/abc", (2 << 30) - (384 << 20))]


def test_memory_limit_v2_takes_the_tightest_ancestor_and_a_mount_of_a_subtree(tmp_path):
    """cgroup v2 with a limit on the parent only (the child's is "max"), seen through a
    mount whose root is the container's own subtree (mountinfo's root field)."""
    root = _tree(tmp_path, {
        "proc/self/cgroup": "0::/docker/ctr/app\n",
        "proc/self/mountinfo": "30 20 0:26 /docker/ctr /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        "sys/fs/cgroup/memory.max": "max\n",
        "sys/fs/cgroup/memory.current": "100\n",
        "sys/fs/cgroup/app/memory.max": "max\n",
        "sys/fs/cgroup/app/memory.current": str(300 << 20),
    })
    assert host_memory.cgroup_limits(root) == []                     # nothing limits it
    (root / "sys/fs/cgroup/memory.max").write_text(str(1 << 30))
    (root / "sys/fs/cgroup/memory.current").write_text(str(700 << 20))
    (root / "sys/fs/cgroup/app/memory.max").write_text(str(4 << 30))
    rooms = {lim.what: lim.room for lim in host_memory.cgroup_limits(root)}
    assert rooms == {"the memory limit of cgroup /app": (4 << 30) - (300 << 20),
                     "the memory limit of cgroup /": (1 << 30) - (700 << 20)}
    # The path of another namespace's view (not under this mount): the mount's own files.
    (root / "proc/self/cgroup").write_text("0::/elsewhere\n")
    assert [lim.what for lim in host_memory.cgroup_limits(root)] == ["the memory limit of cgroup /"]


def test_memory_limits_never_fail_on_strange_files(tmp_path):
    """Missing, empty, garbled or pipe-shaped cgroup files: no limit, never an error or a hang."""
    assert host_memory.cgroup_limits(tmp_path) == []
    root = _tree(tmp_path, {"proc/self/cgroup": "garbage\n::\n0::/x\n",
                            "proc/self/mountinfo": "nonsense - \n"})
    (root / "sys/fs/cgroup/x").mkdir(parents=True)
    os.mkfifo(root / "sys/fs/cgroup/x/memory.max")
    (root / "sys/fs/cgroup/x/memory.current").write_text("12abc")
    assert host_memory.cgroup_limits(root) == []


def test_rlimit_bounds_what_this_process_may_allocate(tmp_path):
    root = _tree(tmp_path, {"proc/self/status": "Name:\tx\nVmSize:\t  1024 kB\nVmData:\t 512 kB\n"})
    import resource

    fake = {resource.RLIMIT_AS: (10 << 20, resource.RLIM_INFINITY),
            resource.RLIMIT_DATA: (resource.RLIM_INFINITY, resource.RLIM_INFINITY)}
    limits = host_memory.rlimit_limits(root, lambda which: fake[which])
    assert [(lim.what, lim.room) for lim in limits] == [
        ("this process's RLIMIT_AS limit", (10 << 20) - (1024 << 10))]
    # For real, in a child with an address-space limit: a size the machine could hold but
    # the limit cannot is refused up front with a record naming the limit (it used to be
    # tried: numpy's MemoryError ended the sweep), and the next size runs.
    code = textwrap.dedent("""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, resource.RLIM_INFINITY))
        from engine.common import host_memory
        from engine.run.runner import Plan, Sweep
        assert host_memory.host_limit().what == "this process's RLIMIT_AS limit", host_memory.host_limit()
        recs = Sweep().run(Plan(backend="cpu", items=[("cpu_numpy", {})], warmup=0, repeats=1,
                                shapes=[(16000, 16000, 16000), (16, 16, 16)]), lambda ev: None)
        print([str(r.status) for r in recs])
        print(recs[0].error)
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "['error', 'ok']"
    assert "available under this process's RLIMIT_AS limit" in out.stdout


# --- class 11 (part): entry point and kind ----------------------------------------------------

def _one_item(tmp_path, name, **kw):
    path = user_kernel(tmp_path, name, **kw)
    plan = Plan(backend="opencl", items=[(name, {"block": 8})], shapes=[(16, 16, 16)],
                warmup=0, repeats=1, kernel_files=(str(path),))
    s = Sweep()
    try:
        return s.run(plan, lambda ev: None)[0], path
    finally:
        s.close()


def test_opencl_missing_entry_point_says_what_the_file_defines(tmp_path):
    require_backend("opencl")
    rec, path = _one_item(tmp_path, "no_entry",
                          edit=lambda t: t.replace("void matmul(", "void mm("))
    assert rec.status == "error" and rec.build_failed
    assert rec.error.startswith(f"{path}:3: the kernel file defines no kernel named 'matmul' "
                                "(it defines: mm)")
    assert "AttributeError" not in rec.error


def test_opencl_kind_that_does_not_match_the_kernel_is_said(tmp_path):
    require_backend("opencl")
    rec, path = _one_item(tmp_path, "wrong_kind",
                          edit=lambda t: t.replace('role = "user"', 'role = "user"\nkind = "aat"'))
    assert rec.status == "error" and "TypeError" not in rec.error
    assert rec.error.startswith(f"{path}:")
    assert "kind = \"aat\"" in rec.error and "takes 6" in rec.error
    assert "set kind = \"gemm\"" in rec.error


@needs_nvcc
@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace("void matmul(", "void mm("),
     "defines no kernel named 'matmul' (it defines: mm)"),
    (lambda t: t.replace('extern "C"', ""), "declare it extern \"C\""),
    (lambda t: t.replace('role = "user"', 'role = "user"\nkind = "aat"'), "set kind = \"gemm\""),
])
def test_cuda_entry_point_and_kind_are_checked_on_the_build(tmp_path, edit, expected):
    from engine.measure.backends import cuda as cuda_backend

    path = user_kernel(tmp_path, "cu_checked", NAIVE_CU, ".cu", edit=edit)
    assert registry.load_kernel_files([str(path)])[1] == []
    be = cuda_backend.CudaBackend()
    be.arch = "sm_90"
    v = registry.get("cu_checked")
    key, _arch = be._build(v, {"block": 8}, "float32")
    with pytest.raises(BuildError) as err:
        be._check_entries(v, path, key[0], be._cubins[key][0])
    assert str(err.value).startswith(f"{path}:") and expected in str(err.value)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=512))
def test_cubin_reader_never_fails_on_garbage(data):
    from engine.measure.backends.cuda import cubin_kernels

    out = cubin_kernels(b"\x7fELF\x02" + data)
    assert out is None or isinstance(out, dict)
