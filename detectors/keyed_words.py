"""Words read at ingest and kept as keyed 64-bit hashes: a base for the tool names (detectors/toolcalls.py) and the
identifiers (detectors/identifiers.py) that travel with a text's fingerprints.

Each kind has a key of its own, derived from the fingerprint key under its label, so the gateway, the OTLP bridge
and the monitor agree on every hash while no hash of one kind can be matched against another's, and without the key
no word is readable. `EdgeWords` is what a producer that keeps text at the edge attaches to each print it sends.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, ClassVar, Self

if TYPE_CHECKING:
    from detectors.fingerprint import Fingerprinter


class KeyedWords:
    """Keyed hashes of words under `LABEL` (a subclass names it)."""

    LABEL: ClassVar[bytes]
    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        self._key = hashlib.blake2b(self.LABEL, key=key, digest_size=32).digest()

    @classmethod
    def of(cls, fingerprinter: Fingerprinter) -> Self:
        """Keyed by the fingerprint key (under the kind's label): the gateway and the monitor agree."""
        return cls(fingerprinter._key)

    def keyed(self, word: str) -> int:
        return int.from_bytes(hashlib.blake2b(word.encode(), key=self._key, digest_size=8).digest(), "big")
