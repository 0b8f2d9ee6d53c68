"""Hostile but schema-valid input against the detection core (issue 11): canary framing, registry
and domain bounds. File-level attacks (gz bombs, truncation, future timestamps in replay) are in
tests/embedded/test_replay_hostile.py."""

from __future__ import annotations

import json

import pytest
from factories import TEXTS, canary, request, response, stats

from detectors.canaries import CanaryRegistry
from detectors.monitor import Monitor, make_fingerprinter
from detectors.settings import DetectionSettings
from schemas.events import EventError
from tests.support.live import observe_now

MARK = "CTK-CANARY-9f1c0a9e2b7d4c31a0b1c2d3e4f56789"


def test_canaries_only_from_probe_tenants() -> None:
    m = Monitor(DetectionSettings())
    with pytest.raises(EventError) as info:
        observe_now(m, canary("mallory", MARK))
    assert info.value.reason == "canary_tenant" and MARK not in str(info.value)
    with pytest.raises(EventError) as info:
        observe_now(m, request("r0", "mallory", 1, canaries=[MARK]))
    assert info.value.reason == "canary_tenant"
    assert m.canaries.state_size() == 0
    # The framing attempt of the issue: mallory's marker in bob's output raises nothing.
    observe_now(m, request("r1", "bob", 2))
    assert observe_now(m, response("r1", "bob", 3, text=f"see {MARK}")) == []
    # A probe tenant's marker is taken, and its leak is found.
    observe_now(m, canary("probe-canary-a", MARK, ts=4))
    observe_now(m, request("r2", "bob", 5))
    (alert,) = observe_now(m, response("r2", "bob", 6, text=f"here: {MARK.lower()}."))
    assert (alert.kind, alert.source_tenant_id) == ("canary_leak", "probe-canary-a")
    assert MARK not in alert.model_dump_json() and MARK.split("-")[-1] not in alert.model_dump_json()


def test_canary_tenant_patterns_are_settings() -> None:
    m = Monitor(DetectionSettings(canary_tenants=["sec-probe-??", "canary@*"]))
    assert observe_now(m, canary("sec-probe-01", MARK)) == []
    with pytest.raises(EventError):
        observe_now(m, canary("probe-x", MARK))


def test_registry_holds_no_marker_text_and_matches_by_keyed_hash() -> None:
    reg = CanaryRegistry(make_fingerprinter(DetectionSettings(fingerprint_key="k" * 32)), max_markers=10)
    assert reg.register("probe-a", MARK, None, 0.0)
    assert not reg.register("probe-a", MARK, None, 1.0)  # already known
    token = MARK.rpartition("-")[2]
    state = repr(reg.__dict__) + repr(list(reg._markers.values()))
    assert token not in state and "CTK" not in state
    (hit,) = reg.scan(f"the code is ctk canary {token}")
    assert hit.owner_tenant_id == "probe-a"
    # Restored from keys alone (what a changelog holds), the registry still finds the marker.
    other = CanaryRegistry(reg.fingerprinter, max_markers=10)
    m = next(iter(reg._markers.values()))
    assert other.register_keyed(reg.token_key(token), m.marker_id, m.tenant_id, None, 0.0)
    assert [h.marker_id for h in other.scan(token)] == [hit.marker_id]
    assert reg.scan("0123456789abcdef0123456789abcdef") == []


def test_registry_evicts_oldest_first_and_counts() -> None:
    reg = CanaryRegistry(make_fingerprinter(DetectionSettings()), max_markers=100)
    tokens = [f"{i:032x}" for i in range(250)]
    for i, t in enumerate(tokens):
        assert reg.register("probe-a", f"P-{t}", None, float(i))
    assert reg.state_size() == 100 and reg.evicted == 150
    assert reg.scan(" ".join(tokens[:150])) == []
    assert len(reg.scan(" ".join(tokens[150:]))) == 100


def test_idle_domains_expire_and_their_count_is_bounded() -> None:
    s = DetectionSettings(domain_idle_s=600.0, max_domains=50)
    m = Monitor(s)
    for i in range(200):  # junk domains: bounded to 50 at any time, the rest evicted and counted
        observe_now(m, stats(domain=f"junk-{i}", ts=float(i) / 100))
    assert len(m.domains) == 50 and m.counters["domains.evicted"] == 150
    observe_now(m, stats(domain="real", ts=10.0))
    observe_now(m, stats(domain="real", ts=700.0))
    assert set(m.domains) == {"real"}  # every domain idle for more than 600 s of event time went (real too)
    assert (m.counters["domains.evicted"], m.counters["domains.expired"]) == (151, 50)
    assert m.state_size()["domains_dropped"] == 201


def test_an_evicted_domain_flushes_what_it_buffered() -> None:
    s = DetectionSettings(max_domains=1, domain_lateness_s=5.0)
    m = Monitor(s)
    observe_now(m, stats(domain="d1", ts=0.0, context_window=None))
    observe_now(m, request("r1", "t", 1, tokens=900_000, cache_domain="d1"))
    alerts = observe_now(m, response("r1", "t", 2, input_tokens=1, domain="d1"))
    alerts += observe_now(m, stats(domain="d2", ts=3.0))  # evicts d1 while its exchange waits behind the lateness
    alerts += m.flush()
    assert "overlong_accepted" in {a.kind for a in alerts}


def test_huge_but_valid_numbers_flow_through_the_core() -> None:
    m = Monitor(DetectionSettings())
    observe_now(m, stats(ts=0.0, capacity=2**53, used=2**53, context_window=2**52))
    observe_now(m, request("r1", "t", 1.0, tokens=2**53, text=TEXTS[0], cache_domain="d1"))
    # The pair meets: its figures reach the detectors, and the alert they raise carries them exactly.
    alerts = observe_now(m, response("r1", "t", 2.0, input_tokens=2**53, ttft_ms=1e12, duration_ms=0.0))
    # The last second representable goes on too (an orphan: no request), moving event time to its end.
    alerts += observe_now(m, response("r2", "t", 253402300799.0, input_tokens=0, ttft_ms=1e12, duration_ms=0.0))
    alerts += m.flush()
    assert alerts, "huge figures must still be judged, not pass unseen"
    (a,) = alerts
    figures = json.loads(a.model_dump_json())["evidence"][0]["figures"]
    assert (a.kind, figures["prompt_tokens"], figures["ttft_ms"]) == ("impossible_prefill", 2**53, 1e12)
    assert m.counters["orphans.no_request"] == 1 and m.counters["exchanges"] == 2


def test_a_marker_the_receiver_resends_is_its_own_context_not_a_new_leak() -> None:
    m = Monitor(DetectionSettings())
    observe_now(m, canary("probe-canary-a", MARK, ts=1))
    observe_now(m, request("r1", "bob", 2))
    (alert,) = observe_now(m, response("r1", "bob", 3, text=f"here: {MARK}."))
    assert alert.kind == "canary_leak"
    # bob's next turn re-sends that answer as history, and the model repeats it: the leak was judged already.
    observe_now(m, request("r2", "bob", 4, text=f"Earlier you said: here: {MARK}. Go on."))
    assert [a.kind for a in observe_now(m, response("r2", "bob", 5, text=f"As I said: {MARK}."))] == []
    # Another tenant getting it without sending it is a leak again.
    observe_now(m, request("r3", "carol", 6, text="Go on."))
    assert [a.kind for a in observe_now(m, response("r3", "carol", 7, text=f"{MARK}"))] == ["canary_leak"]
