"""What the core judged below an alert (`Lead`, `Monitor.record_leads`): kept only when asked, shared by every
domain, drained by the shell, never pickled, and never changing an alert."""

from __future__ import annotations

import pickle

from factories import TEXTS, request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert
from tests.support.live import observe_now

HOLD = 600.0


def _cold() -> DetectionSettings:
    return DetectionSettings(overlap_warmup_docs=10**6, overlap_warmup_slow_docs=10**6, fingerprint_key="leads-tests")


def _quote(tenant: str, rid: str, ts: float, text: str, domain: str = "d1") -> list:
    return [request(rid, tenant, ts, text=text, cache_domain=domain),
            response(rid, tenant, ts + 1, text="Noted, thank you.", cache_domain=domain)]  # fmt: skip


def _echo(tenant: str, rid: str, ts: float, text: str, domain: str = "d1") -> list:
    return [request(rid, tenant, ts, text="Please help with my question.", cache_domain=domain),
            response(rid, tenant, ts + 1, text=text, cache_domain=domain)]  # fmt: skip


def _session_events() -> list:
    # A tenant's own text in its other session: an info finding on content alone (ADR 0025), no alert.
    return [
        request("a1", "alice", 1, text=TEXTS[1], session_id="s-old"),
        response("a1", "alice", 2, text="ok", session_id="s-old"),
        request("a2", "alice", 5, session_id="s-new"),
        response("a2", "alice", 6, text=TEXTS[1], session_id="s-new"),
    ]


def _run(m: Monitor, events: list) -> list[Alert]:
    return [a for e in events for a in observe_now(m, e)]


def test_an_info_finding_is_a_lead_only_when_asked_and_is_drained_once() -> None:
    quiet = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    assert _run(quiet, _session_events()) == [] and quiet.take_leads() == []
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    m.record_leads()
    assert _run(m, _session_events()) == []
    (lead,) = m.take_leads()
    assert (lead.request_id, lead.tenant_id, lead.session_id, lead.cache_domain) == ("a2", "alice", "s-new", "d1")
    assert [f.name for f in lead.findings] == ["cross_session_contamination"]
    assert all(SEVERITY_RANK[f.severity] < SEVERITY_RANK["warning"] for f in lead.findings)
    assert lead.ts == 6
    assert m.take_leads() == []


def test_a_held_finding_dismissed_when_judged_again_is_a_lead_at_that_time() -> None:
    m = Monitor(_cold())
    m.record_leads()
    events = _quote("src", "s0", 50, TEXTS[1]) + _echo("dst", "d0", 60, TEXTS[1])
    events += _quote("c", "c0", 100, TEXTS[1]) + _quote("d", "d0x", 110, TEXTS[1])  # public text after all
    assert _run(m, events) == []
    m.take_leads()  # what was judged below an alert on the way (the cold finding itself was held, not judged)
    assert _run(m, _quote("x", "x0", 61 + HOLD, "an unrelated question once the hold is over")) == []
    dismissed = [lead for lead in m.take_leads() if lead.request_id == "d0"]
    assert len(dismissed) == 1 and dismissed[0].ts == 61 + HOLD
    assert all("held_s" in f.figures for f in dismissed[0].findings if f.name == "cross_tenant_contamination")


def test_every_domain_shares_the_list_whether_it_existed_before_the_ask_or_not() -> None:
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    _run(
        m,
        [
            request("z", "zed", 0, text="hello", cache_domain="old"),
            response("z", "zed", 1, text="hi", cache_domain="old"),
        ],
    )
    m.record_leads()
    events = [
        request("o1", "alice", 1, text=TEXTS[1], session_id="s1", cache_domain="old"),
        response("o1", "alice", 2, text="ok", session_id="s1", cache_domain="old"),
        request("o2", "alice", 5, session_id="s2", cache_domain="old"),
        response("o2", "alice", 6, text=TEXTS[1], session_id="s2", cache_domain="old"),
    ]
    events += [e.model_copy(update={"cache_domain": "new", "request_id": "n" + e.request_id,
                                    "event_id": "n" + e.event_id}) for e in _session_events()]  # fmt: skip
    _run(m, events)
    assert {(lead.cache_domain, lead.request_id) for lead in m.take_leads()} == {("old", "o2"), ("new", "na2")}


def test_leads_change_no_alert_and_no_snapshot() -> None:
    events = _quote("src", "s0", 50, TEXTS[0]) + _echo("dst", "d0", 60, TEXTS[0]) + _session_events()
    events += _quote("x", "x1", 61 + HOLD, "an unrelated question once it is over")
    plain, asked = Monitor(_cold()), Monitor(_cold())
    asked.record_leads()
    a, b = _run(plain, events) + plain.flush(), _run(asked, events) + asked.flush()
    assert [x.model_dump() for x in a] == [x.model_dump() for x in b] and a  # the held page is still raised
    restored = pickle.loads(pickle.dumps(asked.table))
    assert restored.leads is None and all(dm.leads is None for dm in restored.domains.values())
