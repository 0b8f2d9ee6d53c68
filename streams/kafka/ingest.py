"""The ingest stage, without Faust: input messages -> validated, text-free records per join partition.

Each event is validated here and nowhere else (streams/kafka/records.py carries it on). Text is
fingerprinted here and dropped here, canary markers become keyed hashes here, and an event too far
ahead of the wall clock is rejected here (`future_ts`) before it can move any watermark. Stateless
but for the event-time marks it publishes per input partition. Wall-clock time is passed in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson

from detectors.canaries import CanaryPolicy, CanaryRegistry
from detectors.front import weak_canaries
from detectors.monitor import make_fingerprinter
from detectors.ordering import FUTURE_TS, EventClock
from schemas.events import Canary, Event, EventError, Fingerprint, Request, Response, dropped_canaries, parse_event
from streams.kafka import records
from streams.kafka.frames import INPUT, Item, Source
from streams.kafka.stages import NEG_INF, DeadLetter, Send
from streams.routing import partition_of, routing_key
from streams.settings import Settings


@dataclass(slots=True)
class InputMessage:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    ndjson: bool  # content-type application/x-ndjson: one event per line
    placed: bool = False  # placed on its domain's partition by a crosstalk producer or worker (direct.PLACED header)


def message_lines(msg: InputMessage) -> Iterator[tuple[int | None, bytes]]:
    """The events of one (non-empty) input message: (line number, line) of each non-blank NDJSON line, or
    (None, value) for a message of one event. Shared with the direct stage."""
    assert msg.value is not None
    if not msg.ndjson:
        yield None, msg.value
        return
    for line_no, line in enumerate(msg.value.split(b"\n"), start=1):
        if line.strip():
            yield line_no, line


def parse_bounded(line: bytes, max_bytes: int, clock: EventClock, wall: float) -> Event:
    """Validate one event and bound its time by the wall clock: an event far ahead of it would drag every
    watermark (and, in the direct stage, every join and window expiry) with it, so it is rejected
    (EventError `future_ts`) before it can move anything (detectors/ordering.py). Admitting the time to
    `clock` is the caller's, once the event was used."""
    event = parse_event(line, max_bytes=max_bytes)
    future = clock.check(event.ts, wall)
    if future is not None:
        raise EventError(FUTURE_TS, future)
    return event


def dropped_warning(
    event: Event, source: Source, offset: int, line: int | None, key: bytes | None, counters: Counter[str]
) -> DeadLetter | None:
    """The dead-letter warning of an event kept without the canary markers that are not markers, or None.
    Its payload identifies the event (not its text: the event itself went on, fingerprinted)."""
    detail = weak_canaries(event, counters)
    if detail is None:
        return None
    ids = {"event_id": event.event_id, "type": event.type, "dropped": len(dropped_canaries(event))}
    return DeadLetter(orjson.dumps(ids), "weak_canary", detail, source, offset, line, key, severity="warning")


def reason_of(exc: Exception, otherwise: str = "invalid") -> tuple[str, str]:
    """The dead-letter reason and detail of an exception: an EventError's own, else `otherwise`."""
    if isinstance(exc, EventError):
        return exc.reason, exc.detail
    return otherwise, f"{type(exc).__name__}: {exc}"


@dataclass(slots=True)
class IngestResult:
    to_join: dict[int, list[Item]] = field(default_factory=dict)
    newest: dict[int, float] = field(default_factory=dict)  # input partition -> newest event time read
    dead: list[DeadLetter] = field(default_factory=list)
    event_types: list[str] = field(default_factory=list)  # of every admitted event, for the sinks


class IngestStage:
    """Validates each event once, fingerprints its text and drops it, turns markers into keyed ids, routes."""

    def __init__(self, settings: Settings, counters: Counter[str]) -> None:
        self.kafka = settings.kafka
        self.max_bytes = settings.ingest.max_event_bytes
        self.counters = counters
        self.fingerprinter = make_fingerprinter(settings.detection)
        # Only for its keyed hashes: markers and outputs become token keys here, where the text is.
        self.keys = CanaryRegistry(self.fingerprinter)
        self.policy = CanaryPolicy(settings.detection.canary_tenants)
        self.max_skew_s = settings.detection.max_future_skew_s
        self.clocks: dict[int, EventClock] = {}  # input partition -> its accepted event time
        self.input_max: dict[int, float] = {}  # input partition -> newest event time published in marks
        self.input_heard: dict[int, float] = {}  # input partition -> wall clock of its last message
        self.positions: dict[int, int] = {}  # input partition -> last offset read (consumer lag)
        self.sent_marks: dict[int, dict[int, float]] = {}  # join partition -> marks last sent to it
        # Input partitions read to their end at the last check (streams/kafka/stall.py, `StallWatch.caught_up`): the
        # only ones a silence makes idle. A partition not known read to its end (a backlog, paused while its stage
        # restores, just taken over) is waited for: its reader is late, and its plants may still be unread.
        self.caught_up: set[int] = set()

    def read(self, messages: list[InputMessage], now: float, wall: float) -> IngestResult:
        """`now`: monotonic seconds (idleness); `wall`: the wall clock (UNIX s), the bound of event time."""
        res = IngestResult()
        for msg in messages:
            self.counters["ingest.messages"] += 1
            self.positions[msg.partition] = msg.offset
            self.input_heard[msg.partition] = now
            source = Source(INPUT, msg.partition)
            clock = self.clocks.get(msg.partition)
            if clock is None:
                clock = self.clocks[msg.partition] = EventClock(self.max_skew_s)
            if msg.value is None:
                res.dead.append(
                    DeadLetter(b"", "invalid", "empty message (tombstone)", source, msg.offset, key=msg.key)
                )
                continue
            seq = 0  # position of each item within its message: stable, since it depends on content only
            for line_no, line in message_lines(msg):
                try:
                    event = parse_bounded(line, self.max_bytes, clock, wall)
                    routed = self._records(event)
                    clock.admit(event.ts, wall)
                except Exception as exc:  # EventError has its reason; anything else must not stop the worker
                    reason, detail = reason_of(exc)
                    res.dead.append(DeadLetter(line, reason, detail, source, msg.offset, line_no, msg.key))
                    continue
                self.counters[f"ingest.{event.type}"] += 1
                warning = dropped_warning(event, source, msg.offset, line_no, msg.key, self.counters)
                if warning is not None:
                    res.dead.append(warning)
                if event.ts > res.newest.get(msg.partition, NEG_INF):
                    res.newest[msg.partition] = event.ts
                res.event_types.append(event.type)
                for q, kind, payload in routed:
                    res.to_join.setdefault(q, []).append(Item(source, msg.offset, seq, kind, payload))
                    seq += 1
        return res

    def _records(self, event: Event) -> list[tuple[int, str, bytes]]:
        """(join partition, kind, record) for one valid event; EventError for what no stage could use."""
        n = self.kafka.internal_partitions
        q = partition_of(routing_key(event), n)
        if isinstance(event, (Canary, Request)) and (isinstance(event, Canary) or event.canaries):
            self.policy.check(event)  # canary_tenant: only probe tenants plant markers
        if isinstance(event, Canary):
            # Canaries are global: every join partition must know every marker before the outputs that
            # follow it in event time. Sent with the event itself, not relayed by its partition; a leak read
            # before a plant on another input partition waits at the join for the watermark (stages.py).
            plant = records.plant_record(
                self._plant(event.event_id, event.ts, event.tenant_id, event.marker, event.session_id)
            )
            return [(r, "canary" if r == q else "plant", plant) for r in range(n)]
        out: list[tuple[int, str, bytes]] = []
        keys: list[int] | None = None
        if isinstance(event, Request):
            for marker in event.canaries:
                plant = records.plant_record(
                    self._plant(event.event_id, event.ts, event.tenant_id, marker, event.session_id)
                )
                out += [(r, "plant", plant) for r in range(n)]
            if event.prompt_text is not None or event.canaries:
                fp = event.prompt_fingerprint
                if event.prompt_text is not None:
                    # The markers the prompt re-sends are the receiver's own context (`join.unexplained`): the
                    # join stage takes them out of its response's hits. As the Joiner: text is scanned, given or not.
                    keys = self.keys.token_keys(event.prompt_text) or None
                    if fp is None:
                        fp = self._wire(event.prompt_text, ends=False)  # a source: its sentences' hashes suffice
                event = event.model_copy(update={"prompt_text": None, "prompt_fingerprint": fp, "canaries": []})
        elif isinstance(event, Response) and event.output_text is not None:
            fp = event.output_fingerprint
            if fp is None:  # as the Joiner: a given fingerprint wins, and only text is scanned for markers
                keys = self.keys.token_keys(event.output_text) or None
                fp = self._wire(event.output_text)
            event = event.model_copy(update={"output_text": None, "output_fingerprint": fp})
        out.append((q, "event", records.event_record(event, keys)))
        return out

    def _plant(self, event_id: str, ts: float, tenant_id: str, marker: str, session_id: str | None) -> records.Plant:
        # The schema guarantees PREFIX-<hex>: the random part is what outputs are scanned for.
        token_key = self.keys.token_key(marker.rpartition("-")[2])
        return records.Plant(event_id, ts, token_key, self.fingerprinter.marker_id(marker), tenant_id, session_id)

    def _wire(self, text: str, *, ends: bool = True) -> Fingerprint:
        fpr = self.fingerprinter
        # Our own output: valid by construction, so built without validating up to a million hashes. The
        # positions go on with the hashes: without them the join and domain stages would judge a run by its
        # matches alone, and raise alerts the embedded runner does not (docs/adr/0004, "coverage").
        return Fingerprint.model_construct(**fpr.wire_fields(fpr.fingerprint_text(text, ends=ends)))

    def publish(self, newest: dict[int, float]) -> None:
        """Event time read per input partition, published once its items are about to be sent."""
        for i, ts in newest.items():
            if ts > self.input_max.get(i, NEG_INF):
                self.input_max[i] = ts

    def marks(self, now: float) -> tuple[dict[int, float], list[int]]:
        """Event time per input partition read here, and the partitions silent for watermark_idle_s (the
        join partitions stop waiting for those). Silent and read to its end (`caught_up`): one silent with messages
        still to read is late, not idle, and the join waits for it (a stalled one is read again, stall.py)."""
        idle_s, heard, caught_up = self.kafka.watermark_idle_s, self.input_heard, self.caught_up
        return dict(self.input_max), sorted(
            i for i in self.input_max if now - heard.get(i, now) > idle_s and i in caught_up
        )

    def sends(self, to_join: dict[int, list[Item]], now: float, force: bool) -> list[Send]:
        """The messages to the join partitions: their items, with the marks; to the others only the marks,
        once they moved a watermark step (or always, on a heartbeat). Kafka orders nothing across
        partitions, so a join partition may promise no more than the slowest input partition reached."""
        marks, idle = self.marks(now)
        step = self.kafka.watermark_step_s
        out = []
        for q in range(self.kafka.internal_partitions):
            items = to_join.get(q, [])
            sent = self.sent_marks.setdefault(q, {})
            moved = any(ts - sent.get(i, NEG_INF) >= step for i, ts in marks.items())
            if items or moved or force:
                out.append(Send(q, items, marks=marks, idle=idle))
                sent.update(marks)
        return out

    def assign(self, partitions: list[int], now: float) -> None:
        """Input partitions this worker now reads. One with nothing left to read (its last reader read it to the
        end) would never get a mark from here, and the join partitions would wait for it as for a hung reader;
        known from now with no event time, it is reported idle once watermark_idle_s passes without a message."""
        for i in partitions:
            self.caught_up.discard(i)  # known read to its end only once a check after this assignment says so
            if i not in self.input_max:
                self.input_max[i] = NEG_INF
                self.input_heard[i] = now

    def forget(self, partition: int) -> None:
        self.input_max.pop(partition, None)
        self.input_heard.pop(partition, None)
        self.positions.pop(partition, None)
        self.caught_up.discard(partition)
