"""The core's second half, composed once: route by cache domain -> domains behind event time -> alerts and resolutions.

Every runner hands its exchanges to a `Back`: the embedded Monitor and the direct Kafka stage (through the Monitor),
and the staged topology's domain stage (over the partition's own DomainTable, with exchanges its join stage routed).
The resolve cadence (incidents resolve in event time, checked once per second of it) lives here once.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

from detectors.domain import DomainMonitor
from detectors.fleet import Digest, Fleet, digest_of
from detectors.public import PublicSet
from detectors.settings import DetectionSettings
from schemas.alert import Alert, IncidentResolved, Lead
from schemas.events import CacheStats, Request, Response
from schemas.exchange import Exchange

Evaluated = list[tuple[Exchange, list[Alert]]]
RESOLVE_STEP_S = 1.0  # incidents resolve in event time; once per second of it is soon enough
_NEG_INF = float("-inf")  # a constant: float("-inf") is a global lookup and a call, per routed exchange


def route_exchange(ex: Exchange, counters: Counter[str]) -> str | None:
    """The cache domain an exchange goes to (counted), or None: a request that never got a response and
    named no domain cannot be placed in any index."""
    # Exchange.cache_domain, inlined.
    half: Request | Response | None = ex.response or ex.request
    domain = half.cache_domain if half is not None else None
    if domain is None:
        counters["exchanges.unroutable"] += 1
        return None
    counters["exchanges"] += 1
    orphan = ex.orphan
    if orphan:
        counters[f"orphans.{orphan}"] += 1
    return domain


def count_alerts(counters: Counter[str], alerts: list[Alert]) -> list[Alert]:
    for a in alerts:
        counters[f"alerts.{a.kind}.{a.severity}"] += 1
    return alerts


def new_holds(domains: dict[str, DomainMonitor], seen: dict[str, int]) -> list[tuple[str, int, int, int]]:
    """(domain, findings held since `seen`, waiting now, held in all) per domain that held any since; `seen` (domain
    -> holds counted so far) is updated. For a runner that reports each hold once (its log); O(domains)."""
    out = []
    for name, dm in domains.items():
        total = dm.held_counts["held"]
        new = total - seen.get(name, 0)
        if new > 0:
            seen[name] = total
            out.append((name, new, dm.holding, total))
    return out


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
        # What the model writes, over every domain this table judges and those it only hears of (detectors/fleet.py).
        self.fleet = Fleet(settings)
        self.fleet.public = public
        self.leads: list[Lead] | None = None  # what every domain judged below an alert, when asked (never pickled)
        self.evaluated: Evaluated | None = None  # each exchange judged, with its alerts, when asked (never pickled)
        # The domains holding input of the newest instant handed to them (`instant`), judged once a later one comes
        # (`Back.settle`): two exchanges of one instant are judged in one order whatever order they came in.
        self.waiting: dict[str, DomainMonitor] = {}
        self.instant = _NEG_INF
        # Digests of the exchanges this table judged, for a runner that tells other tables (a Kafka partition's); None:
        # nobody listens.
        self.told: list[Digest] | None = None

    def __setstate__(self, state: dict[str, Any]) -> None:
        here = state.pop("fleet_here", None)
        self.__dict__.update(state)
        if self.__dict__.get("fleet") is None:  # never in its snapshot: it starts empty, and its runner refills it
            self.fleet = Fleet(self.settings)
            self.fleet.public = self.__dict__.get("public")
            if here and self.fleet.mixups is not None:
                self.fleet.mixups.restore_here(here)  # what it judged: it raises the mix-ups found on them once heard
        self.__dict__.setdefault("told", None)
        self.__dict__.setdefault("leads", None)
        self.__dict__.setdefault("evaluated", None)
        self.__dict__.setdefault("waiting", {})
        self.__dict__.setdefault("instant", _NEG_INF)
        for dm in self.domains.values():  # each domain's overlap detector reads the table's record
            dm.overlap.fleet = self.fleet

    def __getstate__(self) -> dict[str, Any]:
        # The fleet record would be most of a partition's snapshot, copied at every checkpoint: a Kafka partition
        # rebuilds it from what its worker heard (streams/kafka/fleet.py). `told` is the runner's.
        # What it judged lately is kept: the digests come back from the fleet topic, and the mix-ups found on them
        # are still this table's to raise.
        mixups = self.fleet.mixups
        here = mixups.here() if mixups is not None else {}
        return self.__dict__ | {"told": None, "fleet": None, "fleet_here": here, "leads": None, "evaluated": None}

    def hear(self, ex: Exchange) -> Digest | None:
        """An exchange of the fleet that another table judges (a replay job's): only the fleet record learns it, in its
        time. Returns its digest (None: the record is off, or the exchange carries no prints)."""
        if not self.settings.common_min_sessions:
            return None
        d = digest_of(ex)
        if d is not None:
            self.fleet.push(d)
        return d

    def judged(self, ex: Exchange) -> None:
        """An exchange one of its domains judged (or buffered to judge): learned as one heard, and noted for a runner
        that tells other tables (`told`)."""
        d = self.hear(ex)
        if d is not None:
            if self.fleet.mixups is not None:
                self.fleet.mixups.judged_here(d)  # this table raises what the fleet finds on it
            if self.told is not None:
                self.told.append(d)

    def get(self, name: str, ts: float) -> DomainMonitor:
        """The domain's monitor (created on first use), marked active at event time `ts`."""
        dm = self.domains.get(name) or self._create(name)
        self.advance_fleet(ts)
        self._active(name, ts)
        return dm

    def _create(self, name: str) -> DomainMonitor:
        while len(self.domains) >= self.settings.max_domains:
            self._drop(next(iter(self._activity)), "domains.evicted")
        dm = self.domains[name] = DomainMonitor(name, self.settings, self.public)
        dm.overlap.fleet = self.fleet
        if self.leads is not None:
            dm.leads = self.leads
        if self.evaluated is not None:
            dm.evaluated = self.evaluated
        return dm

    def _active(self, name: str, ts: float) -> None:
        activity = self._activity
        if activity.get(name, _NEG_INF) < ts:
            activity[name] = ts
        activity.move_to_end(name)

    def advance_fleet(self, ts: float) -> None:
        """The fleet record to event time `ts`, and the mix-ups across domains it found there raised for the receivers
        this table judged (detectors/fleet_mixup.py); the others' tables raise theirs. The alerts go out with the
        flushed ones (`take_flushed`), in every runner."""
        fleet = self.fleet
        fleet.advance(ts)
        mixups = fleet.mixups
        if mixups is None or not mixups.found:
            return
        for domain, leaked, sig in mixups.take():
            if not mixups.was_judged_here(leaked.request_id):
                continue  # judged by another table (another job, another partition), which found it too
            dm = self.domains.get(domain)
            if dm is None:  # gone idle since (a digest heard late): a fresh monitor raises it in its name
                dm = self._create(domain)
                self._active(domain, ts)
            alert = dm.late_mixup(leaked, sig, ts)
            if alert is not None:
                self.counters["fleet.mixups"] += 1
                self._flushed.append(alert)

    def drain_fleet(self) -> None:
        """Mix-ups found by digests learned as they came (heard after their time: `fleet.late`), raised at the table's
        event time; a runner calls it after handing the table what others told (streams/kafka/fleet.py `deliver`)."""
        fleet = self.fleet
        fleet.settle()
        if fleet.mixups is not None and fleet.mixups.found:
            self.advance_fleet(fleet.learned_until + fleet.delay_s)

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
        self.waiting.pop(name, None)
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

    def record_evaluated(self) -> None:
        """From now on, keep each exchange judged, with the alerts it raised, for `take_evaluated`."""
        if self.evaluated is None:
            self.evaluated = []
            for dm in self.domains.values():
                dm.evaluated = self.evaluated

    def take_evaluated(self) -> Evaluated:
        """The exchanges judged since the last call, each with the alerts its judging raised, in the order judged
        (none unless `record_evaluated`)."""
        evaluated = self.evaluated
        if not evaluated:
            return []
        out = list(evaluated)
        evaluated.clear()  # in place: every domain holds this list
        return out


class Back:
    """route -> DomainMonitors (one table: a process's, or one domain partition's) -> alerts, and the resolutions.

    `owns`: which cache domains this back judges (None: all; `crosstalk replay --jobs`, the direct topology's
    partition). `unowned`: where exchanges of other domains go (None: nowhere; a replay job's are judged by another
    job; the direct topology dead-letters them: they came to the wrong partition)."""

    def __init__(self, table: DomainTable, owns: Callable[[str], bool] | None = None) -> None:
        self.table = table
        self.counters = table.counters
        self.owns = owns
        self.unowned: list[Exchange] | None = None
        self.next_resolved = _NEG_INF

    def route(self, ex: Exchange) -> list[Alert]:
        """An exchange to its cache domain (counted; `route_exchange`), judged there if this back owns it."""
        domain = route_exchange(ex, self.counters)
        if domain is None:
            return []
        owns = self.owns
        if owns is not None and not owns(domain):
            # Its instant settles this back's domains as it would in one process (`replay --jobs`: the same alerts
            # at the same input line).
            alerts = self._arrive(ex.ts) if ex.ts > self.table.instant else []
            if self.unowned is not None:
                self.unowned.append(ex)
            self.table.hear(ex)  # in input order, as the table that judges it learns it
            return alerts
        return self.exchange(domain, ex)

    def exchange(self, domain: str, ex: Exchange) -> list[Alert]:
        """An exchange already routed to `domain`, handed to its DomainMonitor, which judges it once event time has
        passed it; returns the alerts of what that released (`DomainTable.take_evaluated`: which exchange raised
        which)."""
        table = self.table
        ts = ex.ts
        alerts = self._arrive(ts) if ts > table.instant else []
        dm = table.get(domain, ts)
        alerts += dm.observe_exchange(ex)
        if dm.waits_for_instant:
            table.waiting[domain] = dm
        table.judged(ex)
        return alerts

    def stats(self, ev: CacheStats) -> list[Alert]:
        """Cache stats to their domain's monitor, if this back owns the domain."""
        domain, table, ts = ev.cache_domain, self.table, ev.ts
        alerts = self._arrive(ts) if ts > table.instant else []
        if self.owns is not None and not self.owns(domain):
            return alerts
        dm = table.get(domain, ts)
        alerts += dm.observe_stats(ev)
        if dm.waits_for_instant:
            table.waiting[domain] = dm
        return alerts

    def _arrive(self, ts: float) -> list[Alert]:
        """A later instant than any handed to the domains came: what they hold of the one before is judged."""
        table = self.table
        table.instant = ts
        return self.settle() if table.waiting else []

    def settle(self, failed: list[tuple[str, Exception]] | None = None) -> list[Alert]:
        """Judge what the domains hold of the newest instant: a later one came (`exchange`, `advance`), a watermark
        says all of it came (the staged domain stage), a live runner's tick, or the end of input. Before the fleet
        record moves past it: an exchange is judged with the record at its own time, as if judged on arrival.
        The domains in name order, each in order_key order: no arrival order is left in it (ADR 0011, stop 67).
        `failed` as in `advance`."""
        waiting = self.table.waiting
        alerts: list[Alert] = []
        for name in sorted(waiting) if len(waiting) > 1 else list(waiting):
            dm = waiting[name]
            alerts += _advance_one(name, dm, dm.watermark, True, failed)
            del waiting[name]
        return alerts

    def advance(
        self,
        ts: float,
        resolved: list[IncidentResolved] | None = None,
        failed: list[tuple[str, Exception]] | None = None,
        complete: bool = False,
    ) -> list[Alert]:
        """Event time moved to `ts`: domains release their buffered input and judge the held findings due; idle
        domains expire. The one way a domain's time moves, in every runner (the staged domain stage on its watermark).

        `resolved`: gets the incidents resolved by `ts`, drained before expiry (a domain that went silent still
        resolves its incidents). `failed`: a domain whose advance raises is recorded here and the others go on (a
        Kafka partition must not stop on one domain's bug); None: it raises. `complete`: `ts` is a watermark (every
        item up to it has come), so the items of that instant are judged too (`DomainMonitor.advance`)."""
        table = self.table
        alerts = self.settle(failed) if table.waiting and (complete or ts > table.instant) else []
        self.table.advance_fleet(ts)  # before held findings are judged again: they read it
        broken = {name for name, _ in failed} if failed else ()  # failed in settle: recorded once
        for name, dm in list(self.table.domains.items()):
            # Only buffered input and held findings wait for time; walking idle domains costs O(domains).
            if (dm.buffered or dm.holding) and name not in broken:
                alerts += _advance_one(name, dm, ts, complete, failed)
        if resolved is not None:
            resolved += self.table.drain_resolved(ts)
        self.table.expire(ts)
        return alerts

    def mature(self, now: float, newest: float) -> list[Alert]:
        """A live runner's clock, passed in (the OTLP receiver, a Kafka worker); moves no event time.

        What the domains hold of the newest instant is judged (`settle`): what came with it came by this tick, so a
        leak does not wait for the next request. Then the held findings that waited `overlap_hold_s` by `now`, so
        that a finding comes out when no event follows it. `newest`: the newest event time seen. Only live input
        has its held findings judged by the clock: input whose newest event is more than twice `overlap_hold_s`
        behind it (a replay of an old log through a live runner) is judged by event time, as in a replay, not all
        at once before the domain has learned what follows."""
        alerts = self.settle() if self.table.waiting else []
        if now - newest > 2 * self.table.settings.overlap_hold_s:
            return alerts
        for dm in self.table.domains.values():
            if dm.holding:
                alerts += dm.mature(now)
        return alerts

    def flush(self) -> list[Alert]:
        """End of input: every domain's buffered input and held findings are judged, in domain order."""
        alerts = self.settle() if self.table.waiting else []
        domains = self.table.domains
        for name in sorted(domains):
            alerts += domains[name].flush()
        return alerts + self.table.take_flushed()

    def resolved_due(self, ts: float) -> list[IncidentResolved]:
        """Incidents resolved by event time `ts`, checked at most once per `RESOLVE_STEP_S` of it (O(domains))."""
        if ts < self.next_resolved:
            return []
        self.next_resolved = ts + RESOLVE_STEP_S
        return self.table.drain_resolved(ts)


def _advance_one(
    name: str, dm: DomainMonitor, ts: float, complete: bool, failed: list[tuple[str, Exception]] | None
) -> list[Alert]:
    if failed is None:
        return dm.advance(ts, complete)
    try:
        return dm.advance(ts, complete)
    except Exception as exc:  # its held items are lost to this domain, not to the others
        failed.append((name, exc))
        return []
