"""What the model writes across the fleet: every cache domain's answers in one record, learned late (ADR 0017).

A text the model writes for many sessions is its habit (a stock opener, a disclaimer, the standard translation of a
famous text), not any tenant's private data. Each domain learns that on its own at once (the overlap detector's
session record); but a habit spread over five domains was five times new there: the model's usual "Good catch. The
problem is in the error handling" written once in a domain, and then for a second tenant there, read as a page of the
first. The fleet record learns every domain's exchanges: which sessions' answers held each fingerprint, and which text
a prompt introduced before the model had written it anywhere (authored), so that provenance is the fleet's too: a
tenant's document that the model echoes in other domains stays that tenant's in the domain where it leaks.

It learns an exchange `fleet_delay_s` of event time after it (a `Digest`: the prints, no text), in the order of
(event time, request id). That delay is what lets the Kafka topologies give every partition the same record: a
partition publishes the digests of the exchanges it judged and hears those of the others (streams/kafka/fleet.py);
whatever arrives within the delay is learned exactly where one process would learn it. A digest that comes later is
learned when it comes, with the rest of its delivery (`settle`; counted `fleet.late`): the record then knows less for
a while, which can only keep a text evidence longer, never make a leak common.

One per judge table (`DomainTable`: a process, a replay job, a Kafka partition), shared by its domains and advanced
by its event time; never in a snapshot (a Kafka partition rebuilds it from what its worker heard); bounded by the
record's fixed size and by `fleet_pending_hashes` for the digests waiting their delay (beyond it the oldest is
learned early, in the same order everywhere).
"""

from __future__ import annotations

import heapq
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from detectors.commonness import LEVELS, MAX_LEVELS, TenantSpread
from detectors.mixup_counts import asked_of, counts_of
from detectors.public import PublicSet
from detectors.settings import DetectionSettings
from schemas.exchange import Exchange

if TYPE_CHECKING:
    from detectors.fleet_mixup import FleetMixups

# Late digests waiting for the rest of their delivery are settled at this many at the latest (a bound on the list).
_LATE_BATCH = 4096

# The record's tag for prompt text a tenant introduced (the model had not written it before, anywhere in the fleet).
AUTHORED = "authored"


def model_record(settings: DetectionSettings, bits_log2: int, capacity: int) -> TenantSpread:
    """A record of the model's writing (sessions whose answers held each fingerprint): a domain's own or the fleet's.
    It counts sessions further than a tenant record's "3 or more": a held page's receivers, fewer than
    `common_min_tenants`, each add a session of their own, and are taken out of the count before it is held against
    `common_min_sessions` (`HeldJudge._stands`); a count that saturated below their sum could never call the page
    a habit however many sessions wrote it. Within `MAX_LEVELS` (common_min_sessions + common_min_tenants - 1 <= 8)
    the count is exact up to the record's error bound (detectors/commonness.py)."""
    levels = min(MAX_LEVELS, max(LEVELS, settings.common_min_sessions + settings.common_min_tenants - 1))
    return TenantSpread(bits_log2, capacity=capacity, epoch_s=settings.spread_epoch_s, levels=levels)


@dataclass(frozen=True, slots=True)
class Digest:
    """What the fleet record learns of one exchange: its prints as little-endian uint64, no text."""

    ts: float
    request_id: str
    key: str  # tenant and session ("tenant\x1fsession"; a request without a session is one of its own)
    prompt: bytes
    output: bytes
    # Where and when it was delivered, for the mix-ups across domains (detectors/fleet_mixup.py): its cache domain
    # ("": unknown, a digest from a worker before them), its request's event time, its status (0: no response).
    domain: str = ""
    sent: float | None = None
    status: int = 0
    response: str = ""  # the provider's response id ("": none, or a digest from a worker before them)
    # The identifiers of the prompt and of the output, sorted uint64 little-endian (None: unknown; ADR 0027).
    prompt_ids: bytes | None = None
    output_ids: bytes | None = None
    # The gateway's count of the prompt and the engine's input tokens in its usage (None: unknown; ADR 0029).
    counts: tuple[int, int] | None = None
    asked: int | None = None  # the gateway's count of a prompt whose answer was lost (ADR 0031)

    @property
    def order(self) -> tuple[float, str]:
        return (self.ts, self.request_id)

    @property
    def hashes(self) -> int:
        return (len(self.prompt) + len(self.output)) // 8


def digest_of(ex: Exchange) -> Digest | None:
    """The exchange's digest, or None when it carries no prints (nothing to learn)."""
    pp, op = ex.prompt_print, ex.output_print
    prompt = array("Q", pp.hashes).tobytes() if pp is not None and pp.hashes else b""
    output = array("Q", op.hashes).tobytes() if op is not None and op.hashes else b""
    if not prompt and not output:
        return None
    key = f"{ex.tenant_id}\x1f{ex.session_id or ex.request_id}"
    req, resp = ex.request, ex.response
    half = resp or req
    domain = (half.cache_domain if half is not None else None) or ""
    sent = req.ts if req is not None else ex.ts
    status, response = (resp.status_code, resp.response_id or "") if resp is not None else (0, "")
    pi, oi = (None if tp is None or tp.ids is None else array("Q", sorted(tp.ids)).tobytes() for tp in (pp, op))
    counts, asked = counts_of(ex), asked_of(ex)
    return Digest(ex.ts, ex.request_id, key, prompt, output, domain, sent, status, response, pi, oi, counts, asked)


class Fleet:
    """The fleet record and the digests waiting their delay. Never a snapshot's: a table pickles without it
    (`DomainTable.__getstate__`), and a Kafka partition rebuilds its own from what its worker heard."""

    def __init__(self, settings: DetectionSettings) -> None:
        self.settings = settings
        # The mix-ups across cache domains, found as the record learns (detectors/fleet_mixup.py; imported here, as it
        # imports the domain's mix-up rules, which import this module's readers).
        from detectors.fleet_mixup import FleetMixups

        self.mixups: FleetMixups | None = FleetMixups(settings) if settings.fleet_mixups else None
        self.public: PublicSet | None = None  # the table's corpus: public text is no witness of a mix-up
        self.record = model_record(settings, settings.fleet_bits_log2, settings.fleet_capacity)
        self.delay_s = settings.fleet_delay_s
        self.max_pending = settings.fleet_pending_hashes
        self._pending: list[tuple[tuple[float, str], Digest]] = []  # a heap by (event time, request id)
        self._pending_hashes = 0
        self.learned_until = float("-inf")  # every digest of an exchange up to this event time is learned
        self.late = 0  # digests that came after their time (learned when they came, with their message)
        self._late: list[Digest] = []  # came late, waiting for the rest of their delivery (`settle`)

    # --- what the domains read ----------------------------------------------------------------
    def sessions(self, keys: np.ndarray) -> np.ndarray:
        """Distinct sessions (0..`record.levels`) whose answers held each fingerprint, over the fleet."""
        return self.record.tenants(keys)

    def authored(self, keys: np.ndarray) -> np.ndarray:
        """Whether a prompt introduced each fingerprint before the model had written it, over the fleet."""
        return self.record.tagged(AUTHORED, keys)

    # --- what it learns -----------------------------------------------------------------------
    def push(self, d: Digest) -> None:
        """A digest of the fleet (judged here or heard from elsewhere): learned once event time passes its delay."""
        if d.ts <= self.learned_until:  # its time has passed (every digest up to then is learned): with its message
            self.late += 1
            self._late.append(d)
            if len(self._late) >= _LATE_BATCH:
                self.settle()
            return
        heapq.heappush(self._pending, (d.order, d))
        self._pending_hashes += d.hashes
        while self._pending_hashes > self.max_pending and self._pending:  # bounded: the oldest is learned early
            self._pop()

    def settle(self) -> None:
        """Learn the digests that came late, together: every one's prints first, then each one's mix-ups.

        In one process a pair of deliveries is checked when the later of the two is learned, against a record that
        knows every digest due before it. A digest heard late is checked when it comes instead, and what made its
        text common may come with it, later in the same message (a lagging partition tells a whole batch at once):
        checked one by one, the first of them would meet a stock answer as if no one else had been given it
        (tests/parity.py found a staged topology naming the first of four tenants that a process did not). So the
        record learns the whole delivery before any of it is checked; it then holds both sides of each pair, and
        one of them, the later, is what a check in time would not have counted (`_late_innocent`). It may also hold
        digests later than both: a late check can then find less than one in time. (Text of a swap's one direction
        that the later side's answer does not hold is asked one session too many: there it can find a little more,
        as it could before, when the late digest's own session was not counted.)"""
        if not self._late:
            return  # the common case: `advance` calls this for every exchange a table is handed
        late, self._late = self._late, []
        late.sort(key=lambda d: d.order)
        for d in late:
            self._learn_record(d)
        if self.mixups is not None:
            for d in late:
                if d.domain:
                    self.mixups.learn(d, self._late_innocent)

    def _late_innocent(self, keys: np.ndarray) -> np.ndarray:
        # The record holds the later side of the pair checked, which a check in time had not learned yet: one
        # session more than `innocent` asks for the text both hold.
        least = self.settings.common_min_sessions
        return self._explained(keys, least + 1 if least else 0)

    def advance(self, ts: float) -> None:
        """Event time is `ts`: learn every digest whose delay has passed, oldest first."""
        self.settle()
        due = ts - self.delay_s
        pending = self._pending
        while pending and pending[0][0][0] <= due:
            self._pop()
        if due > self.learned_until:
            self.learned_until = due

    def _pop(self) -> None:
        _, d = heapq.heappop(self._pending)
        self._pending_hashes -= d.hashes
        self._learn(d)

    def innocent(self, keys: np.ndarray) -> np.ndarray:
        """What the fleet explains away in any output: the model's habit over the fleet, or the operator's corpus."""
        return self._explained(keys, self.settings.common_min_sessions)

    def _explained(self, keys: np.ndarray, sessions: int) -> np.ndarray:
        mask: np.ndarray = self.record.tenants(keys) >= sessions
        return mask | self.public.contains(keys) if self.public is not None else mask

    def _learn(self, d: Digest) -> None:
        if self.mixups is not None and d.domain:
            self.mixups.learn(d, self.innocent)  # before the record learns it: what was known then
        self._learn_record(d)

    def _learn_record(self, d: Digest) -> None:
        rec = self.record
        if d.prompt:
            fp = np.frombuffer(d.prompt, dtype=np.uint64)
            # Provenance: prompt text the model had not written, anywhere, was introduced by a tenant. A tag met again
            # is written into the current generation, as `add` copies pairs forward: text a tenant keeps sending
            # stays authored after the generation that first saw it is gone.
            new = (rec.tenants(fp) == 0) | rec.tagged(AUTHORED, fp)
            rec.tag(AUTHORED, fp[new], d.ts)
        if d.output:
            rec.add(d.key, np.frombuffer(d.output, dtype=np.uint64), d.ts)

    @property
    def pending(self) -> int:
        return len(self._pending) + len(self._late)
