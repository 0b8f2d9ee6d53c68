"""Sizes of the product code (issue 27, item 5): no module over 500 lines, no function over 80.

A module that outgrows the bound holds two subjects, and a function that does holds several steps; both are
split where the data's path splits (CONTRIBUTING.md, "the map of the core"). The native extension's C files
count as modules. Tests, scripts and benchmarks are not product code."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("detectors", "schemas", "streams")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    out = [p for root in PRODUCT for p in sorted((ROOT / root).rglob("*.py"))]
    out += sorted((ROOT / "detectors").glob("_winnow*.[ch]"))
    return [p for p in out if "__pycache__" not in p.parts]


def test_no_module_is_over_the_bound() -> None:
    modules = _modules()
    assert len(modules) > 50  # the walk found the product, not an empty tree
    sizes = {str(p.relative_to(ROOT)): len(p.read_text("utf-8").splitlines()) for p in modules}
    long = {name: n for name, n in sizes.items() if n > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_is_over_the_bound() -> None:
    long: dict[str, int] = {}
    for path in _modules():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.name}"] = lines
    assert long == {}
