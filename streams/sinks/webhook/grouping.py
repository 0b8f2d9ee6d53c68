"""Alertmanager-style grouping per receiver. Pure: fed (alert, now) and the core's resolutions.

- The first alert of a group waits `group_wait_s`, then everything pending goes out together;
  later alerts of the group wait until `group_interval_s` after the previous notification.
- An incident is resolved when the core says so (`resolve`, from IncidentTracker via the sinks'
  `on_resolved`): the grouper never decides that on its own, so a webhook's "resolved", an
  Alertmanager endsAt and the incident list of a replay always agree.
- With `resend_interval_s` (Alertmanager receivers) the active alerts of every open incident are
  re-sent that often, as Prometheus does, so Alertmanager does not time them out (resolve_timeout)
  while crosstalk still considers the incident open.
- A resolution may arrive before some (or all) of its incident's alerts: on the Kafka alerts topic
  they sit on different partitions. Resolved incident ids are remembered (bounded), and an alert of
  one that comes late is announced and resolved right after (firing, then resolved), never left firing.
`now` is the caller's clock for the timers (monotonic wall clock when delivering live).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

from schemas.alert import Alert
from streams.sinks.formats import Notification


@dataclass
class _Group:
    pending: dict[str, Alert] = field(default_factory=dict)
    next_flush: float | None = None
    last_flush: float | None = None
    incidents: set[str] = field(default_factory=set)


@dataclass
class _OpenIncident:
    group_key: str
    alerts: dict[str, Alert] = field(default_factory=dict)
    last_sent: float | None = None  # when its alerts last went out as firing (None: not yet)
    last_added: float = 0.0  # when its newest alert arrived (the caller's clock)
    resends: int = 0


AddResult = Literal["new", "pending", "sent"]


class Grouper:
    def __init__(
        self,
        receiver: str,
        group_wait_s: float,
        group_interval_s: float,
        resend_interval_s: float | None = None,
        seen_capacity: int = 100_000,
        resend_for_s: float = float("inf"),
    ) -> None:
        self.receiver = receiver
        self.group_wait_s = group_wait_s
        self.group_interval_s = group_interval_s
        self.resend_interval_s = resend_interval_s
        # Not a lifecycle decision (only the core resolves): a bound on how long a resolution that
        # never arrives (lost with a dropped domain, a restart) can keep an alert asserted.
        self.resend_for_s = resend_for_s
        self._groups: dict[str, _Group] = {}
        self._incidents: dict[str, _OpenIncident] = {}
        # alert_id -> "pending" | "sent": at-least-once upstream redelivers alerts; they must not
        # produce a second notification. Bounded: ids older than this many are forgotten.
        self._seen: OrderedDict[str, str] = OrderedDict()
        self._seen_capacity = seen_capacity
        # incident id -> resolved_at, for alerts that arrive after their incident's resolution.
        self._resolved: OrderedDict[str, float] = OrderedDict()
        self._late: dict[str, float] = {}  # incidents to resolve again once their late alerts went out

    def _remember(self, alert_id: str, state: str) -> None:
        self._seen[alert_id] = state
        self._seen.move_to_end(alert_id)
        while len(self._seen) > self._seen_capacity:
            self._seen.popitem(last=False)

    def _incident_for(self, alert: Alert) -> _OpenIncident:
        inc = self._incidents.get(alert.incident_id)
        if inc is None:
            inc = self._incidents[alert.incident_id] = _OpenIncident(group_key=alert.group_key)
            self._groups.setdefault(alert.group_key, _Group()).incidents.add(alert.incident_id)
        inc.alerts[alert.alert_id] = alert
        return inc

    def add(self, alert: Alert, now: float) -> AddResult:
        """Accept an alert; "pending"/"sent" mean it is a duplicate of one already pending/notified."""
        state = self._seen.get(alert.alert_id)
        if state is not None:
            return state  # type: ignore[return-value]
        self._incident_for(alert).last_added = now
        group = self._groups.setdefault(alert.group_key, _Group())
        group.pending[alert.alert_id] = alert
        ends_at = self._resolved.get(alert.incident_id)
        if ends_at is not None:
            self._late[alert.incident_id] = ends_at
        if group.next_flush is None:
            if group.last_flush is None:
                group.next_flush = now + self.group_wait_s
            else:
                group.next_flush = max(now, group.last_flush + self.group_interval_s)
        self._remember(alert.alert_id, "pending")
        return "new"

    def restore_sent(self, alert: Alert, now: float = 0.0) -> None:
        """After a restart: this alert was already notified as firing; track it for re-sends and resolution."""
        if alert.alert_id in self._seen:
            return
        inc = self._incident_for(alert)
        if inc.last_sent is None:
            inc.last_sent = float("-inf")  # unknown when: re-assert it at the first opportunity
            inc.last_added = now
        group = self._groups[alert.group_key]
        if group.last_flush is None:
            # Unknown when it went out; treat it as just now so group_interval still applies.
            group.last_flush = float("-inf")
        self._remember(alert.alert_id, "sent")

    def knows(self, incident_id: str) -> bool:
        return incident_id in self._incidents

    def _resend_due(self, inc: _OpenIncident) -> float | None:
        if self.resend_interval_s is None or inc.last_sent is None:
            return None
        due = inc.last_sent + self.resend_interval_s
        return due if due - inc.last_added <= self.resend_for_s else None

    def next_due(self) -> float | None:
        times = [g.next_flush for g in self._groups.values() if g.pending and g.next_flush is not None]
        times += [t for inc in self._incidents.values() if (t := self._resend_due(inc)) is not None]
        if self._late:
            return float("-inf")
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
            inc = self._incidents.get(a.incident_id)
            if inc is not None:
                inc.last_sent = now
        return Notification(receiver=self.receiver, group_key=key, status="firing", alerts=alerts)

    def _resends(self, now: float) -> list[Notification]:
        out: list[Notification] = []
        for inc in self._incidents.values():
            due = self._resend_due(inc)
            if due is None or due > now:
                continue
            pending = self._groups[inc.group_key].pending
            alerts = sorted(
                (a for aid, a in inc.alerts.items() if aid not in pending), key=lambda a: (a.ts, a.alert_id)
            )
            inc.last_sent = now
            if alerts:
                inc.resends += 1
                out.append(
                    Notification(
                        receiver=self.receiver,
                        group_key=inc.group_key,
                        status="firing",
                        alerts=alerts,
                        resend=inc.resends,
                    )
                )
        return out

    def resolve(self, incident_id: str, ends_at: float, now: float) -> list[Notification]:
        """The core resolved this incident at event time `ends_at`: announce it (after flushing any of its
        alerts still pending, so nothing is resolved that was never announced). Unknown here: nothing."""
        self._resolved[incident_id] = ends_at
        self._resolved.move_to_end(incident_id)
        while len(self._resolved) > self._seen_capacity:
            self._resolved.popitem(last=False)
        self._late.pop(incident_id, None)
        inc = self._incidents.pop(incident_id, None)
        if inc is None:
            return []
        group = self._groups.get(inc.group_key)
        out: list[Notification] = []
        if group is not None:
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
        for iid, ends_at in list(self._late.items()):
            out += self.resolve(iid, ends_at, now)
        out += self._resends(now)
        return out

    def flush(self, now: float) -> list[Notification]:
        """Close time: send everything pending now. Open incidents stay open: only the core resolves."""
        return [self._flush_group(k, g, now) for k, g in list(self._groups.items()) if g.pending]
