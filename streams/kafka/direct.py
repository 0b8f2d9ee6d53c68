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
the producer writes `canary` events to every partition).

Input keyed otherwise (a producer on the staged keys, by request id) is never judged on the wrong partition
(issue 28). crosstalk's own producers mark what they placed by domain (header `routing.PLACED`: canary copies,
batches). A response or cache_stats event on a partition that is not its domain's is sent again to the input topic,
to its domain's partition (`DirectResult.reroute`, marked placed; counted `direct.rerouted.*`), a response together
with its request if that waits here (as its fingerprints: the text is gone), and a request that comes after its
re-routed response follows it; a canary that was not placed is copied to every other partition. An exchange that
still ends up here for a domain of another partition (an orphaned request of another domain) is dead-lettered
`misrouted`, as is a placed event not at home (a producer that counts the partitions otherwise). What re-routing
cannot give back is order: a re-routed event reaches its partition after what was already there, so a bulk load of
foreign-keyed input is judged in another order than one file would be (live traffic moves by milliseconds); the
staged topology remains for such producers.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from detectors.pipeline import (
    DetectionSettings,
    EventClock,
    Monitor,
    Observed,
    PublicSet,
    SessionPrints,
    make_fingerprinter,
    session_cache,
    whole,
)
from schemas.events import Event, Fingerprint
from schemas.exchange import Exchange
from streams.kafka.frames import INPUT, Source
from streams.kafka.gaps import MARKER_GAP
from streams.kafka.inputmsg import InputMessage, intake
from streams.kafka.stages import NEG_INF, DeadLetter, DomainResult, DomainState, publish
from streams.routing import DomainHome, input_partition_of
from streams.settings import Settings

log = logging.getLogger("crosstalk.direct")
_MOVED_MAX = 100_000  # request ids of re-routed responses remembered per partition (their requests follow)


@dataclass
class DirectState(DomainState):
    """One input partition's whole pipeline: a Monitor. A DomainState whose table is the monitor's, so the
    checkpoints cut it into the same pieces (each domain, its index incrementally, the dedup ids as their
    changes; streams/kafka/pieces.py) and the rest — joins waiting, markers, the clock — rides in the
    partition piece."""

    # Keyword-only: required, though DomainState's fields before them have defaults.
    monitor: Monitor = field(kw_only=True)
    clock: EventClock = field(kw_only=True)
    # request id -> the domain its response was re-routed to: its request, read later, follows it there. State,
    # not the stage's: a restart between the two must still send the request on.
    moved: OrderedDict[str, str] = field(default_factory=OrderedDict, kw_only=True)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("moved", OrderedDict())  # a checkpoint from before `moved` was state

    @classmethod
    def fresh_direct(cls, s: DetectionSettings, counters: Counter[str], public: PublicSet | None = None) -> DirectState:
        monitor = whole(s, public, counters)
        return cls(monitor.table, monitor=monitor, clock=EventClock(s.max_future_skew_s))


def process_sessions(s: DetectionSettings) -> SessionPrints:
    """The session fingerprinting cache every partition's monitor in this process shares (`Monitor.share_sessions`),
    so that `session_cache_prints` bounds the process whatever number of partitions it holds."""
    return session_cache(s, make_fingerprinter(s))


@dataclass(slots=True)
class DirectResult(DomainResult):
    """A domain stage's outputs, plus what the ingest stage reports in the staged topology."""

    event_types: list[str] = field(default_factory=list)
    newest: float = NEG_INF  # newest event time admitted
    # Events to send again to the input topic, marked placed: (key, value, partition).
    reroute: list[tuple[bytes | None, bytes, int]] = field(default_factory=list)


class DirectStage:
    """Feeds a partition's input messages to its Monitor; everything the shell then sends comes back."""

    def __init__(self, settings: Settings, counters: Counter[str]) -> None:
        self.max_bytes = settings.ingest.max_event_bytes
        self.partitions = settings.kafka.input_partitions
        self.counters = counters
        self.positions: dict[int, int] = {}  # input partition -> last offset read (consumer lag)
        self.input_max: dict[int, float] = {}  # input partition -> newest event time admitted

    def read(self, st: DirectState, partition: int, messages: list[InputMessage], wall: float) -> DirectResult:
        """`messages` of one partition, in offset order; those the state already covers (a replay after a
        restart from an older ack) are skipped. `wall`: the wall clock (UNIX s), the bound of event time."""
        res = DirectResult()
        monitor, clock, counters = st.monitor, st.clock, self.counters
        home = monitor.owns
        if not isinstance(home, DomainHome) or (home.partition, home.partitions) != (partition, self.partitions):
            home = monitor.owns = DomainHome(partition, self.partitions)
        unowned: list[Exchange] = []
        monitor.unowned = unowned
        moved = st.moved
        observe = monitor.observe_evaluated
        positions, source = self.positions, Source(INPUT, partition)

        def begin(msg: InputMessage) -> EventClock | None:
            counters["direct.messages"] += 1
            positions[partition] = msg.offset
            if msg.offset <= st.offset:
                counters["direct.replayed_skipped"] += 1
                return None
            if st.offset >= 0 and msg.offset > st.offset + MARKER_GAP:
                # Offsets the state never read, which a seek back found the log does not hold (streams/kafka/gaps.py):
                # a transactional producer's aborted records, or retention. From any other producer, input read past.
                counters["direct.offset_gaps"] += 1
                log.warning("partition %d read on at offset %d past its state's %d", partition, msg.offset, st.offset)
            st.offset = msg.offset
            return clock

        def step(msg: InputMessage, event: Event, line: bytes, line_no: int | None) -> Observed | None:
            if self._away(event, home, moved, monitor, line, msg, line_no, res):
                return None
            return observe(event)

        for msg, event, observed in intake(messages, begin, wall, self.max_bytes, counters, res.dead, step):
            res.event_types.append(event.type)
            if unowned:
                self._misrouted(unowned, home, source, msg.offset, res)
            if observed.alerts:
                res.alerts += observed.alerts
            if observed.evaluated:
                res.evaluated += observed.evaluated
            ts = event.ts
            if ts > res.newest:
                res.newest = ts
            if observed.resolved:
                res.resolved += observed.resolved
        if res.newest > self.input_max.get(partition, NEG_INF):
            self.input_max[partition] = res.newest
        publish(res.alerts, res.resolved, res.published, res.dead, counters, Source(INPUT, partition))
        return res

    def tick(self, st: DirectState, partition: int, wall: float) -> DirectResult:
        """The worker's clock (issue 40): the partition's held findings due by `wall` (UNIX s) are judged
        (`Monitor.tick`), so a quiet partition's cold-domain finding comes out with no further input. The worker
        ticks only a partition it has read to the end: in a backlog, event time (any event) judges them instead."""
        res = DirectResult()
        observed = st.monitor.tick_evaluated(wall)
        res.alerts, res.evaluated = observed.alerts, observed.evaluated
        if res.alerts:
            publish(res.alerts, res.resolved, res.published, res.dead, self.counters, Source(INPUT, partition))
        return res

    def _away(
        self,
        event: Event,
        home: DomainHome,
        moved: OrderedDict[str, str],
        monitor: Monitor,
        line: bytes,
        msg: InputMessage,
        line_no: int | None,
        res: DirectResult,
    ) -> bool:
        """Whether the event belongs on another partition: then it is sent there (or dead-lettered) instead."""
        if event.type == "canary":
            if not msg.placed:  # one copy from a foreign producer: markers are known per partition, so to all
                for q in range(home.partitions):
                    if q != home.partition:
                        res.reroute.append((None, line, q))
                self.counters["direct.rerouted.canary"] += 1
            return False
        if event.type == "request":
            domain = moved.pop(event.request_id, None)  # its response was re-routed: it follows
            if domain is None:
                return False
        elif event.type == "response" or event.type == "cache_stats":
            domain = event.cache_domain
            if home(domain):
                return False
        else:
            return False
        counters = self.counters
        if msg.placed:
            # Placed here as this domain's partition, and not at home: a producer (or a worker) that counts the
            # input topic's partitions otherwise. Dead-lettered rather than re-routed in a loop or judged here.
            counters["direct.misrouted"] += 1
            detail = (
                f"cache domain {domain!r} is not at home on input partition {home.partition} of {home.partitions}, "
                "where it was placed: does its producer count the input topic's partitions otherwise?"
            )
            res.dead.append(DeadLetter(line, "misrouted", detail, Source(INPUT, home.partition), msg.offset, line_no))
            return True
        key = domain.encode()
        q = input_partition_of(key, home.partitions)
        if event.type == "response":
            rid = event.request_id
            waiting = monitor.take_request(rid)
            if waiting is not None:  # its request came here first: both go, the request first
                res.reroute.append((key, _request_line(monitor, *waiting), q))
                counters["direct.rerouted.request"] += 1
            else:
                moved[rid] = domain
                while len(moved) > _MOVED_MAX:
                    moved.popitem(last=False)
        res.reroute.append((key, line, q))
        counters[f"direct.rerouted.{event.type}"] += 1
        return True

    def _misrouted(
        self, unowned: list[Exchange], home: DomainHome, source: Source, offset: int, res: DirectResult
    ) -> None:
        """Exchanges that ended up here for another partition's domain (an orphaned request keyed elsewhere)."""
        for ex in unowned:
            self.counters["direct.misrouted"] += 1
            half = ex.response if ex.response is not None else ex.request
            payload = half.model_dump_json(exclude_none=True).encode() if half is not None else b""
            detail = (
                f"exchange {ex.request_id!r} of cache domain {ex.cache_domain!r} ended up on input partition "
                f"{home.partition}, not its domain's: key both halves by the response's cache domain "
                "(streams/producer.py, key_by cache domain)"
            )
            res.dead.append(DeadLetter(payload, "misrouted", detail, source, offset, key=ex.request_id.encode()))
        unowned.clear()

    def forget(self, partition: int) -> None:
        self.positions.pop(partition, None)
        self.input_max.pop(partition, None)


def _request_line(monitor: Monitor, request: Any, tp: Any) -> bytes:
    """A waiting request as an input line again, its text as the fingerprints it was replaced by."""
    if tp is None:
        return bytes(request.model_dump_json(exclude_none=True).encode())
    wire = Fingerprint(**monitor.fingerprinter.wire_fields(tp))
    return bytes(request.model_copy(update={"prompt_fingerprint": wire}).model_dump_json(exclude_none=True).encode())
