"""The direct topology's one stage, without Faust: input messages of one partition -> its Monitor -> alerts.

    input (keyed by cache domain) --direct--> alerts
      validate once, wall-clock skew guard, Monitor per input partition (dedup, fingerprint + drop
      text, join, domains, incidents), checkpoint per partition
      |
      v
    dead-letter

The staged topology (stages.py) repartitions twice, because a request and its response meet by
request_id and a domain's exchanges by cache domain, and a producer may key them any way. When the
producer keys every event by its cache domain (streams/producer.py `key_by="cache_domain"`; gateways
that emit the pair on completion know the domain of both halves), both halves of a pair and every
event of a domain are already in one input partition, in the producer's order. Then a partition is a
replay of its own log and the embedded Monitor is the whole pipeline: no internal topics, no record
encoding, no watermarks between stages (issue 16, docs/adr/0003). Alerts are the embedded runner's on
the same per-partition sequence (tests/broker/test_kafka_direct.py compares them).

What direct mode gives up, stated in docs/operations.md: canary markers are known per partition (a marker
planted on one cache domain is found in outputs of that domain's partition: the KV-cache leak class;
the producer writes `canary` events to every partition); a request keyed elsewhere than its response
is joined by neither (an orphan pair, counted `orphans.*`), so producers must key both halves alike.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field

from detectors.monitor import Monitor
from detectors.ordering import EventClock
from detectors.public import PublicSet
from detectors.settings import DetectionSettings
from schemas.events import CacheStats, EventError, Response
from streams.kafka.frames import INPUT, Source
from streams.kafka.ingest import InputMessage, dropped_warning, message_lines, parse_bounded, reason_of
from streams.kafka.stages import NEG_INF, DeadLetter, DomainResult, DomainState, publish
from streams.settings import Settings

log = logging.getLogger("crosstalk.direct")
_KEYED_BY_DOMAIN = (Response, CacheStats)  # a request's key may be its response's domain
_RESOLVE_STEP_S = 1.0  # as the embedded runner: incidents resolve in event time, checked once per second of it


@dataclass
class DirectState(DomainState):
    """One input partition's whole pipeline: a Monitor. A DomainState whose table is the monitor's, so the
    checkpoints cut it into the same pieces (each domain, its index incrementally, the dedup ids as their
    changes; streams/kafka/pieces.py) and the rest — joins waiting, markers, the clock — rides in the
    partition piece."""

    # Keyword-only: required, though DomainState's fields before them have defaults.
    monitor: Monitor = field(kw_only=True)
    clock: EventClock = field(kw_only=True)
    next_resolved: float = NEG_INF

    @classmethod
    def fresh_direct(cls, s: DetectionSettings, counters: Counter[str], public: PublicSet | None = None) -> DirectState:
        monitor = Monitor(s, public, counters=counters)
        return cls(monitor.table, monitor=monitor, clock=EventClock(s.max_future_skew_s))


@dataclass(slots=True)
class DirectResult(DomainResult):
    """A domain stage's outputs, plus what the ingest stage reports in the staged topology."""

    event_types: list[str] = field(default_factory=list)
    newest: float = NEG_INF  # newest event time admitted


class DirectStage:
    """Feeds a partition's input messages to its Monitor; everything the shell then sends comes back."""

    def __init__(self, settings: Settings, counters: Counter[str]) -> None:
        self.max_bytes = settings.ingest.max_event_bytes
        self.counters = counters
        self.positions: dict[int, int] = {}  # input partition -> last offset read (consumer lag)
        self.input_max: dict[int, float] = {}  # input partition -> newest event time admitted

    def read(self, st: DirectState, partition: int, messages: list[InputMessage], wall: float) -> DirectResult:
        """`messages` of one partition, in offset order; those the state already covers (a replay after a
        restart from an older ack) are skipped. `wall`: the wall clock (UNIX s), the bound of event time."""
        res = DirectResult()
        monitor, clock, counters = st.monitor, st.clock, self.counters
        observe = monitor.observe_evaluated
        for msg in messages:
            counters["direct.messages"] += 1
            self.positions[partition] = msg.offset
            if msg.offset <= st.offset:
                counters["direct.replayed_skipped"] += 1
                continue
            st.offset = msg.offset
            source = Source(INPUT, partition)
            if msg.value is None:
                tomb = DeadLetter(b"", "invalid", "empty message (tombstone)", source, msg.offset, key=msg.key)
                res.dead.append(tomb)
                continue
            for line_no, line in message_lines(msg):
                try:
                    event = parse_bounded(line, self.max_bytes, clock, wall)
                    observed = observe(event)
                    clock.admit(event.ts, wall)
                except Exception as exc:  # EventError has its reason; anything else must not stop the worker
                    if not isinstance(exc, (EventError, ValueError)):
                        log.exception("direct: partition %s offset %s failed", partition, msg.offset)
                    reason, detail = reason_of(exc, "internal_error")
                    res.dead.append(DeadLetter(line, reason, detail, source, msg.offset, line_no, msg.key))
                    continue
                counters[f"ingest.{event.type}"] += 1
                warning = dropped_warning(event, source, msg.offset, line_no, msg.key, counters)
                if warning is not None:
                    res.dead.append(warning)
                res.event_types.append(event.type)
                if (
                    msg.key is not None
                    and isinstance(event, _KEYED_BY_DOMAIN)
                    and msg.key != event.cache_domain.encode()
                ):
                    # Keyed, but not by its domain: a producer on the staged keys. Its pairs and domains are
                    # split across partitions; say so rather than alert less (docs/operations.md, direct topology).
                    counters["direct.misrouted"] += 1
                if observed.alerts:
                    res.alerts += observed.alerts
                if observed.evaluated:
                    res.evaluated += observed.evaluated
                ts = event.ts
                if ts > res.newest:
                    res.newest = ts
                if ts >= st.next_resolved:
                    st.next_resolved = ts + _RESOLVE_STEP_S
                    res.resolved += monitor.drain_resolved(ts)
        if res.newest > self.input_max.get(partition, NEG_INF):
            self.input_max[partition] = res.newest
        publish(res.alerts, res.resolved, res.published, res.dead, counters, Source(INPUT, partition))
        return res

    def forget(self, partition: int) -> None:
        self.positions.pop(partition, None)
        self.input_max.pop(partition, None)
