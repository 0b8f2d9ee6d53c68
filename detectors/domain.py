"""Everything crosstalk knows about one cache domain, fed in event-time order: cache_stats -> capacity and pressure;
Exchange -> signals -> one verdict -> incidents. Embedded or in a Faust table."""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

from detectors.held import Held, held_receivers
from detectors.incidents import IncidentTracker, proves
from detectors.mixup import Delivery, MixupLedger
from detectors.mixup_verdict import apply, as_held, innocent_of, mixup_clause, named_by
from detectors.plan import Plan
from detectors.public import PublicSet
from detectors.reorder import EventTimeBuffer, order_key
from detectors.settings import DetectionSettings
from detectors.signals import registry
from detectors.signals.base import Detector, Piece
from detectors.signals.capacity import CapacityTracker
from detectors.signals.overlap import OverlapDetector
from detectors.verdict import (
    across_senders,
    alert_id,
    capacity_alert,
    corroborate,
    kind_of,
    score_of,
    severity_of,
    source_of,
)
from schemas.alert import SEVERITY_RANK, Alert, Lead, Signal
from schemas.events import CacheStats
from schemas.exchange import Exchange
from schemas.timefmt import format_ts

Item = CacheStats | Exchange


class DomainMonitor:
    # What the core judged below an alert, when the shell asks for it (`Monitor.record_leads`): a list the process
    # shares and drains, never pickled; None (the class's) records nothing.
    leads: list[Lead] | None = None
    # Each exchange judged, with the alerts its judging raised, for the shell's sinks (`Monitor.observe_evaluated`):
    # the same kind of shared list as `leads`. The exchange is judged after the call that brought it (`_push`).
    evaluated: list[tuple[Exchange, list[Alert]]] | None = None

    def __init__(self, cache_domain: str, settings: DetectionSettings, public: PublicSet | None = None) -> None:
        self.cache_domain = cache_domain
        self.s = settings
        self.capacity = CapacityTracker(settings.index_window_s)
        self.held_counts: Counter[str] = Counter()  # cold-domain findings held, raised, dismissed (cumulative)
        # Every registered per-exchange detector, in evidence order; overlap is also kept by name (index, learn).
        self.detectors: dict[str, Detector] = {reg.name: reg.make(settings) for reg in registry.registered()}
        self.overlap = self._overlap()
        self.overlap.public = public
        self._plan: Plan | None = None
        self.incidents = IncidentTracker.of(settings)
        self._buffer: EventTimeBuffer[Item] = EventTimeBuffer()
        self.watermark = float("-inf")
        self.exchanges = 0
        self.mixup = MixupLedger()  # recent deliveries: whole responses handed to another tenant

    # The settings, with the lateness read per item copied to a plain attribute (a settings model's attribute
    # read is slow). Setting them refreshes the copy; a snapshot holds `s` only, as before the copy existed.
    @property
    def s(self) -> DetectionSettings:
        return self._s

    @s.setter
    def s(self, settings: DetectionSettings) -> None:
        self._s = settings
        self._lateness = settings.domain_lateness_s

    # --- input -------------------------------------------------------------------------------
    def observe_stats(self, ev: CacheStats) -> list[Alert]:
        return self._push(ev)

    def _stats(self, ev: CacheStats) -> list[Alert]:
        capacity = self.capacity
        capacity.observe_stats(ev)
        gap = capacity.gap()
        return [capacity_alert(self.cache_domain, self.incidents, gap, ev.ts, ev.traceparent)] if gap else []

    def observe_exchange(self, ex: Exchange) -> list[Alert]:
        """Buffer an exchange until event time passes it (`advance`), and judge what that releases."""
        return self._push(ex)

    def advance(self, ts: float, complete: bool = False) -> list[Alert]:
        """Event time moved to `ts` (any event of the process, not only this domain's): buffered input before
        `ts - domain_lateness_s` is released, and held findings that waited `overlap_hold_s` are judged (issue 40:
        not only on its own next exchange). `complete`: every item up to that time has come (a watermark, or a live
        runner's tick), so the items of that very instant are released too."""
        if ts > self.watermark:
            self.watermark = ts
        upto = self.watermark - self._lateness
        alerts = self._release(upto, complete)
        return alerts + self.mature(self.watermark) if self.overlap.held else alerts

    def mature(self, ts: float) -> list[Alert]:
        """The held findings that have waited `overlap_hold_s` by `ts`, judged. A runner on the wall clock passes
        its clock here (`Monitor.tick`), so a finding comes out with no further input; the core reads no clock."""
        held = self.overlap.held
        return self._mature(ts) if held and ts - held[0].ts >= self.s.overlap_hold_s else []

    @property
    def holding(self) -> int:
        """Findings held while the domain was cold, waiting to be judged (detectors/held.py)."""
        return len(self.overlap.held)

    def flush(self) -> list[Alert]:
        """End of input (or the domain dropped): buffered items are judged, then every held finding."""
        alerts = self._release(float("inf"))
        held = self.overlap.held
        if held:
            receivers, ts = held_receivers(held), max(self.watermark, held[-1].ts)
            while held:
                alerts += self._judge_oldest(ts, receivers)
        return alerts

    def _push(self, item: Item) -> list[Alert]:
        # Never judged at once, even in order with no lateness: another item of the same instant may follow, and
        # ties are judged in order_key order in every runner (ADR 0011, stop 67). It waits for the next later
        # instant of the process (this domain's next item, or `Monitor`'s step of time), a live runner's tick, or
        # the end of input.
        self._buffer.push(order_key(item), item)
        return self.advance(item.ts)

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    @property
    def waits_for_instant(self) -> bool:
        """It holds items that only a later instant releases (`Back.settle`); with a lateness its own advance does."""
        return self._lateness == 0 and bool(self._buffer._heap)

    def _release(self, upto: float, complete: bool = True) -> list[Alert]:
        out: list[Alert] = []
        for item in self._buffer.release(upto) if complete else self._buffer.release_before(upto):
            out.extend(self._process(item))
        return out

    # --- evaluation --------------------------------------------------------------------------
    def _process(self, item: Item) -> list[Alert]:
        # An exact type test first: isinstance() with a pydantic class calls its metaclass's __instancecheck__.
        if type(item) is not Exchange and isinstance(item, CacheStats):
            return self._stats(item)
        alerts = self._evaluate(item)
        if self.evaluated is not None:
            self.evaluated.append((item, alerts))
        return alerts

    def _evaluate(self, ex: Exchange) -> list[Alert]:
        """Judge one exchange, then let the detectors learn it."""
        ts = ex.ts
        self.exchanges += 1
        request = ex.request
        capacity = self.capacity
        resp = ex.response
        if resp is not None:
            usage = resp.usage
            if usage is not None:  # what the engine allocated for it: the pool clock (detectors/pool.py)
                capacity.clock.add(ts, (usage.input_tokens or 0) + (usage.output_tokens or 0))
        gap_alert = None
        # Both calls below are skipped when they cannot change anything (the window seen before; no open
        # incident): their cheap preconditions, tested here, spare a call per exchange.
        if request is not None:
            window = request.context_window
            if window != capacity.context_window and capacity.observe_window(window):
                gap_alert = self._gap_alert(ts)  # the rare path: a window not seen before
        index = self.overlap.index
        if index._order:  # its advance only expires texts: an empty index (no text seen yet) has none to expire
            index.advance(ts)
        incidents = self.incidents
        if incidents.open:  # nothing to close otherwise (advance returns early until the quiet period has passed)
            incidents.advance(ts)
        overlap = self.overlap
        # Findings held while the domain was cold are judged once they have waited `overlap_hold_s` (detectors/held.py).
        matured = self._mature(ts) if overlap.held and ts - overlap.held[0].ts >= self.s.overlap_hold_s else None
        plan = self._plan
        if plan is None or plan.detectors is not self.detectors:
            plan = self._plan = Plan(self.detectors)
        if ex.output_print is None and ex.prompt_print is None and not ex.canary_hits:
            observers, learners = plan.bare_observers, plan.bare_learners  # no content: content_only ones skipped
        else:
            observers, learners = plan.observers, plan.learners
        screen = plan.screen
        signals = [] if screen is None else screen(ex, request, resp, capacity)
        for observe in observers:
            signals += observe(ex, capacity)
        delivery = self.mixup.delivery(ex) if self.s.mixup and ex.response is not None else None
        late: list[Alert] = []
        if delivery is not None:
            signals, late = self._mixups(delivery, signals, ts)
        if not signals:
            for learn in learners:
                learn(ex, True)
            if delivery is not None:
                self.mixup.add(self.s, delivery)
            if matured or late:
                return [*([gap_alert] if gap_alert is not None else []), *(matured or []), *late]
            return [gap_alert] if gap_alert is not None else []
        signals = corroborate(signals)
        main, others = _split_victims(signals)
        alert = self._response_alert(ex, main)
        # A suspect output is not its receiver's own context: stale pages leak into several outputs,
        # and indexing a victim's output would make the victim look like the origin of the next leak.
        include_output = alert is None or SEVERITY_RANK[alert.severity] < SEVERITY_RANK["high"]
        cold = overlap.cold
        if cold is not None and alert is not None:
            # Held only if the response raised no alert now: one flagged already (a mechanism) needs nothing more,
            # and a later alert of the same id (kind, response, source) would be taken as a re-delivery downstream.
            cold = overlap.cold = None
        for learn in learners:
            learn(ex, include_output)  # the overlap detector learns a held output apart (its `cold` is set)
        alerts = [gap_alert] if gap_alert is not None else []
        if matured:
            alerts += matured
        if alert is not None:
            alerts += self._victim_alerts(ex, alert, main, others)
        if delivery is not None:
            delivery.named.update(a.source_tenant_id for a in alerts if a.source_tenant_id and a.severity in _HIGH_UP)
            self.mixup.add(self.s, delivery)
        alerts += late
        if cold is not None:
            overlap.cold = None
            alerts += self._hold(ex, signals, cold)
        return alerts

    def _mixups(self, d: Delivery, signals: list[Signal], ts: float) -> tuple[list[Signal], list[Alert]]:
        """The signals after the mix-ups `d` completes (detectors/mixup.py); late alerts (own ids) for the others."""
        if self.mixup.empty():
            return signals, []
        found = self.mixup.check(self.s, d, innocent_of(self.overlap), named_by(signals))
        if not found:
            return signals, []
        signals, late = apply(signals, d, found)
        return signals, [a for other, sig in late if (a := self.late_mixup(other, sig, ts)) is not None]

    def late_mixup(self, leaked: Delivery, sig: Signal, ts: float) -> Alert | None:
        """The alert, at event time `ts`, on a past delivery of this domain found handed another tenant's answer."""
        return self._response_alert(as_held(leaked, [sig]), [sig], ts, "delivery_mixup")

    def _gap_alert(self, ts: float) -> Alert | None:
        """The domain alert for an advertised context window larger than the prefill pool, if it is now."""
        gap = self.capacity.gap()
        return capacity_alert(self.cache_domain, self.incidents, gap, ts, None) if gap else None

    def _victim_alerts(
        self, ex: Exchange | Held, alert: Alert, main: list[Signal], others: list[Signal], ts: float | None = None
    ) -> list[Alert]:
        """The response's alert, then one per other victim, with the response's mechanism signals beside it."""
        alerts = [alert]
        if others:
            mechanism = registry.mechanism_signals()
            context = [s for s in main if s.name in mechanism]
            for s in others:
                other = self._response_alert(ex, [s, *context], ts)
                if other is not None:
                    alerts.append(other)
        return alerts

    # --- findings held while cold (detectors/held.py) -------------------------------------------
    def _hold(
        self, ex: Exchange, signals: list[Signal], cold: tuple[list[Signal], dict[str, Any], dict[str, int]]
    ) -> list[Alert]:
        warm_signals, runs, needs = cold
        rest = [s for s in signals if s.name not in _CONTENT]
        held = self.overlap.held
        held.append(
            Held(ex.ts, ex.request_id, ex.tenant_id, ex.session_id, ex.traceparent, rest + warm_signals, runs, needs)
        )
        held[-1].response_id = ex.response_id
        self.held_counts["held"] += 1
        # Bounded: past the limit the oldest is judged now, with what the domain knows so far (never dropped).
        if len(held) > self.s.overlap_held_max:
            return self._judge_oldest(ex.ts, held_receivers(held))
        return []

    def _mature(self, ts: float) -> list[Alert]:
        """Judge the held findings that have waited `overlap_hold_s`, oldest first (the end of input judges all of
        them: `flush`)."""
        held = self.overlap.held
        receivers = held_receivers(held)
        alerts: list[Alert] = []
        while held and ts - held[0].ts >= self.s.overlap_hold_s:
            alerts += self._judge_oldest(ts, receivers)
        return alerts

    def _judge_oldest(self, ts: float, receivers: dict[tuple[str, int], set[str]]) -> list[Alert]:
        """The oldest held response, judged again at event time `ts`: its alerts if it is still high or critical.
        `receivers`: the held receivers of each page (`detectors.held.held_receivers`)."""
        held = self.overlap.held.popleft()
        late = round(max(0.0, ts - held.ts), 3)
        signals = [
            s.model_copy(update={"figures": dict(s.figures, held_s=late)}) if s.name in _CONTENT else s
            for s in self.overlap.recheck(held, receivers)
        ]
        main, others = _split_victims(signals)
        if SEVERITY_RANK[severity_of(main)] < SEVERITY_RANK["high"]:
            self.held_counts["held_dismissed"] += 1
            if self.leads is not None:
                self.leads.append(self._lead(held, main, ts))
            return []  # dismissed: nothing was raised for it, and nothing is
        self.held_counts["held_raised"] += 1
        alert = self._response_alert(held, main, ts)
        assert alert is not None
        return self._victim_alerts(held, alert, main, others, ts)

    def _pressure_signal(self) -> tuple[float | None, list[Signal]]:
        p = self.capacity.pressure()
        if p is None:
            return None, []
        sev = "warning" if p >= self.s.pressure_high else "info"
        return p, [
            Signal(
                name="cache_pressure",
                severity="info",
                score=round(min(p, 1.0), 4),
                figures={"used_share": round(p, 4), "level": sev, **self.capacity.reuse_figures()},
            )
        ]

    def _response_alert(
        self, ex: Exchange | Held, signals: list[Signal], ts: float | None = None, subject: str = ""
    ) -> Alert | None:
        """The response's alert if its signals reach warning; `ts`: the event time it is raised at, if not the
        response's own (a held finding judged later)."""
        severity = severity_of(signals := across_senders(signals, ex.request_id, self.s.scoped_request_ids))
        if SEVERITY_RANK[severity] < SEVERITY_RANK["warning"]:
            if self.leads is not None and signals:
                self.leads.append(self._lead(ex, signals, ts))
            return None
        kind = kind_of(signals)
        assert kind is not None
        pressure, extra = self._pressure_signal()
        source = source_of(signals, kind)
        rids = [ex.request_id]
        aid = alert_id(kind, self.cache_domain, rids, source, subject)
        when = ex.ts if ts is None else ts
        gkey, iid, inc_severity = self.incidents.assign(
            self.cache_domain, kind, severity, when, aid, rids, ex.tenant_id, source, proves(signals)
        )
        return Alert(
            alert_id=aid,
            ts=when,
            kind=kind,
            severity=severity,
            cache_domain=self.cache_domain,
            tenant_id=ex.tenant_id,
            source_tenant_id=source,
            session_id=ex.session_id,
            request_ids=rids,
            score=score_of(signals, pressure, self.s.pressure_high),
            evidence=[*signals, *extra],
            summary=_summary(kind, ex, source, signals, self.cache_domain, when),
            group_key=gkey,
            incident_id=iid,
            traceparent=ex.traceparent,
            response_id=getattr(ex, "response_id", None),  # a Held pickled before it existed has none
            incident_severity=inc_severity,
        )

    def _lead(self, ex: Exchange | Held, signals: list[Signal], ts: float | None) -> Lead:
        return Lead(ts=ex.ts if ts is None else ts, cache_domain=self.cache_domain, tenant_id=ex.tenant_id,
                    session_id=ex.session_id, request_id=ex.request_id, findings=signals)  # fmt: skip

    # --- state ---------------------------------------------------------------------------------
    def _overlap(self) -> OverlapDetector:
        overlap = self.detectors["overlap"]
        assert isinstance(overlap, OverlapDetector)
        return overlap

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Snapshots survive a change of the registry: detectors pickled before `detectors` existed (one
        # attribute each) move into it, and one registered since the snapshot starts fresh.
        detectors = state.setdefault("detectors", {})
        for reg in registry.registered():
            if reg.name not in detectors:
                detectors[reg.name] = state.pop(reg.name, None) or reg.make(state["s"])
        state.pop("_plan", None)
        state.setdefault("held_counts", Counter())  # from before held findings were counted
        state.setdefault("mixup", MixupLedger())  # from before mix-ups were told (an empty ledger)
        for key, value in state.items():  # in the snapshot's order; `s` through its setter (the copy)
            if key == "s":
                self.s = value
            else:
                self.__dict__[key] = value
        self.overlap = self._overlap()
        self._plan = None

    def __getstate__(self) -> dict[str, Any]:
        # The plan holds bound methods derived from `detectors`: rebuilt on first use, never pickled. The
        # settings are pickled as `s` alone, in its place, as before the copy existed.
        return {("s" if k == "_s" else k): v for k, v in self.__dict__.items() if k not in _NOT_PICKLED}

    def pieces(self) -> dict[str, Piece]:
        """Every detector's declared pieces (`HasPieces`): the state a snapshot copies on its own and as its changes.
        The rest of the monitor is copied whole, with these left out by name (streams/kafka/pieces.py)."""
        out: dict[str, Piece] = {}
        for name, det in self.detectors.items():
            declared = getattr(det, "pieces", None)
            if declared is None:
                continue
            for key, piece in declared().items():
                if key in out:
                    raise ValueError(f"detector {name!r} declares piece {key!r} a second time")
                out[key] = piece
        return out | {"mx": self.mixup}  # the recent deliveries, copied as what they gained and lost

    def attach(self, public: PublicSet | None, settings: DetectionSettings | None = None) -> None:
        """Give a monitor loaded from a snapshot what the process holds and snapshots never do: the operator's
        corpus (loaded from its file) and, if given, the process's settings."""
        if settings is not None:
            self.s = settings
            self.overlap.s = settings
        self.overlap.public = public

    def state_size(self) -> dict[str, int]:
        idx = self.overlap.index.state_size()
        return {
            "buffered": len(self._buffer),
            "index_docs": idx["docs"],
            "index_fingerprints": idx["fingerprints"],
            "incidents_open": len(self.incidents.open),
            "held_findings": len(self.overlap.held),
            # Cumulative: how many content findings a cold domain held, and how their later judgment went.
            "held_total": self.held_counts["held"],
            "held_raised": self.held_counts["held_raised"],
            "held_dismissed": self.held_counts["held_dismissed"],
        }

    def dumps(self) -> bytes:
        # Our own state in our own changelog: pickle is trusted here and far faster than JSON.
        return pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def loads(
        cls, blob: bytes, settings: DetectionSettings | None = None, public: PublicSet | None = None
    ) -> DomainMonitor:
        obj = pickle.loads(blob)
        if not isinstance(obj, cls):
            raise TypeError("not a DomainMonitor snapshot")
        obj.attach(public, settings)
        return obj


_CONTENT = frozenset({"cross_tenant_contamination", "cross_session_contamination"})
_HIGH_UP = frozenset({"high", "critical"})
_NOT_PICKLED = frozenset({"_plan", "_lateness", "leads", "evaluated"})


def _split_victims(signals: list[Signal]) -> tuple[list[Signal], list[Signal]]:
    """The response's own alert's signals, and the content signals of other victims (tenants other than the verdict's
    whose pages prove a leak on their own), each for an alert of its own with the response's mechanism signals beside
    it and out of the first alert's evidence: every (source, response) finding is in exactly one alert."""
    kind = kind_of(signals)
    named = source_of(signals, kind) if kind is not None else None
    others = [
        s
        for s in signals
        if s.name == "cross_tenant_contamination"
        and s.source_tenant_id != named
        and SEVERITY_RANK[s.severity] >= SEVERITY_RANK["high"]
    ]
    if not others:
        return signals, []
    return [s for s in signals if not any(s is o for o in others)], others


def _summary(kind: str, ex: Exchange | Held, source: str | None, signals: list[Signal], domain: str, ts: float) -> str:
    by = {s.name: s for s in signals}
    parts = []
    if kind == "canary_leak":
        head = f"canary marker of tenant {source} surfaced in a response to tenant {ex.tenant_id} on {domain}"
    elif kind == "cross_tenant_contamination" and kind in by:
        f = by[kind].figures  # a mix-up told by numbers alone shares no fingerprint (ADR 0027)
        n = f"{f['identifiers']} identifiers of" if f.get("identifiers") and not f.get("matched_fingerprints") else None
        n = n or f"{f.get('matched_fingerprints')} fingerprints with"
        head = f"response to tenant {ex.tenant_id} on {domain} shares {n} tenant {source}'s recent context"
        if f.get("delivery_mixup") not in (None, "identifiers") and not f.get("matched_fingerprints"):  # usage alone
            head = f"response to tenant {ex.tenant_id} on {domain} carries tenant {source}'s answer"
    elif kind == "cross_session_contamination":
        head = f"response to tenant {ex.tenant_id} (session {ex.session_id}) carries content of its other session"
    else:
        head = f"suspect response to tenant {ex.tenant_id} on {domain}"
    for sig in signals:  # each registered signal's own clause (its registration's `summary`), in evidence order
        r = registry.raises_of(sig.name)
        if r is not None and r.summary is not None:
            parts.append(r.summary(sig.figures))
    if kind in by and "delivery_mixup" in by[kind].figures:
        parts.append(mixup_clause(source, by[kind].figures))
    elif ts != ex.ts:
        parts.append(f"response at {format_ts(ex.ts)}, held while its domain was cold")
    when = format_ts(ts)
    return f"{head} at {when}" + (f" ({'; '.join(parts)})" if parts else "")
