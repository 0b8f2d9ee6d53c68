"""What a sink is: something that is told about processed exchanges, alerts, incident resolutions and rejects.

The embedded runner and the Faust workers call the same methods, in event-time order per domain.
Sinks only move data; they never decide anything about contamination, nor when an incident is over
(that is the core's IncidentTracker, which they hear about through `on_resolved`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from schemas.alert import Alert, IncidentResolved
from schemas.exchange import Exchange


class ByteOut(Protocol):
    """Where JSON lines go: an open binary file, stdout's buffer, or a file opened on first write."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> None: ...


class Sink(Protocol):
    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        """A request/response pair was evaluated; `alerts` are the ones it raised (maybe none)."""

    def on_alert(self, alert: Alert) -> None:
        """An alert was raised (also for domain-level alerts that belong to no exchange)."""

    def on_resolved(self, resolution: IncidentResolved) -> None:
        """The core resolved an incident (event time); receivers that were told it fired hear it ended."""

    def on_reject(self, reason: str, detail: str) -> None:
        """An input line or message was rejected (dead-lettered) for `reason`."""

    def close(self) -> None:
        """Flush and release; must not lose anything already accepted."""


class SinkBase:
    """No-op hooks, so a sink implements only what it cares about and every sink has every hook."""

    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        return None

    def on_alert(self, alert: Alert) -> None:
        return None

    def on_resolved(self, resolution: IncidentResolved) -> None:
        return None

    def on_reject(self, reason: str, detail: str) -> None:
        return None

    def close(self) -> None:
        return None


def tell_resolved(sinks: Sequence[object], resolutions: list[IncidentResolved]) -> None:
    """Hand the core's resolutions to every sink that listens for them (sinks written before the hook
    existed simply do not)."""
    if not resolutions:
        return
    hooks = [hook for s in sinks if (hook := getattr(s, "on_resolved", None)) is not None]
    for res in resolutions:
        for hook in hooks:
            hook(res)
