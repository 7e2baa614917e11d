"""engine/ is a library whose sub-packages stack one way (issue 36): profile → run →
results → inputs → measure → kernels → common, with no import cycle between modules
(imports inside functions count too), and nothing in engine/ imports the front ends
(cli/, gui/) or Qt. The graph is read from the sources, so a new import that breaks the
order fails here."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The floors, top first: a package may import only packages below it.
LAYERS = ("profile", "run", "results", "inputs", "measure", "kernels", "common")


def engine_modules() -> dict[str, Path]:
    out = {}
    for p in (ROOT / "engine").rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def imports_of(path: Path) -> set[str]:
    """Every module named by an import statement anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import (write engine.… in full)"
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def graph() -> dict[str, set[str]]:
    mods = engine_modules()
    return {m: {t for t in imports_of(p) if t in mods and t != m} for m, p in mods.items()}


def floor(module: str) -> str:
    return module.split(".")[1] if module.count(".") >= 1 else ""


def test_engine_modules_form_no_import_cycle():
    edges, seen, done = graph(), set(), set()

    def visit(m, path):
        if m in path:
            raise AssertionError("import cycle: " + " → ".join(path[path.index(m):] + [m]))
        if m in done:
            return
        for t in sorted(edges[m]):
            visit(t, path + [m])
        done.add(m)

    for m in sorted(edges):
        visit(m, [])


def test_engine_floors_import_only_downwards():
    wrong = []
    for m, targets in graph().items():
        for t in targets:
            a, b = floor(m), floor(t)
            if a and b and a != b and (a not in LAYERS or b not in LAYERS
                                       or LAYERS.index(b) < LAYERS.index(a)):
                wrong.append(f"{m} imports {t}")
    assert not wrong, wrong


def test_engine_never_imports_the_front_ends_or_qt():
    bad = []
    for m, p in engine_modules().items():
        for t in imports_of(p):
            top = t.split(".")[0]
            if top in ("cli", "gui", "PySide6", "PyQt5", "PyQt6", "pyqtgraph"):
                bad.append(f"{m} imports {t}")
    assert not bad, bad
