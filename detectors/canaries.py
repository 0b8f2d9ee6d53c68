"""The canary registry: markers planted by probers or tenants, and scanning outputs for them.

Global on purpose: a marker planted in domain X may surface in any domain's output.
Markers are kept as keyed ids plus their normalised words; alerts carry only the id.
"""

from __future__ import annotations

from dataclasses import dataclass

from detectors.exchange import CanaryHit
from detectors.fingerprint import Fingerprinter, words_of
from schemas.events import Canary


@dataclass(frozen=True, slots=True)
class _Marker:
    marker_id: str
    words: tuple[str, ...]
    tenant_id: str
    session_id: str | None
    ts: float


class CanaryRegistry:
    def __init__(self, fingerprinter: Fingerprinter, max_markers: int = 100_000) -> None:
        self.fingerprinter = fingerprinter
        self.max_markers = max_markers
        # Anchor = the longest word of a marker (usually its random part): scanning intersects an
        # output's word set with the anchors instead of searching for every marker.
        self._by_anchor: dict[str, list[_Marker]] = {}
        self._ids: dict[str, _Marker] = {}
        # Probers plant the same marker in request after request: its id (a tokenisation and a keyed
        # hash) is remembered by the raw text. Bounded like the registry.
        self._id_of: dict[str, str] = {}

    def register(self, tenant_id: str, marker: str, session_id: str | None, ts: float) -> bool:
        """Record a marker; returns False when it is unusable (no words) or already known."""
        mid = self._id_of.get(marker)
        if mid is not None and mid in self._ids:
            return False
        words = tuple(words_of(marker))
        if not words:
            return False
        if mid is None:
            if len(self._id_of) >= 2 * self.max_markers:
                self._id_of.clear()
            mid = self._id_of[marker] = self.fingerprinter.marker_id(marker)
        if mid in self._ids:
            return False
        if len(self._ids) >= self.max_markers:
            self._evict_oldest()
        m = _Marker(mid, words, tenant_id, session_id, ts)
        self._ids[mid] = m
        self._by_anchor.setdefault(max(words, key=len), []).append(m)
        return True

    def _evict_oldest(self) -> None:
        oldest = min(self._ids.values(), key=lambda m: m.ts)
        del self._ids[oldest.marker_id]
        anchor = max(oldest.words, key=len)
        rest = [m for m in self._by_anchor.get(anchor, []) if m.marker_id != oldest.marker_id]
        if rest:
            self._by_anchor[anchor] = rest
        else:
            self._by_anchor.pop(anchor, None)

    def register_event(self, canary: Canary) -> bool:
        return self.register(canary.tenant_id, canary.marker, canary.session_id, canary.ts)

    def scan(self, words: list[str]) -> list[CanaryHit]:
        if not self._by_anchor:
            return []
        candidates = self._by_anchor.keys() & set(words)
        if not candidates:
            return []
        joined = " " + " ".join(words) + " "
        hits = []
        for anchor in sorted(candidates):
            for m in self._by_anchor[anchor]:
                if " " + " ".join(m.words) + " " in joined:
                    hits.append(
                        CanaryHit(marker_id=m.marker_id, owner_tenant_id=m.tenant_id, owner_session_id=m.session_id)
                    )
        return hits

    def state_size(self) -> int:
        return len(self._ids)
