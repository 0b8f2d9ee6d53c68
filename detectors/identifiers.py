"""The numbers a text holds: order numbers, phone numbers, account and ticket numbers, amounts, as keyed hashes; and,
in a text that holds one, the names it writes (`names`, ADR 0033), tagged apart in the same set.

A model that decodes from another request's prompt (KV pages handed to the wrong decode slot, batch results joined by
offset, a pooled connection read by the next request) answers *that* prompt. Its answer restates the other user's
case in its own words, so it shares no passage of 8 units with any text the monitor saw, and content finds nothing.
But an answer keeps the case's numbers as written: "order 38713357", "697,88 грн", "+1-989-449-4163". These are the
words of a text least likely to be written by anyone else: a random number of 7 digits is one of ten million.

An identifier here is a number as written: a word (letters and digits, joined by `- . / , : @ +` without spaces)
with at least `MIN_DIGITS` digits, `MIN_DISTINCT` different ones, and at most one letter per `DIGITS_PER_LETTER`
digits, that is no date or clock time (a date is one of a few thousand, and tenants write today's). Technical names
that hold digits ("sha256", "RFC7230", "blake2s256", "utf-8") are not numbers: a model writes them from what it
knows, for anyone. A word starts at the letters written just before its first digit, so "SO-6607683" and "6607683"
are the same identifier wherever either is written; in scripts written without spaces each character is a word of its
own, so "金额11808元" holds 11808. Each word is NFKC-normalised and case-folded, like fingerprint units (full-width
digits read as digits). Language plays no part: digits are written alike in the scripts this monitor reads.

Read at ingest, where the text is, and kept as keyed 64-bit hashes only (a key of its own, derived from the
fingerprint key): at most `MAX_IDENTIFIERS` distinct ones; a text with more is "unknown" (None), never cut short,
since a prompt's numbers left out would read as another's in its answer. The check that uses them is the mix-up
ledger's (detectors/mixup_ids.py, ADR 0027).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from functools import cache
from itertools import pairwise

from detectors.keyed_words import KeyedWords
from detectors.tokens import NO_SPACE_BLOCKS, normalise
from schemas.events import MAX_IDENTIFIERS

__all__ = ["MAX_IDENTIFIERS", "MAX_NAMES", "Identifiers", "is_name", "names", "words"]

MIN_DIGITS = 5
MIN_DISTINCT = 3
DIGITS_PER_LETTER = 4
# Words holding a digit that a text may hold before it is "unknown": bounds the scan of a text of numbers (a table,
# a log) at a few thousand regex matches, whatever its size.
_MAX_SCAN = 4 * MAX_IDENTIFIERS
# A digit, then letters and digits, then more runs joined by one separator each. Starting at a digit lets the scan skip
# to digits in C (4x faster than starting at a word's first letter); letters written just before it are added after.
# Scripts written without spaces (Chinese, Japanese, Thai...) are no part of a number's word: each of their characters
# is a word of its own there, as fingerprint units have it ("金额11808元" holds the number 11808).
_NS = "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in NO_SPACE_BLOCKS)
_WORD = re.compile(rf"\d(?=\S{{4}})[^\W_{_NS}]*(?:[-./,:@+][^\W_{_NS}]+)*")  # 4 more characters before a space
_LETTER = re.compile(rf"[^\W\d_{_NS}]")
_DIGIT = re.compile(r"\d")
_NOT_DIGIT = re.compile(r"\D+")
_NOT_LETTER = re.compile(r"[\W\d_]+")
# Dates and clock times, in the common written forms (ISO, day-first, month-first, ranges of years): a year of this
# century or the last, a month, a day. An amount such as "1076.88" is no date.
_Y, _M, _D = r"(?:19|20)\d\d", r"(?:0?[1-9]|1[0-2])", r"(?:0?[1-9]|[12]\d|3[01])"
_DATE = re.compile(
    rf"{_Y}[-./]{_M}(?:[-./]{_D}(?:t\d{{1,2}}(?::\d{{2}}){{1,2}}(?:[.,]\d+)?z?)?)?"
    rf"|{_D}[-./]{_M}[-./](?:{_Y}|\d\d)|{_M}[-./]{_D}[-./](?:{_Y}|\d\d)|{_Y}[-/]{_Y}"
    r"|\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
)


def words(text: str) -> list[str] | None:
    """The distinct identifiers of `text`, normalised, in the order first written; None past `MAX_IDENTIFIERS`."""
    if not _DIGIT.search(text):
        return []
    found: dict[str, None] = {}
    scanned = 0
    # The text as written is scanned (normalising all of it cost as much as the scan): each word found is normalised
    # alone, so full-width digits and upper case still read as the same identifier.
    for m in _WORD.finditer(text):
        w = m.group()
        if len(w) < MIN_DIGITS:
            continue
        scanned += 1
        if scanned > _MAX_SCAN:
            return None
        digits = _NOT_DIGIT.sub("", w)  # in C: a Python loop per character was most of the scan
        if len(digits) < MIN_DIGITS or len(set(digits)) < MIN_DISTINCT:
            continue
        head = start = m.start()
        while head > 0 and _LETTER.match(text, head - 1):  # the letters of its word written before it ("sha224/256")
            head -= 1
        w = normalise(text[head:start] + w) if head < start or not w.isascii() else w.lower()
        if w in found or DIGITS_PER_LETTER * len(_NOT_LETTER.sub("", w)) > len(digits) or _DATE.fullmatch(w):
            continue
        found[w] = None
        if len(found) > MAX_IDENTIFIERS:
            return None
    return list(found)


def _ranges(test: Callable[[str], bool]) -> str:
    """A regex character class body of the Basic Multilingual Plane's characters that pass `test`, as ranges."""
    out, lo, prev = [], -2, -2
    for c in range(0x10000):
        if 0xD800 <= c <= 0xDFFF or not test(chr(c)):
            continue
        if c != prev + 1:
            if lo >= 0:
                out.append((lo, prev))
            lo = c
        prev = c
    out.append((lo, prev))
    return "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in out)


@cache
def _name_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A name as written: two or more words of a cased script, each a capital and lower-case letters ("Kristen Reid",
    "Макогон Оксана Панасівна", "Jean-Luc Picard"), one space apart, not inside a longer word; and one such word.
    Built from the Unicode tables (`re` has no letter categories) at the first text with a number, not at import: it
    costs about 0.1 s, which a command that reads no text need not pay."""
    # Modifier letters continue a word as lower-case letters do: Ukrainian writes its apostrophe as one ("Демʼян").
    up = _ranges(lambda c: c.isupper() and c.isalpha())
    lo = _ranges(lambda c: c.isalpha() and (c.islower() or unicodedata.category(c) == "Lm"))
    a = _APOSTROPHES
    cap = rf"(?:[{up}][{a}])?[{up}][{lo}]+(?:[-{a}][{up}]?[{lo}]+)*"  # "O’Brien": a capital and an apostrophe first
    # No look-behind for "not inside a longer word": tried at every character it made the scan 4x slower than this
    # one (12 vs 47 MB/s); the character before a match is checked in `names`, once per match.
    return re.compile(rf"{cap}(?: {cap})+(?![^\W\d_])"), re.compile(cap)


# The apostrophes a name is written with ("O'Brien", "O’Brien", "Дем'ян", "Демʼян"): one name whichever is used.
_APOSTROPHES = "'’ʼ"
_ONE_APOSTROPHE = str.maketrans({"’": "'", "ʼ": "'"})
MAX_NAMES = 16  # name pairs one text may add to its numbers (within MAX_IDENTIFIERS), the first ones written
_MAX_NAME_RUNS = 4 * MAX_NAMES  # bounds the scan of a text of names (a list, a bibliography)
NAME_TAG = 0xA5 << 56  # the top byte of a name's hash: told from a number's by `is_name` (1 number in 256 reads as one)
_TOP = 0xFF << 56


def names(text: str) -> list[str]:
    """The distinct pairs of adjacent words of the names `text` writes, normalised, in the order first written: at most
    `MAX_NAMES`. Pairs, so "Dear Kristen Reid" and "Customer: Kristen Reid" share "kristen reid"."""
    found: dict[str, None] = {}
    name, cap_word = _name_patterns()
    for runs, m in enumerate(name.finditer(text)):
        if runs >= _MAX_NAME_RUNS:
            break
        start = m.start()
        if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
            continue  # the end of a longer word ("McDonald Farm")
        parts = [normalise(w).translate(_ONE_APOSTROPHE) for w in cap_word.findall(m.group())]
        for a, b in pairwise(parts):
            found[f"{a} {b}"] = None
            if len(found) >= MAX_NAMES:
                return list(found)
    return list(found)


def is_name(x: int) -> bool:
    """Whether keyed identifier `x` is a name's (`Identifiers`), not a number's."""
    return x & _TOP == NAME_TAG


class Identifiers(KeyedWords):
    """Keyed hashes of a text's identifiers: its numbers (`words`), then its names (`names`, tagged `NAME_TAG`)."""

    LABEL = b"crosstalk-identifier"
    __slots__ = ()

    def __call__(self, text: str) -> frozenset[int] | None:
        """The keyed identifiers of `text`; None when it holds more than `MAX_IDENTIFIERS` numbers (unknown: not
        checked). In a text with a number, names fill what room the numbers leave, up to `MAX_NAMES`: a name left out
        is only evidence less."""
        found = words(text)
        if not found:
            return None if found is None else frozenset()
        # Names only where a number is: a name counts only beside one (mixup_ids), and the text-rich traffic this
        # monitor reads is mostly texts without numbers, where the scan for names would cost a fifth of the replay.
        keys = set(map(self.keyed, found))  # at most MAX_IDENTIFIERS (`words` says unknown past it): room >= 0
        room = min(MAX_NAMES, MAX_IDENTIFIERS - len(keys))
        for name in names(text)[:room]:
            keys.add(self.keyed("\x00" + name) & ~_TOP | NAME_TAG)  # "\x00": no number's word
        return frozenset(keys)
