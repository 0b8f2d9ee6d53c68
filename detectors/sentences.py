"""Whole-sentence prints: a keyed hash of each sentence of a text, and where each sentence ends in units.

What they are for (docs/adr/0008, decision 8). A KV page is a run of tokens the engine cut at a fixed count,
blind to sentences: a stale page, a page spliced into an answer, a prefix that another prompt continues all
start and end wherever the page boundary fell. A model that writes a text it knows (a quote, a licence, a
sentence of documentation some tenant also pasted) writes it in whole sentences. So a content-only match whose
every output sentence it touches is also a whole sentence of the source's text is what an echo looks like, and
what a page rarely does: both ends of the page would have to fall on sentence boundaries in the source, and
the page be spliced in at a sentence boundary of the answer.

Only a sentence proper counts: one that ends in `.`, `!`, `?` or a CJK full stop (before closing quotes or
brackets). A piece cut only by a line break or the end of the text (a line of code, a list item, a heading, a
paragraph that stops mid-thought) hashes to 0 and is never a whole sentence: lines are short against winnowing's
edge slack (up to w - 1 units of a page's ends go unseen), so a page of whole-looking lines proves nothing, and
measured on our simulator a page of code lines or a paragraph leaked whole looked like an echo otherwise.

Sentences are cut on the raw text after `.`, `!` or `?` followed by white space, the end, or a character
outside ASCII (a Japanese answer after an English quote), after the CJK full stops `。．｡！？` anywhere, and at
line breaks. Units never cross those cuts (a unit is a run of word characters, or one CJK character), so the
sentences' units, in order, are the text's units; a sentence's hash is the keyed hash of its units, so the
same sentence re-spaced, re-cased or in full-width characters hashes the same. Nothing of the text is kept:
the hashes reveal nothing without the key, and the ends say only how long the sentences are.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator

__all__ = [
    "MAX_SENTENCES",
    "SentencePrint",
    "checked",
    "extend",
    "pieces",
    "sentence_print",
    "split_sentences",
    "whole",
]

# Bounded per text: a text of a million line breaks would otherwise cost a hash each. Past the bound the rest
# of the text has no sentences, and a match there is never taken for an echo (`whole`).
MAX_SENTENCES = 2_048

_CUT = re.compile(r"(?<=[.!?])(?=\s|$|[^\x00-\x7f])|(?<=[。．｡！？])|\n")

# What ends a sentence proper, and the closing quotes and brackets that may follow it.
_ENDS = (".", "!", "?", "。", "．", "｡", "！", "？")
_CLOSERS = "\"'”’»」』)）]】"
# (sentence hashes, unit offset where each sentence ends: exclusive, strictly increasing)
SentencePrint = tuple[list[int], list[int]]


def split_sentences(text: str) -> list[str]:
    """The text's sentences, raw but stripped, in order (empty pieces dropped)."""
    return [text[a:b].strip() for a, b in pieces(text) if not text[a:b].isspace()]


def pieces(text: str, start: int = 0) -> Iterator[tuple[int, int]]:
    """(start, end) of each sentence of `text` from `start` (a sentence start) on: the same cuts as over the whole
    text (a search from `start` still sees the characters before it)."""
    a = start
    for m in _CUT.finditer(text, start):
        b = m.start()
        if b > a:
            yield a, b
        a = m.end()
    if len(text) > a:
        yield a, len(text)


def extend(
    text: str, start: int, hashes: list[int], ends: list[int], units_of: Callable[[str], list[str]], key: bytes
) -> tuple[int, int]:
    """Append the sentences of `text` from `start` (a sentence start, with `hashes` and `ends` those before it) to
    `hashes` and `ends`. Returns where the last sentence starts and how many sentences come before it: the text's
    last sentence may go on in a longer text that continues this one (a session's next turn), so that is where
    the next call resumes."""
    resume, before = start, len(hashes)
    at = ends[-1] if ends else 0
    for a, b in pieces(text, start):
        resume, before = a, len(hashes)
        if len(hashes) >= MAX_SENTENCES:
            break
        units = units_of(text[a:b])
        if not units:
            continue
        at += len(units)
        if text[a:b].rstrip().rstrip(_CLOSERS).endswith(_ENDS):
            digest = hashlib.blake2b("\x1f".join(units).encode(), key=key, digest_size=8).digest()
            hashes.append(int.from_bytes(digest, "little") or 1)
        else:
            hashes.append(0)  # a line, a heading, a cut-off paragraph: no sentence (`whole`)
        ends.append(at)
    return resume, before


def sentence_print(text: str, units_of: Callable[[str], list[str]], key: bytes, words: int) -> SentencePrint | None:
    """The whole-sentence print of `text` (of `words` units): each sentence with at least one unit, hashed over its
    units with `key`; None when the sentences' units do not add up to the text's (a unit straddling a cut: then
    nothing is claimed)."""
    hashes: list[int] = []
    ends: list[int] = []
    extend(text, 0, hashes, ends, units_of, key)
    return checked(hashes, ends, words)


def checked(hashes: list[int], ends: list[int], words: int) -> SentencePrint | None:
    """The print if its units add up to the text's `words` (at most, when it holds `MAX_SENTENCES`), else None."""
    at = ends[-1] if ends else 0
    if at == words or (len(hashes) >= MAX_SENTENCES and at <= words):
        return hashes, ends
    return None


def whole(sp: SentencePrint, first: int, last: int, source: set[int] | frozenset[int]) -> bool:
    """Whether every sentence of the output that units `first`..`last` touch is a whole sentence of the source
    (its hash in `source`). False where the span reaches past the sentences the print holds."""
    hashes, ends = sp
    start = 0
    touched = False
    for h, end in zip(hashes, ends, strict=True):
        if end > first:
            if start > last:
                return touched
            if not h or h not in source:
                return False
            touched = True
        start = end
    return touched and start > last
