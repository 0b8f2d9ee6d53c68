"""What each Kafka stage does with one partition's input, without Faust: feed a batch, get back what to
send on, what to dead-letter, and the alerts.

    IngestStage  (streams/kafka/ingest.py) input messages -> validated, text-free records per join
                 partition (+ canary plants, + event-time marks per input partition)
    JoinStage    records of one join partition -> the core's front (admit, join: detectors/front.py),
                 route by cache domain, watermark = slowest input partition - lateness
    DomainStage  exchanges and stats of one domain partition -> event-time order behind the join
                 partitions' watermarks -> the core's back (detectors/back.py) -> alerts

No I/O and no clock: wall-clock time, used for idleness only, is passed in as `now` (monotonic s).
app.py moves the bytes and acks; checkpoint.py snapshots the states. Every decision about the data is
made by detectors/ (Front, Back, route_exchange, DomainTable, count_alerts, order_key, EventTimeBuffer,
EventClock are what the embedded Monitor and runner use too). tests/kafka/ runs them without a broker.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field, replace

from detectors.pipeline import (
    Back,
    Deduper,
    DetectionSettings,
    DomainTable,
    EventTimeBuffer,
    Front,
    Joiner,
    OrderKey,
    PublicSet,
    count_alerts,
    join_apart,
    join_state,
    judge_apart,
    judge_state,
    order_key,
    route_exchange,
)
from schemas.alert import Alert, IncidentResolved
from schemas.events import CacheStats, EventError
from schemas.exchange import CanaryHit, Exchange
from streams.kafka import records
from streams.kafka.frames import JOIN, Batch, Item, Source
from streams.routing import partition_of
from streams.settings import Settings

log = logging.getLogger("crosstalk.stages")
Pos = tuple[int, int]  # (offset, seq) within one source partition
NEG_INF = float("-inf")


@dataclass(slots=True)
class DeadLetter:
    """What a stage could not use: the bytes it had, why, and where they came from."""

    payload: bytes
    reason: str
    detail: str
    source: Source
    offset: int
    line: int | None = None  # within a batched (NDJSON) input message
    key: bytes | None = None
    # "warning": the event was used, a part of it was dropped (weak_canary); the payload names it, no more.
    severity: str = "error"


@dataclass(slots=True)
class Send:
    """One internal message to send: items for a partition of the next stage, with event-time progress."""

    partition: int
    items: list[Item]
    wm: tuple[int, float] | None = None
    marks: dict[int, float] | None = None
    idle: list[int] | None = None


def _failed(stage: str, it: Item, exc: Exception) -> DeadLetter:
    # A bug must not wedge the partition: the item is kept (dead-lettered) and the stage goes on.
    log.exception("%s: item %s:%s:%s failed", stage, it.source, it.offset, it.seq)
    return DeadLetter(it.payload, "internal_error", f"{type(exc).__name__}: {exc}", it.source, it.offset)


def publish(
    alerts: list[Alert],
    resolved: list[IncidentResolved],
    published: list[tuple[bytes, bytes]],
    dead: list[DeadLetter],
    counters: Counter[str],
    source: Source,
) -> None:
    """What goes to the alerts topic, serialised here, where a failure is one dead letter, not a crashed
    agent and a lost partition: alerts keyed by alert_id, resolutions by incident_id."""
    for a in alerts:
        try:
            published.append((a.alert_id.encode(), a.model_dump_json().encode()))
        except Exception as exc:
            log.exception("alert %s could not be serialised", a.alert_id)
            detail = f"alert {a.alert_id} ({a.kind}): {type(exc).__name__}: {exc}"
            dead.append(DeadLetter(a.alert_id.encode(), "internal_error", detail, source, -1))
    for r in resolved:
        counters["incidents.resolved"] += 1
        published.append((r.incident_id.encode(), r.model_dump_json().encode()))


# --- join ---------------------------------------------------------------------------------------------


@dataclass
class JoinState:
    """One join partition's state (snapshotted whole by checkpoint.py)."""

    joiner: Joiner  # its CanaryRegistry holds the markers, by keyed hashes only
    dedup: Deduper
    # request_id -> the token keys of its response's hex words (found at ingest, where the text is), scanned for
    # markers once every input partition has been read past the exchange (see `JoinStage._route`)
    keys: dict[str, list[int]] = field(default_factory=dict)
    held: EventTimeBuffer[Exchange] = field(default_factory=EventTimeBuffer)  # exchanges whose keys wait so
    hits: dict[str, list[CanaryHit]] = field(default_factory=dict)  # scanned at once (checkpoints before `keys`)
    # request_id -> the token keys of its prompt's hex words: markers the receiver re-sent are not a leak to it
    prompt_keys: dict[str, list[int]] = field(default_factory=dict)
    wm: float = NEG_INF  # the watermark the Joiner's expiry has been advanced to
    sent_wm: float = NEG_INF
    marks: dict[int, float] = field(default_factory=dict)  # input partition -> newest event time read
    idle: set[int] = field(default_factory=set)  # input partitions the ingest reported quiet
    last: dict[Source, Pos] = field(default_factory=dict)
    offset: int = -1  # last join-topic offset covered

    @classmethod
    def fresh(cls, s: DetectionSettings) -> JoinState:
        return cls(*join_state(s))

    def __setstate__(self, state: dict[str, object]) -> None:
        # A checkpoint written before `keys` and `held` existed restores with them empty (its hits were scanned).
        self.__dict__.update(state)
        self.__dict__.setdefault("keys", {})
        self.__dict__.setdefault("held", EventTimeBuffer())
        self.__dict__.setdefault("prompt_keys", {})


@dataclass(slots=True)
class JoinResult:
    sends: list[Send] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)


class _ToDomain:
    """What handling one join message produces, by domain partition, with consecutive positions."""

    def __init__(self, source: Source, offset: int, partitions: int) -> None:
        self.source = source
        self.offset = offset
        self.partitions = partitions
        self.seq = 0
        self.items: dict[int, list[Item]] = {}

    def add(self, cache_domain: str, kind: str, payload: bytes, key: OrderKey) -> None:
        q = partition_of(cache_domain, self.partitions)
        self.items.setdefault(q, []).append(Item(self.source, self.offset, self.seq, kind, payload, key, cache_domain))
        self.seq += 1


class JoinStage:
    def __init__(self, settings: Settings, counters: Counter[str], started: float) -> None:
        self.kafka = settings.kafka
        self.detection = settings.detection
        self.counters = counters
        self.started = started  # monotonic time the worker started
        self.mark_heard: dict[tuple[int, int], float] = {}  # (join partition, input partition) -> wall clock
        self.announced: dict[int, float] = {}  # join partition -> wall clock it last sent a watermark of -inf

    def restored(self, partition: int, st: JoinState, now: float) -> None:
        for i in st.marks:  # restored marks count as just heard, and may go idle from now
            self.mark_heard[(partition, i)] = now

    def handle(self, st: JoinState, partition: int, offset: int, batch: Batch, now: float) -> JoinResult:
        res = JoinResult()
        out = _ToDomain(Source(JOIN, partition), offset, self.kafka.internal_partitions)
        front = join_apart(st.joiner, st.dedup, self.counters)
        last = st.last
        for it in batch.items:
            # A position already applied is a replay of an upstream that restarted (checked inline: per item).
            pos = (it.offset, it.seq)
            seen = last.get(it.source)
            if seen is not None and pos <= seen:
                self.counters["join.replayed_skipped"] += 1
                continue
            last[it.source] = pos
            try:
                self._item(st, front, it, out, res)
            except Exception as exc:
                res.dead.append(_failed("join", it, exc))
        if batch.marks:
            quiet = set(batch.idle or ())
            for i, ts in batch.marks.items():
                st.marks[i] = max(st.marks.get(i, NEG_INF), ts)
                self.mark_heard[(partition, i)] = now
                if i in quiet:
                    st.idle.add(i)
                else:
                    st.idle.discard(i)
        wm = self.watermark(st, partition, now)
        if wm > st.wm:
            # Pending halves expire on the watermark, not on the newest event seen here: one input
            # partition read ahead of another (a backlog, a tick far ahead) must not orphan requests
            # whose responses are still unread elsewhere. Orphans precede the watermark that passes them.
            self._route(st, front.advance(wm), out)
            st.wm = wm
            if st.held:
                self._release(st, wm, out)
        # A message that goes anyway carries the watermark as it is now (free, and what releases its
        # items at once); a message only for the watermark goes to every partition once it moved a step,
        # or once it reached the newest mark (input quiet: the last items wait for nothing else).
        newest = max(st.marks.values(), default=NEG_INF)
        wm_due = wm > NEG_INF and (
            wm >= st.sent_wm + self.kafka.watermark_step_s or st.sent_wm == NEG_INF or st.sent_wm < wm == newest
        )
        if wm_due:
            st.sent_wm = wm
        elif st.wm == NEG_INF and now - self.announced.get(partition, NEG_INF) >= self.kafka.heartbeat_interval_s:
            # No promise yet (an input partition not heard of since the start): every domain partition hears
            # that this one is alive and waits for it, rather than skip it as gone once watermark_idle_s passed
            # and take its items as late.
            wm_due = True
            self.announced[partition] = now
        mark = (partition, st.wm)
        for q in range(self.kafka.internal_partitions):
            items = out.items.get(q)
            if items or wm_due:
                res.sends.append(Send(q, items or [], wm=mark))
        return res

    def watermark(self, st: JoinState, partition: int, now: float) -> float:
        """The slowest input partition's event time less watermark_lateness_s, skipping partitions the ingest
        reported idle and those whose marks stopped for watermark_stalled_s.

        When every input partition is silent, everything written has been read: the newest mark holds, with
        no lateness taken off. Lateness is room for input still on its way; with none on its way, it would
        keep the last exchange (whose event time is the newest mark) pending until some later event came."""
        idle = self.kafka.watermark_idle_s
        if now - self.started <= idle and any(i not in st.marks for i in range(self.kafka.input_partitions)):
            # An input partition not heard of yet may be read by another worker that has not sent its
            # first batch: waiting for it (at most watermark_idle_s after start) keeps its items on time.
            return NEG_INF
        # Quiet by the ingest's word (it reads the partition), or no marks for watermark_stalled_s (its reader
        # hung). Not on watermark_idle_s: a reader that is merely slow (a rebalance, a restore, a busy machine)
        # would have its items come after the watermark passed them, and judged out of order.
        heard, stalled = self.mark_heard, self.kafka.watermark_stalled_s
        live = [
            ts for i, ts in st.marks.items() if i not in st.idle and now - heard.get((partition, i), now) <= stalled
        ]
        if live:
            return min(live) - self.kafka.watermark_lateness_s
        return max(st.marks.values(), default=NEG_INF)

    def _item(self, st: JoinState, front: Front, it: Item, out: _ToDomain, res: JoinResult) -> None:
        if it.kind == "plant":  # a marker planted by an event routed elsewhere
            front.plant([records.plant_from_record(it.payload)])
            return
        try:
            if it.kind == "canary":  # the canary event itself, ingested: its marker as its keys
                front.admit_plant(records.plant_from_record(it.payload))
                return
            event, keys = records.event_from_record(it.payload)
            front.admit(event)
        except EventError as exc:
            res.dead.append(DeadLetter(it.payload, exc.reason, exc.detail, it.source, it.offset))
            return
        if keys:  # scanned for markers when its exchange goes on (`_route`, `_send`)
            if event.type == "response":
                st.keys.setdefault(event.request_id, keys)
            elif event.type == "request":
                st.prompt_keys.setdefault(event.request_id, keys)
        exchanges = front.join(event)  # counts every event; cache stats complete no exchange
        if event.type == "cache_stats":
            out.add(event.cache_domain, "stats", it.payload, order_key(event))
            return
        self._route(st, exchanges, out)

    def _route(self, st: JoinState, exchanges: list[Exchange], out: _ToDomain) -> None:
        """Exchanges to their domain's partition. One whose response holds hex words waits for the watermark
        to pass it before its words are looked up among the markers: a marker is planted by an event on any
        input partition, and Kafka orders nothing across them, so the plant may still be unread on a partition
        behind this one (a backlog read after a restart or a rebalance comes a partition at a time). Once the
        watermark passed the exchange, every input partition was read past it, and with it every plant before
        it. The domain stage waits for the same watermark, so the wait costs no alert latency."""
        for ex in exchanges:
            if st.keys and ex.response is not None and ex.ts > st.wm and ex.request_id in st.keys:
                st.held.push(order_key(ex), ex)
                self.counters["join.canary_scans_held"] += 1
                if len(st.held) > self.detection.max_pending_joins:  # a watermark that never comes: bounded
                    self.counters["join.canary_scans_early"] += 1
                    self._send(st, next(st.held.release(float("inf"))), out)
                continue
            self._send(st, ex, out)

    def _release(self, st: JoinState, wm: float, out: _ToDomain) -> None:
        for ex in st.held.release(wm):
            self._send(st, ex, out)

    def _send(self, st: JoinState, ex: Exchange, out: _ToDomain) -> None:
        resp, req = ex.response, ex.request
        keys = st.keys.pop(ex.request_id, None) if resp is not None and st.keys else None
        prompt = st.prompt_keys.pop(ex.request_id, None) if st.prompt_keys and req is not None else None
        if keys is not None and resp is not None:
            # The Joiner's own canary step, on the keyed ids of both texts' words (no text reaches this stage).
            prompt_ts = req.ts if req is not None else resp.ts
            hits: list[CanaryHit] | None = st.joiner.marker_hits(keys, prompt, resp.ts, prompt_ts)
        else:
            hits = st.hits.pop(ex.request_id, None) if st.hits else None
        if hits and resp is not None:
            ex = replace(ex, canary_hits=hits)
        domain = route_exchange(ex, self.counters)
        if domain is not None:
            out.add(domain, "exchange", records.exchange_record(ex), order_key(ex))


# --- domain ---------------------------------------------------------------------------------------------


@dataclass
class DomainState:
    """One domain partition's state: its domains and the items waiting for the watermark."""

    table: DomainTable  # the partition's DomainMonitors, bounded and expired as in the embedded Monitor
    wms: dict[int, float] = field(default_factory=dict)  # join partition -> its watermark
    released: float = NEG_INF  # items up to this event time were handed to the domains
    # Held as bytes: a held item is pickled into every snapshot until released, and bytes pickle for
    # free where a model costs more than decoding it once on release.
    pending: EventTimeBuffer[Item] = field(default_factory=EventTimeBuffer)
    last: dict[Source, Pos] = field(default_factory=dict)
    offset: int = -1

    @classmethod
    def fresh(cls, s: DetectionSettings, counters: Counter[str], public: PublicSet | None = None) -> DomainState:
        return cls(judge_state(s, counters, public))


@dataclass(slots=True)
class DomainResult:
    alerts: list[Alert] = field(default_factory=list)
    evaluated: list[tuple[Exchange, list[Alert]]] = field(default_factory=list)  # for the sinks
    resolved: list[IncidentResolved] = field(default_factory=list)
    # What goes to the alerts topic: (key, value) — alerts keyed by alert_id, resolutions by incident_id.
    published: list[tuple[bytes, bytes]] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)


class DomainStage:
    def __init__(self, settings: Settings, counters: Counter[str], started: float) -> None:
        self.kafka = settings.kafka
        self.detection = settings.detection
        self.counters = counters
        self.started = started
        self.wm_heard: dict[int, float] = {}  # join partition -> wall clock of its last watermark
        self.opened: dict[int, float] = {}  # domain partition -> wall clock this worker took it up

    def restored(self, partition: int, now: float) -> None:
        """The partition was taken up here (restored or fresh): join partitions it has not heard of get
        watermark_idle_s from now to be heard, not from the worker's start (a rebalance hands partitions
        to a worker that started long before)."""
        self.opened[partition] = now

    def handle(self, st: DomainState, partition: int, batch: Batch, now: float) -> DomainResult:
        res = DomainResult()
        back = judge_apart(st.table)
        st.table.record_evaluated()  # which exchange raised which alert, for the sinks (a span's events)
        last = st.last
        for it in batch.items:
            pos = (it.offset, it.seq)  # replays skipped as in JoinStage.handle
            seen = last.get(it.source)
            if seen is not None and pos <= seen:
                self.counters["domain.replayed_skipped"] += 1
                continue
            last[it.source] = pos
            try:
                self._item(st, back, it, res)
            except Exception as exc:
                res.dead.append(_failed("domain", it, exc))
        if batch.wm is not None:
            src, wm = batch.wm
            # max(): a replayed (older) watermark never moves time back.
            st.wms[src] = max(st.wms.get(src, NEG_INF), wm)
            self.wm_heard[src] = now
            self._release(st, back, now, res, partition)
        res.alerts += st.table.take_flushed()  # domains evicted by the count bound flushed their buffers
        res.evaluated = st.table.take_evaluated()
        count_alerts(self.counters, res.alerts)
        self._publish(res, partition)
        return res

    def tick(self, st: DomainState, partition: int, wall: float) -> DomainResult:
        """The worker's clock (issue 40): the partition's held findings due by `wall` (UNIX s) are judged
        (`Back.mature`), so a cold domain's finding comes out when the input has gone quiet; the core reads no clock."""
        res = DomainResult()
        # Held findings due, and what a late digest of another partition found (detectors/fleet_mixup.py).
        st.table.record_evaluated()
        due = judge_apart(st.table).mature(wall, st.released) + st.table.take_flushed()
        res.evaluated = st.table.take_evaluated()
        res.alerts = count_alerts(self.counters, due)
        if res.alerts:
            self._publish(res, partition)
        return res

    def _publish(self, res: DomainResult, partition: int) -> None:
        publish(res.alerts, res.resolved, res.published, res.dead, self.counters, Source(JOIN, partition))

    def _item(self, st: DomainState, back: Back, it: Item, res: DomainResult) -> None:
        if it.kind not in ("stats", "exchange"):
            self.counters["domain.unknown_kind"] += 1
            return
        if it.order is None or it.cache_domain is None:
            raise records.RecordError(f"{it.kind} item without its order key")
        if it.order.ts <= st.released:
            # Later than the watermark promised (input more disordered than the lateness allows):
            # evaluated at once rather than dropped.
            self.counters["domain.late_items"] += 1
            self._feed(back, it, res)
            return
        st.pending.push(it.order, it)

    def watermark(self, st: DomainState, now: float, partition: int) -> float:
        """The slowest join partition's watermark, skipping join partitions silent for watermark_stalled_s
        (one never heard of: watermark_idle_s after this worker took the partition up). Every live join partition
        speaks at least every heartbeat, so a silent one is hung or gone (Kafka hands a gone worker's partitions
        to another); one that is merely slow must hold the others back, or its items come late."""
        newest = max(self.wm_heard.values(), default=now)
        idle, stalled = self.kafka.watermark_idle_s, self.kafka.watermark_stalled_s
        opened = self.opened.get(partition, self.started)
        marks = []
        for q in range(self.kafka.internal_partitions):
            heard = self.wm_heard.get(q)
            # A join partition that has been silent for a while (no traffic) must not hold every domain back.
            if q not in st.wms:
                if heard is None and now - opened > idle:
                    continue
                return NEG_INF
            if heard is not None and newest - heard > stalled:
                continue
            marks.append(st.wms[q])
        return min(marks) if marks else NEG_INF

    def _release(self, st: DomainState, back: Back, now: float, res: DomainResult, partition: int) -> None:
        upto = self.watermark(st, now, partition)
        if upto <= st.released:
            return
        for it in st.pending.release(upto):
            try:
                self._feed(back, it, res)
            except Exception as exc:
                res.dead.append(_failed("domain", it, exc))
        st.released = upto
        failed: list[tuple[str, Exception]] = []
        # The core's one step of time, as every runner's. The watermark says every item up to it has come: the
        # items of its very instant are judged too (complete).
        res.alerts += back.advance(upto, res.resolved, failed, complete=True)
        for name, error in failed:
            log.error("domain: advancing %s failed", name, exc_info=error)
            detail = f"advancing domain {name!r}: {type(error).__name__}: {error}"
            res.dead.append(DeadLetter(name.encode(), "internal_error", detail, Source(JOIN, -1), -1))
        res.alerts += st.table.take_flushed()

    @staticmethod
    def _feed(back: Back, it: Item, res: DomainResult) -> None:
        assert it.cache_domain is not None and it.order is not None
        if it.kind == "stats":
            stats, _ = records.event_from_record(it.payload)
            assert isinstance(stats, CacheStats)
            res.alerts += back.stats(stats)
            return
        res.alerts += back.exchange(it.cache_domain, records.exchange_from_record(it.payload))
