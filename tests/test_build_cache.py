"""The cubin cache on disk (engine.measure.build_cache): real nvcc builds through the cuda
backend (no GPU needed: the backend is given an architecture as open() would), kept
across backends, never wrong (any input nvcc reads changes the name), never a crash."""
from __future__ import annotations

import concurrent.futures
import os
import shutil
from pathlib import Path

import pytest

from engine.kernels import registry
from engine.measure import build_cache
from engine.measure.backends import cuda as cuda_backend
from engine.measure.backends.base import BuildError

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

TILED = ("tiled_any", {"block": 16}, "float32")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """MATMUL_LAB_CACHE at a fresh folder; returns where the cubins go."""
    monkeypatch.setenv(build_cache.ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / "cubins"


def backend():
    be = cuda_backend.CudaBackend()
    be.arch = "sm_90"  # as open() would set it on an H100/H200, without a device
    return be


def build(be, name, params, dtype):
    key, _arch = be._build(registry.get(name), params, dtype)
    return be._cubins[key]


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.cubin-entry")) if folder.is_dir() else []


@needs_nvcc
def test_a_second_backend_finds_the_build_on_disk_and_other_options_build_again(cache_dir, nvcc_runs):
    first = build(backend(), *TILED)
    # the build's entry and its device text's (tests/test_build_dedupe.py)
    assert len(nvcc_runs) == 1 and len(entries(cache_dir)) == 2
    assert build(backend(), *TILED) == first           # same cubin, same ptxas report
    assert len(nvcc_runs) == 1
    assert first[0][:4] == b"\x7fELF" and "registers" in first[1]
    other = build(backend(), "tiled_any", {"block": 8}, "float32")
    assert len(nvcc_runs) == 2 and other[0] != first[0] and len(entries(cache_dir)) == 4


@needs_nvcc
def test_another_nvcc_version_builds_again(cache_dir, nvcc_runs, monkeypatch):
    build(backend(), *TILED)
    monkeypatch.setattr(cuda_backend, "nvcc_version", lambda nvcc: "Cuda compilation tools, V0.0")
    build(backend(), *TILED)
    assert len(nvcc_runs) == 2


@needs_nvcc
def test_a_header_beside_a_lab_file_is_part_of_the_name(cache_dir, nvcc_runs, tmp_path, monkeypatch):
    """The lab's own files are keyed by their text and cuda/*.cuh in memory; on disk (a later
    start, after an edit) a header beside the file counts too."""
    naive = (registry.ROOT / "cuda" / "ladder" / "01_naive.cu").read_text()
    folder = tmp_path / "lab"
    folder.mkdir()
    # a function (not a macro: its text stays in the device text, used or not)
    (folder / "extra.cuh").write_text("__device__ float extra() { return 1.0f; }\n")
    text = naive.replace('name = "naive"', 'name = "cached_naive"').replace(
        'role = "baseline"', 'role = "user"').replace(
        "#ifndef ELEM", '#include "extra.cuh"\n#ifndef ELEM', 1)
    path = folder / "cached_naive.cu"
    path.write_text(text)
    names, problems = registry.load_kernel_files([str(path)])
    assert names == ["cached_naive"] and not problems
    monkeypatch.setattr(cuda_backend, "is_builtin_file", lambda p: Path(p) == path)
    params = registry.get("cached_naive").default_params()
    build(backend(), "cached_naive", params, "float32")
    build(backend(), "cached_naive", params, "float32")
    assert nvcc_runs == ["cached_naive.cu"]
    (folder / "extra.cuh").write_text("__device__ float extra() { return 2.0f; }\n")
    build(backend(), "cached_naive", params, "float32")
    assert nvcc_runs == ["cached_naive.cu"] * 2


@needs_nvcc
@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty", "foreign", "folder"])
def test_a_damaged_entry_is_built_again_and_replaced(cache_dir, nvcc_runs, damage):
    good = build(backend(), *TILED)
    both = entries(cache_dir)           # the build's entry and its device text's: both damaged
    assert len(both) == 2
    for entry in both:
        data = entry.read_bytes()
        if damage == "folder":
            entry.unlink()
            entry.mkdir()
        else:
            entry.write_bytes({"truncated": data[:len(data) // 2],
                               "flipped": data[:-1] + bytes([data[-1] ^ 1]),
                               "empty": b"",
                               "foreign": b"\x7fELF" + data[4:]}[damage])
    again = build(backend(), *TILED)     # built again: its report's compile time differs
    assert again[0] == good[0] and len(nvcc_runs) == 2
    if damage != "folder":          # a folder there is left alone: the build goes on
        for entry in both:
            key = entry.name.removesuffix(".cubin-entry")
            assert build_cache.BuildCache(cache_dir).get(key) == build_cache.CachedBuild(*again)
        assert build(backend(), *TILED) == again and len(nvcc_runs) == 2


@needs_nvcc
@pytest.mark.parametrize("value", ["off", "", " OFF "])
def test_off_or_empty_keeps_nothing_on_disk(tmp_path, monkeypatch, nvcc_runs, value):
    monkeypatch.setenv(build_cache.ENV, value)
    monkeypatch.chdir(tmp_path)
    build(backend(), *TILED)
    build(backend(), *TILED)
    assert len(nvcc_runs) == 2 and list(tmp_path.iterdir()) == []


@needs_nvcc
def test_a_cache_that_cannot_be_written_costs_nothing_but_the_cache(tmp_path, monkeypatch, nvcc_runs):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(build_cache.ENV, str(blocker))
    cubin, log = build(backend(), *TILED)
    assert cubin[:4] == b"\x7fELF" and blocker.read_text() == "not a folder"


@needs_nvcc
def test_a_failed_build_is_not_kept(cache_dir, tmp_path):
    bad = tmp_path / "broken.cu"
    text = (registry.ROOT / "cuda" / "ladder" / "01_naive.cu").read_text().replace(
        'name = "naive"', 'name = "broken_cached"').replace('role = "baseline"', 'role = "user"')
    bad.write_text(text.replace("#ifndef ELEM", "this is not C++;\n#ifndef ELEM", 1))
    names, problems = registry.load_kernel_files([str(bad)])
    assert names == ["broken_cached"] and not problems
    v = registry.get("broken_cached")
    with pytest.raises(BuildError, match="broken.cu"):
        backend()._build(v, v.default_params(), "float32")
    assert entries(cache_dir) == []


def test_the_default_folder_follows_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(build_cache.ENV, str(tmp_path / "c"))
    assert build_cache.default_folder() == tmp_path / "c" / "cubins"
    monkeypatch.setenv(build_cache.ENV, str(tmp_path / "c" / "autotune.json"))  # autotune's file
    assert build_cache.default_folder() == tmp_path / "c" / "cubins"
    monkeypatch.setenv(build_cache.ENV, "off")
    assert build_cache.default_folder() is None and cuda_backend.CudaBackend()._disk is None
    monkeypatch.delenv(build_cache.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build_cache.default_folder() == tmp_path / "xdg" / "matmul-lab" / "cubins"


def test_eviction_removes_the_entries_used_longest_ago(tmp_path):
    cache = build_cache.BuildCache(tmp_path, max_bytes=10**9, max_entries=3)
    for i in range(3):
        assert cache.put(f"k{i}", bytes([i]) * 100, f"log {i}")
        os.utime(cache._path(f"k{i}"), (1000 + i, 1000 + i))
    assert cache.get("k0") is not None           # used now: the newest
    assert cache.put("k3", b"x" * 100, "log 3")
    assert [cache.get(f"k{i}") is not None for i in range(4)] == [True, False, True, True]
    size = cache._path("k3").stat().st_size          # 100 bytes and the entry's header
    small = build_cache.BuildCache(tmp_path / "s", max_bytes=2 * size + 10, max_entries=100)
    for i in range(4):
        small.put(f"k{i}", b"y" * 100, "")
        os.utime(small._path(f"k{i}"), (1000 + i, 1000 + i))
    small.evict()
    assert [small.get(f"k{i}") is not None for i in range(4)] == [False, False, True, True]


def test_a_temporary_file_left_by_a_dead_writer_goes(tmp_path):
    cache = build_cache.BuildCache(tmp_path)
    old, young = tmp_path / ".x.abc.tmp", tmp_path / ".y.abc.tmp"
    old.write_bytes(b"partial")
    young.write_bytes(b"partial")
    os.utime(old, (1000, 1000))
    cache.put("k", b"cubin", "log")
    assert not old.exists() and young.exists()


def _hammer(folder: str, cubin: bytes, log: str, writer: int, max_entries: int) -> tuple[int, int]:
    """Write and read one shared key and one key of this writer's many times; returns
    (reads that are not exactly what was written, reads of the shared key that missed)."""
    cache = build_cache.BuildCache(Path(folder), max_entries=max_entries)
    wrong = missed = 0
    for i in range(150):
        cache.put("shared", cubin, log)
        got = cache.get("shared")
        missed += got is None
        wrong += got is not None and got != build_cache.CachedBuild(cubin, log)
        own, want = f"w{writer}-{i % 12}", cubin + bytes([writer, i % 12])
        cache.put(own, want, log)
        got = cache.get(own)
        wrong += got is not None and got != build_cache.CachedBuild(want, log)
    return wrong, missed


@needs_nvcc
@pytest.mark.slow
def test_concurrent_writers_and_readers_never_see_half_an_entry(tmp_path):
    """Processes (xdist workers, engine processes) write the same and different entries
    at once: every read is exactly what was written, and a written entry is always found
    whole (a reader never meets one half-written), also while they evict."""
    v = registry.get("tiled_any")
    cubin, log = cuda_backend.nvcc_cubin(
        v.source_path("cuda"), cuda_backend.nvcc_options(v, {"block": 16}, "float32"), "sm_90")
    for folder, max_entries in ((tmp_path / "all", 1000), (tmp_path / "evicting", 8)):
        with concurrent.futures.ProcessPoolExecutor(4) as pool:
            results = list(pool.map(_hammer, *zip(*[(str(folder), cubin, log, w, max_entries)
                                                    for w in range(4)])))
        assert [wrong for wrong, _ in results] == [0] * 4
        if max_entries == 1000:
            assert [missed for _, missed in results] == [0] * 4
        assert build_cache.BuildCache(folder).get("shared") == build_cache.CachedBuild(cubin, log)
        names = [p.name for p in folder.iterdir()]
        # Two evictions at once may both count one removal: a writer's slack each.
        assert len(names) <= max_entries + 4 and not [n for n in names if n.endswith(".tmp")]


@needs_nvcc
def test_two_builders_of_one_kernel_at_once_run_nvcc_once(cache_dir, nvcc_runs):
    """Two engines (here threads with backends of their own; processes lock alike) that
    need the same kernel at the same moment: one builds, the other waits and reads it."""
    import threading
    start, got = threading.Barrier(2), []

    def one():
        be = backend()
        start.wait()
        got.append(build(be, *TILED))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(got) == 2 and got[0] == got[1] and len(nvcc_runs) == 1


def test_a_build_lock_held_too_long_is_waited_for_only_so_long(tmp_path):
    import fcntl
    import time
    cache = build_cache.BuildCache(tmp_path)
    with cache.building("k", wait_s=5):
        fd = os.open(tmp_path / "k.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):     # the block holds the lock
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            t0 = time.monotonic()
            with cache.building("k", wait_s=0.3):    # a second holder gives up waiting
                waited = time.monotonic() - t0
        finally:
            os.close(fd)
    assert 0.3 <= waited < 3
    with cache.building("k", wait_s=5):              # released: taken at once
        pass
