"""The shell reads no private attribute of the core's objects (issue 41, "state describes itself").

`streams/kafka/pieces.py` read `joiner._requests` and `joiner._responses`, and the domain stage
`table._flushed`: the shell then breaks whenever the core renames what it keeps inside. A private attribute of the
core is any `self._name` a class in detectors/ assigns; the shell may not read `x._name` of another object unless
the shell itself has a `self._name` of that name (its own objects: a lock, a stop flag).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _own(tree: ast.AST) -> set[str]:
    """Private attribute names a module assigns on `self`."""
    out = set()
    for node in ast.walk(tree):
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for t in targets:
            for sub in ast.walk(t):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                    and sub.attr.startswith("_")
                    and not sub.attr.startswith("__")
                ):
                    out.add(sub.attr)
    return out


def _trees(folder: Path) -> dict[Path, ast.AST]:
    return {p: ast.parse(p.read_text(), str(p)) for p in sorted(folder.rglob("*.py"))}


def private_reads(root: Path) -> list[str]:
    core = set().union(*(_own(t) for t in _trees(root / "detectors").values()))
    shell = _trees(root / "streams")
    shells_own = set().union(*(_own(t) for t in shell.values()))
    out = []
    for path, tree in shell.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in core
                and node.attr not in shells_own
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                out.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
    return out


def test_the_shell_reads_no_private_attribute_of_the_core() -> None:
    assert private_reads(ROOT) == []


def test_the_check_sees_a_private_read(tmp_path: Path) -> None:
    (tmp_path / "detectors").mkdir()
    (tmp_path / "detectors" / "join.py").write_text("class J:\n    def __init__(self):\n        self._requests = {}\n")
    (tmp_path / "streams").mkdir()
    (tmp_path / "streams" / "pieces.py").write_text("def f(joiner):\n    return joiner._requests\n")
    assert private_reads(tmp_path) == ["streams/pieces.py:2 ._requests"]
