"""The Faust application: the detection core composed across Kafka partitions.

Topology (docs/adr/0001-kafka-topology.md has the why):

    input --ingest--> <app>.join --join--> <app>.domain --domain--> alerts
      |  parse, dead-letter,    |  dedup, Joiner,        |  event-time order (watermarks),
      |  route by request_id /  |  orphans, watermarks   |  DomainMonitor per cache domain
      |  cache_domain / tenant, |  (min over input       |
      |  canaries to all, marks |  partitions' marks)    |
      v                         v
    dead-letter               dead-letter (duplicate, fingerprint_params)

The internal topics carry batches (streams/kafka/frames.py): ingest takes up to `batch_max` input messages
at once and sends one message per join partition; the join stage sends one message per domain
partition for each message it handles, with its watermark. Every item keeps its source position.

Stateful stages (join, domain) keep their state in memory per partition and checkpoint it as one
snapshot per partition into a Faust table (changelog topic). A snapshot records the position of the
last message it covers. Acks are held until the snapshot that covers a message has been written,
after every output produced so far was flushed; so a committed offset always lies behind a durable
snapshot, and a snapshot never covers an output that was lost. After a crash, messages between the
committed offset and the snapshot position are skipped by position; the rest are reprocessed and,
the core being deterministic, re-produce exactly the outputs already sent: replayed items downstream
are skipped by their position, duplicate alerts carry the same alert_id.

Only data moves here; every decision is made by detectors/.
"""

from __future__ import annotations

import asyncio
import heapq
import io
import logging
import pickle
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import faust
from faust.types import TP

from detectors.canaries import CanaryRegistry
from detectors.dedup import Deduper
from detectors.domain import DomainMonitor
from detectors.exchange import Exchange
from detectors.fingerprint import Fingerprinter
from detectors.join import Joiner
from detectors.monitor import make_fingerprinter
from detectors.settings import DetectionSettings
from schemas.alert import Alert
from schemas.events import (
    NDJSON_CONTENT_TYPE,
    CacheStats,
    Canary,
    Event,
    EventError,
    Request,
    Response,
    parse_event,
)
from streams.kafka import frames
from streams.kafka.routing import partition_of, routing_key
from streams.kafka.topics import TopicNames, topic_names
from streams.settings import Settings
from streams.sinks import build_sinks

log = logging.getLogger("crosstalk.app")

H_REASON = "x-crosstalk-reason"
H_DETAIL = "x-crosstalk-detail"
H_SRC_TOPIC = "x-crosstalk-source-topic"
H_SRC_PARTITION = "x-crosstalk-source-partition"
H_SRC_OFFSET = "x-crosstalk-source-offset"
H_SRC_LINE = "x-crosstalk-source-line"
Pos = tuple[int, int]  # (offset, seq) within one source partition
# Part of every snapshot's table key: state pickled by a version with another layout is not loaded
# (the partition starts fresh from its committed offset) instead of failing on missing attributes.
SNAPSHOT_FORMAT = 3


def snapshot_key(stage: str, partition: int) -> bytes:
    return f"{stage}:v{SNAPSHOT_FORMAT}:{partition}".encode()


def store_url(setting: str) -> str:
    if setting != "auto":
        return setting
    try:
        import rocksdict  # noqa: F401
    except ImportError:
        return "memory://"
    return "rocksdb://"


def _late_or_dup(last: dict[str, Pos], src: str, pos: Pos) -> bool:
    """True if this position was already applied (a replay of an upstream that restarted)."""
    seen = last.get(src)
    if seen is not None and pos <= seen:
        return True
    last[src] = pos
    return False


# --- per-partition state of the stateful stages ---------------------------------------------------


@dataclass
class JoinState:
    joiner: Joiner
    dedup: Deduper
    wm: float = float("-inf")  # the watermark the Joiner's expiry has been advanced to
    sent_wm: float = float("-inf")
    marks: dict[str, float] = field(default_factory=dict)  # input partition -> newest event time read
    idle: set[str] = field(default_factory=set)  # input partitions the ingest reported quiet
    last: dict[str, Pos] = field(default_factory=dict)
    offset: int = -1  # last join-topic offset covered

    @classmethod
    def fresh(cls, s: DetectionSettings) -> JoinState:
        return cls(Joiner(s, CanaryRegistry(make_fingerprinter(s))), Deduper(s.dedup_window, s.dedup_window_s))

    def dumps(self) -> bytes:
        # The fingerprinter (secret key, hash objects, a word cache of millions of entries) is not
        # state: it is left out of the snapshot and rebuilt from the settings on load.
        buf = io.BytesIO()
        pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = lambda obj: "fingerprinter" if isinstance(obj, Fingerprinter) else None  # type: ignore[method-assign]
        pickler.dump(self)
        return zlib.compress(buf.getvalue(), 1)

    @staticmethod
    def loads(blob: bytes, s: DetectionSettings) -> JoinState:
        fp = make_fingerprinter(s)
        unpickler = pickle.Unpickler(io.BytesIO(zlib.decompress(blob)))
        unpickler.persistent_load = lambda pid: fp  # type: ignore[method-assign]
        st = unpickler.load()
        assert isinstance(st, JoinState)
        st.joiner.settings = s
        return st


def _order_key(item: CacheStats | Exchange) -> tuple[float, int, str]:
    # The same tie-break as DomainMonitor: content, never arrival, decides the order.
    if isinstance(item, CacheStats):
        return (item.ts, 0, item.event_id)
    return (item.ts, 1, item.request_id)


@dataclass
class DomainState:
    domains: dict[str, DomainMonitor] = field(default_factory=dict)
    wms: dict[int, float] = field(default_factory=dict)  # join partition -> its watermark
    released: float = float("-inf")  # items up to this event time were handed to the domains
    # Items waiting for the watermark; the order key and a sequence number decide, never the item.
    pending: list[tuple[tuple[float, int, str], int, str, tuple[str, bytes]]] = field(default_factory=list)
    seq: int = 0
    last: dict[str, Pos] = field(default_factory=dict)
    offset: int = -1

    def dumps(self) -> bytes:
        return zlib.compress(pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL), 1)

    @staticmethod
    def loads(blob: bytes, s: DetectionSettings) -> DomainState:
        st = pickle.loads(zlib.decompress(blob))
        assert isinstance(st, DomainState)
        for dm in st.domains.values():
            dm.s = s
        return st


# --- the runtime ---------------------------------------------------------------------------------


class Runtime:
    """Builds the Faust app for one Settings; holds counters for the web endpoints."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.k = settings.kafka
        self.det = settings.detection
        self.names: TopicNames = topic_names(settings.kafka)
        self.counters: Counter[str] = Counter()
        self.started = time.time()
        self.started_mono = time.monotonic()
        self.join_states: dict[int, JoinState] = {}
        self.domain_states: dict[int, DomainState] = {}
        self.held: dict[tuple[str, int], list[Any]] = {}  # (stage, partition) -> events not yet acked
        self.last_snapshot: dict[tuple[str, int], float] = {}
        self.wm_heard: dict[int, float] = {}  # join partition -> wall clock of its last watermark (idleness only)
        self.mark_heard: dict[tuple[int, str], float] = {}  # (join partition, input source) -> wall clock
        self.input_max: dict[int, float] = {}  # input partition -> newest event time ingested
        self.input_heard: dict[int, float] = {}  # input partition -> wall clock of its last message
        self.send_lock = asyncio.Lock()
        self.sent_marks: dict[int, dict[str, float]] = {}  # join partition -> marks last sent to it
        # Telemetry sinks (OpenTelemetry); webhooks are the delivery consumer's job in Kafka mode.
        self.sinks: list[Any] = build_sinks(settings, webhooks=False)
        self.input_positions: dict[int, int] = {}  # input partition -> last offset ingested
        # Payload bytes per internal message: half the message limit leaves room for the header.
        self.batch_bytes = settings.kafka.max_message_bytes // 2
        # Bound once: the ingest loop calls these for every event.
        self.on_event_sinks = [sink.on_event for sink in self.sinks if hasattr(sink, "on_event")]
        for sink in self.sinks:
            if hasattr(sink, "set_state_size_source"):
                sink.set_state_size_source(self.state_size)
            if hasattr(sink, "set_lag_source"):
                sink.set_lag_source(self.consumer_lag)
        self.app = self._build()

    # -- construction --
    def _build(self) -> faust.App:
        k = self.k
        app = faust.App(
            k.app_id,
            broker=[f"kafka://{h.strip()}" for h in k.bootstrap.split(",") if h.strip()],
            store=store_url(k.store),
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
            table_cleanup_interval=3600.0,
        )
        n = self.names
        self.input_topic = app.topic(
            n.input, key_type=bytes, value_type=bytes, value_serializer="raw", key_serializer="raw"
        )
        self.join_topic = app.topic(
            n.join, key_type=bytes, value_type=bytes, value_serializer="raw", key_serializer="raw"
        )
        self.domain_topic = app.topic(
            n.domain, key_type=bytes, value_type=bytes, value_serializer="raw", key_serializer="raw"
        )
        self.alerts_topic = app.topic(n.alerts, value_serializer="raw", key_serializer="raw")
        self.dlq_topic = app.topic(n.deadletter, value_serializer="raw", key_serializer="raw")
        self.join_table = app.Table(n.join_table, partitions=k.internal_partitions, key_type=bytes, value_type=bytes)
        self.domain_table = app.Table(
            n.domain_table, partitions=k.internal_partitions, key_type=bytes, value_type=bytes
        )
        app.agent(self.input_topic, name="ingest", concurrency=1)(self._ingest)
        app.timer(interval=self.k.heartbeat_interval_s)(self._heartbeat)
        app.agent(self.join_topic, name="join", concurrency=1)(self._join)
        app.agent(self.domain_topic, name="domain", concurrency=1)(self._domain)

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

        return app

    def close_sinks(self) -> None:
        """Flush telemetry on shutdown (spans and metrics still buffered in the exporters)."""
        for sink in self.sinks:
            sink.close()

    # -- web --
    def status(self) -> dict[str, Any]:
        return {
            "app_id": self.k.app_id,
            "uptime_s": round(time.time() - self.started, 1),
            "partitions": {"join": sorted(self.join_states), "domain": sorted(self.domain_states)},
            "counters": dict(sorted(self.counters.items())),
            "deadletter": {k[len("deadletter.") :]: v for k, v in self.counters.items() if k.startswith("deadletter.")},
            "state_size": self.state_size(),
            "consumer_lag": self.consumer_lag(),
        }

    def consumer_lag(self) -> dict[str, int]:
        """Messages of the input topic not yet ingested, per partition this worker has read."""
        out: dict[str, int] = {}
        for partition, offset in list(self.input_positions.items()):
            try:
                highwater = self.app.consumer.highwater(TP(self.names.input, partition))
            except Exception:  # not assigned any more, or no fetch yet: nothing to report
                continue
            if highwater is not None:
                out[str(partition)] = max(0, int(highwater) - offset - 1)
        return out

    def state_size(self) -> dict[str, int]:
        size: Counter[str] = Counter()
        for js in self.join_states.values():
            size["pending_joins"] += js.joiner.state_size()
            size["dedup_ids"] += js.dedup.state_size()
        for ds in self.domain_states.values():
            size["domains"] += len(ds.domains)
            size["pending_ordered"] += len(ds.pending)
            for dm in ds.domains.values():
                size.update(dm.state_size())
        return dict(size)

    def is_ready(self) -> bool:
        app = self.app
        return bool(getattr(app, "started", False) and not app.rebalancing)

    async def _on_revoked(self, app: Any, revoked: Any, **_: Any) -> None:
        # A revoked partition may be processed elsewhere before it comes back: its in-memory state and
        # held (unacked) events are stale from now on; the snapshot table is the truth.
        for tp in revoked:
            if tp.topic == self.names.input:
                self.input_max.pop(tp.partition, None)
                self.input_heard.pop(tp.partition, None)
            elif tp.topic == self.names.join:
                self.join_states.pop(tp.partition, None)
                self.held.pop(("join", tp.partition), None)
            elif tp.topic == self.names.domain:
                self.domain_states.pop(tp.partition, None)
                self.held.pop(("domain", tp.partition), None)

    # -- helpers --
    async def _dead_letter(
        self,
        key: bytes | None,
        value: bytes,
        reason: str,
        detail: str,
        src: tuple[str, int, int] | tuple[str, int, int, int | None],
    ) -> None:
        """Park what cannot be used, with the reason and where it came from (topic, partition, offset,
        and the line within a batched input message)."""
        self.counters[f"deadletter.{reason}"] += 1
        topic, partition, offset = src[:3]
        headers = [
            (H_REASON, reason.encode()),
            (H_DETAIL, detail[:2000].encode("utf-8", "replace")),
            (H_SRC_TOPIC, topic.encode()),
            (H_SRC_PARTITION, str(partition).encode()),
            (H_SRC_OFFSET, str(offset).encode()),
        ]
        line = src[3] if len(src) > 3 else None
        if line is not None:
            headers.append((H_SRC_LINE, str(line).encode()))
        await self.dlq_topic.send(key=key, value=value, headers=headers)
        for sink in self.sinks:
            sink.on_reject(reason, detail)

    async def _checkpoint(self, stage: str, partition: int, state: JoinState | DomainState, force: bool) -> None:
        key = (stage, partition)
        held = self.held.get(key)
        if not held:
            return
        now = time.monotonic()
        due = len(held) >= self.k.snapshot_every or now - self.last_snapshot.get(key, 0.0) >= self.k.snapshot_interval_s
        if not (due or force):
            return
        # Outputs first, then the snapshot that claims to cover them, then the acks.
        await self.app.producer.flush()
        table = self.join_table if stage == "join" else self.domain_table
        try:
            blob = state.dumps()
        except Exception:
            # Not fatal: the events stay unacked and are replayed from the last good snapshot.
            log.exception("%s: snapshot of partition %s failed", stage, partition)
            self.counters[f"snapshot_errors.{stage}"] += 1
            self.last_snapshot[key] = now
            return
        table[snapshot_key(stage, partition)] = blob
        self.counters[f"snapshots.{stage}"] += 1
        self.counters[f"snapshot_bytes.{stage}.last"] = len(blob)
        for ev in held:
            ev.ack()
        held.clear()
        self.last_snapshot[key] = now

    # -- stage 1: ingest (stateless) --
    async def _ingest(self, stream: Any) -> Any:
        max_bytes = self.settings.ingest.max_event_bytes
        n = self.k.internal_partitions
        # take_events acks a batch only after this body has sent it; a commit flushes the producer first.
        async for events in stream.take_events(self.k.batch_max, within=self.k.batch_wait_s):
            out: dict[int, list[frames.Item]] = {}
            newest: dict[int, float] = {}  # published to input_max only together with the items
            for ev in events:
                msg = ev.message
                self.counters["ingest.messages"] += 1
                self.input_positions[msg.partition] = msg.offset
                self.input_heard[msg.partition] = time.monotonic()
                raw = msg.value
                if raw is None:
                    await self._dead_letter(msg.key, b"", "invalid", "empty message (tombstone)", self._src_of(msg))
                    continue
                batched = _is_ndjson(msg.headers)
                src = f"i{msg.partition}"
                seq = 0  # position of each item within its message: stable, since it depends on content only
                for line_no, line in enumerate(raw.split(b"\n") if batched else (raw,), start=1):
                    if batched and not line.strip():
                        continue
                    try:
                        event = parse_event(line, max_bytes=max_bytes)
                    except Exception as exc:  # EventError has its reason; anything else must not stop the worker
                        reason, detail = (
                            (exc.reason, exc.detail)
                            if isinstance(exc, EventError)
                            else ("invalid", f"{type(exc).__name__}: {exc}")
                        )
                        where = (*self._src_of(msg), line_no if batched else None)
                        await self._dead_letter(msg.key, line, reason, detail, where)
                        continue
                    self.counters[f"ingest.{event.type}"] += 1
                    if event.ts > newest.get(msg.partition, float("-inf")):
                        newest[msg.partition] = event.ts
                    for on_event in self.on_event_sinks:
                        on_event(event.type)
                    q = partition_of(routing_key(event), n)
                    out.setdefault(q, []).append(frames.Item(src, msg.offset, seq, "event", line))
                    seq += 1
                    # Canaries are global: every join partition must know every marker before the outputs
                    # that follow it in the input. Sent with the event itself, not relayed by its partition,
                    # so no partition can see a leak of a marker that is still on its way from another.
                    for payload in _canaries_of(event):
                        for r in range(n):
                            if r != q:
                                out.setdefault(r, []).append(frames.Item(src, msg.offset, seq, "canary", payload))
                        seq += 1
            # Under the lock: the heartbeat must not send marks that cover items not yet sent.
            async with self.send_lock:
                for i, ts in newest.items():
                    if ts > self.input_max.get(i, float("-inf")):
                        self.input_max[i] = ts
                await self._send_to_join(out, force=False)

    def _marks(self) -> tuple[dict[str, float], list[str]]:
        """Event time per input partition read here, and the partitions silent for watermark_idle_s (the
        join partitions stop waiting for those)."""
        now = time.monotonic()
        idle_s = self.k.watermark_idle_s
        heard = self.input_heard
        marks = {f"i{i}": ts for i, ts in self.input_max.items()}
        return marks, sorted(f"i{i}" for i in self.input_max if now - heard.get(i, now) > idle_s)

    async def _send_to_join(self, out: dict[int, list[frames.Item]], force: bool) -> None:
        # Event-time progress per input partition goes to every join partition (with its items, or
        # alone once it moved a watermark step): Kafka orders nothing across partitions, so a join
        # partition may promise no more than the slowest input partition has reached.
        marks, idle = self._marks()
        step = self.k.watermark_step_s
        for q in range(self.k.internal_partitions):
            items = out.get(q, [])
            sent = self.sent_marks.setdefault(q, {})
            moved = any(ts - sent.get(src, float("-inf")) >= step for src, ts in marks.items())
            if not (items or moved or force):
                continue
            await self._send_runs(self.join_topic, q, items, "ingest.batches", marks=marks, idle=idle)
            sent.update(marks)

    async def _send_runs(self, topic: Any, q: int, items: list[frames.Item], counter: str, **progress: Any) -> None:
        """Items to partition q in as many messages as their size needs. The event-time progress (a
        watermark, input marks) rides on the last one: it must not pass the items it covers."""
        runs = frames.split(items, self.batch_bytes)
        for i, run in enumerate(runs):
            batch = frames.Batch(run, **(progress if i == len(runs) - 1 else {}))
            await topic.send(key=None, value=frames.encode(batch), partition=q)
            self.counters[counter] += 1

    async def _heartbeat(self) -> None:
        """Marks to every join partition on a wall-clock timer, so that watermarks (and the alerts they
        hold back) move on when input goes quiet: a join or domain partition re-evaluates idleness only
        when a message reaches it. Every worker sends, even one that has read nothing (yet): after a
        rebalance the partitions' new reader knows nothing of them until it reads a message."""
        if not self.app.rebalancing:
            async with self.send_lock:
                await self._send_to_join({}, force=True)
            self.counters["ingest.heartbeats"] += 1

    async def _item_failed(self, stage: str, it: frames.Item, exc: Exception) -> None:
        log.exception("%s: item %s:%s:%s failed", stage, it.src, it.offset, it.seq)
        detail = f"{type(exc).__name__}: {exc}"
        await self._dead_letter(None, it.payload, "internal_error", detail, self._src_of_item(it))

    def _src_of(self, msg: Any) -> tuple[str, int, int]:
        return (msg.topic, msg.partition, msg.offset)

    def _src_of_item(self, it: frames.Item) -> tuple[str, int, int]:
        topic = self.names.input if it.src.startswith("i") else self.names.join
        return (topic, int(it.src[1:]), it.offset)

    # -- stage 2: join --
    def _join_state(self, partition: int) -> JoinState:
        st = self.join_states.get(partition)
        if st is None:
            blob = self.join_table.get(snapshot_key("join", partition))
            st = JoinState.loads(blob, self.det) if blob else JoinState.fresh(self.det)
            self.join_states[partition] = st
            now = time.monotonic()
            for src in st.marks:  # restored marks count as just heard, and may go idle from now
                self.mark_heard[(partition, src)] = now
            self.counters["restores.join" if blob else "fresh.join"] += 1
        return st

    async def _join(self, stream: Any) -> Any:
        await self._stateful("join", stream, self._join_state, self._join_batch)

    async def _stateful(
        self,
        stage: str,
        stream: Any,
        state_of: Callable[[int], JoinState | DomainState],
        handle: Callable[[Any, int, int, frames.Batch], Awaitable[None]],
    ) -> None:
        """The loop both stateful stages share: handle each message once, ack only via a snapshot."""
        async for ev in stream.noack().events():
            msg = ev.message
            p = msg.partition
            st = state_of(p)
            self.held.setdefault((stage, p), []).append(ev)
            if msg.offset > st.offset:
                try:
                    batch = frames.decode(msg.value or b"")
                except frames.FrameError as exc:
                    await self._dead_letter(msg.key, msg.value or b"", "internal_error", str(exc), self._src_of(msg))
                else:
                    await handle(st, p, msg.offset, batch)
                st.offset = msg.offset
            await self._checkpoint(stage, p, st, force=False)

    async def _join_batch(self, st: JoinState, p: int, offset: int, batch: frames.Batch) -> None:
        out = _Outbox(f"j{p}", offset, self.k.internal_partitions)
        for it in batch.items:
            if _late_or_dup(st.last, it.src, it.pos):
                self.counters["join.replayed_skipped"] += 1
                continue
            try:
                await self._join_item(st, it, out)
            except Exception as exc:  # a bug must not wedge the partition; the item is kept
                await self._item_failed("join", it, exc)
        if batch.marks:
            now = time.monotonic()
            quiet = set(batch.idle or ())
            for src, ts in batch.marks.items():
                st.marks[src] = max(st.marks.get(src, float("-inf")), ts)
                self.mark_heard[(p, src)] = now
                if src in quiet:
                    st.idle.add(src)
                else:
                    st.idle.discard(src)
        wm = self._join_wm(st, p) - self.k.watermark_lateness_s
        if wm > st.wm:
            # Pending halves expire on the watermark, not on the newest event seen here: one input
            # partition read ahead of another (a backlog, a tick far ahead) must not orphan requests
            # whose responses are still unread elsewhere. Orphans precede the watermark that passes them.
            self._route(st.joiner.advance(wm), out)
            st.wm = wm
        wm_due = wm > float("-inf") and (wm >= st.sent_wm + self.k.watermark_step_s or st.sent_wm == float("-inf"))
        if wm_due:
            st.sent_wm = wm
        for q in range(self.k.internal_partitions):
            items = out.domain.get(q)
            if items or wm_due:
                mark = (p, st.sent_wm) if st.sent_wm != float("-inf") else None
                await self._send_runs(self.domain_topic, q, items or [], "join.batches", wm=mark)

    def _join_wm(self, st: JoinState, p: int) -> float:
        """The slowest input partition's event time, skipping partitions silent for watermark_idle_s.

        When every input partition is silent, everything written has been read: the newest mark holds."""
        now = time.monotonic()
        idle = self.k.watermark_idle_s
        if now - self.started_mono <= idle and any(f"i{i}" not in st.marks for i in range(self.k.input_partitions)):
            # An input partition not heard of yet may be read by another worker that has not sent its
            # first batch: waiting for it (at most watermark_idle_s after start) keeps its items on time.
            return float("-inf")
        # Quiet by the ingest's word (it reads the partition), or not heard of at all for that long
        # (the worker that read it is gone).
        live = [
            ts
            for src, ts in st.marks.items()
            if src not in st.idle and now - self.mark_heard.get((p, src), now) <= idle
        ]
        if live:
            return min(live)
        return max(st.marks.values(), default=float("-inf"))

    async def _join_item(self, st: JoinState, it: frames.Item, out: _Outbox) -> None:
        event = parse_event(it.payload, max_bytes=self.settings.ingest.max_event_bytes)
        if it.kind == "canary":  # a marker planted elsewhere (see _ingest)
            assert isinstance(event, Canary)
            st.joiner.canaries.register_event(event)
            return
        try:
            if isinstance(event, (Request, Response)):
                st.joiner.check(event)
            if st.dedup.seen(event.event_id, event.ts):
                raise EventError("duplicate", f"event_id {event.event_id!r} was seen before")
        except EventError as exc:
            await self._dead_letter(None, it.payload, exc.reason, exc.detail, self._src_of_item(it))
            return
        self.counters[f"events.{event.type}"] += 1
        if isinstance(event, Canary):
            st.joiner.canaries.register_event(event)
        elif isinstance(event, CacheStats):
            out.to_domain(event.cache_domain, "stats", it.payload, _order_key(event))
        else:
            self._route(st.joiner.observe(event, checked=True), out)

    def _route(self, exchanges: list[Exchange], out: _Outbox) -> None:
        for ex in exchanges:
            if ex.cache_domain is None:
                self.counters["exchanges.unroutable"] += 1
                continue
            self.counters["exchanges"] += 1
            if ex.orphan:
                self.counters[f"orphans.{ex.orphan}"] += 1
            out.to_domain(ex.cache_domain, "exchange", ex.model_dump_json().encode(), _order_key(ex))

    # -- stage 3: domains --
    def _domain_state(self, partition: int) -> DomainState:
        st = self.domain_states.get(partition)
        if st is None:
            blob = self.domain_table.get(snapshot_key("domain", partition))
            st = DomainState.loads(blob, self.det) if blob else DomainState()
            self.domain_states[partition] = st
            self.counters["restores.domain" if blob else "fresh.domain"] += 1
        return st

    async def _domain(self, stream: Any) -> Any:
        await self._stateful("domain", stream, self._domain_state, self._domain_batch)

    def _domain_of(self, st: DomainState, name: str) -> DomainMonitor:
        dm = st.domains.get(name)
        if dm is None:
            dm = st.domains[name] = DomainMonitor(name, self.det)
        return dm

    async def _domain_batch(self, st: DomainState, p: int, offset: int, batch: frames.Batch) -> None:
        alerts: list[Alert] = []
        for it in batch.items:
            if _late_or_dup(st.last, it.src, it.pos):
                self.counters["domain.replayed_skipped"] += 1
                continue
            try:
                alerts += self._domain_item(st, it)
            except Exception as exc:  # a bug must not wedge the partition; the item is kept
                await self._item_failed("domain", it, exc)
        if batch.wm is not None:
            src_p, wm = batch.wm
            # max(): a replayed (older) watermark never moves time back.
            st.wms[src_p] = max(st.wms.get(src_p, float("-inf")), wm)
            self.wm_heard[src_p] = time.monotonic()
            alerts += self._release(st)
        for a in alerts:
            self.counters[f"alerts.{a.kind}.{a.severity}"] += 1
            await self.alerts_topic.send(key=a.alert_id.encode(), value=a.model_dump_json().encode())
            for sink in self.sinks:
                sink.on_alert(a)

    def _domain_item(self, st: DomainState, it: frames.Item) -> list[Alert]:
        if it.kind not in ("stats", "exchange"):
            self.counters["domain.unknown_kind"] += 1
            return []
        if it.meta is None:
            raise frames.FrameError(f"{it.kind} item without its order key")
        ts, rank, ident, name = it.meta
        key = (ts, rank, ident)
        if ts <= st.released:
            # Later than the watermark promised (input more disordered than the lateness allows):
            # evaluated at once rather than dropped.
            self.counters["domain.late_items"] += 1
            return self._feed(st, name, self._validated(it.kind, it.payload))
        # Held as bytes: a held item is pickled into every snapshot until released, and bytes pickle
        # for free where a model costs more than validating it once on release.
        st.seq += 1
        heapq.heappush(st.pending, (key, st.seq, name, (it.kind, it.payload)))
        return []

    def _validated(self, kind: str, payload: bytes) -> CacheStats | Exchange:
        if kind == "exchange":
            return Exchange.model_validate_json(payload)
        ev = parse_event(payload, max_bytes=self.settings.ingest.max_event_bytes)
        assert isinstance(ev, CacheStats)
        return ev

    def _global_wm(self, st: DomainState) -> float:
        n = self.k.internal_partitions
        now = time.monotonic()
        newest = max(self.wm_heard.values(), default=now)
        marks = []
        for q in range(n):
            heard = self.wm_heard.get(q)
            # A join partition that has been silent for a while (no traffic) must not hold every domain back.
            if q not in st.wms:
                if heard is None and now - self.started_mono > self.k.watermark_idle_s:
                    continue
                return float("-inf")
            if heard is not None and newest - heard > self.k.watermark_idle_s:
                continue
            marks.append(st.wms[q])
        return min(marks) if marks else float("-inf")

    def _release(self, st: DomainState) -> list[Alert]:
        upto = self._global_wm(st)
        alerts: list[Alert] = []
        if upto <= st.released:
            return alerts
        while st.pending and st.pending[0][0][0] <= upto:
            _, _, name, (kind, payload) = heapq.heappop(st.pending)
            alerts += self._feed(st, name, self._validated(kind, payload))
        st.released = upto
        for name in sorted(st.domains):
            alerts += st.domains[name].advance(upto)
        return alerts

    def _feed(self, st: DomainState, name: str, item: CacheStats | Exchange) -> list[Alert]:
        dm = self._domain_of(st, name)
        if isinstance(item, CacheStats):
            return dm.observe_stats(item)
        alerts = dm.observe_exchange(item)
        for sink in self.sinks:
            sink.on_exchange(item, alerts)
        return alerts


class _Outbox:
    """What handling one join message produces, by domain partition, with consecutive positions."""

    def __init__(self, src: str, offset: int, partitions: int) -> None:
        self.src = src
        self.offset = offset
        self.partitions = partitions
        self.seq = 0
        self.domain: dict[int, list[frames.Item]] = {}

    def to_domain(self, cache_domain: str, kind: str, payload: bytes, key: tuple[float, int, str]) -> None:
        q = partition_of(cache_domain, self.partitions)
        meta = (*key, cache_domain)
        self.domain.setdefault(q, []).append(frames.Item(self.src, self.offset, self.seq, kind, payload, meta))
        self.seq += 1


def _is_ndjson(headers: Any) -> bool:
    if not headers:
        return False
    items = headers.items() if isinstance(headers, dict) else headers
    return any(k.lower() == "content-type" and bytes(v).split(b";")[0].strip() == NDJSON_CONTENT_TYPE for k, v in items)


def _canaries_of(event: Event) -> list[bytes]:
    """The markers an event plants, as canary events for the other join partitions."""
    if isinstance(event, Canary):
        return [event.model_dump_json().encode()]
    if isinstance(event, Request) and event.canaries:
        return [
            Canary(
                type="canary",
                event_id=f"{event.event_id}#canary{i}",
                ts=event.ts,
                tenant_id=event.tenant_id,
                marker=marker,
                session_id=event.session_id,
            )
            .model_dump_json()
            .encode()
            for i, marker in enumerate(event.canaries)
        ]
    return []


def build_runtime(settings: Settings) -> Runtime:
    return Runtime(settings)
