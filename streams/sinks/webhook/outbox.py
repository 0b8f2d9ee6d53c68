"""Embedded mode's durability: an append-only journal of accepted alerts, resolutions, notifications, acks.

Accepted alerts are journaled before grouping, so an alert still waiting out group_wait when the
process dies is not lost. A notification is journaled before its first attempt and acked after a
2xx or a dead-letter; on start everything unacked is re-sent with the same ids. Resolutions of the
core are journaled too, so a restart does not bring a resolved incident back as firing.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from schemas.alert import Alert, IncidentResolved
from streams.sinks.webhook.render import Envelope

log = logging.getLogger(__name__)


@dataclass
class OutboxState:
    alerts: dict[str, Alert] = field(default_factory=dict)
    notifications: dict[str, Envelope] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)
    sent: dict[str, set[str]] = field(default_factory=dict)  # receiver -> alert ids announced firing
    resolved: dict[str, set[str]] = field(default_factory=dict)  # receiver -> alert ids announced resolved
    resolutions: dict[str, IncidentResolved] = field(default_factory=dict)  # incident id -> the core's word

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

    def append_resolution(self, res: IncidentResolved) -> None:
        self._append({"t": "resolve", "resolution": res.model_dump(mode="json")})

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
            elif t == "resolve":
                res = IncidentResolved.model_validate(rec["resolution"])
                state.resolutions[res.incident_id] = res
            elif t == "ack":
                state.acked.add(rec["id"])
            elif t == "sent":
                state.sent.setdefault(rec["receiver"], set()).update(rec["alert_ids"])
        return state

    def compact(
        self,
        live_alerts: list[Alert],
        sent: dict[str, set[str]],
        unacked: list[Envelope],
        resolutions: list[IncidentResolved] = (),  # type: ignore[assignment]
    ) -> None:
        """Rewrite the journal with only what a restart still needs (atomic rename)."""
        tmp = self.dir / "journal.jsonl.tmp"
        with tmp.open("wb") as f:
            for res in resolutions:
                f.write(orjson.dumps({"t": "resolve", "resolution": res.model_dump(mode="json")}) + b"\n")
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
