"""Parsing size specifications: ``256,512``, ``256:4096:x2``, ``128:512:128``, ``127x253x61``.

A bare number ``n`` is the square problem M = N = K = n. A shape ``MxNxK`` gives C's
rows (M), C's columns (N) and the inner dimension (K): A is M×K and B is K×N.
"""
from __future__ import annotations

import re

Shape = tuple[int, int, int]
MAX_DIM = 1 << 20
#: Shapes beyond square powers of two (issue 11, benchmarks/shapes.py): square and
#: ragged, odd sizes (nothing a multiple of 4), flat K, tall and wide panels, skinny
#: panels and matrix-vector products (M or N ≤ 64, where bandwidth decides).
SHAPE_SUITE: list[Shape] = [
    (1024, 1024, 1024), (1000, 1000, 1000), (1536, 1536, 1536), (3000, 3000, 3000),
    (4096, 4096, 4096), (4100, 4090, 4095), (8192, 8192, 8192), (8192, 8192, 256),
    (12288, 1024, 4096), (1024, 12288, 4096), (64, 4096, 4096), (16, 8192, 8192),
    (1, 8192, 8192), (8192, 1, 8192),
]
PRESETS: dict[str, list[Shape]] = {
    "powers of two 128–4096": [(n, n, n) for n in (128, 256, 512, 1024, 2048, 4096)],
    "shape suite (odd, flat, skinny, GEMV)": SHAPE_SUITE,
    "seed table 16/160/1600": [(n, n, n) for n in (16, 160, 1600)],
    "seed table 1024/2048/4096": [(n, n, n) for n in (1024, 2048, 4096)],
    "odd shapes": [(127, 253, 61), (61, 127, 253), (253, 61, 127)],
}


class SizeSpecError(ValueError):
    """A size text that cannot be read; the message says which part and why."""


def _short(text: str, limit: int = 24) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _dim(text: str, whole: str) -> int:
    digits = text.strip()
    if not re.fullmatch(r"[+-]?[0-9]+", digits):      # ASCII digits only: int() takes others too
        raise SizeSpecError(f"'{_short(text)}' in '{_short(whole, 40)}' is not a whole number")
    if len(digits.lstrip("+-0")) > 9 or not 1 <= int(digits) <= MAX_DIM:
        raise SizeSpecError(f"{_short(digits)} in '{_short(whole, 40)}' is out of range (1..{MAX_DIM})")
    return int(digits)


#: The most sizes one specification may give.
MAX_SIZES = 10000


def parse_sizes(text: str) -> list[Shape]:
    """Turn a size specification into a list of (M, N, K) shapes, in order, no duplicates.

    Examples
    --------
    >>> parse_sizes("256,512")
    [(256, 256, 256), (512, 512, 512)]
    >>> parse_sizes("256:1024:x2")
    [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024)]
    >>> parse_sizes("127x253x61")
    [(127, 253, 61)]
    """
    shapes: list[Shape] = []
    parts = [p.strip() for p in re.split(r"[,\s;]+", text or "") if p.strip()]
    if not parts:
        raise SizeSpecError("no sizes given")
    for part in parts:
        low = part.lower().replace("×", "x")
        if ":" in low:
            bits = low.split(":")
            if len(bits) not in (2, 3):
                raise SizeSpecError(f"range '{part}' must be start:stop or start:stop:step")
            start, stop = _dim(bits[0], part), _dim(bits[1], part)
            step = bits[2] if len(bits) == 3 else "x2"
            if stop < start:
                raise SizeSpecError(f"range '{part}' ends before it starts")
            if step.startswith("x") or step.startswith("*"):
                factor = _dim(step[1:], part)
                if factor < 2:
                    raise SizeSpecError(f"range '{part}': a multiplying step must be at least x2")
                v = start
                while v <= stop:
                    shapes.append((v, v, v))
                    v *= factor
            else:
                inc = _dim(step, part)
                if (stop - start) // inc + 1 + len(shapes) > MAX_SIZES:   # before expanding it
                    raise SizeSpecError(f"{(stop - start) // inc + 1 + len(shapes)} sizes is too many "
                                        f"(at most {MAX_SIZES}): range '{part}'")
                shapes.extend((v, v, v) for v in range(start, stop + 1, inc))
        elif "x" in low:
            dims = low.split("x")
            if len(dims) != 3:
                raise SizeSpecError(f"shape '{part}' must be MxNxK (three numbers)")
            m, n, k = (_dim(d, part) for d in dims)
            shapes.append((m, n, k))
        else:
            v = _dim(low, part)
            shapes.append((v, v, v))
    seen: set[Shape] = set()
    out = []
    for s in shapes:
        if s not in seen:
            seen.add(s)
            out.append(s)
    if len(out) > MAX_SIZES:
        raise SizeSpecError(f"{len(out)} sizes is too many (at most {MAX_SIZES})")
    return out


def format_shape(shape: Shape) -> str:
    m, n, k = shape
    return str(m) if m == n == k else f"{m}x{n}x{k}"
