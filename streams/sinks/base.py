"""What a sink is: something that is told about processed exchanges, alerts and rejects.

The embedded runner and the Faust workers call the same methods, in event-time order per domain.
Sinks only move data; they never decide anything about contamination.
"""

from __future__ import annotations

from typing import Protocol

from detectors.exchange import Exchange
from schemas.alert import Alert


class Sink(Protocol):
    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        """A request/response pair was evaluated; `alerts` are the ones it raised (maybe none)."""

    def on_alert(self, alert: Alert) -> None:
        """An alert was raised (also for domain-level alerts that belong to no exchange)."""

    def on_reject(self, reason: str, detail: str) -> None:
        """An input line or message was rejected (dead-lettered) for `reason`."""

    def close(self) -> None:
        """Flush and release; must not lose anything already accepted."""


class NullSink:
    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        return None

    def on_alert(self, alert: Alert) -> None:
        return None

    def on_reject(self, reason: str, detail: str) -> None:
        return None

    def close(self) -> None:
        return None
