"""Webhook delivery: signing, Alertmanager-style grouping, retries and dead letters, the outbox, the sink.

- `signing`:  `sign` / `verify_signature`, the HMAC scheme receivers check;
- `grouping`: `Grouper`, pure grouping per receiver that follows the core's incident resolutions;
- `render`:   `Envelope`, a notification rendered for one receiver;
- `delivery`: `Deliverer`, one HTTP notification with retries → delivered or dead-lettered;
- `outbox`:   the embedded mode's journal, so a restart re-sends with the same ids;
- `sink`:     `WebhookSink`, the embedded-mode Sink (one thread per receiver).
"""

from streams.sinks.webhook.delivery import (
    DeadLetterStore,
    Deliverer,
    DeliveryMetrics,
    DeliveryStats,
    Outcome,
    warn_unsigned,
)
from streams.sinks.webhook.grouping import Grouper
from streams.sinks.webhook.outbox import Outbox, OutboxState
from streams.sinks.webhook.render import Envelope, make_envelope
from streams.sinks.webhook.signing import sign, verify_signature
from streams.sinks.webhook.sink import WebhookSink, new_grouper

__all__ = [
    "DeadLetterStore",
    "Deliverer",
    "DeliveryMetrics",
    "DeliveryStats",
    "Envelope",
    "Grouper",
    "Outbox",
    "OutboxState",
    "Outcome",
    "WebhookSink",
    "make_envelope",
    "new_grouper",
    "sign",
    "verify_signature",
    "warn_unsigned",
]
