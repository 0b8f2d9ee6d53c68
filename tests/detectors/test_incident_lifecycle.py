"""Incident lifecycle has one owner, the core's IncidentTracker; the sinks hear its resolutions."""

from __future__ import annotations

import pickle

from factories import request, response, stats

from detectors.incidents import IncidentTracker
from schemas.alert import Alert, IncidentResolved
from streams.embedded.runner import EmbeddedRunner
from streams.settings import Settings
from streams.sinks.base import Sink

OVER = 812_345


class Recorder(Sink):
    def __init__(self) -> None:
        self.alerts: list[Alert] = []
        self.resolved: list[IncidentResolved] = []

    def on_alert(self, alert: Alert) -> None:
        self.alerts.append(alert)

    def on_resolved(self, resolution: IncidentResolved) -> None:
        self.resolved.append(resolution)


def _incident(ts0: float, domain: str = "d1") -> list:
    return [
        stats(domain=domain, ts=ts0, capacity=681_280, context_window=None),
        request(f"r-{domain}-{ts0}", "a", ts0 + 1, tokens=OVER),
        response(f"r-{domain}-{ts0}", "a", ts0 + 2, domain=domain, input_tokens=OVER, ttft_ms=20_000),
    ]


def _run(events: list, quiet_s: float = 600.0) -> Recorder:
    settings = Settings(detection={"incident_quiet_s": quiet_s})
    rec = Recorder()
    runner = EmbeddedRunner(settings, [rec])
    for e in events:
        runner.feed(e)
    runner.finish(0.0)
    return rec


def test_sinks_hear_the_core_resolve_an_incident_once() -> None:
    # The domain with the incident goes silent; another domain's traffic carries event time on.
    rec = _run(
        [
            *_incident(0.0),
            stats(domain="d2", ts=300.0, context_window=None),
            stats(domain="d2", ts=603.0, context_window=None),
        ]
    )
    [alert] = rec.alerts
    [res] = rec.resolved
    assert res.incident_id == alert.incident_id and res.group_key == alert.group_key
    assert (res.first_ts, res.last_ts, res.resolved_at, res.alerts) == (2.0, 2.0, 602.0, 1)


def test_an_incident_still_quiet_for_less_than_the_quiet_period_stays_open() -> None:
    rec = _run([*_incident(0.0), stats(domain="d2", ts=500.0, context_window=None)])  # input ends 498 s after the alert
    assert len(rec.alerts) == 1 and rec.resolved == []


def test_a_new_alert_after_the_quiet_period_is_a_new_incident_and_the_old_one_resolved_first() -> None:
    rec = _run([*_incident(0.0), *_incident(1000.0)], quiet_s=600.0)
    first, second = rec.alerts
    assert first.incident_id != second.incident_id
    [res] = rec.resolved
    assert res.incident_id == first.incident_id and res.resolved_at == 602.0


def test_pending_resolutions_are_bounded_and_survive_a_snapshot() -> None:
    t = IncidentTracker(quiet_s=1.0, max_request_ids=10, max_closed=3)
    for i in range(5):
        t.assign(f"d{i}", "overlong_accepted", "high", float(i * 10), f"a{i}", [f"r{i}"], "t", None)
    t.advance(100.0)
    t = pickle.loads(pickle.dumps(t))
    drained = t.drain_resolved()
    assert [r.cache_domain for r in drained] == ["d2", "d3", "d4"] and t.resolutions_dropped == 2
    assert t.drain_resolved() == []
