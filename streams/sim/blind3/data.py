"""The vendored text (data/*.json.xz, built by build_data.py), read once per process."""

from __future__ import annotations

import lzma
from functools import cache
from pathlib import Path
from typing import Any

import orjson

DATA = Path(__file__).with_name("data")


@cache
def load(name: str) -> Any:
    return orjson.loads(lzma.decompress((DATA / f"{name}.json.xz").read_bytes()))


def entities(lang: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = load("entities")[lang]
    return out


def dialogs(lang: str) -> list[list[str]]:
    out: list[list[str]] = load("dialogs").get(lang, [])
    return out


def ui_strings(lang: str) -> list[list[str]]:
    out: list[list[str]] = load("ui_strings").get(lang, [])
    return out


@cache
def code_chunks(crate: str) -> tuple[tuple[str, str], ...]:
    """A crate's source cut at blank lines into pieces of 12 to 60 lines: what a developer pastes."""
    out: list[tuple[str, str]] = []
    for path, text in load("code")[crate]:
        if not path.endswith(".rs"):
            continue
        lines = text.splitlines()
        start = 0
        for i, line in enumerate(lines):
            if (not line.strip() and i - start >= 12) or i - start >= 60:
                piece = "\n".join(lines[start:i]).strip("\n")
                if piece.count("\n") >= 8:
                    out.append((path, piece))
                start = i + 1
    return tuple(out)


@cache
def readme_passages() -> tuple[tuple[str, str], ...]:
    """The crates' README paragraphs of some length: public documents a RAG tenant retrieves."""
    out: list[tuple[str, str]] = []
    for crate, files in sorted(load("code").items()):
        for path, text in files:
            if path == "README.md":
                for para in text.split("\n\n"):
                    if len(para) >= 160 and not para.lstrip().startswith(("[", "<", "!")):
                        out.append((crate, para.strip()))
    return tuple(out)
