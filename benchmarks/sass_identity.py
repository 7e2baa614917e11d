#!/usr/bin/env python3
"""Do two kernel builds compile to the same machine code? The no-GPU proof that a moved or
merged kernel file runs as before.

Each pair names an old build (variant and parameters, in an old checkout of the lab) and
a new one (in this checkout, or another). Both are compiled as the engine compiles them
(each tree's own ``nvcc_options`` and ``nvcc_cubin``: the same -D defines and nvcc flags),
for every architecture and dtype asked, disassembled with ``cuobjdump -sass -res-usage``
and compared kernel by kernel (by entry name): addresses, encodings and the function
header stripped for "same instructions", the encodings (control bits: stalls, barriers,
reuse) kept for "identical".

    python3 benchmarks/sass_identity.py --old-tree OLD --pair 'ffma_regdb_b4[bm=64]' 'ffma_regdb[tile=64128,bcopy=2,crows=1]'
    python3 benchmarks/sass_identity.py --old-tree OLD --map mapping.json --arch sm_90 sm_80 -j 2

``OLD`` is a checkout of the earlier tree (e.g. ``git worktree add ../old36 5f06ec8``);
``--new-tree`` defaults to this checkout. ``--map`` reads a JSON or Python-literal list
(``-`` reads standard input); an entry is either a pair of labels ``["old[p=v,...]",
"new[p=v,...]"]`` (a name alone: its default parameters), or a table::

    {"old": "ffma_regdb_b4", "old_params": "*",          # or {"bm": 64, ...}
     "new": "ffma_regdb", "new_params": {"bcopy": 2},
     "carry": true, "rename": {"crows": "c_rows"}, "compute": {"tile": "bm * 1000 + bn"}}

``"*"`` expands to every combination of the old variant's parameters that some shape
accepts (check-kernel's probe shapes); ``carry`` (the default) carries each old parameter
that the new variant also has (after ``rename``) over to the new build, then ``compute``
(integer expressions of the old parameters), then ``new_params`` on top. Parameters a build does not name take the variant's defaults. Where the new header
loads, the table says whether it accepts the new parameters at the shape the old header
accepted the old ones at (``acc``): a merged header's constraints should.

Prints a table (old label, new label, arch, dtype, result, instructions and registers of
the old and new entry, a note: kernels only one side has, the opcode counts that differ)
and exits 1 where any pair differs or fails to build. ``--json FILE`` writes the rows.
Builds are cached by (source and its includes, options, arch) under ``--cache``.

Needs nvcc and cuobjdump (with nvdisasm): from CUDA_ROOT/CUDA_HOME, PATH, or the pip
packages nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm.
"""
from __future__ import annotations

import argparse
import ast
import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_NEW_TREE = HERE.parent
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "matmul-lab" / "sass_identity"
LABEL_RE = re.compile(r"^\s*([a-z_][a-z0-9_]*)\s*(?:\[(.*)\])?\s*$")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


# --- inside one tree (run as a subprocess with the tree first on sys.path) ------------------

def _tree_modules():
    """(registry, cuda backend, kernel_check or None) of the tree on sys.path, whichever
    layout it has (engine.kernels.registry after the sub-package move, engine.registry
    before)."""
    import importlib

    def first(*names):
        errors = []
        for name in names:
            try:
                return importlib.import_module(name)
            except ImportError as exc:
                errors.append(f"{name}: {exc}")
        raise ImportError("; ".join(errors))

    registry = first("engine.kernels.registry", "engine.registry")
    cuda = first("engine.measure.backends.cuda", "engine.backends.cuda")
    try:
        check = first("engine.measure.kernel_check", "engine.kernels.kernel_check", "engine.kernel_check")
    except ImportError:
        check = None
    return registry, cuda, check


class _Unloaded:
    """A variant whose header this tree cannot load (a header being written): its builds
    take the parameters as given, as the registry's defines would, with no check."""

    arch_suffix = ""

    def __init__(self, registry, name: str, why: str):
        self.name, self.why, self._registry = name, why, registry
        hits = sorted(Path(registry.ROOT, "cuda").rglob(f"{name}.cu"))
        if not hits:
            raise KeyError(f"{name}: no such variant, and no cuda/**/{name}.cu ({why})")
        self.path = hits[0]
        # the header's [params], read as plain TOML: the space and its first values
        import tomllib
        text = self.path.read_text(errors="replace")
        parts = text.split("+++")
        try:
            params = tomllib.loads(parts[1]).get("params", {}) if len(parts) >= 3 else {}
        except tomllib.TOMLDecodeError:
            params = {}
        self.space = {k: list(v) if isinstance(v, list) else [v] for k, v in params.items()}

    def defines(self, params, dtype):
        return self._registry.Variant.defines(self, params, dtype)

    def source_path(self, backend):
        return self.path

    def default_params(self):
        return {k: v[0] for k, v in self.space.items()}


def _variant(registry, name: str):
    try:
        return registry.get(name)
    except Exception as exc:      # not registered: a header the registry refused
        problems = getattr(registry, "PROBLEMS", None) or getattr(registry, "LOAD_PROBLEMS", None)
        return _Unloaded(registry, name, f"{exc}; {problems}" if problems else str(exc))


def _closure_text(path: Path, root_cuda: Path) -> str:
    """The file and every file it includes by a quoted name (beside the includer, then the
    tree's cuda/), for the cache key."""
    seen: dict[str, str] = {}
    todo = [path]
    while todo:
        p = todo.pop()
        key = str(p)
        if key in seen or not p.is_file():
            continue
        seen[key] = p.read_text(errors="replace")
        for name in INCLUDE_RE.findall(seen[key]):
            for d in (p.parent, root_cuda):
                if (d / name).is_file():
                    todo.append((d / name).resolve())
                    break
    return "\n".join(f"== {Path(k).name}\n{v}" for k, v in sorted(seen.items()))


def helper(request: dict) -> dict:
    registry, cuda, check = _tree_modules()
    if request["op"] == "expand":
        out = []
        for name in request["names"]:
            v = _variant(registry, name)
            if isinstance(v, _Unloaded):
                out.append({"name": name, "error": f"cannot expand '*': header not loaded ({v.why})"})
                continue
            combos = []
            for given in v.combos():
                params = {**v.default_params(), **given}
                shape = _accepting_shape(v, check, params)
                if shape is not None:
                    combos.append({"params": params, "shape": shape})
            out.append({"name": name, "combos": combos})
        return {"expanded": out}
    if request["op"] == "space":
        out = {}
        for name in request["names"]:
            v = _variant(registry, name)
            out[name] = {"space": {k: list(vals) for k, vals in v.space.items()},
                         "loaded": not isinstance(v, _Unloaded)}
        return {"spaces": out}
    # op == "build": [{name, params, dtype, arch, shape}] -> [{label, cubin | error, acc}]
    cache = Path(request["cache"])
    cache.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([cuda.find_nvcc(), "--version"], capture_output=True, text=True).stdout

    def one(job):
        try:
            v = _variant(registry, job["name"])
            params = {**v.default_params(), **job["params"]}
            row = {"label": registry.kernel_label(job["name"], params)}
            if not isinstance(v, _Unloaded) and job.get("find_shape") and not job.get("shape"):
                job["shape"] = _accepting_shape(v, check, params)
            row["shape"] = job.get("shape")
            if isinstance(v, _Unloaded):
                row["acc"] = "unloaded"
            elif job.get("shape") and not job.get("find_shape"):
                why = v.check("cuda", params, *job["shape"], job["dtype"])
                row["acc"] = "yes" if why is None else f"no: {why}"
            options = cuda.nvcc_options(v, params, job["dtype"])
            arch = cuda.target_arch(v, job["arch"])
            source = v.source_path("cuda")
            key = hashlib.sha256("\0".join([_closure_text(Path(source), Path(registry.ROOT, "cuda")),
                                            *options, arch, version]).encode()).hexdigest()[:24]
            out = cache / f"{key}.cubin"
            if not out.is_file():
                cubin, _log = cuda.nvcc_cubin(Path(source), options, arch)
                tmp = out.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(cubin)
                os.replace(tmp, out)
            row.update(cubin=str(out), arch=arch)
        except Exception as exc:
            row = {"label": registry.kernel_label(job["name"], job["params"]) if hasattr(registry, "kernel_label")
                   else job["name"], "error": f"{type(exc).__name__}: {exc}"}
        return row

    with ThreadPoolExecutor(max(1, request.get("jobs", 1))) as pool:
        return {"built": list(pool.map(one, request["jobs_list"]))}


def _accepting_shape(v, check, params):
    shapes = check.probe_shapes(params) if check is not None else ((s, s, s) for s in (1024, 4096, 1000, 127, 64))
    for shape in shapes:
        try:
            if v.check("cuda", params, *shape, v.dtypes[0]) is None:
                return list(shape)
        except Exception:
            return None
    return None


# --- the driver --------------------------------------------------------------------------

def call_tree(tree: Path, request: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--helper"], cwd=tree, env=env,
                          input=json.dumps(request), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: the helper failed:\n{proc.stderr.strip()[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def parse_label(text: str) -> tuple[str, dict[str, int]]:
    m = LABEL_RE.match(text)
    if not m:
        raise SystemExit(f"not a label: {text!r} (name or name[p=v,...])")
    params = {}
    for part in filter(None, (p.strip() for p in (m.group(2) or "").split(","))):
        k, _, val = part.partition("=")
        params[k.strip()] = int(val)
    return m.group(1), params


def load_mapping(text: str) -> list[dict]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = ast.literal_eval(text)
    out = []
    for e in data:
        if isinstance(e, (list, tuple)):
            (o, op), (n, np_) = parse_label(e[0]), parse_label(e[1])
            out.append({"old": o, "old_params": op, "new": n, "new_params": np_, "carry": False})
        elif isinstance(e, dict):
            out.append({"old_params": {}, "new_params": {}, "carry": True, "rename": {}, **e})
        else:
            raise SystemExit(f"a mapping entry is a pair of labels or a table, not {e!r}")
    return out


def arith(text: str, names: dict[str, int]) -> int:
    """An integer expression over the old build's parameters (+ - * // %, comparisons,
    ``x if c else y``): a mapping's ``compute``, e.g. {"tile": "bm * 1000 + bn"}."""
    ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
           ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
           ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
           ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b}

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int):
            return n.value
        if isinstance(n, ast.Name):
            return names[n.id]
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in ops:
            return int(ops[type(n.ops[0])](ev(n.left), ev(n.comparators[0])))
        if isinstance(n, ast.IfExp):
            return ev(n.body) if ev(n.test) else ev(n.orelse)
        raise SystemExit(f"compute: {text!r} is not an integer expression of the old parameters")
    return int(ev(ast.parse(text, mode="eval")))


def find_tool(name: str) -> str | None:
    """cuobjdump or nvdisasm: CUDA_ROOT/CUDA_HOME/CUDA_PATH bin, PATH, the pip packages."""
    for env in ("CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(env)
        if root and (Path(root) / "bin" / name).is_file():
            return str(Path(root) / "bin" / name)
    found = shutil.which(name)
    if found:
        return found
    try:
        import nvidia                                 # namespace package of the pip wheels
        for base in nvidia.__path__:
            for hit in sorted(Path(base).glob(f"*/bin/{name}")):
                return str(hit)
    except ImportError:
        pass
    return None


INSN = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;\s*/\*\s*(0x[0-9a-f]+)\s*\*/")
CONT = re.compile(r"^\s*/\*\s*(0x[0-9a-f]+)\s*\*/\s*$")
RES = re.compile(r"^\s*Function ([^:\s]+):\s*$")
REG = re.compile(r"REG:(\d+)")


def disassemble(cubin: str, tool: str) -> dict[str, dict]:
    """kernel name -> {"text": [instructions], "bits": [encodings], "regs": n, "res": line};
    kept beside the cubin (``.sass.json``), as the cubin's name is its build's hash."""
    kept = Path(cubin).with_suffix(".sass.json")
    if kept.is_file():
        try:
            return json.loads(kept.read_text())
        except (OSError, ValueError):
            pass
    funcs = _disassemble(cubin, tool)
    tmp = kept.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(funcs))
    os.replace(tmp, kept)
    return funcs


def _disassemble(cubin: str, tool: str) -> dict[str, dict]:
    env = dict(os.environ)
    nvd = find_tool("nvdisasm")
    if nvd:
        env["PATH"] = f"{Path(nvd).parent}{os.pathsep}{env.get('PATH', '')}"
    out = subprocess.run([tool, "-sass", "-res-usage", cubin], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"cuobjdump failed on {cubin}: {out.stderr.strip()}")
    funcs: dict[str, dict] = {}
    cur = None
    res_for = None
    for line in out.stdout.splitlines():
        m = RES.match(line)
        if m:
            res_for = m.group(1)
            continue
        if res_for and "REG:" in line:
            funcs.setdefault(res_for, {"text": [], "bits": []})["res"] = line.strip()
            funcs[res_for]["regs"] = int(REG.search(line).group(1))
            res_for = None
            continue
        if "Function :" in line:
            cur = funcs.setdefault(line.split("Function :", 1)[1].strip(), {"text": [], "bits": []})
            continue
        if cur is None:
            continue
        m = INSN.match(line)
        if m:
            cur["text"].append(" ".join(m.group(1).split()))
            cur["bits"].append(m.group(2))
            continue
        m = CONT.match(line)
        if m:
            cur["bits"].append(m.group(1))
    return funcs


def count_insns(text: list[str]) -> int:
    return sum(1 for t in text if not t.startswith("NOP"))


def opcode_delta(a: list[str], b: list[str], top: int = 6) -> str:
    def ops(text):
        return collections.Counter(re.sub(r"^@!?U?P\w+\s+", "", t).split()[0] for t in text)
    ca, cb = ops(a), ops(b)
    diff = {k: cb[k] - ca[k] for k in set(ca) | set(cb) if cb[k] != ca[k]}
    parts = sorted(diff.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:top]
    return " ".join(f"{k}{v:+d}" for k, v in parts) or "same opcode counts, other order/operands"


def compare(old: dict, new: dict) -> tuple[str, str]:
    """(identical | same-insns | DIFFERENT, note): every kernel of the old build against the
    new build's kernel of that name; kernels only the new build has are noted."""
    notes = []
    result = "identical"
    for name in old:
        if name not in new:
            return "DIFFERENT", f"kernel {name} missing in new"
        a, b = old[name], new[name]
        if a["text"] != b["text"] or a.get("res") != b.get("res"):
            result = "DIFFERENT"
            notes.append(f"{name}: {opcode_delta(a['text'], b['text'])}"
                         + (f" regs {a.get('regs')}->{b.get('regs')}" if a.get("regs") != b.get("regs") else ""))
        elif a["bits"] != b["bits"] and result == "identical":
            result = "same-insns"
            notes.append(f"{name}: control bits differ")
    for name in new:
        if name not in old:
            notes.append(f"+{name} ({count_insns(new[name]['text'])} insns, new only)")
    return result, "; ".join(notes)


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["--helper"]:
        print(json.dumps(helper(json.loads(sys.stdin.read()))))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--old-tree", required=True, type=Path, help="checkout of the earlier tree")
    ap.add_argument("--new-tree", type=Path, default=DEFAULT_NEW_TREE, help="default: this checkout")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--map", help="JSON or Python-literal list of pairs (file, or - for stdin)")
    src.add_argument("--pair", nargs=2, action="append", metavar=("OLD", "NEW"),
                     help="one pair of labels, name[p=v,...] (repeatable)")
    ap.add_argument("--arch", nargs="+", default=["sm_90", "sm_80"])
    ap.add_argument("--dtype", nargs="+", default=["float32", "int32"])
    ap.add_argument("-j", "--jobs", type=int, default=1, help="nvcc processes at once (default 1)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--json", type=Path, help="write the rows here")
    ap.add_argument("--quiet", action="store_true", help="print only rows that are not identical, and the totals")
    args = ap.parse_args(argv)

    tool = find_tool("cuobjdump")
    if not tool:
        raise SystemExit("cuobjdump not found (CUDA toolkit, or pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)")
    if args.map:
        text = sys.stdin.read() if args.map == "-" else Path(args.map).read_text()
        mapping = load_mapping(text)
    else:
        mapping = load_mapping(json.dumps(args.pair))
    old_tree, new_tree = args.old_tree.resolve(), args.new_tree.resolve()

    # expand "*" in the old tree; carry parameters over
    stars = sorted({e["old"] for e in mapping if e["old_params"] == "*"})
    expanded = {}
    if stars:
        for item in call_tree(old_tree, {"op": "expand", "names": stars})["expanded"]:
            if "error" in item:
                raise SystemExit(f"{item['name']}: {item['error']}")
            expanded[item["name"]] = item["combos"]
    carried = sorted({e["new"] for e in mapping if e.get("carry")})
    spaces = call_tree(new_tree, {"op": "space", "names": carried})["spaces"] if carried else {}
    pairs = []               # (old name, old params, new name, new params, shape)
    for e in mapping:
        combos = (expanded[e["old"]] if e["old_params"] == "*"
                  else [{"params": e["old_params"], "shape": e.get("shape")}])
        for c in combos:
            newp = {}
            if e.get("carry"):        # the old parameters the new variant has too
                ren = e.get("rename", {})
                newp = {ren.get(k, k): v for k, v in c["params"].items()
                        if ren.get(k, k) in spaces[e["new"]]["space"]}
            newp.update({k: arith(x, c["params"]) for k, x in e.get("compute", {}).items()})
            newp.update(e["new_params"])
            pairs.append((e["old"], c["params"], e["new"], newp, c.get("shape")))

    def jobs_for(side):
        out = []
        for (on, op, nn, np_, shape) in pairs:
            for arch in args.arch:
                for dt in args.dtype:
                    out.append({"name": on if side == "old" else nn, "params": op if side == "old" else np_,
                                "dtype": dt, "arch": arch, "shape": shape})
        return out

    req = {"op": "build", "cache": str(args.cache), "jobs": args.jobs}
    old_jobs = [dict(j, find_shape=True) for j in jobs_for("old")]
    old_rows = call_tree(old_tree, {**req, "jobs_list": old_jobs})["built"]
    new_jobs = jobs_for("new")
    for j, o in zip(new_jobs, old_rows):     # the new header is asked at the old one's shape
        j["shape"] = j["shape"] or o.get("shape")
    new_rows = call_tree(new_tree, {**req, "jobs_list": new_jobs})["built"]

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:    # cuobjdump, as many at once as nvcc
        sass = dict(zip((r["cubin"] for r in old_rows + new_rows if "cubin" in r),
                        pool.map(lambda c: disassemble(c, tool),
                                 [r["cubin"] for r in old_rows + new_rows if "cubin" in r])))
    rows = []
    i = 0
    for (on, op, nn, np_, shape) in pairs:
        for arch in args.arch:
            for dt in args.dtype:
                o, n = old_rows[i], new_rows[i]
                i += 1
                row = {"old": o["label"], "new": n["label"], "arch": arch, "dtype": dt, "acc": n.get("acc", "")}
                if "error" in o or "error" in n:
                    row.update(result="ERROR", note=(o.get("error") or n.get("error")).splitlines()[0][:300])
                else:
                    od, nd = sass[o["cubin"]], sass[n["cubin"]]
                    result, note = compare(od, nd)
                    entry = "matmul" if "matmul" in od else next(iter(od), None)
                    row.update(result=result, note=note,
                               old_insns=count_insns(od[entry]["text"]) if entry else None,
                               new_insns=count_insns(nd[entry]["text"]) if entry in nd else None,
                               old_regs=od.get(entry, {}).get("regs"), new_regs=nd.get(entry, {}).get("regs"))
                rows.append(row)

    counts = collections.Counter(r["result"] for r in rows)
    w_old = max([len(r["old"]) for r in rows] + [3])
    w_new = max([len(r["new"]) for r in rows] + [3])
    print(f"{'old':<{w_old}}  {'new':<{w_new}}  {'arch':<7} {'dtype':<7} {'result':<10} "
          f"{'insns':>11} {'regs':>9}  acc  note")
    for r in rows:
        if args.quiet and r["result"] == "identical" and r["acc"] in ("yes", "", "unloaded"):
            continue
        ins = f"{r.get('old_insns', '-')}/{r.get('new_insns', '-')}"
        regs = f"{r.get('old_regs', '-')}/{r.get('new_regs', '-')}"
        acc = r["acc"] if r["acc"] in ("yes", "", "unloaded") else "NO"
        print(f"{r['old']:<{w_old}}  {r['new']:<{w_new}}  {r['arch']:<7} {r['dtype']:<7} {r['result']:<10} "
              f"{ins:>11} {regs:>9}  {acc or '-':<4} {r.get('note', '')}"
              + (f" [{r['acc']}]" if acc == "NO" else ""))
    refused = sum(1 for r in rows if r["acc"].startswith("no"))
    print(f"\n{len(rows)} builds compared: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
          + (f"; {refused} new labels refused by the new header at the old one's shape" if refused else ""))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if set(counts) <= {"identical", "same-insns"} and not refused else 1


if __name__ == "__main__":
    sys.exit(main())
