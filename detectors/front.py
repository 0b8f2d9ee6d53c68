"""The core's first half, composed once: admit (checks + dedup) -> join -> exchanges.

Every runner feeds validated events through a `Front`: the embedded Monitor, the direct Kafka stage (through the
Monitor) and the staged topology's join stage (over the partition's own Joiner and Deduper). What comes out, the
exchanges a request or response completed or expired, goes to the second half (`detectors/back.py`).
"""

from __future__ import annotations

from collections import Counter

from detectors.canaries import CanaryPolicy
from detectors.dedup import Deduper
from detectors.join import Joiner
from schemas.events import Event, EventError, dropped_canaries
from schemas.exchange import Exchange

EVENT_KEYS = {t: f"events.{t}" for t in ("request", "response", "cache_stats", "canary")}


def admit(event: Event, joiner: Joiner, dedup: Deduper, policy: CanaryPolicy | None = None) -> None:
    """Raise EventError (fingerprint_params, canary_tenant, duplicate) for what the core must not take,
    before any state change. `policy`: who may plant canaries (None: anyone; only for tests)."""
    # Dispatch on the wire's type tag (mypy narrows the union on it): isinstance() with a pydantic class goes
    # through its metaclass's __instancecheck__, a call of its own per event.
    if event.type == "response":
        if event.output_fingerprint is not None:
            joiner.check(event)
    elif event.type == "request":
        if event.prompt_fingerprint is not None:
            joiner.check(event)
        if event.canaries and policy is not None:
            policy.check(event)
    elif event.type == "canary" and policy is not None:
        policy.check(event)
    if dedup.seen(event.event_id, event.ts):
        raise EventError("duplicate", f"event_id {event.event_id!r} was seen before")


def weak_canaries(event: Event, counters: Counter[str]) -> str | None:
    """The warning of a request kept without the markers that are not markers (dropped at validation), counted
    per marker (`canaries.dropped_weak`), or None: one wording and one count for every runner's intake (a prober
    with a weak marker format hears of it without losing its prompts)."""
    dropped = dropped_canaries(event)
    if not dropped:
        return None
    counters["canaries.dropped_weak"] += len(dropped)
    return "; ".join(dropped) + "; the request was kept without them"


class Front:
    """admit -> join over one Joiner and Deduper (a process's, or one join partition's), counting what it takes."""

    __slots__ = ("counters", "dedup", "joiner", "policy")

    def __init__(self, joiner: Joiner, dedup: Deduper, policy: CanaryPolicy | None, counters: Counter[str]) -> None:
        self.joiner = joiner
        self.dedup = dedup
        self.policy = policy
        self.counters = counters

    def admit(self, event: Event) -> None:
        """`admit` with this front's joiner, deduper and canary policy: EventError for what it must not take."""
        admit(event, self.joiner, self.dedup, self.policy)

    def join(self, event: Event) -> list[Exchange]:
        """An admitted event, counted: the exchanges a request or response completes. A canary event registers
        its marker; cache stats pass (the caller hands them to the back: they need no join)."""
        self.counters[EVENT_KEYS[event.type]] += 1
        if event.type == "response":
            return self.joiner.observe_response(event)
        if event.type == "request":
            return self.joiner.observe_request(event)
        if event.type == "canary":
            self.joiner.canaries.register_event(event)
        return []

    def advance(self, ts: float) -> list[Exchange]:
        """Pending halves that expired by event time `ts` (orphans)."""
        return self.joiner.advance(ts)

    def flush(self) -> list[Exchange]:
        """End of input: every pending half, as an orphan."""
        return self.joiner.flush()
