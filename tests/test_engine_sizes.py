"""Size specifications: lists, ×2 ranges, additive ranges, MxNxK shapes, errors."""
from __future__ import annotations

import pytest

from engine.inputs.sizes import MAX_DIM, PRESETS, SizeSpecError, format_shape, parse_sizes


@pytest.mark.parametrize("text,expected", [
    ("256", [(256, 256, 256)]),
    ("256,512", [(256, 256, 256), (512, 512, 512)]),
    ("256, 512 ;1024", [(256,) * 3, (512,) * 3, (1024,) * 3]),
    ("  64\t128\n", [(64,) * 3, (128,) * 3]),
    ("256:1024:x2", [(256,) * 3, (512,) * 3, (1024,) * 3]),
    ("256:1024", [(256,) * 3, (512,) * 3, (1024,) * 3]),          # step defaults to x2
    ("100:1000:x2", [(100,) * 3, (200,) * 3, (400,) * 3, (800,) * 3]),  # stop not reached
    ("16:1600:X10", [(16,) * 3, (160,) * 3, (1600,) * 3]),
    ("2:54:*3", [(2,) * 3, (6,) * 3, (18,) * 3, (54,) * 3]),
    ("128:512:128", [(128,) * 3, (256,) * 3, (384,) * 3, (512,) * 3]),
    ("1:3:1", [(1,) * 3, (2,) * 3, (3,) * 3]),
    ("10:25:10", [(10,) * 3, (20,) * 3]),
    ("64:64", [(64,) * 3]),
    ("127x253x61", [(127, 253, 61)]),
    ("127X253X61", [(127, 253, 61)]),
    ("127×253×61", [(127, 253, 61)]),
    ("127x253x61,61x127x253", [(127, 253, 61), (61, 127, 253)]),
    ("64,33x17x29", [(64, 64, 64), (33, 17, 29)]),
    (f"{MAX_DIM}", [(MAX_DIM,) * 3]),
])
def test_parse_sizes(text, expected):
    assert parse_sizes(text) == expected


def test_duplicates_removed_first_occurrence_order_kept():
    assert parse_sizes("512,256,512,256:1024,8x8x8,8×8×8,8") == [
        (512,) * 3, (256,) * 3, (1024,) * 3, (8, 8, 8)]


@pytest.mark.parametrize("text,message", [
    ("", "no sizes given"),
    (" , ;", "no sizes given"),
    (None, "no sizes given"),
    ("abc", "'abc' in 'abc' is not a whole number"),
    ("256,12a", "'12a' in '12a' is not a whole number"),
    ("2.5", "'2.5' in '2.5' is not a whole number"),
    ("0", "0 in '0' is out of range (1..1048576)"),
    ("-4", "is out of range"),
    (f"{MAX_DIM + 1}", "is out of range"),
    ("1:2:3:4", "range '1:2:3:4' must be start:stop or start:stop:step"),
    ("512:256", "range '512:256' ends before it starts"),
    ("1:64:x1", "a multiplying step must be at least x2"),
    ("1:64:x", "'' in '1:64:x' is not a whole number"),
    ("1:64:0", "out of range"),
    ("1:q:2", "'q' in '1:q:2' is not a whole number"),
    ("8x8", "shape '8x8' must be MxNxK (three numbers)"),
    ("8x8x8x8", "must be MxNxK"),
    ("8x0x8", "0 in '8x0x8' is out of range"),
    ("8xax8", "'a' in '8xax8' is not a whole number"),
    ("1:20000:1", "20000 sizes is too many (at most 10000)"),
])
def test_errors_say_which_part_and_why(text, message):
    with pytest.raises(SizeSpecError) as info:
        parse_sizes(text)
    assert message in str(info.value)
    assert isinstance(info.value, ValueError)      # callers may catch ValueError


def test_format_shape_round_trips():
    for shape in [(64, 64, 64), (127, 253, 61), (1, 1, 1), (1, 2, 1)]:
        text = format_shape(shape)
        assert parse_sizes(text) == [shape]
    assert format_shape((64, 64, 64)) == "64"
    assert format_shape((127, 253, 61)) == "127x253x61"


def test_presets_are_valid_shapes():
    for name, shapes in PRESETS.items():
        assert shapes, name
        spec = ",".join(format_shape(s) for s in shapes)
        assert parse_sizes(spec) == shapes, name
