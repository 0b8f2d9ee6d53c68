"""The embedded-mode webhook Sink: one background thread per receiver, durable through the outbox.

A slow receiver blocks neither the detector loop nor the other receivers. The Kafka delivery
consumer (`streams.kafka.deliver`) reuses Grouper and Deliverer; there the committed offset, not
the outbox, is what makes delivery durable.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import httpx

from schemas.alert import Alert, IncidentResolved
from schemas.exchange import Exchange
from streams.settings import WebhookReceiver, WebhookSettings
from streams.sinks.base import Sink
from streams.sinks.formats import Notification, routes_to, scope_for_receiver
from streams.sinks.webhook.delivery import DeadLetterStore, Deliverer, DeliveryMetrics, DeliveryStats, warn_unsigned
from streams.sinks.webhook.grouping import Grouper
from streams.sinks.webhook.outbox import Outbox
from streams.sinks.webhook.render import Envelope, make_envelope

log = logging.getLogger(__name__)

_CLOSE = object()


def new_grouper(receiver: WebhookReceiver, settings: WebhookSettings) -> Grouper:
    """Alertmanager receivers get periodic re-sends (it times out alerts that are not re-sent)."""
    resend = settings.resend_interval_s if receiver.format == "alertmanager" else None
    return Grouper(
        receiver.name, settings.group_wait_s, settings.group_interval_s, resend, resend_for_s=settings.resend_for_s
    )


class _ReceiverWorker(threading.Thread):
    def __init__(self, sink: WebhookSink, receiver: WebhookReceiver, grouper: Grouper, backlog: list[Envelope]):
        super().__init__(name=f"crosstalk-webhook-{receiver.name}", daemon=True)
        self.sink = sink
        self.receiver = receiver
        self.grouper = grouper
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.outstanding: deque[Envelope] = deque(backlog)
        self.finished = False
        self.client = httpx.Client(transport=sink._transport)
        self.deliverer = Deliverer(
            sink.settings,
            self.client,
            sink.deadletter,
            stats=sink.stats,
            metrics=sink.metrics,
            stop=sink._stop,
        )

    def _emit(self, notes: list[Notification]) -> None:
        for n in notes:
            env = make_envelope(n, self.receiver, self.sink.settings, self.sink.wall_clock())
            self.sink.outbox.append_notification(env)
            self.outstanding.append(env)

    def _send_outstanding(self) -> bool:
        while self.outstanding:
            env = self.outstanding[0]
            outcome = self.deliverer.send(self.receiver, env)
            if outcome.status == "aborted":
                return False  # stays unacked in the outbox for the next start
            self.sink.outbox.append_ack(env.notification_id, outcome.status)
            self.outstanding.popleft()
        return True

    def run(self) -> None:
        closing = False
        try:
            while not self.sink._stop.is_set():
                if not self._send_outstanding():
                    return
                now = self.sink.clock()
                nxt = self.grouper.next_due()
                timeout = 0.0 if closing else (0.25 if nxt is None else min(0.25, max(0.0, nxt - now)))
                items: list[Any] = []
                try:
                    items.append(self.inbox.get(timeout=timeout) if timeout > 0 else self.inbox.get_nowait())
                    while True:
                        items.append(self.inbox.get_nowait())
                except queue.Empty:
                    pass
                now = self.sink.clock()
                for item in items:
                    if item is _CLOSE:
                        closing = True
                    elif isinstance(item, Alert):
                        self.grouper.add(item, now)
                    elif isinstance(item, IncidentResolved):
                        self._emit(self.grouper.resolve(item.incident_id, item.resolved_at, now))
                self._emit(self.grouper.due(now))
                if closing and self.inbox.empty():
                    self._emit(self.grouper.flush(now))
                    if self._send_outstanding():
                        self.finished = True
                    return
        except Exception:  # a bug here must not kill delivery silently
            log.exception("webhook worker %s crashed; undelivered notifications stay in the outbox", self.receiver.name)
        finally:
            self.client.close()


class WebhookSink(Sink):
    """Sink that notifies webhook receivers from background threads, durably via the outbox.

    Construct with `WebhookSink(settings.webhooks, metrics=otel_sink_or_None)`.
    """

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        metrics: DeliveryMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self.wall_clock = wall_clock
        self._transport = transport
        self.stats = DeliveryStats()
        self.deadletter = DeadLetterStore(settings.deadletter_path)
        self.outbox = Outbox(settings.outbox_path, fsync=settings.outbox_fsync)
        self._stop = threading.Event()
        self._closed = False
        self._accepted: OrderedDict[str, None] = OrderedDict()
        self.receivers = {r.name: r for r in settings.receivers}
        warn_unsigned(settings)
        self._workers = self._restore()
        for w in self._workers.values():
            w.start()

    def _restore(self) -> dict[str, _ReceiverWorker]:
        state = self.outbox.load()
        now = self.clock()
        workers: dict[str, _ReceiverWorker] = {}
        for name, receiver in self.receivers.items():
            grouper = new_grouper(receiver, self.settings)
            sent, resolved = state.sent.get(name, set()), state.resolved.get(name, set())
            for alert in state.alerts.values():
                if not routes_to(alert, receiver) or alert.alert_id in resolved:
                    continue
                scoped = scope_for_receiver(alert, receiver)
                if alert.alert_id in sent:
                    grouper.restore_sent(scoped, now)
                else:
                    grouper.add(scoped, now)
            backlog = [e for e in state.unacked if e.receiver == name]
            worker = workers[name] = _ReceiverWorker(self, receiver, grouper, backlog)
            # Resolutions journaled before a crash whose notification was not: announce them now.
            for res in state.resolutions.values():
                worker._emit(grouper.resolve(res.incident_id, res.resolved_at, now))
        for env in state.unacked:
            if env.receiver not in self.receivers:
                self.deadletter.write(env, "", "receiver removed from settings", 0, None)
                state.acked.add(env.notification_id)
                self.stats.incr("deadlettered")
        for alert_id in state.alerts:
            self._accepted[alert_id] = None
        unacked = [*state.unacked, *(e for w in workers.values() for e in w.outstanding if e not in state.unacked)]
        self._compact(workers, unacked, state.acked)
        return workers

    def _compact(self, workers: dict[str, _ReceiverWorker], unacked: list[Envelope], acked: set[str]) -> None:
        live: dict[str, Alert] = {}
        sent: dict[str, set[str]] = {}
        for name, w in workers.items():
            for a in w.grouper.live_alerts():
                live.setdefault(a.alert_id, a)
            sent[name] = w.grouper.sent_ids() & {a.alert_id for a in w.grouper.live_alerts()}
        # Scoped copies lack source details; the journal must keep the original alert.
        originals = self.outbox.load().alerts
        alerts = [originals.get(aid, a) for aid, a in live.items()]
        self.outbox.compact(alerts, sent, [e for e in unacked if e.notification_id not in acked])

    # -- Sink hooks

    def _accept(self, alert: Alert) -> None:
        if self._closed or alert.alert_id in self._accepted:
            return
        self._accepted[alert.alert_id] = None
        if len(self._accepted) > 100_000:
            self._accepted.popitem(last=False)
        targets = [name for name, receiver in self.receivers.items() if routes_to(alert, receiver)]
        if not targets:
            return  # nobody will ever be notified: keep it out of the journal
        self.outbox.append_alert(alert)
        for name in targets:
            self._workers[name].inbox.put(scope_for_receiver(alert, self.receivers[name]))

    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        for alert in alerts:
            self._accept(alert)

    def on_alert(self, alert: Alert) -> None:
        self._accept(alert)

    def on_resolved(self, resolution: IncidentResolved) -> None:
        if self._closed:
            return
        self.outbox.append_resolution(resolution)
        for w in self._workers.values():
            w.inbox.put(resolution)  # a receiver that never heard of the incident ignores it

    def close(self, timeout: float | None = None, drain: bool = True) -> None:
        """Drain (flush groups, deliver) for at most `timeout` seconds; open incidents stay open.

        Whatever is not delivered by then stays in the outbox and is re-sent by the next start.
        `drain=False` stops at once, leaving everything to the outbox.
        """
        if self._closed:
            return
        self._closed = True
        timeout = self.settings.close_timeout_s if timeout is None else timeout
        if drain:
            for w in self._workers.values():
                w.inbox.put(_CLOSE)
            deadline = time.monotonic() + timeout
            for w in self._workers.values():
                w.join(max(0.0, deadline - time.monotonic()))
        self._stop.set()
        for w in self._workers.values():
            w.join(max(self.settings.timeout_s, 1.0) + 1.0)
        if drain and all(w.finished for w in self._workers.values()):
            state = self.outbox.load()
            self._compact(self._workers, state.unacked, state.acked)
        self.outbox.close()
