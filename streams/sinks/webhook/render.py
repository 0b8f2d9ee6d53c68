"""A notification rendered for one receiver: the envelope that is journaled, sent and dead-lettered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streams.settings import WebhookReceiver, WebhookSettings
from streams.sinks.formats import Notification, render_body


@dataclass(frozen=True)
class Envelope:
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


def make_envelope(
    n: Notification, receiver: WebhookReceiver, settings: WebhookSettings, wall_now: float | None = None
) -> Envelope:
    """`wall_now` (epoch seconds) dates the endsAt of firing Alertmanager alerts: now + a few re-send intervals."""
    valid_until = None
    if receiver.format == "alertmanager" and n.status == "firing" and wall_now is not None:
        valid_until = wall_now + settings.ends_at_intervals * settings.resend_interval_s
    return Envelope(
        notification_id=n.notification_id,
        receiver=receiver.name,
        status=n.status,
        group_key=n.group_key,
        alert_ids=n.alert_ids,
        body=render_body(n, receiver.format, settings.external_url, valid_until),
    )
