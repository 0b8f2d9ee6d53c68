"""`flush_all` (streams/kafka/consumer.py), without a broker: Faust's own producer buffer (the one table writes go
through) with a send that stalls longer than the 0.1 s Faust's flush waits for. Faust's flush then returns with
the write still buffered, and a commit after it could pass a snapshot that never reached the broker; the
barrier waits until the buffer has handed everything put before it to the Kafka client."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from faust.transport.producer import ProducerBuffer

from streams.kafka.consumer import flush_all


class SlowChannel:
    def __init__(self, log: list[str], name: str, delay_s: float) -> None:
        self.log, self.name, self.delay_s = log, name, delay_s

    async def publish_message(self, fut: Any, wait: bool = False) -> None:
        await asyncio.sleep(self.delay_s)  # e.g. the client waiting for room or metadata on a busy machine
        self.log.append(f"client has {self.name}")


class Producer:
    """Faust's Producer.flush, as it is: its buffer's flush, then the client's."""

    def __init__(self, buffer: ProducerBuffer, log: list[str]) -> None:
        self.buffer, self.log = buffer, log
        self.app = buffer.app

    async def flush(self) -> None:
        await self.buffer.flush()
        self.log.append("client flushed")


def run(flush: str) -> list[str]:
    async def main() -> list[str]:
        log: list[str] = []
        buffer = ProducerBuffer()
        buffer.app = SimpleNamespace(conf=SimpleNamespace(producer_threaded=False))  # type: ignore[assignment]
        await buffer.start()
        try:
            producer = Producer(buffer, log)
            for name in ("piece", "manifest"):
                buffer.put(SimpleNamespace(message=SimpleNamespace(channel=SlowChannel(log, name, 0.3))))  # type: ignore[arg-type]
            await (flush_all(producer) if flush == "barrier" else producer.flush())
            return list(log)
        finally:
            while len(log) < 3:  # let the buffer send the rest before it stops (its stop flushes)
                await asyncio.sleep(0.05)
            await buffer.stop()

    return asyncio.run(main())


def test_fausts_flush_returns_with_writes_still_buffered() -> None:
    # The hole the barrier closes: the client is flushed before it has the snapshot's writes.
    assert run("faust")[0] == "client flushed"


def test_the_barrier_hands_every_earlier_write_to_the_client_before_it_flushes() -> None:
    assert run("barrier") == ["client has piece", "client has manifest", "client flushed"]


def test_the_barrier_does_not_wait_for_a_buffer_that_stops() -> None:
    # A worker shutting down: its buffer stops while a send hangs; the flush must not hang with it.
    async def main() -> None:
        log: list[str] = []
        buffer = ProducerBuffer()
        buffer.app = SimpleNamespace(conf=SimpleNamespace(producer_threaded=False))  # type: ignore[assignment]
        await buffer.start()
        buffer.put(SimpleNamespace(message=SimpleNamespace(channel=SlowChannel(log, "stuck", 3600))))  # type: ignore[arg-type]
        flushing = asyncio.create_task(flush_all(Producer(buffer, log)))
        await asyncio.sleep(0.2)
        assert not flushing.done()
        buffer.pending._queue.clear()  # type: ignore[attr-defined]  # what a stop leaves unsent
        await buffer.stop()
        await asyncio.wait_for(flushing, 5)
        assert log == ["client flushed"]

    asyncio.run(main())


def test_a_barrier_is_freed_at_once_not_left_to_the_collector() -> None:
    # One barrier per commit: a reference cycle in it was freed only by the collector's rare full passes, and the
    # soak's census of a worker counted them rising between those passes.
    import gc

    from streams.kafka import consumer

    async def main() -> int:
        buffer = ProducerBuffer()
        buffer.app = SimpleNamespace(conf=SimpleNamespace(producer_threaded=False))  # type: ignore[assignment]
        await buffer.start()
        try:
            for _ in range(20):
                await flush_all(Producer(buffer, []))
        finally:
            await buffer.stop()
        await asyncio.sleep(0)
        return sum(1 for o in gc.get_objects() if isinstance(o, consumer._Barrier))

    gc.collect()
    gc.disable()
    try:
        left = asyncio.run(main())
    finally:
        gc.enable()
    assert left == 0
