"""The core's first half, composed once: admit (checks + dedup) -> join -> exchanges.

Every runner feeds validated events through a `Front`: the embedded Monitor, the direct Kafka stage (through the
Monitor) and the staged topology's join stage (over the partition's own Joiner and Deduper). What comes out, the
exchanges a request or response completed or expired, goes to the second half (`detectors/back.py`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from detectors.canaries import CanaryPolicy
from detectors.dedup import Deduper
from detectors.join import Joiner
from schemas.events import Canary, Event, EventError
from schemas.exchange import Exchange

EVENT_KEYS = {t: f"events.{t}" for t in ("request", "response", "cache_stats", "canary")}


def admit(event: Event, joiner: Joiner, dedup: Deduper, policy: CanaryPolicy | None = None) -> dict[str, Any]:
    """Raise EventError (fingerprint_params, canary_tenant, duplicate) for what the core must not take,
    before any state change. `policy`: who may plant canaries (None: anyone; only for tests).

    Returns the event's fields (its __dict__, read-only), which the caller may dispatch on without
    reading them again."""
    # Fields read from the model's __dict__: a model's attribute reads are slow (Joiner.observe_request).
    # The dispatch is on the wire's type tag: isinstance() with a pydantic class that is not the event's
    # own goes through the metaclass's __instancecheck__, a call of its own (every request paid one).
    d = event.__dict__
    kind = d["type"]
    if kind == "response":
        if d["output_fingerprint"] is not None:
            joiner.check(event)  # type: ignore[arg-type]
    elif kind == "request":
        if d["prompt_fingerprint"] is not None:
            joiner.check(event)  # type: ignore[arg-type]
        if d["canaries"] and policy is not None:
            policy.check(event)  # type: ignore[arg-type]
    elif kind == "canary" and policy is not None:
        policy.check(event)  # type: ignore[arg-type]
    if dedup.seen(d["event_id"], d["ts"]):
        raise EventError("duplicate", f"event_id {event.event_id!r} was seen before")
    return d


class Front:
    """admit -> join over one Joiner and Deduper (a process's, or one join partition's), counting what it takes."""

    __slots__ = ("counters", "dedup", "joiner", "policy")

    def __init__(self, joiner: Joiner, dedup: Deduper, policy: CanaryPolicy | None, counters: Counter[str]) -> None:
        self.joiner = joiner
        self.dedup = dedup
        self.policy = policy
        self.counters = counters

    def admit(self, event: Event) -> dict[str, Any]:
        """`admit` with this front's joiner, deduper and canary policy: the event's fields, or EventError."""
        return admit(event, self.joiner, self.dedup, self.policy)

    def join(self, event: Event, d: dict[str, Any]) -> list[Exchange]:
        """An admitted event (`d`: its fields), counted: the exchanges a request or response completes. A canary
        event registers its marker; cache stats pass (the caller hands them to the back: they need no join)."""
        kind = d["type"]
        self.counters[EVENT_KEYS[kind]] += 1
        if kind == "response":
            return self.joiner.observe_response(event, d)  # type: ignore[arg-type]
        if kind == "request":
            return self.joiner.observe_request(event, d)  # type: ignore[arg-type]
        if kind == "canary":
            assert isinstance(event, Canary)
            self.joiner.canaries.register_event(event)
        return []

    def advance(self, ts: float) -> list[Exchange]:
        """Pending halves that expired by event time `ts` (orphans)."""
        return self.joiner.advance(ts)

    def flush(self) -> list[Exchange]:
        """End of input: every pending half, as an orphan."""
        return self.joiner.flush()
