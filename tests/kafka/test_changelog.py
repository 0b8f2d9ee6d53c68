"""A checkpoint's table writes and their delivery (streams/kafka/changelog.py), without a broker: each write sets the
store and sends its changelog message to the partition named, and the checkpointer acks the messages a checkpoint
covers only once the broker acknowledged every write of it. Faust's own table writes keep no handle on the message,
and its flush gives up on its buffer after 0.1 s: a commit could then pass a checkpoint the broker never got."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from test_checkpoint_background import _Stage, lines  # noqa: F401  (the module's fixture)
from test_incremental_checkpoint import canon

from streams.kafka import checkpoint
from streams.kafka.changelog import ChangelogPartition, WriteLost


class FaustTable:
    """A Faust table's public surface the adapter uses: its store, and `send_changelog`'s future per message, which
    the test resolves as the broker would."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.sent: list[tuple[int, bytes, bytes | None, Any, asyncio.Future[Any]]] = []

    def send_changelog(
        self, partition: int, key: bytes, value: bytes | None, value_serializer: Any = None
    ) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.sent.append((partition, key, value, value_serializer, fut))
        return fut

    def acknowledge(self, error: Exception | None = None) -> None:
        for *_, fut in self.sent:
            if not fut.done():
                fut.set_exception(error) if error is not None else fut.set_result(None)


def test_a_write_sets_the_store_and_goes_to_the_partition_named() -> None:
    async def run() -> None:
        t = FaustTable()
        part = ChangelogPartition(t, 3)
        part[b"k"] = b"v"
        assert t.data == {b"k": b"v"} and part[b"k"] == b"v" and list(part) == [b"k"] and len(part) == 1
        del part[b"k"]
        assert t.data == {}
        # A tombstone as Faust's own delete sends it: raw, so no serializer makes a value of None.
        assert [(p, k, v, s) for p, k, v, s, _ in t.sent] == [(3, b"k", b"v", None), (3, b"k", None, "raw")]
        assert part.pop(b"gone", None) is None and len(t.sent) == 2

    asyncio.run(run())


def test_written_returns_once_every_write_is_on_the_broker() -> None:
    async def run() -> None:
        t = FaustTable()
        part = ChangelogPartition(t, 0)
        part[b"a"], part[b"b"] = b"1", b"2"
        waiting = asyncio.create_task(part.written())
        also = asyncio.create_task(part.written())  # a revocation waits for the same writes
        await asyncio.sleep(0.01)
        assert not waiting.done() and not also.done()
        t.acknowledge()
        await asyncio.wait_for(asyncio.gather(waiting, also), 1)
        assert part.sent == []

    asyncio.run(run())


def test_a_refused_or_lost_write_is_reported_once() -> None:
    async def run() -> None:
        t = FaustTable()
        part = ChangelogPartition(t, 0)
        part[b"a"] = b"1"
        t.acknowledge(OSError("not leader"))
        with pytest.raises(WriteLost, match="failed"):
            await part.written()
        await part.written()  # given up with its checkpoint: a later one does not wait on it again
        part[b"b"] = b"2"  # never acknowledged
        with pytest.raises(WriteLost, match="not acknowledged"):
            await part.written(timeout_s=0.05)

    asyncio.run(run())


async def _until(done: Callable[[], bool], what: str) -> None:
    """Until `done()`: the checkpoint stores in the background, and a fixed sleep let a loaded machine go on before it
    had (an acknowledgement with nothing sent yet, which then never was). 30 s at most: a bound, not a timing."""
    for _ in range(3000):
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def _manifest_on_its_way(broker: FaustTable, q: int) -> None:
    """Until the checkpoint's manifest is sent and not yet acknowledged."""
    manifest = checkpoint.snapshot_key("domain", q)

    def sent() -> bool:
        return any(k == manifest and not fut.done() for _, k, *_, fut in broker.sent)

    await _until(sent, "the checkpoint's manifest went to the broker")


def _broker_stage(events: list[bytes]) -> tuple[_Stage, FaustTable]:
    t = _Stage(events)
    faust_table = FaustTable()
    t.table = ChangelogPartition(faust_table, t.q)  # type: ignore[assignment]
    t.flush.open.set()
    return t, faust_table


def test_a_checkpoint_acks_nothing_until_the_broker_has_all_of_it(lines: list[bytes]) -> None:  # noqa: F811
    async def run() -> None:
        t, broker = _broker_stage(lines)
        t.process(3)
        assert await t.maybe()
        await _manifest_on_its_way(broker, t.q)
        manifest = checkpoint.snapshot_key("domain", t.q)
        assert manifest in broker.data and any(k == manifest for _, k, *_ in broker.sent)  # stored, on its way
        assert t.acked() == [], "acked before the broker had the checkpoint: a commit could pass it"
        broker.acknowledge()
        await t.cp.settle()
        assert t.acked() == [0, 1, 2] and t.pipe.counters["snapshots.domain"] == 1

    asyncio.run(run())


def test_a_write_the_broker_refuses_acks_nothing_and_the_next_checkpoint_copies_every_piece(
    lines: list[bytes],  # noqa: F811
) -> None:
    async def run() -> None:
        t, broker = _broker_stage(lines)
        t.process(2)
        assert await t.maybe()
        await _manifest_on_its_way(broker, t.q)
        broker.acknowledge(OSError("broker gone"))
        await t.cp.settle()
        key = ("domain", t.q)
        assert t.acked() == [] and t.pipe.counters["snapshot_errors.domain"] == 1 and key in t.cp.spoiled
        t.process(1)
        assert await t.maybe()
        await _manifest_on_its_way(broker, t.q)
        broker.acknowledge()
        await t.cp.settle()
        assert t.acked() == [0, 1, 2] and key not in t.cp.spoiled
        again = checkpoint.Checkpointer(t.s.kafka, t.pipe.counters).restore(
            "domain", t.q, broker.data, t.s.detection, t.pipe.public
        )
        assert again is not None and canon(again) == canon(t.st)

    asyncio.run(run())


def test_a_partition_revoked_while_its_writes_are_on_the_way_acks_nothing(lines: list[bytes]) -> None:  # noqa: F811
    async def run() -> None:
        t, broker = _broker_stage(lines)
        t.process(2)
        assert await t.maybe()
        await _manifest_on_its_way(broker, t.q)
        t.cp.forget("domain", t.q)  # the rebalance: the next owner restores what lands and replays from the last ack
        broker.acknowledge()
        await _until(lambda: bool(t.pipe.counters["snapshot_abandoned.domain"]), "the store saw the acks")
        assert t.acked() == [] and t.pipe.counters["snapshot_abandoned.domain"] == 1

    asyncio.run(run())
