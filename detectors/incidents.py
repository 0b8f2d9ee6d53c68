"""Alertmanager-style grouping: repeated alerts of one fault in one domain form one incident.

Every affected request id stays listed on the incident; ids are stable (derived from the group key
and the first alert), so replay and the Kafka workers name incidents alike.

This tracker is the one owner of an incident's lifecycle: it alone decides, in event time, when an
incident is over, and queues an `IncidentResolved` record that the shell drains (`drain_resolved`)
and hands to the sinks, so webhook receivers and Alertmanager follow it instead of guessing.

An incident has a severity of its own (docs/adr/0018): "this domain is leaking now", what an on-call engineer is
paged for. An alert's severity is the scope: whether that one response goes on the disclosure list. One response
flagged on its content alone can be the model writing a text it knows for a second tenant; two responses of one
domain flagged within the quiet period rarely are. So the incident is its alerts' highest severity once it is
corroborated (a canary or a mechanism signal, which explain a leak by themselves, or `incident_min_responses`
distinct responses alerted high or critical), and at most a warning before. Each alert carries the incident's
severity as of that alert.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from detectors.settings import DetectionSettings
from detectors.signals import registry
from schemas.alert import SEVERITY_RANK, IncidentResolved, Severity, Signal

_HIGH = SEVERITY_RANK["high"]
_WARNING = SEVERITY_RANK["warning"]


# Per-response findings are one fault family; a configuration finding is another.
def group_key(cache_domain: str, kind: str) -> str:
    return f"cache_domain={cache_domain},category={registry.category_of(kind)}"


# Mix-ups told by what two exchanges carry on the wire, not by their text: usage counts crossed or carried from a
# request that lost its answer, one response id on two tenants' answers (ADR 0032), one answer's usage on another
# tenant's response (ADR 0036). Like a mechanism signal, each is a fault's own trace; text a model may write twice
# is not one.
WIRE_MIXUPS = frozenset({"counts", "counted", "same_response", "usage"})


def proves(signals: Sequence[Signal]) -> bool:
    """Whether an alert's evidence makes its incident high at once: a canary, a mechanism signal (the registry's
    `mechanism`) at warning or above, or a mix-up told by the wire at high. Each explains a leak by itself; content
    alone does not (`proven`)."""
    for s in signals:
        r = registry.raises_of(s.name)
        if r is not None and (r.mechanism or r.kind == "canary_leak") and SEVERITY_RANK[s.severity] >= _WARNING:
            return True
        if s.figures.get("delivery_mixup") in WIRE_MIXUPS and SEVERITY_RANK[s.severity] >= _HIGH:
            return True
    return False


@dataclass
class Incident:
    incident_id: str
    group_key: str
    cache_domain: str
    first_ts: float
    last_ts: float
    alerts: int = 0
    request_ids: list[str] = field(default_factory=list)
    kinds: Counter[str] = field(default_factory=Counter)
    severities: Counter[str] = field(default_factory=Counter)
    tenants: set[str] = field(default_factory=set)
    source_tenants: set[str] = field(default_factory=set)
    truncated_request_ids: int = 0
    # The incident's own severity (see the module's doc). Plain defaults: the class attributes stand in for snapshots
    # pickled before they existed (such an incident is corroborated afresh).
    severity: Severity = "info"
    corroborated: bool = False
    high_responses: tuple[str, ...] = ()  # distinct responses alerted high+ so far, up to the number that corroborates


class IncidentTracker:
    # No open incident has last_ts below this (a lower bound): advance() skips its scan until the
    # quiet period from here has passed. The class default serves snapshots pickled before it
    # existed: -inf makes their first advance() scan and set it.
    _oldest_last_ts: float = float("-inf")
    # Snapshots pickled before resolutions were queued have neither; the class defaults stand in.
    _resolved: Sequence[IncidentResolved] = ()
    resolutions_dropped: int = 0

    min_responses = 2  # class default: snapshots pickled before it existed

    def __init__(self, quiet_s: float, max_request_ids: int, max_closed: int = 1000, min_responses: int = 2) -> None:
        self.quiet_s = quiet_s
        self.min_responses = min_responses
        self.max_request_ids = max_request_ids
        self.max_closed = max_closed
        self.open: dict[str, Incident] = {}
        self.closed: list[Incident] = []
        self._oldest_last_ts = float("inf")  # nothing open
        # Resolutions not yet drained by the shell. Bounded: a shell that never drains (or is slow)
        # must not grow the state (or the snapshots) without limit; what is dropped is counted.
        self._resolved = []
        self.resolutions_dropped = 0

    @classmethod
    def of(cls, settings: DetectionSettings) -> IncidentTracker:
        return cls(
            settings.incident_quiet_s,
            settings.max_request_ids_per_incident,
            min_responses=settings.incident_min_responses,
        )

    def assign(
        self,
        cache_domain: str,
        kind: str,
        severity: str,
        ts: float,
        first_alert_id: str,
        request_ids: list[str],
        tenant_id: str | None,
        source_tenant_id: str | None,
        proven: bool = False,
    ) -> tuple[str, str, Severity]:
        """The alert's group key, incident id and the incident's severity once it holds the alert. `proven`: the
        alert's evidence corroborates a leak by itself (`proves`)."""
        key = group_key(cache_domain, kind)
        inc = self.open.get(key)
        if inc is not None and ts - inc.last_ts > self.quiet_s:
            self._close(key)
            inc = None
        if inc is None:
            iid = hashlib.sha256(f"{key}\x1f{first_alert_id}".encode()).hexdigest()[:24]
            inc = Incident(iid, key, cache_domain, ts, ts)
            self.open[key] = inc
            if ts < self._oldest_last_ts:
                self._oldest_last_ts = ts
        inc.last_ts = max(inc.last_ts, ts)
        inc.alerts += 1
        inc.kinds[kind] += 1
        inc.severities[severity] += 1
        for rid in request_ids:
            if len(inc.request_ids) < self.max_request_ids:
                inc.request_ids.append(rid)
            else:
                inc.truncated_request_ids += 1
        if tenant_id:
            inc.tenants.add(tenant_id)
        if source_tenant_id:
            inc.source_tenants.add(source_tenant_id)
        return key, inc.incident_id, self._rate(inc, severity, request_ids, proven)

    def _rate(self, inc: Incident, severity: str, request_ids: list[str], proven: bool) -> Severity:
        rank = SEVERITY_RANK[severity]
        if proven:
            inc.corroborated = True
        elif rank >= _HIGH and not inc.corroborated:
            seen = inc.high_responses
            inc.high_responses = (*seen, *(r for r in request_ids if r not in seen))[: self.min_responses]
            inc.corroborated = len(inc.high_responses) >= self.min_responses
        top = max(inc.severities, key=SEVERITY_RANK.__getitem__)  # its alerts' highest (each an alert's Severity)
        inc.severity = cast(Severity, top) if inc.corroborated or SEVERITY_RANK[top] <= _WARNING else "warning"
        return inc.severity

    def advance(self, ts: float) -> None:
        # Runs for every exchange; an incident can close only once the quiet period has passed
        # since the oldest last_ts, so until then the scan would find nothing.
        if ts - self._oldest_last_ts <= self.quiet_s:
            return
        for key in [k for k, inc in self.open.items() if ts - inc.last_ts > self.quiet_s]:
            self._close(key)
        self._oldest_last_ts = min((inc.last_ts for inc in self.open.values()), default=float("inf"))

    def _close(self, key: str) -> None:
        inc = self.open.pop(key)
        self.closed.append(inc)
        del self.closed[: -self.max_closed]
        pending = self._resolved if isinstance(self._resolved, list) else []
        pending.append(
            IncidentResolved(
                incident_id=inc.incident_id,
                group_key=inc.group_key,
                cache_domain=inc.cache_domain,
                first_ts=inc.first_ts,
                last_ts=inc.last_ts,
                resolved_at=inc.last_ts + self.quiet_s,
                alerts=inc.alerts,
                severity=inc.severity,
            )
        )
        if len(pending) > self.max_closed:
            self.resolutions_dropped += len(pending) - self.max_closed
            del pending[: -self.max_closed]
        self._resolved = pending

    @property
    def has_resolved(self) -> bool:
        return bool(self._resolved)

    def drain_resolved(self) -> list[IncidentResolved]:
        """Incidents resolved since the last call, oldest first; the caller hands them to the sinks."""
        out = list(self._resolved)
        self._resolved = []
        return out

    def all(self) -> list[Incident]:
        return sorted([*self.closed, *self.open.values()], key=lambda i: (i.first_ts, i.incident_id))
