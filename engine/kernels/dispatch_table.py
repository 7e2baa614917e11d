"""Dispatch tables: the lab's own GEMM, one variant per precision, declared in TOML.

A dispatch table (``cuda/lab/dispatch.toml``, ``opencl/dispatch.toml``) names one
variant per table (``[lab_fp32]``) and an ordered list of rules; at each shape the
first rule whose ``when`` holds picks the kernel and its parameters::

    [lab_fp32]
    title = "The lab's FP32 GEMM: the kernel the shape suite found best, by shape class"
    backend = "cuda"
    precision = "fp32"

    [[lab_fp32.rule]]
    when = "min(M, N) <= 64"          # M, N, K and SMS, as kernel headers' expressions
    variant = "skinny"
    params = { tile = 16 }            # left out: the variant's default or [chosen] value

    [[lab_fp32.rule]]
    when = "min(M, N) <= 64"
    variant = "ffma_regdb"
    params = { tile = "256016 if N <= 16 else 128064", splitk = 1 }   # a value by the shape

    [[lab_fp32.rule]]                 # the last rule has no 'when': every other shape
    variant = "ffma_wide"

The expressions are those of kernel headers (:class:`~engine.kernels.kernel_file.Expr`,
the same evaluator and limits), in ``when`` and in a parameter's value written as a text
(a number stays a number). A number is checked against the kernel's values when the table
loads; an expression's value at each shape, when the rule is routed there. Every problem is a
:class:`~engine.kernels.kernel_file.KernelFileError` (``file:line: message``); a table
with one is still listed, unusable, with that reason, so a bad table never stops the app.
The registry (:mod:`engine.kernels.registry`) turns each table into a variant of role
``dispatch`` and resolves a rule to its kernel; the runner runs that kernel and records
it in :attr:`ResultRecord.dispatched_to <engine.results.records.ResultRecord>`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from engine.common.files import read_text
from engine.kernels.kernel_file import (DEFAULT_SMS, DEVICE_NAMES, FUNCTIONS, MAX_NAME_CHARS,
                                        MAX_PARAM_VALUE, MAX_TEXT_CHARS, NAME_RE, PRECISIONS, PREPASS_NAMES,
                                        SHAPE_NAMES, KERNEL_DTYPES, LAYOUTS, Expr, ExpressionError,
                                        KernelFileError, _check_values, _header_data,
                                        _parse_expr, shown_text)

#: A dispatch file is read whole; past this it is refused (it is a table, not a program).
DISPATCH_FILE_LIMIT = 256 * 1024
MAX_TABLES = 16
MAX_RULES = 64
TABLE_KEYS = {"title", "summary", "backend", "precision", "dtypes", "layouts", "rule"}
RULE_KEYS = {"when", "variant", "params", "why"}
BACKENDS = ("cuda", "opencl")
#: Where the lab's own tables are (relative to the repository root).
BUILTIN_FILES = ("cuda/lab/dispatch.toml", "opencl/dispatch.toml")
_TABLE_HEAD = re.compile(r"^\s*\[\s*([A-Za-z0-9_]+)\s*\]\s*(#.*)?$")


#: Names a rule's expressions see besides M, N, K: the device's (SMS). Not the pre-pass's
#: (NK, OB: B's layout and C's element bytes): a rule picks for every type and layout its
#: table promises.
RULE_NAMES = tuple(n for n in DEVICE_NAMES if n not in PREPASS_NAMES)


class DispatchError(ValueError):
    """A table that cannot pick a kernel at a shape (its message says where and why)."""


@dataclass(frozen=True)
class Rule:
    """One line of a table: where it applies, the kernel and the parameters it names."""

    #: None: every shape (the last rule's catch-all).
    when: Expr | None
    variant: str
    #: name -> a whole number, or an expression in M, N, K, SMS and the parameters before it
    #: (worked out by :meth:`values`, in order).
    params: Mapping[str, int | Expr]
    #: The file and line of the rule's ``[[name.rule]]``, for messages.
    where: str
    #: Why this rule (a line the generator writes: the shapes it was learnt from).
    why: str = ""

    def applies(self, m: int, n: int, k: int, sms: int | None = None) -> bool:
        if self.when is None:
            return True
        return bool(self.when({"M": m, "N": n, "K": k, "SMS": sms or DEFAULT_SMS}))

    def values(self, m: int, n: int, k: int, sms: int | None = None) -> dict[str, int]:
        """The rule's parameters at M×N×K, each expression worked out there in the rule's
        order, so that one may use those before it; DispatchError (naming the rule's
        file:line and the shape) where one fails."""
        env = {"M": m, "N": n, "K": k, "SMS": sms or DEFAULT_SMS}
        out = {}
        for name, value in self.params.items():
            if isinstance(value, Expr):
                try:
                    value = value.integer(env)
                except ExpressionError as exc:
                    raise DispatchError(f"{self.where}: {exc} at {m}×{n}×{k}") from None
            out[name] = env[name] = value
        return out


@dataclass(frozen=True)
class DispatchTable:
    """One dispatch variant as its file declares it."""

    name: str
    path: Path
    line: int
    title: str = ""
    summary: str = ""
    backend: str = "cuda"
    precision: str = "fp32"
    dtypes: tuple[str, ...] = ("float32",)
    #: B's layouts the line runs ("kn": K×N; "nk": N×K), each pick's kernel taking them
    layouts: tuple[str, ...] = ("kn",)
    rules: tuple[Rule, ...] = ()
    #: Why the table cannot be used (``file:line: message``); None when it can.
    problem: str | None = None

    def rule_at(self, m: int, n: int, k: int, sms: int | None = None) -> Rule:
        """The first rule that applies at M, N, K (SMS: the device's, else the default);
        DispatchError where the table is unusable or a ``when`` fails there."""
        if self.problem:
            raise DispatchError(self.problem)
        for rule in self.rules:
            try:
                if rule.applies(m, n, k, sms):
                    return rule
            except ExpressionError as exc:
                raise DispatchError(f"{rule.where}: {exc}") from None
        raise DispatchError(f"{shown_text(self.path)}:{self.line}: no rule of {self.name} "
                            f"applies at {m}×{n}×{k}")        # parse() makes the last catch all


def parse(path: Path | str, text: str | None = None) -> tuple[list[DispatchTable], list[KernelFileError]]:
    """The tables of a dispatch file and the problems that left none (a file that cannot be
    read or parsed and names no table). A table with a problem is returned with
    :attr:`DispatchTable.problem` set: listed, not usable."""
    path = Path(path)
    if text is None:
        try:
            text = read_text(path, "the dispatch table", OSError, DISPATCH_FILE_LIMIT)
        except OSError as exc:
            return [], [KernelFileError(path, None, str(exc))]
    elif len(text) > DISPATCH_FILE_LIMIT:
        return [], [KernelFileError(path, None, f"the text is {len(text):,} characters long "
                                                f"(at most {DISPATCH_FILE_LIMIT:,})")]
    lines = text.split("\n")
    try:
        data = _header_data(text, 1, path)
        _check_values(data, text, 1, path)
    except KernelFileError as exc:
        # Names from the table lines as written, so each still shows, with the reason.
        names = list(dict.fromkeys(m[1] for line in lines if (m := _TABLE_HEAD.match(line))))
        if not names:
            return [], [exc]
        return [DispatchTable(name, path, _table_line(lines, name), problem=str(exc))
                for name in names[:MAX_TABLES]], []
    tables = []
    for name, body in list(data.items())[:MAX_TABLES]:
        line = _table_line(lines, name)
        try:
            tables.append(_table(path, lines, name, body, line))
        except KernelFileError as exc:
            tables.append(DispatchTable(name, path, line, problem=str(exc)))
    problems = []
    if len(data) > MAX_TABLES:
        problems.append(KernelFileError(path, None, f"more than {MAX_TABLES} tables: the rest "
                                                    "are left out"))
    return tables, problems


def _table_line(lines: list[str], name: str) -> int:
    pattern = re.compile(r"^\s*\[\[?\s*" + re.escape(name) + r"\s*[\].]")
    return next((i + 1 for i, line in enumerate(lines) if pattern.match(line)), 1)


def _rule_lines(lines: list[str], name: str) -> list[int]:
    """The line of each ``[[name.rule]]`` in file order (rule i is written at the i-th)."""
    pattern = re.compile(r"^\s*\[\[\s*" + re.escape(name) + r"\s*\.\s*rule\s*\]\]")
    return [i + 1 for i, line in enumerate(lines) if pattern.match(line)]


def _key_line(lines: list[str], start: int, key: str) -> int:
    """The line of ``key =`` in the table whose head is line ``start`` (up to the next
    table), else ``start``."""
    pattern = re.compile(r"^\s*" + re.escape(key) + r"\s*=")
    for i in range(start, len(lines)):          # lines[start]: the line after the head
        if lines[i].lstrip().startswith("["):
            break
        if pattern.match(lines[i]):
            return i + 1
    return start


def _table(path: Path, lines: list[str], name: str, body: Any, line: int) -> DispatchTable:
    def err(message: str, at: int = line):
        raise KernelFileError(path, at, message)

    if not NAME_RE.match(name) or len(name) > MAX_NAME_CHARS:
        err(f"name '{name}' must be lower-case letters, digits and _, at most {MAX_NAME_CHARS}")
    if not isinstance(body, dict):
        err(f"'{name}' must be a table ([{name}]) of title, backend, precision and rules")
    unknown = sorted(set(body) - TABLE_KEYS)
    if unknown:
        err(f"unknown key '{unknown[0]}' in [{name}] (known: {', '.join(sorted(TABLE_KEYS))})",
            _key_line(lines, line, unknown[0]))
    texts = {}
    for key in ("title", "summary"):
        value = body.get(key, "")
        if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS:
            err(f"'{key}' must be a text of at most {MAX_TEXT_CHARS} characters",
                _key_line(lines, line, key))
        texts[key] = value.strip()
    backend = body.get("backend")
    if backend not in BACKENDS:
        err(f"backend must be one of {', '.join(BACKENDS)}, not {shown_text(repr(backend), 40)}",
            _key_line(lines, line, "backend"))
    precision = body.get("precision", "fp32")
    if precision not in PRECISIONS:
        err(f"precision must be one of {', '.join(PRECISIONS)}, not "
            f"{shown_text(repr(precision), 40)}", _key_line(lines, line, "precision"))
    dtypes = body.get("dtypes", ["float32"])
    if (not isinstance(dtypes, list) or not dtypes
            or any(d not in KERNEL_DTYPES for d in dtypes)):
        err(f"dtypes must be a list of {', '.join(KERNEL_DTYPES)}", _key_line(lines, line, "dtypes"))
    layouts = body.get("layouts", ["kn"])
    if (not isinstance(layouts, list) or not layouts
            or any(x not in LAYOUTS for x in layouts)):
        err(f"layouts must be a list of {', '.join(LAYOUTS)} (B as K×N, B as N×K)",
            _key_line(lines, line, "layouts"))
    raw = body.get("rule")
    if not isinstance(raw, list) or not raw or not all(isinstance(r, dict) for r in raw):
        err(f"[{name}] needs its rules, each a [[{name}.rule]] with 'variant' (and 'when', "
            "'params')")
    if len(raw) > MAX_RULES:
        err(f"[{name}] has {len(raw)} rules (at most {MAX_RULES})")
    at = _rule_lines(lines, name)
    rules = []
    for i, r in enumerate(raw):
        rules.append(_rule(path, lines, name, i, r, at[i] if i < len(at) else line))
    last = rules[-1]
    if last.when is not None and not _always(last.when):
        err(f"the last rule of {name} must apply to every shape: leave out its 'when' (or "
            "add such a rule at the end)", _key_line(lines, at[-1] if at else line, "when"))
    return DispatchTable(name=name, path=path, line=line, title=texts["title"],
                         summary=texts["summary"], backend=backend, precision=precision,
                         dtypes=tuple(dtypes), layouts=tuple(layouts), rules=tuple(rules))


def _always(e: Expr) -> bool:
    """An expression that holds at every shape because it names none (``"True"``, ``1``)."""
    if e.names() - set(FUNCTIONS):
        return False
    try:
        return bool(e({}))
    except ExpressionError:
        return False


def _rule(path: Path, lines: list[str], name: str, i: int, r: dict, line: int) -> Rule:
    where = f"{name}.rule[{i + 1}]"

    def err(message: str, key: str | None = None):
        raise KernelFileError(path, _key_line(lines, line, key) if key else line,
                              f"{where}: {message}")

    unknown = sorted(set(r) - RULE_KEYS)
    if unknown:
        err(f"unknown key '{unknown[0]}' (known: {', '.join(sorted(RULE_KEYS))})", unknown[0])
    variant = r.get("variant")
    if not isinstance(variant, str) or not NAME_RE.match(variant):
        err("'variant' must name a kernel (lower-case letters, digits and _)", "variant")
    params = r.get("params", {})
    if not isinstance(params, dict):
        err("'params' must be a table of parameter = whole number or expression", "params")
    params = dict(params)
    before: list[str] = []                      # the parameters a value may use: those above it
    for pname, value in params.items():
        if not NAME_RE.match(pname):
            err(f"'{shown_text(pname, 40)}' is not a parameter name", "params")
        if isinstance(value, str):
            # a value by the shape (and the parameters before it): checked against the
            # kernel's values where it is routed
            e = _parse_expr(value, f"{where}.params.{pname}", lambda: _key_line(lines, line, "params"),
                            path)
            names = sorted(e.names() - set(SHAPE_NAMES) - set(RULE_NAMES) - set(FUNCTIONS) - set(before))
            if names:
                later = " (a parameter may use only those before it)" if names[0] in params else ""
                err(f"unknown name '{names[0]}' in {pname} = \"{shown_text(value, 60)}\" (it may "
                    f"use M, N, K, SMS, {', '.join(FUNCTIONS)}"
                    f"{''.join(', ' + b for b in before)}){later}", "params")
            params[pname] = e
        elif isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PARAM_VALUE:
            err(f"{pname} = {shown_text(repr(value), 40)}: a parameter is a whole number from 0 "
                f"to {MAX_PARAM_VALUE} or an expression in quotes (leave it out for the kernel's "
                "default or [chosen] value)", "params")
        before.append(pname)
    why = r.get("why", "")
    if not isinstance(why, str) or len(why) > MAX_TEXT_CHARS:
        err(f"'why' must be a text of at most {MAX_TEXT_CHARS} characters", "why")
    when = None
    if "when" in r:
        when = _parse_expr(r["when"], f"{where}.when", lambda: _key_line(lines, line, "when"), path)
        names = sorted(when.names() - set(SHAPE_NAMES) - set(RULE_NAMES) - set(FUNCTIONS))
        if names:
            err(f"unknown name '{names[0]}' in 'when' (it may use M, N, K, SMS and "
                f"{', '.join(FUNCTIONS)})", "when")
    return Rule(when=when, variant=variant, params=dict(params),
                where=f"{shown_text(path)}:{line}", why=why)


def builtin_tables(root: Path) -> tuple[list[DispatchTable], list[KernelFileError]]:
    """The lab's own tables (:data:`BUILTIN_FILES` under ``root``; a missing file is none)."""
    tables: list[DispatchTable] = []
    problems: list[KernelFileError] = []
    for rel in BUILTIN_FILES:
        path = root / rel
        if not path.exists():
            continue
        got, bad = parse(path)
        tables += got
        problems += bad
    return tables, problems


@dataclass(frozen=True)
class Route:
    """What a dispatch variant runs at one shape: a kernel and its parameters (every one
    set: the rule's, then the kernel's [chosen] value at the shape, then its default)."""

    variant: str
    params: dict[str, int] = field(default_factory=dict)
    rule: Rule | None = None
