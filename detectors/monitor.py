"""The detection core for one process: its two halves, `Front` (admit -> join, detectors/front.py) and `Back`
(route by cache domain -> domains -> alerts, detectors/back.py), composed with event time.

The embedded runner and the direct Kafka stage feed it one event at a time; the staged Kafka topology runs the same
two halves across partitions (its join stage a Front, its domain stage a Back). Time is the events' time only.
The core never calls the shell: what the shell hands to sinks (the evaluated exchanges, besides the
alerts) comes back as a return value, `Observed`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from detectors.back import Back, DomainTable, Evaluated, count_alerts
from detectors.canaries import CanaryPolicy, CanaryRegistry
from detectors.dedup import Deduper
from detectors.domain import DomainMonitor
from detectors.fingerprint import Fingerprinter
from detectors.front import Front, in_process
from detectors.incidents import Incident
from detectors.join import Joiner
from detectors.public import PublicSet
from detectors.session_prints import SessionPrints
from detectors.settings import DetectionSettings
from schemas.alert import Alert, IncidentResolved, Lead
from schemas.events import Event, Request
from schemas.exchange import Exchange, TextFingerprint

_ADVANCE_STEP_S = 1.0


class _Counts(Counter[str]):
    """A Counter whose `c[key] += 1` runs at plain-dict speed; the monitor counts twice per event.

    Counter defines __delitem__ in Python, and CPython then routes every item store through a
    Python-level slot too (twice the cost of a dict's). Taking dict's own __delitem__ back restores
    the C slot; the one difference is that deleting a missing key raises KeyError, as for a dict.
    """

    __delitem__ = dict.__delitem__  # type: ignore[assignment]


def make_fingerprinter(settings: DetectionSettings) -> Fingerprinter:
    return Fingerprinter(settings.fingerprint_key, settings.k, settings.w, sentences=settings.overlap_whole_sentences)


@dataclass(slots=True)
class Observed:
    """What one call into the monitor produced: the alerts it raised and each exchange it evaluated, with
    the alerts that exchange's evaluation released (maybe none; the same alerts are also in `alerts`)."""

    alerts: list[Alert] = field(default_factory=list)
    evaluated: Evaluated = field(default_factory=list)
    # Incidents resolved by the event's time, at the core's own cadence (`Back.resolved_due`), for `on_resolved`.
    resolved: list[IncidentResolved] = field(default_factory=list)


class Monitor:
    """The core for one process: a `Front` (admit -> join) and a `Back` (route -> domains -> alerts), with event
    time stepped once per second of it (orphans expire, buffered domains release, idle domains expire)."""

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
        self.fingerprinter = make_fingerprinter(settings)
        self.canaries = CanaryRegistry(self.fingerprinter, settings.max_canaries)
        self.canary_policy = CanaryPolicy(settings.canary_tenants)
        self.joiner = Joiner(settings, self.canaries)
        self.dedup = Deduper(settings.dedup_window, settings.dedup_window_s)
        self.counters: Counter[str] = _Counts() if counters is None else counters
        self.table = DomainTable(settings, self.counters, public)
        self.domains = self.table.domains
        self.front = Front(self.joiner, self.dedup, self.canary_policy, self.counters, in_process(self.joiner))
        self.back = Back(self.table, owns)
        self.watermark = float("-inf")
        self._next_advance = float("-inf")

    # Which domains it judges, and where others' exchanges go: the back's (`Back`), set by the direct stage per read.
    @property
    def owns(self) -> Callable[[str], bool] | None:
        return self.back.owns

    @owns.setter
    def owns(self, owns: Callable[[str], bool] | None) -> None:
        self.back.owns = owns

    @property
    def unowned(self) -> list[Exchange] | None:
        return self.back.unowned

    @unowned.setter
    def unowned(self, unowned: list[Exchange] | None) -> None:
        self.back.unowned = unowned

    def domain(self, cache_domain: str, ts: float = float("-inf")) -> DomainMonitor:
        return self.table.get(cache_domain, ts)

    def observe_evaluated(self, event: Event) -> Observed:
        """`observe`, plus the exchanges judged on the way (each with the alerts it raised) and the incidents resolved
        by its time (checked once per second of event time: the cadence lives here, not in each runner), for the
        shell. An exchange is judged once event time has passed it: by a later call, a tick or the flush."""
        table = self.table
        if table.evaluated is None:
            table.record_evaluated()
        alerts = self._observe(event)
        ts, back = event.ts, self.back
        return Observed(alerts, table.take_evaluated(), back.resolved_due(ts) if ts >= back.next_resolved else [])

    def _observe(self, event: Event) -> list[Alert]:
        """Feed one validated event. Raises EventError (duplicate, fingerprint_params) before any state change."""
        front = self.front
        front.admit(event)
        ts = event.ts
        alerts = self._step(ts) if ts >= self._next_advance else []
        back = self.back
        for ex in front.join(event):  # counts every event; cache stats complete no exchange
            alerts += back.route(ex)
        if event.type == "cache_stats":
            alerts += back.stats(event)
        if self.table._flushed:
            alerts += self.table.take_flushed()
        return count_alerts(self.counters, alerts) if alerts else alerts

    def _step(self, ts: float) -> list[Alert]:
        # Expiry needs no finer clock than a second of event time; checking it on every
        # event was a fifth of the core's cost.
        alerts = self._advance(ts)
        self._next_advance = ts + _ADVANCE_STEP_S
        return alerts

    # An alias rather than a wrapper: one call level less per event.
    observe = _observe

    def advance(self, ts: float) -> list[Alert]:
        """Move event time forward: expire joins (orphans) and let domains release buffered input."""
        return self._advance(ts)

    def _advance(self, ts: float) -> list[Alert]:
        self.watermark = max(self.watermark, ts)
        alerts: list[Alert] = []
        for ex in self.front.advance(ts):
            alerts += self.back.route(ex)
        return alerts + self.back.advance(ts)

    def tick(self, now: float) -> list[Alert]:
        """A live runner's clock, passed in (the core reads none): the exchanges waiting for a later instant are
        judged, and, if the input is live (`Back.mature`), the held findings that waited `overlap_hold_s` by `now`,
        so a cold domain's finding comes out when no event follows it (issue 40). Event time does not move: an event
        older than `now` arriving later is judged as before."""
        alerts = self.back.mature(now, self.watermark)
        if self.table._flushed:  # and what a late digest of another partition found (detectors/fleet_mixup.py)
            alerts += self.table.take_flushed()
        return count_alerts(self.counters, alerts) if alerts else alerts

    def tick_evaluated(self, now: float) -> Observed:
        """`tick`, plus the exchanges it judged, for the shell's sinks."""
        self.table.record_evaluated()
        alerts = self.tick(now)
        return Observed(alerts, self.table.take_evaluated())

    def flush(self) -> list[Alert]:
        """End of input: pending halves become orphans, buffers drain."""
        alerts: list[Alert] = []
        for ex in self.front.flush():
            alerts += self.back.route(ex)
        return count_alerts(self.counters, alerts + self.back.flush())

    def flush_evaluated(self) -> Observed:
        """`flush`, plus the exchanges it judged (the orphans, and what waited for event time), for the sinks."""
        self.table.record_evaluated()
        alerts = self.flush()
        return Observed(alerts, self.table.take_evaluated())

    def drain_resolved(self, ts: float) -> list[IncidentResolved]:
        """Incidents resolved by event time `ts` since the last call, for the sinks' `on_resolved`.

        Domains with open incidents are advanced too, so a domain that went silent altogether still
        resolves its incident. O(domains): call it about once per second of event time (`resolved_due`).
        """
        return self.table.drain_resolved(ts)

    def resolved_due(self, ts: float) -> list[IncidentResolved]:
        """`drain_resolved`, at most once per second of event time: what a runner calls per event."""
        return self.back.resolved_due(ts)

    def record_leads(self) -> None:
        """From now on, keep what every domain judges below an alert (`Lead`) for `take_leads`: a replay's leads file
        and the evaluation's account of its misses. Off by default: nobody else drains them."""
        if self.table.leads is None:
            self.table.leads = []
            for dm in self.table.domains.values():
                dm.leads = self.table.leads

    def take_leads(self) -> list[Lead]:
        """The leads kept since the last call, in the order they were judged (none unless `record_leads`)."""
        leads = self.table.leads
        if not leads:
            return []
        out = list(leads)
        leads.clear()  # in place: every domain holds this list
        return out

    def take_request(self, request_id: str) -> tuple[Request, TextFingerprint | None] | None:
        """The waiting request half of `request_id`, taken out (`Joiner.take_request`): the direct topology sends it
        on with its response when both came to another domain's partition."""
        return self.joiner.take_request(request_id)

    def incidents(self) -> list[Incident]:
        out = [inc for dm in self.domains.values() for inc in dm.incidents.all()]
        return sorted(out, key=lambda i: (i.first_ts, i.incident_id))

    @property
    def sessions(self) -> SessionPrints | None:
        """The session cache its ingest step fingerprints prompts through."""
        return None if self.front.ingest is None else self.front.ingest.sessions

    def share_sessions(self, sessions: SessionPrints) -> None:
        """Fingerprint sessions through `sessions` from now on: a Kafka worker gives every partition's monitor, fresh
        or restored, the process's one cache, so that `session_cache_prints` bounds the process and not each
        partition (a cache: nothing is lost but a full pass per session)."""
        assert self.front.ingest is not None
        self.front.ingest.sessions = sessions

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
