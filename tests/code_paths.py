"""Which parameter combinations of a CUDA kernel build distinct code: the builds a test
needs so that every code path of a kernel file is compiled (or run) once, not every
product of its parameter values.

Two combinations take the same *code path* when the preprocessor keeps the same source
lines for both: the same ``#if``/``#ifdef`` branches of the kernel file and of the files
it includes. That is read off nvcc's own device-side preprocessor (the build's defines and
target, ~20 ms a run), from its line markers: the signature of a combination is the list
of (file, line) its preprocessed text came from. On one code path the parameters only
change constants (tile sizes, loop counts, slices). Combinations whose preprocessed text
is identical are one build. The builds kept, per kernel, dtype and architecture: the
default parameters, then a small covering set in which every code path and every value
of every parameter occurs at least once (greedy set cover); e.g. 1,612 builds of every
product of values for the compile test become ~500.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INCLUDE_DIR = ROOT / "cuda"
_LINE_MARKER = re.compile(r'# (\d+) "((?:[^"\\]|\\.)*)"')


@functools.lru_cache(maxsize=None)
def _device_preprocessor(arch: str) -> tuple[list[str], list[str]]:
    """nvcc's device-side preprocessor command for ``arch`` as ``nvcc --dryrun -E`` prints
    it (gcc with __CUDA_ARCH__, __CUDA_ARCH_FEAT_SM90_ALL for sm_90a, ...), less its input:
    (the command without the forced ``-include cuda_runtime.h``, the one with it)."""
    from engine.measure.backends.cuda import find_nvcc     # CUDA_ROOT's, else PATH's: the backend's

    proc = subprocess.run([find_nvcc(), "--dryrun", "-E", f"-gencode=arch=compute_{arch[3:]},code={arch}",
                           "-x", "cu", os.devnull], capture_output=True, text=True, timeout=60)
    line = next((ln[3:] for ln in (proc.stdout + proc.stderr).splitlines()
                 if ln.startswith("#$ ") and "-D__CUDA_ARCH__=" in ln and " -E " in ln), None)
    if line is None:
        raise RuntimeError(f"no device preprocessor in nvcc --dryrun for {arch}:\n"
                           f"{proc.stdout}{proc.stderr}")
    full = [a for a in shlex.split(line) if a != os.devnull]
    at = full.index("-include") if "-include" in full else len(full)
    return full[:at] + full[at + 2:], full


def preprocess_key(variant, params: dict, dtype: str, arch: str) -> tuple[str, str]:
    """(code path, text) hashes of one build: the source lines its preprocessed text came
    from, and that text. ``arch`` as the build's (``sm_80``, ``sm_90a``).

    The preprocessor is nvcc's own device pass (its predefined macros for ``arch``) on the
    build's defines, without the header nvcc forces in (cuda_runtime.h: 37,000 lines, 4/5
    of the time; a kernel's own ``#include`` of a CUDA header still is): where an ``#if``
    reads a macro nothing defined (``-Wundef``: one that header might have) it runs again
    with it."""
    source = variant.source_path("cuda")
    lean, full = _device_preprocessor(arch)
    defines = [f"-D{k}={v}" for k, v in variant.defines(params, dtype).items()]
    cmd = [*lean, "-Wundef", *defines, f"-I{INCLUDE_DIR}", str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode == 0 and "-Wundef" in proc.stderr:
        proc = subprocess.run([*full, *defines, f"-I{INCLUDE_DIR}", str(source)],
                              capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:         # an #error: its own code path (the build will say why)
        return hashlib.sha1(proc.stderr.encode()).hexdigest(), proc.stderr
    origin, text = hashlib.sha1(), hashlib.sha1()
    file, line = "", 0
    for out in proc.stdout.split("\n"):
        m = _LINE_MARKER.match(out)
        if m:
            line, file = int(m[1]), m[2]
            continue
        if out.strip():
            origin.update(f"{file}:{line}\n".encode())
            text.update(out.encode() + b"\n")
        line += 1
    return origin.hexdigest(), text.hexdigest()


def cover(candidates: list, needs, first: list = ()) -> list:
    """Greedy set cover: ``first``, then the candidate that meets the most needs not yet
    met (the earliest of equals), until every need of every candidate is met."""
    chosen = list(first)
    left = set().union(*map(needs, candidates)) - set().union(*map(needs, chosen))
    while left:
        best = max(candidates, key=lambda c: len(left & needs(c)))
        chosen.append(best)
        left -= needs(best)
    return chosen


def select(keys: list[tuple[str, str]], combos: list[dict], keep: list[dict] = ()) -> list[dict]:
    """The builds to keep, given each combination's :func:`preprocess_key` (code path,
    text): one combination per distinct text; of those, ``keep`` (the defaults) and then
    as few as cover every code path and every (parameter, value). ``combos`` in the order
    to prefer."""
    order = sorted(range(len(combos)), key=lambda i: combos[i] not in keep)   # keep first
    by_text: dict[str, int] = {}
    for i in order:
        by_text.setdefault(keys[i][1], i)
    candidates = list(by_text.values())

    def needs(i: int) -> set:
        return {("path", keys[i][0])} | {("value", *kv) for kv in combos[i].items()}

    chosen = cover(candidates, needs, [i for i in candidates if combos[i] in keep])
    return [combos[i] for i in chosen]


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
_CONDITION = re.compile(r'^\s*#\s*(?:if|elif)\b(.*)$', re.M)
_DEFINE = re.compile(r'^\s*#\s*define\s+([A-Za-z_]\w*)(?:\([^)]*\))?(.*)$', re.M)
_DEFINED = re.compile(r'\bdefined\s*(?:\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))')
_IFDEF = re.compile(r'^\s*#\s*ifn?def\s+([A-Za-z_]\w*)', re.M)
_NAME = re.compile(r'\b[A-Za-z_]\w*')
_COMMENT = re.compile(r'/\*.*?\*/|//[^\n]*', re.S)


@functools.lru_cache(maxsize=None)
def condition_names(source: Path) -> tuple[frozenset[str], frozenset[str]]:
    """The macros that can change which lines of ``source`` (and of the headers it includes
    by quotes, beside it or in cuda/) the preprocessor keeps: (those whose *values* count:
    the names in ``#if``/``#elif`` conditions and in the bodies of macros those name, to a
    fixed point; those whose being defined counts: ``#ifdef``, ``#ifndef``, ``defined``)."""
    texts, todo, seen = [], [Path(source)], set()
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.add(path)
        text = _COMMENT.sub(" ", path.read_text(encoding="utf-8", errors="replace").replace("\\\n", " "))
        texts.append(text)
        todo += [d / inc for inc in _INCLUDE.findall(text) for d in (path.parent, INCLUDE_DIR)]
    names, tested, bodies = set(), set(), {}
    for text in texts:
        tested |= set(_IFDEF.findall(text))
        for cond in _CONDITION.findall(text):
            tested |= {a or b for a, b in _DEFINED.findall(cond)}
            names |= set(_NAME.findall(_DEFINED.sub(" ", cond)))
        for name, body in _DEFINE.findall(text):
            tested |= {a or b for a, b in _DEFINED.findall(body)}
            bodies.setdefault(name, set()).update(_NAME.findall(_DEFINED.sub(" ", body)))
    while True:
        more = set().union(*(bodies.get(n, set()) for n in names)) - names
        if not more:
            return frozenset(names), frozenset(tested)
        names |= more


def _keys(groups: list[tuple], workers: int | None = None) -> list[list[tuple[str, str]]]:
    """The (code path, text) key of every combination of ``groups`` ((variant, combos,
    dtype, arch, ...)), group by group. Combinations of a file and architecture that give
    the macros of :func:`condition_names` the same values (and define the same of those
    tested for being defined) take the same code path, as a kernel's two dtypes mostly do:
    one of them is preprocessed (:func:`preprocess_key`, all in one pool) and the others
    share its path, half the runs of every combination. Each combination's text is told
    apart by its defines (builds whose defines differ are taken as different texts)."""
    workers = workers or max(2, os.cpu_count() or 2)
    runs, keys = {}, []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for v, combos, dtype, arch, *_rest in groups:
            source = v.source_path("cuda")
            names, tested = condition_names(Path(source))
            group = []
            for c in combos:
                defines = v.defines(c, dtype)
                # the dtype only through its defines (ELEM, ...), where a condition reads them
                path_key = (str(source), arch, tuple((k, x) for k, x in defines.items() if k in names),
                            tuple(sorted(k for k in defines if k in tested)))
                if path_key not in runs:
                    runs[path_key] = (defines, pool.submit(preprocess_key, v, c, dtype, arch))
                group.append((path_key, defines))
            keys.append(group)
        out = []
        for group in keys:
            row = []
            for path_key, defines in group:
                first, future = runs[path_key]
                origin, text = future.result()
                if defines != first:
                    text = hashlib.sha1(f"{text}\n{sorted(defines.items())}".encode()).hexdigest()
                row.append((origin, text))
            out.append(row)
        return out


def distinct_builds(groups: list[tuple]) -> list[list[dict]]:
    """``groups``: (variant, combos, dtype, arch, keep) with the combinations a test would
    build and those it keeps whatever (the defaults); returns, group by group, the
    :func:`select` of the combinations."""
    return [select(keys, combos, keep)
            for (v, combos, dtype, arch, keep), keys in zip(groups, _keys(groups))]


def device_arch() -> str:
    """The first CUDA device's architecture (``sm_90`` on an H100/H200)."""
    from tests.helpers import backend_status
    return "sm_" + backend_status("cuda").devices[0].compute_capability.replace(".", "")


def distinct_items(items: list[tuple[str, dict]], shapes, dtype: str, also=None,
                   arch: str | None = None) -> list[tuple[str, dict]]:
    """A GPU test's plan items reduced to distinct code paths as :func:`select` reduces
    builds, shape by shape: the defaults, then as few items as run, at every shape, every
    code path and every value of every parameter that any item runs there (values the
    shape picks resolved; the build for ``arch``, the device's, ``sm_90a`` for wgmma
    kernels), and every value of ``also(params)`` (a feature a test asserts, e.g. a pair
    of values). Items that run nowhere (library lines, skips a test looks at) are all
    kept; the items' order is kept."""
    from engine.kernels import registry

    arch = arch or device_arch()
    runs = {}                       # item index -> [(shape, resolved params)] it runs at
    for i, (name, params) in enumerate(items):
        v = registry.get(name)
        runs[i] = [] if v.library else [(s, v.resolve(params, *s)) for s in shapes
                                        if v.check("cuda", params, *s, dtype) is None]
    groups = []
    for i, at in runs.items():
        v = registry.get(items[i][0])
        target = arch + v.arch_suffix if v.arch_suffix and arch == "sm_90" else arch
        groups += [(v, [p], dtype, target) for _s, p in at]
    keys = {(v.name, tuple(p.items())): key for (v, [p], *_rest), [key] in zip(groups, _keys(groups))}
    needs = {}
    for i, at in runs.items():
        name, out = items[i][0], set()
        for s, p in at:
            path = keys[(name, tuple(p.items()))][0]
            out |= {(name, s, "path", path)} | {(name, s, "value", *kv) for kv in p.items()}
            if also:
                out.add((name, s, "also", also(p)))
        needs[i] = out

    def is_default(name: str, params: dict) -> bool:     # a value the shape picks counts
        v = registry.get(name)
        return any(all(params.get(k) in (registry.AUTO, x) for k, x in d.items())
                   for d in (v.default_params(), v.default_params(arch)))

    candidates = [i for i in runs if runs[i]]
    chosen = set(cover(candidates, needs.__getitem__,
                       [i for i in candidates if is_default(*items[i])]))
    return [it for i, it in enumerate(items) if i in chosen or not runs[i]]
