"""The detection core composed for one process: dedup -> join -> route by cache domain -> domains.

The embedded runner feeds it one event at a time; the Faust workers compose the same stages
(Deduper, Joiner, DomainMonitor) across partitions instead. Time is the events' time only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

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
        self.counters: Counter[str] = Counter()
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
        if isinstance(event, (Request, Response)):
            self.joiner.check(event)
        if self.dedup.seen(event.event_id, event.ts):
            raise EventError("duplicate", f"event_id {event.event_id!r} was seen before")
        self.counters[_EVENT_KEYS[event.type]] += 1
        alerts: list[Alert] = []
        if event.ts >= self._next_advance:
            # Expiry needs no finer clock than a second of event time; checking it on every
            # event was a fifth of the core's cost.
            alerts += self.advance(event.ts)
            self._next_advance = event.ts + _ADVANCE_STEP_S
        if isinstance(event, Canary):
            self.canaries.register_event(event)
        elif isinstance(event, CacheStats):
            alerts += self.domain(event.cache_domain).observe_stats(event)
        else:
            for ex in self.joiner.observe(event, checked=True):
                alerts += self._route(ex)
        return self._count(alerts)

    def _route(self, ex: Exchange) -> list[Alert]:
        domain = ex.cache_domain
        if domain is None:
            # A request that never got a response and named no domain cannot be placed in any index.
            self.counters["exchanges.unroutable"] += 1
            return []
        self.counters["exchanges"] += 1
        if ex.orphan:
            self.counters[f"orphans.{ex.orphan}"] += 1
        alerts = self.domain(domain).observe_exchange(ex)
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
