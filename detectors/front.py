"""The core's first half, composed once: admit (checks + dedup) -> ingest (text -> prints, detectors/ingest.py) ->
join -> exchanges. Admission reads no text, so the staged topology may ingest first, on its ingest workers.

Every runner feeds validated events through a `Front`: the embedded Monitor, the direct Kafka stage (through the
Monitor) and the staged topology's join stage (over the partition's own Joiner and Deduper). What comes out, the
exchanges a request or response completed or expired, goes to the second half (`detectors/back.py`).
"""

from __future__ import annotations

from collections import Counter

from detectors.canaries import CanaryPolicy
from detectors.dedup import Deduper
from detectors.ingest import Ingest, Plant
from detectors.join import Joiner
from detectors.session_prints import session_cache
from detectors.signals.base import Piece
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
    """admit -> ingest -> join over one Joiner and Deduper (a process's, or one join partition's), counting what it
    takes. `ingest`: the text step (detectors/ingest.py) when events come with text (one process); None where they
    come ingested already (the staged join partitions, whose records hold no text)."""

    __slots__ = ("counters", "dedup", "ingest", "joiner", "policy")

    def __init__(
        self,
        joiner: Joiner,
        dedup: Deduper,
        policy: CanaryPolicy | None,
        counters: Counter[str],
        ingest: Ingest | None = None,
    ) -> None:
        self.joiner = joiner
        self.dedup = dedup
        self.policy = policy
        self.counters = counters
        self.ingest = ingest

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        # The ingest step is derived from the joiner (its fingerprinter and markers) and holds a cache only.
        state = {name: getattr(self, name) for name in self.__slots__ if name != "ingest"}
        state["ingest"] = self.ingest is not None
        return None, state

    def __setstate__(self, state: tuple[None, dict[str, object]]) -> None:
        slots = dict(state[1])
        # A snapshot from before the ingest step was the front's holds no flag: then the join fingerprinted text.
        ingests = slots.pop("ingest", True)
        for name, value in slots.items():
            object.__setattr__(self, name, value)
        self.ingest = in_process(self.joiner) if ingests else None

    def admit(self, event: Event) -> None:
        """`admit` with this front's joiner, deduper and canary policy: EventError for what it must not take."""
        admit(event, self.joiner, self.dedup, self.policy)

    def join(self, event: Event) -> list[Exchange]:
        """An admitted event, counted: its text through ingest, then the exchanges a request or response completes.
        A canary event registers its marker; cache stats pass (the caller hands them to the back: no join)."""
        self.counters[EVENT_KEYS[event.type]] += 1
        # Text-free traffic skips the stage: tested here, not in a call, since this is every runner's per-event path.
        # A staged join partition, with no ingest of its own, is sent text-free records only.
        if event.type == "response":
            if event.output_text is None:
                return self.joiner.observe_response(event)
        elif event.type == "request":
            if event.prompt_text is None and not event.canaries:
                return self.joiner.observe_request(event)
        elif event.type != "canary":
            return []
        ingest = self.ingest
        if ingest is None:
            raise ValueError("text or markers reached a join without an ingest stage: records are sent text-free")
        printed = ingest(event)
        ev = printed.event
        if ev.type == "response":
            return self.joiner.observe_response(ev, printed.prints, printed.keys)
        if ev.type == "request":
            return self.joiner.observe_request(ev, printed.prints, printed.keys, printed.plants)
        self.plant(printed.plants)
        return []

    def admit_plant(self, plant: Plant) -> None:
        """A canary event that the staged ingest turned into its plant (the event's own join partition): admitted
        (EventError `duplicate`) and counted as `join` would the event, then planted."""
        if self.dedup.seen(plant.event_id, plant.ts):
            raise EventError("duplicate", f"event_id {plant.event_id!r} was seen before")
        self.counters[EVENT_KEYS["canary"]] += 1
        self.plant([plant])

    def plant(self, plants: list[Plant]) -> None:
        """Markers planted (a canary event's; the staged join's plants of events routed elsewhere)."""
        for p in plants:
            self.joiner.plant(p)

    def advance(self, ts: float) -> list[Exchange]:
        """Pending halves that expired by event time `ts` (orphans)."""
        return self.joiner.advance(ts)

    def flush(self) -> list[Exchange]:
        """End of input: every pending half, as an orphan."""
        return self.joiner.flush()


def front_pieces(joiner: Joiner, dedup: Deduper) -> dict[tuple[str, ...], Piece]:
    """The join stage's state that grows with its windows, not with what changed, so a snapshot copies each apart and
    then as its changes (detectors/signals/base.py `Piece`): the event ids of the dedup window, the halves waiting
    for their other half, and the planted markers. The names key stored snapshots: never renamed once shipped."""
    requests, responses = joiner.waiting()
    return {
        ("dd",): dedup,
        ("wait", "request"): requests,
        ("wait", "response"): responses,
        ("can",): joiner.canaries,
    }


def in_process(joiner: Joiner) -> Ingest:
    """The ingest step of a process that joins what it ingests: the joiner's fingerprinter and markers (a scan is
    skipped while none is planted), and a session cache of its own (`Monitor.share_sessions` may share one)."""
    s = joiner.settings
    return Ingest(
        joiner.fingerprinter, joiner.canaries, session_cache(s, joiner.fingerprinter), tools=s.tool_calls,
        identifiers=s.mixup_identifiers,
    )  # fmt: skip
