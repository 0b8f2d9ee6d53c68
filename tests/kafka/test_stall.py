"""A partition the consumer stopped delivering (streams/kafka/stall.py, and its use in streams/kafka/consumer.py and
ingest.py), without a broker: found only while the consumer fetches, read again once until it moves on, never called
idle while the broker holds messages for it. Messages a recovery's end clears from the stream buffers are read again
by streams/kafka/readagain.py (tests/kafka/test_readagain.py). The broker restart test
(tests/broker/test_kafka_runtime.py) is where both were seen."""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from types import SimpleNamespace
from typing import Any

from faust.types import TP

from streams.kafka.consumer import BatchGuardConsumer
from streams.kafka.ingest import IngestStage
from streams.kafka.stall import StallWatch
from streams.settings import Settings

A, B = TP("in", 0), TP("in", 1)


def test_a_partition_that_moves_is_never_stalled() -> None:
    w: StallWatch[TP] = StallWatch(10.0, min_rounds=3)
    for i in range(20):
        assert w.check(i * 5.0, i * 10, {A: (100 + i, 500)}) == []
    assert w.behind() == {A}  # behind its end, but moving


def test_a_partition_stuck_behind_its_end_is_read_again_once_per_offset() -> None:
    w: StallWatch[TP] = StallWatch(10.0, min_rounds=3)
    assert w.check(0.0, 0, {A: (360, 571), B: (100, 100)}) == []
    assert w.check(5.0, 5, {A: (360, 571), B: (100, 100)}) == []
    assert w.check(10.0, 10, {A: (360, 571), B: (100, 100)}) == [(A, 360)]
    # Sought once: not again at the same offset, and no longer counted behind (what is past it may be no message);
    # the re-read from the committed offset back up to it is no new stall.
    assert w.check(30.0, 30, {A: (360, 571)}) == []
    assert w.behind() == set()
    for t, offset in ((35.0, 340), (50.0, 350), (65.0, 360), (80.0, 360)):
        assert w.check(t, int(t), {A: (offset, 571)}) == []
        assert w.behind() == set()
    # It moved past it, then stuck again: a new stall.
    assert w.check(95.0, 95, {A: (400, 571)}) == []
    assert w.behind() == {A}
    assert w.check(110.0, 110, {A: (400, 571)}) == [(A, 400)]
    # Read to its end: caught up, and a later stall at the same offset is one again.
    assert w.check(111.0, 111, {A: (571, 571)}) == []
    w.check(112.0, 112, {A: (400, 571)})
    assert w.check(130.0, 130, {A: (400, 571)}) == [(A, 400)]


def test_a_consumer_that_fetches_nothing_is_held_back_not_stalled() -> None:
    # Back-pressure: the drain loop waits on a full stream, its fetch rounds stand still, and every partition with it.
    w: StallWatch[TP] = StallWatch(10.0, min_rounds=3)
    for t in (0.0, 20.0, 60.0):
        assert w.check(t, 7, {A: (360, 571)}) == []
    assert w.check(61.0, 10, {A: (360, 571)}) == [(A, 360)]  # fetching again, still nothing of it


def test_a_partition_read_to_its_end_or_left_out_starts_over() -> None:
    w: StallWatch[TP] = StallWatch(10.0, min_rounds=1)
    assert w.check(0.0, 0, {A: (360, 571)}) == []
    assert w.check(8.0, 8, {}) == []  # paused, buffered or revoked at this check
    assert w.check(12.0, 12, {A: (360, 571)}) == []  # the clock started again at 12
    assert w.check(13.0, 13, {A: (571, 571)}) == []
    assert w.behind() == set()
    assert w.check(40.0, 40, {A: (571, 571)}) == []
    w.check(41.0, 41, {A: (571, 600)})
    w.forget()
    assert w.behind() == set() and w.check(60.0, 60, {A: (571, 600)}) == []


class Consumer:
    """What `BatchGuardConsumer.reread_stalled` and its helpers read: Faust's offsets and partition sets, the broker's
    offsets, and the seeks they make."""

    def __init__(self, assigned: set[TP], ends: dict[TP, int], earliest: int = 0) -> None:
        self.assigned, self.ends, self.earliest = assigned, ends, earliest
        self.flow_active = True
        self.app = SimpleNamespace(rebalancing=False)
        self._active_partitions: set[TP] | None = None
        self._paused_partitions: set[TP] = set()
        self._buffered_partitions: set[TP] = set()
        self._read_offset: defaultdict[TP, int | None] = defaultdict(lambda: None)
        self._committed_offset: defaultdict[TP, int | None] = defaultdict(lambda: None)
        self._delivered: dict[TP, int] | None = {}
        self._sought: dict[TP, int] | None = None
        self._upto: dict[TP, int] | None = None  # as BatchGuardConsumer's: how far a gappy topic's seek reaches
        self._rounds = 0
        self.seeks: list[tuple[str, TP, int]] = []

    def assignment(self) -> set[TP]:
        return self.assigned

    async def highwaters(self, *tps: TP) -> dict[TP, int]:
        return {tp: self.ends[tp] for tp in tps}

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        return dict.fromkeys(tps, self.earliest)

    async def seek_wait(self, partitions: dict[TP, int]) -> None:
        for tp, offset in partitions.items():
            self.seeks.append(("seek", tp, offset))
            self._read_offset[tp] = offset

    async def rewind(self, tp: TP, offset: int) -> None:
        self.seeks.append(("rewind", tp, offset))

    _seek_again = BatchGuardConsumer._seek_again
    fetchable = BatchGuardConsumer.fetchable
    next_offsets = BatchGuardConsumer.next_offsets
    reread_stalled = BatchGuardConsumer.reread_stalled


def _check(c: Consumer, w: StallWatch[TP], topics: set[str], internal: set[str], rounds: int) -> Any:
    c._rounds = rounds
    return asyncio.run(c.reread_stalled(w, topics, internal))  # type: ignore[arg-type]


def test_the_consumer_seeks_a_stalled_partition_back_to_its_committed_offset() -> None:
    inp, mid = TP("in", 2), TP("join", 0)
    c = Consumer({inp, mid}, {inp: 571, mid: 90})
    c._delivered = {inp: 359, mid: 40}  # delivered, but maybe not read by the stage (a cleared buffer)
    c._committed_offset[inp] = 340  # read by the stage: everything before it
    w: StallWatch[TP] = StallWatch(0.0, min_rounds=2)  # no wait: the clock is the event loop's
    assert _check(c, w, {"in", "join"}, {"join"}, 0) == []
    assert c.seeks == []
    assert sorted(_check(c, w, {"in", "join"}, {"join"}, 5)) == [(inp, 340), (mid, 41)]
    # The input partition plainly (a transactional topic has gaps), the internal one through `rewind` (no gaps there);
    # one that never committed from its next offset to read.
    assert sorted(c.seeks) == [("rewind", mid, 41), ("seek", inp, 340)]
    assert c._delivered is not None and inp not in c._delivered  # the next offset is where it was sought now
    assert asyncio.run(c.next_offsets([inp])) == {inp: 340}


def test_the_consumer_leaves_alone_what_it_does_not_fetch_now() -> None:
    paused, buffered, other = TP("in", 0), TP("in", 1), TP("table-changelog", 0)
    c = Consumer({paused, buffered, other}, {paused: 10, buffered: 10, other: 10})
    c._paused_partitions, c._buffered_partitions = {paused}, {buffered}
    assert c.fetchable({"in"}) == []
    c._paused_partitions = set()
    assert c.fetchable({"in"}) == [paused]
    c.app.rebalancing = True
    assert c.fetchable({"in"}) == []
    c.app.rebalancing, c.flow_active = False, False
    assert c.fetchable({"in"}) == []


def test_a_partition_never_read_nor_committed_starts_at_the_brokers_earliest_offset() -> None:
    fresh, sought = TP("in", 0), TP("in", 1)
    c = Consumer({fresh, sought}, {fresh: 10, sought: 10}, earliest=4)
    c._read_offset[sought] = 7  # an assignment sought it to its committed offset
    assert asyncio.run(c.next_offsets([fresh, sought])) == {fresh: 4, sought: 7}


def test_the_delivery_records_the_last_offset_of_each_partition() -> None:
    from tests.kafka.test_consumer_batch import Harness, batch

    h = Harness()
    h.deliver(batch("internal", range(10, 15)) + batch("input", range(3, 5)))
    assert h._delivered == {TP("internal", 0): 14, TP("input", 0): 4}


def test_only_an_input_partition_known_read_to_its_end_is_reported_idle() -> None:
    # Silence alone is also what a partition waiting for its reader looks like (paused while the worker restores, a
    # backlog, a stall): reported idle, it let a join partition pass its unread canary plants.
    ingest = IngestStage(Settings(), Counter())
    ingest.assign([0, 1], now=0.0)
    idle_s = Settings().kafka.watermark_idle_s
    assert ingest.marks(idle_s + 1)[1] == []
    ingest.caught_up = {0}
    assert ingest.marks(idle_s + 1)[1] == [0]
    assert ingest.marks(idle_s - 1)[1] == []  # read to its end, but not silent long enough
    ingest.forget(0)
    ingest.assign([0], now=idle_s + 1)  # taken up again: known read to its end only once a check says so
    assert ingest.marks(2 * idle_s + 2)[1] == []


def test_the_watch_knows_which_partitions_are_read_to_their_end() -> None:
    w: StallWatch[TP] = StallWatch(10.0, min_rounds=1)
    w.check(0.0, 0, {A: (571, 571), B: (100, 200)})
    assert w.caught_up() == {A}
    w.check(5.0, 5, {B: (200, 200)})  # A not fetchable at this check (paused, buffered): not known read to its end
    assert w.caught_up() == {B}
    # Read again from a stall and nothing came: what lies past it is no message (a transaction's commit marker).
    w.check(10.0, 10, {A: (360, 361)})
    assert w.check(20.0, 20, {A: (360, 361)}) == [(A, 360)]
    w.check(25.0, 25, {A: (360, 361)})
    assert w.caught_up() == {A}
    w.forget()
    assert w.caught_up() == set()
