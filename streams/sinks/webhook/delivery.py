"""One notification to one receiver over HTTP: retries with backoff and jitter, else a dead letter.

Never silently dropped: every envelope ends delivered (2xx), dead-lettered with the reason (after the
last retry, or at once on a 4xx other than 429), or aborted by a stop (then it stays owed: in the
outbox in embedded mode, uncommitted in Kafka mode).
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import httpx
import orjson

from streams.redact import protect_client_logs, redact_url, target_id
from streams.settings import WebhookReceiver, WebhookSettings
from streams.sinks.formats import (
    ALERT_IDS_HEADER,
    IDEMPOTENCY_HEADER,
    NOTIFICATION_HEADER,
    SIGNATURE_HEADER,
    STATUS_HEADER,
    TIMESTAMP_HEADER,
)
from streams.sinks.webhook.render import Envelope
from streams.sinks.webhook.signing import sign

log = logging.getLogger(__name__)
protect_client_logs()

USER_AGENT = "crosstalk-webhook/1"
_MAX_ALERT_IDS_HEADER = 6000  # proxies commonly cap a header line at 8 KiB


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

    def write(
        self, env: Envelope, url: str, reason: str, attempts: int, status_code: int | None, key: str | None = None
    ) -> None:
        """Append one dead letter. The URL is stored redacted (a password or `?token=` in it must not
        outlive the settings file in a log-like store), beside a stable id of the full URL, keyed with
        `key` (the receiver's signing secret) when given."""
        rec = {
            "ts": time.time(),
            "receiver": env.receiver,
            "url": redact_url(url),
            "target": target_id(url, key) if url else None,
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
        headers = {k: v.get_secret_value() for k, v in receiver.headers.items()}
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
        if secret is not None:
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
            secret = receiver.secret or self.settings.secret
            key = secret.get_secret_value() if secret is not None else None
            self.deadletter.write(env, receiver.url, outcome.reason, outcome.attempts, outcome.status_code, key)
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


def warn_unsigned(settings: WebhookSettings) -> list[str]:
    """Say once, at start, which receivers get unsigned deliveries (no receiver or global secret)."""
    unsigned = [r.name for r in settings.receivers if r.secret is None and settings.secret is None]
    if unsigned:
        log.warning(
            "webhooks: no secret configured for %s; deliveries go out UNSIGNED (set webhooks.secret)",
            ", ".join(unsigned),
        )
    return unsigned
