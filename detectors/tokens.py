"""Units of text for fingerprinting (scheme winnow-v2): words where words are spaced, characters where not.

A KV page is 16-64 model tokens whatever the language, so a unit must stand for about the same amount
of text in every script. `\\w+` words do that for scripts written with spaces (an English word is about
1.3 tokens) but not for scripts without them: a whole Chinese, Japanese or Thai clause would be one
"word". So:

* Text is normalised first: NFKC (full-width Ａ and ａ and half-width ｶ become A, a and カ; ligatures
  and circled digits are spelled out), then case-folded (ß and ss, Σ and σ and ς agree), then NFKC
  again (case folding can un-normalise). Invisible format characters (Unicode category Cf: soft
  hyphen, zero-width space and joiners, BOM) are dropped, so they neither split nor join units.
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

`unit_spans` is the one definition: `words_of` slices the units out of the normalised text with it,
and the fingerprinter hashes the same spans straight from the encoded bytes (numpy, no unit list).
"""

from __future__ import annotations

import unicodedata

import numpy as np

SCHEME = "winnow-v2"

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
_UTF8_LEN_STEPS = (0x80, 0x800, 0x10000)


def normalise(text: str) -> str:
    """NFKC, case-folded, NFKC again (an approximation of Unicode's NFKC_Casefold)."""
    if text.isascii():
        return text.lower()  # ASCII is NFKC already, and its case folding is lower()
    s = unicodedata.normalize("NFKC", text).casefold()
    return s if s.isascii() else unicodedata.normalize("NFKC", s)


def code_points(s: str) -> tuple[str, np.ndarray, np.ndarray]:
    """`s` (normalised) without its DROP characters, its code points (uint32) and their classes."""
    cps = np.frombuffer(s.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    cls = CLASS[np.minimum(cps, TABLE_END - 1)]  # TABLE_END - 1 is unassigned: SEP
    if (cls == DROP).any():
        keep = cls != DROP
        cps = cps[keep]
        cls = cls[keep]
        s = cps.tobytes().decode("utf-32-le", "surrogatepass")
    return s, cps, cls


def unit_spans(cls: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The units of a classified code point sequence: start and end (exclusive) indices, and which are CHAR.

    Units are disjoint and in text order: a CHAR is one code point, a WORD a maximal run of WORD classes.
    """
    n = cls.shape[0]
    isword = np.zeros(n + 2, dtype=bool)
    np.equal(cls, WORD, out=isword[1:-1])
    ischar = cls == CHAR
    first = isword[1:-1] & ~isword[:-2]
    first |= ischar
    last = isword[1:-1] & ~isword[2:]
    last |= ischar
    starts = first.nonzero()[0]
    ends = last.nonzero()[0]
    ends += 1
    return starts, ends, ischar[starts]


def utf8_offsets(cps: np.ndarray) -> np.ndarray:
    """Byte offset in the UTF-8 encoding of every code point, plus the total length at the end."""
    lens = np.ones(cps.shape[0] + 1, dtype=np.int64)
    lens[-1] = 0
    body = lens[:-1]
    for step in _UTF8_LEN_STEPS:
        body += cps >= step
    out = np.empty(cps.shape[0] + 1, dtype=np.int64)
    out[0] = 0
    np.cumsum(lens[:-1], out=out[1:])
    return out


def _fold_table() -> bytes:
    table = bytearray(range(256))
    for b in range(128):
        c = chr(b)
        table[b] = ord(c.lower()) if (c.isalnum() or c == "_") else 0x20
    return bytes(table)


# ASCII bytes: word characters lower-cased, every other byte a space (only used on ASCII text).
FOLD = _fold_table()


def words_of(text: str) -> list[str]:
    """The units the fingerprints are made of, in text order (words, and single characters of CJK/Thai...).

    ASCII fast path: one C pass (bytes.translate) blanks non-word bytes and lower-cases, then split;
    exactly `re.findall(r"\\w+", text.lower())`.
    """
    if text.isascii():
        return text.encode("ascii").translate(FOLD).decode("ascii").split()
    s, _, cls = code_points(normalise(text))
    starts, ends, _ = unit_spans(cls)
    return list(map(s.__getitem__, map(slice, starts.tolist(), ends.tolist())))
