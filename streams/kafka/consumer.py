"""Faust's Kafka consumer, delivering each fetched batch under one guard instead of one per message.

Faust's fetch loop (`faust.transport.consumer.Consumer._drain_messages`) hands every message to the
conductor inside `Service.wait_first(callback(message), suspend_flow.wait())`, so that a rebalance can
abandon a delivery blocked on a full stream buffer. `wait_first` schedules four tasks (the callback, the
suspend flag, the service's stopped and crashed flags) and an `asyncio.wait` per message: with one event
per Kafka message that cost about twice the direct stage's own work (py-spy, issue 16 target 1b). Here
the same guard wraps the delivery of one fetched batch; a delivery that does not block runs to completion
in the batch's first step, and one that blocks is abandoned by a rebalance exactly as before (the rest of
its batch too: after a rebalance the consumer reads again from the committed offsets). Faust's `getmany`
stops yielding a batch once the flow stops or the generation changes; reading the batch whole moves those
checks into the delivery, before each message and before a hand-over (a stale batch delivered after the new
assignment seeked would set read offsets past the re-read messages, which the consumer would then drop).

A topic with a batch handler (`App.batch_handlers`, the direct topology's input) skips the conductor and
its stream altogether: its messages are tracked and referenced as the conductor would (so acks and
commits work unchanged) and handed over as one list per fetched batch, after the same flow control (a
rebalance holds it) and producer back-pressure. The per-message stream machinery (an event object, a
queue put and get, sensors, take_events buffering, an ack) cost as much again as the guard.

Everything else is Faust's own loop: read offsets, gaps for acks, commit-every, yielding to the event
loop every 100 messages so streams drain their buffers. Tested on the real broker by every Kafka test.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, cast

import faust
from faust.transport.consumer import CONSUMER_FETCHING
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP, Message
from mode.utils.objects import cached_property
from mode.utils.queues import FlowControlEvent

from streams.kafka.readagain import ReadAgain, ReadAgainFlowControl
from streams.kafka.stall import StallWatch

log = logging.getLogger("crosstalk.kafka")


class FetchWaitThread(faust_aiokafka.AIOKafkaConsumerThread):
    """Faust's consumer thread with the fetch long-poll bounded by the app's `fetch_max_wait_ms`.

    Faust hard-codes 1.5 s. aiokafka keeps one fetch in flight per broker, and a fetch leaves out the partitions
    whose earlier records are still buffered: a record that arrives on one of those while the fetch in flight
    waits on quiet partitions is read only when that fetch returns. Measured on the direct topology at 300
    text-rich events/s: periodic gaps of 1.0-1.5 s with nothing fetched, event -> alert p99 ~1.7 s in about
    half the runs (the broker had acknowledged the late records within 10 ms); at 100 ms the gaps went away."""

    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        # Read by the consumer when it starts its fetcher; Faust passes no setting for it.
        consumer._fetch_max_wait_ms = getattr(self.app, "fetch_max_wait_ms", 1500)
        return consumer


class BatchGuardConsumer(faust_aiokafka.Consumer):
    """The aiokafka consumer with one `wait_first` per fetched batch (see the module docstring), and the fetch
    long-poll the app asks for (`FetchWaitThread`)."""

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return FetchWaitThread(self, loop=self.loop, beacon=self.beacon)

    def ack(self, message: Message) -> bool:
        """Faust's ack, refused for a message of an earlier consumer generation. Faust's streams ack the messages they
        skip as stale, and its commit timer runs through a rebalance: between the assignment and the seek to the
        committed offsets, a partition kept across it was committed past its buffered messages, and the seek then
        started after them, so they were never read (input events lost: the two-worker broker tests' orphaned
        exchanges). Left unacked, such a message is read again after the seek, and that reading is acked."""
        gen = message.generation_id
        if gen is not None and gen != self.app.consumer_generation_id:
            self._unacked_messages.discard(message)
            return False
        return bool(super().ack(message))

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - the broker tests run it
        getmany = self.getmany
        consumer_should_stop = cast(Any, self)._stopped.is_set
        fetcher_should_stop = fetcher._stopped.is_set
        flag_consumer_fetching = CONSUMER_FETCHING
        set_flag = self.diag.set_flag
        unset_flag = self.diag.unset_flag
        try:
            while not (consumer_should_stop() or fetcher_should_stop()):
                set_flag(flag_consumer_fetching)
                batch = [item async for item in getmany(timeout=1.0)]
                self._rounds += 1  # the stall watch's proof that this loop fetches
                # getmany checks the generation as it yields; read it now, as the batch is complete.
                generation_id = self.app.consumer_generation_id
                # Faust sleeps here too: getmany can return at once in a loop that never yields.
                await self.sleep(0)
                if batch and not self.should_stop:
                    await self.wait_first(self._deliver(batch, generation_id), self.suspend_flow.wait())
                    commit_every = self._commit_every
                    if commit_every is not None and self._n_acked >= commit_every:
                        self._n_acked = 0
                        await self.commit()
                unset_flag(flag_consumer_fetching)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                self.log.info("Broker stopped consumer, shutting down...")
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                self.log.info("Consumer shutting down for user cancel.")
                return
            raise
        except Exception as exc:
            self.log.exception("Drain messages raised: %r", exc)
            raise
        finally:
            unset_flag(flag_consumer_fetching)

    # TP -> the offset `rewind` sought it back to, until that message is delivered: after the seek the first message
    # of an internal topic's partition is that one, so any other was fetched before the seek (stale) and must
    # neither be delivered nor move the read offset, or the re-read would be dropped as already read.
    _sought: dict[TP, int] | None = None
    _upto: dict[TP, int] | None = None  # TP -> the last offset that may come first after its seek (`reread_upto`)
    # TP -> the last offset delivered since the partition was last sought (the stall watch's next offset to read),
    # and the fetch rounds of the drain loop so far.
    _delivered: dict[TP, int] | None = None
    _rounds = 0

    async def perform_seek(self) -> None:
        # An assignment seeks every partition to its committed offset: what was delivered before says nothing now.
        if self._delivered:
            self._delivered.clear()
        await super().perform_seek()

    async def rewind(self, tp: TP, offset: int) -> None:
        """Read `tp` again from `offset`, and return once sought (`reread`)."""
        await self.reread({tp: offset})

    def reread(self, partitions: dict[TP, int]) -> asyncio.Future[None]:
        """Read each partition again from its offset, passing over any message fetched before the seek until that one
        comes (`_sought`, at once); the seek runs in the task returned. Faust's `seek_wait`, not `seek`: the Kafka
        client runs in the consumer's own thread, and `seek` changed its fetcher's records under a fetch in progress
        there (a KeyError that crashed the worker); `seek_wait` seeks in that thread, between fetches, and moves the
        read offset back."""
        if self._sought is None:
            self._sought = {}
        self._sought.update(partitions)
        return asyncio.ensure_future(self._seek_again(partitions))

    async def _seek_again(self, partitions: dict[TP, int]) -> None:
        """Faust's `seek_wait`, and what was delivered of those partitions forgotten: their next offset to read is where
        they were sought (the stall watch's `next_offsets`)."""
        if self._delivered:
            for tp in partitions:
                self._delivered.pop(tp, None)
        await self.seek_wait(partitions)

    def delivered(self) -> dict[TP, int]:
        """The last offset delivered of each partition since it was last sought (none: nothing delivered since)."""
        return dict(self._delivered or {})

    def reread_upto(self, tp: TP, offset: int, upto: int) -> asyncio.Future[None]:
        """`reread` for a topic that may have gaps of its own (the input: transactions' markers, aborted records):
        the first message from `offset` up to `upto` is the partition's next (streams/kafka/gaps.py)."""
        if self._upto is None:
            self._upto = {}
        self._upto[tp] = upto
        return self.reread({tp: offset})

    def forget_rewinds(self, tps: Any) -> None:
        """Revoked partitions: their seeks back are void (the next assignment seeks to the committed offsets)."""
        for sought in (self._sought, self._upto):
            if sought:
                for tp in tps:
                    sought.pop(tp, None)

    async def _deliver(self, batch: list[tuple[TP, Message]], generation_id: int) -> None:
        app = self.app
        sought, upto = self._sought, self._upto
        if sought is None:
            sought = self._sought = {}
        if upto is None:  # the very dict `reread_upto` fills while this delivery awaits
            upto = self._upto = {}
        delivered = self._delivered
        if delivered is None:
            delivered = self._delivered = {}
        callback = self.callback
        handlers = cast(App, self.app).batch_handlers
        handed: dict[str, list[Message]] = {}
        get_read_offset = self._read_offset.__getitem__
        set_read_offset = self._read_offset.__setitem__
        acks_enabled_for = self.app.topics.acks_enabled_for
        sleep = asyncio.sleep
        since_yield = 0
        for tp, message in batch:
            # Faust's getmany stops yielding a fetched batch once the flow stops or the generation
            # changes; a batch read whole must stop at the same points. Delivered past a rebalance, the
            # rest of the batch would set read offsets beyond the positions the new assignment seeked
            # to, and the consumer would then drop the re-read messages as already read.
            if not self.flow_active or app.consumer_generation_id != generation_id:
                break
            since_yield += 1
            if since_yield > 100:
                await sleep(0)
                since_yield = 0
            if sought and tp in sought:
                lo = sought[tp]
                if not lo <= message.offset <= upto.get(tp, lo):
                    continue  # fetched before a seek back: read again from there
                del sought[tp]
                upto.pop(tp, None)
            offset = message.offset
            r_offset = get_read_offset(tp)
            if r_offset is None or offset >= r_offset:
                gap = offset - (r_offset or 0)
                if gap > 1 and r_offset and acks_enabled_for(message.topic):
                    await self._add_gap(tp, r_offset + 1, offset)
                if handlers and message.topic in handlers:
                    self.track_message(message)
                    message.incref()  # as the conductor does for its one channel; the handler's holder acks
                    handed.setdefault(message.topic, []).append(message)
                else:
                    await callback(message)
                    if sought and sought.get(tp, offset) != offset:
                        continue  # the seek came while the message was put: the read offset stays where it set
                set_read_offset(tp, offset)
                delivered[tp] = offset
            else:
                self.log.dev("DROPPED MESSAGE ROFF %r: k=%r v=%r", offset, message.key, message.value)
        if handed:
            await app.flow_control.acquire()
            await app.producer.buffer.wait_until_ebb()
            if app.consumer_generation_id != generation_id:
                return  # a rebalance came in between: the new assignment reads them again
            for topic, messages in handed.items():
                await handlers[topic](messages)

    def fetchable(self, topics: set[str]) -> list[TP]:
        """Assigned partitions of `topics` the consumer fetches now: none while the flow is stopped or a rebalance
        runs; none that flow control took out (a full stream buffer) or that Faust paused."""
        if not self.flow_active or self.app.rebalancing:
            return []
        active, paused, buffered = self._active_partitions, self._paused_partitions, self._buffered_partitions
        return [
            tp
            for tp in self.assignment()
            if tp.topic in topics and (active is None or tp in active) and tp not in paused and tp not in buffered
        ]

    async def next_offsets(self, tps: list[TP]) -> dict[TP, int]:
        """The next offset to read of each partition: past the last message delivered, else where it was sought (the
        committed offset at an assignment), else the broker's earliest (a group that never committed)."""
        delivered = self._delivered or {}
        out: dict[TP, int] = {}
        unknown = []
        for tp in tps:
            last = delivered.get(tp)
            sought = self._read_offset.get(tp) if last is None else last + 1
            if sought is None:
                unknown.append(tp)
            else:
                out[tp] = sought
        if unknown:
            out.update((tp, o) for tp, o in (await self.earliest_offsets(*unknown)).items() if o is not None)
        return out

    async def reread_stalled(self, watch: StallWatch[TP], topics: set[str], internal: set[str]) -> list[tuple[TP, int]]:
        """Seek each partition of `topics` that `watch` finds stalled back to its committed offset (module docstring of
        streams/kafka/stall.py). Not to the next offset to read: a message delivered is not yet read by its stage (a
        cleared stream buffer lost such messages), while everything before the committed offset was; what is read
        twice, the stages skip. A partition of an `internal` topic goes through `rewind`: its first message after the
        seek must be that offset (they have no gaps); an input topic may (a transaction's markers), so it is sought
        plainly."""
        tps = self.fetchable(topics)
        if not tps:
            watch.forget()
            return []
        positions = await self.next_offsets(tps)
        ends = await self.highwaters(*tps)
        stalled = watch.check(
            asyncio.get_running_loop().time(),
            self._rounds,
            {tp: (o, ends[tp]) for tp, o in positions.items() if ends.get(tp) is not None},
        )
        done = []
        for tp, next_offset in stalled:
            if tp not in self.fetchable({tp.topic}):
                continue  # a rebalance began meanwhile: the assignment seeks it
            committed = self._committed_offset.get(tp)
            offset = next_offset if committed is None else min(committed, next_offset)
            log.warning(
                "%s partition %s: nothing delivered past offset %s for %.0f s although the broker holds up to %s; "
                "reading it again from %s",
                *(tp.topic, tp.partition, next_offset - 1, watch.stall_s, ends[tp] - 1, offset),
            )
            if tp.topic in internal:
                await self.rewind(tp, offset)
            else:
                await self._seek_again({tp: offset})
            done.append((tp, offset))
        return done


class HeldMessage:
    """A message handed to a batch handler, held until processed: `ack()` as a Faust event's."""

    __slots__ = ("consumer", "message")

    def __init__(self, message: Message, consumer: Any) -> None:
        self.message = message
        self.consumer = consumer

    def ack(self) -> bool:
        return bool(self.message.ack(self.consumer))


class BatchGuardTransport(faust_aiokafka.Transport):
    Consumer = BatchGuardConsumer


BatchHandler = Callable[[list[Message]], Awaitable[None]]


class App(faust.App):
    """`faust.App` whose consumer is `BatchGuardConsumer` (any `kafka://` broker URL). A topic in
    `batch_handlers` must still be subscribed by an agent: that is what makes the consumer subscribe to it
    and assign its tables' partitions with it."""

    def __init__(self, *args: Any, fetch_max_wait_ms: int = 1500, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.batch_handlers: dict[str, BatchHandler] = {}
        self.fetch_max_wait_ms = fetch_max_wait_ms  # the consumer's fetch long-poll (FetchWaitThread)
        self.read_again: ReadAgain | None = None  # the flow control's, once built (streams/kafka/readagain.py)

    def _new_transport(self) -> Any:
        return BatchGuardTransport(self.conf.broker_consumer, self)

    @cached_property
    def flow_control(self) -> FlowControlEvent:
        control = ReadAgainFlowControl(loop=self.loop)
        control.on_clear = self.read_again = ReadAgain(
            lambda: cast(BatchGuardConsumer, self.consumer), lambda: self.tables.changelog_topics
        )
        return control


class Rewinds:
    """Where a restored partition of the staged topology resumes: where its state stops, not where the committed
    offset points (ADR 0001, point 4). The committed offset can pass a checkpoint (Faust acks the events its stream
    skips, even on a `noack()` stream; a checkpoint can be lost with its worker), and the internal topics, which
    only crosstalk writes, without transactions or compaction, have no offset gaps of their own: a message past
    `state.offset + 1` means the messages between never reached the state."""

    def __init__(self, counters: Counter[str]) -> None:
        self.counters = counters
        # (stage, partition) -> the offset it was sought back to, until that message comes again
        self.pending: dict[tuple[str, int], int] = {}

    def forget(self, stage: str, partition: int) -> None:
        """The sought message came (or the partition was revoked)."""
        self.pending.pop((stage, partition), None)

    async def past(self, consumer: Any, stage: str, tp: TP, covered: int, offset: int) -> bool:
        """Message `offset` came to a partition whose state covers `covered` < offset - 1. The first time, the
        partition is sought back to `covered + 1`; until that message comes again, what was queued beyond it is
        dropped. True: drop this message (neither held nor acked). False: the messages between are gone from the
        topic (retention), so the gap is logged and counted, and the message applied."""
        key, want = (stage, tp.partition), covered + 1
        if self.pending.get(key) == want:
            self.counters[f"rewind_dropped.{stage}"] += 1
            return True
        guard = cast(BatchGuardConsumer, consumer)
        earliest = (await guard.earliest_offsets(tp)).get(tp, 0)
        if earliest > want:
            log.error(
                "%s partition %s: messages %s..%s are gone from the topic; resuming with a gap",
                *(stage, tp.partition, want, earliest - 1),
            )
            self.counters[f"restore_gaps.{stage}"] += 1
            return False
        log.warning(
            "%s partition %s: its state covers offset %s but offset %s came next; reading again from %s",
            *(stage, tp.partition, covered, offset, want),
        )
        self.pending[key] = want
        self.counters[f"rewinds.{stage}"] += 1
        await guard.rewind(tp, want)
        return True
