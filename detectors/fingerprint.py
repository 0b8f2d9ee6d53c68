"""Keyed winnowing fingerprints (Schleimer, Wilkerson, Aiken: "Winnowing", SIGMOD 2003).

Text is normalised to lower-cased `\\w+` words, so re-spaced, re-wrapped or lower-cased copies
fingerprint the same. Each word gets a keyed 64-bit hash (blake2b with the secret), k consecutive
word hashes combine into a k-gram hash, and in every window of w consecutive k-grams the minimum
(rightmost on ties) is selected. Guarantee: any passage of at least t = k + w - 1 words shared by two
texts yields at least one shared fingerprint, because the window lying inside the passage has the
same contents, hence the same selection, in both. Density is about 2 / (w + 1) fingerprints per word.

Without the key the hashes reveal nothing about the words, so stored state does not leak text.
This module is also the producer-side helper: gateways fingerprint at the edge with the same
parameters and send `prompt_fingerprint` / `output_fingerprint` instead of text.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from detectors.exchange import TextPrint
from schemas.events import Fingerprint

SCHEME = "winnow-v1"
_WORD = re.compile(r"\w+")
# Odd multiplier for the polynomial k-gram combination; arithmetic wraps modulo 2**64 on purpose.
_BASE = np.uint64(0x9E3779B97F4A7C15)
_MIX = np.uint64(0xBF58476D1CE4E5B9)
_WORD_CACHE_MAX = 2_000_000


def _fold_table() -> bytes:
    table = bytearray(range(256))
    for b in range(128):
        c = chr(b)
        table[b] = ord(c.lower()) if (c.isalnum() or c == "_") else 0x20
    return bytes(table)


# ASCII bytes: word characters lower-cased, every other ASCII byte a space. Bytes >= 0x80 (the parts
# of multi-byte UTF-8 sequences) pass unchanged, so a translated UTF-8 text still decodes.
_FOLD = _fold_table()


def words_of(text: str) -> list[str]:
    """The normalised words the fingerprints are made of: `re.findall(r"\\w+", text.lower())`, exactly.

    Fast path: one C pass (bytes.translate) replaces ASCII non-word characters by spaces and lower-cases
    ASCII letters, then str.split. The result is exactly the regex's, since a whitespace or ASCII non-word
    character is never a word character. Pieces containing non-ASCII characters (rare in code and English)
    go through the Unicode-aware regex, after the whole text was lower-cased as before, so Unicode texts
    give the same words as ever (including context-dependent lower-casing such as the final sigma).
    """
    if text.isascii():
        return text.encode("ascii").translate(_FOLD).decode("ascii").split()
    low = text.lower()
    pieces = low.encode("utf-8", "surrogatepass").translate(_FOLD).decode("utf-8", "surrogatepass").split()
    if low.isascii():
        return pieces
    out: list[str] = []
    findall = _WORD.findall
    for piece in pieces:
        if piece.isascii():
            out.append(piece)
        else:
            out.extend(findall(piece))
    return out


def key_id_of(key: str) -> str:
    """A public id of the secret, so fingerprints made with another key can be told apart."""
    return hashlib.blake2b(b"crosstalk-key-id", key=key.encode()[:64], digest_size=6).hexdigest()


class Fingerprinter:
    def __init__(self, key: str, k: int, w: int) -> None:
        if k < 1 or w < 1:
            raise ValueError("k and w must be positive")
        self.k = k
        self.w = w
        self._key = key.encode()[:64]
        self.key_id = key_id_of(key)
        # Distinct words are few compared with word occurrences; caching their keyed hash is the
        # difference between hashing every occurrence and hashing the vocabulary once.
        self._cache: dict[str, int] = {}
        self._hasher = hashlib.blake2b(key=self._key, digest_size=8)
        self._powers = np.array([int(_BASE) ** (k - 1 - j) % 2**64 for j in range(k)], dtype=np.uint64)

    @property
    def guarantee_words(self) -> int:
        """t: the shortest shared passage that is certain to share a fingerprint."""
        return self.k + self.w - 1

    def _word_hash(self, word: str) -> int:
        h = self._hasher.copy()  # the keyed state, copied: cheaper than keying a new hash per word
        h.update(word.encode("utf-8", "surrogatepass"))
        return int.from_bytes(h.digest(), "little")

    def word_hashes(self, words: list[str]) -> np.ndarray:
        cache = self._cache
        try:
            # Warm path: every word known, one C-level pass (map + fromiter), no Python loop.
            return np.fromiter(map(cache.__getitem__, words), dtype=np.uint64, count=len(words))
        except KeyError:
            pass
        missing = set(words).difference(cache)
        if len(cache) + len(missing) > _WORD_CACHE_MAX:
            cache.clear()
            missing = set(words)
        word_hash = self._word_hash
        for wd in missing:
            cache[wd] = word_hash(wd)
        return np.fromiter(map(cache.__getitem__, words), dtype=np.uint64, count=len(words))

    def kgram_hashes(self, wh: np.ndarray) -> np.ndarray:
        n = wh.shape[0] - self.k + 1
        if n <= 0:
            return np.empty(0, dtype=np.uint64)
        with np.errstate(over="ignore"):
            acc = wh[0:n] * self._powers[0]
            for j in range(1, self.k):
                acc += wh[j : j + n] * self._powers[j]
            # Final avalanche so that the selection (a minimum) does not favour particular words.
            acc ^= acc >> np.uint64(31)
            acc *= _MIX
            acc ^= acc >> np.uint64(29)
        return acc

    def _selected(self, kg: np.ndarray) -> list[int]:
        """Winnowing: the minimum of every window of w consecutive k-grams, each value once, in text order.

        Text order matters downstream: a leaked passage shows up as a run of consecutive matches.
        Only values are reported, so which of equal minima a window selects (the rightmost, in the
        paper) cannot change the result; the selected positions are non-decreasing, hence the order of
        first selection is the order of first appearance among the window minima.
        """
        n = kg.shape[0]
        if n == 0:
            return []
        if n <= self.w:
            return [int(kg.min())]
        m = n - self.w + 1
        mins = kg[0:m].copy()
        for j in range(1, self.w):  # w contiguous, vectorised passes beat argmin over a strided view
            np.minimum(mins, kg[j : j + m], out=mins)
        # Consecutive windows mostly share their minimum: drop repeats in numpy, the rest in a dict.
        change = np.empty(m, dtype=bool)
        change[0] = True
        np.not_equal(mins[1:], mins[:-1], out=change[1:])
        return list(dict.fromkeys(mins[change].tolist()))

    def winnow(self, kg: np.ndarray) -> np.ndarray:
        """Selected fingerprints of a k-gram hash sequence, in text order, each hash once."""
        return np.array(self._selected(kg), dtype=np.uint64)

    def fingerprint_words(self, words: list[str]) -> np.ndarray:
        return self.winnow(self.kgram_hashes(self.word_hashes(words)))

    def print_words(self, words: list[str]) -> TextPrint:
        """The fingerprints of already normalised words (words_of), as a TextPrint."""
        hashes = self._selected(self.kgram_hashes(self.word_hashes(words)))
        # Our own output is valid by construction: skip re-validating every hash.
        return TextPrint.model_construct(hashes=hashes, words=len(words))

    def print_text(self, text: str) -> TextPrint:
        return self.print_words(words_of(text))

    def fingerprint(self, text: str) -> Fingerprint:
        """The wire form, for producers that fingerprint at the edge and never send text."""
        tp = self.print_text(text)
        return Fingerprint(scheme=SCHEME, k=self.k, w=self.w, key_id=self.key_id, words=tp.words, hashes=tp.hashes)

    def check(self, fp: Fingerprint) -> str | None:
        """Why a precomputed fingerprint cannot be used here, or None if it can."""
        if fp.scheme != SCHEME:
            return f"scheme {fp.scheme!r} != {SCHEME!r}"
        if (fp.k, fp.w) != (self.k, self.w):
            return f"made with k={fp.k}, w={fp.w}; this monitor uses k={self.k}, w={self.w}"
        if fp.key_id != self.key_id:
            return f"made with key {fp.key_id!r}; this monitor's key is {self.key_id!r}"
        return None

    def from_wire(self, fp: Fingerprint) -> TextPrint:
        return TextPrint(hashes=list(dict.fromkeys(fp.hashes)), words=fp.words)

    def marker_id(self, marker: str) -> str:
        return hashlib.blake2b(" ".join(words_of(marker)).encode(), key=self._key, digest_size=8).hexdigest()
