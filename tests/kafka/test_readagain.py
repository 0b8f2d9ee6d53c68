"""Messages a recovery's end clears from the stream buffers, read again (streams/kafka/readagain.py), without a broker:
the flow control names the first cleared offset of each partition, only a clear while the flow is on (the end of a
recovery) is read again, never a changelog or a partition no longer assigned, and the consumer passes over what it
fetched before the seek. The broker restart test (tests/broker/test_kafka_runtime.py) is where the loss was seen."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from faust.types import TP
from mode.utils.queues import FlowControlQueue

from streams.kafka.consumer import BatchGuardConsumer
from streams.kafka.readagain import ReadAgain, ReadAgainFlowControl, to_read_again

A, B = TP("in", 0), TP("in", 1)
CHANGELOG = TP("t-changelog", 0)


def test_the_flow_control_tells_which_partitions_it_cleared_and_from_which_offset() -> None:
    async def run() -> tuple[list[dict[TP, int]], int]:
        control = ReadAgainFlowControl()
        told: list[dict[TP, int]] = []
        control.on_clear = told.append
        channel = FlowControlQueue(flow_control=control, clear_on_resume=True)
        for tp, offset in ((A, 424), (A, 425), (B, 17), (A, 426)):
            channel.put_nowait(SimpleNamespace(message=SimpleNamespace(tp=tp, offset=offset)))
        channel.put_nowait(object())  # not a message: ignored
        control.resume()  # Faust's recovery resumes the flow control as its last step, which clears the buffers
        return told, channel.qsize()

    told, left = asyncio.run(run())
    assert told == [{A: 424, B: 17}] and left == 0


def test_an_empty_clear_tells_nobody() -> None:
    async def run() -> list[dict[TP, int]]:
        control = ReadAgainFlowControl()
        told: list[dict[TP, int]] = []
        control.on_clear = told.append
        FlowControlQueue(flow_control=control, clear_on_resume=True)
        control.resume()
        return told

    assert asyncio.run(run()) == []


def test_only_a_clear_while_the_flow_is_on_is_read_again() -> None:
    lowest = {A: 424, CHANGELOG: 9, TP("in", 7): 3}
    assigned = {A, B, CHANGELOG}
    # A rebalance's clear: the assignment seeks every partition to its committed offset.
    assert to_read_again(lowest, flow_active=False, changelogs={"t-changelog"}, assigned=assigned) == {}
    # The end of a recovery: not the changelog (recovery reads it), not a partition no longer assigned.
    assert to_read_again(lowest, flow_active=True, changelogs={"t-changelog"}, assigned=assigned) == {A: 424}


class Consumer:
    """What `ReadAgain` and `BatchGuardConsumer.reread` use of the consumer."""

    def __init__(self, assigned: set[TP]) -> None:
        self.assigned = assigned
        self.flow_active = True
        self._delivered: dict[TP, int] | None = {A: 581}
        self._sought: dict[TP, int] | None = None
        self._upto: dict[TP, int] | None = None  # as BatchGuardConsumer's: how far a gappy topic's seek reaches
        self.seeks: list[tuple[TP, int]] = []

    def assignment(self) -> set[TP]:
        return self.assigned

    async def seek_wait(self, partitions: dict[TP, int]) -> None:
        self.seeks.extend(partitions.items())

    _seek_again = BatchGuardConsumer._seek_again
    reread = BatchGuardConsumer.reread


def test_cleared_messages_are_read_again_from_the_first_one() -> None:
    c = Consumer({A, B, CHANGELOG})
    again = ReadAgain(lambda: c, lambda: {"t-changelog"})  # type: ignore[arg-type, return-value]

    async def run(flow: bool) -> None:
        c.flow_active = flow
        again({A: 424, CHANGELOG: 9, TP("in", 7): 3})
        for _ in range(3):
            await asyncio.sleep(0)

    asyncio.run(run(False))
    assert c.seeks == [] and not c._sought and again.count == 0
    asyncio.run(run(True))
    # Messages fetched before the seek are passed over until 424 comes again, and the stall watch no longer counts
    # 581 as delivered.
    assert c.seeks == [(A, 424)]
    assert c._sought == {A: 424} and c._delivered == {}
    assert again.count == 1 and not again._seeks  # the seek's task is let go once done


def test_the_consumer_passes_over_what_it_fetched_before_the_seek_at_once() -> None:
    # `_sought` is set before the seek task runs: a delivery in between must not move the read offset past 424.
    c = Consumer({A})

    async def run() -> None:
        task = c.reread({A: 424})  # type: ignore[arg-type]
        assert c._sought == {A: 424} and c.seeks == []
        await task
        assert c.seeks == [(A, 424)]

    asyncio.run(run())
