"""Kernel headers' one-line titles (at most MAX_TITLE_CHARS, the longer story in
``summary``) and their parameters' ``[descriptions]``."""
import pytest

from engine.kernels import registry
from engine.kernels.kernel_file import MAX_TITLE_CHARS, KernelFileError, parse_header

HEADER = """\
/*
+++
name = "{name}"
source = "tests"
role = "{role}"
title = "{title}"

[params]
block = [16, 8]

[launch]
grid = ["cdiv(N, block)", "cdiv(M, block)"]
block = ["block", "block"]
+++
*/
__kernel void matmul() {{}}
"""


def _file(tmp_path, title, role="user", name="titled"):
    path = tmp_path / f"{name}.cl"
    path.write_text(HEADER.format(name=name, role=role, title=title))
    return path


def test_a_user_title_is_one_line_of_at_most_100_characters(tmp_path):
    assert parse_header(_file(tmp_path, "t" * MAX_TITLE_CHARS)).title == "t" * MAX_TITLE_CHARS
    with pytest.raises(KernelFileError) as exc:
        parse_header(_file(tmp_path, "t" * (MAX_TITLE_CHARS + 1)))
    err = exc.value
    assert err.line == 6                                 # the title's line in the file
    assert str(err).startswith(f"{tmp_path / 'titled.cl'}:6: ")
    assert f"'title' is {MAX_TITLE_CHARS + 1} characters long (at most {MAX_TITLE_CHARS}" in str(err)
    assert "move the longer story to 'summary'" in str(err)
    # blanks around the title do not count (the title is shown stripped)
    assert parse_header(_file(tmp_path, " " * 5 + "t" * MAX_TITLE_CHARS + " ")).title


def test_the_lab_s_own_files_are_held_to_it_too(tmp_path):
    long = "t" * (MAX_TITLE_CHARS + 1)
    for role in ("rung", "seed", "experiment"):
        with pytest.raises(KernelFileError, match="move the longer story to 'summary'"):
            parse_header(_file(tmp_path, long, role=role))


def test_every_built_in_title_fits_and_every_parameter_is_described():
    """Issue 36: each built-in kernel file's title is one line of at most 100 characters,
    and each parameter has a one-line description (the window's tooltip, bench --list)."""
    long = {v.name: len(v.technique) for v in registry.REGISTRY.values()
            if v.headers and len(v.technique) > MAX_TITLE_CHARS}
    undescribed = {v.name: [p for p in v.space if p not in v.descriptions]
                   for v in registry.REGISTRY.values()}
    undescribed = {k: ps for k, ps in undescribed.items() if ps}
    assert not long, f"titles over {MAX_TITLE_CHARS} characters: {long}"
    assert not undescribed, f"parameters without a description: {undescribed}"
