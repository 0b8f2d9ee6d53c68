"""An incident has a severity of its own (docs/adr/0018): what an on-call engineer is paged for is "this domain is
leaking now", corroborated; an alert's severity stays the scope (whether its response is on the disclosure list).

One response flagged high on its content alone leaves its incident a warning; a second response of the same domain,
a mechanism signal or a canary makes it high (or critical). Each alert carries the incident's severity as of it."""

from __future__ import annotations

import pickle

import pytest
from factories import PROBE_MARKER, TEXTS, canary, incident_alert, request, response, stats

from detectors.incidents import Incident, IncidentTracker, proves
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert, Signal
from streams.sim.evaluate import incident_figures
from tests.support.live import observe_now

OVER = 812_345


def _settings(**kw: object) -> DetectionSettings:
    base: dict[str, object] = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "incident-severity"}
    return DetectionSettings.model_validate(base | kw)


def _leak(src: str, dst: str, rid: str, ts: float, text: str) -> list:
    """`src` quotes a text of its own; then `dst`'s answer holds it (content alone: no mechanism)."""
    return [
        request(f"{rid}-src", src, ts, text=text, session_id=f"{src}-s"),
        response(f"{rid}-src", src, ts + 1, text="Noted, thank you.", session_id=f"{src}-s"),
        request(rid, dst, ts + 10, text="Please help with my question.", session_id=f"{dst}-s"),
        response(rid, dst, ts + 11, text=f"Sure. {text}", session_id=f"{dst}-s"),
    ]


def _leaks(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if a.kind == "cross_tenant_contamination"]


def test_one_response_on_content_alone_is_a_warning_incident_and_a_second_makes_it_high() -> None:
    m = Monitor(_settings())
    (first,) = _leaks([a for e in _leak("src", "dst", "d0", 0, TEXTS[0]) for a in observe_now(m, e)])
    # The response is on the disclosure list (its own severity), the domain is not yet known to be leaking.
    assert SEVERITY_RANK[first.severity] >= SEVERITY_RANK["high"]
    assert first.incident_severity == "warning"
    (second,) = _leaks([a for e in _leak("src2", "dst2", "d1", 100, TEXTS[1]) for a in observe_now(m, e)])
    assert second.incident_id == first.incident_id
    assert second.incident_severity == max(first.severity, second.severity, key=SEVERITY_RANK.__getitem__)


def test_a_mechanism_signal_makes_its_incident_high_at_once() -> None:
    m = Monitor(_settings())
    events = [
        stats(ts=0.0, capacity=681_280, context_window=None),
        request("o1", "a", 1, tokens=OVER),
        response("o1", "a", 2, input_tokens=OVER, ttft_ms=20_000),
    ]
    (alert,) = [a for e in events for a in observe_now(m, e)]
    assert alert.kind == "overlong_accepted" and alert.severity == "high"
    assert alert.incident_severity == "high"


def test_a_canary_makes_its_incident_critical_at_once() -> None:
    m = Monitor(_settings())
    events = [
        canary("probe-a", PROBE_MARKER),
        request("v1", "victim", 10),
        response("v1", "victim", 11, text=f"sure, {PROBE_MARKER} here"),
    ]
    alerts = [a for e in events for a in observe_now(m, e) if a.kind == "canary_leak"]
    assert alerts and all(a.incident_severity == "critical" for a in alerts)


def _signal(name: str, severity: str = "high") -> Signal:
    return Signal(name=name, severity=severity, score=0.9)  # type: ignore[arg-type]


def test_what_proves_a_leak_by_itself() -> None:
    assert proves([_signal("overlong_accepted")]) and proves([_signal("canary_leak", "critical")])
    assert proves([_signal("cross_tenant_contamination"), _signal("impossible_prefill", "warning")])
    # Content alone, context, or a mechanism signal below warning does not.
    assert not proves([_signal("cross_tenant_contamination", "critical"), _signal("cache_pressure", "info")])
    assert not proves([_signal("token_accounting_mismatch", "info")])


def test_a_mixup_told_by_the_wire_proves_a_leak_and_one_told_by_text_does_not() -> None:
    # Usage counts crossed or carried from a lost request, one response id twice (ADR 0032), one answer's usage on
    # another tenant's response (ADR 0036): the exchanges' own trace.
    def mixup(mode: str, severity: str = "high") -> Signal:
        return Signal(name="cross_tenant_contamination", severity=severity, score=1.0, figures={"delivery_mixup": mode})  # type: ignore[arg-type]

    assert all(proves([mixup(m)]) for m in ("counts", "counted", "same_response", "usage"))
    # Told by text a model may write twice (a copy, the very same answer, numbers, a history): a second response still.
    assert not any(proves([mixup(m)]) for m in ("copy", "identical", "identifiers", "history", "swap", "misroute"))
    assert not proves([mixup("counted", "warning")])


def _assign(t: IncidentTracker, rid: str, severity: str, ts: float, proven: bool = False) -> str:
    return t.assign("d1", "cross_tenant_contamination", severity, ts, f"a-{rid}-{ts}", [rid], "dst", "src", proven)[2]


def test_alerts_of_one_response_do_not_corroborate_each_other() -> None:
    # A mixed output names several victims, one alert each: still one response.
    t = IncidentTracker(600.0, 100)
    assert [_assign(t, "r1", "high", 1.0), _assign(t, "r1", "critical", 1.0)] == ["warning", "warning"]
    assert _assign(t, "r2", "high", 50.0) == "critical"  # the incident's highest alert, once corroborated
    # Corroboration lasts for the incident; a new incident after the quiet period starts again.
    assert _assign(t, "r3", "warning", 60.0) == "critical"
    assert _assign(t, "r4", "high", 60.0 + 601.0) == "warning"


@pytest.mark.parametrize("need", [1, 2, 3])
def test_the_responses_that_corroborate_are_a_setting(need: int) -> None:
    t = IncidentTracker(600.0, 100, min_responses=need)
    got = [_assign(t, f"r{i}", "high", float(i)) for i in range(4)]
    assert got == ["warning"] * (need - 1) + ["high"] * (5 - need)
    # Warnings never raise an incident above warning, corroborated or not.
    assert _assign(IncidentTracker(600.0, 100, min_responses=1), "w", "warning", 0.0) == "warning"


def test_the_resolution_carries_the_incidents_severity_and_old_snapshots_restore() -> None:
    t = IncidentTracker(600.0, 100)
    _assign(t, "r1", "high", 0.0, proven=True)
    t.advance(700.0)
    (res,) = t.drain_resolved()
    assert res.severity == "high"
    # An incident pickled before it had a severity: the class defaults stand in, and it is corroborated afresh.
    inc = Incident("i", "k", "d1", 0.0, 0.0)
    state = dict(inc.__dict__)
    for name in ("severity", "corroborated", "high_responses"):
        del state[name]
    old = Incident.__new__(Incident)
    old.__dict__.update(state)
    restored = pickle.loads(pickle.dumps(old))
    assert (restored.severity, restored.corroborated, restored.high_responses) == ("info", False, ())


def test_the_evaluator_counts_incidents_by_their_own_severity_and_shows_the_alert_count_beside() -> None:
    alerts = [
        incident_alert("clean1", "i1", "warning", "high", 10.0),  # a lone false high: an alert, no page
        incident_alert("leak1", "i2", "warning", "high", 20.0),  # a leak paged 30 s later, by a second response
        incident_alert("leak2", "i2", "critical", "critical", 50.0),
        incident_alert("leak3", "i3", "warning", "high", 60.0),  # a lone leak: on the disclosure list, never paged
        incident_alert("clean2", "i4", None, "critical", 70.0),  # from a version without incident severities
    ]
    f = incident_figures(alerts, {"leak1", "leak2", "leak3"})
    assert (f["incidents_high"], f["false_incidents"], f["false_incidents_by_alert"]) == (2, 1, 2)
    assert (f["unpaged_incidents"], f["incident_delay_s"]) == (1, 30.0)
