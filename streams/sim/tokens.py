"""The simulator's token approximation, per script (what "a page of 16–64 tokens" means in each language).

Model tokenisers differ; what matters for a KV-page leak is its size in model tokens, so the simulator
counts text in a documented approximation of them:

- a character of a script written without word spaces (Han, Hiragana, Katakana, Hangul, Thai) ≈ 1 token;
- a word elsewhere (a run of letters/digits/underscore, in code too) ≈ 1.3 tokens.

`units(text)` splits text into those pieces with their spans, so a fragment can be cut at any token
boundary: mid-clause in Chinese or Japanese, mid-sentence elsewhere.
"""

from __future__ import annotations

import math
import re

TOKENS_PER_WORD = 1.3
TOKENS_PER_CJK_CHAR = 1.0
# Scripts without spaces between words: CJK ideographs (+ extension A, compatibility), kana, Hangul, Thai.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u0e00-\u0e7f"
_UNIT = re.compile(rf"([{_CJK}])|[^\W{_CJK}]+")
_CJK_CHAR = re.compile(rf"[{_CJK}]")
_WORD = re.compile(rf"[^\W{_CJK}]+")


def is_cjk(ch: str) -> bool:
    return bool(_CJK_CHAR.match(ch))


def cjk_share(text: str) -> float:
    """Share of the text's token units that are CJK characters."""
    cjk, words = len(_CJK_CHAR.findall(text)), len(_WORD.findall(text))
    return cjk / (cjk + words) if cjk + words else 0.0


def unit_spans(text: str) -> list[tuple[int, int, float]]:
    """(start, end, tokens) of every unit: one CJK character, or one word of any other script."""
    cjk, word = TOKENS_PER_CJK_CHAR, TOKENS_PER_WORD
    return [(m.start(), m.end(), cjk if m.group(1) else word) for m in _UNIT.finditer(text)]


def approx_tokens(text: str) -> int:
    """Approximate model tokens: CJK characters + 1.3 × other words (at least 1 for non-empty text)."""
    cjk, words = len(_CJK_CHAR.findall(text)), len(_WORD.findall(text))
    return max(1 if text else 0, math.ceil(cjk * TOKENS_PER_CJK_CHAR + words * TOKENS_PER_WORD))


def cut(
    text: str, start_unit: int, tokens: float, spans: list[tuple[int, int, float]] | None = None
) -> tuple[str, float, int]:
    """The shortest fragment of at least `tokens` tokens (or to the end) from unit `start_unit`:
    (text, tokens, units). `spans` = unit_spans(text) when the caller has them.

    The cut ignores sentence and clause boundaries on purpose: a stale KV page ends where the page ends.
    """
    if spans is None:
        spans = unit_spans(text)
    acc, i = 0.0, start_unit
    while i < len(spans) and acc < tokens:
        acc += spans[i][2]
        i += 1
    if i == start_unit:
        return "", 0.0, 0
    return text[spans[start_unit][0] : spans[i - 1][1]], acc, i - start_unit
