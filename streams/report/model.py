"""The report's data, built from alerts (and, when given, what the events say about the affected requests).

Functional core: no I/O. `build_report(alerts, timeline)` turns the alert stream into the three answers
an operator owes after an incident: which responses were affected (and by whom), which incidents there
were, and per tenant what they received and where their own data went.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from detectors.signals import registry
from schemas.alert import SEVERITY_RANK, Alert, Lead, Signal
from streams.report.timeline import Timeline
from streams.report.words import NameOf, describe

# An alert about the configuration of a domain, not about a response: never "affected" (declared by the registry).
CONFIGURATION_KINDS = registry.CONFIGURATION_KINDS
CONTENT_SIGNALS = ("cross_tenant_contamination", "cross_session_contamination", "canary_leak")


def _category(alert: Alert) -> str:
    """The group key's category (exposure | configuration); by kind when the key does not say."""
    for part in alert.group_key.split(","):
        name, _, value = part.partition("=")
        if name.strip() == "category" and value:
            return value.strip()
    return registry.category_of(alert.kind)


def _max_severity(a: str, b: str) -> str:
    return a if SEVERITY_RANK[a] >= SEVERITY_RANK[b] else b


@dataclass
class Evidence:
    name: str
    severity: str
    words: str


@dataclass
class Affected:
    """One response that the alerts say may carry another party's data."""

    request_id: str
    tenant_id: str | None
    cache_domain: str
    ts: float  # event time of the first alert naming it
    severity: str
    kinds: list[str]
    incident_ids: list[str]
    alert_ids: list[str]
    source_tenants: list[str]  # other tenants whose data it carried (not the tenant itself)
    source_request_ids: list[str]
    cross_session: bool
    evidence: list[Evidence]
    # From the events, when given: when the request came in and how it was answered.
    request_ts: float | None = None
    prompt_tokens: int | None = None
    status_code: int | None = None

    @property
    def origin_known(self) -> bool:
        return bool(self.source_tenants) or self.cross_session


@dataclass
class Leak:
    """Data of `source_tenant` (their request ids) found in a response delivered to `tenant_id`."""

    source_tenant: str
    source_request_ids: list[str]
    tenant_id: str | None
    request_id: str
    cache_domain: str
    ts: float
    severity: str
    kind: str
    signal: str


@dataclass
class IncidentRow:
    incident_id: str
    cache_domain: str
    category: str
    start: float
    end: float
    first_alert_ts: float
    first_high_ts: float | None
    alerts: int = 0
    severity: str = "info"
    affected: list[str] = field(default_factory=list)
    tenants: set[str] = field(default_factory=set)
    sources: set[str] = field(default_factory=set)
    signals: Counter[str] = field(default_factory=Counter)

    @property
    def duration_s(self) -> float:
        return self.end - self.start

    @property
    def time_to_first_alert_s(self) -> float:
        return self.first_alert_ts - self.start

    @property
    def time_to_first_high_s(self) -> float | None:
        return None if self.first_high_ts is None else self.first_high_ts - self.start


@dataclass
class TenantView:
    tenant_id: str
    received: list[Affected] = field(default_factory=list)
    sent: list[Leak] = field(default_factory=list)

    @property
    def leaked_request_ids(self) -> list[str]:
        return sorted({rid for leak in self.sent for rid in leak.source_request_ids})


@dataclass
class Report:
    alerts: int
    duplicates: int
    affected: list[Affected]
    leaks: list[Leak]
    incidents: list[IncidentRow]
    configuration: list[Alert]
    tenants: list[TenantView]
    timeline: Timeline | None
    severity_counts: Counter[str]
    kind_counts: Counter[str]
    # Responses whose alerts all stay below high: leads to look into, not disclosures (ADR 0008: an echo of whole
    # sentences, text two tenants share, a match past the pool). No tenant is owed a notification for them.
    leads: list[Affected] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.affected


def _operator_name(tenant: str | None) -> str:
    return f"tenant {tenant}" if tenant else "an unknown party"


def _origins(alert: Alert) -> tuple[dict[str, tuple[list[str], str]], list[str], bool]:
    """Per other tenant: (their request ids found, the signal that found them); all source ids; cross-session.

    Each content signal names its own source: one alert may carry a canary of a probe account and
    passages of another tenant, and each party's request ids belong to that party alone.
    """
    origins: dict[str, tuple[list[str], str]] = {}
    all_ids: list[str] = []
    cross_session = False
    for sig in alert.evidence:
        if sig.name not in CONTENT_SIGNALS:
            continue
        ids = [str(i) for i in sig.figures.get("source_request_ids") or []]
        all_ids.extend(ids)
        if sig.name == "cross_session_contamination":
            cross_session = True
            continue
        source = sig.source_tenant_id or alert.source_tenant_id
        if source and source != alert.tenant_id:
            known, signal = origins.get(source, ([], sig.name))
            origins[source] = (list(dict.fromkeys([*known, *ids])), signal)
    if alert.source_tenant_id and alert.source_tenant_id != alert.tenant_id and alert.source_tenant_id not in origins:
        origins[alert.source_tenant_id] = ([], alert.kind)
    return origins, list(dict.fromkeys(all_ids)), cross_session


def evidence_of(alert: Alert, name_of: NameOf = _operator_name, private: bool = True) -> list[Evidence]:
    return in_words(alert.evidence, name_of, private)


def in_words(signals: Iterable[Signal], name_of: NameOf = _operator_name, private: bool = True) -> list[Evidence]:
    """Signals (an alert's evidence, a lead's findings) in words, the most severe first."""
    return [
        Evidence(s.name, s.severity, describe(s.name, s.figures, s.source_tenant_id, name_of=name_of, private=private))
        for s in sorted(signals, key=lambda s: -SEVERITY_RANK[s.severity])
    ]


def dedupe(alerts: Iterable[Alert]) -> tuple[list[Alert], int]:
    """Alerts by alert_id, first copy kept (delivery is at least once, so the same id may come twice)."""
    seen: dict[str, Alert] = {}
    dupes = 0
    for a in alerts:
        if a.alert_id in seen:
            dupes += 1
        else:
            seen[a.alert_id] = a
    return sorted(seen.values(), key=lambda a: (a.ts, a.alert_id)), dupes


def build_report(alerts: Iterable[Alert], timeline: Timeline | None = None, below: Iterable[Lead] = ()) -> Report:
    """`below`: what the core judged below an alert (`crosstalk replay --leads-out`): those whose findings name a
    tenant the alerts name (as receiver or source) join the leads, for the investigation; never a disclosure."""
    unique, dupes = dedupe(alerts)
    affected: dict[str, Affected] = {}
    leaks: list[Leak] = []
    incidents: dict[str, IncidentRow] = {}
    configuration: list[Alert] = []
    for a in unique:
        inc = _incident(incidents, a)
        if a.kind in CONFIGURATION_KINDS or not a.request_ids:
            configuration.append(a)
            continue
        _affect(affected, leaks, inc, a)
    # Only a high or critical alert discloses: a response whose alerts all stay below is a lead, apart.
    leads = {rid: row for rid, row in affected.items() if SEVERITY_RANK[row.severity] < SEVERITY_RANK["high"]}
    if leads:
        affected = {rid: row for rid, row in affected.items() if rid not in leads}
        leaks = [leak for leak in leaks if leak.request_id not in leads]
        for inc in incidents.values():
            inc.affected = [rid for rid in inc.affected if rid not in leads]
    _below(leads, affected, below, {t for a in unique for t in (a.tenant_id, a.source_tenant_id) if t})
    if timeline is not None:
        _when(affected, incidents, timeline)
        _when(leads, {}, timeline)
    return Report(
        alerts=len(unique),
        duplicates=dupes,
        affected=sorted(affected.values(), key=lambda r: (r.ts, r.request_id)),
        leads=sorted(leads.values(), key=lambda r: (r.ts, r.request_id)),
        leaks=leaks,
        incidents=sorted(incidents.values(), key=lambda i: (i.start, i.incident_id)),
        configuration=configuration,
        tenants=_tenant_views(affected, leaks, timeline),
        timeline=timeline,
        severity_counts=Counter(a.severity for a in unique),
        kind_counts=Counter(a.kind for a in unique),
    )


def _incident(incidents: dict[str, IncidentRow], a: Alert) -> IncidentRow:
    """The alert's incident row, created at its first alert, with this alert counted in."""
    inc = incidents.get(a.incident_id)
    if inc is None:
        inc = incidents[a.incident_id] = IncidentRow(
            a.incident_id,
            a.cache_domain,
            _category(a),
            a.ts,
            a.ts,
            a.ts,
            None,
        )
    inc.alerts += 1
    inc.end = max(inc.end, a.ts)
    inc.severity = _max_severity(inc.severity, a.severity)
    if inc.first_high_ts is None and SEVERITY_RANK[a.severity] >= SEVERITY_RANK["high"]:
        inc.first_high_ts = a.ts
    inc.signals.update(s.name for s in a.evidence)
    return inc


def _affect(affected: dict[str, Affected], leaks: list[Leak], inc: IncidentRow, a: Alert) -> None:
    """Each response the alert names: its row (merged with earlier alerts on it) and a leak per source."""
    origins, src_ids, cross_session = _origins(a)
    sources = list(origins)
    if a.tenant_id:
        inc.tenants.add(a.tenant_id)
    inc.sources.update(sources)
    for rid in a.request_ids:
        row = affected.get(rid)
        if row is None:
            row = affected[rid] = Affected(
                rid, a.tenant_id, a.cache_domain, a.ts, a.severity, [], [], [], [], [], False, []
            )
            inc.affected.append(rid)
        row.severity = _max_severity(row.severity, a.severity)
        row.kinds = list(dict.fromkeys([*row.kinds, a.kind]))
        row.incident_ids = list(dict.fromkeys([*row.incident_ids, a.incident_id]))
        row.alert_ids.append(a.alert_id)
        row.source_tenants = list(dict.fromkeys([*row.source_tenants, *sources]))
        row.source_request_ids = list(dict.fromkeys([*row.source_request_ids, *src_ids]))
        row.cross_session = row.cross_session or cross_session
        row.evidence.extend(evidence_of(a))
        for source, (ids, signal) in origins.items():
            leaks.append(Leak(source, ids, a.tenant_id, rid, a.cache_domain, a.ts, a.severity, a.kind, signal))


def _below(leads: dict[str, Affected], affected: dict[str, Affected], below: Iterable[Lead], parties: set[str]) -> None:
    """Each lead of the core whose content findings name one of `parties` (the tenants the alerts are about), as a
    lead row of its own severity; a response an alert names already is not listed again."""
    for lead in below:
        rid = lead.request_id
        content = [f for f in lead.findings if f.name in CONTENT_SIGNALS]
        named = {f.source_tenant_id for f in content if f.source_tenant_id} | ({lead.tenant_id} if content else set())
        if rid in affected or rid in leads or not (named & parties):
            continue
        sources = list(dict.fromkeys(f.source_tenant_id for f in content if f.source_tenant_id))
        ids = [str(i) for f in content for i in f.figures.get("source_request_ids") or []]
        row = leads[rid] = Affected(
            rid, lead.tenant_id, lead.cache_domain, lead.ts, "info", [], [], [], sources, list(dict.fromkeys(ids)),
            any(f.name == "cross_session_contamination" for f in content), [],
        )  # fmt: skip
        row.evidence = in_words(lead.findings)
        row.kinds = list(dict.fromkeys(e.name for e in row.evidence))
        for f in lead.findings:
            row.severity = _max_severity(row.severity, f.severity)


def _when(affected: dict[str, Affected], incidents: dict[str, IncidentRow], timeline: Timeline) -> None:
    """What the events say of each affected request (when it came, its prompt, its status) and of each incident."""
    for row in affected.values():
        seen = timeline.requests.get(row.request_id)
        if seen is not None:
            row.request_ts, row.prompt_tokens, row.status_code = seen.request_ts, seen.prompt_tokens, seen.status
    for inc in incidents.values():
        # The incident began when its first affected request came in, not when it was noticed.
        starts = [ts for r in inc.affected if (ts := affected[r].request_ts) is not None]
        if starts:
            inc.start = min(inc.start, *starts)


def _tenant_views(affected: dict[str, Affected], leaks: list[Leak], timeline: Timeline | None) -> list[TenantView]:
    """Per tenant, what it received and what of its own went elsewhere; most involved first."""
    tenants: dict[str, TenantView] = {}

    def view(t: str) -> TenantView:
        return tenants.setdefault(t, TenantView(t))

    for row in affected.values():
        if row.tenant_id:
            view(row.tenant_id).received.append(row)
    for leak in leaks:
        view(leak.source_tenant).sent.append(leak)
    if timeline is not None:
        for t in timeline.tenants:
            view(t)
    return sorted(tenants.values(), key=lambda v: (-len(v.received) - len(v.sent), v.tenant_id))


def summary_counts(report: Report) -> dict[str, Any]:
    return {
        "alerts": report.alerts,
        "affected_responses": len(report.affected),
        "tenants_affected": len({r.tenant_id for r in report.affected if r.tenant_id}),
        "source_tenants": len({leak.source_tenant for leak in report.leaks}),
        "incidents": sum(1 for i in report.incidents if i.affected),
    }
