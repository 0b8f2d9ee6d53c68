"""The Faust application: topics, agents, acks and the web endpoints around the pure stages.

Topology (docs/adr/0001-kafka-topology.md and 0003 have the why):

    input --ingest--> <app>.join --join--> <app>.domain --domain--> alerts
      |  validate once,         |  admit (dedup),        |  event-time order (watermarks),
      |  fingerprint + drop     |  Joiner, orphans,      |  DomainMonitor per cache domain
      |  text, keyed canaries,  |  watermarks (min over  |
      |  route, marks           |  input partitions)     |
      v                         v                        v
    dead-letter               dead-letter              dead-letter (internal errors only)

Each stage's work lives in streams/kafka/stages.py (no Faust there, tested without a broker), snapshots and acks in
checkpoint.py, internal messages in frames.py and records.py, the fleet topic in fleet.py: this module moves bytes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import Counter
from collections.abc import Callable
from typing import Any, cast

from faust.streams import _current_event  # the task-local current event Faust's stores read
from faust.types import TP

from streams import heap
from streams.inputs.corpus import load_public
from streams.kafka import checkpoint, frames
from streams.kafka import consumer as consumer_mod
from streams.kafka.changelog import ChangelogPartition, WriteLost
from streams.kafka.clock import HELD_TICK_S, HeldClock
from streams.kafka.direct import DirectResult, DirectStage, DirectState, process_sessions
from streams.kafka.fleet import FleetTalk
from streams.kafka.gaps import InputGaps, revoked_skipped
from streams.kafka.health import PipelineHealth
from streams.kafka.ingest import IngestStage
from streams.kafka.inputmsg import SLICE_BYTES, InputMessage
from streams.kafka.inputmsg import is_ndjson as _is_ndjson
from streams.kafka.inputmsg import is_placed as _is_placed
from streams.kafka.inputmsg import slices as _slices
from streams.kafka.stages import DeadLetter, DomainResult, DomainStage, DomainState, JoinStage, JoinState, Send
from streams.kafka.stall import StallWatch
from streams.kafka.topics import TopicNames, dead_letter_headers, topic_names
from streams.routing import PLACED
from streams.settings import Settings
from streams.sinks import build_sinks
from streams.sinks.base import SinkSet

log = logging.getLogger("crosstalk.kafka")


class KafkaPipeline(PipelineHealth, HeldClock, FleetTalk):
    """The Faust app of one worker for one Settings, with the counters its web endpoints show."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.kafka = settings.kafka
        self.names: TopicNames = topic_names(settings.kafka)
        self.counters: Counter[str] = Counter()
        self._holds_logged: dict[tuple[str, int], dict[str, int]] = {}  # streams/kafka/clock.py
        self.started = time.time()
        self.public = load_public(settings)
        # One session cache for every partition's monitor: `session_cache_prints` bounds the process, not each
        # partition (four partitions held four times the cache, and the soak's memory grew for 20 minutes).
        self.sessions = process_sessions(settings.detection)
        started_mono = time.monotonic()
        self.ingest = IngestStage(settings, self.counters)
        self.join = JoinStage(settings, self.counters, started_mono)
        self.domain = DomainStage(settings, self.counters, started_mono)
        self.direct = DirectStage(settings, self.counters)
        self.gaps = InputGaps(self.counters)  # input read past a partition's state, sought back (gaps.py)
        self.checkpoints = checkpoint.Checkpointer(settings.kafka, self.counters)
        self.changelogs: dict[tuple[str, int], ChangelogPartition] = {}  # (stage, partition): its table's writes
        self.join_states: dict[int, JoinState] = {}
        self.domain_states: dict[int, DomainState] = {}
        self.direct_states: dict[int, DirectState] = {}
        self.assigned: set[TP] = set()
        self.rewinds = consumer_mod.Rewinds(self.counters)  # partitions read again from where their state stops
        self.revocations = 0  # rebalances that revoked input partitions (the direct topology's batches)
        # Partitions the consumer stopped delivering though the broker holds messages for them (streams/kafka/stall.py)
        self.stalls: StallWatch[TP] = StallWatch(settings.kafka.stall_s)
        self.send_lock = asyncio.Lock()  # the heartbeat must not send marks that cover items not yet sent
        # Telemetry sinks (OpenTelemetry); webhooks are the delivery consumer's job in Kafka mode. A failing
        # sink is counted (sink_errors.* on /counters) and does not stop the agent.
        self.sinks = SinkSet(build_sinks(settings, webhooks=False), self.counters)
        # Payload bytes per internal message: half the message limit leaves room for the header.
        self.batch_bytes = settings.kafka.max_message_bytes // 2
        self.sinks.set_state_size_source(self.state_size)
        self.sinks.set_lag_source(self.consumer_lag)
        self.sinks.set_behind_source(lambda: self.event_time()["behind_wall_clock_s"])
        self.app = self._build()

    def _build(self) -> consumer_mod.App:
        k = self.kafka
        app = consumer_mod.App(
            k.app_id,
            broker=[f"kafka://{h.strip()}" for h in k.bootstrap.split(",") if h.strip()],
            store=checkpoint.store_url(k.store),
            datadir=k.data_dir,
            web_port=k.web_port,
            web_bind=k.web_bind,
            web_enabled=True,
            topic_partitions=k.internal_partitions,
            topic_replication_factor=k.replication_factor,
            # Every topic is created up front by streams/kafka/topics.py with our own configs (see ADR).
            topic_allow_declare=False,
            table_standby_replicas=k.standby_replicas,
            consumer_auto_offset_reset="earliest",
            stream_wait_empty=False,  # acks are held until a snapshot: waiting for them would stall a rebalance
            producer_acks=-1,
            producer_max_request_size=k.max_message_bytes,
            consumer_max_fetch_size=k.max_message_bytes,
            broker_commit_interval=k.commit_interval_s,
            fetch_max_wait_ms=k.fetch_max_wait_ms,
            broker_session_timeout=k.session_timeout_s,
            broker_rebalance_timeout=k.rebalance_timeout_s,
            table_cleanup_interval=3600.0,
        )
        n = self.names

        def raw_topic(name: str) -> Any:
            return app.topic(name, key_type=bytes, value_type=bytes, value_serializer="raw", key_serializer="raw")

        self.input_topic = raw_topic(n.input)
        self.join_topic = raw_topic(n.join)
        self.domain_topic = raw_topic(n.domain)
        self.alerts_topic = app.topic(n.alerts, value_serializer="raw", key_serializer="raw")
        self.dlq_topic = app.topic(n.deadletter, value_serializer="raw", key_serializer="raw")
        self._fleet_wire(app, n.fleet)  # every partition's digests, for each partition held here (fleet.py)
        parts, store = k.internal_partitions, checkpoint.store_options(k)
        if k.topology == "direct":
            # One stage on the input topic; its table is co-partitioned with it (streams/kafka/direct.py).
            self.direct_table = app.Table(
                n.direct_table, partitions=k.input_partitions, key_type=bytes, value_type=bytes, options=store
            )
            # The direct input as the consumer fetched it (streams/kafka/consumer.py): one list per fetch,
            # handed over through this bounded queue, with no Faust event per message.
            self.direct_queue: asyncio.Queue[tuple[int, list[Any]]] = asyncio.Queue(maxsize=4)
            app.batch_handlers[n.input] = self._direct_intake
            app.agent(self.input_topic, name="direct", concurrency=1)(self._direct)
        else:
            table: dict[str, Any] = {"partitions": parts, "key_type": bytes, "value_type": bytes, "options": store}
            self.join_table = app.Table(n.join_table, **table)
            self.domain_table = app.Table(n.domain_table, **table)
            app.agent(self.input_topic, name="ingest", concurrency=1)(self._ingest)
            app.timer(interval=k.heartbeat_interval_s)(self._heartbeat)
            app.agent(self.join_topic, name="join", concurrency=1)(self._join)
            app.agent(self.domain_topic, name="domain", concurrency=1)(self._domain)

        app.timer(interval=k.stall_check_s)(self._watch_stalls)
        app.timer(interval=HELD_TICK_S)(self._tick_held)  # held findings out on time in quiet input (clock.py)
        if k.heap_trim_s > 0:  # freed heap memory back to the system (streams/heap.py; tuned by the worker's start)
            app.timer(interval=k.heap_trim_s)(self._trim_heap)

        # Faust binds a page function as a View method: plain closures, not bound methods.
        async def health(web: Any, request: Any) -> Any:
            return web.json({"status": "ok", **self.status()})

        async def ready(web: Any, request: Any) -> Any:
            ok = self.is_ready()
            return web.json({"ready": ok, **self.status()}, status=200 if ok else 503)

        async def counters(web: Any, request: Any) -> Any:
            return web.json(self.status())

        app.page("/health")(health)
        app.page("/ready")(ready)
        app.page("/counters")(counters)
        app.on_partitions_revoked.connect(self._on_revoked)
        app.on_partitions_assigned.connect(self._on_assigned)
        return app

    def close_sinks(self) -> None:
        """Flush telemetry on shutdown (spans and metrics still buffered in the exporters)."""
        self.sinks.close()

    # Faust sends the partition set as the one positional argument after the app.
    async def _on_assigned(self, app: Any, /, *partitions: Any, **_: Any) -> None:
        (assigned,) = partitions
        self.assigned = set(assigned)
        self.stalls.forget()
        if self.kafka.topology != "direct":
            self.ingest.assign([tp.partition for tp in assigned if tp.topic == self.names.input], time.monotonic())

    async def _on_revoked(self, app: Any, /, *partitions: Any, **_: Any) -> None:
        (revoked,) = partitions
        # A revoked partition may be processed elsewhere before it comes back: its in-memory state and
        # held (unacked) events are stale from now on; the snapshot table is the truth.
        self.assigned -= set(revoked)
        self.stalls.forget()
        # A seek back of a revoked partition is void: its next assignment starts where the consumer seeks it.
        cast(consumer_mod.BatchGuardConsumer, self.app.consumer).forget_rewinds(revoked)
        if any(tp.topic == self.names.input for tp in revoked):
            self.revocations += 1
        stages = {self.names.join: "join", self.names.domain: "domain"}
        if self.kafka.topology == "direct":
            stages[self.names.input] = "direct"
        moved = []
        for tp in revoked:
            stage = stages.get(tp.topic)
            if stage is None:
                if tp.topic == self.names.input:
                    self.ingest.forget(tp.partition)
                continue
            if stage == "direct":
                self.direct.forget(tp.partition)
                self.gaps.forget(tp.partition)
            else:
                self.rewinds.forget(stage, tp.partition)
            getattr(self, f"{stage}_states").pop(tp.partition, None)
            self.checkpoints.forget(stage, tp.partition)
            moved.append((stage, tp.partition))
        # A checkpoint stored before this handler may still be on its way to the broker: its late manifest could
        # win over the next owner's own. No store happens after the epochs moved above.
        for key in moved:
            if key in self.changelogs:
                try:
                    await self.changelogs[key].written()
                except WriteLost as exc:  # the next owner restores the checkpoint before it and replays from there
                    log.warning("%s partition %s: %s", *key, exc)

    async def _trim_heap(self) -> None:
        if heap.trim():
            self.counters["heap_trims"] += 1

    async def _flush(self) -> None:
        """Every output so far on the broker (a checkpoint's first step). The outputs go to the Kafka client, not
        Faust's buffer, which holds table writes only: the checkpointer awaits those itself."""
        await self.app.producer.flush()

    def _changelog(self, stage: str, partition: int) -> ChangelogPartition:
        """The partition of the stage's table that its checkpoints write (streams/kafka/changelog.py)."""
        got = self.changelogs.get((stage, partition))
        if got is None:  # only the topology's tables exist
            got = self.changelogs[(stage, partition)] = ChangelogPartition(getattr(self, f"{stage}_table"), partition)
        return got

    # -- output --
    async def _dead_letter(self, dl: DeadLetter) -> None:
        """Park what cannot be used, with the reason and where it came from (topic, partition, offset,
        and the line within a batched input message)."""
        warning = dl.severity == "warning"
        self.counters[f"{'warning' if warning else 'deadletter'}.{dl.reason}"] += 1
        topic = self.names.input if dl.source.topic == frames.INPUT else self.names.join
        await self.dlq_topic.send(key=dl.key, value=dl.payload, headers=dead_letter_headers(dl, topic))
        if not warning:
            self.sinks.on_reject(dl.reason, dl.detail)

    async def _send(self, topic: Any, send: Send, counter: str) -> None:
        """Items to one partition in as many messages as their size needs. The event-time progress (a
        watermark, input marks) rides on the last one: it must not pass the items it covers."""
        runs = frames.split(send.items, self.batch_bytes)
        for i, run in enumerate(runs):
            last = i == len(runs) - 1
            batch = frames.Batch(run, *((send.wm, send.marks, send.idle) if last else (None, None, None)))
            await topic.send(key=None, value=frames.encode(batch), partition=send.partition)
            self.counters[counter] += 1

    # -- stage 1: ingest --
    async def _ingest(self, stream: Any) -> Any:
        # take_events acks a batch only after this body has sent it; a commit flushes the producer first. The
        # window matters: each ingest batch is a message to every join partition, so taking the input as
        # fetched (no wait) multiplied the internal messages at moderate rates (ADR 0003, 2026-12-01).
        async for events in stream.take_events(self.kafka.batch_max, within=self.kafka.batch_wait_s):
            # Fenced as the direct topology's batches are: take_events yields what its buffer held through a
            # rebalance, and a message of an earlier generation is read again by the partition's owner now (here
            # or elsewhere, from the last commit). Sent anyway, it made a second writer of the partition's items
            # at the join stage, whose replay check takes one writer's positions for all.
            gen = self.app.consumer_generation_id
            fresh = [e for e in events if e.message.generation_id == gen]
            if len(fresh) < len(events):
                self.counters["ingest.stale_skipped"] += len(events) - len(fresh)
            if not fresh:
                continue
            msgs = [
                InputMessage(
                    e.message.partition, e.message.offset, e.message.key, e.message.value, _is_ndjson(e.message.headers)
                )
                for e in fresh
            ]
            res = self.ingest.read(msgs, time.monotonic(), time.time())
            for dl in res.dead:
                await self._dead_letter(dl)
            if self.sinks:
                for event_type in res.event_types:
                    self.sinks.on_event(event_type)
            async with self.send_lock:
                if self.app.consumer_generation_id != gen:  # a rebalance while this batch was read
                    self.counters["ingest.stale_skipped"] += len(fresh)
                    continue
                self.ingest.publish(res.newest, res.read_to)
                for send in self.ingest.sends(res.to_join, time.monotonic(), force=False):
                    await self._send(self.join_topic, send, "ingest.batches")

    async def _heartbeat(self) -> None:
        """Marks to every join partition on a wall-clock timer, so that watermarks (and the alerts they
        hold back) move on when input goes quiet: a join or domain partition re-evaluates idleness only
        when a message reaches it. Every worker sends, even one that has read nothing (yet): after a
        rebalance the partitions' new reader knows nothing of them until it reads a message."""
        if not self.app.rebalancing:
            async with self.send_lock:
                for send in self.ingest.sends({}, time.monotonic(), force=True):
                    await self._send(self.join_topic, send, "ingest.batches")
            self.counters["ingest.heartbeats"] += 1

    async def _watch_stalls(self) -> None:
        """Partitions the consumer stopped delivering, read again (streams/kafka/stall.py); an input partition behind
        its end is not reported idle by the ingest meanwhile."""
        n = self.names
        internal = set() if self.kafka.topology == "direct" else {n.join, n.domain}
        consumer = cast(consumer_mod.BatchGuardConsumer, self.app.consumer)
        try:
            stalled = await consumer.reread_stalled(self.stalls, {n.input, *internal}, internal)
        except Exception as exc:  # a broker that does not answer now: the next check asks again
            self.counters["stall_checks_failed"] += 1
            self.ingest.caught_up = set()  # unknown now: waited for, not taken for idle
            consumer_mod.log.warning("stall check failed: %r", exc)
            return
        self.counters["stall_checks"] += 1
        reread = cast(consumer_mod.App, self.app).read_again
        if reread is not None and reread.count:
            self.counters["cleared_reread"] = reread.count
        for tp, _ in stalled:
            stage = "input" if tp.topic == n.input else "join" if tp.topic == n.join else "domain"
            self.counters[f"stalls_reread.{stage}"] += 1
        # Read to its end by the consumer, and every message delivered read by the ingest: idle once silent.
        delivered = consumer.delivered()
        self.ingest.caught_up = {
            tp.partition
            for tp in self.stalls.caught_up()
            if tp.topic == n.input and self.ingest.positions.get(tp.partition, -1) >= delivered.get(tp, -1)
        }

    # -- the direct topology's one stage --
    async def _direct_intake(self, messages: list[Any]) -> None:
        """The consumer's hand-over of one fetched batch (streams/kafka/consumer.py); waits when full."""
        await self.direct_queue.put((self.revocations, messages))

    async def _direct(self, stream: Any) -> Any:
        """The agent on the input topic, whose stream stays empty (the consumer hands its messages over in fetched
        batches, `_direct_intake`): it makes the consumer subscribe and assign the table, and a crash restart this
        loop. A batch handed over before a revocation is dropped whole, even for a partition assigned back: the
        consumer reads again from the last commit, and a stale batch first would move the state past messages."""
        queue, most = self.direct_queue, self.kafka.batch_max
        carry: tuple[int, list[Any]] | None = None  # a batch of the next generation, taken while merging
        while True:
            gen, messages = carry if carry is not None else await queue.get()
            carry = None
            while len(messages) < most and not queue.empty():
                later = queue.get_nowait()  # the consumer handed this list over: ours now
                if later[0] != gen:  # never merged across a revocation: the next round starts with it
                    carry = later
                    break
                messages.extend(later[1])
            if gen != self.revocations:
                revoked_skipped(self.counters, messages)
                continue
            await self._direct_batch(messages, gen)

    async def _direct_batch(self, messages: list[Any], gen: int) -> None:
        """Each partition's messages to its Monitor; acked only via a checkpoint (Checkpointer). A RocksDB store files
        a table write (a checkpoint, a restore's sweep) under the partition of the task's current event (the contextvar
        Faust's stores read): one of the partition's own messages, kept alive by its checkpoint (changelog.py)."""
        by_partition: dict[int, list[Any]] = {}
        for m in messages:
            by_partition.setdefault(m.partition, []).append(m)
        for p, ms in by_partition.items():
            for run in _slices(ms, SLICE_BYTES):
                if gen != self.revocations or TP(self.names.input, p) not in self.assigned:
                    # Revoked while buffered: its next owner reads these again from the last ack.
                    revoked_skipped(self.counters, run)
                    continue
                await self._direct_slice(p, run)

    async def _direct_slice(self, p: int, ms: list[Any]) -> None:
        """One partition's messages read, their outputs sent, a checkpoint if due."""
        consumer, hold, wall = self.app.consumer, self.checkpoints.hold, time.time
        last = ms[-1]
        event = self.app.create_event(last.key, last.value, last.headers, last)
        _current_event.set(weakref.ref(event))  # a restore reads, and may delete stale pieces, under its partition
        st = self._state("direct", p)
        first, stop, back = self.gaps.read_now(p, st.offset, [m.offset for m in ms])
        if back is not None:  # read past the state: the rest is read again from where the state stops (gaps.py)
            self.gaps.seek_back(consumer, TP(self.names.input, p), back)
        if first or stop < len(ms):
            ms = ms[first:stop]
            if not ms:
                return
            last = ms[-1]
            event = self.app.create_event(last.key, last.value, last.headers, last)
            _current_event.set(weakref.ref(event))
        msgs = []
        for m in ms:
            msgs.append(InputMessage(p, m.offset, m.key, m.value, _is_ndjson(m.headers), _is_placed(m.headers)))
            # The last is held as the event itself, whose weak reference a checkpoint's store reads until it acks.
            hold("direct", p, event if m is last else consumer_mod.HeldMessage(m, consumer))
        res = self.direct.read(st, p, msgs, wall())
        if res.dead or res.published or res.event_types or res.reroute:
            await self._direct_out(res)
        await self._tell(p, st)
        await self.checkpoints.maybe("direct", p, st, self._changelog("direct", p), self._flush)

    async def _direct_out(self, res: DirectResult) -> None:
        # Events that came to another domain's partition, sent to theirs, and canary copies (streams/kafka/direct.py),
        # before the checkpoint that acks them, which flushes the producer first.
        for key, value, partition in res.reroute:
            await self.input_topic.send(key=key, value=value, partition=partition, headers=[(PLACED, b"1")])
        if self.sinks:
            for event_type in res.event_types:
                self.sinks.on_event(event_type)
        await self._emit(res)

    async def _emit(self, res: DomainResult) -> None:
        """A stage's outputs: dead letters, the alerts topic, then the sinks (exchanges before alerts)."""
        for dl in res.dead:
            await self._dead_letter(dl)
        for key, value in res.published:
            await self.alerts_topic.send(key=key, value=value)
        sinks = self.sinks
        for ex, alerts in res.evaluated:
            sinks.on_exchange(ex, alerts)
        for a in res.alerts:
            sinks.on_alert(a)
        for r in res.resolved:
            sinks.on_resolved(r)

    # -- stages 2 and 3 --
    def _state(self, stage: str, partition: int) -> Any:
        states: dict[int, Any] = getattr(self, f"{stage}_states")
        st = states.get(partition)
        if st is None:
            table = self._changelog(stage, partition)
            st = self.checkpoints.restore(stage, partition, table, self.settings.detection, self.public)
            restored = st is not None
            if st is None and stage == "direct":
                st = DirectState.fresh_direct(self.settings.detection, self.counters, self.public)
            elif st is None and stage == "join":
                st = JoinState.fresh(self.settings.detection)
            elif st is None:
                st = DomainState.fresh(self.settings.detection, self.counters, self.public)
            if isinstance(st, DirectState):  # restored or fresh: the process's one cache
                st.monitor.share_sessions(self.sessions)
            self._joined(partition, st)  # a judging partition tells and hears the others (fleet.py)
            if isinstance(st, JoinState):
                self.join.restored(partition, st, time.monotonic())
            elif stage == "domain":
                self.domain.restored(partition, time.monotonic())
            states[partition] = st
            self.counters[f"restores.{stage}" if restored else f"fresh.{stage}"] += 1
        return st

    async def _join(self, stream: Any) -> Any:
        await self._stateful("join", stream, self._join_batch)

    async def _domain(self, stream: Any) -> Any:
        await self._stateful("domain", stream, self._domain_batch)

    async def _stateful(self, stage: str, stream: Any, handle: Callable[[Any, int, int, frames.Batch], Any]) -> None:
        """The loop both stateful stages share: handle each message once, ack only via a snapshot."""
        async for ev in stream.noack().events():
            msg = ev.message
            p = msg.partition
            st = self._state(stage, p)
            if msg.offset > st.offset + 1 and st.offset >= 0:
                if await self.rewinds.past(self.app.consumer, stage, msg.tp, st.offset, msg.offset):
                    continue  # read again from where the state stops: neither held nor acked
            elif self.rewinds.pending:
                self.rewinds.forget(stage, p)
            self.checkpoints.hold(stage, p, ev)
            if msg.offset > st.offset:
                try:
                    batch = frames.decode(msg.value or b"")
                except frames.FrameError as exc:
                    source = frames.Source(frames.JOIN, p)  # where it was read; the header names the topic
                    await self._dead_letter(
                        DeadLetter(msg.value or b"", "internal_error", str(exc), source, msg.offset)
                    )
                else:
                    await handle(st, p, msg.offset, batch)
                st.offset = msg.offset
            await self.checkpoints.maybe(stage, p, st, self._changelog(stage, p), self._flush)

    async def _join_batch(self, st: JoinState, p: int, offset: int, batch: frames.Batch) -> None:
        res = self.join.handle(st, p, offset, batch, time.monotonic())
        for dl in res.dead:
            await self._dead_letter(dl)
        for send in res.sends:
            await self._send(self.domain_topic, send, "join.batches")

    async def _domain_batch(self, st: DomainState, p: int, offset: int, batch: frames.Batch) -> None:
        await self._emit(self.domain.handle(st, p, batch, time.monotonic()))
        await self._tell(p, st)


def build_pipeline(settings: Settings) -> KafkaPipeline:
    return KafkaPipeline(settings)
