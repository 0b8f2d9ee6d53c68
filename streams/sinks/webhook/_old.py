"""Webhook delivery: signing, Alertmanager-style grouping, retries, dead letters and the embedded sink.

Layers, each usable on its own:
  - `sign` / `verify_signature`: the HMAC scheme receivers check.
  - `Grouper`: pure grouping per receiver, fed (alert, now) with an explicit clock.
  - `Deliverer`: one HTTP notification with retries (exponential backoff, full jitter) → delivered
    or dead-lettered, never silently dropped.
  - `Outbox`: append-only journal so the embedded sink re-sends after a crash with the same ids.
  - `WebhookSink`: the Sink; one background thread per receiver so a slow receiver blocks neither
    the detector loop nor the other receivers.
The Kafka delivery consumer (`streams.kafka.deliver`) reuses Grouper and Deliverer; there the committed
offset, not the outbox, is what makes delivery durable.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import queue
import random
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx
import orjson

from detectors.exchange import Exchange
from schemas.alert import Alert
from streams.settings import WebhookReceiver, WebhookSettings
from streams.sinks.formats import (
    ALERT_IDS_HEADER,
    IDEMPOTENCY_HEADER,
    NOTIFICATION_HEADER,
    SIGNATURE_HEADER,
    STATUS_HEADER,
    TIMESTAMP_HEADER,
    Notification,
    render_body,
    routes_to,
    scope_for_receiver,
)

log = logging.getLogger(__name__)

USER_AGENT = "crosstalk-webhook/1"
_MAX_ALERT_IDS_HEADER = 6000  # proxies commonly cap a header line at 8 KiB


# --------------------------------------------------------------------------- signing


def sign(secret: str, timestamp: int | str, body: bytes) -> str:
    """`v1=<hex HMAC-SHA256(secret, f"{timestamp}." + body)>`; the timestamp is bound in to stop replays."""
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify_signature(
    secret: str,
    timestamp: str | int,
    body: bytes,
    signature: str,
    tolerance_s: float = 300.0,
    now: float | None = None,
) -> bool:
    """For receivers: True iff `signature` (header value, maybe several comma-separated v1= entries
    during secret rotation) matches and the timestamp is within `tolerance_s` of `now`."""
    try:
        ts = int(str(timestamp).strip())
    except ValueError:
        return False
    now = time.time() if now is None else now
    if abs(now - ts) > tolerance_s:
        return False
    expected = sign(secret, ts, body)
    return any(hmac.compare_digest(expected, part.strip()) for part in signature.split(","))


# --------------------------------------------------------------------------- grouping


@dataclass
class _Group:
    pending: dict[str, Alert] = field(default_factory=dict)
    next_flush: float | None = None
    last_flush: float | None = None
    incidents: set[str] = field(default_factory=set)


@dataclass
class _Incident:
    group_key: str
    alerts: dict[str, Alert] = field(default_factory=dict)
    last_ts: float = 0.0


AddResult = Literal["new", "pending", "sent"]


class Grouper:
    """Alertmanager-style grouping for one receiver; deterministic given the (alert, now) sequence.

    - first alert of a group waits `group_wait_s`, then everything pending goes out together;
    - later alerts of the group wait until `group_interval_s` after the previous notification;
    - an incident with no new alert for `resolve_after_s` of *event time* gets a resolved
      notification (event time so that a replay resolves exactly as the live stream did).
    `now` is the caller's clock for the wait timers (wall clock when delivering live).
    """

    def __init__(
        self,
        receiver: str,
        group_wait_s: float,
        group_interval_s: float,
        resolve_after_s: float,
        seen_capacity: int = 100_000,
    ) -> None:
        self.receiver = receiver
        self.group_wait_s = group_wait_s
        self.group_interval_s = group_interval_s
        self.resolve_after_s = resolve_after_s
        self.event_clock = 0.0
        self._groups: dict[str, _Group] = {}
        self._incidents: dict[str, _Incident] = {}
        # alert_id -> "pending" | "sent": at-least-once upstream redelivers alerts; they must not
        # produce a second notification. Bounded: ids older than this many are forgotten.
        self._seen: OrderedDict[str, str] = OrderedDict()
        self._seen_capacity = seen_capacity

    def _remember(self, alert_id: str, state: str) -> None:
        self._seen[alert_id] = state
        self._seen.move_to_end(alert_id)
        while len(self._seen) > self._seen_capacity:
            self._seen.popitem(last=False)

    def advance(self, event_ts: float) -> None:
        """Move event time forward (e.g. from processed exchanges) so quiet incidents resolve."""
        self.event_clock = max(self.event_clock, event_ts)

    def _incident_for(self, alert: Alert) -> _Incident:
        inc = self._incidents.get(alert.incident_id)
        if inc is None:
            inc = self._incidents[alert.incident_id] = _Incident(group_key=alert.group_key, last_ts=alert.ts)
            self._groups.setdefault(alert.group_key, _Group()).incidents.add(alert.incident_id)
        inc.alerts[alert.alert_id] = alert
        inc.last_ts = max(inc.last_ts, alert.ts)
        return inc

    def add(self, alert: Alert, now: float) -> AddResult:
        """Accept an alert; "pending"/"sent" mean it is a duplicate of one already pending/notified."""
        self.advance(alert.ts)
        state = self._seen.get(alert.alert_id)
        if state is not None:
            return state  # type: ignore[return-value]
        self._incident_for(alert)
        group = self._groups.setdefault(alert.group_key, _Group())
        group.pending[alert.alert_id] = alert
        if group.next_flush is None:
            if group.last_flush is None:
                group.next_flush = now + self.group_wait_s
            else:
                group.next_flush = max(now, group.last_flush + self.group_interval_s)
        self._remember(alert.alert_id, "pending")
        return "new"

    def restore_sent(self, alert: Alert) -> None:
        """After a restart: this alert was already notified as firing; track it for resolution only."""
        self.advance(alert.ts)
        if alert.alert_id in self._seen:
            return
        self._incident_for(alert)
        group = self._groups[alert.group_key]
        if group.last_flush is None:
            # Unknown when it went out; treat it as just now so group_interval still applies.
            group.last_flush = float("-inf")
        self._remember(alert.alert_id, "sent")

    def next_due(self) -> float | None:
        times = [g.next_flush for g in self._groups.values() if g.pending and g.next_flush is not None]
        return min(times) if times else None

    @property
    def pending_count(self) -> int:
        return sum(len(g.pending) for g in self._groups.values())

    @property
    def open_incidents(self) -> int:
        return len(self._incidents)

    def live_alerts(self) -> list[Alert]:
        """Alerts still pending or belonging to an unresolved incident (what a restart must know)."""
        return [a for inc in self._incidents.values() for a in inc.alerts.values()]

    def sent_ids(self) -> set[str]:
        return {aid for aid, st in self._seen.items() if st == "sent"}

    def _flush_group(self, key: str, group: _Group, now: float) -> Notification:
        alerts = sorted(group.pending.values(), key=lambda a: (a.ts, a.alert_id))
        group.pending = {}
        group.last_flush = now
        group.next_flush = None
        for a in alerts:
            self._remember(a.alert_id, "sent")
        return Notification(receiver=self.receiver, group_key=key, status="firing", alerts=alerts)

    def _resolve(self, incident_id: str, now: float, ends_at: float) -> list[Notification]:
        inc = self._incidents.pop(incident_id)
        group = self._groups.get(inc.group_key)
        out: list[Notification] = []
        if group is not None:
            # Never resolve what was never announced: flush pending alerts of this group first.
            if any(aid in group.pending for aid in inc.alerts):
                out.append(self._flush_group(inc.group_key, group, now))
            group.incidents.discard(incident_id)
            if not group.incidents and not group.pending:
                # A fresh fault in this group starts over with group_wait, as in Alertmanager.
                del self._groups[inc.group_key]
        alerts = sorted(inc.alerts.values(), key=lambda a: (a.ts, a.alert_id))
        out.append(
            Notification(
                receiver=self.receiver, group_key=inc.group_key, status="resolved", alerts=alerts, ends_at=ends_at
            )
        )
        return out

    def due(self, now: float) -> list[Notification]:
        out: list[Notification] = []
        for key, group in list(self._groups.items()):
            if group.pending and group.next_flush is not None and group.next_flush <= now:
                out.append(self._flush_group(key, group, now))
        quiet = [
            (iid, inc.last_ts)
            for iid, inc in self._incidents.items()
            if self.event_clock - inc.last_ts >= self.resolve_after_s
        ]
        for iid, last_ts in sorted(quiet, key=lambda x: (x[1], x[0])):
            out.extend(self._resolve(iid, now, last_ts + self.resolve_after_s))
        return out

    def flush(self, now: float, resolve: bool) -> list[Notification]:
        """Close time: send everything pending now; optionally resolve every open incident."""
        out = [self._flush_group(k, g, now) for k, g in list(self._groups.items()) if g.pending]
        if resolve:
            for iid, inc in sorted(self._incidents.items(), key=lambda x: (x[1].last_ts, x[0])):
                out.extend(self._resolve(iid, now, max(inc.last_ts, self.event_clock)))
        return out


# --------------------------------------------------------------------------- delivery


@dataclass(frozen=True)
class Envelope:
    """A rendered notification: what is journaled, sent, and dead-lettered."""

    notification_id: str
    receiver: str
    status: str
    group_key: str
    alert_ids: list[str]
    body: bytes

    def to_record(self) -> dict[str, Any]:
        return {
            "id": self.notification_id,
            "receiver": self.receiver,
            "status": self.status,
            "group_key": self.group_key,
            "alert_ids": self.alert_ids,
            "body": self.body.decode(),
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Envelope:
        return cls(
            notification_id=rec["id"],
            receiver=rec["receiver"],
            status=rec["status"],
            group_key=rec["group_key"],
            alert_ids=list(rec["alert_ids"]),
            body=rec["body"].encode(),
        )


def make_envelope(n: Notification, receiver: WebhookReceiver, settings: WebhookSettings) -> Envelope:
    return Envelope(
        notification_id=n.notification_id,
        receiver=receiver.name,
        status=n.status,
        group_key=n.group_key,
        alert_ids=n.alert_ids,
        body=render_body(n, receiver.format, settings.external_url),
    )


class DeliveryMetrics(Protocol):
    """Optional metrics hook (OtelSink implements it)."""

    def on_webhook_delivery(self, receiver: str, outcome: str) -> None: ...

    def on_webhook_failure(self, receiver: str, reason: str) -> None: ...


@dataclass
class DeliveryStats:
    delivered: int = 0
    deadlettered: int = 0
    aborted: int = 0
    attempts: int = 0
    retries: int = 0
    failures: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def incr(self, name: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def as_dict(self) -> dict[str, int]:
        return {
            k: getattr(self, k) for k in ("delivered", "deadlettered", "aborted", "attempts", "retries", "failures")
        }


@dataclass(frozen=True)
class Outcome:
    status: Literal["delivered", "deadlettered", "aborted"]
    attempts: int
    status_code: int | None = None
    reason: str = ""


class DeadLetterStore:
    """JSONL of notifications that could not be delivered, with the reason; appended, never rewritten."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def write(self, env: Envelope, url: str, reason: str, attempts: int, status_code: int | None) -> None:
        rec = {
            "ts": time.time(),
            "receiver": env.receiver,
            "url": url,
            "reason": reason,
            "status_code": status_code,
            "attempts": attempts,
            **env.to_record(),
        }
        line = orjson.dumps(rec) + b"\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("ab") as f:
                f.write(line)

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [orjson.loads(line) for line in self.path.read_bytes().splitlines() if line.strip()]


def _retry_after(resp: httpx.Response) -> float | None:
    value = resp.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # HTTP-date form: fall back to our own backoff


class Deliverer:
    """Sends one envelope to one receiver: retries on 5xx/429/transport errors, else dead-letters."""

    def __init__(
        self,
        settings: WebhookSettings,
        client: httpx.Client,
        deadletter: DeadLetterStore,
        *,
        stats: DeliveryStats | None = None,
        metrics: DeliveryMetrics | None = None,
        stop: threading.Event | None = None,
        rng: random.Random | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.client = client
        self.deadletter = deadletter
        self.stats = stats or DeliveryStats()
        self.metrics = metrics
        self.stop = stop or threading.Event()
        self.rng = rng or random.Random()
        self.wall_clock = wall_clock

    def headers(self, receiver: WebhookReceiver, env: Envelope) -> dict[str, str]:
        ts = int(self.wall_clock())
        # Receiver-configured headers first so that configuration can never override the signature.
        headers = dict(receiver.headers)
        ids = ",".join(env.alert_ids)
        if len(ids) > _MAX_ALERT_IDS_HEADER:
            ids = ids[: ids.rfind(",", 0, _MAX_ALERT_IDS_HEADER)]
            headers["X-Crosstalk-Alert-Ids-Truncated"] = "true"
        headers.update(
            {
                "Content-Type": "application/json",
                "User-Agent": USER_AGENT,
                TIMESTAMP_HEADER: str(ts),
                ALERT_IDS_HEADER: ids,
                IDEMPOTENCY_HEADER: env.notification_id,
                NOTIFICATION_HEADER: env.notification_id,
                STATUS_HEADER: env.status,
            }
        )
        secret = receiver.secret or self.settings.secret
        if secret:
            headers[SIGNATURE_HEADER] = sign(secret, ts, env.body)
        return headers

    def _backoff(self, attempt: int) -> float:
        cap = min(self.settings.backoff_max_s, self.settings.backoff_initial_s * (2**attempt))
        return self.rng.uniform(0.0, cap)  # full jitter: spreads a herd of retries after an outage

    def _fail(self, receiver: str, reason: str) -> None:
        self.stats.incr("failures")
        if self.metrics is not None:
            self.metrics.on_webhook_failure(receiver, reason)

    def _finish(self, receiver: WebhookReceiver, env: Envelope, outcome: Outcome) -> Outcome:
        if outcome.status == "deadlettered":
            self.deadletter.write(env, receiver.url, outcome.reason, outcome.attempts, outcome.status_code)
            log.warning(
                "webhook %s: dead-lettered notification %s (%s)", receiver.name, env.notification_id, outcome.reason
            )
        self.stats.incr(outcome.status)
        if self.metrics is not None and outcome.status != "aborted":
            self.metrics.on_webhook_delivery(receiver.name, outcome.status)
        return outcome

    def send(self, receiver: WebhookReceiver, env: Envelope) -> Outcome:
        attempts = 0
        reason = ""
        status_code: int | None = None
        for attempt in range(self.settings.max_retries + 1):
            if self.stop.is_set():
                return self._finish(receiver, env, Outcome("aborted", attempts, status_code, "stopped"))
            attempts += 1
            self.stats.incr("attempts")
            if attempt:
                self.stats.incr("retries")
            retry_after: float | None = None
            try:
                resp = self.client.post(
                    receiver.url,
                    content=env.body,
                    headers=self.headers(receiver, env),
                    timeout=self.settings.timeout_s,
                )
            except httpx.TimeoutException:
                reason, status_code = "timeout", None
            except httpx.TransportError as exc:
                reason, status_code = f"transport_error: {type(exc).__name__}", None
            else:
                status_code = resp.status_code
                if 200 <= status_code < 300:
                    return self._finish(receiver, env, Outcome("delivered", attempts, status_code))
                reason = f"http_{status_code}"
                if status_code == 429:
                    retry_after = _retry_after(resp)
                elif status_code < 500:
                    # The receiver rejected this payload; sending it again cannot help.
                    self._fail(receiver.name, reason)
                    return self._finish(receiver, env, Outcome("deadlettered", attempts, status_code, reason))
            self._fail(receiver.name, reason.split(":")[0])
            if attempt == self.settings.max_retries:
                break
            delay = self._backoff(attempt)
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.settings.backoff_max_s))
            if self.stop.wait(delay):
                return self._finish(receiver, env, Outcome("aborted", attempts, status_code, "stopped"))
        return self._finish(
            receiver, env, Outcome("deadlettered", attempts, status_code, f"retries exhausted: {reason}")
        )


# --------------------------------------------------------------------------- outbox


@dataclass
class OutboxState:
    alerts: dict[str, Alert] = field(default_factory=dict)
    notifications: dict[str, Envelope] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)
    sent: dict[str, set[str]] = field(default_factory=dict)  # receiver -> alert ids announced firing
    resolved: dict[str, set[str]] = field(default_factory=dict)  # receiver -> alert ids announced resolved

    @property
    def unacked(self) -> list[Envelope]:
        return [e for nid, e in self.notifications.items() if nid not in self.acked]


class Outbox:
    """Append-only journal (one JSONL file) of accepted alerts, rendered notifications and acks.

    Accepted alerts are journaled before grouping, so an alert still waiting out group_wait when
    the process dies is not lost. A notification is journaled before its first attempt and acked
    after a 2xx or a dead-letter; on start everything unacked is re-sent with the same ids.
    """

    def __init__(self, directory: str | os.PathLike[str], fsync: bool = False) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / "journal.jsonl"
        self.fsync = fsync
        self._lock = threading.Lock()
        self._fh = self.path.open("ab")

    def _append(self, rec: dict[str, Any]) -> None:
        line = orjson.dumps(rec) + b"\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()
            if self.fsync:
                os.fsync(self._fh.fileno())

    def append_alert(self, alert: Alert) -> None:
        self._append({"t": "alert", "alert": alert.model_dump(mode="json")})

    def append_notification(self, env: Envelope) -> None:
        self._append({"t": "notif", **env.to_record()})

    def append_ack(self, notification_id: str, outcome: str) -> None:
        self._append({"t": "ack", "id": notification_id, "outcome": outcome})

    def load(self) -> OutboxState:
        state = OutboxState()
        with self._lock:
            raw = self.path.read_bytes() if self.path.exists() else b""
        for line in raw.splitlines():
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                # A torn last line from a crash mid-write; everything before it is intact.
                log.warning("outbox %s: skipping a torn record", self.path)
                continue
            t = rec.get("t")
            if t == "alert":
                alert = Alert.model_validate(rec["alert"])
                state.alerts.setdefault(alert.alert_id, alert)
            elif t == "notif":
                env = Envelope.from_record(rec)
                state.notifications[env.notification_id] = env
                target = state.resolved if env.status == "resolved" else state.sent
                target.setdefault(env.receiver, set()).update(env.alert_ids)
            elif t == "ack":
                state.acked.add(rec["id"])
            elif t == "sent":
                state.sent.setdefault(rec["receiver"], set()).update(rec["alert_ids"])
        return state

    def compact(self, live_alerts: list[Alert], sent: dict[str, set[str]], unacked: list[Envelope]) -> None:
        """Rewrite the journal with only what a restart still needs (atomic rename)."""
        tmp = self.dir / "journal.jsonl.tmp"
        with tmp.open("wb") as f:
            for a in live_alerts:
                f.write(orjson.dumps({"t": "alert", "alert": a.model_dump(mode="json")}) + b"\n")
            for receiver, ids in sent.items():
                if ids:
                    f.write(orjson.dumps({"t": "sent", "receiver": receiver, "alert_ids": sorted(ids)}) + b"\n")
            for env in unacked:
                f.write(orjson.dumps({"t": "notif", **env.to_record()}) + b"\n")
            f.flush()
            os.fsync(f.fileno())
        with self._lock:
            self._fh.close()
            os.replace(tmp, self.path)
            self._fh = self.path.open("ab")

    def close(self) -> None:
        with self._lock:
            self._fh.close()


# --------------------------------------------------------------------------- embedded sink


_CLOSE = object()


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
            env = make_envelope(n, self.receiver, self.sink.settings)
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
                    else:
                        self.grouper.advance(item)
                self._emit(self.grouper.due(now))
                if closing and self.inbox.empty():
                    self._emit(self.grouper.flush(now, resolve=self.sink.settings.resolve_on_close))
                    if self._send_outstanding():
                        self.finished = True
                    return
        except Exception:  # a bug here must not kill delivery silently
            log.exception("webhook worker %s crashed; undelivered notifications stay in the outbox", self.receiver.name)
        finally:
            self.client.close()


class WebhookSink:
    """Sink that notifies webhook receivers from background threads, durably via the outbox.

    Construct with `WebhookSink(settings.webhooks, metrics=otel_sink_or_None)`.
    """

    def __init__(
        self,
        settings: WebhookSettings,
        *,
        metrics: DeliveryMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self._transport = transport
        self.stats = DeliveryStats()
        self.deadletter = DeadLetterStore(settings.deadletter_path)
        self.outbox = Outbox(settings.outbox_path, fsync=settings.outbox_fsync)
        self._stop = threading.Event()
        self._closed = False
        self._accepted: OrderedDict[str, None] = OrderedDict()
        self._last_advance = 0.0
        self.receivers = {r.name: r for r in settings.receivers}
        self._workers = self._restore()
        for w in self._workers.values():
            w.start()

    def _new_grouper(self, name: str) -> Grouper:
        s = self.settings
        return Grouper(name, s.group_wait_s, s.group_interval_s, s.resolve_after_s)

    def _restore(self) -> dict[str, _ReceiverWorker]:
        state = self.outbox.load()
        now = self.clock()
        workers: dict[str, _ReceiverWorker] = {}
        for name, receiver in self.receivers.items():
            grouper = self._new_grouper(name)
            sent, resolved = state.sent.get(name, set()), state.resolved.get(name, set())
            for alert in state.alerts.values():
                if not routes_to(alert, receiver) or alert.alert_id in resolved:
                    continue
                scoped = scope_for_receiver(alert, receiver)
                if alert.alert_id in sent:
                    grouper.restore_sent(scoped)
                else:
                    grouper.add(scoped, now)
            backlog = [e for e in state.unacked if e.receiver == name]
            workers[name] = _ReceiverWorker(self, receiver, grouper, backlog)
        for env in state.unacked:
            if env.receiver not in self.receivers:
                self.deadletter.write(env, "", "receiver removed from settings", 0, None)
                state.acked.add(env.notification_id)
                self.stats.incr("deadlettered")
        for alert_id in state.alerts:
            self._accepted[alert_id] = None
        self._compact(workers, state.unacked, state.acked)
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

    # -- Sink protocol

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
        # Event time drives incident resolution; one nudge per second of event time is plenty.
        if exchange.ts >= self._last_advance + 1.0:
            self._last_advance = exchange.ts
            for w in self._workers.values():
                w.inbox.put(exchange.ts)

    def on_alert(self, alert: Alert) -> None:
        self._accept(alert)

    def on_reject(self, reason: str, detail: str) -> None:
        return None

    def close(self, timeout: float | None = None, drain: bool = True) -> None:
        """Drain (flush groups, resolve if configured, deliver) for at most `timeout` seconds.

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
