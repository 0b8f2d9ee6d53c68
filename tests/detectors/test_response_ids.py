"""One response id on two tenants' answers (detectors/mixup.py, `mixup_response_ids`, ADR 0022): a provider mints an
id per answer, so one answer delivered twice under its id, to prompts that differ, was handed over, whatever the
prompts quote. The pairs here cross two pools, where content cannot see them (in one pool the receiver's output holds
the first receiver's, and content judges). Each runs through the embedded, direct and staged runners
(tests/parity.py)."""

from __future__ import annotations

import pytest
from factories import high_on as _high
from factories import private_texts as _texts
from factories import request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert
from tests.support.live import observe_now

S = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key="response-ids", fleet_delay_s=30.0)
Event = tuple[str, str, float, str, str, str, str | None]


def _run(settings: DetectionSettings, events: list[Event]) -> list[Alert]:
    """(request id, tenant, time, domain, prompt, answer, response id) exchanges, then an hour of quiet event time."""
    m = Monitor(settings)
    out: list[Alert] = []
    for rid, tenant, ts, domain, prompt, answer, response_id in events:
        out += observe_now(m, request(rid, tenant, ts, text=prompt, session_id=f"{tenant}-s", cache_domain=domain))
        kw = {"response_id": response_id} if response_id else {}
        out += observe_now(
            m, response(rid, tenant, ts + 2.0, domain=domain, text=answer, session_id=f"{tenant}-s", **kw)
        )
    out += observe_now(m, request("late", "Z", 4_000.0, text="nothing to see", cache_domain="d9"))
    return out + observe_now(m, response("late", "Z", 4_001.0, domain="d9", text="fine thanks"))


def _cached(seed: int, second_domain: str, ids: tuple[str | None, str | None]) -> list[Event]:
    """A's answer, which quotes neither prompt, handed to R again five minutes later (a response cache keyed on
    the prompt's meaning, not the caller)."""
    prompt_a, prompt_r, answer, _ = _texts(seed, 4)
    return [
        ("a1", "A", 100.0, "d1", f"my order {prompt_a}", answer, ids[0]),
        ("r1", "R", 400.0, second_domain, f"my ticket {prompt_r}", answer, ids[1]),
    ]


@pytest.mark.parametrize("seed", range(4))
def test_one_answer_under_one_id_to_a_tenant_of_another_pool_is_high_and_names_the_first_receiver(seed: int) -> None:
    events = _cached(seed, "d2", ("chatcmpl-8f2a", "chatcmpl-8f2a"))
    # Without the ids, the fleet's ledger sees the very same answer to an unrelated prompt five minutes later: a copy
    # from a cache (ADR 0028, 0034). Within the two minutes copies were searched before ADR 0034, nothing told it.
    off = S.model_copy(update={"mixup_response_ids": False})
    assert {e.figures.get("delivery_mixup") for a in _high(_run(off, events), "R") for e in a.evidence} == {"identical"}
    assert _high(_run(off.model_copy(update={"mixup_copy_before_s": 120.0}), events), "R") == []
    (alert,) = _high(_run(S, events), "R")
    f = alert.evidence[0].figures
    assert alert.source_tenant_id == "A" and alert.kind == "cross_tenant_contamination"
    assert f["delivery_mixup"] == "same_response" and f["source_request_ids"] == ["a1"]
    assert alert.request_ids == ["r1"] and alert.cache_domain == "d2"


def test_the_owner_is_the_request_sent_first_even_when_its_own_stream_ends_later() -> None:
    # A long stream to A; R's request, sent while it streamed, is a cache hit answered in milliseconds.
    prompt_a, prompt_r, answer, _ = _texts(12, 4)
    m = Monitor(S)
    out = observe_now(m, request("a1", "A", 100.0, text=f"my order {prompt_a}", session_id="A-s", cache_domain="d1"))
    out += observe_now(m, request("r1", "R", 104.0, text=f"my ticket {prompt_r}", session_id="R-s", cache_domain="d2"))
    kw = {"text": answer, "response_id": "chatcmpl-long"}
    out += observe_now(m, response("r1", "R", 104.2, domain="d2", session_id="R-s", **kw))
    out += observe_now(m, response("a1", "A", 110.0, domain="d1", session_id="A-s", **kw))
    out += observe_now(m, request("late", "Z", 4_000.0, text="nothing to see", cache_domain="d9"))
    out += observe_now(m, response("late", "Z", 4_001.0, domain="d9", text="fine thanks"))
    assert [a.source_tenant_id for a in _high(out, "R")] == ["A"] and _high(out, "A") == []


@pytest.mark.parametrize("seed", range(3))
def test_a_short_personal_answer_under_one_id_is_enough(seed: int) -> None:
    # A chat greeting with the user's name in it: too short for a copy's four uncommon fingerprints, but the id says
    # it is one answer, and two uncommon ones say it is no stock answer.
    prompt_a, prompt_r, words, _ = _texts(20 + seed, 4)
    answer = " ".join(words.split()[:15])
    events: list[Event] = [
        ("a1", "A", 100.0, "d1", f"hello I am {prompt_a}", answer, "chatcmpl-hi"),
        ("r1", "R", 160.0, "d2", f"hello I am {prompt_r}", answer, "chatcmpl-hi"),
    ]
    assert [a.source_tenant_id for a in _high(_run(S, events), "R")] == ["A"]


@pytest.mark.parametrize("seed", range(2))
def test_in_one_pool_the_id_joins_the_content_finding_that_names_the_first_receiver(seed: int) -> None:
    # In one pool the receiver's output holds the first receiver's output, which content finds; the id says how.
    (alert,) = _high(_run(S, _cached(seed, "d1", ("chatcmpl-8f2a", "chatcmpl-8f2a"))), "R")
    assert alert.source_tenant_id == "A"
    assert any(e.figures.get("delivery_mixup") == "same_response" for e in alert.evidence)


def test_the_same_answer_under_two_ids_is_told_by_its_text_alone() -> None:
    # Two ids say nothing either way (a cache may mint its own): the very same answer to an unrelated prompt five
    # minutes later is told by its text (ADR 0028, within ADR 0034's window), never as one response id twice.
    alerts = _run(S, _cached(5, "d2", ("chatcmpl-1", "chatcmpl-2")))
    assert {e.figures.get("delivery_mixup") for a in _high(alerts, "R") for e in a.evidence} == {"identical"}
    assert _high(alerts, "A") == []


def test_one_id_on_two_different_answers_concludes_nothing() -> None:
    # Some servers reuse or shorten ids (a counter, a few random digits): the id alone is no witness.
    prompt_a, prompt_r, answer_a, answer_r = _texts(6, 4)
    events: list[Event] = [
        ("a1", "A", 100.0, "d1", f"my order {prompt_a}", answer_a, "chatcmpl-7"),
        ("r1", "R", 400.0, "d2", f"my ticket {prompt_r}", answer_r, "chatcmpl-7"),
    ]
    assert _high(_run(S, events), "R") == []


def test_one_prompt_answered_twice_from_a_shared_cache_concludes_nothing() -> None:
    # Two tenants sent the very same prompt, and a cache shared by tenants answered the second: nobody's data moved.
    prompt, answer, _, _ = _texts(8, 4)
    events: list[Event] = [
        ("a1", "A", 100.0, "d1", prompt, answer, "chatcmpl-c"),
        ("r1", "R", 400.0, "d2", prompt, answer, "chatcmpl-c"),
    ]
    assert _high(_run(S, events), "R") == []


def test_the_same_tenant_given_its_own_cached_answer_again_is_no_leak() -> None:
    prompt_a, prompt_b, answer, _ = _texts(9, 4)
    events: list[Event] = [
        ("a1", "A", 100.0, "d1", f"my order {prompt_a}", answer, "chatcmpl-s"),
        ("a2", "A", 400.0, "d2", f"my ticket {prompt_b}", answer, "chatcmpl-s"),
    ]
    assert _high(_run(S, events), "A") == []


def _stock_cached(seed: int, r_usage: int) -> list[Alert]:
    """A stock answer (four other tenants got it first, under ids of their own) handed from A to R under A's id; R's
    usage is `r_usage` (A's prompt counts 412 tokens, R's 733, and the gateway counts as the engine does)."""
    prompt_a, prompt_r, stock, _ = _texts(40 + seed, 4)
    m = Monitor(S)
    out: list[Alert] = []

    def exchange(rid: str, tenant: str, ts: float, domain: str, prompt: str, tokens: int, used: int, rsp: str) -> None:
        nonlocal out
        kw = {"session_id": f"{tenant}-s", "cache_domain": domain}
        out += observe_now(m, request(rid, tenant, ts, text=prompt, tokens=tokens, **kw))
        kw = {"session_id": f"{tenant}-s", "domain": domain, "input_tokens": used, "response_id": rsp}
        out += observe_now(m, response(rid, tenant, ts + 2.0, text=stock, **kw))

    for i, extra in enumerate(_texts(60 + seed, 4)):
        exchange(f"w{i}", f"W{i}", 10.0 + 10 * i, "d1", extra, 100 + i, 100 + i, f"chatcmpl-w{i}")
    exchange("a1", "A", 100.0, "d1", f"my order {prompt_a}", 412, 412, "chatcmpl-8f2a")
    exchange("r1", "R", 400.0, "d2", f"my ticket {prompt_r}", 733, r_usage, "chatcmpl-8f2a")
    out += observe_now(m, request("late", "Z", 4_000.0, text="nothing to see", cache_domain="d9"))
    return out + observe_now(m, response("late", "Z", 4_001.0, domain="d9", text="fine thanks"))


@pytest.mark.parametrize("seed", range(3))
def test_a_stock_answer_under_one_id_is_handed_over_when_its_usage_came_with_it(seed: int) -> None:
    # One id and one answer, but a stock one: a model writes it for many prompts, and it gives nobody's data away.
    assert _high(_stock_cached(seed, 733), "R") == []
    # Its usage counts A's prompt, not R's: the very response A was given, handed over again (a response cache
    # shared by tenants; ADR 0031). Its usage also says whose it is.
    (alert,) = _high(_stock_cached(seed, 412), "R")
    f = alert.evidence[0].figures
    assert alert.source_tenant_id == "A" and f["delivery_mixup"] == "same_response"
    assert f["source_request_ids"] == ["a1"] and alert.summary.startswith("response to tenant R on d2 carries tenant A")
