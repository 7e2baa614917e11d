"""``bench --list``: every variant with its parameters, their values and one-line
descriptions (readable in 100 columns), and ``bench --list --variants NAME``: one variant
in full (title, summary, parameters with descriptions, constraints with their reasons)."""
import io
import re

from rich.console import Console

import main
from cli import bench as bench_cli
from engine.kernels import registry

KERNEL = """\
/*
+++
name = "{name}"
title = "Tiles of A and B in shared memory, [bold]as written[/bold] :smile:"
summary = "Each block copies a tile of A and B, then every thread sums its element: the story."
source = "tests"
backend = "opencl"

[params]
ts = [16, 8]
wpt = [1, 2]

[descriptions]
ts = "side of the square tile in elements, [red]literal[/red]"
wpt = "outputs each thread computes along a row of its tile"

[chosen]
wpt = "1 if K < 64 else 2"

[[constraints]]
check = "M % ts == 0"
reason = "M = {{M}} is not a multiple of ts={{ts}}"

[launch]
grid = ["cdiv(N, ts)", "cdiv(M, ts * wpt)"]
block = ["ts", "ts"]
+++
*/
__kernel void matmul() {{}}
"""


def _folder(tmp_path, name="described"):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / f"{name}.cl").write_text(KERNEL.format(name=name))
    return folder


def bench(capsys, *args):
    code = main.main(["bench", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def _block(out: str, name: str) -> list[str]:
    """The lines ``--list`` prints for variant ``name``: its head line to the next head."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{name}  "))
    end = next((i for i in range(start + 1, len(lines))
                if lines[i] and not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


def test_list_prints_each_parameter_with_its_values_and_description(tmp_path, capsys):
    code, out, err = bench(capsys, "--kernels", _folder(tmp_path), "--list")
    assert code == 0, err
    block = _block(out, "described")
    assert "user · opencl" in block[0]
    assert "Tiles of A and B in shared memory, [bold]as written[/bold] :smile:" in block[1]
    ts = next(line for line in block if line.strip().startswith("ts "))
    # values (the default first), then the description, markup printed as text
    assert re.search(r"ts\s+16/8\s+side of the square tile in elements, \[red\]literal\[/red\]",
                     ts), ts
    wpt = next(line for line in block if line.strip().startswith("wpt "))
    assert re.search(r"wpt\s+auto/1/2\s+outputs each thread computes", wpt), wpt
    assert "the story" not in out            # the summary is for the full view
    for name in registry.REGISTRY:            # every variant still listed, each once
        assert len([line for line in out.splitlines() if line.startswith(f"{name}  ")]) == 1


def test_list_stays_in_100_columns():
    buf = io.StringIO()
    con = Console(file=buf, width=100, emoji=False, highlight=False)
    bench_cli._print_list(con)
    lines = buf.getvalue().splitlines()
    assert len(lines) > len(registry.REGISTRY)
    assert max(len(line.rstrip()) for line in lines) <= 100
    # a description folded under itself, never under the parameter names
    for v in registry.REGISTRY.values():
        for pname, text in v.descriptions.items():
            assert text.split()[0] in buf.getvalue(), (v.name, pname)


def test_list_variants_prints_one_in_full(tmp_path, capsys):
    code, out, err = bench(capsys, "--kernels", _folder(tmp_path), "--list", "--variants",
                           "described")
    assert code == 0, err
    assert "not used" not in err                 # --variants is what --list shows now
    flat = " ".join(out.split())
    assert flat.startswith("described user · opencl")
    assert "Tiles of A and B in shared memory, [bold]as written[/bold] :smile:" in flat
    assert "the story." in flat                                          # the summary
    assert "side of the square tile in elements, [red]literal[/red]" in flat
    assert "(auto: 1 if K < 64 else 2)" in flat                          # how the shape picks
    assert "M = {M} is not a multiple of ts={ts} check: M % ts == 0" in flat
    assert "Backends and devices" not in out and "naive" not in out      # that one only


def test_list_variants_of_a_built_in_and_an_unknown_name(capsys):
    v = registry.get("tiled_any")
    code, out, err = bench(capsys, "--list", "--variants", "tiled_any,naive")
    assert code == 0, err
    flat = " ".join(out.split())
    assert v.technique in flat and "naive baseline" in flat
    for c in v.headers[0].constraints:
        assert " ".join(c.reason.split()) in flat
    code, out, err = bench(capsys, "--list", "--variants", "nope")
    assert code == 2 and "unknown variant 'nope'" in err and not out
