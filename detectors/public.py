"""The operator's corpus of public text: fingerprints that are common by declaration.

Licences, documentation, a RAG collection, news an application quotes: text that many tenants may
legitimately have, fingerprinted with the monitor's own key and parameters (so it matches nothing
under another key) and counted as common. Held as one sorted array of unique 64-bit fingerprints
(8 bytes each, looked up with a binary search per batch); reading and writing the file is the shell's.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np

_MAGIC = b"CTKPUB1\n"
_HEADER = struct.Struct("<8s16s16sHHQ")  # magic, scheme, key_id, k, w, count


class CorpusMismatch(ValueError):
    """The corpus was made with another key, scheme or parameters: it could never match."""


class PublicSet:
    def __init__(self, scheme: str, key_id: str, k: int, w: int, hashes: Iterable[int] | np.ndarray = ()) -> None:
        self.scheme = scheme
        self.key_id = key_id
        self.k = k
        self.w = w
        self._h = np.unique(np.fromiter(hashes, dtype=np.uint64) if not isinstance(hashes, np.ndarray) else hashes)

    def __len__(self) -> int:
        return int(self._h.size)

    def hashes(self) -> np.ndarray:
        """The fingerprints, sorted and unique."""
        return self._h

    def add(self, hashes: Iterable[int] | np.ndarray) -> int:
        """Add fingerprints; returns how many were new."""
        before = self._h.size
        extra = hashes if isinstance(hashes, np.ndarray) else np.fromiter(hashes, dtype=np.uint64)
        self._h = np.union1d(self._h, extra)
        return int(self._h.size - before)

    def contains(self, hashes: list[int] | np.ndarray) -> np.ndarray:
        fp = np.asarray(hashes, dtype=np.uint64)
        if self._h.size == 0 or fp.size == 0:
            return np.zeros(fp.size, dtype=bool)
        pos = np.searchsorted(self._h, fp)
        pos[pos == self._h.size] = 0
        return self._h[pos] == fp

    def check(self, scheme: str, key_id: str, k: int, w: int) -> None:
        if (scheme, key_id, k, w) != (self.scheme, self.key_id, self.k, self.w):
            raise CorpusMismatch(
                f"corpus was fingerprinted with scheme={self.scheme} key_id={self.key_id} k={self.k} w={self.w}, "
                f"the monitor uses scheme={scheme} key_id={key_id} k={k} w={w}: rebuild it with `crosstalk corpus add`"
            )

    def to_bytes(self) -> bytes:
        head = _HEADER.pack(
            _MAGIC, self.scheme.encode()[:16], self.key_id.encode()[:16], self.k, self.w, int(self._h.size)
        )
        return head + self._h.astype("<u8").tobytes()

    @classmethod
    def from_bytes(cls, blob: bytes) -> PublicSet:
        if len(blob) < _HEADER.size:
            raise ValueError("not a crosstalk public corpus (too short)")
        magic, scheme, key_id, k, w, n = _HEADER.unpack_from(blob)
        if magic != _MAGIC:
            raise ValueError("not a crosstalk public corpus (bad magic)")
        body = blob[_HEADER.size :]
        if len(body) != 8 * n:
            raise ValueError(f"corrupt public corpus: {n} fingerprints announced, {len(body) // 8} present")
        out = cls(scheme.rstrip(b"\0").decode(), key_id.rstrip(b"\0").decode(), k, w)
        out._h = np.frombuffer(body, dtype="<u8").astype(np.uint64)
        return out
