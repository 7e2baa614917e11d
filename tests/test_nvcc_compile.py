"""Compile every CUDA kernel of the registry with nvcc and read ptxas's report.

For every variant in :data:`engine.registry.REGISTRY` that has a ``cuda`` source,
every combination of its parameter space, both dtypes and two architectures
(sm_90, sm_80), the kernel file is compiled to a cubin with ``-Xptxas -v``; the test
asserts that the compile succeeds, that the entry ``matmul`` is there and that it
has no stack frame and no register spills (the registers are reported in the
failure message). All compiles run once per session in a small thread pool; the
parametrized tests only look their result up.

The compile-time constants of :meth:`Variant.defines` go in as ``-D`` flags, exactly as
the cuda backend passes them to nvcc (the element type is ``ELEM``, not ``T``, which
CUDA's own headers use as a template parameter name).

Without nvcc on PATH the compile tests are skipped; the check that every kernel
file starts with a header comment and defines ``matmul`` runs regardless.
"""
from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.kernel_check import parse_ptxas  # noqa: E402
from engine.registry import REGISTRY, Variant, params_to_str  # noqa: E402

NVCC = shutil.which("nvcc")
#: Where the kernels' shared header (lab_ptx.cuh) lives; passed as -I, as the cuda backend does.
INCLUDE_DIR = ROOT / "cuda"
ARCHES = ("sm_90", "sm_80")
WORKERS = max(2, min(4, os.cpu_count() or 2))
COMPILE_TIMEOUT_S = 120

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
#: The session's compiles (~400 cubins, ~10 min on a 2-core CI machine) run in the setup of
#: this module's first test: pytest.ini's 600 s per test would cut them off there.
pytestmark = pytest.mark.timeout(1800)


# --- the cases -----------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    variant: Variant
    params: dict
    dtype: str
    arch: str

    @property
    def id(self) -> str:
        p = params_to_str(self.params) or "default"
        return f"{self.variant.name}-{p}-{self.dtype}-{self.arch}"


def _param_reason(v: Variant, params: dict, dtype: str) -> str | None:
    """Why a combination can never run (e.g. wpt not dividing ts), whatever the shape.

    The sizes are a common multiple of every parameter, so shape constraints such as
    tiled's 'multiple of block' are met and only parameter-level reasons remain.
    """
    # (a 0 such as persist=0 or streamk=0 does not enter the multiple: lcm(..., 0) is 0)
    size = math.lcm(1, *(int(x) for x in params.values() if int(x) > 0))
    # a class constraint is met at M or N = one of the parameter values (ffma_regdb's 80-
    # and 96-row tiles are for M up to the tile height, ffma_narrow's tiles for N up to
    # 64) or at N = size + 1 or one less than a parameter value (the _padb rungs are for
    # N % 4 != 0: ffma_narrow_padb's 64-column tiles at N = 63), at K = size or a long K
    # (ffma_regdb_b4's crows = 0 is for K > 2560), or at M = 4096 (its hybrid = 1 for grids
    # of more than a wave)
    why = v.check("cuda", params, size, size, size, dtype)
    ms = sorted({int(x) for x in params.values() if int(x) > 1} | {size, 4096})
    if why is not None and any(v.check("cuda", params, m, n, k, dtype) is None
                               for k in (size, 8192)
                               for m in ms for n in ms + [size + 1] + [x - 1 for x in ms]):
        return None
    return why


def _cases() -> list[Case]:
    out = []
    for v in REGISTRY.values():
        if "cuda" not in v.sources or v.library:  # library lines (cuBLAS) compile nothing
            continue
        for params in v.combos():
            for dtype in v.dtypes:
                if _param_reason(v, params, dtype):
                    continue
                for arch in ARCHES:
                    # wgmma/setmaxnreg kernels build for real only for the exact target
                    # (sm_90a); for plain sm_90 their body is a stub.
                    if v.arch_suffix and arch == "sm_90":
                        arch += v.arch_suffix
                    out.append(Case(v, params, dtype, arch))
    return out


CASES = _cases()


# --- compiling and parsing -----------------------------------------------------------

@dataclass
class Result:
    cmd: list[str]
    returncode: int
    output: str
    cubin: Path

    def report(self) -> dict:
        """ptxas's figures for the entry ``matmul``."""
        return parse_ptxas(self.output)


def compile_case(case: Case, outdir: Path) -> Result:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", case.id)
    cubin = outdir / f"{stem}.cubin"
    defines = [f"-D{k}={v}" for k, v in case.variant.defines(case.params, case.dtype).items()]
    cmd = [NVCC, f"-arch={case.arch}", "-cubin", "-Xptxas", "-v", *defines, f"-I{INCLUDE_DIR}",
           "-o", str(cubin), str(case.variant.source_path("cuda"))]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        return Result(cmd, -1, f"timed out after {exc.timeout} s", cubin)
    return Result(cmd, proc.returncode, proc.stdout + proc.stderr, cubin)


@pytest.fixture(scope="session")
def compiled(request, tmp_path_factory) -> dict[str, Result]:
    """Compile, once and in parallel, every case this session will look at."""
    wanted = {item.callspec.id for item in request.session.items
              if getattr(item, "originalname", None) == "test_nvcc_compiles"
              and hasattr(item, "callspec")}
    todo = [c for c in CASES if c.id in wanted] or CASES
    outdir = tmp_path_factory.mktemp("nvcc")
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {c.id: pool.submit(compile_case, c, outdir) for c in todo}
        return {cid: f.result() for cid, f in futures.items()}


# --- tests ---------------------------------------------------------------------------

def test_registry_has_cuda_cases():
    assert CASES, "no variant in the registry has a cuda source"


@needs_nvcc
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_nvcc_compiles(case: Case, compiled: dict[str, Result]):
    res = compiled[case.id]
    cmd = " ".join(res.cmd)
    assert res.returncode == 0, f"nvcc failed ({res.returncode}): {cmd}\n{res.output}"
    assert res.cubin.is_file() and res.cubin.stat().st_size > 0, f"no cubin from {cmd}"

    entries = res.report()
    assert case.variant.entry in entries, f"ptxas reported no entry '{case.variant.entry}':\n{res.output}"
    info = entries[case.variant.entry]
    assert info["arch"] == case.arch, res.output
    assert {"registers", "stack", "spill_stores", "spill_loads"} <= set(info), \
        f"could not parse ptxas's report:\n{res.output}"
    summary = (f"{case.id}: {info['registers']} registers, {info['stack']} bytes stack frame, "
               f"{info['spill_stores']} bytes spill stores, {info['spill_loads']} bytes spill loads")
    assert info["spill_stores"] == 0, summary
    assert info["spill_loads"] == 0, summary
    assert info["stack"] == 0, summary


def _kernel_files() -> list[Path]:
    files = []
    for folder in ("cuda", "opencl"):
        d = ROOT / folder
        if d.is_dir():
            files += sorted(p for p in d.iterdir() if p.is_file())
    return files


KERNEL_FILES = _kernel_files()

#: kernel file (relative) -> (backend, kind) from the registry
_REGISTERED = {src: (backend, v.kind, v.workspace is not None) for v in REGISTRY.values()
               for backend, src in v.sources.items() if backend in ("cuda", "opencl") and not v.library}

_ENTRY_DECL = {
    "cuda": re.compile(r'extern\s+"C"\s+__global__\b[^;{]*?\bvoid\s+matmul\s*\(([^)]*)\)'),
    "opencl": re.compile(r"__kernel\b[^;{]*?\bvoid\s+matmul\s*\(([^)]*)\)"),
}


def test_registered_kernel_files_exist():
    missing = [src for src in _REGISTERED if not (ROOT / src).is_file()]
    assert not missing, f"registry names kernel files that do not exist: {missing}"


@pytest.mark.parametrize("path", KERNEL_FILES, ids=[p.relative_to(ROOT).as_posix() for p in KERNEL_FILES])
def test_kernel_file_has_header_and_entry(path: Path):
    text = path.read_text()
    rel = path.relative_to(ROOT).as_posix()
    head = text.lstrip()
    assert head.startswith(("/*", "//")), f"{rel} does not start with a header comment"
    if head.startswith("/*"):
        header = head[:head.find("*/")]
        assert len(header.splitlines()) >= 3, f"{rel}: header comment too short"

    if path.suffix not in (".cu", ".cl"):
        return  # shared headers (e.g. lab_ptx.cuh) need no entry point
    backend = "cuda" if path.suffix == ".cu" else "opencl"
    # A kernel may be another kernel file compiled with a switch (#include "19_ffma_wide.cu"
    # under PAD_B in 25; 29 includes 28, which includes 18): its entry point is the
    # included file's.
    seen, todo = set(), re.findall(r'^#include "([^"]+\.cu)"', text, flags=re.M)
    while todo:
        inc = todo.pop()
        if inc not in seen:
            seen.add(inc)
            inner = (path.parent / inc).read_text()
            text += inner
            todo += re.findall(r'^#include "([^"]+\.cu)"', inner, flags=re.M)
    m = _ENTRY_DECL[backend].search(text)
    assert m, f"{rel} does not define the entry point 'matmul' ({backend} style)"
    if rel in _REGISTERED:
        n_args = len([a for a in m.group(1).split(",") if a.strip()])
        # + the workspace pointer where the header asks for one (launch.workspace)
        expected = (4 if _REGISTERED[rel][1] == "aat" else 6) + _REGISTERED[rel][2]
        assert n_args == expected, f"{rel}: matmul takes {n_args} arguments, expected {expected}"


# --- the shared PTX helpers (cuda/lab_ptx.cuh) ---------------------------------------

SHARED_HEADER = INCLUDE_DIR / "lab_ptx.cuh"
_HELPER_DEF = re.compile(r"^__device__\s+__forceinline__\s+[\w\s]*?\b(\w+)\s*\(", re.M)
_INCLUDES_HEADER = re.compile(r'^\s*#\s*include\s*["<](?:[\w./]*/)?lab_ptx\.cuh[">]', re.M)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def _shared_helpers() -> set[str]:
    return set(_HELPER_DEF.findall(SHARED_HEADER.read_text()))


def _cuda_sources() -> list[Path]:
    """Every CUDA source under cuda/ (experiments included) but the shared header."""
    return sorted(p for p in INCLUDE_DIR.rglob("*") if p.suffix in (".cu", ".cuh") and p != SHARED_HEADER)


def test_shared_header_defines_the_helpers():
    helpers = _shared_helpers()
    assert {"cp_async16", "cp_async_commit", "cp_async_wait", "make_desc", "mbar_init",
            "mbar_wait"} <= helpers, sorted(helpers)


@pytest.mark.parametrize("path", _cuda_sources(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_kernels_use_the_shared_helpers_not_copies(path: Path):
    """No kernel file defines its own copy of a helper of lab_ptx.cuh (a function or a
    macro of the same name), and every file that calls one includes the header."""
    code = _COMMENT.sub(" ", path.read_text())
    rel = path.relative_to(ROOT).as_posix()
    helpers = _shared_helpers()
    copies = sorted({name for name in helpers
                     if re.search(rf"__device__[^;{{}}()]*\b{name}\s*\(|#\s*define\s+{name}\b", code)})
    assert not copies, f"{rel} defines its own {', '.join(copies)}: use the ones in lab_ptx.cuh"
    used = sorted(name for name in helpers if re.search(rf"\b{name}\s*(<[^<>]*>)?\s*\(", code))
    if used:
        assert _INCLUDES_HEADER.search(code), \
            f'{rel} calls {", ".join(used)} but does not #include "lab_ptx.cuh"'


@needs_nvcc
@pytest.mark.parametrize("name", ["ffma_regdb", "tf32_wgmma_ws"])
def test_a_copy_elsewhere_finds_the_shared_header(name: str, tmp_path: Path):
    """A kernel copied out of cuda/ (as main.py new-kernel does) still compiles: the
    include directory, not the file's own folder, finds lab_ptx.cuh. tf32_wgmma_ws is
    built for sm_90a, so the header's Hopper helpers are compiled too."""
    v = REGISTRY[name]
    src = v.source_path("cuda")
    assert _INCLUDES_HEADER.search(src.read_text()), f"{src.name} no longer includes lab_ptx.cuh"
    copy = tmp_path / "elsewhere" / src.name
    copy.parent.mkdir()
    copy.write_text(src.read_text())
    arch = "sm_90" + v.arch_suffix
    target = f"-gencode=arch=compute_{arch[3:]},code={arch}" if v.arch_suffix else f"-arch={arch}"
    defines = [f"-D{k}={val}" for k, val in v.defines(v.default_params(), "float32").items()]
    cubin = tmp_path / "k.cubin"
    cmd = [NVCC, target, "-cubin", *defines, f"-I{INCLUDE_DIR}", "-o", str(cubin), str(copy)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}{proc.stderr}"
    assert cubin.stat().st_size > 0
