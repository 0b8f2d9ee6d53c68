"""The ingest stage, without Faust: input messages -> validated, text-free records per join partition.

Each event is validated here and nowhere else (streams/kafka/records.py carries it on). Text is
fingerprinted here and dropped here, canary markers become keyed hashes here, and an event too far
ahead of the wall clock is rejected here (`future_ts`) before it can move any watermark. Stateless
but for the event-time marks it publishes per input partition. Wall-clock time is passed in.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from detectors.pipeline import CanaryPolicy, EventClock, ingest_apart
from schemas.events import Canary, Event, Fingerprint, Request
from streams.kafka import records
from streams.kafka.frames import INPUT, Item, Source
from streams.kafka.inputmsg import InputMessage, intake
from streams.kafka.stages import NEG_INF, DeadLetter, Send
from streams.routing import partition_of, routing_key
from streams.settings import Settings


@dataclass(slots=True)
class IngestResult:
    to_join: dict[int, list[Item]] = field(default_factory=dict)
    newest: dict[int, float] = field(default_factory=dict)  # input partition -> newest event time read
    read_to: dict[int, int] = field(default_factory=dict)  # input partition -> last offset read (`publish`)
    dead: list[DeadLetter] = field(default_factory=list)
    event_types: list[str] = field(default_factory=list)  # of every admitted event, for the sinks


class IngestStage:
    """Validates each event once, fingerprints its text and drops it, turns markers into keyed ids, routes."""

    def __init__(self, settings: Settings, counters: Counter[str]) -> None:
        self.kafka = settings.kafka
        self.max_bytes = settings.ingest.max_event_bytes
        self.counters = counters
        self.ingest = ingest_apart(settings.detection)  # the core's text step: markers and texts become keys here
        self.fingerprinter = self.ingest.fingerprinter
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
        last: InputMessage | None = None
        seq = 0  # position of each item within its message: stable, since it depends on content only
        events = intake(
            messages, self._begin_at(now, res.read_to), wall, self.max_bytes, self.counters, res.dead, self._step
        )
        for msg, event, routed in events:
            p = msg.partition
            if event.ts > res.newest.get(p, NEG_INF):
                res.newest[p] = event.ts
            res.event_types.append(event.type)
            if msg is not last:
                last, seq = msg, 0
            source = Source(INPUT, p)
            for q, kind, payload in routed:
                res.to_join.setdefault(q, []).append(Item(source, msg.offset, seq, kind, payload))
                seq += 1
        return res

    def _begin_at(self, now: float, read_to: dict[int, int]) -> Callable[[InputMessage], EventClock]:
        def begin(msg: InputMessage) -> EventClock:
            self.counters["ingest.messages"] += 1
            read_to[msg.partition] = msg.offset
            self.input_heard[msg.partition] = now
            clock = self.clocks.get(msg.partition)
            if clock is None:
                clock = self.clocks[msg.partition] = EventClock(self.max_skew_s)
            return clock

        return begin

    def _step(self, msg: InputMessage, event: Event, line: bytes, line_no: int | None) -> list[tuple[int, str, bytes]]:
        return self._records(event)

    def _records(self, event: Event) -> list[tuple[int, str, bytes]]:
        """(join partition, kind, record) for one valid event; EventError for what no stage could use."""
        n = self.kafka.internal_partitions
        q = partition_of(routing_key(event), n)
        if isinstance(event, (Canary, Request)) and (isinstance(event, Canary) or event.canaries):
            self.policy.check(event)  # canary_tenant: only probe tenants plant markers
        printed = self.ingest(event)  # the core's one text step: text -> prints and keys, markers -> plants
        # Canaries are global: every join partition must know every marker before the outputs that follow it in
        # event time. Sent with the event itself, not relayed by its partition; a leak read before a plant on
        # another input partition waits at the join for the watermark (stages.py).
        out = [
            (r, "canary" if r == q and event.type == "canary" else "plant", records.plant_record(p))
            for p in printed.plants
            for r in range(n)
        ]
        ev = printed.event
        if ev.type == "canary":
            return out
        if printed.prints is not None:
            # Our own output: valid by construction, so built without validating up to a million hashes. The
            # positions go on with the hashes: without them the join and domain stages would judge a run by its
            # matches alone, and raise alerts the embedded runner does not (docs/adr/0004, "coverage").
            wire = Fingerprint.model_construct(**self.fingerprinter.wire_fields(printed.prints))
            ev = ev.model_copy(update={"prompt_fingerprint" if ev.type == "request" else "output_fingerprint": wire})
        # The keys of the markers a prompt re-sends are the receiver's own context (`join.unexplained`): the join
        # stage takes them out of its response's hits, once the watermark passed the exchange.
        out.append((q, "event", records.event_record(ev, printed.keys or None)))
        return out

    def publish(self, newest: dict[int, float], read_to: dict[int, int] | None = None) -> None:
        """Event time read per input partition, published once its items are about to be sent; and how far each was
        read (`positions`). Not at `read`: a batch read across a rebalance is dropped whole (streams/kafka/app.py),
        and its offsets, counted as read, made a partition whose re-read was still buffered look read to its end,
        and so idle once silent, while its items were unsent (`caught_up`)."""
        for i, ts in newest.items():
            if ts > self.input_max.get(i, NEG_INF):
                self.input_max[i] = ts
        if read_to:
            self.positions.update(read_to)

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
