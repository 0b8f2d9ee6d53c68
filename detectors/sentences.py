"""Whole-sentence prints: a keyed hash of each sentence of a text and, for an output, where its pieces end in units.

What they are for (docs/adr/0008, decision 8). A KV page is a run of tokens the engine cut at a fixed count,
blind to sentences: a stale page, a page spliced into an answer, a prefix that another prompt continues all
start and end wherever the page boundary fell. A model that writes a text it knows (a quote, a licence, a
sentence of documentation some tenant also pasted) writes it in whole sentences. So a content-only match whose
every output sentence it touches is also a whole sentence of the source's text is what an echo looks like, and
what a page rarely does: both ends of the page would have to fall on sentence boundaries in the source, and
the page be spliced in at a sentence boundary of the answer.

Pieces are cut after `.`, `!` or `?` followed by white space, a character outside ASCII (a Japanese answer after an
English quote) or the end, with the ASCII closing quotes and brackets that follow the stop (`."`, `.)`); after the
CJK stops `。．｡！？`; and at line breaks (dropped), except inside a hard-wrapped sentence: a line that ends in no stop,
followed by one that starts (past spaces and tabs) with a lowercase letter, goes on as one piece, so the same
sentence wrapped at another width, or not at all, hashes the same. Only a sentence proper counts: a piece a stop
ended, or whose last character before its line break or the end that is no white space, closing quote or bracket
(format characters vanish, as in units) is a stop. A line of code, a list item, a heading, a paragraph that stops
mid-thought is no sentence: lines are short against winnowing's edge slack (up to w - 1 units of a page's ends go
unseen), so a page of whole-looking lines proves nothing, and measured on our simulator a page of code lines or a
paragraph leaked whole looked like an echo otherwise.

A sentence's hash mixes the keyed hashes of its units (the fingerprints' own units: words, or CJK characters,
normalised), so the same sentence re-spaced, re-cased or in full-width characters hashes the same, and without the
key the hash says nothing. A source keeps the hashes of its sentences proper (`source_hashes`); an output also
needs where each of its pieces ends in units, to find the pieces a run touches (`sentence_print`: one entry per
piece with units, 0 for a piece that is no sentence). Nothing of the text is kept. The native extension does it
in the fingerprinter's own pass over the code points (detectors/_winnow_sentences.h); `_reference` here is the
same computation, and the path without it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from detectors.tokens import CLASS, DROP, FOLD, SEP, TABLE_END, WORD, words_of

__all__ = ["MAX_SENTENCES", "SentencePrint", "Sentences", "split_sentences", "whole"]

# Bounded per text: a text of a million line breaks would otherwise cost a hash each. Past the bound the rest
# of the text has no sentences, and a match there is never taken for an echo (`whole`).
MAX_SENTENCES = 2_048

# (a hash per piece with units, 0 where the piece is no sentence; the unit offset where each piece ends, exclusive
# and strictly increasing, or None for a source's print, which lists its sentences proper alone)
SentencePrint = tuple[list[int], list[int] | None]

_MASK = (1 << 64) - 1
_MUL = 0x9E3779B97F4A7C15
_STOPS_ASCII = frozenset(".!?")
_STOPS_CJK = frozenset("。．｡！？")
_CLOSERS = frozenset("\"')]”’»」』）】")


def _final(h: int, n: int) -> int:
    f = h ^ ((n * 0xC2B2AE3D27D4EB4F) & _MASK)
    f ^= f >> 33
    f = (f * 0xFF51AFD7ED558CCD) & _MASK
    f ^= f >> 33
    return f or 1


def _wrapped(text: str, j: int) -> bool:
    """Whether the line from `j` on starts, past spaces and tabs, with a lowercase letter; also when the text ends
    first: the end closes the piece as the cut would, and a session's next turn, which resumes at the last piece's
    start, decides it."""
    n = len(text)
    while j < n and text[j] in " \t":
        j += 1
    return j >= n or text[j].islower()


def _cuts(text: str, start: int) -> list[tuple[int, int, bool]]:
    """(start, end, sentence proper) of each piece of `text` from `start` on (the native loop's cuts)."""
    out: list[tuple[int, int, bool]] = []
    piece, pending, last = start, False, ""
    for i in range(start, len(text)):
        c = text[i]
        if pending and not (c in _CLOSERS and c < "\x80"):  # `."` `.)`: the character after the closer decides
            pending = False
            if c.isspace() or ord(c) >= 0x80:
                out.append((piece, i, True))
                piece, last = i, ""
        cp = ord(c)
        cls = (WORD if FOLD[cp] != 0x20 else SEP) if cp < 0x80 else CLASS[min(cp, TABLE_END - 1)]
        if cls == DROP:
            continue
        if cls != SEP:
            last = c
        elif c == "\n":
            stop = last in _STOPS_ASCII or last in _STOPS_CJK
            if last and not stop and _wrapped(text, i + 1):
                continue  # a hard-wrapped sentence goes on past its line break
            out.append((piece, i, stop))
            piece, last = i + 1, ""
        elif c in _STOPS_CJK:
            out.append((piece, i + 1, True))
            piece, last = i + 1, ""
        elif c in _STOPS_ASCII:
            last, pending = c, True
        elif not c.isspace() and c not in _CLOSERS:
            last = c
    if pending:
        out.append((piece, len(text), True))
        piece, last = len(text), ""
    out.append((piece, len(text), last in _STOPS_ASCII or last in _STOPS_CJK))
    return out


def _reference(
    text: str, unit_hashes: Callable[[list[str]], Any], start: int, with_ends: bool
) -> tuple[list[int], list[int] | None, int, int]:
    """The native `Winnower.sentences`, in Python: (hashes, ends or None, where the last piece starts, how many
    hashes come before it)."""
    hashes: list[int] = []
    ends: list[int] | None = [] if with_ends else None
    at = 0
    cuts = _cuts(text, start)
    last_start, before = cuts[-1][0], 0
    for i, (a, b, proper) in enumerate(cuts):
        if len(hashes) >= MAX_SENTENCES:
            return hashes, ends, a, len(hashes)
        if i == len(cuts) - 1:
            before = len(hashes)
        units = words_of(text[a:b])
        if not units:
            continue
        at += len(units)
        if ends is None and not proper:
            continue
        h = 0
        if proper:
            for v in unit_hashes(units):
                h = (h * _MUL + int(v)) & _MASK
            h = _final(h, len(units))
        hashes.append(h)
        if ends is not None:
            ends.append(at)
    return hashes, ends, last_start, before


class Sentences:
    """Whole-sentence prints with one fingerprinter's unit hashes (its `native` Winnower, or its pure word hashes)."""

    def __init__(self, native: Any, hash_fn: Callable[[bytes], int], unit_hashes: Callable[[list[str]], Any]) -> None:
        self._native = native
        self._hash_fn = hash_fn
        self._unit_hashes = unit_hashes

    def _run(self, text: str, start: int, with_ends: bool) -> tuple[list[int], list[int] | None, int, int]:
        if self._native is not None:
            return self._native.sentences(text, self._hash_fn, start, with_ends)  # type: ignore[no-any-return]
        return _reference(text, self._unit_hashes, start, with_ends)

    def source_hashes(self, text: str, start: int = 0) -> tuple[list[int], int, int]:
        """The hashes of the sentences proper of `text` from `start` (a piece start) on, at most `MAX_SENTENCES`;
        where its last piece starts, and how many of the hashes come before it. The last piece may go on in a
        longer text that continues this one (a session's next turn): that is where the next call resumes."""
        hashes, _, last, before = self._run(text, start, False)
        return hashes, last, before

    def output_print(self, text: str, words: int) -> SentencePrint | None:
        """An output's print (of `words` units): per piece with units, its hash if it is a sentence proper (else 0)
        and where it ends in units; None when the pieces' units do not add up to the text's."""
        hashes, ends, _, _ = self._run(text, 0, True)
        assert ends is not None
        at = ends[-1] if ends else 0
        if at == words or (len(hashes) >= MAX_SENTENCES and at <= words):
            return hashes, ends
        return None


def split_sentences(text: str) -> list[str]:
    """The text's pieces, stripped, in order (empty pieces dropped): what the prints are made of, for reading."""
    return [s for a, b, _ in _cuts(text, 0) if (s := text[a:b].strip())]


def whole(sp: SentencePrint, first: int, last: int, source: set[int] | frozenset[int]) -> bool:
    """Whether every piece of the output that units `first`..`last` touch is a sentence proper and a whole sentence
    of the source (its hash in `source`). False where the span reaches past the pieces the print holds, or the
    print has no positions."""
    hashes, ends = sp
    if ends is None:
        return False
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
