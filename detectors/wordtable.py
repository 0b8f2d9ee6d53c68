"""The fingerprinter's cache of unit hashes: an open-addressing table of numpy arrays keyed by a word's bytes.

Words of at most 24 UTF-8 bytes are keys of three uint64 (the bytes, zero-padded), so a whole text's words are
looked up in a few vectorised passes without a Python object per word (`Fingerprinter._span_hashes`). Linear
probing; the table doubles at half load; `_reach` is the furthest any key sits from its home slot, so a lookup
knows how far to look.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_BITS", "WordTable"]

_H0 = np.uint64(0x9E3779B97F4A7C15)  # multiplicative hashing of a key into a slot
MIN_BITS = 10  # 1,024 slots (24 KiB) to start with; the table doubles at half load


class WordTable:
    """The table's arrays and operations (`Fingerprinter` is one); `_bytes_hash` is the keyed hash of a unit."""

    _bits: int
    _shift: np.uint64
    _tk0: np.ndarray
    _tk1: np.ndarray
    _tk2: np.ndarray
    _tval: np.ndarray
    _count: int
    _reach: int
    _steps: np.ndarray

    def _bytes_hash(self, data: bytes) -> int:
        raise NotImplementedError

    def _tables(self, bits: int) -> None:
        self._bits = bits
        self._shift = np.uint64(64 - bits)
        self._tk0 = np.zeros(1 << bits, dtype=np.uint64)  # 0: a free slot
        self._tk1 = np.zeros(1 << bits, dtype=np.uint64)
        self._tk2 = np.zeros(1 << bits, dtype=np.uint64)
        self._tval = np.zeros(1 << bits, dtype=np.uint64)
        self._count = 0
        self._reach = 0  # the largest distance of a key from its home slot
        self._steps = np.arange(1, 1)

    def _home(self, k0: np.ndarray, k1: np.ndarray, k2: np.ndarray) -> np.ndarray:
        """Multiplicative hashing: the top bits of (k0 ^ k1 ^ k2) * odd constant. The key (0, 0, 0) of every long
        word goes to slot 0, which no key takes: it "finds" its all-zero entry there at no cost."""
        h = k0 ^ k1  # array arithmetic wraps modulo 2**64 silently
        h ^= k2
        h *= _H0
        h >>= self._shift
        return h.view(np.intp)  # < 2**bits: the same values

    def _insert(self, k0: np.ndarray, k1: np.ndarray, k2: np.ndarray, val: np.ndarray) -> None:
        """Add distinct keys that are not in the table yet (vectorised linear probing; there is room)."""
        tk0, tk1, tk2, tval = self._tk0, self._tk1, self._tk2, self._tval
        mask = tk0.shape[0] - 1
        home = self._home(k0, k1, k2)
        slot = home.copy()
        pend = np.arange(k0.shape[0])
        placed = np.zeros(k0.shape[0], dtype=bool)
        while pend.size:
            s = slot[pend]
            free = tk0[s] == 0
            free &= s != 0  # slot 0 is kept for the long words
            # Of the keys arriving at the same free slot, the first takes it; the others probe on.
            taken, first = np.unique(s[free], return_index=True)
            win = pend[free][first]
            tk0[taken] = k0[win]
            tk1[taken] = k1[win]
            tk2[taken] = k2[win]
            tval[taken] = val[win]
            placed[win] = True
            pend = pend[~placed[pend]]
            slot[pend] = (slot[pend] + 1) & mask
        self._count += k0.shape[0]
        if k0.shape[0]:  # the longest probe sequence, so that lookups know how far to look
            self._reach = max(self._reach, int(((slot - home) & mask).max()))
            self._steps = np.arange(1, self._reach + 1)

    def _add(
        self, tb: bytes, starts: np.ndarray, ends: np.ndarray, keys: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> None:
        """Hash and add the words at these offsets of `tb` (absent from the table, possibly repeated)."""
        first: dict[bytes, int] = {}
        for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            first.setdefault(tb[s:e], i)
        idx = np.fromiter(first.values(), dtype=np.intp, count=len(first))
        val = np.fromiter(map(self._bytes_hash, first), dtype=np.uint64, count=len(first))
        bits = self._bits
        while (self._count + len(first)) * 2 > 1 << bits:
            bits += 1
        if bits != self._bits:  # keep the load at most one half
            used = np.flatnonzero(self._tk0)
            old = self._tk0[used], self._tk1[used], self._tk2[used], self._tval[used]
            self._tables(bits)
            self._insert(*old)
        k0, k1, k2 = keys
        self._insert(k0[idx], k1[idx], k2[idx], val)

    def _probe(self, k0: np.ndarray, k1: np.ndarray, k2: np.ndarray, slot: np.ndarray, found: np.ndarray) -> np.ndarray:
        """Look for the keys not found at their home `slot` in the next `_reach` slots (no key is further
        from home), all at once; update `slot` in place. Returns the positions of the absent keys."""
        pend = (~found).nonzero()[0]
        if pend.size == 0 or self._reach == 0:
            return pend
        tk0 = self._tk0
        home = slot[pend]
        cand = home[:, None] + self._steps
        cand &= tk0.shape[0] - 1
        hit = tk0[cand] == k0[pend][:, None]
        hit &= self._tk1[cand] == k1[pend][:, None]
        hit &= self._tk2[cand] == k2[pend][:, None]
        home += hit.argmax(axis=1)  # the first hit's step - 1; cand[:, 0] is home + 1
        home += 1
        home &= tk0.shape[0] - 1
        slot[pend] = home
        return pend[~hit.any(axis=1)]
