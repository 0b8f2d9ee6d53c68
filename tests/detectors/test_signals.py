"""Each signal with plain events: where it must speak, and where it must stay silent."""

from __future__ import annotations

from factories import TEXTS, canary, request, response, stats

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert

OVER = 800_000  # > 681,280


def run(events: list, **settings) -> list[Alert]:
    # Most tests judge overlap on a handful of texts: no cold-start warm-up unless asked for.
    m = Monitor(DetectionSettings(**({"overlap_warmup_docs": 0, "overlap_warmup_s": 0} | settings)))
    out: list[Alert] = []
    for e in events:
        out += m.observe(e)
    return out + m.flush()


def kinds(alerts: list[Alert]) -> set[str]:
    return {a.kind for a in alerts}


def signal_names(alert: Alert) -> set[str]:
    return {s.name for s in alert.evidence}


# --- capacity_gap ---------------------------------------------------------------------------------
def test_capacity_gap_once_per_domain_and_again_on_change() -> None:
    alerts = run([stats(ts=0), stats(ts=5), stats(ts=10), stats(ts=15, capacity=700_000)])
    gaps = [a for a in alerts if a.kind == "capacity_gap"]
    assert len(gaps) == 2
    assert gaps[0].severity == "warning"
    assert gaps[0].evidence[0].figures["gap_tokens"] == 1_048_576 - 681_280
    assert gaps[0].alert_id != gaps[1].alert_id


def test_capacity_gap_silent_when_pool_covers_window() -> None:
    assert run([stats(ts=0, capacity=2_097_152), stats(ts=5, capacity=2_097_152)]) == []


def test_capacity_gap_from_a_request_advertised_window() -> None:
    alerts = run(
        [
            stats(ts=0, capacity=681_280, context_window=None),
            request("r1", "a", 1, context_window=1_048_576),
            response("r1", "a", 2),
        ]
    )
    assert kinds(alerts) == {"capacity_gap"}


# --- overlong_accepted ------------------------------------------------------------------------------
def test_overlong_accepted_is_high_even_without_other_evidence() -> None:
    alerts = run(
        [
            stats(ts=0, capacity=681_280, context_window=None),
            request("r1", "a", 1, tokens=OVER),
            response("r1", "a", 2, input_tokens=OVER, ttft_ms=20_000),
        ]
    )
    (a,) = alerts
    assert (a.kind, a.severity, a.request_ids, a.tenant_id) == ("overlong_accepted", "high", ["r1"], "a")
    assert signal_names(a) >= {"overlong_accepted", "cache_pressure"}


def test_overlong_silent_when_rejected_or_fits_or_capacity_unknown() -> None:
    base = stats(ts=0, capacity=681_280, context_window=None)
    assert run([base, request("r1", "a", 1, tokens=OVER), response("r1", "a", 2, status=413, input_tokens=None)]) == []
    assert (
        run([base, request("r2", "a", 1, tokens=600_000), response("r2", "a", 2, input_tokens=600_000, ttft_ms=15_000)])
        == []
    )
    # No cache_stats for this domain: nothing to compare with.
    assert run([request("r3", "a", 1, tokens=OVER), response("r3", "a", 2, input_tokens=OVER, ttft_ms=20_000)]) == []


def test_big_pool_accepting_long_prompts_is_fine() -> None:
    big = stats(domain="big", ts=0, capacity=2_097_152)
    assert (
        run(
            [
                big,
                request("r1", "a", 1, tokens=OVER),
                response("r1", "a", 30, domain="big", input_tokens=OVER + 5_000, ttft_ms=25_000),
            ]
        )
        == []
    )


# --- token_accounting_mismatch -------------------------------------------------------------------------
def test_placeholder_accounting_is_flagged() -> None:
    (a,) = run([request("r1", "a", 1, tokens=50_000), response("r1", "a", 2, input_tokens=1, ttft_ms=2_000)])
    assert a.kind == "token_accounting_mismatch"
    assert a.evidence[0].figures == {
        "gateway_prompt_tokens": 50_000,
        "engine_input_tokens": 1,
        "ratio": 0.00002,
        "normal_ratio": None,  # nothing learned yet: the floor decides
        "basis": "floor",
    }


def test_tokenizer_noise_and_small_prompts_are_tolerated() -> None:
    assert run([request("r1", "a", 1, tokens=50_000), response("r1", "a", 2, input_tokens=48_600, ttft_ms=2_000)]) == []
    assert run([request("r2", "a", 1, tokens=50_000), response("r2", "a", 2, input_tokens=51_500, ttft_ms=2_000)]) == []
    assert run([request("r3", "a", 1, tokens=300), response("r3", "a", 2, input_tokens=1)]) == []


# --- impossible_prefill ----------------------------------------------------------------------------------
def test_impossible_prefill_rate_is_flagged() -> None:
    (a,) = run([request("r1", "a", 1, tokens=500_000), response("r1", "a", 2, input_tokens=500_000, ttft_ms=40)])
    assert a.kind == "impossible_prefill"
    assert a.evidence[0].figures["implied_tokens_per_s"] == 12_500_000


def test_realistic_prefill_and_short_prompts_stay_silent() -> None:
    assert (
        run([request("r1", "a", 1, tokens=500_000), response("r1", "a", 20, input_tokens=500_000, ttft_ms=12_000)])
        == []
    )
    assert run([request("r2", "a", 1, tokens=2_000), response("r2", "a", 2, input_tokens=2_000, ttft_ms=1)]) == []


# --- canary_leak --------------------------------------------------------------------------------------------
MARK = "CTK-CANARY-0123456789abcdef0123456789abcdef"


def test_canary_of_another_tenant_is_critical_with_source() -> None:
    alerts = run(
        [canary("probe-a", MARK), request("r1", "b", 1), response("r1", "b", 2, text=f"sure, {MARK.lower()} here")]
    )
    (a,) = alerts
    assert (a.kind, a.severity, a.source_tenant_id) == ("canary_leak", "critical", "probe-a")
    assert MARK not in a.model_dump_json() and MARK.lower() not in a.model_dump_json()


def test_canary_planted_in_a_prompt_registers_it() -> None:
    alerts = run(
        [
            request("r0", "probe-a", 0, canaries=[MARK], text=f"remember {MARK}"),
            response("r0", "probe-a", 1, text=f"ok {MARK}"),  # own marker echoed: fine
            request("r1", "b", 2),
            response("r1", "b", 3, text=f"the code is {MARK}"),
        ]
    )
    assert [(a.kind, a.tenant_id, a.source_tenant_id) for a in alerts] == [("canary_leak", "b", "probe-a")]


def test_own_canary_in_another_session_is_high_not_critical() -> None:
    alerts = run(
        [canary("probe-a", MARK, session="a-s0"), request("r1", "probe-a", 1), response("r1", "probe-a", 2, text=MARK)]
    )
    (a,) = alerts
    assert (a.kind, a.severity) == ("canary_leak", "high")


# --- content overlap -------------------------------------------------------------------------------------------
def _context(tenant: str, rid: str, ts: float, text: str) -> list:
    return [request(rid, tenant, ts, text=text), response(rid, tenant, ts + 1, text="Understood.")]


def test_cross_tenant_leak_names_source_and_is_critical_when_corroborated() -> None:
    events = [
        stats(ts=0),
        *_context("alice", "a1", 1, TEXTS[0] + " " + TEXTS[1]),
        request("b1", "bob", 5, tokens=OVER, text=TEXTS[3]),
        response("b1", "bob", 6, input_tokens=1, ttft_ms=30, text=TEXTS[1].upper()),
    ]
    alerts = [a for a in run(events) if a.kind != "capacity_gap"]
    (a,) = alerts
    assert (a.kind, a.severity, a.tenant_id, a.source_tenant_id) == (
        "cross_tenant_contamination",
        "critical",
        "bob",
        "alice",
    )
    overlap = next(s for s in a.evidence if s.name == "cross_tenant_contamination")
    assert overlap.figures["source_request_ids"] == ["a1"]
    assert TEXTS[1][:40] not in a.model_dump_json()


def test_uncorroborated_overlap_is_graded_by_how_much_is_shared() -> None:
    def alerts_for(leak: str, context: str = TEXTS[0], **settings: object) -> list[Alert]:
        return run(
            [*_context("alice", "a1", 1, context), request("b1", "bob", 5), response("b1", "bob", 6, text=leak)],
            **settings,
        )

    # One page-sized fragment (t = 16 units) of another tenant's private text is enough for a high alert:
    # winnowing guarantees it a fingerprint, and no other tenant ever had that fingerprint.
    (a,) = alerts_for(" ".join(TEXTS[0].split()[:17]))
    assert (a.kind, a.severity, a.source_tenant_id) == ("cross_tenant_contamination", "high", "alice")
    assert a.evidence[0].figures["evidence"] >= 1.0
    # A whole passage is a long run of consecutive matches: critical. A shared passage of P units holds at least
    # (P - k + 1) // w selections, so a run of 8 is certain from 36 units on; TEXTS[0] alone (32 words) gives 7 under
    # about one key in 1,500 (found in CI: the key is random per process), so both texts are leaked here.
    both = TEXTS[0] + " " + TEXTS[1]
    assert len(both.split()) >= 8 * 4 + 5 - 1
    (a,) = alerts_for(both, context=both)
    assert (a.kind, a.severity) == ("cross_tenant_contamination", "critical")
    # The key under which TEXTS[0] alone gave a run of 7 (high, not critical): the bound, not the text, decides.
    (a,) = alerts_for(TEXTS[0], fingerprint_key="fb988ec25722ae89a622246533d838dc")
    assert a.evidence[0].figures["longest_run"] == 7 and a.severity == "high"
    # Fewer shared units than a k-gram: nothing to match, no alert.
    assert alerts_for(" ".join(TEXTS[0].split()[:4])) == []


def test_cold_start_overlap_alone_waits_for_the_end_of_input_but_the_mechanism_alerts_at_once() -> None:
    events = [*_context("alice", "a1", 1, TEXTS[0]), request("b1", "bob", 5), response("b1", "bob", 6, text=TEXTS[0])]
    m = Monitor(DetectionSettings(overlap_warmup_docs=100))
    assert [a for e in events for a in m.observe(e)] == []
    # Held while cold (detectors/held.py), judged at the end of input: alice's text is still nobody else's.
    (a,) = m.flush()
    assert (a.kind, a.source_tenant_id, a.evidence[0].figures["held_s"]) == ("cross_tenant_contamination", "alice", 0)
    events[-2:] = [request("b1", "bob", 5, tokens=OVER), response("b1", "bob", 6, input_tokens=1, text=TEXTS[0])]
    (a,) = run(events, overlap_warmup_docs=100)
    assert (a.kind, a.severity, a.source_tenant_id) == ("cross_tenant_contamination", "critical", "alice")


def test_a_single_shared_passage_is_enough_next_to_the_mechanism() -> None:
    events = [
        stats(ts=0),
        *_context("alice", "a1", 1, TEXTS[0]),
        request("b1", "bob", 5, tokens=OVER),
        response("b1", "bob", 6, input_tokens=1, text="zz " + " ".join(TEXTS[0].split()[:16]) + " zz"),
    ]
    (a,) = [x for x in run(events) if x.kind != "capacity_gap"]
    assert (a.kind, a.severity, a.source_tenant_id) == ("cross_tenant_contamination", "critical", "alice")


def test_passage_in_receivers_own_prompt_is_explained_away() -> None:
    events = [
        *_context("alice", "a1", 1, TEXTS[2]),
        request("b1", "bob", 5, text="please fix this:\n" + TEXTS[2]),
        response("b1", "bob", 6, text=TEXTS[2]),
    ]
    assert run(events) == []


def test_passage_in_receivers_own_recent_context_is_explained_away() -> None:
    events = [
        *_context("alice", "a1", 1, TEXTS[2]),
        *_context("bob", "b0", 2, TEXTS[2]),
        request("b1", "bob", 5),
        response("b1", "bob", 6, text=TEXTS[2]),
    ]
    assert run(events) == []


def test_text_common_to_many_tenants_is_boilerplate() -> None:
    shared = TEXTS[4]
    events = [x for i, t in enumerate(["t1", "t2", "t3"]) for x in _context(t, f"{t}-r", i, shared)]
    events += [request("b1", "bob", 10, tokens=OVER), response("b1", "bob", 11, input_tokens=1, text=shared)]
    alerts = run(events)
    assert {a.kind for a in alerts} == {"token_accounting_mismatch"}


def test_attribution_goes_to_the_tenant_explaining_most_passages() -> None:
    events = [
        *_context("alice", "a1", 1, TEXTS[0]),
        *_context("carol", "c1", 2, TEXTS[1] + " " + TEXTS[3]),
        request("b1", "bob", 5),
        response("b1", "bob", 6, text=TEXTS[0][:120] + " ... " + TEXTS[1] + " " + TEXTS[3]),
    ]
    # Carol's passages are the conclusion; alice's 120-character page is a leak of its own, named after it.
    assert [a.source_tenant_id for a in run(events)] == ["carol", "alice"]


def test_same_tenant_other_session_alone_is_own_data_but_with_the_mechanism_is_high() -> None:
    events = [
        request("a1", "alice", 1, text=TEXTS[1], session_id="s-old"),
        response("a1", "alice", 2, text="ok", session_id="s-old"),
        request("a2", "alice", 5, session_id="s-new"),
        response("a2", "alice", 6, text=TEXTS[1], session_id="s-new"),
    ]
    # A tenant quoting its own document in another chat is its own data, not a finding on its own.
    assert run(events) == []
    events[-2:] = [
        request("a2", "alice", 5, session_id="s-new", tokens=OVER),
        response("a2", "alice", 6, text=TEXTS[1], session_id="s-new", input_tokens=1),
    ]
    (a,) = [x for x in run(events) if x.kind != "capacity_gap"]
    assert (a.kind, a.severity, a.source_tenant_id) == ("cross_session_contamination", "high", None)


def test_index_forgets_after_its_window() -> None:
    events = [
        *_context("alice", "a1", 1, TEXTS[0]),
        request("b1", "bob", 5_000),
        response("b1", "bob", 5_001, text=TEXTS[0]),
    ]
    assert run(events, index_window_s=600) == []
    assert kinds(run(events, index_window_s=6_000, domain_idle_s=86_400)) == {"cross_tenant_contamination"}


def test_cache_pressure_raises_the_score() -> None:
    def score(used: int) -> float:
        (a,) = [
            x
            for x in run(
                [
                    stats(ts=0, used=used),
                    request("r", "a", 1, tokens=OVER),
                    response("r", "a", 2, input_tokens=OVER, ttft_ms=20_000),
                ]
            )
            if x.kind != "capacity_gap"
        ]
        return a.score

    assert score(650_000) > score(100_000)


def test_a_flagged_output_is_not_taken_as_its_receivers_own_content() -> None:
    # The same stale page leaks into two outputs: the second must still name the real owner.
    events = [
        stats(ts=0),
        *_context("alice", "a1", 1, TEXTS[0]),
        request("b1", "bob", 5, tokens=OVER),
        response("b1", "bob", 6, input_tokens=1, text=TEXTS[0]),
        request("c1", "carol", 7, tokens=OVER),
        response("c1", "carol", 8, input_tokens=1, text=TEXTS[0]),
    ]
    found = [(a.tenant_id, a.source_tenant_id) for a in run(events) if a.kind == "cross_tenant_contamination"]
    assert found == [("bob", "alice"), ("carol", "alice")]


def test_a_cross_session_alert_cites_only_the_receivers_own_requests() -> None:
    # Bob's short fragment comes first in the output; the conclusion is alice's other session, and her notice must
    # cite her own request, never bob's.
    events = [
        *_context("bob", "b1", 0.5, TEXTS[2]),
        request("a1", "alice", 1, text=TEXTS[1], session_id="s-old"),
        response("a1", "alice", 2, text="ok", session_id="s-old"),
        request("a2", "alice", 5, session_id="s-new", tokens=OVER),
        response("a2", "alice", 6, text=TEXTS[2][:60] + " " + TEXTS[1], session_id="s-new", input_tokens=1),
    ]
    (a,) = [x for x in run(events) if x.kind == "cross_session_contamination"]
    cited = [r for s in a.evidence for r in s.figures.get("source_request_ids", [])]
    assert cited and set(cited) <= {"a1"}


def test_a_page_beside_the_receivers_own_text_from_another_session_is_still_a_leak() -> None:
    # Alice's answer holds her own document from another of her chats (a long run of her other session) and, beside
    # it, a page of Bob's. The two explain different parts of the output: the longer one must not hide the other.
    own, page = TEXTS[1] + " " + TEXTS[3], TEXTS[4]
    events = [
        *_context("bob", "b1", 1, page),
        request("a1", "alice", 2, text=own, session_id="s-old"),
        response("a1", "alice", 3, text="ok", session_id="s-old"),
        request("a2", "alice", 5, session_id="s-new"),
        response("a2", "alice", 6, text=f"{own}\n\n{page}", session_id="s-new"),
    ]
    leaks = [a for a in run(events) if a.kind == "cross_tenant_contamination"]
    assert [(a.tenant_id, a.source_tenant_id) for a in leaks] == [("alice", "bob")]
    assert SEVERITY_RANK[leaks[0].severity] >= SEVERITY_RANK["high"]
    # Control: her own text alone is her own data, as before.
    events[-1] = response("a2", "alice", 6, text=own, session_id="s-new")
    assert run(events) == []
