"""The alert: what crosstalk concludes about one response (or one domain), with its evidence."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer

from schemas.timefmt import format_ts, parse_ts

Severity = Literal["info", "warning", "high", "critical"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "high": 2, "critical": 3}

# The closed set of kinds on the wire: consumers route and group on them (Alertmanager labels, webhook
# receivers, the report). Which kind an alert takes when a response raises several signals is the
# detection core's business (precedence declared where each signal is registered, detectors/signals/
# registry.py), not the contract's, so the order here carries no meaning.
AlertKind = Literal[
    "canary_leak",
    "cross_tenant_contamination",
    "cross_session_contamination",
    "overlong_accepted",
    "token_accounting_mismatch",
    "impossible_prefill",
    "undeclared_tool_call",
    "capacity_gap",
]

AlertTime = Annotated[
    float,
    BeforeValidator(parse_ts),
    PlainSerializer(format_ts, return_type=str, when_used="json"),
]


class Signal(BaseModel):
    """One detector's finding with the figures behind it."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = Field(description="detector name, e.g. overlong_accepted, content_overlap, cache_pressure")
    severity: Severity
    score: float = Field(ge=0.0, le=1.0)
    figures: dict[str, Any] = Field(default_factory=dict)
    source_tenant_id: str | None = None


class Alert(BaseModel):
    model_config = ConfigDict(extra="ignore")

    alert_id: str = Field(description="stable: hash of kind, cache_domain, sorted request_ids, source tenant")
    ts: AlertTime = Field(description="event time of the event that raised it")
    kind: AlertKind
    severity: Severity
    cache_domain: str
    tenant_id: str | None = Field(default=None, description="tenant that received the suspect response")
    source_tenant_id: str | None = Field(default=None, description="suspected origin of leaked content")
    session_id: str | None = None
    request_ids: list[str] = Field(default_factory=list)
    score: float = Field(ge=0.0, le=1.0)
    evidence: list[Signal] = Field(default_factory=list)
    summary: str
    group_key: str = Field(description="Alertmanager-style grouping key: repeated alerts of one fault share it")
    incident_id: str = Field(description="stable id of the incident (group) this alert belongs to")
    traceparent: str | None = Field(default=None, description="trace context of the response that raised it")
    response_id: str | None = Field(
        default=None, description="the provider's id of that response (gen_ai.response.id), to find it in engine logs"
    )
    incident_severity: Severity | None = Field(
        default=None,
        description="the incident's severity as of this alert: its alerts' highest once corroborated (a canary, a "
        "mechanism signal, or incident_min_responses responses alerted high), at most warning before. Page on this; "
        "`severity` is the scope (whether this response is on the disclosure list). None from versions before it",
    )


RESOLVED_RECORD: Final = "incident_resolved"


class IncidentResolved(BaseModel):
    """The core's word that an incident is over: no alert of its group for `incident_quiet_s` of event time.

    The one owner of incident lifecycle is the core's IncidentTracker; sinks follow this record (webhooks
    send "resolved", Alertmanager gets endsAt = resolved_at). In Kafka mode it travels on the alerts
    topic beside the alerts, keyed by incident_id, told apart by `record`.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)

    record: Literal["incident_resolved"] = RESOLVED_RECORD
    incident_id: str
    group_key: str
    cache_domain: str
    first_ts: AlertTime = Field(description="event time of the incident's first alert")
    last_ts: AlertTime = Field(description="event time of its last alert")
    resolved_at: AlertTime = Field(description="event time it resolved: last alert + the quiet period")
    alerts: int = Field(ge=0, description="alerts the incident had")
    severity: Severity | None = Field(default=None, description="the incident's own severity when it resolved")


class Lead(BaseModel):
    """A response the core judged below what raises an alert (a warning; a cold domain's held finding: high): no alert,
    no incident, no page, and still a finding about it (a passage another tenant or session had, a run shorter than a
    page, a held finding dismissed). Written only
    when asked (`crosstalk replay --leads-out`): the leads of an investigation ("whose text went where") and what an
    evaluation reads to say why a leak was missed. No text, as alerts carry none."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    ts: AlertTime = Field(description="event time it was judged (a held finding: when judged again)")
    cache_domain: str
    tenant_id: str | None = None
    session_id: str | None = None
    request_id: str
    findings: list[Signal] = Field(description="the signals the core concluded on it, below what raises an alert")
