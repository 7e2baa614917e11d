"""Hostile kernel headers (issue 35, class 1): whatever a header asks, reading it and
evaluating it is bounded in time and memory, and every problem is a ``file:line``
:class:`KernelFileError` (reading) or an :class:`ExpressionError` / a skip with the reason
(evaluating), never another exception, an endless computation or a lost window.

Property tests throw random headers and random expressions at the parser and the
evaluator; one test per class reproduces what each used to do (a traceback, an OOM, a
freeze) with a header of that class.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.kernels import registry
from engine.kernels.kernel_file import (INT_LIMIT, KERNEL_FILE_LIMIT, MAX_COMBOS, MAX_CONSTRAINTS,
                                        MAX_DERIVED, MAX_EXPR_CHARS, MAX_EXPR_DEPTH,
                                        MAX_HEADER_CHARS, MAX_HEADER_NODES, MAX_MESSAGE_CHARS,
                                        MAX_PARAMS, MAX_VALUES, ExpressionError, KernelFileError,
                                        parse_header)

ROOT = Path(__file__).resolve().parent.parent
#: What one header (parse, variant, a few checks) may take, in seconds: each takes
#: milliseconds; the bombs this replaces ran until the OOM killer came.
EXAMPLE_S = 2.0
#: Shapes every parsed header is evaluated at.
SHAPES = ((1, 1, 1), (127, 61, 253), (10_000, 10_000, 10_000))


def header(body: str, params: str = "block = [16, 8]", name: str = "k",
           launch: str = 'grid = ["cdiv(N, block)", "cdiv(M, block)"]\nblock = ["block", "block"]',
           top: str = "") -> str:
    """A kernel file whose header holds ``body`` (tables after [params], before [launch])."""
    return (f'/*\n+++\nname = "{name}"\ntitle = "t"\nsource = "s"\n{top}\n[params]\n{params}\n'
            f'{body}\n[launch]\n{launch}\n+++\n*/\n__kernel void matmul() {{}}\n')


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """The 1-based line of the ``nth`` line of ``text`` that contains ``needle``."""
    hits = [i for i, line in enumerate(text.split("\n"), 1) if needle in line]
    return hits[nth - 1]


def refused(text: str, name: str = "k.cl") -> KernelFileError:
    with pytest.raises(KernelFileError) as err:
        parse_header(Path(name), text)
    return err.value


def exercise(text: str, name: str = "k.cl") -> str | None:
    """Parse ``text`` and evaluate what it builds the way the app does (checks of the
    first combinations at a few shapes, the geometry, the models): the reason of the
    first skip, or None. Raises KernelFileError only; anything else fails the test."""
    h = parse_header(Path(name), text)
    v = registry.variant_from_headers([h])
    first = None
    for combo in v.combos()[:4]:
        for shape in SHAPES:
            why = v.check(h.backend, combo, *shape, "float32")
            assert why is None or isinstance(why, str)
            assert len(why or "") < 4 * MAX_MESSAGE_CHARS
            first = first or why
            assert isinstance(v.flops(*shape), int) and isinstance(v.bytes_moved(*shape, 4), int)
            if why is None:
                (gx, gy), (bx, by) = v.launch_geometry(combo, *shape)
                assert all(abs(x) <= INT_LIMIT for x in (gx, gy, bx, by))
                assert v.flops(*shape) >= 1 and v.bytes_moved(*shape, 4) >= 1
    return first


def timed(fn, *args):
    """``fn(*args)``, which must take under EXAMPLE_S of this process's CPU time (CPU,
    not wall time: the machine may be busy with others' work; a computation without end
    spends CPU all the same)."""
    t0 = time.process_time()
    try:
        return fn(*args)
    finally:
        assert time.process_time() - t0 < EXAMPLE_S


# --- random headers and expressions ---------------------------------------------------------

NAMES = ["block", "x", "y", "M", "N", "K", "SMS", "cdiv", "min", "max", "roundup", "q",
         "__class__", "itemsize"]
INTS = st.one_of(st.integers(-3, 70), st.sampled_from([2**31, 2**62, 2**63, 2**64, 10**30, -1]))
TEXTS = st.one_of(st.text(max_size=12), st.sampled_from(
    ["{", "}", "{block}", "{block * block}", "{}", "{x!r:>99999}", "{block[0]}", "\x1b[2J",
     ":smile:", "[bold]", "a\nb", "%999999999d", "{{ok}}"]))


def _expr_tree(leaves):
    binops = st.sampled_from(["+", "-", "*", "//", "/", "%", "**", "<<", ">>", "&", "|", "^",
                              "<", "<=", "==", "!=", "and", "or"])

    def extend(inner):
        return st.one_of(
            st.tuples(inner, binops, inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["-", "not ", "~"]), inner).map(lambda t: t[0] + t[1]),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
            st.tuples(st.sampled_from(["cdiv", "roundup", "min", "max", "len", "str"]),
                      st.lists(inner, max_size=3)).map(lambda t: f"{t[0]}({', '.join(t[1])})"),
            st.tuples(inner, st.sampled_from([".bit_length()", "[0]", ".__class__"]))
              .map(lambda t: t[0] + t[1]),
        )
    return st.recursive(leaves, extend, max_leaves=40)


EXPRS = _expr_tree(st.one_of(st.sampled_from(NAMES), INTS.map(str),
                             st.sampled_from(["'a'", "'a' * 1000", "1.5", "1e308", "None",
                                              "lambda: 1", "[1, 2]", "x := 1", "'%d'"]),
                             st.text(max_size=6)))


#: Expressions that parse and name only what a header knows: most of a random header's
#: expressions are these, so that random headers get past the parser to the evaluator.
TAME = st.recursive(
    st.one_of(st.sampled_from(["block", "x", "M", "N", "K", "SMS"]), st.integers(0, 70).map(str),
              st.sampled_from([str(2**62), str(2**63), "'a'"])),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "//", "%", "**", "<<", "<", "==",
                                          "and", "or"]), inner)
          .map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(inner, inner, inner).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        st.tuples(st.sampled_from(["cdiv", "roundup", "min", "max"]), inner, inner)
          .map(lambda t: f"{t[0]}({t[1]}, {t[2]})")),
    max_leaves=12)
MIXED = st.one_of(TAME, TAME, TAME, EXPRS)


def toml_value(v) -> str:
    """``v`` written as TOML (json's strings are TOML basic strings, escapes and all)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v) if not isinstance(v, float) or math.isfinite(v) else "inf"
    if isinstance(v, str):          # TOML takes no surrogate pairs, nor a raw DEL
        return json.dumps(v, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


SCALARS = st.one_of(INTS, TEXTS, EXPRS, st.booleans(), st.floats(allow_nan=False))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(NAMES + ["check", "reason",
                                                                          "flops", "bytes"]),
                                                 inner, max_size=3)), max_leaves=12)
PARAM_LISTS = st.one_of(
    st.lists(st.integers(0, 64), min_size=1, max_size=4, unique=True),
    st.lists(st.one_of(st.integers(-2, 40), st.sampled_from([2**31, 0])), max_size=5))


@st.composite
def headers(draw) -> str:
    """A header close enough to the format to reach every check, with hostile values."""
    lines = ['name = "k"', 'title = ' + toml_value(draw(st.one_of(st.just("t"), st.just("t"), TEXTS))),
             'source = "s"']
    for key in draw(st.lists(st.sampled_from(["role", "order", "kind", "dtypes", "precision",
                                              "entry", "arch_suffix", "backend", "colour"]),
                             max_size=3, unique=True)):
        lines.append(f"{key} = {toml_value(draw(SCALARS))}")
    params = draw(st.dictionaries(st.sampled_from(["block", "x", "y", "min", "M"]),
                                  PARAM_LISTS, min_size=1, max_size=3))
    lines.append("[params]")
    lines += [f"{k} = {toml_value(v)}" for k, v in params.items()]
    derived = draw(st.lists(st.tuples(st.sampled_from(["d", "e", "f", "block"]), MIXED),
                            max_size=4, unique_by=lambda t: t[0]))
    if derived:
        lines.append("[derived]")
        lines += [f"{k} = {toml_value(v)}" for k, v in derived]
    for check, reason in draw(st.lists(st.tuples(MIXED, TEXTS), max_size=3)):
        lines += ["[[constraints]]", f"check = {toml_value(check)}", f"reason = {toml_value(reason)}"]
    if draw(st.booleans()):
        lines += ["[chosen]", f"{draw(st.sampled_from(['block', 'x']))} = {toml_value(draw(MIXED))}"]
    if draw(st.booleans()):
        lines += ["[model]", f"flops = {toml_value(draw(MIXED))}", f"bytes = {toml_value(draw(MIXED))}"]
    if draw(st.booleans()):
        lines += ["[prepass]", 'entry = "pre"', f"grid = {toml_value([draw(MIXED), 1])}",
                  'block = [1, 1]', f"scratch = {toml_value(draw(MIXED))}"]
    lines += ["[launch]", f"grid = {toml_value([draw(MIXED), draw(MIXED)])}",
              f"block = {toml_value(draw(st.one_of(st.just(['block', 'block']), VALUES)))}"]
    if draw(st.booleans()):
        lines.append(f"shared = {toml_value(draw(MIXED))}")
    extra = draw(st.lists(st.tuples(st.sampled_from(["[launch]", "[params]", "", "[x]"]),
                                    st.sampled_from(["grid", "block", "name", "x"]), VALUES),
                          max_size=2)) if draw(st.integers(0, 3)) == 0 else []
    lines += [f"{t}\n{k} = {toml_value(v)}" for t, k, v in extra]
    if draw(st.integers(0, 4)) == 0:     # raw junk somewhere
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, draw(st.text(max_size=20)))
    return "/*\n+++\n" + "\n".join(lines) + "\n+++\n*/\n__kernel void matmul() {}\n"


PROPERTY = settings(max_examples=150, deadline=None,       # timed() bounds each example
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def check_header_text(text: str, name: str) -> None:
    try:
        timed(exercise, text, name)
    except KernelFileError as exc:
        assert exc.path == Path(name)
        assert exc.line is None or exc.line >= 1
        assert len(exc.message) <= MAX_MESSAGE_CHARS
        assert "\x1b" not in str(exc) and "\n" not in exc.message


def check_expression(expr: str, where: str) -> None:
    body = {"derived": f"[derived]\nd = {toml_value(expr)}\n[[constraints]]\ncheck = \"d >= 0\"\n"
                       "reason = \"d is {d}\"",
            "check": f"[[constraints]]\ncheck = {toml_value(expr)}\nreason = \"no\"",
            "grid": "", "reason": f"[[constraints]]\ncheck = \"0\"\nreason = {toml_value('{' + expr + '}')}",
            "flops": f"[model]\nflops = {toml_value(expr)}"}[where]
    launch = (f'grid = [{toml_value(expr)}, "1"]\nblock = ["block", "block"]' if where == "grid"
              else 'grid = ["1", "1"]\nblock = ["block", "block"]')
    text = header(body, params="block = [16]\nx = [3]\ny = [2]\nq = [1]", launch=launch)
    try:
        timed(exercise, text)
    except KernelFileError as exc:
        assert exc.line is not None and len(exc.message) <= MAX_MESSAGE_CHARS


WHERE = st.sampled_from(["derived", "check", "grid", "reason", "flops"])


@PROPERTY
@given(headers(), st.sampled_from(["k.cl", "k.cu"]))
@pytest.mark.slow
def test_random_headers_give_a_kernel_file_error_or_a_working_variant(text, name):
    check_header_text(text, name)


@PROPERTY
@given(EXPRS, WHERE)
def test_random_expressions_parse_or_say_where_and_evaluate_or_skip(expr, where):
    check_expression(expr, where)


def test_random_headers_stay_within_a_memory_bound():
    """The bombs and random headers again, in a process that may not grow past 1 GiB: a
    header that made the evaluator allocate without end would end it with a MemoryError."""
    code = textwrap.dedent("""
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from hypothesis import HealthCheck, given, settings, strategies as st
        import tests.test_hostile_headers as t
        for bomb in t.BOMBS:
            try:
                t.exercise(bomb)
            except t.KernelFileError:
                pass
        few = settings(max_examples=40, deadline=None, database=None,
                       suppress_health_check=list(HealthCheck))
        few(given(t.headers(), st.sampled_from(["k.cl", "k.cu"]))(t.check_header_text))()
        few(given(t.EXPRS, t.WHERE)(t.check_expression))()
        print("bounded")
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)
    assert done.returncode == 0 and "bounded" in done.stdout, done.stderr[-3000:]


# --- one test per class -------------------------------------------------------------------

#: Headers that used to take the engine's memory or time without end (the OOM killer
#: ended check-kernel; pasted into the editor, they froze the window).
BOMBS = [
    header("[derived]\na0 = \"M * M + 7\"\n" + "".join(f'a{i} = "a{i - 1} * a{i - 1}"\n'
                                                       for i in range(1, 60))
           + '[[constraints]]\ncheck = "a59 > 0"\nreason = "r"'),
    header('[derived]\nx = "9 ** 4000000"\ny = "x * x"\n[[constraints]]\ncheck = "y > 0"\nreason = "r"'),
    header('[derived]\nx = "1 << 100000"\n[[constraints]]\ncheck = "x > 0"\nreason = "r"'),
    header('[derived]\nx = "(M ** M) ** K"\n[[constraints]]\ncheck = "x > 0"\nreason = "r"'),
    header('[derived]\nx = "\'a\' * 1000 * 1000"\n[[constraints]]\ncheck = "x"\nreason = "r"'),
    header('[derived]\nx = "\'%999999999d\' % 1"\n[[constraints]]\ncheck = "x"\nreason = "r"'),
    header('[derived]\nx = "(M / 1) ** 10000"\n[[constraints]]\ncheck = "x > 0"\nreason = "r"'),
    header("", params="\n".join(f"p{i} = [{', '.join(map(str, range(1, 11)))}]" for i in range(10))
           + "\nblock = [16]"),
]


@pytest.mark.parametrize("bomb", BOMBS, ids=["squarings", "power", "shift", "power-of-power",
                                              "text", "format", "float-power", "combinations"])
def test_bombs_are_a_skip_or_a_refusal_in_milliseconds(bomb):
    try:
        why = timed(exercise, bomb)
    except KernelFileError as exc:
        # the first parameter past MAX_COMBOS (10 values each) is the line said
        first = next(i for i in range(10) if 10 ** (i + 1) > MAX_COMBOS)
        assert "combinations" in exc.message and exc.line == line_of(bomb, f"p{first} =")
        return
    assert why is not None and ("2^63" in why or "text longer" in why or "formatting" in why
                                or "failed" in why), why


def test_a_chain_of_squarings_at_a_shape_says_which_name_grew_too_large():
    why = exercise(BOMBS[0])
    assert why.startswith("derived.a") and "past ±2^63" in why


@pytest.mark.parametrize("reason", ['oops {', 'oops }', '{}', '{block[0]}', '{block.real}',
                                    '{block!r', '{block:{x}'])
def test_a_brace_in_a_reason_is_the_reasons_line(reason):
    text = header(f'[[constraints]]\ncheck = "block > 0"\nreason = {json.dumps(reason)}')
    err = refused(text)
    assert err.line == line_of(text, "reason =")
    assert err.message.startswith("constraints[0].reason")


def test_a_brace_written_twice_is_a_brace_and_a_field_is_a_value():
    text = header('[[constraints]]\ncheck = "block > 99"\nreason = "{{block}} is {block}"')
    assert exercise(text) == "{block} is 16"


@pytest.mark.parametrize("params,words", [
    ("\n".join(f"p{i} = [1, 2]" for i in range(MAX_PARAMS + 1)) + "\nblock = [1]", "parameters (at most"),
    (f"block = [{', '.join(map(str, range(MAX_VALUES + 1)))}]", "values (at most"),
    ("block = [16]\n" + "\n".join(f"p{i} = [1, 2, 3, 4, 5, 6, 7, 8, 9]" for i in range(4)), "combinations"),
    ("block = [-1]", "from 0 to"),
    ("block = [2147483648]", "from 0 to"),
    ("block = [16]\nmin = [1]", "a function's name"),
])
def test_the_parameter_space_is_bounded(params, words):
    text = header("", params=params)
    err = refused(text)
    assert words in err.message
    assert err.line is not None and err.line >= line_of(text, "[params]")


def test_the_biggest_space_allowed_is_listed_and_checked_quickly():
    values = ", ".join(map(str, range(1, 5)))
    text = header("", params="block = [16]\n" + "\n".join(f"p{i} = [{values}]" for i in range(6)))
    v = registry.variant_from_headers([parse_header(Path("k.cl"), text)])
    assert len(v.combos()) == MAX_COMBOS
    timed(lambda: [v.check("opencl", c, 1000, 1000, 1000, "float32") for c in v.combos()])


@pytest.mark.parametrize("expr,words", [
    ("1" + " + 1" * (MAX_EXPR_CHARS // 4), "characters long"),
    ("-" * (MAX_EXPR_DEPTH + 1) + "1", "levels deep"),
    ("(" * 300 + "1" + ")" * 300, "does not parse"),
    ("block.bit_length()", "only cdiv"),
    ("block[0]", "Subscript"),
    ("(lambda: 1)()", "only cdiv"),
    ("min(block, key=1)", "no keywords"),
    ("[1, 2]", "List"),
    ("block if 1 else 1.5", "not a whole number"),
    ("9" * 30, "past ±2^63"),
    ("block in 1", "In is not"),
    ("block; block", "does not parse"),
    ("blo\x00ck", "control character \\x00"),
    ("(x := 1)", "NamedExpr"),
])
def test_an_expression_is_bounded_and_plain_arithmetic(expr, words):
    text = header(f"[derived]\nd = {json.dumps(expr)}")
    err = refused(text)
    assert words in err.message, err.message
    assert err.line == line_of(text, "d =")


def test_derived_names_constraints_and_all_expressions_together_are_bounded():
    many = "".join(f'd{i} = "block"\n' for i in range(MAX_DERIVED + 1))
    assert "names (at most" in refused(header("[derived]\n" + many)).message
    cons = '[[constraints]]\ncheck = "1"\nreason = "r"\n' * (MAX_CONSTRAINTS + 1)
    assert "[[constraints]] (at most" in refused(header(cons)).message
    big = "max(" + ", ".join(["block"] * 100) + ")"     # 203 nodes, 3 levels
    total = "".join(f'd{i} = "{big}"\n' for i in range(MAX_HEADER_NODES // 200))
    err = refused(header("[derived]\n" + total))
    assert "parts in all" in err.message


def test_a_long_chain_of_derived_names_evaluates_without_recursing():
    """128 names, each the previous nested 7 deep (as many as the header's budget of
    parts allows): evaluated in order, never inside one another (some 3000 Python frames)."""
    deep = "d{p} + 1"
    for _ in range(3):
        deep = f"({deep}) * 1"
    chain = "".join(f'd{i} = "{deep.format(p=i - 1)}"\n' if i else 'd0 = "block"\n'
                    for i in range(MAX_DERIVED))
    text = header(f'[derived]\n{chain}[[constraints]]\ncheck = "d{MAX_DERIVED - 1} < 0"\n'
                  f'reason = "d is {{d{MAX_DERIVED - 1}}}"', params="block = [1]")
    assert timed(exercise, text) == f"d is {MAX_DERIVED}"


def test_a_failure_in_an_unused_branch_stays_unused():
    text = header('[derived]\nbad = "1 // 0"\nok = "bad if block > 99 else 5"\n'
                  '[[constraints]]\ncheck = "ok < 5"\nreason = "ok is {ok}"')
    assert exercise(text) == "ok is 5"


@pytest.mark.parametrize("make,words", [
    (lambda: "/*\n+++\n" + "x" * (MAX_HEADER_CHARS + 1) + "\n+++\n*/\n", "characters long"),
    (lambda: header("") + "//" * (KERNEL_FILE_LIMIT // 2 + 1), "more than a kernel file"),
    (lambda: header("").replace('title = "t"', "title = " + "[" * 3000 + "]" * 3000), "too deeply"),
    (lambda: header("").replace("block = [16, 8]", "block = [" + "9" * 5000 + "]"), "thousands of digits"),
    (lambda: header("").replace("block = [16, 8]", "block = [" + "9" * 100 + "]"), "±2^63"),
    (lambda: header("").replace('title = "t"', 'title = "' + "t" * 2001 + '"'), "characters long"),
    (lambda: header("").replace('title = "t"', 'title = "a\\u001b[2Jb"'), "control character \\x1b"),
    (lambda: header("").replace('title = "t"', 'title = "two\\nlines"'), "control character \\n"),
    (lambda: header("").replace('title = "t"', 'title = "a\\u202eb"'), "control character \\u202e"),
    (lambda: header("", top='entry = "matmul(); evil"'), "C identifier"),
])
def test_header_size_nesting_numbers_and_texts_are_bounded(make, words):
    err = refused(make())
    assert words in err.message, err.message
    assert "\x1b" not in str(err) and "\u202e" not in str(err)


@pytest.mark.parametrize("body,key,first_key,words", [
    ("", "block = [8]", "block = [16, 8]", "'block' is written twice in [params]"),
    ("[derived]\nd = \"1\"\n[derived]\ne = \"2\"", "[derived]", "[derived]",
     "the table [derived] is written twice"),
])
def test_a_key_written_twice_is_named_at_its_line_with_the_first(body, key, first_key, words):
    text = header(body, params="block = [16, 8]\nblock = [8]" if not body else "block = [16, 8]")
    err = refused(text)
    assert words in err.message, err.message
    assert err.line == line_of(text, key, 2 if key == first_key else 1)
    assert f"first at line {line_of(text, first_key)}" in err.message
    assert "Cannot overwrite" not in err.message


def test_a_top_level_key_written_twice_too():
    text = header("").replace('source = "s"', 'source = "s"\ntitle = "again"')
    err = refused(text)
    assert "'title' is written twice" in err.message
    assert err.line == line_of(text, 'title = "again"')
    assert f"first at line {line_of(text, 'title = ')}" in err.message


@pytest.mark.parametrize("body,top,words", [
    ('[prepass]\nentry = "pre"\ngrid = ["1", "1"]\nblock = ["1", "1"]', "", "[prepass] is for CUDA"),
    ("", 'arch_suffix = "a"', "arch_suffix is for CUDA"),
    ("", "", "launch.shared is for CUDA"),
])
def test_keys_the_opencl_backend_would_ignore_are_refused(body, top, words):
    launch = 'grid = ["1", "1"]\nblock = ["block", "block"]'
    if "shared" in words:
        launch += '\nshared = "block * 4"'
    err = refused(header(body, top=top, launch=launch), "k.cl")
    assert words in err.message
    # the same header is a CUDA kernel's own
    parse_header(Path("k.cu"), header(body, top=top, launch=launch))


@pytest.mark.parametrize("model,words", [
    ('flops = "-M"', "at least 1"),
    ('flops = "0"', "at least 1"),
    ('bytes = "M - 2 * M"', "at least 1"),
    ('flops = "10 ** 18"', "more than 16 times"),
    ('bytes = "M * N * K * 10 ** 6"', "more than 16 times"),
])
def test_a_model_that_cannot_be_a_count_is_a_skip_with_the_reason(model, words):
    text = header(f"[model]\n{model}")
    v = registry.variant_from_headers([parse_header(Path("k.cl"), text)])
    why = v.check("opencl", {"block": 16}, 100, 100, 100, "float32")
    assert why is not None and words in why and "100×100×100" in why
    # the record made before the check carries no count rather than a made-up one
    assert 0 in (v.flops(100, 100, 100), v.bytes_moved(100, 100, 100, 4))


def test_a_model_that_counts_sensibly_is_used():
    text = header('[model]\nflops = "2 * M * N * K + M * N"\nbytes = "4 * (M * K + K * N) * 2"')
    v = registry.variant_from_headers([parse_header(Path("k.cl"), text)])
    assert v.check("opencl", {"block": 16}, 100, 100, 100, "float32") is None
    assert v.flops(100, 100, 100) == 2_010_000 and v.bytes_moved(100, 100, 100, 4) == 160_000


def test_messages_are_short_and_show_control_characters():
    text = header(f'[derived]\nd = "{"x" * 900}"')            # an unknown name, 900 long
    err = refused(text)
    assert len(err.message) <= MAX_MESSAGE_CHARS and "unknown name" in err.message
    weird = refused(header("").replace("[params]", '[params]\n"a\\u001bb" = [1]'))
    assert "\\x1b" in weird.message and "\x1b" not in str(weird)


# --- the editor -----------------------------------------------------------------------------

def test_pasting_a_bomb_into_the_editor_returns_at_once(qtbot, gui_settings):
    """The editor checks the header as you type (every combination at a shape): a bomb
    pasted there is a problem row within moments, and the window stays responsive."""
    from gui.kernel_editor import KernelEditor
    from gui.kernel_folders import KernelFolders
    from gui.settings import AppSettings

    ed = KernelEditor(KernelFolders(AppSettings(gui_settings)))
    qtbot.addWidget(ed)
    for bomb in BOMBS:
        ed.editor.setPlainText(bomb)
        problems = timed(ed.check_header)
        assert problems, bomb[:200]
