"""``python main.py compare BASE NEW``: two results files compared, kernel by kernel.

Each pair (same kernel, parameters, shape, dtype, mode and device) gets NEW/BASE of the
median times and a verdict: FASTER or SLOWER only when the change exceeds both the
threshold and the combined noise of the two records, otherwise SAME (the rule:
:mod:`engine.results.compare`). Exit codes: 0 compared, 1 with --fail-on-slower when a
pair is SLOWER or newly fails verification (a regression gate for CI), 2 bad input (a
file that is not a results file, a folder, a huge file, no result in common, no usable
time).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Sequence

from cli.args import Number, Parser
from cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from engine.common import terminal
from engine.common.terminal import literal, visible
from engine.results import records
from engine.results.compare import (DEFAULT_THRESHOLD_PCT, Comparison, Pair, Verdict, compare, pair_label,
                                    row_label)
from engine.results.environment import Environment
from engine.results.records import ResultRecord, ResultsFileError

THRESHOLD = Number(0.0, 1000.0, "per cent", low_included=True)
#: Unmatched rows listed by name at most (the rest are counted).
UNMATCHED_SHOWN = 20
VERDICT_STYLE = {Verdict.SAME: "", Verdict.FASTER: "green", Verdict.SLOWER: "red",
                 Verdict.FAILED: "red", Verdict.NOT_TIMED: "dim"}


class CompareInputError(ValueError):
    """A BASE or NEW that cannot be compared; exit 2 with the message."""


def _threshold(text: str) -> float:
    return THRESHOLD(str(text).strip().removesuffix("%"))


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="main.py compare", description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("base", metavar="BASE", help="the results file to compare against (.json or .csv)")
    p.add_argument("new", metavar="NEW", help="the results file of the new run")
    p.add_argument("--threshold", type=_threshold, default=DEFAULT_THRESHOLD_PCT, metavar="PCT",
                   help="the least change in per cent that counts, beside the noise "
                        f"(default {DEFAULT_THRESHOLD_PCT:g})")
    p.add_argument("--fail-on-slower", action="store_true",
                   help="exit 1 when a pair is SLOWER, or failed verification in NEW "
                        "after passing it in BASE (a regression gate)")
    p.add_argument("--ignore-params", action="store_true",
                   help="pair records whatever their parameters: one parameter choice of a "
                        "kernel against another (e.g. before and after its default changed)")
    p.add_argument("--markdown", action="store_true",
                   help="print Markdown tables (for a pull request or a CI summary)")
    return p


def load_side(path_text: str, side: str) -> tuple[list[ResultRecord], list[str], Environment | None]:
    """A side's valid records, the reasons others were skipped, and the file's environment
    block (None: an older file without one, or a block that could not be read)."""
    path = Path(path_text)
    if path.is_dir():
        raise CompareInputError(f"{side} {visible(path_text)} is a folder, not a results file")
    try:
        got = records.load_file(path)
    except ResultsFileError as exc:
        raise CompareInputError(f"{side}: {exc}") from None
    except (ValueError, OSError) as exc:
        raise CompareInputError(f"{side}: {path.name}: {getattr(exc, 'strerror', None) or exc}") from None
    if not got.records:
        raise CompareInputError(f"{side}: {path.name} holds no results")
    skipped = list(got.skipped) + ([f"the environment block: {got.environment_problem}"]
                                   if got.environment_problem else [])
    env = None if got.environment == Environment() else got.environment
    return list(got.records), skipped, env


def _ms(x: float) -> str:
    return format(x, ".4f") if math.isfinite(x) else "—"


def _pct(x: float, signed: bool = False) -> str:
    return format(x, "+.1f" if signed else ".1f") if math.isfinite(x) else "—"


def _cells(p: Pair, with_device: bool) -> list[str]:
    """A pair's cells, as plain text."""
    return ([pair_label(p.base, p.new)] + ([p.new.device] if with_device else [])
            + [_ms(p.base.median_ms), _ms(p.new.median_ms),
               f"{p.ratio:.3f}" if math.isfinite(p.ratio) else "—", _pct(p.change_pct, True),
               _pct(p.noise_pct), p.verdict.name, p.note])


HEAD = ["kernel, shape, dtype", "BASE ms", "NEW ms", "NEW/BASE", "change %", "noise %", "verdict", "note"]


def _with_device(c: Comparison) -> bool:
    return c.by_device and len({p.new.device for p in c.pairs}) > 1


def print_rich(c: Comparison, names: tuple[str, str], console) -> None:
    from rich.table import Table  # noqa: PLC0415

    for side, name in zip(("BASE", "NEW"), names):
        console.print(f"[bold]{side}[/bold] {literal(name)}")
    if c.differences:
        console.print("[yellow]The runs differ:[/yellow]")
        for d in c.differences:
            console.print(f"  {literal(d.what)}: BASE {literal(d.base)} · NEW {literal(d.new)}")
    t = Table(title="NEW against BASE (median times)")
    head = HEAD[:1] + (["device"] if _with_device(c) else []) + HEAD[1:]
    for col in head:
        t.add_column(col, justify="left" if col in ("kernel, shape, dtype", "device", "verdict", "note")
                     else "right")
    for p in c.pairs:
        cells = [literal(x) for x in _cells(p, _with_device(c))]
        style = VERDICT_STYLE[p.verdict]
        cells[-2] = f"[{style}]{cells[-2]}[/{style}]" if style else cells[-2]
        t.add_row(*cells)
    console.print(t)
    for side, rows in (("BASE", c.only_base), ("NEW", c.only_new)):
        if rows:
            shown = ", ".join(row_label(r) for r in rows[:UNMATCHED_SHOWN])
            more = f" and {len(rows) - UNMATCHED_SHOWN} more" if len(rows) > UNMATCHED_SHOWN else ""
            console.print(f"Only in {side} ({len(rows)}): {literal(shown + more)}", soft_wrap=True)
    console.print(literal(c.summary()))


def _md(text: str) -> str:
    return visible(text).replace("|", "\\|")


def markdown(c: Comparison, names: tuple[str, str]) -> str:
    """The comparison as GitHub-flavoured Markdown."""
    lines = [f"**BASE** `{_md(names[0])}` · **NEW** `{_md(names[1])}`", ""]
    if c.differences:
        lines += ["The runs differ:", ""]
        lines += [f"- {_md(d.what)}: BASE {_md(d.base)} · NEW {_md(d.new)}" for d in c.differences]
        lines.append("")
    head = HEAD[:1] + (["device"] if _with_device(c) else []) + HEAD[1:]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(":--" if h in ("kernel, shape, dtype", "device", "verdict", "note")
                                 else "--:" for h in head) + "|")
    for p in c.pairs:
        cells = [_md(x) for x in _cells(p, _with_device(c))]
        if p.verdict in (Verdict.FASTER, Verdict.SLOWER, Verdict.FAILED):
            cells[-2] = f"**{cells[-2]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for side, rows in (("BASE", c.only_base), ("NEW", c.only_new)):
        if rows:
            lines.append(f"Only in {side} ({len(rows)}): "
                         + ", ".join(_md(row_label(r)) for r in rows[:UNMATCHED_SHOWN])
                         + (f" and {len(rows) - UNMATCHED_SHOWN} more" if len(rows) > UNMATCHED_SHOWN else ""))
            lines.append("")
    lines.append(_md(c.summary()))
    return "\n".join(lines)


def run_compare(argv: Sequence[str]) -> int:
    err = terminal.console(stderr=True, pipe_width=None)
    try:
        args = build_parser().parse_args(list(argv))
    except SystemExit as exc:              # argparse printed why
        return EXIT_OK if exc.code == 0 else EXIT_BAD_INPUT
    try:
        base, base_skipped, base_env = load_side(args.base, "BASE")
        new, new_skipped, new_env = load_side(args.new, "NEW")
        result = compare(base, new, args.threshold, base_env, new_env,
                         ignore_params=args.ignore_params)
        problem = result.problem()
        # A gate's run whose every pair newly fails is a regression to report, not bad input.
        if problem and not (args.fail_on_slower and result.newly_failed()):
            raise CompareInputError(problem)
    except CompareInputError as exc:
        err.print(f"[red]error:[/red] {literal(str(exc))}", soft_wrap=True)
        return EXIT_BAD_INPUT
    for side, skipped in (("BASE", base_skipped), ("NEW", new_skipped)):
        if skipped:
            err.print(f"[yellow]warning:[/yellow] {side}: skipped {len(skipped)} record"
                      f"{'s' if len(skipped) != 1 else ''} ({literal(skipped[0])}"
                      f"{' …' if len(skipped) > 1 else ''})", soft_wrap=True)
    names = (args.base, args.new)
    if args.markdown:
        print(markdown(result, names))
    else:
        print_rich(result, names, terminal.console())
    if args.fail_on_slower:
        broken = result.newly_failed()
        if broken:
            err.print(f"[red]regression:[/red] {len(broken)} kernel"
                      f"{'s' if len(broken) != 1 else ''} passed verification in BASE and "
                      f"failed it in NEW: {literal(', '.join(p.key.label() for p in broken[:5]))}"
                      f"{' …' if len(broken) > 5 else ''}", soft_wrap=True)
        if broken or result.with_verdict(Verdict.SLOWER):
            return EXIT_FAILED
    return EXIT_OK
