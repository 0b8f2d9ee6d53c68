"""Kafka mode webhook delivery: consume the alerts topic, notify receivers, commit only when settled.

An offset is committed only once every alert at or before it has, for every receiver it routes to,
been answered 2xx or dead-lettered after the last retry. A crash therefore re-reads (and re-sends,
with the same alert ids and notification ids) whatever was not settled; receivers dedupe on
`Idempotency-Key`. No outbox is needed here: the uncommitted log *is* the outbox.

Grouping is the same `Grouper` as in embedded mode, and incidents resolve when the core says so:
the domain stage publishes `IncidentResolved` records on the alerts topic beside the alerts, and a
resolution's offset is committed only after its "resolved" notifications are settled. Alertmanager
receivers get their active alerts re-sent every `webhooks.resend_interval_s`. After a restart the
grouper no longer knows incidents whose alerts were committed before it: their resolution sends
nothing, and Alertmanager lets them lapse at their endsAt (a few re-send intervals) instead.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import orjson
from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from pydantic import ValidationError

from schemas.alert import RESOLVED_RECORD, Alert, IncidentResolved
from streams.settings import Settings, WebhookReceiver, load_settings
from streams.sinks.formats import Notification, routes_to, scope_for_receiver
from streams.sinks.webhook import (
    DeadLetterStore,
    Deliverer,
    DeliveryMetrics,
    DeliveryStats,
    Envelope,
    make_envelope,
    new_grouper,
    warn_unsigned,
)

log = logging.getLogger(__name__)

_Waiter = tuple[str, str]  # (receiver, alert_id or "resolved:<incident_id>")
_PROGRESS_EVERY_S = 30.0
_METADATA_MAX_AGE_MS = 10_000


def _resolved_waiter(incident_id: str) -> str:
    return f"resolved:{incident_id}"


@dataclass
class _PartitionLedger:
    # offset -> receivers/alerts still owed; ordered by offset because records arrive in order.
    owed: OrderedDict[int, set[_Waiter]] = field(default_factory=OrderedDict)
    next_offset: int | None = None  # one past the last offset seen
    committed: int | None = None


class OffsetTracker:
    """Which offsets may be committed: the first offset still owed a delivery, per partition."""

    def __init__(self) -> None:
        self.parts: dict[TopicPartition, _PartitionLedger] = {}
        self._waiting: dict[_Waiter, list[tuple[TopicPartition, int]]] = {}

    def add(self, tp: TopicPartition, offset: int, waits: set[_Waiter]) -> None:
        ledger = self.parts.setdefault(tp, _PartitionLedger())
        ledger.next_offset = offset + 1
        if waits:
            ledger.owed[offset] = set(waits)
            for w in waits:
                self._waiting.setdefault(w, []).append((tp, offset))

    def settle(self, receiver: str, alert_ids: list[str]) -> None:
        for aid in alert_ids:
            for tp, offset in self._waiting.pop((receiver, aid), []):
                ledger = self.parts.get(tp)
                if ledger is None:
                    continue
                owed = ledger.owed.get(offset)
                if owed is not None:
                    owed.discard((receiver, aid))
                    if not owed:
                        del ledger.owed[offset]

    def outstanding(self) -> int:
        return sum(len(p.owed) for p in self.parts.values())

    def committable(self) -> dict[TopicPartition, OffsetAndMetadata]:
        out: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, ledger in self.parts.items():
            if ledger.next_offset is None:
                continue
            upto = next(iter(ledger.owed)) if ledger.owed else ledger.next_offset
            if ledger.committed is None or upto > ledger.committed:
                out[tp] = OffsetAndMetadata(upto, "", -1)
        return out

    def mark_committed(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        for tp, om in offsets.items():
            self.parts[tp].committed = om.offset

    def drop(self, tps: set[TopicPartition]) -> None:
        for tp in tps:
            self.parts.pop(tp, None)
        for w, places in list(self._waiting.items()):
            kept = [(tp, o) for tp, o in places if tp not in tps]
            if kept:
                self._waiting[w] = kept
            else:
                del self._waiting[w]


class DeliveryConsumer:
    """The consume → group → deliver → commit loop; `run_delivery` wraps it."""

    def __init__(
        self,
        settings: Settings,
        *,
        stop_event: threading.Event | None = None,
        metrics: DeliveryMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        topic: str | None = None,
        group_id: str | None = None,
        consumer_factory: Callable[..., KafkaConsumer] = KafkaConsumer,
    ) -> None:
        self.settings = settings
        wh = settings.webhooks
        self.stop = stop_event or threading.Event()
        self.clock = clock
        self.wall_clock = wall_clock
        self.consumer_factory = consumer_factory
        self.topic = topic or settings.kafka.alerts_topic
        self.group_id = group_id or wh.deliver_group_id
        self.receivers: dict[str, WebhookReceiver] = {r.name: r for r in wh.receivers}
        self.groupers = {name: new_grouper(receiver, wh) for name, receiver in self.receivers.items()}
        warn_unsigned(wh)
        self.stats = DeliveryStats()
        self.deadletter = DeadLetterStore(wh.deadletter_path)
        self.client = httpx.Client()
        self.deliverer = Deliverer(wh, self.client, self.deadletter, stats=self.stats, metrics=metrics, stop=self.stop)
        self.tracker = OffsetTracker()
        self.invalid = 0
        self.resolutions = 0
        self.polls = 0
        self.paced = 0  # polls that came back early and empty, topped up by a wait (no busy loop)
        self.consumer: KafkaConsumer | None = None
        self._urgent: list[Notification] = []  # resolutions read, to go out in this loop turn

    # -- records

    def _handle_resolution(self, tp: TopicPartition, offset: int, res: IncidentResolved, now: float) -> None:
        self.resolutions += 1
        waits: set[_Waiter] = set()
        for name, grouper in self.groupers.items():
            notes = grouper.resolve(res.incident_id, res.resolved_at, now)
            if notes:
                self._urgent.extend(notes)
                waits.add((name, _resolved_waiter(res.incident_id)))
                # Alerts of the incident still pending went out with it: they owe nothing more.
                for n in notes:
                    if n.status == "firing":
                        waits.update((name, aid) for aid in n.alert_ids)
        self.tracker.add(tp, offset, waits)

    def _handle(self, tp: TopicPartition, offset: int, value: bytes | None, now: float) -> None:
        try:
            if value and b'"record"' in value and orjson.loads(value).get("record") == RESOLVED_RECORD:
                return self._handle_resolution(tp, offset, IncidentResolved.model_validate_json(value), now)
            alert = Alert.model_validate_json(value or b"")
        except (ValidationError, orjson.JSONDecodeError, AttributeError) as exc:
            # Not an alert: nothing to deliver, but keep the bytes rather than skip them silently.
            self.invalid += 1
            env = Envelope(f"invalid-{tp.topic}-{tp.partition}-{offset}", "-", "invalid", "", [], value or b"")
            why = f"{exc.error_count()} error(s)" if isinstance(exc, ValidationError) else type(exc).__name__
            self.deadletter.write(env, "", f"invalid alert: {why}", 0, None)
            log.warning("deliver: %s[%d]@%d is not an alert (%s); dead-lettered", tp.topic, tp.partition, offset, why)
            self.tracker.add(tp, offset, set())
            return
        waits: set[tuple[str, str]] = set()
        for name, receiver in self.receivers.items():
            if not routes_to(alert, receiver):
                continue
            result = self.groupers[name].add(scope_for_receiver(alert, receiver), now)
            if result != "sent":  # a redelivered alert already notified owes nothing more
                waits.add((name, alert.alert_id))
        self.tracker.add(tp, offset, waits)

    # -- delivery

    def _deliver(self, notes: list[Notification]) -> bool:
        """Deliver in order; False if stopped mid-way (the rest stays uncommitted)."""
        for n in notes:
            receiver = self.receivers[n.receiver]
            env = make_envelope(n, receiver, self.settings.webhooks, self.wall_clock())
            outcome = self.deliverer.send(receiver, env)
            if outcome.status == "aborted":
                return False
            if n.status == "firing":
                self.tracker.settle(n.receiver, n.alert_ids)
            else:
                self.tracker.settle(n.receiver, [_resolved_waiter(i) for i in n.incident_ids])
            log.info(
                "deliver: %s %s notification %s (%d alerts) to %s",
                outcome.status,
                n.status,
                n.notification_id[:12],
                len(n.alerts),
                n.receiver,
            )
        return True

    def _due(self, now: float) -> list[Notification]:
        return [n for g in self.groupers.values() for n in g.due(now)]

    def _commit(self) -> None:
        assert self.consumer is not None
        offsets = self.tracker.committable()
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets)
        except Exception as exc:  # e.g. a rebalance in between: the next owner re-reads, harmless
            log.warning("deliver: commit failed (%s); uncommitted alerts will be re-delivered", exc)
            return
        self.tracker.mark_committed(offsets)

    def _flush_all(self) -> None:
        now = self.clock()
        notes = [*self._take_urgent(), *(n for g in self.groupers.values() for n in g.flush(now))]
        if self._deliver(notes):
            self._commit()

    def _take_urgent(self) -> list[Notification]:
        notes, self._urgent = self._urgent, []
        return notes

    def _next_timeout_ms(self, now: float) -> int:
        dues = [d for g in self.groupers.values() if (d := g.next_due()) is not None]
        wait = min([0.2, *(max(0.0, d - now) for d in dues)])
        return max(1, int(wait * 1000))

    # -- loop

    def run(self, max_idle_s: float | None = None) -> DeliveryStats:
        k = self.settings.kafka
        outer = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
                # Settle what we hold before another member takes over these partitions.
                if not outer.stop.is_set():
                    outer._flush_all()
                outer.tracker.drop(set(revoked))

            def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
                # Idleness counts from the moment there is something to be idle on: joining a
                # group can take seconds on a busy broker.
                if assigned:  # an empty assignment (topic metadata not there yet) is nothing to idle on
                    outer._assigned_at = outer.clock()

        self.consumer = self.consumer_factory(
            bootstrap_servers=k.bootstrap.split(","),
            group_id=self.group_id,
            client_id=f"{k.app_id}-deliver",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=500,
            max_poll_interval_ms=int(self.settings.webhooks.deliver_max_poll_interval_s * 1000),
            # `deliver` may start before the worker has created the alerts topic: the client only learns that it
            # exists at its next metadata refresh (five minutes by default), and until then it holds no partition.
            metadata_max_age_ms=_METADATA_MAX_AGE_MS,
        )
        self.consumer.subscribe([self.topic], listener=Listener())
        self._assigned_at: float | None = None
        last_activity = self.clock()
        next_progress = self.clock() + _PROGRESS_EVERY_S
        log.info(
            "deliver: reading %s as group %s for %d receiver(s): %s",
            self.topic,
            self.group_id,
            len(self.receivers),
            ", ".join(f"{r.name} ({r.format})" for r in self.receivers.values()),
        )
        try:
            while not self.stop.is_set():
                timeout_ms = self._next_timeout_ms(self.clock())
                started = self.clock()
                batch = self.consumer.poll(timeout_ms=timeout_ms)
                self.polls += 1
                now = self.clock()
                if not batch and (rest := timeout_ms / 1000 - (now - started)) > 0.001:
                    # A poll that returns early with nothing (no assignment yet, a coordinator being
                    # elected, a broker that is away) must not turn this loop into a busy spin.
                    self.paced += 1
                    if self.stop.wait(rest):
                        break
                    now = self.clock()
                for tp, records in batch.items():
                    for rec in records:
                        self._handle(tp, rec.offset, rec.value, now)
                notes = [*self._take_urgent(), *self._due(now)]
                if batch or any(n.resend == 0 for n in notes):  # periodic re-sends are not new work
                    last_activity = self.clock()
                if not self._deliver(notes):
                    break
                self._commit()
                idle = self.tracker.outstanding() == 0 and all(g.pending_count == 0 for g in self.groupers.values())
                since = None if self._assigned_at is None else self.clock() - max(last_activity, self._assigned_at)
                if max_idle_s is not None and idle and since is not None and since >= max_idle_s:
                    break
                if now >= next_progress:
                    next_progress = now + _PROGRESS_EVERY_S
                    log.info(
                        "deliver: %s, owed %d, resolutions %d",
                        self.stats.as_dict(),
                        self.tracker.outstanding(),
                        self.resolutions,
                    )
        finally:
            self.consumer.close(autocommit=False)
            self.client.close()
        return self.stats


def run_delivery(
    settings: Settings,
    stop_event: threading.Event | None = None,
    max_idle_s: float | None = None,
    *,
    metrics: DeliveryMetrics | None = None,
) -> DeliveryStats:
    """Deliver alerts from `settings.kafka.alerts_topic` until `stop_event` is set (or, with
    `max_idle_s`, until nothing arrived and nothing was owed for that long). Returns counters."""
    return DeliveryConsumer(settings, stop_event=stop_event, metrics=metrics).run(max_idle_s=max_idle_s)


# --------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of `crosstalk deliver`. Uses `args.config` if the CLI defines a global --config."""
    parser.add_argument("--topic", help="alerts topic (default: kafka.alerts_topic)")
    parser.add_argument("--group-id", help="consumer group (default: webhooks.deliver_group_id)")
    parser.add_argument("--max-idle-s", type=float, default=None, help="exit after this long with nothing to do")
    parser.add_argument("--loglevel", default="info", choices=["debug", "info", "warning", "error"])


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=getattr(args, "loglevel", "info").upper(), format="[%(asctime)s] [%(levelname)s] %(name)s: %(message)s"
    )
    settings = load_settings(getattr(args, "config", None))
    stop = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)
    if not settings.webhooks.receivers:
        # Idle rather than exit: under a supervisor (docker compose, systemd) an exit is a restart loop.
        log.error("deliver: no webhook receivers configured (webhooks.receivers): idle, nothing to deliver")
        stop.wait(args.max_idle_s)
        return 0
    consumer = DeliveryConsumer(settings, stop_event=stop, topic=args.topic, group_id=args.group_id)
    stats = consumer.run(max_idle_s=args.max_idle_s)
    log.info(
        "deliver: stopped; %s, invalid records %d, resolutions %d",
        stats.as_dict(),
        consumer.invalid,
        consumer.resolutions,
    )
    return 0
