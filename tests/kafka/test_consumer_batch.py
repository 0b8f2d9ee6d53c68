"""The consumer's delivery of one fetched batch (streams/kafka/consumer.py), without a broker: a rebalance
that comes in while a batch is being delivered stops it where Faust's own lazy `getmany` would stop.

Faust checks the flow and the consumer generation before it yields each fetched message. A batch read whole
must keep those checks: delivered past a rebalance, its rest would move read offsets beyond the positions the
new assignment seeked to, and the consumer would drop the re-read messages as already read (alerts missing
after a restart). The same consumer runs on the real broker in every Kafka test."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

from faust.types import TP

from streams.kafka.consumer import BatchGuardConsumer

INPUT, OTHER = "input", "internal"


class Message:
    def __init__(self, topic: str, offset: int) -> None:
        self.topic, self.offset = topic, offset
        self.refs = 0

    def incref(self) -> None:
        self.refs += 1


class Harness:
    """The attributes `_deliver` reads from its consumer, with a generation a test can move."""

    def __init__(self) -> None:
        self.delivered: list[int] = []
        self.handed: list[list[int]] = []
        self.tracked: list[int] = []
        self._read_offset: defaultdict[TP, int | None] = defaultdict(lambda: None)  # as Faust's
        self.flow_active = True
        self.rebalance_after: int | None = None  # move the generation during this offset's delivery
        self.rebalance_in_flow_control = False
        self._sought: dict[TP, int] | None = None  # as BatchGuardConsumer's: set by a seek back
        self._upto: dict[TP, int] | None = None  # as BatchGuardConsumer's: how far a gappy topic's seek reaches
        self._delivered: dict[TP, int] | None = None  # as BatchGuardConsumer's: the last offset delivered
        self.rewind_at: tuple[int, int] | None = None  # (offset, to): seek back during this offset's delivery

        async def acquire() -> None:
            if self.rebalance_in_flow_control:
                self.app.consumer_generation_id += 1

        async def ebb() -> None:
            return None

        async def hand(messages: list[Any]) -> None:
            self.handed.append([m.offset for m in messages])

        self.app = SimpleNamespace(
            consumer_generation_id=1,
            batch_handlers={},
            topics=SimpleNamespace(acks_enabled_for=lambda topic: True),
            flow_control=SimpleNamespace(acquire=acquire),
            producer=SimpleNamespace(buffer=SimpleNamespace(wait_until_ebb=ebb)),
        )
        self.hand = hand
        self.log = SimpleNamespace(dev=lambda *a, **k: None)

    async def callback(self, message: Message) -> None:
        self.delivered.append(message.offset)
        if self.rewind_at is not None and message.offset == self.rewind_at[0]:
            # A stage seeks the partition back while this delivery awaits (Rewinds.past -> rewind).
            tp = TP(message.topic, 0)
            if self._sought is None:
                self._sought = {}
            self._sought[tp] = self.rewind_at[1]
            self._read_offset[tp] = self.rewind_at[1]
        if message.offset == self.rebalance_after:
            # The rebalance runs while this delivery awaits: flow stopped, new generation.
            self.flow_active = False
            self.app.consumer_generation_id += 1

    def track_message(self, message: Message) -> None:
        self.tracked.append(message.offset)

    async def _add_gap(self, tp: TP, start: int, end: int) -> None:
        return None

    def deliver(self, batch: list[tuple[TP, Message]]) -> None:
        generation = self.app.consumer_generation_id
        asyncio.run(BatchGuardConsumer._deliver(self, batch, generation))  # type: ignore[arg-type]


def batch(topic: str, offsets: range) -> list[tuple[TP, Message]]:
    tp = TP(topic, 0)
    return [(tp, Message(topic, o)) for o in offsets]


def test_a_whole_batch_is_delivered_in_order_and_moves_the_read_offset() -> None:
    h = Harness()
    h.deliver(batch(OTHER, range(10, 15)))
    assert h.delivered == [10, 11, 12, 13, 14]
    assert h._read_offset[TP(OTHER, 0)] == 14


def test_a_rebalance_during_delivery_stops_the_rest_of_the_batch() -> None:
    h = Harness()
    h.rebalance_after = 12
    h.deliver(batch(OTHER, range(10, 15)))
    # 12 was being delivered when the rebalance came; 13 and 14 are read again by the new assignment.
    assert h.delivered == [10, 11, 12]
    assert h._read_offset[TP(OTHER, 0)] == 12


def test_a_batch_handler_gets_its_topic_as_one_list_and_the_rest_goes_one_by_one() -> None:
    h = Harness()
    h.app.batch_handlers = {INPUT: h.hand}
    h.deliver(batch(INPUT, range(0, 4)) + batch(OTHER, range(7, 9)))
    assert h.handed == [[0, 1, 2, 3]]
    assert h.delivered == [7, 8]
    assert h.tracked == [0, 1, 2, 3]


def test_a_batch_is_not_handed_over_when_a_rebalance_came_while_it_waited_for_flow_control() -> None:
    h = Harness()
    h.app.batch_handlers = {INPUT: h.hand}
    h.rebalance_in_flow_control = True
    h.deliver(batch(INPUT, range(0, 4)))
    # Handed after the rebalance it would carry the new revocation count and pass as fresh.
    assert h.handed == []


def test_a_partition_sought_back_during_delivery_is_not_delivered_further_and_keeps_the_sought_offset() -> None:
    h = Harness()
    h.rewind_at = (12, 5)
    h.deliver(batch(OTHER, range(10, 15)) + batch(INPUT, range(20, 22)))
    # 13 and 14 are past the new position: read again after 5..12. Other partitions go on.
    assert h.delivered == [10, 11, 12, 20, 21]
    assert h._read_offset[TP(OTHER, 0)] == 5
    assert h._read_offset[TP(INPUT, 0)] == 21


def test_a_batch_fetched_before_a_seek_back_is_not_delivered_and_the_re_read_is() -> None:
    h = Harness()
    tp = TP(OTHER, 0)
    # A stage sought the partition back to 5 after this batch (30..33) was fetched from the old position.
    h._sought = {tp: 5}
    h._read_offset[tp] = 5
    h.deliver(batch(OTHER, range(30, 34)))
    assert h.delivered == [] and h._read_offset[tp] == 5
    h.deliver(batch(OTHER, range(5, 8)))  # the re-read
    assert h.delivered == [5, 6, 7] and h._read_offset[tp] == 7 and not h._sought


def test_an_input_partition_sought_back_takes_the_first_message_up_to_the_one_that_came_too_early() -> None:
    h = Harness()
    h.app.batch_handlers = {INPUT: h.hand}
    tp = TP(INPUT, 0)
    # The direct stage read 41 after 30 and sought back to 31, accepting 31..41 (gaps.py).
    h._sought, h._upto = {tp: 31}, {tp: 41}
    h._read_offset[tp] = 31
    h.deliver(batch(INPUT, range(42, 45)))  # fetched before the seek: dropped, the read offset stays
    assert h.handed == [] and h._read_offset[tp] == 31
    h.deliver(batch(INPUT, range(41, 43)))  # the log's own gap: 41 is the partition's next after all
    assert h.handed == [[41, 42]] and not h._sought and not h._upto


def test_an_input_partition_sought_back_reads_the_messages_it_had_skipped() -> None:
    h = Harness()
    h.app.batch_handlers = {INPUT: h.hand}
    tp = TP(INPUT, 0)
    h._sought, h._upto = {tp: 31}, {tp: 41}
    h.deliver(batch(INPUT, range(31, 35)))
    assert h.handed == [[31, 32, 33, 34]] and not h._sought and not h._upto
