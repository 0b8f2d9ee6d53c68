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
from collections import deque
from dataclasses import dataclass
from fnmatch import fnmatchcase

from detectors.fingerprint import Fingerprinter
from schemas.events import MIN_MARKER_HEX, Canary, EventError, Request
from schemas.exchange import CanaryHit

# Output words this long and all hex are looked up (keyed hash) among the markers: the shortest marker.
MIN_HEX = MIN_MARKER_HEX
_HEX_WORD = re.compile(rf"[0-9a-f]{{{MIN_HEX},}}")


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

    def scan(self, words: list[str]) -> list[CanaryHit]:
        if not self._markers:
            return []
        return self.scan_keys(self.token_keys(words))

    def token_keys(self, words: list[str]) -> list[int]:
        """The token keys of an output's hex-looking words, in text order: what scan() looks up. The
        Kafka ingest computes them where the text is, so the join partitions never see the text."""
        return [self.token_key(w) for w in words if len(w) >= MIN_HEX and _HEX_WORD.fullmatch(w)]

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
