"""A conversation sent with another conversation's history (detectors/mixup_history.py, `mixup_history`, ADR 0023):
the turn's prompt carries an answer delivered earlier to another session, and none of the answer its own session was
given last. The answer then restates that other conversation while quoting only its own prompt, which content calls
an echo. Each scenario runs through the embedded, direct and staged runners (tests/parity.py)."""

from __future__ import annotations

import numpy as np
import pytest
from factories import high_on as _high
from factories import private_texts as _texts
from factories import request, response

from detectors.fleet import Digest
from detectors.fleet_mixup import FleetMixups
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert

S = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key="history-mixup", fleet_delay_s=30.0)
SYSTEM = "You are Mira, a friendly companion in a chat app. Keep answers short and warm."
# (request id, tenant, session, time, domain, prompt, answer)
Turn = tuple[str, str, str, float, str, str, str]


def _run(settings: DetectionSettings, turns: list[Turn]) -> list[Alert]:
    m = Monitor(settings)
    out: list[Alert] = []
    for rid, tenant, session, ts, domain, prompt, answer in turns:
        out += m.observe(request(rid, tenant, ts, text=prompt, session_id=session, cache_domain=domain))
        out += m.observe(response(rid, tenant, ts + 2.0, domain=domain, text=answer, session_id=session))
    out += m.observe(request("late", "Z", 4_000.0, text="nothing to see", cache_domain="d9"))
    return out + m.observe(response("late", "Z", 4_001.0, domain="d9", text="fine thanks"))


def _conversations(seed: int, other_tenant: str, other_domain: str) -> tuple[list[Turn], str, str]:
    """Session B1 of `other_tenant` tells who its user is; session A1 of tenant A talks, then its third turn is sent
    with B1's history instead of its own. Returns the turns, B1's answer and the leaked turn's answer."""
    me_b, me_a, answer_b, answer_a = _texts(seed, 4)
    b_user = f"hello I am {me_b}"
    a1_user = f"hi there {me_a}"
    a1_answer = " ".join(answer_a.split()[:30])
    a2_answer = " ".join(answer_a.split()[30:])
    swapped = f"{SYSTEM}\n\n{b_user}\n\n{answer_b}\n\nhow are you today"
    leaked_answer = f"{' '.join(answer_b.split()[:12])} fine thanks"
    turns: list[Turn] = [
        ("a1", "A", "A1", 100.0, "d1", f"{SYSTEM}\n\n{a1_user}", a1_answer),
        ("b1", other_tenant, "B1", 130.0, other_domain, f"{SYSTEM}\n\n{b_user}", answer_b),
        ("a2", "A", "A1", 160.0, "d1", f"{SYSTEM}\n\n{a1_user}\n\n{a1_answer}\n\nwhat now", a2_answer),
        ("a3", "A", "A1", 220.0, "d1", swapped, leaked_answer),
    ]
    return turns, answer_b, leaked_answer


@pytest.mark.parametrize("seed", range(3))
def test_a_turn_sent_with_another_tenants_history_is_high_and_names_that_tenant(seed: int) -> None:
    turns, _, _ = _conversations(seed, "B", "d1")
    assert _high(_run(S.model_copy(update={"mixup_history": False}), turns), "A") == []
    (alert,) = _high(_run(S, turns), "A")
    assert alert.request_ids == ["a3"] and alert.source_tenant_id == "B"
    assert alert.kind == "cross_tenant_contamination"
    f = next(e.figures for e in alert.evidence if "delivery_mixup" in e.figures)
    assert f["delivery_mixup"] == "history" and f["source_request_ids"] == ["b1"]


@pytest.mark.parametrize("seed", range(3))
def test_another_session_of_the_same_tenant_is_a_cross_session_finding(seed: int) -> None:
    # The shape of a chat app's history store keyed by user cohort: one tenant, two users' conversations.
    turns, _, _ = _conversations(10 + seed, "A", "d1")
    (alert,) = _high(_run(S, turns), "A")
    assert alert.request_ids == ["a3"] and alert.kind == "cross_session_contamination"
    f = next(e.figures for e in alert.evidence if "delivery_mixup" in e.figures)
    assert f["source_session_id"] == "B1" and f["source_request_ids"] == ["b1"]


def test_the_other_conversation_in_another_pool_is_found_by_the_fleet_ledger() -> None:
    turns, _, _ = _conversations(20, "B", "d2")
    assert [(a.request_ids, a.source_tenant_id) for a in _high(_run(S, turns), "A")] == [(["a3"], "B")]


def test_a_conversation_that_keeps_its_own_latest_answer_is_no_finding_even_with_a_pasted_answer() -> None:
    # A user pastes an answer from another chat into a conversation that continues with its own history.
    turns, answer_b, _ = _conversations(30, "B", "d1")
    rid, tenant, session, ts, domain, _, answer = turns[3]
    prompt = f"{turns[2][5]}\n\n{turns[2][6]}\n\nlook what the other chat said {answer_b}"
    turns[3] = (rid, tenant, session, ts, domain, prompt, answer)
    assert _high(_run(S, turns), "A") == []


def test_a_new_session_opened_with_another_sessions_history_is_a_fork_not_a_finding() -> None:
    # "Branch this conversation": a new session id starts from an existing history; it has no answer of its own.
    turns, _, _ = _conversations(40, "A", "d1")
    rid, tenant, _, ts, domain, prompt, answer = turns[3]
    turns[3] = (rid, tenant, "A2-fork", ts, domain, prompt, answer)
    assert _high(_run(S, turns), "A") == []


def test_a_history_trimmed_to_its_latest_turns_is_its_own() -> None:
    # A client that trims keeps the newest turns: the latest answer is there, the oldest gone.
    turns, _, _ = _conversations(50, "B", "d1")
    rid, tenant, session, ts, domain, _, _ = turns[3]
    turns[3] = (rid, tenant, session, ts, domain, f"{SYSTEM}\n\n{turns[2][6]}\n\nand then", "good to hear")
    assert _high(_run(S, turns), "A") == []


def _digest(ts: float, rid: str, key: str, prompt: range, output: range, domain: str) -> Digest:
    p, o = (np.array(list(r), dtype="<u8").tobytes() for r in (prompt, output))
    return Digest(ts, rid, key, p, o, domain, ts - 2.0, 200)


def _found(order: list[Digest]) -> list[tuple[str, str, str]]:
    fm = FleetMixups(S)
    for d in order:
        fm.learn(d, lambda keys: np.zeros(keys.size, dtype=bool))
    return [(where, d.request_id, sig.figures["delivery_mixup"]) for where, d, sig in fm.take()]


# Fingerprints as numbers: A1's answers 1000.., B1's prompt 2000.. and answer 3000.., A3's question 4000..
A1 = _digest(100.0, "a1", "A\x1fA1", range(10, 40), range(1000, 1030), "d1")
B1 = _digest(130.0, "b1", "B\x1fB1", range(2000, 2030), range(3000, 3030), "d2")
_CARRIED = np.array([*range(2000, 2030), *range(3000, 3030), *range(4000, 4010)], dtype="<u8").tobytes()
A3 = Digest(220.0, "a3", "A\x1fA1", _CARRIED, np.arange(5000, 5010, dtype="<u8").tobytes(), "d1", 218.0, 200)


def test_the_fleet_finds_a_carried_history_whatever_order_the_digests_come_in() -> None:
    # A digest heard after its time (a worker behind the others) is checked when it comes: the carrier waits for it.
    assert _found([A1, B1, A3]) == [("d1", "a3", "history")]
    assert _found([A1, A3, B1]) == [("d1", "a3", "history")]


def test_a_late_answer_of_the_same_domain_is_left_to_the_domain() -> None:
    b1_here = Digest(*[B1.ts, B1.request_id, B1.key, B1.prompt, B1.output, "d1", B1.sent, B1.status])
    assert _found([A1, b1_here, A3]) == [] and _found([A1, A3, b1_here]) == []


def test_the_latest_answer_too_short_to_tell_is_passed_over_for_the_one_before() -> None:
    # "Good morning to you too" cannot say whether a prompt holds it; the session's last long answer can.
    turns, _, _ = _conversations(60, "B", "d1")
    rid, tenant, session, ts, domain, prompt, _ = turns[2]
    turns[2] = (rid, tenant, session, ts, domain, prompt, "morning")
    assert [a.request_ids for a in _high(_run(S, turns), "A")] == [["a3"]]


def test_the_alert_says_whose_conversation_the_turn_carried() -> None:
    turns, _, _ = _conversations(70, "A", "d1")
    (alert,) = _high(_run(S, turns), "A")
    assert "another conversation's history: session B1 of tenant A's question and answer" in alert.summary
