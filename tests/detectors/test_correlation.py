"""Join in either order with a bounded wait, duplicates, one alert per response, incidents, bounded state."""

from __future__ import annotations

import pytest
from factories import TEXTS, request, response, stats

from detectors.domain import DomainMonitor
from detectors.fingerprint import Fingerprinter
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.events import EventError
from tests.support.live import observe_now

OVER = 800_000


def feed(m: Monitor, events: list) -> list:
    out = []
    for e in events:
        out += observe_now(m, e)
    return out


def test_response_before_request_still_joins() -> None:
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    alerts = feed(
        m,
        [
            stats(ts=0, context_window=None),
            response("r1", "a", 2, input_tokens=1, ttft_ms=20),
            request("r1", "a", 2.5, tokens=OVER),
        ],
    )
    assert [a.kind for a in alerts] == ["overlong_accepted"]
    assert m.counters["exchanges"] == 1 and m.state_size()["pending_joins"] == 0


def test_request_without_cache_domain_joins_with_its_response() -> None:
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    r = request("r1", "a", 1, tokens=OVER)
    assert r.cache_domain is None
    alerts = feed(
        m, [stats(ts=0, domain="pd-7", context_window=None), r, response("r1", "a", 3, domain="pd-7", input_tokens=1)]
    )
    assert [(a.kind, a.cache_domain) for a in alerts] == [("overlong_accepted", "pd-7")]


def test_orphans_after_the_bounded_wait_are_reported_and_still_judged() -> None:
    s = DetectionSettings(response_wait_s=10, request_wait_s=60)
    m = Monitor(s)
    alerts = feed(m, [response("lonely", "a", 0, input_tokens=1, ttft_ms=10), stats(ts=5), stats(ts=11)])
    assert m.counters["orphans.no_request"] == 1
    # No request: nothing to compare the engine's count with, so no accounting verdict.
    assert [a.kind for a in alerts] == ["capacity_gap"]
    feed(m, [request("never-answered", "a", 12), stats(ts=100)])
    assert m.counters["exchanges.unroutable"] == 1  # no domain known for a request that never got a response
    assert m.state_size()["pending_joins"] == 0


def test_duplicate_event_id_is_rejected_and_changes_nothing() -> None:
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    r = request("r1", "a", 1)
    observe_now(m, r)
    with pytest.raises(EventError) as info:
        observe_now(m, r)
    assert info.value.reason == "duplicate"
    assert m.counters["events.request"] == 1


def test_foreign_fingerprint_parameters_are_rejected() -> None:
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    foreign = Fingerprinter("other-key", k=5, w=12).fingerprint(TEXTS[0])
    with pytest.raises(EventError) as info:
        observe_now(m, request("r1", "a", 1, prompt_fingerprint=foreign.model_dump()))
    assert info.value.reason == "fingerprint_params"
    # Rejected before dedup: the corrected event with the same id is accepted afterwards.
    assert m.state_size()["dedup_ids"] == 0


def test_edge_fingerprints_detect_like_text() -> None:
    s = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0)
    edge = Fingerprinter(s.fingerprint_key, s.k, s.w)
    m = Monitor(s)
    alerts = feed(
        m,
        [
            request("a1", "alice", 1, prompt_fingerprint=edge.fingerprint(TEXTS[0]).model_dump()),
            response("a1", "alice", 2, output_fingerprint=edge.fingerprint("fine").model_dump()),
            request("b1", "bob", 3),
            response("b1", "bob", 4, output_fingerprint=edge.fingerprint(TEXTS[0]).model_dump()),
        ],
    )
    assert [(a.kind, a.source_tenant_id) for a in alerts] == [("cross_tenant_contamination", "alice")]


def test_one_alert_per_response_combining_all_signals() -> None:
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    alerts = feed(
        m,
        [
            stats(ts=0, context_window=None),
            request("a1", "alice", 1, text=TEXTS[0]),
            response("a1", "alice", 2, text="ok"),
            request("b1", "bob", 3, tokens=OVER),
            response("b1", "bob", 4, input_tokens=1, ttft_ms=25, text=TEXTS[0]),
        ],
    )
    (a,) = alerts
    names = [s.name for s in a.evidence]
    assert a.kind == "cross_tenant_contamination" and a.severity == "critical"
    assert {
        "overlong_accepted",
        "token_accounting_mismatch",
        "impossible_prefill",
        "cross_tenant_contamination",
    } <= set(names)


def test_alert_ids_are_stable_and_incidents_group_a_fault() -> None:
    def once() -> list:
        m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
        events = [stats(ts=0, context_window=None)]
        for i in range(5):
            events += [
                request(f"b{i}", f"t{i}", 10 * i + 1, tokens=OVER),
                response(f"b{i}", f"t{i}", 10 * i + 2, input_tokens=1),
            ]
        out = feed(m, events) + m.flush()
        (inc,) = m.incidents()
        assert inc.request_ids == [f"b{i}" for i in range(5)] and inc.alerts == 5
        return out

    first, second = once(), once()
    assert [a.alert_id for a in first] == [a.alert_id for a in second]
    assert len({a.alert_id for a in first}) == 5
    assert len({a.incident_id for a in first}) == 1 and len({a.group_key for a in first}) == 1


def test_a_quiet_period_starts_a_new_incident() -> None:
    m = Monitor(DetectionSettings(incident_quiet_s=60))
    events = [stats(ts=0, context_window=None)]
    for i, t in enumerate([1, 20, 500]):
        events += [request(f"b{i}", "t", t, tokens=OVER), response(f"b{i}", "t", t + 1, input_tokens=1)]
    alerts = feed(m, events)
    assert len({a.incident_id for a in alerts}) == 2
    assert [len(i.request_ids) for i in m.incidents()] == [2, 1]


def test_state_is_bounded_by_size_and_time() -> None:
    m = Monitor(DetectionSettings(index_max_docs=50, max_pending_joins=20, dedup_window=100, index_window_s=30))
    for i in range(300):
        feed(
            m,
            [
                request(f"r{i}", f"t{i % 7}", i, text=f"{TEXTS[i % 6]} item {i}"),
                response(f"r{i}", f"t{i % 7}", i + 0.5, text=f"answer {i} " + TEXTS[(i + 1) % 6]),
            ],
        )
    size = m.state_size()
    assert size["index_docs"] <= 50 and size["dedup_ids"] <= 100 and size["pending_joins"] <= 20
    for i in range(300, 340):
        feed(m, [request(f"r{i}", "x", 1000 + i)])
    assert m.state_size()["pending_joins"] <= 20 and m.counters["exchanges.unroutable"] >= 20


def test_domain_state_snapshot_round_trip() -> None:
    s = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0)
    m = Monitor(s)
    feed(m, [stats(ts=0), request("a1", "alice", 1, text=TEXTS[0]), response("a1", "alice", 2, text="ok")])
    restored = DomainMonitor.loads(m.domain("d1").dumps(), s)
    m.domains["d1"] = restored
    alerts = feed(m, [request("b1", "bob", 3), response("b1", "bob", 4, text=TEXTS[0])])
    assert [a.source_tenant_id for a in alerts] == ["alice"]


def test_dedup_forgets_ids_older_than_its_window() -> None:
    from detectors.dedup import Deduper

    d = Deduper(capacity=1_000, window_s=60)
    assert not d.seen("a", 0) and d.seen("a", 10)
    for i in range(100):
        d.seen(f"id{i}", 100 + i)
    assert d.state_size() <= 61  # ids older than 60 s of event time are gone
    assert not d.seen("a", 200)  # far outside the window: not a retry any more
