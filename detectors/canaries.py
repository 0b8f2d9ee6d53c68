"""The canary registry: markers planted by probe tenants, and scanning outputs for them.

Global on purpose: a marker planted in domain X may surface in any domain's output.

A marker is `PREFIX-<12 or more random lowercase hex digits>` (schemas.events.marker_weakness: >= 48
random bits, so it can neither be guessed nor occur by chance), and only tenants matching
`detection.canary_tenants` may plant one (`CanaryPolicy`). The registry never holds a marker's
text: it keeps the keyed 64-bit hash of the marker's random part ("token key") and the keyed id of
the whole marker (which alerts carry). An output is scanned by hashing its hex-looking words with
the same key and looking them up, so a persisted registry (the Kafka changelogs) reveals nothing.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import deque
from dataclasses import dataclass
from fnmatch import fnmatchcase

import numpy as np

from detectors.fingerprint import Fingerprinter, words_of
from detectors.tokens import normalise
from schemas.events import MIN_MARKER_HEX, Canary, EventError, Request
from schemas.exchange import CanaryHit

# Output words this long and all hex are looked up (keyed hash) among the markers: the shortest marker.
MIN_HEX = MIN_MARKER_HEX
_HEX_WORD = re.compile(rf"[0-9a-f]{{{MIN_HEX},}}")
# A hex unit of MIN_HEX or more is, in the raw text, such a run of ASCII hex digits, unless a character of the text
# folds into one (full-width ａ, a format character removed between two runs: `_folds_to_hex`). Both are tested at C
# speed: the run on the UTF-8 bytes mapped to "x" (hex digit) or " " (anything else), the characters through a
# table over every code point.
_HEX_BYTES = bytes(0x78 if chr(b) in "0123456789abcdefABCDEF" else 0x20 for b in range(256))
_HEX_RUN = b"x" * MIN_HEX
_HEX_CHARS = frozenset("0123456789abcdef")


def hex_words(text: str) -> list[str]:
    """The units of `text` a marker's random part can be (lowercase hex, MIN_HEX or longer), in text order: exactly
    `[w for w in words_of(text) if len(w) >= MIN_HEX and _HEX_WORD.fullmatch(w)]`, but without cutting a text that
    cannot hold one into units (almost every text: the cut was a sixth of the text-rich core's time, issue 28)."""
    if _HEX_RUN not in text.encode("utf-8", "surrogatepass").translate(_HEX_BYTES) and (
        text.isascii() or not _FOLDING.any_of(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32))
    ):
        return []
    return [w for w in words_of(text) if len(w) >= MIN_HEX and _HEX_WORD.fullmatch(w)]


def _folds_to_hex(ch: str) -> bool:
    """Whether a non-ASCII character can be part of a hex unit without being an ASCII hex digit: it normalises to
    one (full-width, circled, mathematical digits and letters) or to nothing, or it is a format character, which the
    units drop (two runs around it are one unit)."""
    if ch.isascii():
        return False
    folded = normalise(ch)
    return not folded or unicodedata.category(ch) == "Cf" or not _HEX_CHARS.isdisjoint(folded)


class _FoldingTable:
    """`_folds_to_hex` by code point, learned as code points are met: each is asked once, and a text's are looked up
    in two array reads (a table of every code point built up front took 0.3 s, a stall in a worker's event loop)."""

    def __init__(self) -> None:
        self.known = np.zeros(0x110000, dtype=bool)
        self.folds = np.zeros(0x110000, dtype=bool)

    def any_of(self, points: np.ndarray) -> bool:
        new = points[~self.known[points]]
        if new.size:
            for cp in np.unique(new).tolist():
                self.folds[cp] = _folds_to_hex(chr(cp))
                self.known[cp] = True
        return bool(self.folds[points].any())


_FOLDING = _FoldingTable()


class CanaryPolicy:
    """Who may plant canaries: tenant ids matching one of the glob patterns (e.g. "probe-*")."""

    def __init__(self, patterns: list[str]) -> None:
        self.patterns = list(patterns)
        self._known: dict[str, bool] = {}

    def allowed(self, tenant_id: str) -> bool:
        ok = self._known.get(tenant_id)
        if ok is None:
            ok = any(fnmatchcase(tenant_id, p) for p in self.patterns)
            if len(self._known) < 100_000:  # a cache, bounded against tenant-id spraying
                self._known[tenant_id] = ok
        return ok

    def check(self, event: Canary | Request) -> None:
        """Raise EventError(canary_tenant) for a canary (or a request carrying canaries) from a non-probe tenant."""
        if not self.allowed(event.tenant_id):
            raise EventError(
                "canary_tenant",
                f"tenant {event.tenant_id!r} may not plant canaries (detection.canary_tenants={self.patterns})",
            )


@dataclass(frozen=True, slots=True)
class _Marker:
    marker_id: str
    tenant_id: str
    session_id: str | None
    ts: float


class CanaryRegistry:
    def __init__(self, fingerprinter: Fingerprinter, max_markers: int = 100_000) -> None:
        self.fingerprinter = fingerprinter
        self.max_markers = max_markers
        self._key = hashlib.blake2b(b"crosstalk-canary-token", key=fingerprinter._key, digest_size=32).digest()
        self._markers: dict[int, _Marker] = {}  # token key -> marker
        # Token keys in registration order: eviction pops the front, O(1) (markers are never
        # removed otherwise, so the queue is exactly the dict's keys).
        self._order: deque[int] = deque()
        self.evicted = 0

    def token_key(self, token: str) -> int:
        """The keyed 64-bit hash of a marker's random part (a lowercase hex word)."""
        return int.from_bytes(hashlib.blake2b(token.encode(), key=self._key, digest_size=8).digest(), "big")

    def register(self, tenant_id: str, marker: str, session_id: str | None, ts: float) -> bool:
        """Record a marker (validated by the schema); False when already known or without a random part."""
        token = marker.rpartition("-")[2]
        if not _HEX_WORD.fullmatch(token):
            return False
        return self.register_keyed(
            self.token_key(token), self.fingerprinter.marker_id(marker), tenant_id, session_id, ts
        )

    def register_keyed(self, token_key: int, marker_id: str, tenant_id: str, session_id: str | None, ts: float) -> bool:
        """register() for a marker known only by its keys (restored state, or keys sent by a prober)."""
        if token_key in self._markers:
            return False
        if len(self._markers) >= self.max_markers:
            del self._markers[self._order.popleft()]
            self.evicted += 1
        self._markers[token_key] = _Marker(marker_id, tenant_id, session_id, ts)
        self._order.append(token_key)
        return True

    def register_event(self, canary: Canary) -> bool:
        return self.register(canary.tenant_id, canary.marker, canary.session_id, canary.ts)

    def scan(self, text: str) -> list[CanaryHit]:
        """The markers a text holds (each once, in text order)."""
        if not self._markers:
            return []
        return self.scan_keys(self.token_keys(text))

    def token_keys(self, text: str) -> list[int]:
        """The token keys of a text's hex-looking words (`hex_words`), in text order: what scan() looks up. The
        Kafka ingest computes them where the text is, so the join partitions never see the text."""
        return [self.token_key(w) for w in hex_words(text)]

    def scan_keys(self, keys: list[int]) -> list[CanaryHit]:
        hits = []
        seen: set[int] = set()
        for key in keys:
            m = self._markers.get(key)
            if m is not None and key not in seen:
                seen.add(key)
                hits.append(
                    CanaryHit(marker_id=m.marker_id, owner_tenant_id=m.tenant_id, owner_session_id=m.session_id)
                )
        return hits

    def state_size(self) -> int:
        return len(self._markers)
