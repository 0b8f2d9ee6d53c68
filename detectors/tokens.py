"""Units of text for fingerprinting (scheme winnow-v2): words where words are spaced, characters where not.

A KV page is 16-64 model tokens whatever the language, so a unit must stand for about the same amount
of text in every script. `\\w+` words do that for scripts written with spaces (an English word is about
1.3 tokens) but not for scripts without them: a whole Chinese, Japanese or Thai clause would be one
"word". So:

* Units are cut on the text as written (below), and each unit is then normalised on its own: NFKC
  (full-width Ａ and half-width ｶ become A and カ, ligatures and circled digits are spelled out) and
  case folding (ß and ss, Σ and σ and ς agree), repeated until stable. A unit's identity, and the input
  of its keyed hash, is that normalised form. Invisible format characters (Unicode category Cf: soft
  hyphen, zero-width space and joiners, BOM) are removed first, so they neither split nor join units.
* CHAR: every letter, mark or digit of a script written without word spaces is a unit of its own:
  Han, Hiragana, Katakana, Bopomofo, Hangul, Yi, Thai, Lao, Khmer, Myanmar. Hangul is written with
  spaces, but between eojeol (a word plus its particles, 2-4 model tokens); a syllable is about one
  token, like a Han character, so syllables keep the unit near one token and Korean is guaranteed at
  the same length as Chinese.
* WORD: a maximal run of other letters, marks, digits and `_` (Latin, Cyrillic, Greek, Arabic,
  Devanagari..., digits in any script). Marks belong to the word, so Devanagari vowel signs do not
  split it (Python's `\\w` would).
* Everything else (punctuation, symbols, spaces) separates units and is never part of one.

Mixed text falls out of this: in "用Python写的2024年报告" the units are 用 python 写 的 2024 年 报 告.
For ASCII text the units are exactly `re.findall(r"\\w+", text.lower())`, as in winnow-v1.

Normalising units rather than the whole text costs nothing per occurrence: the fingerprinter caches the
hash by the unit's bytes as written and normalises only a unit it has not seen. Compatibility characters
that NFKC would spell as several units (㍿ → 株式会社, ｶﾞ → ガ) stay one unit (or a separator), and
decomposed (NFD) Hangul jamo are one unit each: both are rare in typed or generated text.

`Units` is the one definition: it finds the units on the folded UTF-8 bytes (numpy, no string per unit);
`words_of` decodes and normalises them, and the fingerprinter hashes the same spans without decoding.
"""

from __future__ import annotations

import functools
import unicodedata
from typing import Any, Final

import numpy as np

SCHEME: Final = "winnow-v2"

SEP, WORD, CHAR, DROP = 0, 1, 2, 3
# Code points at or above this are private use, tags and variation selectors (never units) or planes
# not assigned yet: one table lookup classifies everything below it.
TABLE_END = 0x32400

# Blocks of the scripts written without spaces between words (letters, marks and digits in them are CHAR).
NO_SPACE_BLOCKS = (
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer symbols
    (0x2E80, 0x2FDF),  # CJK and Kangxi radicals
    (0x3005, 0x3007),  # 々 〆 〇
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3031, 0x3035),  # kana repeat marks
    (0x3038, 0x303C),
    (0x3040, 0x30FF),  # Hiragana, Katakana (with ー)
    (0x3100, 0x312F),  # Bopomofo
    (0x3130, 0x318F),  # Hangul compatibility Jamo
    (0x31A0, 0x31BF),  # Bopomofo extended
    (0x31F0, 0x31FF),  # Katakana phonetic extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA000, 0xA4CF),  # Yi
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xA9E0, 0xA9FF),  # Myanmar extended B
    (0xAA60, 0xAA7F),  # Myanmar extended A
    (0xAC00, 0xD7FF),  # Hangul syllables, Jamo extended B
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFFDC),  # half-width Katakana and Hangul (NFKC maps them to full width)
    (0x1AFF0, 0x1B16F),  # Kana extensions
    (0x20000, 0x323AF),  # CJK extensions B-H
)


def _class_table() -> np.ndarray:
    table = np.zeros(TABLE_END, dtype=np.uint8)
    for cp in range(TABLE_END):
        cat = unicodedata.category(chr(cp))
        if cat[0] in "LMN":
            table[cp] = WORD
        elif cat == "Cf":
            table[cp] = DROP
    table[ord("_")] = WORD
    for lo, hi in NO_SPACE_BLOCKS:
        block = table[lo : hi + 1]
        block[block == WORD] = CHAR
    return table


CLASS = _class_table()
_SPACE = 0x20


def normalise(text: str) -> str:
    """NFKC and case folding, repeated until stable (Unicode's NFKC_Casefold, up to its closure)."""
    if text.isascii():
        return text.lower()  # ASCII is NFKC already, and its case folding is lower()
    for _ in range(4):
        s = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
        if s == text:
            break
        text = s
    return text


def _fold_table() -> bytes:
    table = bytearray(range(256))
    for b in range(128):
        c = chr(b)
        table[b] = ord(c.lower()) if (c.isalnum() or c == "_") else _SPACE
    return bytes(table)


# ASCII bytes: word characters lower-cased, every other ASCII byte a space. Bytes >= 0x80 (the parts of
# multi-byte UTF-8 sequences) pass unchanged, so folded UTF-8 is still UTF-8.
FOLD = _fold_table()


class Units:
    """The units of a folded UTF-8 text, found on its bytes (numpy, no string per unit).

    `data` is the folded text (format characters removed) followed by padding; `starts`/`ends` are the
    byte spans of all units in text order, `ischar` tells the CHAR units, whose code points are `chars`.
    """

    __slots__ = ("chars", "data", "ends", "ischar", "starts")

    def __init__(self, data: bytes, n: int) -> None:
        b = np.frombuffer(data, dtype=np.uint8)
        cls = np.zeros(n + 2, dtype=np.uint8)  # SEP sentinels on both ends
        body = cls[1:-1]
        body[:] = b[:n] != _SPACE  # folded ASCII: WORD unless a space
        hi = (b[:n] >= 0x80).nonzero()[0]
        char_starts = char_ends = chars = hi[:0]
        if hi.size:
            # Decode the code point at each lead byte (the padding keeps lead + 3 inside the buffer).
            islead = b[hi] >= 0xC0
            lead = hi[islead]
            bl = b[lead].astype(np.uint32)
            c1 = b[lead + 1] & np.uint32(0x3F)
            c2 = b[lead + 2] & np.uint32(0x3F)
            c3 = b[lead + 3] & np.uint32(0x3F)
            cp = np.where(
                bl < 0xE0,
                ((bl & 0x1F) << 6) | c1,
                np.where(
                    bl < 0xF0, ((bl & 0x0F) << 12) | (c1 << 6) | c2, ((bl & 0x07) << 18) | (c1 << 12) | (c2 << 6) | c3
                ),
            )
            ccls = CLASS[np.minimum(cp, TABLE_END - 1)]  # TABLE_END - 1 is unassigned: SEP
            if (ccls == DROP).any():
                # Invisible format characters vanish: the text around them closes up (soft hyphens).
                keep = np.ones(n, dtype=bool)
                drop = lead[ccls == DROP]
                ln = 2 + (b[drop] >= 0xE0) + (b[drop] >= 0xF0)
                for extra in range(4):
                    sel = drop[ln > extra]
                    keep[sel + extra] = False
                kept = b[:n][keep].tobytes()
                self.__init__(kept + data[n:], len(kept))  # type: ignore[misc]
                return
            body[hi] = ccls[np.cumsum(islead) - 1]  # every byte of a character takes its class
            ischar_lead = ccls == CHAR
            char_starts = lead[ischar_lead]
            chars = cp[ischar_lead]
            blc = bl[ischar_lead]
            char_ends = char_starts + 2 + (blc >= 0xE0) + (blc >= 0xF0)
        isword = cls == WORD
        edges = (isword[1:] != isword[:-1]).nonzero()[0]
        word_starts = edges[0::2]
        word_ends = edges[1::2]
        self.data = data
        self.chars = chars
        if not char_starts.size:
            self.starts, self.ends = word_starts, word_ends
            self.ischar = np.zeros(word_starts.shape[0], dtype=bool)
            return
        if not word_starts.size:
            self.starts, self.ends = char_starts, char_ends
            self.ischar = np.ones(char_starts.shape[0], dtype=bool)
            return
        mark = np.zeros(n, dtype=np.uint8)  # unit starts are disjoint: 1 = a word, 2 = a character
        mark[word_starts] = 1
        mark[char_starts] = 2
        self.starts = mark.nonzero()[0]
        self.ischar = mark[self.starts] == 2
        ends = np.empty(self.starts.shape[0], dtype=np.intp)
        ends[self.ischar] = char_ends
        ends[~self.ischar] = word_ends
        self.ends = ends

    @classmethod
    def of(cls, text: str) -> Units:
        data = text.encode("utf-8", "surrogatepass").translate(FOLD)
        return cls(data + PAD, len(data))

    def raw(self) -> list[str]:
        """The units as written (folded ASCII, otherwise not normalised yet)."""
        data = self.data
        pieces = map(data.__getitem__, map(slice, self.starts.tolist(), self.ends.tolist()))
        return [p.decode("utf-8", "surrogatepass") for p in pieces]


PAD = b" " * 24  # lets unaligned 8-byte reads up to unit start + 16 (and UTF-8 decodes) stay inside


def words_of(text: str) -> list[str]:
    """The units the fingerprints are made of, in text order and normalised (words, and single characters
    of CJK, Thai...). A unit's hash is the keyed hash of exactly this string.

    ASCII fast path: one C pass (bytes.translate) blanks non-word bytes and lower-cases, then split;
    exactly `re.findall(r"\\w+", text.lower())`.
    """
    if text.isascii():
        return text.encode("ascii").translate(FOLD).decode("ascii").split()
    if _UNITS is not None:  # cut and normalised in one native pass (the cached normalisation called from C)
        return _UNITS.units(text, _normalise_unit)  # type: ignore[no-any-return]
    return [u if u.isascii() else _normalise_unit(u) for u in Units.of(text).raw()]


def raw_units(text: str, *, native: bool = True) -> list[str]:
    """`Units.of(text).raw()`: natively (one pass over the str's code points, detectors/_winnow.c) where built."""
    if native and _UNITS is not None:
        return list(_UNITS.units(text))
    return Units.of(text).raw()


# Units repeat (a text has a few thousand distinct characters at most): normalise each once.
_normalise_unit = functools.lru_cache(maxsize=1 << 16)(normalise)


def _native_units() -> object | None:
    """The native extension's unit cutter (`Winnower.units`: no hashing, so no key and no cache), or None."""
    try:
        from detectors import _winnow
    except ImportError:  # built without a C compiler: the numpy path, the same units
        return None
    if not hasattr(_winnow.Winnower, "units"):
        return None
    return _winnow.Winnower(1, 1, CLASS.tobytes(), FOLD, 1, 4096, None)  # a cache it never fills


_UNITS: Any = _native_units()
