"""The Kafka stages wired in memory: the workers' topology without a broker or Faust.

Every internal message goes through the real framing (frames.encode/decode) into a per-partition
queue, and the stages are the worker's own classes (streams/kafka/stages.py); only the transport is
a deque. Used by the broker-free tests (tests/kafka/) and to measure what the stages cost apart from
Faust and Kafka (bench/bench_kafka.py).
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from schemas.alert import Alert
from streams.inputs.corpus import load_public
from streams.kafka import fleet, frames
from streams.kafka.ingest import IngestStage
from streams.kafka.inputmsg import InputMessage
from streams.kafka.stages import (
    DeadLetter,
    DomainStage,
    DomainState,
    JoinStage,
    JoinState,
    Send,
)
from streams.settings import Settings


@dataclass
class PipelineOutput:
    alerts: list[Alert] = field(default_factory=list)
    published: list[tuple[bytes, bytes]] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)


def encode_send(send: Send) -> bytes:
    """One internal message as the worker frames it (streams/kafka/app.py `_send`, which also splits by size)."""
    return frames.encode(frames.Batch(send.items, send.wm, send.marks, send.idle))


class StagePipeline:
    """ingest -> join partitions -> domain partitions, in one process, one batch of input at a time."""

    # Every internal message goes through here (tests capture them).
    _encode = staticmethod(encode_send)

    def __init__(self, settings: Settings, now: float = 1.0, last_first: bool = False) -> None:
        k = settings.kafka
        self.settings = settings
        # Domain partitions are drained in partition order, each to the end of its queue: the first runs ahead of
        # the later ones, whose fleet digests then reach it after their time. `last_first` drains them the other
        # way round, so the other partitions run ahead (tests/parity.py runs both).
        self.last_first = last_first
        self.counters: Counter[str] = Counter()
        self.now = now  # monotonic seconds since the stages "started" (idleness only)
        self.ingest = IngestStage(settings, self.counters)
        self.join = JoinStage(settings, self.counters, started=0.0)
        self.domain = DomainStage(settings, self.counters, started=0.0)
        self.join_states = {p: JoinState.fresh(settings.detection) for p in range(k.internal_partitions)}
        self.public = load_public(settings)  # as the worker loads it (streams/kafka/app.py), and gives it to restores
        self.domain_states = {
            q: DomainState.fresh(settings.detection, self.counters, self.public) for q in range(k.internal_partitions)
        }
        for st in self.domain_states.values():
            fleet.listen(st)
        self.join_topic: dict[int, deque[bytes]] = {p: deque() for p in range(k.internal_partitions)}
        self.domain_topic: dict[int, deque[bytes]] = {q: deque() for q in range(k.internal_partitions)}
        self.join_offsets = dict.fromkeys(range(k.internal_partitions), -1)
        self.input_offsets: dict[int, int] = {}
        self.out = PipelineOutput()

    def feed(
        self, messages: Iterable[tuple[int, bytes | None]], ndjson: bool = False, wall: float | None = None
    ) -> None:
        """One ingest batch of (input partition, message value), then everything it causes downstream."""
        msgs = []
        for partition, value in messages:
            offset = self.input_offsets[partition] = self.input_offsets.get(partition, -1) + 1
            msgs.append(InputMessage(partition, offset, None, value, ndjson))
        res = self.ingest.read(msgs, self.now, time.time() if wall is None else wall)
        self.out.dead += res.dead
        self.ingest.publish(res.newest, res.read_to)
        self._checked()
        for send in self.ingest.sends(res.to_join, self.now, force=False):
            self.join_topic[send.partition].append(self._encode(send))
        self.drain()

    def _checked(self) -> None:
        # Everything fed is read at once: every input partition is read to its end, as the worker's stall check
        # (streams/kafka/stall.py) tells its ingest, and a silent one may be reported idle.
        self.ingest.caught_up = set(range(self.settings.kafka.input_partitions))

    def heartbeat(self) -> None:
        self._checked()
        for send in self.ingest.sends({}, self.now, force=True):
            self.join_topic[send.partition].append(self._encode(send))
        self.drain()
        # The worker's clock ticks every domain partition (streams/kafka/clock.py): what a partition's table raised
        # after its last batch (a mix-up a late fleet digest completed) goes out then.
        for q, st in self.domain_states.items():
            dr = self.domain.tick(st, q, self.now)
            self.out.alerts += dr.alerts
            self.out.published += dr.published

    def drain(self) -> None:
        for p, queue in self.join_topic.items():
            while queue:
                self.join_offsets[p] += 1
                batch = frames.decode(queue.popleft())
                jr = self.join.handle(self.join_states[p], p, self.join_offsets[p], batch, self.now)
                self.out.dead += jr.dead
                for send in jr.sends:
                    self.domain_topic[send.partition].append(self._encode(send))
        order = sorted(self.domain_topic, reverse=self.last_first)
        for q in order:
            queue = self.domain_topic[q]
            while queue:
                dr = self.domain.handle(self.domain_states[q], q, frames.decode(queue.popleft()), self.now)
                # What it judged, to the other domain partitions (the fleet topic, without its lag).
                fleet.deliver(q, fleet.told(self.domain_states[q]), self.domain_states, self.counters)
                self.out.alerts += dr.alerts
                self.out.published += dr.published
                self.out.dead += dr.dead


def feed_lines(pipe: StagePipeline, lines: list[bytes], batch: int = 100) -> None:
    """Lines spread round-robin over the input partitions, `batch` per ingest call, then a heartbeat."""
    n = pipe.settings.kafka.input_partitions
    for start in range(0, len(lines), batch):
        chunk = lines[start : start + batch]
        pipe.feed(((start + i) % n, line) for i, line in enumerate(chunk))
    pipe.heartbeat()


def run_lines(settings: Settings, lines: list[bytes], batch: int = 100) -> StagePipeline:
    """A fresh pipeline fed `lines` (feed_lines)."""
    pipe = StagePipeline(settings)
    feed_lines(pipe, lines, batch)
    return pipe
