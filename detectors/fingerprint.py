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


def words_of(text: str) -> list[str]:
    """The normalised words the fingerprints are made of."""
    return _WORD.findall(text.lower())


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
        self._powers = np.array([int(_BASE) ** (k - 1 - j) % 2**64 for j in range(k)], dtype=np.uint64)

    @property
    def guarantee_words(self) -> int:
        """t: the shortest shared passage that is certain to share a fingerprint."""
        return self.k + self.w - 1

    def _word_hash(self, word: str) -> int:
        h = int.from_bytes(hashlib.blake2b(word.encode(), key=self._key, digest_size=8).digest(), "little")
        if len(self._cache) >= _WORD_CACHE_MAX:
            self._cache.clear()
        self._cache[word] = h
        return h

    def word_hashes(self, words: list[str]) -> np.ndarray:
        cache = self._cache
        get = cache.get
        hashes = [get(wd) for wd in words]
        if None in hashes:
            hashes = [h if h is not None else self._word_hash(wd) for wd, h in zip(words, hashes, strict=True)]
        return np.fromiter(hashes, dtype=np.uint64, count=len(hashes))

    def kgram_hashes(self, wh: np.ndarray) -> np.ndarray:
        n = wh.shape[0] - self.k + 1
        if n <= 0:
            return np.empty(0, dtype=np.uint64)
        acc = np.zeros(n, dtype=np.uint64)
        with np.errstate(over="ignore"):
            for j in range(self.k):
                acc += wh[j : j + n] * self._powers[j]
            # Final avalanche so that the selection (a minimum) does not favour particular words.
            acc ^= acc >> np.uint64(31)
            acc *= _MIX
            acc ^= acc >> np.uint64(29)
        return acc

    def winnow(self, kg: np.ndarray) -> np.ndarray:
        """Selected fingerprints of a k-gram hash sequence, in text order, each hash once.

        Text order matters downstream: a leaked passage shows up as a run of consecutive matches.
        """
        n = kg.shape[0]
        if n == 0:
            return kg
        if n <= self.w:
            return kg[[n - 1 - int(np.argmin(kg[::-1]))]]
        windows = np.lib.stride_tricks.sliding_window_view(kg, self.w)
        # Rightmost minimum: argmin over the reversed window finds the last occurrence.
        pos = np.unique((self.w - 1 - np.argmin(windows[:, ::-1], axis=1)) + np.arange(windows.shape[0]))
        selected = kg[pos]
        _, first = np.unique(selected, return_index=True)
        return selected[np.sort(first)]

    def fingerprint_words(self, words: list[str]) -> np.ndarray:
        return self.winnow(self.kgram_hashes(self.word_hashes(words)))

    def print_text(self, text: str) -> TextPrint:
        words = words_of(text)
        return TextPrint(hashes=self.fingerprint_words(words).tolist(), words=len(words))

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
