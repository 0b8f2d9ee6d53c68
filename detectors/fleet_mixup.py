"""Delivery mix-ups across cache domains, found where the fleet record learns its digests (ADR 0021).

A gateway hands a response to a client of any pool: a misrouted answer, two crossed streams, a response cache keyed
wrongly. Each domain's ledger (detectors/mixup.py) finds the pairs of one domain; on blind-v2 (a development set) a
misrouted answer was found 95 % of the time in its source's domain and 52 % across domains. Content is correlated per
domain on purpose (a Kafka partition owns its domains), so the pair across domains has to be found where every
domain's exchanges meet: the fleet record, which every judge table holds and which learns every exchange of the
fleet `fleet_delay_s` after it, in (event time, request id) order, wherever it was judged (detectors/fleet.py).

So each table keeps one more ledger, of the fleet's deliveries as the record learns them, and checks each one as it
comes against those learned before it, with the same rules as a domain's ledger (copy, swap, misroute, copy from
before) and the fleet's own idea of common text (`innocent`: the fleet record's habits, and the operator's corpus).
A pair within one domain is left to that domain (its ledger found it as it happened). Every table learns the same
digests in the same order, so every table finds the same pairs; each raises the alerts of the receivers whose domain
it judges, `fleet_delay_s` after the later of the two exchanges. A digest heard after its time (`fleet.late`) is
checked when it comes, against what the ledger holds then.

Bounded like a domain's ledger (`mixup_window_s`, `mixup_max_deliveries`, `mixup_max_prints`, and the conversations'
latest answers: `mixup_session_*`), but for the fleet: a busy fleet keeps a shorter window. Never in a snapshot, like
the record it rides with: a restarted table knows the conversations of its replay (`fleet_replay_s`). No text: digests
hold prints.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from detectors.mixup import Delivery, Finding, MixupLedger
from detectors.mixup_counts import BOTH_WAYS, answered
from detectors.mixup_history import carried, lost_own
from detectors.mixup_verdict import mixup_signal
from detectors.printsets import sorted_unique
from detectors.settings import DetectionSettings
from schemas.alert import Signal

if TYPE_CHECKING:
    from detectors.fleet import Digest

Innocent = Callable[[np.ndarray], np.ndarray]
# A finding for a receiver: (its cache domain, its delivery as the ledger keeps it, the signal naming the owner).
Found = tuple[str, Delivery, Signal]


def _keys(raw: bytes) -> np.ndarray:
    return sorted_unique(np.frombuffer(raw, dtype=np.uint64).copy()) if raw else _EMPTY


def _ids(raw: bytes | None) -> frozenset[int] | None:
    """A digest's identifiers (detectors/mixup_ids.py); None when unknown."""
    return None if raw is None else frozenset(np.frombuffer(raw, dtype=np.uint64).tolist())


_EMPTY = np.empty(0, dtype=np.uint64)


class FleetMixups:
    """The fleet's recent deliveries, and the cross-domain mix-ups found among them, waiting for their tables."""

    def __init__(self, settings: DetectionSettings) -> None:
        self.s = settings
        self.ledger = MixupLedger()
        # Request id -> cache domain, for the deliveries the ledger holds: in its window, and the conversations' latest
        # answers past it (detectors/mixup_tails.py), which a history found across domains names.
        self.domain_of: dict[str, str] = {}
        self.found: list[Found] = []  # taken by the table (`take`)
        self.checked = 0  # deliveries checked (cumulative)
        # Request id -> event time of the exchanges this table judged: the receivers whose alerts it raises. Exactly
        # one table judges an exchange, whatever the topology, so exactly one raises each finding.
        self._here: dict[str, float] = {}
        self._newest = float("-inf")
        self._here_limit = 4096
        # Deliveries whose prompt lost their session's latest answer and carried no other one the ledger held: a
        # digest heard late may still be the answer they carry (detectors/mixup_history.py). Rare on a healthy fleet.
        self._carriers: deque[tuple[str, Delivery, Delivery]] = deque()  # (domain, carrier, its own latest)

    def learn(self, d: Digest, innocent: Innocent) -> None:
        """One digest of the fleet, in the record's order: checked against the earlier ones, then kept."""
        witness, failed = answered(d.status)
        if not d.status or not witness:
            return  # no response, or refused: no answer was made, so none was handed over (as in a domain's ledger)
        tenant, _, session = d.key.partition("\x1f")
        out = _EMPTY if failed else _keys(d.output)
        sent = d.ts if d.sent is None else d.sent
        cur = Delivery(d.ts, sent, d.request_id, tenant, None if session == d.request_id else session, None,
                       out, _keys(d.prompt), set(), d.response or None,
                       frozenset() if failed else _ids(d.output_ids), _ids(d.prompt_ids),
                       None if failed else d.counts, getattr(d, "asked", None) if failed else None)  # fmt: skip
        if not cur.out.size and not cur.prompt.size:
            return
        s, domain, domain_of = self.s, d.domain, self.domain_of
        self._newest = max(self._newest, d.ts)
        self.checked += 1
        if self.ledger.recent:
            # Only deliveries of other domains are paired: a pair within one domain is its own ledger's, found as it
            # happened.
            for f in self.ledger.check(s, cur, innocent, apart=lambda o: domain_of.get(o.request_id) != domain):
                other = f.owner if f.leaked is cur else f.leaked
                other_domain = domain_of.get(other.request_id)
                if other_domain is None:
                    continue  # no longer held (a sketch entry outliving its delivery): its domain is unknown
                where = {cur.request_id: domain, other.request_id: other_domain}
                pairs = [(f.leaked, f.owner)]
                if f.mode in BOTH_WAYS:  # both receivers got the other's answer
                    pairs.append((f.owner, f.leaked))
                for leaked, owner in pairs:
                    if owner.tenant_id not in leaked.named:
                        leaked.named.add(owner.tenant_id)
                        self.found.append((where[leaked.request_id], leaked, mixup_signal(f, owner)))
        domain_of[d.request_id] = domain
        recent = self.ledger.recent
        late = bool(recent) and cur.ts < recent[-1].ts
        if s.mixup_history:
            self._carry(cur, domain, late, innocent)
        self.ledger.add(s, cur)
        if late and recent and recent[-1] is cur:
            # Heard after its time: kept in event-time order, which `check` reads (it stops at the first delivery
            # made before a request was sent). Rare, so a linear search.
            recent.pop()
            at = bisect.bisect_right([x.ts for x in recent], cur.ts)
            recent.insert(at, cur)
            self.ledger.forget_derived()
        if len(self.domain_of) > 2 * self.ledger.state_size() + 64:
            held = {d.request_id for d in (*self.ledger.recent, *self.ledger.tails.by_session.values())}
            self.domain_of = {r: d for r, d in self.domain_of.items() if r in held}

    def _carry(self, cur: Delivery, domain: str, late: bool, innocent: Innocent) -> None:
        """A late digest is asked whether it is the answer a carrier's prompt carries, which the carrier's own check
        could not see (a history found in every topology, whatever order the digests came in); then `cur` becomes a
        carrier itself if its prompt lost its session's latest answer and no history was found for it."""
        s, carriers = self.s, self._carriers
        horizon = self._newest - s.mixup_window_s
        while carriers and (carriers[0][1].ts < horizon or len(carriers) > 1024):
            carriers.popleft()
        if late:
            for where, c, own_c in carriers:
                if where != domain and cur.tenant_id not in c.named and (n := carried(s, c, cur, own_c, innocent)):
                    c.named.add(cur.tenant_id)
                    self.found.append((where, c, mixup_signal(Finding("history", c, cur, n), cur)))
        if cur.session_id is not None and cur.prompt.size and not cur.named:
            own = self.ledger.latest(s, cur)
            if own is not None and lost_own(s, cur, own):
                carriers.append((domain, cur, own))

    def judged_here(self, d: Digest) -> None:
        self._here[d.request_id] = d.ts
        if len(self._here) > self._here_limit:  # pruned when it doubled: amortised O(1)
            self._here = self.here()
            self._here_limit = max(4096, 2 * len(self._here))

    def here(self) -> dict[str, float]:
        """The exchanges this table judged that the ledger may still find (a snapshot keeps them)."""
        horizon = self._newest - 2 * self.s.mixup_window_s
        return {r: t for r, t in self._here.items() if t >= horizon}

    def restore_here(self, here: dict[str, float]) -> None:
        self._here.update(here)
        self._here_limit = max(4096, 2 * len(self._here))

    def was_judged_here(self, request_id: str) -> bool:
        return request_id in self._here

    def take(self) -> list[Found]:
        out, self.found = self.found, []
        return out

    def state_size(self) -> int:
        return len(self.ledger.recent)
