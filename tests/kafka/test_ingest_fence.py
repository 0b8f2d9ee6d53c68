"""The staged ingest's fence at a rebalance (streams/kafka/app.py `_ingest`), without a broker: the worker's own
KafkaPipeline (Faust app built, not started) fed by a stand-in for Faust's `take_events`. A message of an earlier
consumer generation (what take_events' buffer held through a rebalance) is not sent on: its partition's owner now
reads it again from the last commit, and sent anyway it made a second writer of the partition's items at the join
stage. Seen on the real broker as a canary leak judged without its plant (docs/operations.md, "Silence is not
idle"); the two-worker broker test (tests/broker/test_kafka_runtime.py) runs the same code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson

from streams.kafka.app import KafkaPipeline
from streams.kafka.stages import Send
from streams.settings import Settings


def _event(partition: int, offset: int, generation: int) -> Any:
    event = {"type": "cache_stats", "event_id": f"c{partition}-{offset}", "ts": 1_780_000_000.0 + offset}
    event |= {"cache_domain": "d1", "role": "unified", "capacity_tokens": 10, "used_tokens": 0}
    message = SimpleNamespace(partition=partition, offset=offset, key=None, value=orjson.dumps(event), headers=[])
    message.generation_id = generation
    return SimpleNamespace(message=message)


class _Stream:
    """Faust's stream as `_ingest` uses it: take_events yields the given batches, each after `before(i)` ran."""

    def __init__(self, batches: list[list[Any]], before: Any = None) -> None:
        self.batches, self.before = batches, before

    async def take_events(self, max_: int, within: float) -> AsyncIterator[list[Any]]:
        for i, batch in enumerate(self.batches):
            if self.before is not None:
                await self.before(i)
            yield batch


def pipeline(tmp_path: Path) -> tuple[KafkaPipeline, list[Send]]:
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key"},
        kafka={"data_dir": str(tmp_path), "topology": "staged"},
    )
    pipe = KafkaPipeline(s)
    sent: list[Send] = []

    async def record(topic: Any, send: Send, counter: str) -> None:
        sent.append(send)

    pipe._send = record  # type: ignore[method-assign]
    pipe.app.consumer_generation_id = 2
    return pipe, sent


def _offsets(sent: list[Send]) -> set[tuple[int, int]]:
    return {(it.source.partition, it.offset) for send in sent for it in send.items}


def _rebalance_while_sending(pipe: KafkaPipeline, at: int) -> Any:
    """`_Stream`'s `before`: batch `at` is read while the send lock is held (a heartbeat sending), and the rebalance
    (generation 3) comes then, before the batch is sent."""

    async def before(i: int) -> None:
        if i == at:
            await pipe.send_lock.acquire()

            async def later() -> None:
                await asyncio.sleep(0)
                pipe.app.consumer_generation_id = 3
                pipe.send_lock.release()

            asyncio.get_running_loop().create_task(later())

    return before


def test_a_message_of_an_earlier_generation_is_not_sent_on(tmp_path: Path) -> None:
    pipe, sent = pipeline(tmp_path)
    batch = [_event(0, 7, generation=1), _event(0, 8, generation=1), _event(1, 3, generation=2)]
    asyncio.run(pipe._ingest(_Stream([batch])))
    assert _offsets(sent) == {(1, 3)}
    assert pipe.counters["ingest.stale_skipped"] == 2
    assert pipe.ingest.positions == {1: 3}, "a stale message must not count as read (nor its partition as heard)"
    assert 0 not in pipe.ingest.input_max


def test_a_batch_read_across_a_rebalance_is_dropped_whole(tmp_path: Path) -> None:
    pipe, sent = pipeline(tmp_path)

    batches = [[_event(0, 1, generation=2)], [_event(0, 1, generation=3), _event(0, 2, generation=3)]]
    # The second batch comes once the generation moved: the partition read again from the commit.
    asyncio.run(pipe._ingest(_Stream(batches, _rebalance_while_sending(pipe, 0))))
    assert pipe.counters["ingest.stale_skipped"] == 1
    assert _offsets(sent) == {(0, 1), (0, 2)}
    assert [it.offset for send in sent for it in send.items] == [1, 2], "the stale copy of offset 1 went first"


def test_a_batch_dropped_across_a_rebalance_is_not_counted_as_read(tmp_path: Path) -> None:
    # Its offsets counted as read made the partition look read to its end while its re-read was still buffered
    # (`caught_up` compares what the ingest read with what the consumer delivered), and a silence then reported it
    # idle: the join partitions would pass its unsent items and orphan their exchanges' other halves.
    pipe, sent = pipeline(tmp_path)

    batches = [[_event(0, 1, generation=2)], [_event(0, 2, generation=2), _event(0, 3, generation=2)]]
    asyncio.run(pipe._ingest(_Stream(batches, _rebalance_while_sending(pipe, 1))))
    assert pipe.counters["ingest.stale_skipped"] == 2
    assert _offsets(sent) == {(0, 1)}
    assert pipe.ingest.positions == {0: 1}, "offsets 2 and 3 were dropped, not read"


def test_a_message_of_an_earlier_generation_is_never_acked(tmp_path: Path) -> None:
    # Faust's streams ack what they skip as stale, and its commit timer runs through a rebalance: acked, a buffered
    # message of the earlier generation let a commit pass it before the seek to the committed offsets, and the
    # partition, kept by this worker, was then read from after it (its events lost). Unacked, it is read again.
    from faust.types import TP
    from faust.types.tuples import Message

    pipe, _ = pipeline(tmp_path)
    consumer = pipe.app.consumer
    tp = TP(pipe.names.input, 0)
    pipe.app.topics._acking_topics.add(tp.topic)  # type: ignore[attr-defined]  # as the agent's subscription does

    def message(offset: int, generation: int) -> Message:
        fields = (tp.topic, tp.partition, offset, 0.0, None, None, b"k", b"v", None, None)
        return Message(*fields, generation_id=generation)

    stale = message(5, generation=1)
    consumer._unacked_messages.add(stale)  # type: ignore[attr-defined]  # tracked as Faust tracks what it reads
    assert consumer.ack(stale) is False
    assert dict(consumer._acked) == {} and stale not in consumer._unacked_messages  # type: ignore[attr-defined]
    assert consumer.ack(message(5, generation=2)) is True  # the same offset, read again after the seek
    assert dict(consumer._acked) == {tp: [5]}  # type: ignore[attr-defined]
