"""What a sink is: something told about input, evaluated exchanges, alerts, incident resolutions and rejects.

`Sink` is the one base class: every hook is a no-op here, so a sink overrides only what it cares about
and both runners call every hook on every sink, with no discovery by `hasattr`. They call them through a
`SinkSet`, which keeps the other sinks going when one raises (counted and logged, never swallowed).
The embedded runner and the Faust workers call the same hooks, in event-time order per domain.
Sinks only move data; they never decide anything about contamination, nor when an incident is over
(that is the core's IncidentTracker, which they hear about through `on_resolved`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from schemas.alert import Alert, IncidentResolved, Lead
from schemas.exchange import Exchange

log = logging.getLogger("crosstalk.sinks")

# `fn()` -> a total, or {component or partition: value}; read whenever the sink exports gauges.
SizeSource = Callable[[], "int | Mapping[str, int]"]


class ByteOut(Protocol):
    """Where JSON lines go: an open binary file, stdout's buffer, or a file opened on first write."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> None: ...


class Sink:
    """Base of every sink; each hook is a no-op until a subclass overrides it."""

    def on_event(self, type: str) -> None:
        """An input event of `type` (request, response, cache_stats, canary) was accepted."""

    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        """A request/response pair was evaluated; `alerts` are the ones its evaluation released (maybe none)."""

    def on_alert(self, alert: Alert) -> None:
        """An alert was raised (also for domain-level alerts that belong to no exchange)."""

    def on_resolved(self, resolution: IncidentResolved) -> None:
        """The core resolved an incident (event time); receivers that were told it fired hear it ended."""

    def on_reject(self, reason: str, detail: str) -> None:
        """An input line or message was rejected (dead-lettered) for `reason`."""

    def on_lead(self, lead: Lead) -> None:
        """A response the core judged below an alert (only when the runner asked the core for its leads)."""

    def set_state_size_source(self, fn: SizeSource) -> None:
        """The runner's state size (entries per component), for sinks that export it as a gauge."""

    def set_lag_source(self, fn: SizeSource) -> None:
        """Input messages not yet read, per partition (Kafka only), for sinks that export it as a gauge."""

    def set_behind_source(self, fn: Callable[[], float | None]) -> None:
        """Seconds the worker's event time trails the wall clock (Kafka only; None: no event yet), for sinks
        that export it as a gauge: a live worker that cannot keep up shows it growing."""

    def close(self) -> None:
        """Flush and release; must not lose anything already accepted."""


class SinkSet(Sink):
    """Fans each hook out to every sink, in order. A sink that raises does not stop the others nor the
    run: the failure is counted (`sink_errors.<Sink>.<hook>` in `counters`) and logged, with the
    traceback the first time per sink and hook."""

    def __init__(self, sinks: Iterable[Sink] = (), counters: Counter[str] | None = None) -> None:
        self.sinks = list(sinks)
        for sink in self.sinks:
            if not isinstance(sink, Sink):
                raise TypeError(f"{type(sink).__name__} is not a streams.sinks.base.Sink")
        self.counters: Counter[str] = counters if counters is not None else Counter()

    def __iter__(self) -> Iterator[Sink]:
        return iter(self.sinks)

    def __len__(self) -> int:
        return len(self.sinks)

    def _failed(self, sink: Sink, hook: str, exc: Exception) -> None:
        name = type(sink).__name__
        key = f"sink_errors.{name}.{hook}"
        n = self.counters[key] = self.counters[key] + 1
        if n == 1:
            log.error("sink %s failed in %s; the other sinks and the run go on", name, hook, exc_info=exc)
        elif _power_of_ten(n):  # a sink failing on every event must not flood the log
            log.warning("sink %s failed in %s %d times, the last with %r", name, hook, n, exc)

    def _each(self, hook: str, *args: Any) -> None:
        for sink in self.sinks:
            try:
                getattr(sink, hook)(*args)
            except Exception as exc:
                self._failed(sink, hook, exc)

    def on_event(self, type: str) -> None:
        self._each("on_event", type)

    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        self._each("on_exchange", exchange, alerts)

    def on_alert(self, alert: Alert) -> None:
        self._each("on_alert", alert)

    def on_resolved(self, resolution: IncidentResolved) -> None:
        self._each("on_resolved", resolution)

    def on_reject(self, reason: str, detail: str) -> None:
        self._each("on_reject", reason, detail)

    def on_lead(self, lead: Lead) -> None:
        self._each("on_lead", lead)

    def set_state_size_source(self, fn: SizeSource) -> None:
        self._each("set_state_size_source", fn)

    def set_lag_source(self, fn: SizeSource) -> None:
        self._each("set_lag_source", fn)

    def set_behind_source(self, fn: Callable[[], float | None]) -> None:
        self._each("set_behind_source", fn)

    def close(self) -> None:
        """Closes every sink, even after one failed to close."""
        self._each("close")


def _power_of_ten(n: int) -> bool:
    while n % 10 == 0:
        n //= 10
    return n == 1
