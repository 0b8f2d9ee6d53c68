"""The alert output as JSON Lines: a file, stdout, or anything with write/flush; and a replay's leads the same way."""

from __future__ import annotations

from schemas.alert import Alert, Lead
from streams.sinks.base import ByteOut, Sink


class AlertWriter(Sink):
    """Alerts as JSON Lines; one line per alert, flushed so a tail -f sees it as it fires.

    `out=None` writes nothing: subclasses that only print (the demo's console) start from it."""

    def __init__(self, out: ByteOut | None) -> None:
        self.out = out

    def on_alert(self, alert: Alert) -> None:
        if self.out is not None:
            self.out.write(alert.model_dump_json().encode() + b"\n")
            self.out.flush()

    def close(self) -> None:
        if self.out is not None:
            self.out.flush()


class LeadWriter(Sink):
    """What the core judged below an alert (`Lead`), as JSON Lines (`crosstalk replay --leads-out`)."""

    def __init__(self, out: ByteOut) -> None:
        self.out = out

    def on_lead(self, lead: Lead) -> None:
        self.out.write(lead.model_dump_json().encode() + b"\n")

    def close(self) -> None:
        self.out.flush()
