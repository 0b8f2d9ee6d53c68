"""The detection core composed for one process: dedup -> join -> route by cache domain -> domains.

The embedded runner feeds it one event at a time; the Faust workers compose the same stages
(Deduper, Joiner, DomainMonitor) across partitions instead. Time is the events' time only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from detectors.canaries import CanaryRegistry
from detectors.dedup import Deduper
from detectors.domain import DomainMonitor
from detectors.exchange import Exchange
from detectors.fingerprint import Fingerprinter
from detectors.incidents import Incident
from detectors.join import Joiner
from detectors.settings import DetectionSettings
from schemas.alert import Alert
from schemas.events import CacheStats, Canary, Event, EventError, Request, Response

ExchangeHook = Callable[[Exchange, list[Alert]], None]
_ADVANCE_STEP_S = 1.0
_EVENT_KEYS = {t: f"events.{t}" for t in ("request", "response", "cache_stats", "canary")}


class _Counts(Counter[str]):
    """A Counter whose `c[key] += 1` runs at plain-dict speed; the monitor counts twice per event.

    Counter defines __delitem__ in Python, and CPython then routes every item store through a
    Python-level slot too (twice the cost of a dict's). Taking dict's own __delitem__ back restores
    the C slot; the one difference is that deleting a missing key raises KeyError, as for a dict.
    """

    __delitem__ = dict.__delitem__  # type: ignore[assignment]


def make_fingerprinter(settings: DetectionSettings) -> Fingerprinter:
    return Fingerprinter(settings.fingerprint_key, settings.k, settings.w)


class Monitor:
    def __init__(self, settings: DetectionSettings, on_exchange: ExchangeHook | None = None) -> None:
        self.settings = settings
        self.fingerprinter = make_fingerprinter(settings)
        self.canaries = CanaryRegistry(self.fingerprinter)
        self.joiner = Joiner(settings, self.canaries)
        self.dedup = Deduper(settings.dedup_window, settings.dedup_window_s)
        self.domains: dict[str, DomainMonitor] = {}
        self.counters: Counter[str] = _Counts()
        self.watermark = float("-inf")
        self._next_advance = float("-inf")
        self._on_exchange = on_exchange

    def domain(self, cache_domain: str) -> DomainMonitor:
        dm = self.domains.get(cache_domain)
        if dm is None:
            dm = self.domains[cache_domain] = DomainMonitor(cache_domain, self.settings)
        return dm

    def observe(self, event: Event) -> list[Alert]:
        """Feed one validated event. Raises EventError (duplicate, fingerprint_params) before any state change."""
        # One type test per event, and check() only where there is a fingerprint for it to check:
        # on text-free traffic this per-event overhead is most of the core's cost.
        join: Callable[[Any], list[Exchange]] | None
        if isinstance(event, Response):
            if event.output_fingerprint is not None:
                self.joiner.check(event)
            join = self.joiner.observe_response
            key = "events.response"
        elif isinstance(event, Request):
            if event.prompt_fingerprint is not None:
                self.joiner.check(event)
            join = self.joiner.observe_request
            key = "events.request"
        else:
            join = None
            key = _EVENT_KEYS[event.type]
        ts = event.ts
        if self.dedup.seen(event.event_id, ts):
            raise EventError("duplicate", f"event_id {event.event_id!r} was seen before")
        self.counters[key] += 1
        if ts >= self._next_advance:
            # Expiry needs no finer clock than a second of event time; checking it on every
            # event was a fifth of the core's cost.
            alerts = self.advance(ts)
            self._next_advance = ts + _ADVANCE_STEP_S
        else:
            alerts = []
        if join is not None:
            for ex in join(event):
                alerts += self._route(ex)
        elif isinstance(event, CacheStats):
            alerts += self.domain(event.cache_domain).observe_stats(event)
        else:
            assert isinstance(event, Canary)
            self.canaries.register_event(event)
        return self._count(alerts) if alerts else alerts

    def _route(self, ex: Exchange) -> list[Alert]:
        domain = ex.cache_domain
        if domain is None:
            # A request that never got a response and named no domain cannot be placed in any index.
            self.counters["exchanges.unroutable"] += 1
            return []
        self.counters["exchanges"] += 1
        if ex.orphan:
            self.counters[f"orphans.{ex.orphan}"] += 1
        dm = self.domains.get(domain)
        alerts = (dm if dm is not None else self.domain(domain)).observe_exchange(ex)
        if self._on_exchange is not None:
            self._on_exchange(ex, alerts)
        return alerts

    def advance(self, ts: float) -> list[Alert]:
        """Move event time forward: expire joins (orphans) and let domains release buffered input."""
        self.watermark = max(self.watermark, ts)
        alerts: list[Alert] = []
        for ex in self.joiner.advance(ts):
            alerts += self._route(ex)
        for dm in self.domains.values():
            if dm.buffered:  # only buffered input waits for time; walking idle domains costs O(domains)
                alerts += dm.advance(ts)
        return alerts

    def flush(self) -> list[Alert]:
        """End of input: pending halves become orphans, buffers drain."""
        alerts: list[Alert] = []
        for ex in self.joiner.flush():
            alerts += self._route(ex)
        for name in sorted(self.domains):
            alerts += self.domains[name].flush()
        return self._count(alerts)

    def _count(self, alerts: list[Alert]) -> list[Alert]:
        for a in alerts:
            self.counters[f"alerts.{a.kind}.{a.severity}"] += 1
        return alerts

    def incidents(self) -> list[Incident]:
        out = [inc for dm in self.domains.values() for inc in dm.incidents.all()]
        return sorted(out, key=lambda i: (i.first_ts, i.incident_id))

    def state_size(self) -> dict[str, int]:
        size: Counter[str] = Counter(
            {
                "pending_joins": self.joiner.state_size(),
                "dedup_ids": self.dedup.state_size(),
                "canaries": self.canaries.state_size(),
            }
        )
        for dm in self.domains.values():
            size.update(dm.state_size())
        size["domains"] = len(self.domains)
        return dict(size)
