"""The recipes of docs/connect.md, as the tests run them: a recipe test takes its commands, environment and
code from the document's own text, so the document cannot drift from what works.

In the Markdown, `<!-- recipe: NAME -->` names the fenced block that follows it, and
`<!-- include: PATH -->` says that the block that follows is the file PATH of the repository, verbatim
(tests/e2e/test_recipes.py checks that it still is).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONNECT = ROOT / "docs" / "connect.md"
_BLOCK = r"<!-- {kind}: (?P<name>[^ ]+) -->\n```[a-z]*\n(?P<body>.*?)^```"


def _blocks(kind: str, doc: Path) -> dict[str, str]:
    text = doc.read_text(encoding="utf-8")
    return {m["name"]: m["body"] for m in re.finditer(_BLOCK.format(kind=kind), text, flags=re.S | re.M)}


def recipe(name: str, doc: Path = CONNECT) -> str:
    """The body of the fenced block named `name`."""
    blocks = _blocks("recipe", doc)
    if name not in blocks:
        raise KeyError(f"no recipe {name!r} in {doc} (have: {sorted(blocks)})")
    return blocks[name]


def includes(doc: Path = CONNECT) -> dict[str, str]:
    """path -> the block the document shows as that file."""
    return _blocks("include", doc)


def commands(block: str) -> list[list[str]]:
    """The shell commands of a bash block: comments and `&` dropped, continuation lines joined."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words and words[-1] == "&":
            words.pop()
        if words:
            out.append(words)
    return out


def exports(block: str) -> dict[str, str]:
    """The environment a bash block sets: `export A=1 B=2` lines."""
    env: dict[str, str] = {}
    for words in commands(block):
        if words[0] == "export":
            for assignment in words[1:]:
                key, _, value = assignment.partition("=")
                env[key] = value
    return env


def leading_env(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """`A=1 B=2 cmd args` -> ({A: 1, B: 2}, [cmd, args])."""
    env: dict[str, str] = {}
    i = 0
    while i < len(words) and re.match(r"^[A-Z_][A-Z0-9_]*=", words[i]):
        key, _, value = words[i].partition("=")
        env[key] = value
        i += 1
    return env, words[i:]


def pip_requirements(block: str) -> list[str]:
    """The requirement strings of the `pip install` lines of a block."""
    reqs: list[str] = []
    for words in commands(block):
        if words[:2] == ["pip", "install"]:
            reqs += [w for w in words[2:] if not w.startswith("-")]
    return reqs
