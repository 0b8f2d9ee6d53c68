"""Webhook payloads: routing, tenant-scoped redaction, notifications and the three body formats.

Everything here is pure (no I/O, no clock) so that the embedded sink and the Kafka delivery
consumer render byte-identical bodies for the same notification.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from schemas.alert import SEVERITY_RANK, Alert, Signal
from schemas.timefmt import format_ts
from streams.settings import WebhookReceiver

Status = Literal["firing", "resolved"]

SIGNATURE_HEADER = "X-Crosstalk-Signature"
TIMESTAMP_HEADER = "X-Crosstalk-Timestamp"
ALERT_IDS_HEADER = "X-Crosstalk-Alert-Ids"
IDEMPOTENCY_HEADER = "Idempotency-Key"
NOTIFICATION_HEADER = "X-Crosstalk-Notification-Id"
STATUS_HEADER = "X-Crosstalk-Status"

_SEVERITY_EMOJI = {"info": ":information_source:", "warning": ":warning:", "high": ":rotating_light:"}
_SEVERITY_EMOJI["critical"] = ":red_circle:"


def routes_to(alert: Alert, receiver: WebhookReceiver) -> bool:
    """Whether the receiver's routing rules (severity floor, kinds, domains, tenants) accept the alert."""
    if SEVERITY_RANK[alert.severity] < SEVERITY_RANK[receiver.min_severity]:
        return False
    if receiver.kinds and alert.kind not in receiver.kinds:
        return False
    if receiver.cache_domains and alert.cache_domain not in receiver.cache_domains:
        return False
    # A tenant-scoped receiver only ever hears about its own tenants' responses; domain-level
    # alerts (tenant_id None) belong to the operator, not to a tenant.
    return not receiver.tenants or alert.tenant_id in receiver.tenants


def _redact(text: str, secret_words: set[str]) -> str:
    for word in sorted(secret_words, key=len, reverse=True):
        # "tenant X's context" reads as "another tenant's context", not "tenant another tenant's".
        text = re.sub(rf"(?:\btenant\s+)?(?<![\w.-]){re.escape(word)}(?![\w.-])", "another tenant", text)
    return text


def scope_for_receiver(alert: Alert, receiver: WebhookReceiver) -> Alert:
    """The alert as a tenant-scoped receiver may see it: nothing that identifies another tenant.

    Alerts never carry raw text, but their evidence names the source tenant and its requests;
    a tenant must not learn another tenant's ids or traffic from crosstalk itself.
    """
    if not receiver.tenants:
        return alert
    foreign = {
        t
        for t in [alert.source_tenant_id, *(s.source_tenant_id for s in alert.evidence)]
        if t and t not in receiver.tenants
    }
    evidence = [
        Signal(
            name=s.name,
            severity=s.severity,
            score=s.score,
            figures={k: v for k, v in s.figures.items() if not k.startswith("source_")},
            source_tenant_id=None,
        )
        for s in alert.evidence
    ]
    return alert.model_copy(
        update={
            "source_tenant_id": None,
            "evidence": evidence,
            "summary": _redact(alert.summary, foreign),
            "group_key": _redact(alert.group_key, foreign),
        }
    )


@dataclass
class Notification:
    """One webhook call's worth of alerts of one group, firing or resolved."""

    receiver: str
    group_key: str
    status: Status
    alerts: list[Alert]
    ends_at: float | None = None
    notification_id: str = field(default="")
    resend: int = 0  # >0: the n-th periodic re-send of still-active alerts (Alertmanager receivers)

    def __post_init__(self) -> None:
        if not self.notification_id:
            # Same receiver, status and alert set → same id, so a re-send after a restart can be
            # recognised by the receiver as the same notification. Periodic re-sends are new
            # notifications on purpose: a receiver deduping on Idempotency-Key must not drop them.
            raw = "\x1f".join([self.receiver, self.status, self.group_key, *sorted(self.alert_ids)])
            if self.resend:
                raw += f"\x1fresend={self.resend}"
            self.notification_id = hashlib.sha256(raw.encode()).hexdigest()[:32]

    @property
    def alert_ids(self) -> list[str]:
        return [a.alert_id for a in self.alerts]

    @property
    def request_ids(self) -> list[str]:
        seen: dict[str, None] = {}
        for a in self.alerts:
            for rid in a.request_ids:
                seen.setdefault(rid, None)
        return list(seen)

    @property
    def incident_ids(self) -> list[str]:
        return list(dict.fromkeys(a.incident_id for a in self.alerts))

    @property
    def severity(self) -> str:
        return max((a.severity for a in self.alerts), key=SEVERITY_RANK.__getitem__, default="info")

    @property
    def incident_severity(self) -> str:
        """The incidents' severity as of the newest alert of each (docs/adr/0018): what to page on. Alerts from before
        incidents had one count with their own."""
        newest: dict[str, str] = {}
        for a in sorted(self.alerts, key=lambda a: a.ts):
            newest[a.incident_id] = a.incident_severity or a.severity
        return max(newest.values(), key=SEVERITY_RANK.__getitem__, default="info")


def render_json(n: Notification) -> Any:
    return {
        "version": "1",
        "receiver": n.receiver,
        "status": n.status,
        "notification_id": n.notification_id,
        "group_key": n.group_key,
        "incident_ids": n.incident_ids,
        "severity": n.severity,
        "incident_severity": n.incident_severity,
        "alert_ids": n.alert_ids,
        "request_ids": n.request_ids,
        "ends_at": format_ts(n.ends_at) if n.ends_at is not None else None,
        "alerts": [a.model_dump(mode="json") for a in n.alerts],
    }


def render_alertmanager(n: Notification, external_url: str, valid_until: float | None = None) -> Any:
    """Body of Alertmanager's POST /api/v2/alerts: label and annotation values must be strings.

    Firing alerts carry endsAt = `valid_until` (a few re-send intervals ahead, as Prometheus does):
    Alertmanager keeps them active while crosstalk keeps re-sending, and lets them lapse on their own
    only if crosstalk goes away. Resolved ones carry endsAt = the core's resolution time.
    """
    out = []
    for a in n.alerts:
        labels = {
            "alertname": a.kind,
            "severity": a.severity,
            "cache_domain": a.cache_domain,
            "group_key": a.group_key,
            "incident_id": a.incident_id,
            "alert_id": a.alert_id,
            "source": "crosstalk",
        }
        if a.tenant_id:
            labels["tenant_id"] = a.tenant_id
        if a.source_tenant_id:
            labels["source_tenant_id"] = a.source_tenant_id
        if a.incident_severity:  # fixed when the alert is raised, so it never changes the alert's identity
            labels["incident_severity"] = a.incident_severity
        annotations = {
            "summary": a.summary,
            "score": f"{a.score:.3f}",
            "request_ids": ",".join(a.request_ids),
            "evidence": orjson.dumps([s.model_dump(mode="json") for s in a.evidence]).decode(),
        }
        if a.session_id:
            annotations["session_id"] = a.session_id
        if a.traceparent:
            annotations["traceparent"] = a.traceparent
        if a.response_id:
            annotations["response_id"] = a.response_id
        item: dict[str, Any] = {
            "labels": labels,
            "annotations": annotations,
            "startsAt": format_ts(a.ts),
            "generatorURL": f"{external_url.rstrip('/')}/alerts/{a.alert_id}",
        }
        if n.status == "resolved":
            item["endsAt"] = format_ts(max(n.ends_at if n.ends_at is not None else a.ts, a.ts))
        elif valid_until is not None:
            item["endsAt"] = format_ts(max(valid_until, a.ts))
        out.append(item)
    return out


def _short_list(ids: list[str], limit: int = 10) -> str:
    shown = ", ".join(f"`{i}`" for i in ids[:limit])
    return shown + (f" … (+{len(ids) - limit})" if len(ids) > limit else "")


def render_slack(n: Notification) -> Any:
    first = n.alerts[0]
    kinds = sorted({a.kind for a in n.alerts})
    domains = sorted({a.cache_domain for a in n.alerts})
    tenants = sorted({a.tenant_id for a in n.alerts if a.tenant_id})
    sources = sorted({a.source_tenant_id for a in n.alerts if a.source_tenant_id})
    head = "RESOLVED" if n.status == "resolved" else n.severity.upper()
    emoji = ":white_check_mark:" if n.status == "resolved" else _SEVERITY_EMOJI.get(n.severity, "")
    text = (
        f"{emoji} [{head}] {', '.join(kinds)} in {', '.join(domains)}: "
        f"{len(n.alerts)} alert(s), {len(n.request_ids)} request(s)"
    )
    fields = [
        f"*Kind*\n{', '.join(kinds)}",
        f"*Severity*\n{n.severity}",
        f"*Cache domain*\n{', '.join(domains)}",
        f"*Max score*\n{max(a.score for a in n.alerts):.2f}",
        f"*Tenant*\n{', '.join(tenants) or '-'}",
        f"*Alerts / requests*\n{len(n.alerts)} / {len(n.request_ids)}",
    ]
    if sources:
        fields.append(f"*Suspected source tenant*\n{', '.join(sources)}")
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": text[:150], "emoji": True}},
        {"type": "section", "text": {"type": "mrkdwn", "text": first.summary[:2900]}},
        {"type": "section", "fields": [{"type": "mrkdwn", "text": f} for f in fields]},
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*Requests*: {_short_list(n.request_ids)}"}},
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"group `{n.group_key}` · alerts {_short_list(n.alert_ids, 5)}"[:2900],
                }
            ],
        },
    ]
    return {"text": text, "blocks": blocks}


def render_body(
    n: Notification, fmt: str, external_url: str = "http://127.0.0.1:6066", valid_until: float | None = None
) -> bytes:
    if fmt == "alertmanager":
        obj = render_alertmanager(n, external_url, valid_until)
    elif fmt == "slack":
        obj = render_slack(n)
    else:
        obj = render_json(n)
    return orjson.dumps(obj)
