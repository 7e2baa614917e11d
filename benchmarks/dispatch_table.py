"""Build the dispatch table (cuda/lab/dispatch.toml) from a shape-suite results file, and
check it against the lab best.

    python3 benchmarks/dispatch_table.py [--from benchmarks/results/h200_shapes.json ...]
                                         [--write cuda/lab/dispatch.toml] [--check]

The suite (benchmarks/shapes.py) times every parameter combination of every contender at
each shape. Per precision and per shape class (:data:`CLASSES`, first match wins, as in
the table), the rule names the one (kernel, parameters) that comes closest to the lab
best at every suite shape of the class: the least worst-case time over the class's lab
best, then the least sum. Results files name the kernels as they were when they ran;
:data:`RENAMED` maps them to today's files (the merged techniques). Parameters that
today's kernel picks by shape ([chosen]) are left to it.

``--check`` (also printed after ``--write``): for every suite shape, the time the table's
pick recorded against the lab best's, and the shapes where it is not within 3%, with why.
It reads recorded times: the GPU check runs the dispatch line itself (bench).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from engine.kernels import dispatch_table, registry  # noqa: E402
from engine.results import derived, records  # noqa: E402

#: Every H200 results file: the suite and the off-suite sweeps (narrow N, small M, odd N).
DEFAULT_FROM = ["benchmarks/results/h200_shapes.json", "benchmarks/results/h200_offsuite_narrow.json",
                "benchmarks/results/h200_offsuite_small_m.json",
                "benchmarks/results/h200_offsuite_small_m_tf32.json",
                "benchmarks/results/h200_offsuite_odd_fp32.json", "benchmarks/results/h200_wide_bcopy.json"]
#: How far from the lab best the dispatch line may be at a suite shape (issue 36).
TOLERANCE = 1.03


def _regdb_tile(p: dict) -> int:
    return p["bm"] * 1000 + p.get("bn", 128)


#: Old variant → (new variant, function old params → new params). The kernel merges of
#: issue 36: the B-copy specialists became ffma_wide's / ffma_regdb's ``bcopy``, the
#: narrow tiles ffma_regdb's ``tile``, skinny_async skinny's ``stream = 1``.
RENAMED = {
    # later records of ffma_wide name bcopy themselves: keep it (0 before the merge)
    "ffma_wide": ("ffma_wide", lambda p: {"bcopy": 0, "crows": 0, **p}),
    "ffma_wide_padb": ("ffma_wide", lambda p: {"crows": 0, **p, "bcopy": 1}),
    "ffma_wide_b4": ("ffma_wide", lambda p: {**p, "bcopy": 2}),
    "ffma_regdb": ("ffma_regdb", lambda p: _regdb(p, 0)),
    "ffma_regdb_padb": ("ffma_regdb", lambda p: _regdb(p, 1)),
    # the warp-row copies kept their crows
    "ffma_regdb_b4": ("ffma_regdb", lambda p: _regdb(p, 2)),
    "ffma_narrow": ("ffma_regdb", lambda p: _regdb(p, 0)),
    "ffma_narrow_padb": ("ffma_regdb", lambda p: _regdb(p, 1)),
    "skinny": ("skinny", lambda p: {"stages": 3, **p, "stream": 0}),
    # skinny_async ran `warps` warps a block; stream 1 runs fill blocks of 8 / fill warps
    "skinny_async": ("skinny", lambda p: {"stream": 1, "tile": p["tn"], "fill": 8 // p["warps"],
                                          "stages": p["stages"], "unroll": 8}),
}


def _regdb(p: dict, bcopy: int) -> dict:
    """ffma_regdb's parameters of an old record: tn and bk were fixed (8), hybrid and crows
    kept where it named them."""
    out = {"tile": _regdb_tile(p), "splitk": p["splitk"], "bcopy": bcopy, "hybrid": 0, "crows": 0}
    out.update({k: p[k] for k in ("hybrid", "crows") if k in p})
    return out


#: Shape classes, in the table's order (the first that holds picks): (expression, name).
CLASSES = [
    ("min(M, N) == 1", "matrix-vector products: a stream of the matrix"),
    ("min(M, N) <= 16", "skinny panels"),
    ("min(M, N) <= 64", "narrow panels"),
    ("K <= 512", "flat K: many tiles, short main loops"),
    ("max(M, N) <= 1280", "small sizes: a few tiles, split along K to fill the GPU"),
    ("max(M, N) <= 3072", "mid sizes: about a wave of tiles"),
    ("N % 4 != 0", "odd N: no 16-byte copy of B's rows is aligned"),
    (None, "large sizes"),
]
NAMES = {"fp32": "lab_fp32", "tf32": "lab_tf32"}
TITLES = {"fp32": "The lab's own FP32 GEMM: the kernel the shape suite found best, by shape class",
          "tf32": "The lab's own TF32 GEMM: the kernel the shape suite found best, by shape class"}


def new_name(variant: str, params: dict, exact: bool = False) -> tuple[str, dict[str, int]]:
    """Today's (kernel, parameters) of a record's: parameters today's kernel does not have
    (a merge not landed yet) left out, and, unless ``exact``, those it picks by shape
    ([chosen]) too (a rule leaves them to it)."""
    name, f = RENAMED.get(variant, (variant, dict))
    p = f(dict(params))
    v = registry.REGISTRY.get(name)
    if v is None:
        return name, p
    return name, {k: x for k, x in p.items() if k in v.space and (exact or k not in v.chosen)}


def in_class(expr: str | None, shape) -> bool:
    if expr is None:
        return True
    e = dispatch_table._parse_expr(expr, "class", None, Path("dispatch_table.py"))
    m, n, k = shape
    return bool(e({"M": m, "N": n, "K": k, "SMS": 132}))


def load(paths: list[str]) -> list[records.ResultRecord]:
    out = []
    for p in paths:
        out += [r for r in records.load(ROOT / p if not Path(p).is_absolute() else p)
                if not isinstance(r.extra.get("paired"), dict) and r.dtype == "float32"]
    return out


def times(recs, precision: str, exact: bool = False) -> dict[tuple, dict[tuple, float]]:
    """shape → (kernel, params as today's names) → the fastest verified time; a TF32
    request may be served by an FP32 kernel (derived.lab_best's SERVES)."""
    out: dict[tuple, dict[tuple, float]] = {}
    allowed = {"fp32"} if precision == "fp32" else {"fp32", "tf32"}
    for r in recs:
        if (r.status != "ok" or r.passed is not True or derived.is_reference_record(r)
                or not math.isfinite(r.median_ms) or derived.record_precision(r) not in allowed
                or (r.precision or precision) not in allowed):
            continue
        name, p = new_name(r.variant, r.params, exact)
        key = (name, tuple(sorted(p.items())))
        here = out.setdefault((r.m, r.n, r.k), {})
        here[key] = min(here.get(key, math.inf), r.median_ms)
    return out


def derive(recs, precision: str) -> list[dict]:
    """The rules of one precision: per class the candidate closest to the lab best at every
    one of its suite shapes (classes without suite shapes are left out, but the last)."""
    by_shape = times(recs, precision)
    rules, taken = [], set()
    for expr, what in CLASSES:
        shapes = [s for s in by_shape if s not in taken and in_class(expr, s)]
        taken.update(shapes)
        if not shapes:
            continue
        best = {s: min(by_shape[s].values()) for s in shapes}
        common = set.intersection(*(set(by_shape[s]) for s in shapes))
        if not common:
            continue
        pick = min(common, key=lambda c: (max(by_shape[s][c] / best[s] for s in shapes),
                                          sum(by_shape[s][c] / best[s] for s in shapes), c))
        worst = max(by_shape[s][pick] / best[s] for s in shapes)
        rules.append({"when": expr, "variant": pick[0], "params": dict(pick[1]),
                      "why": f"{what}; from {len(shapes)} suite shape(s), at most "
                             f"{100 * (worst - 1):.1f}% off their lab best"})
    if rules and rules[-1]["when"] is not None:
        rules[-1]["when"] = None        # the last catches every shape the others do not
    return rules


def toml_text(tables: dict[str, list[dict]], sources: list[str]) -> str:
    lines = ["# The lab's own GEMM, one line per precision (engine/kernels/dispatch_table.py; docs/kernels.md).",
             "# At each shape the first rule whose 'when' holds (M, N, K, SMS) picks the kernel; parameters",
             "# left out take the kernel's [chosen] value at the shape, else its default.",
             "# Made by benchmarks/dispatch_table.py from " + ", ".join(sources) + ":",
             "# per shape class the kernel and parameters closest to the lab best at every suite shape",
             "# of the class. Edit it by hand or make it again (python3 benchmarks/dispatch_table.py",
             "# --from RESULTS.json --write cuda/lab/dispatch.toml).", ""]
    for precision, rules in tables.items():
        name = NAMES[precision]
        lines += [f"[{name}]", f'title = "{TITLES[precision]}"', 'backend = "cuda"',
                  f'precision = "{precision}"', ""]
        for r in rules:
            lines.append(f"[[{name}.rule]]")
            if r["when"] is not None:
                lines.append(f'when = "{r["when"]}"')
            lines.append(f'variant = "{r["variant"]}"')
            if r["params"]:
                lines.append("params = { " + ", ".join(f"{k} = {v}" for k, v in r["params"].items()) + " }")
            lines.append(f'why = "{r["why"]}"')
            lines.append("")
    return "\n".join(lines)


def check(recs, tables: list[dispatch_table.DispatchTable]) -> list[str]:
    """Per table and recorded shape: the pick's recorded time (that exact configuration,
    [chosen] values as the shape resolves them) against the lab best's; then a summary:
    within 3%, not (and why), and not checked (the pick was not recorded there)."""
    out = []
    for t in tables:
        by_shape = times(recs, t.precision, exact=True)
        out.append(f"{t.name}: the table's pick against the lab best (recorded times)")
        out.append(f"  {'shape':<16} {'rule':<6} {'pick':<58} {'lab best':<58} {'ratio':>6}")
        within, misses, unchecked = 0, [], []
        for shape in sorted(by_shape):
            best_key = min(by_shape[shape], key=by_shape[shape].get)
            best = by_shape[shape][best_key]
            shown = "x".join(map(str, shape))
            try:
                r = registry.route(t.name, *shape, arch="9.0")
            except dispatch_table.DispatchError as exc:
                misses.append(f"  {shown}: no pick ({exc})")
                continue
            # the records that ran exactly this pick (each parameter they name as picked)
            mine = min((v for (n, p), v in by_shape[shape].items() if n == r.variant
                        and all(r.params.get(k) == x for k, x in p)), default=None)
            label = registry.kernel_label(r.variant, r.params)
            ratio = mine / best if mine else math.nan
            rule_no = t.rules.index(r.rule) + 1
            out.append(f"  {shown:<16} {rule_no:<6} {label[:58]:<58} "
                       f"{registry.kernel_label(best_key[0], dict(best_key[1]))[:58]:<58} "
                       f"{ratio:>6.3f}")
            if mine is None:
                unchecked.append(shown)
            elif ratio <= TOLERANCE:
                within += 1
            else:
                misses.append(f"  {shown} (rule {rule_no}): {100 * (ratio - 1):.1f}% slower than "
                              f"the shape's own best, "
                              f"{registry.kernel_label(best_key[0], dict(best_key[1]))}")
        out.append(f"  {t.name}: {len(by_shape)} shapes; within {100 * (TOLERANCE - 1):.0f}% of the "
                   f"lab best: {within}; not: {len(misses)}; not checked (pick not recorded "
                   f"there): {len(unchecked)}" + (f" ({', '.join(unchecked)})" if unchecked else ""))
        out += misses
    return out


def hand_written(path: Path) -> str:
    """The first rule of the table file at ``path`` with an expression value ("" if none,
    or if there is no such file)."""
    if not path.is_file():
        return ""
    tables, _problems = dispatch_table.parse(path)
    for t in tables:
        for r in t.rules:
            if any(not isinstance(x, int) for x in r.params.values()):
                return r.where
    return ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="sources", action="append",
                    help="a shape-suite results file (repeatable; default "
                         f"{DEFAULT_FROM[0]})")
    ap.add_argument("--write", metavar="PATH", help="write the table there (else print it)")
    ap.add_argument("--force", action="store_true",
                    help="with --write: replace a table even where its rules hold expressions "
                         "(written by hand; this script writes single values only)")
    ap.add_argument("--check", action="store_true",
                    help="only check the table the registry holds against the results")
    args = ap.parse_args(argv)
    sources = args.sources or DEFAULT_FROM
    recs = load(sources)
    if not args.check:
        text = toml_text({p: derive(recs, p) for p in ("fp32", "tf32")}, sources)
        if args.write:
            hand = hand_written(Path(args.write))
            if hand and not args.force:
                print(f"{args.write} has rules with expression values ({hand}), written by "
                      "hand: this script writes single values only and would lose them. "
                      "Print the new table (no --write) to compare, or give --force.",
                      file=sys.stderr)
                return 2
            Path(args.write).write_text(text, encoding="utf-8")
            tables, problems = dispatch_table.parse(Path(args.write))
            print(f"wrote {args.write}", *(str(p) for p in problems), sep="\n")
            for t in tables:
                registry.REGISTRY[t.name] = registry._checked_table(registry.dispatch_variant(t))
        else:
            print(text)
            return 0
    tables = [v.dispatch for v in registry.REGISTRY.values()
              if v.dispatch is not None and v.dispatch.backend == "cuda"]
    for t in tables:
        if t.problem:
            print(f"{t.name}: unusable: {t.problem}")
    print("\n".join(check(recs, [t for t in tables if not t.problem])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
