"""The detection core composed for one process: dedup -> join -> route by cache domain -> domains.

The embedded runner feeds it one event at a time; the Faust workers compose the same stages
(Deduper, Joiner, DomainMonitor) across partitions instead. Time is the events' time only.
The core never calls the shell: what the shell hands to sinks (the evaluated exchanges, besides the
alerts) comes back as a return value, `Observed`.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from detectors.canaries import CanaryPolicy, CanaryRegistry
from detectors.dedup import Deduper
from detectors.domain import DomainMonitor
from detectors.fingerprint import Fingerprinter
from detectors.incidents import Incident
from detectors.join import Joiner
from detectors.public import PublicSet
from detectors.settings import DetectionSettings
from schemas.alert import Alert, IncidentResolved
from schemas.events import CacheStats, Canary, Event, EventError, Request, Response
from schemas.exchange import Exchange

Evaluated = list[tuple[Exchange, list[Alert]]]
_ADVANCE_STEP_S = 1.0
_NEG_INF = float("-inf")  # a constant: float("-inf") is a global lookup and a call, per routed exchange
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


# The glue between the stages, shared with the Kafka join and domain stages (streams/kafka/stages.py),
# which compose the same stages across partitions: one implementation, not copies kept in step by tests.


def admit(event: Event, joiner: Joiner, dedup: Deduper, policy: CanaryPolicy | None = None) -> dict[str, Any]:
    """Raise EventError (fingerprint_params, canary_tenant, duplicate) for what the core must not take,
    before any state change. `policy`: who may plant canaries (None: anyone; only for tests).

    Returns the event's fields (its __dict__, read-only), which the caller may dispatch on without
    reading them again."""
    # Fields read from the model's __dict__: a model's attribute reads are slow (Joiner.observe_request).
    # The dispatch is on the wire's type tag: isinstance() with a pydantic class that is not the event's
    # own goes through the metaclass's __instancecheck__, a call of its own (every request paid one).
    d = event.__dict__
    kind = d["type"]
    if kind == "response":
        if d["output_fingerprint"] is not None:
            joiner.check(event)  # type: ignore[arg-type]
    elif kind == "request":
        if d["prompt_fingerprint"] is not None:
            joiner.check(event)  # type: ignore[arg-type]
        if d["canaries"] and policy is not None:
            policy.check(event)  # type: ignore[arg-type]
    elif kind == "canary" and policy is not None:
        policy.check(event)  # type: ignore[arg-type]
    if dedup.seen(d["event_id"], d["ts"]):
        raise EventError("duplicate", f"event_id {event.event_id!r} was seen before")
    return d


def route_exchange(ex: Exchange, counters: Counter[str]) -> str | None:
    """The cache domain an exchange goes to (counted), or None: a request that never got a response and
    named no domain cannot be placed in any index."""
    return _route_fields(ex.__dict__, counters)


def _route_fields(d: dict[str, Any], counters: Counter[str]) -> str | None:
    """route_exchange on the exchange's fields (its __dict__: dict reads, not model attribute reads)."""
    # Exchange.cache_domain, inlined.
    half: Request | Response | None = d["response"] or d["request"]
    domain = half.cache_domain if half is not None else None
    if domain is None:
        counters["exchanges.unroutable"] += 1
        return None
    counters["exchanges"] += 1
    orphan = d["orphan"]
    if orphan:
        counters[f"orphans.{orphan}"] += 1
    return domain


def domain_of(domains: dict[str, DomainMonitor], cache_domain: str, settings: DetectionSettings) -> DomainMonitor:
    dm = domains.get(cache_domain)
    if dm is None:
        dm = domains[cache_domain] = DomainMonitor(cache_domain, settings)
    return dm


def count_alerts(counters: Counter[str], alerts: list[Alert]) -> list[Alert]:
    for a in alerts:
        counters[f"alerts.{a.kind}.{a.severity}"] += 1
    return alerts


class DomainTable:
    """The DomainMonitors of one process (or partition), bounded: a domain idle for `domain_idle_s` of
    event time expires, and beyond `max_domains` the least recently active one is evicted. Either way
    its buffered input is flushed first (`take_flushed()`), so no alert is lost, and it is counted
    (`domains.expired`, `domains.evicted`). Junk cache_domain values thus cost bounded memory."""

    def __init__(self, settings: DetectionSettings, counters: Counter[str], public: PublicSet | None = None) -> None:
        self.settings = settings
        self.counters = counters
        self.public = public  # the operator's public corpus: the process's, attached to every domain, never pickled
        self.domains: dict[str, DomainMonitor] = {}
        self._activity: OrderedDict[str, float] = OrderedDict()  # least recently active first
        self._flushed: list[Alert] = []

    def get(self, name: str, ts: float) -> DomainMonitor:
        """The domain's monitor (created on first use), marked active at event time `ts`."""
        dm = self.domains.get(name)
        if dm is None:
            while len(self.domains) >= self.settings.max_domains:
                self._drop(next(iter(self._activity)), "domains.evicted")
            dm = self.domains[name] = DomainMonitor(name, self.settings, self.public)
        activity = self._activity
        if activity.get(name, _NEG_INF) < ts:
            activity[name] = ts
        activity.move_to_end(name)
        return dm

    def expire(self, ts: float) -> None:
        horizon = ts - self.settings.domain_idle_s
        activity = self._activity
        while activity:
            name = next(iter(activity))
            if activity[name] >= horizon:
                break
            self._drop(name, "domains.expired")

    def _drop(self, name: str, counter: str) -> None:
        dm = self.domains.pop(name)
        del self._activity[name]
        self._flushed += dm.flush()
        self.counters[counter] += 1

    def drain_resolved(self, ts: float) -> list[IncidentResolved]:
        """Incidents resolved by event time `ts` since the last call (see Monitor.drain_resolved)."""
        out: list[IncidentResolved] = []
        for dm in self.domains.values():
            tracker = dm.incidents
            if tracker.open:
                tracker.advance(ts)
            if tracker.has_resolved:
                out += tracker.drain_resolved()
        return out

    def take_flushed(self) -> list[Alert]:
        """Alerts that dropped domains released; each returned once."""
        out, self._flushed = self._flushed, []
        return out


@dataclass(slots=True)
class Observed:
    """What one call into the monitor produced: the alerts it raised and each exchange it evaluated, with
    the alerts that exchange's evaluation released (maybe none; the same alerts are also in `alerts`)."""

    alerts: list[Alert] = field(default_factory=list)
    evaluated: Evaluated = field(default_factory=list)


class Monitor:
    # Class defaults: snapshots pickled before these existed restore judging every domain.
    owns: Callable[[str], bool] | None = None
    # With `owns`: where the exchanges of domains it does not judge go (None: nowhere; a replay job's are judged by
    # another job). The direct topology dead-letters them: such an exchange came to the wrong partition.
    unowned: list[Exchange] | None = None

    def __init__(
        self,
        settings: DetectionSettings,
        public: PublicSet | None = None,
        counters: Counter[str] | None = None,
        owns: Callable[[str], bool] | None = None,
    ) -> None:
        """`counters`: where to count (a Kafka worker passes its own, so one monitor per partition shows on
        its /counters and pickles the counters by name); by default the monitor's own.

        `owns`: which cache domains this monitor judges (None: all). A replay split into jobs by cache domain
        (`crosstalk replay --jobs`) gives each job every event, so that event time, joins, duplicates and
        canaries move exactly as in one process, and each job judges only its own domains."""
        self.settings = settings
        self.owns = owns
        self.fingerprinter = make_fingerprinter(settings)
        self.canaries = CanaryRegistry(self.fingerprinter, settings.max_canaries)
        self.canary_policy = CanaryPolicy(settings.canary_tenants)
        self.joiner = Joiner(settings, self.canaries)
        self.dedup = Deduper(settings.dedup_window, settings.dedup_window_s)
        self.counters: Counter[str] = _Counts() if counters is None else counters
        self.table = DomainTable(settings, self.counters, public)
        self.domains = self.table.domains
        self.watermark = float("-inf")
        self._next_advance = float("-inf")

    def domain(self, cache_domain: str, ts: float = float("-inf")) -> DomainMonitor:
        return self.table.get(cache_domain, ts)

    def observe_evaluated(self, event: Event) -> Observed:
        """`observe`, plus the exchanges the event completed or expired, for the shell's sinks."""
        evaluated: Evaluated = []
        return Observed(self._observe(event, evaluated), evaluated)

    def _observe(self, event: Event, evaluated: Evaluated | None = None) -> list[Alert]:
        """Feed one validated event. Raises EventError (duplicate, fingerprint_params) before any state change."""
        # admit(), inlined (a call less per event; keep the two alike, as the Kafka ingest stage calls admit):
        # the checks on the wire's type tag, then the dedup, before any state change.
        d = event.__dict__
        kind = d["type"]
        if kind == "response":
            if d["output_fingerprint"] is not None:
                self.joiner.check(event)  # type: ignore[arg-type]
        elif kind == "request":
            if d["prompt_fingerprint"] is not None:
                self.joiner.check(event)  # type: ignore[arg-type]
            if d["canaries"]:
                self.canary_policy.check(event)  # type: ignore[arg-type]
        elif kind == "canary":
            self.canary_policy.check(event)  # type: ignore[arg-type]
        ts = d["ts"]
        if self.dedup.seen(d["event_id"], ts):
            raise EventError("duplicate", f"event_id {event.event_id!r} was seen before")
        # One branch per type, most frequent first; each counts, steps event time, then does its work.
        if kind == "response":
            self.counters["events.response"] += 1
            alerts = self._step(ts, evaluated) if ts >= self._next_advance else []
            for ex in self.joiner.observe_response(event, d):  # type: ignore[arg-type]
                alerts += self._route(ex, evaluated)
        elif kind == "request":
            self.counters["events.request"] += 1
            alerts = self._step(ts, evaluated) if ts >= self._next_advance else []
            for ex in self.joiner.observe_request(event, d):  # type: ignore[arg-type]
                alerts += self._route(ex, evaluated)
        else:
            self.counters[_EVENT_KEYS[kind]] += 1
            alerts = self._step(ts, evaluated) if ts >= self._next_advance else []
            if kind == "cache_stats":
                assert isinstance(event, CacheStats)
                if self.owns is None or self.owns(d["cache_domain"]):
                    alerts += self.table.get(d["cache_domain"], ts).observe_stats(event)
            else:
                assert isinstance(event, Canary)
                self.canaries.register_event(event)
        if self.table._flushed:
            alerts += self.table.take_flushed()
        return self._count(alerts) if alerts else alerts

    def _step(self, ts: float, evaluated: Evaluated | None) -> list[Alert]:
        # Expiry needs no finer clock than a second of event time; checking it on every
        # event was a fifth of the core's cost.
        alerts = self._advance(ts, evaluated)
        self._next_advance = ts + _ADVANCE_STEP_S
        return alerts

    def _route(self, ex: Exchange, evaluated: Evaluated | None) -> list[Alert]:
        d = ex.__dict__  # route_exchange's own reads, and the time, from one read of the model's fields
        # _route_fields, inlined (a call less per exchange; keep the two alike).
        half: Request | Response | None = d["response"] or d["request"]
        domain = half.cache_domain if half is not None else None
        counters = self.counters
        if domain is None:
            counters["exchanges.unroutable"] += 1
            return []
        counters["exchanges"] += 1
        orphan = d["orphan"]
        if orphan:
            counters[f"orphans.{orphan}"] += 1
        if self.owns is not None and not self.owns(domain):
            # Another job's domain (`owns`): counted above as everywhere, judged there; or the direct topology's
            # exchange on the wrong partition (`unowned`).
            if self.unowned is not None:
                self.unowned.append(ex)
            return []
        # DomainTable.get, inlined for a known domain (a call less per exchange; keep the two alike).
        ts = d["ts"]
        table = self.table
        dm = table.domains.get(domain)
        if dm is None:
            dm = table.get(domain, ts)
        else:
            activity = table._activity
            if activity.get(domain, _NEG_INF) < ts:
                activity[domain] = ts
            activity.move_to_end(domain)
        # DomainMonitor.observe_exchange, inlined (a call less per exchange; keep the two alike): nothing buffered
        # and no lateness to wait for, so the exchange is evaluated at once (its fields handed over, not read again).
        alerts = dm._evaluate(ex, True, d) if not dm._buffer._heap and dm._lateness == 0 else dm.observe_exchange(ex)
        if evaluated is not None:
            evaluated.append((ex, alerts))
        return alerts

    # An alias rather than a wrapper: one call level less per event.
    observe = _observe

    def advance(self, ts: float) -> list[Alert]:
        """Move event time forward: expire joins (orphans) and let domains release buffered input."""
        return self._advance(ts, None)

    def _advance(self, ts: float, evaluated: Evaluated | None) -> list[Alert]:
        self.watermark = max(self.watermark, ts)
        alerts: list[Alert] = []
        for ex in self.joiner.advance(ts):
            alerts += self._route(ex, evaluated)
        for dm in self.domains.values():
            if dm.buffered:  # only buffered input waits for time; walking idle domains costs O(domains)
                alerts += dm.advance(ts)
        self.table.expire(ts)
        return alerts

    def flush(self) -> list[Alert]:
        """End of input: pending halves become orphans, buffers drain."""
        return self._flush(None)

    def flush_evaluated(self) -> Observed:
        """`flush`, plus the exchanges it evaluated (the orphans), for the shell's sinks."""
        evaluated: Evaluated = []
        return Observed(self._flush(evaluated), evaluated)

    def _flush(self, evaluated: Evaluated | None) -> list[Alert]:
        alerts: list[Alert] = []
        for ex in self.joiner.flush():
            alerts += self._route(ex, evaluated)
        for name in sorted(self.domains):
            alerts += self.domains[name].flush()
        alerts += self.table.take_flushed()
        return self._count(alerts)

    def _count(self, alerts: list[Alert]) -> list[Alert]:
        return count_alerts(self.counters, alerts)

    def drain_resolved(self, ts: float) -> list[IncidentResolved]:
        """Incidents resolved by event time `ts` since the last call, for the sinks' `on_resolved`.

        Domains with open incidents are advanced too, so a domain that went silent altogether still
        resolves its incident. O(domains): call it about once per second of event time, not per event.
        """
        return self.table.drain_resolved(ts)

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
        size["domains_dropped"] = self.counters["domains.expired"] + self.counters["domains.evicted"]
        return dict(size)
