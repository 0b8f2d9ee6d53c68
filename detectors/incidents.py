"""Alertmanager-style grouping: repeated alerts of one fault in one domain form one incident.

Every affected request id stays listed on the incident; ids are stable (derived from the group key
and the first alert), so replay and the Kafka workers name incidents alike.

This tracker is the one owner of an incident's lifecycle: it alone decides, in event time, when an
incident is over, and queues an `IncidentResolved` record that the shell drains (`drain_resolved`)
and hands to the sinks, so webhook receivers and Alertmanager follow it instead of guessing.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from detectors.signals import registry
from schemas.alert import IncidentResolved


# Per-response findings are one fault family; a configuration finding is another.
def group_key(cache_domain: str, kind: str) -> str:
    return f"cache_domain={cache_domain},category={registry.category_of(kind)}"


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


class IncidentTracker:
    # No open incident has last_ts below this (a lower bound): advance() skips its scan until the
    # quiet period from here has passed. The class default serves snapshots pickled before it
    # existed: -inf makes their first advance() scan and set it.
    _oldest_last_ts: float = float("-inf")
    # Snapshots pickled before resolutions were queued have neither; the class defaults stand in.
    _resolved: Sequence[IncidentResolved] = ()
    resolutions_dropped: int = 0

    def __init__(self, quiet_s: float, max_request_ids: int, max_closed: int = 1000) -> None:
        self.quiet_s = quiet_s
        self.max_request_ids = max_request_ids
        self.max_closed = max_closed
        self.open: dict[str, Incident] = {}
        self.closed: list[Incident] = []
        self._oldest_last_ts = float("inf")  # nothing open
        # Resolutions not yet drained by the shell. Bounded: a shell that never drains (or is slow)
        # must not grow the state (or the snapshots) without limit; what is dropped is counted.
        self._resolved = []
        self.resolutions_dropped = 0

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
    ) -> tuple[str, str]:
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
        return key, inc.incident_id

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
