"""GUI: a kernel file's one-line title, its ``summary`` and its parameters' ``[descriptions]``
in the variant tree's tooltips (the row of a variant, the row and the value boxes of a
parameter), user text shown as written."""
import html
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402

from engine.kernels import registry  # noqa: E402
from gui.variant_tree import VariantTree  # noqa: E402

KERNEL = """\
/*
+++
name = "{name}"
title = "Tiles of <b>A</b> and B in shared memory"
summary = "Each block copies a tile of A & B, then every thread sums its element: the story."
source = "tests"
backend = "opencl"

[params]
ts = [8, 16]
wpt = [1, 2]

[descriptions]
ts = "side of the square tile <i>in elements</i>"

[chosen]
wpt = "1 if K < 64 else 2"

[launch]
grid = ["cdiv(N, ts)", "cdiv(M, ts)"]
block = ["ts", "ts"]
+++
*/
__kernel void matmul() {{}}
"""


def _tree(qtbot, tmp_path, name="described"):
    path = tmp_path / f"{name}.cl"
    path.write_text(KERNEL.format(name=name))
    names, problems = registry.load_kernel_files([path])
    assert names == [name] and not problems
    tree = VariantTree()
    qtbot.addWidget(tree)
    tree.set_backend("opencl")
    row = next(tree.topLevelItem(i) for i in range(tree.topLevelItemCount())
               if tree.topLevelItem(i).text(0) == name)
    params = {row.child(i).text(0): row.child(i) for i in range(row.childCount())}
    return tree, row, params


def test_a_variant_row_tooltip_holds_the_title_and_the_summary(qtbot, tmp_path):
    tree, row, _ = _tree(qtbot, tmp_path)
    tip = row.toolTip(0)
    # the title as written (escaped: "<b>" in it is text), then the longer story
    assert "Tiles of &lt;b&gt;A&lt;/b&gt; and B in shared memory" in tip
    assert "the story." in tip and "A &amp; B" in tip
    assert tip.index("Tiles of") < tip.index("the story.")
    assert row.toolTip(1).startswith(tip)          # the technique column says the same
    assert row.text(1) == "Tiles of <b>A</b> and B in shared memory"   # the row: the title only


def test_a_parameter_row_and_its_values_show_its_description(qtbot, tmp_path):
    tree, _, params = _tree(qtbot, tmp_path)
    tip = params["ts"].toolTip(0)
    assert "<b>ts</b>: side of the square tile &lt;i&gt;in elements&lt;/i&gt;" in tip
    assert "8 is the default" in tip
    values = tree._value_widgets[("described", "ts")]
    # the value boxes have no tip of their own: Qt shows the row's (the parent widget's)
    assert values.toolTip() == tip
    assert all(not b.toolTip() for b in values.boxes.values())
    # a parameter without a description says what it said before, and no empty heading
    wpt = params["wpt"].toolTip(0)
    assert wpt.startswith("Values of wpt to sweep") and "<b>wpt</b>" not in wpt
    # the chosen expression is text in rich text ("<" of "K < 64" escaped)
    assert "1 if K &lt; 64 else 2" in wpt
    auto = tree._value_widgets[("described", "wpt")].boxes[registry.AUTO].toolTip()
    assert "the value the shape picks" in auto


def test_a_value_marked_not_for_these_sizes_keeps_the_description(qtbot, tmp_path):
    tree, _, _ = _tree(qtbot, tmp_path)
    values = tree._value_widgets[("described", "ts")]
    values.set_marks({16: "not for these sizes: ts=16 does not divide 8"})
    tip = values.boxes[16].toolTip()
    assert tip.startswith("not for these sizes: ts=16 does not divide 8")
    assert "side of the square tile" in tip
    values.set_marks({})
    assert values.boxes[16].toolTip() == ""        # back to the row's description


def test_every_built_in_row_shows_its_title_and_its_descriptions(qtbot):
    """The built-ins as the window shows them: each variant's row tooltip holds its title
    (and summary where it has one), each parameter row its description where it has one."""
    tree = VariantTree()
    qtbot.addWidget(tree)
    for backend in ("opencl", "cuda"):
        tree.set_backend(backend)
        for i in range(tree.topLevelItemCount()):
            row = tree.topLevelItem(i)
            name = row.data(0, Qt.ItemDataRole.UserRole)
            if not name:
                continue
            v = registry.get(name)
            assert html.escape(v.technique) in row.toolTip(0), name
            assert html.escape(v.summary[:40]) in row.toolTip(0), name
            for j in range(row.childCount()):
                pname = row.child(j).text(0)
                if pname in v.descriptions:
                    assert f"<b>{pname}</b>: " in row.child(j).toolTip(0), (name, pname)
