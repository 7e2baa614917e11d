"""Compile every CUDA kernel of the registry with nvcc and read ptxas's report.

For every variant in :data:`engine.kernels.registry.REGISTRY` that has a ``cuda`` source, both
dtypes and two architectures (sm_90, sm_80), the kernel file is compiled to a cubin with
``-Xptxas -v`` for the builds :mod:`tests.code_paths` selects, not for every product of
its parameter values: on sm_90 the default parameters, then as few combinations as take
every code path (each set of ``#if`` branches the preprocessor keeps) and every value of
every parameter at least once; on sm_80 the defaults (about 300 builds instead of 1,612). The test asserts that every such
compile succeeds, that the entry ``matmul`` is there and that it has no stack frame and
no register spills (the registers are reported in the failure message). All preprocessor
runs and compiles run once per session in a small thread pool; the parametrized tests
(one per kernel, dtype and architecture) only look their results up.

The compile-time constants of :meth:`Variant.defines` go in as ``-D`` flags, exactly as
the cuda backend passes them to nvcc (the element type is ``ELEM``, not ``T``, which
CUDA's own headers use as a template parameter name).

Without nvcc on PATH the compile tests are skipped; the check that every kernel
file starts with a header comment and defines ``matmul`` runs regardless.
"""
from __future__ import annotations

import functools
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

from engine.measure.kernel_check import (MAX_PROBE_SIDE, never_met, parse_ptxas,  # noqa: E402
                                         side_values)
from engine.kernels.registry import REGISTRY, Variant, params_to_str  # noqa: E402
from engine.measure.backends.base import BuildError  # noqa: E402
from engine.measure.backends.cuda import CudaBackend, takes_scale  # noqa: E402
from tests.code_paths import distinct_builds, preprocess_key, select  # noqa: E402

NVCC = shutil.which("nvcc")
#: Where the kernels' shared header (lab_ptx.cuh) lives; passed as -I, as the cuda backend does.
INCLUDE_DIR = ROOT / "cuda"
ARCHES = ("sm_90", "sm_80")
WORKERS = max(2, min(4, os.cpu_count() or 2))
#: Seconds one build may take: skinny's register stream takes ~20 s alone on a 2-core machine,
#: several times that beside other builds and tests
COMPILE_TIMEOUT_S = 300

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH")
#: The session's preprocessor runs and compiles run in the setup of this module's first
#: compile test: pytest.ini's 600 s per test could cut them off there on a slow machine.
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
    # (values past check-kernel's sides, e.g. ffma_regdb's tile = 64128, neither)
    size = math.lcm(1, *(int(x) for x in params.values() if 0 < int(x) <= MAX_PROBE_SIDE))
    # a class constraint is met at M or N = one of the parameter values or of the derived
    # values the shape does not change (ffma_regdb's 80- and 96-row tiles are for M up to
    # the tile height, its narrow tiles for N up to their width) or at N = size + 1 or one
    # less than such a value (its padded and warp-row copies of B are for N % 4 != 0: a
    # 64-column tile at N = 63), at K = size or a long K (crows = 0 with the warp-row copies
    # is for K > 2560), or at M = 4096 (hybrid = 1 for grids of more than a wave)
    why = v.check("cuda", params, size, size, size, dtype)
    if why is not None and never_met(v, params):     # a constraint that no shape changes
        return why
    ms = sorted({int(x) for x in params.values() if int(x) > 1} | side_values(v, params) | {size, 4096})
    if why is not None and any(v.check("cuda", params, m, n, k, dtype) is None
                               for k in (size, 8192)
                               for m in ms for n in ms + [size + 1] + [x - 1 for x in ms]
                               if max(m, n, k) <= MAX_PROBE_SIDE):     # as check-kernel's sides
        return None
    return why


@dataclass(frozen=True)
class Group:
    """One kernel, dtype and architecture: every combination that can run (``combos``),
    the defaults among them (``keep``: the portable ones and the architecture's)."""
    variant: Variant
    dtype: str
    arch: str
    combos: tuple
    keep: tuple

    @property
    def id(self) -> str:
        return f"{self.variant.name}-{self.dtype}-{self.arch}"


def _group_keys() -> list[tuple[str, str, str]]:
    """(variant, dtype, architecture) of every group, cheap to list: which combinations of
    each can run is :func:`group`'s work, done only for the groups a session runs (working
    it out for all of them took 7 s of every collection)."""
    out = []
    for v in REGISTRY.values():
        # library lines (cuBLAS), dispatch tables and Triton files compile nothing with nvcc
        if "cuda" not in v.sources or v.library or v.dispatch is not None or v.is_triton:
            continue
        for dtype in v.dtypes:
            for arch in ARCHES:
                # wgmma/setmaxnreg kernels build for real only for the exact target
                # (sm_90a); for plain sm_90 their body is a stub.
                out.append((v.name, dtype, arch + v.arch_suffix if v.arch_suffix and arch == "sm_90" else arch))
    return out


@functools.lru_cache(maxsize=None)
def group_of(name: str, dtype: str, arch: str) -> Group:
    """A group's combinations that can run and its defaults among them."""
    v = REGISTRY[name]
    combos = tuple(p for p in v.combos() if not _param_reason(v, p, dtype))
    plain = arch.removesuffix(v.arch_suffix) if v.arch_suffix else arch
    keep = tuple(p for p in (v.default_params(), v.default_params(plain)) if p in combos)
    return Group(v, dtype, arch, combos, keep)


GROUP_KEYS = _group_keys()


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
def compiled(request, tmp_path_factory) -> dict[str, list[tuple[Case, Result]]]:
    """Select the distinct builds of every group this session will look at, then
    compile them, once and in parallel: group id -> [(case, result)]."""
    wanted = {item.callspec.id for item in request.session.items
              if getattr(item, "originalname", None) == "test_nvcc_compiles"
              and hasattr(item, "callspec")}
    todo = [g for g in (group_of(*key) for key in GROUP_KEYS if "-".join(key) in wanted or not wanted)
            if g.combos]
    # every code path and parameter value on the first architecture (sm_90), each once; on
    # the others (sm_80) the defaults (issue 36: each file at its defaults × dtypes ×
    # architectures, each #if path once), whose builds take arch-dependent branches there
    chosen = distinct_builds([(g.variant, list(g.combos if g.arch.startswith(ARCHES[0]) else g.keep),
                               g.dtype, g.arch, list(g.keep)) for g in todo])
    cases = {g.id: [Case(g.variant, p, g.dtype, g.arch) for p in picked]
             for g, picked in zip(todo, chosen)}
    outdir = tmp_path_factory.mktemp("nvcc")
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        futures = {gid: [(c, pool.submit(compile_case, c, outdir)) for c in cs]
                   for gid, cs in cases.items()}
        return {gid: [(c, f.result()) for c, f in fs] for gid, fs in futures.items()}


# --- tests ---------------------------------------------------------------------------

def test_registry_has_cuda_cases():
    assert GROUP_KEYS, "no variant in the registry has a cuda source"


#: Kernels some of whose builds ptxas compiles with a wait after every wgmma (warning C7515:
#: "non wgmma instructions defining accumulator registers"), known and left: the first two
#: TF32 wgmma rungs (21 at bn = 256 holds 254 registers; 22 with clusters), teaching steps
#: the later rungs replace. Anywhere else it fails the build: zeroing step 32's accumulators
#: with ordinary instructions serialized its wgmmas and cost it 6 points of cuBLAS at 4096^3.
SERIALIZED_WGMMA_KNOWN = {"tf32_wgmma", "tf32_wgmma_ws"}


def _problem(case: Case, res: Result) -> str | None:
    """What is wrong with one build (None: it built, no stack frame, no spills, no wgmma
    serialized by ptxas)."""
    cmd = " ".join(res.cmd)
    if res.returncode != 0:
        return f"nvcc failed ({res.returncode}): {cmd}\n{res.output}"
    if not (res.cubin.is_file() and res.cubin.stat().st_size > 0):
        return f"no cubin from {cmd}"
    info = res.report().get(case.variant.entry)
    if info is None:
        return f"ptxas reported no entry '{case.variant.entry}':\n{res.output}"
    if info["arch"] != case.arch:
        return f"{case.id}: built for {info['arch']}:\n{res.output}"
    if not {"registers", "stack", "spill_stores", "spill_loads"} <= set(info):
        return f"{case.id}: could not parse ptxas's report:\n{res.output}"
    if info["spill_stores"] or info["spill_loads"] or info["stack"]:
        return (f"{case.id}: {info['registers']} registers, {info['stack']} bytes stack frame, "
                f"{info['spill_stores']} bytes spill stores, {info['spill_loads']} bytes spill loads")
    if "C7515" in res.output and case.variant.name not in SERIALIZED_WGMMA_KNOWN:
        return f"{case.id}: ptxas serialized the wgmma instructions (C7515):\n{res.output}"
    # the entries and their arguments as the backend launches them (the maps, A, ...): the
    # backend's own check, which it makes only on a machine with a GPU, before the launch
    src = case.variant.source_path("cuda")
    try:
        CudaBackend._check_entries(case.variant, src, src.read_text(), res.cubin.read_bytes())
    except BuildError as exc:
        return f"{case.id}: {exc}"
    return None


@pytest.mark.slow
@needs_nvcc
@pytest.mark.parametrize("key", GROUP_KEYS, ids=["-".join(k) for k in GROUP_KEYS])
def test_nvcc_compiles(key: tuple[str, str, str], compiled: dict[str, list[tuple[Case, Result]]]):
    """Every distinct build of a kernel (dtype, architecture) compiles, with its entry,
    no stack frame and no spills; the defaults are among the builds."""
    group = group_of(*key)
    if not group.combos:
        pytest.skip(f"{group.id}: no combination of its parameters can run in {group.dtype}")
    builds = compiled[group.id]
    assert builds, f"{group.id}: no build selected"
    params = [c.params for c, _res in builds]
    missing = [p for p in group.keep if p not in params]
    if missing:     # a default with another build's preprocessed text is that build (an
        # architecture's default may change only what the header reads: skinny's fill)
        text = {preprocess_key(group.variant, p, group.dtype, group.arch)[1] for p in params}
        missing = [p for p in missing
                   if preprocess_key(group.variant, p, group.dtype, group.arch)[1] not in text]
    assert not missing, f"{group.id}: the defaults were not built: {missing}"
    problems = [why for why in (_problem(c, r) for c, r in builds) if why]
    assert not problems, f"{len(problems)} of {len(builds)} builds:\n" + "\n".join(problems)


def test_distinct_builds_cover_every_code_path_and_value():
    """The selection of tests.code_paths on made-up preprocessor keys: one build per
    distinct text, every code path and every (parameter, value) in some build (or in a
    text built), the kept combinations (defaults) always built, fewer than all."""
    combos = [dict(bm=bm, splitk=sk) for bm in (128, 96, 64) for sk in (1, 2, 4)]
    # path: split-K or not (an #if SPLITK > 1); text: bm=96 and bm=64 build the same
    keys = [("split" if c["splitk"] > 1 else "plain",
             f"{'wide' if c['bm'] == 128 else 'narrow'}-{c['splitk']}") for c in combos]
    keep = [dict(bm=64, splitk=4)]
    got = select(keys, combos, keep)
    texts = [keys[combos.index(c)][1] for c in got]
    assert keep[0] in got and len(texts) == len(set(texts)) and len(got) < len(combos)
    assert {keys[combos.index(c)][0] for c in got} == {"split", "plain"}
    built = [c for c, k in zip(combos, keys) if k[1] in texts]
    assert {kv for c in combos for kv in c.items()} <= {kv for c in built for kv in c.items()}
    assert select([("p", "t")] * 3, combos[:3]) == combos[:1]     # one text: one build


def test_condition_names_are_the_macros_whose_values_pick_lines(tmp_path):
    """The macros a build's code path depends on: by value, those an #if/#elif reads,
    directly or through the bodies of the macros it reads, in the file and the headers it
    includes by quotes (not those only under #ifndef/defined(), nor a macro only used in
    code); by being defined, those #ifdef/#ifndef/defined() test."""
    from tests.code_paths import condition_names
    (tmp_path / "part.cuh").write_text("#if TILE > 64 /* wide */\n#define WIDE 1\n#endif\n")
    src = tmp_path / "k.cu"
    src.write_text('#include "part.cuh"\n#ifndef STAGES\n#define STAGES 4\n#endif\n'
                   "#define CTAS (BM == 64 && \\\n  BN == 128 ? 2 : 1)\n#if CTAS > 1 || defined(LATE)\n"
                   "#endif\n#if STAGES < 2\n#error\n#endif\nint x = UNROLL;\n")
    names, tested = condition_names(src)
    assert {"TILE", "CTAS", "BM", "BN", "STAGES"} <= names
    assert not {"LATE", "UNROLL", "WIDE"} & names
    assert {"STAGES", "LATE"} <= tested and "UNROLL" not in tested


def _kernel_files() -> list[Path]:
    """Every kernel file and shared header of the lab (cuda/ladder, cuda/lab, the
    experiments, opencl/ and cuda/*.cuh); dispatch tables are no kernel files."""
    files = []
    for folder in ("cuda", "opencl"):
        d = ROOT / folder
        if d.is_dir():
            files += sorted(p for p in d.rglob("*") if p.is_file() and p.suffix in (".cu", ".cl", ".cuh"))
    return files


KERNEL_FILES = _kernel_files()

#: kernel file (relative) -> (backend, kind) from the registry
# extra arguments: the workspace pointer where the header asks for one (launch.workspace),
# the scales' product of an FP8 kernel, and a pre-pass's tensor maps with maps_in = "params"
_REGISTERED = {src: (backend, v.kind, (v.workspace is not None) + takes_scale(v)
                     + (len(v.prepass.maps) if v.prepass is not None and v.prepass.maps_in == "params" else 0))
               for v in REGISTRY.values()
               for backend, src in v.sources.items() if backend in ("cuda", "opencl") and not v.library
               and v.dispatch is None}

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
    # A kernel may be another kernel file compiled with a switch (#include "ffma_narrow.cu"
    # under PAD_B in ffma_narrow_padb.cu): its entry point is the included file's.
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
@pytest.mark.slow
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
