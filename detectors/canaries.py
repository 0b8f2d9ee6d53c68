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

from detectors.changes import StoredAsIs
from detectors.fingerprint import Fingerprinter, words_of
from detectors.tokens import normalise
from schemas.events import MIN_MARKER_HEX, Canary, EventError, Request
from schemas.exchange import CanaryHit

try:
    from detectors._winnow import table_find as _table_find
except ImportError:  # built without a C compiler: numpy lookups
    _table_find = None  # type: ignore[assignment]

# Output words this long and all hex are looked up (keyed hash) among the markers: the shortest marker.
MIN_HEX = MIN_MARKER_HEX
_HEX_WORD = re.compile(rf"[0-9a-f]{{{MIN_HEX},}}")
# A hex unit of MIN_HEX or more is, in the raw text, such a run of ASCII hex digits, unless a character of the text
# folds into one (full-width ａ, a format character removed between two runs: `_folds_to_hex`). Both are tested at C
# speed: the run on the UTF-8 bytes mapped to "x" (hex digit) or " " (anything else), the characters through a
# table over every code point.
_HEX_BYTES = bytes(0x78 if chr(b) in "0123456789abcdefABCDEF" else 0x20 for b in range(256))
_HEX_RUN = b"x" * MIN_HEX
# The UTF-8 bytes no unit crosses (ASCII, not a word character) mapped to " ", every other byte to "w".
_SEP_BYTES = bytes(0x20 if b < 0x80 and not (chr(b).isalnum() or chr(b) == "_") else 0x77 for b in range(256))
_HEX_CHARS = frozenset("0123456789abcdef")


def hex_words(text: str) -> list[str]:
    """The units of `text` a marker's random part can be (lowercase hex, MIN_HEX or longer), in text order: exactly
    `[w for w in words_of(text) if len(w) >= MIN_HEX and _HEX_WORD.fullmatch(w)]`, but without cutting a text into
    units where it cannot hold one (the cut was a sixth of the text-rich core's time, issue 28).

    A text none of whose characters folds into a hex digit (`_folds_to_hex`) holds a hex unit only where it has a run
    of MIN_HEX ASCII hex digits, and no unit crosses an ASCII byte that is not a word character: only the stretch
    between two such bytes around each run is cut (a re-sent history holding one marker is not cut whole every turn).
    """
    if not text.isascii() and _FOLDING.any_of(text):
        return _hex_units(text)
    data = text.encode("utf-8", "surrogatepass")
    marked = data.translate(_HEX_BYTES)
    at = marked.find(_HEX_RUN)
    if at < 0:
        return []
    seps = data.translate(_SEP_BYTES)
    out: list[str] = []
    done = 0  # the stretches before this byte are cut
    while at >= 0:
        start = seps.rfind(b" ", done, at) + 1 or done
        end = seps.find(b" ", at)
        end = len(data) if end < 0 else end
        out += _hex_units(data[start:end].decode("utf-8", "surrogatepass"))
        done = end
        at = marked.find(_HEX_RUN, end)
    return out


def _hex_units(text: str) -> list[str]:
    """The definition `hex_words` answers: the text's units that are lowercase hex of MIN_HEX or more."""
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
    """`_folds_to_hex` by code point, learned as code points are met: each is asked once (a table of every code point
    built up front took 0.3 s, a stall in a worker's event loop). Natively a byte per code point (0 known not to fold,
    1 folds, 2 not asked yet) read in one pass over the str (`_winnow.table_find`); else two numpy arrays read in two
    array lookups over the text's code points."""

    table: bytearray
    known: np.ndarray
    folds: np.ndarray

    def __init__(self) -> None:
        if _table_find is not None:
            self.table = bytearray(b"\x02") * 0x110000
            self.table[:0x80] = bytes(0x80)  # ASCII never folds: hex digits are hex already
        else:
            self.known = np.zeros(0x110000, dtype=bool)
            self.folds = np.zeros(0x110000, dtype=bool)

    def any_of(self, text: str) -> bool:
        """Whether a character of `text` folds into a hex digit (or vanishes)."""
        if _table_find is None:
            return self._any_of_array(np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32))
        table, at = self.table, 0
        while True:
            at, value = _table_find(text, table, at)
            if value != 2:
                return value == 1
            table[ord(text[at])] = _folds_to_hex(text[at])

    def _any_of_array(self, points: np.ndarray) -> bool:
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


class CanaryRegistry(StoredAsIs):
    # A piece (detectors/signals/base.py `Piece`): since the last mark, the token keys set (new markers, and earlier
    # plants replacing a marker's time) and how many were evicted; None: never marked. Class defaults, so that a
    # registry pickled before it was a piece restores unmarked.
    _since: list[int] | None = None
    _evicted_since = 0
    _held_at_mark = 0

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

    def keyed(self, marker: str) -> tuple[int, str] | None:
        """A marker (validated by the schema) as its keys: (token key, marker id); None without a random part."""
        token = marker.rpartition("-")[2]
        if not _HEX_WORD.fullmatch(token):
            return None
        return self.token_key(token), self.fingerprinter.marker_id(marker)

    def register(self, tenant_id: str, marker: str, session_id: str | None, ts: float) -> bool:
        """Record a marker; False when already known or without a random part."""
        keyed = self.keyed(marker)
        return keyed is not None and self.register_keyed(*keyed, tenant_id, session_id, ts)

    def register_keyed(self, token_key: int, marker_id: str, tenant_id: str, session_id: str | None, ts: float) -> bool:
        """register() for a marker known only by its keys (restored state, or keys sent by a prober).

        A marker planted again keeps its earliest plant, whatever order the plants come in: the staged join reads
        plants from every input partition, in no order across them, and scans an output as of its event time
        (`scan_keys(until=...)`); had a later re-plant read first set the time, an output between the two plants
        would miss the marker (a canary leak judged as plain contamination, on the real broker with two workers)."""
        known = self._markers.get(token_key)
        since = self._since
        if known is not None:
            if ts < known.ts:
                self._markers[token_key] = _Marker(marker_id, tenant_id, session_id, ts)
                if since is not None:
                    since.append(token_key)
            return False
        if len(self._markers) >= self.max_markers:
            del self._markers[self._order.popleft()]
            self.evicted += 1
            self._evicted_since += 1
        self._markers[token_key] = _Marker(marker_id, tenant_id, session_id, ts)
        self._order.append(token_key)
        if since is not None:
            since.append(token_key)
        return True

    def mark(self) -> None:
        """A checkpoint copied the registry: changes count from here."""
        self._since = []
        self._evicted_since = 0
        self._held_at_mark = len(self._markers)

    def changes(self) -> tuple[int, list[tuple[int, _Marker]]] | None:
        """(markers evicted from the front, (token key, marker) set since, in order) since the mark; None when only a
        whole copy will do (never marked, or more evicted than were held at the mark: some of the new went too)."""
        since = self._since
        if since is None or self._evicted_since > self._held_at_mark:
            return None
        markers = self._markers
        return self._evicted_since, [(k, markers[k]) for k in dict.fromkeys(since) if k in markers]

    def replay(self, changes: tuple[int, list[tuple[int, _Marker]]]) -> None:
        evicted, came = changes
        markers, order = self._markers, self._order
        for _ in range(evicted):
            del markers[order.popleft()]
        self.evicted += evicted
        for k, m in came:
            if k not in markers:
                order.append(k)
            markers[k] = m

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        for trail in ("_since", "_evicted_since", "_held_at_mark"):  # the trail of changes is not part of a copy
            state.pop(trail, None)
        return state

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

    def scan_keys(self, keys: list[int], until: float | None = None) -> list[CanaryHit]:
        """The markers among `keys`. `until`: the event time of the text; a marker planted after it is not in it (a
        scan that waited, as the staged join's does for the plants of other partitions, may know it already)."""
        hits = []
        seen: set[int] = set()
        for key in keys:
            m = self._markers.get(key)
            if m is not None and key not in seen and (until is None or m.ts <= until):
                seen.add(key)
                hits.append(
                    CanaryHit(marker_id=m.marker_id, owner_tenant_id=m.tenant_id, owner_session_id=m.session_id)
                )
        return hits

    def state_size(self) -> int:
        return len(self._markers)
