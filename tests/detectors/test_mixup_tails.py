"""Each conversation's latest answer, kept past the ledger's window (detectors/mixup_tails.py, ADR 0026): a turn sent
after a pause with another conversation's history is still judged, within bounds that hold."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from factories import high_on as _high
from factories import private_texts as _texts
from factories import request, response

from detectors.fleet import Digest
from detectors.fleet_mixup import FleetMixups
from detectors.mixup import Delivery, MixupLedger
from detectors.mixup_tails import Bounds, SessionTails
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert
from tests.support.live import observe_now

S = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key="mixup-tails")
SYSTEM = "You are Mira, a friendly companion in a chat app. Keep answers short and warm."
Turn = tuple[str, str, str, float, str, str]  # (request id, tenant, session, time, prompt, answer)


def _run(settings: DetectionSettings, turns: list[Turn]) -> list[Alert]:
    m = Monitor(settings)
    out: list[Alert] = []
    for rid, tenant, session, ts, prompt, answer in turns:
        out += observe_now(m, request(rid, tenant, ts, text=prompt, session_id=session, cache_domain="d1"))
        out += observe_now(m, response(rid, tenant, ts + 2.0, domain="d1", text=answer, session_id=session))
    return out


def _paused(seed: int, pause: float, other_tenant: str = "B") -> list[Turn]:
    """Session A1 talks twice, session B1 once; after `pause` seconds A1's next turn is sent with B1's history. Other
    tenants' one-turn chats fill the pause every two minutes, so the ledger's window moves on."""
    me_b, me_a, answer_b, answer_a, *fill = _texts(seed, 3 + int(pause // 120))
    b_user, a1_user = f"hello I am {me_b}", f"hi there {me_a}"
    a1_answer, a2_answer = " ".join(answer_a.split()[:30]), " ".join(answer_a.split()[30:])
    back = 160.0 + pause
    return [
        ("a1", "A", "A1", 100.0, f"{SYSTEM}\n\n{a1_user}", a1_answer),
        ("b1", other_tenant, "B1", 130.0, f"{SYSTEM}\n\n{b_user}", answer_b),
        ("a2", "A", "A1", 160.0, f"{SYSTEM}\n\n{a1_user}\n\n{a1_answer}\n\nwhat now", a2_answer),
        *((f"f{i}", f"F{i % 5}", f"F{i}", 280.0 + 120 * i, f"tell me about {text[:40]}", text) for i, text in
          enumerate(fill)),
        ("a3", "A", "A1", back, f"{SYSTEM}\n\n{b_user}\n\n{answer_b}\n\nhow are you today",
         f"{' '.join(answer_b.split()[:12])} fine thanks"),
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(3))
def test_a_turn_after_an_hour_with_another_conversations_history_is_high(seed: int) -> None:
    # Both witnesses (A1's latest answer, B1's exchange) left the 600 s window an hour ago.
    turns = _paused(seed, 3600.0)
    assert _high(_run(S.model_copy(update={"mixup_session_horizon_s": 0.0}), turns), "A") == []
    (alert,) = _high(_run(S, turns), "A")
    assert alert.request_ids == ["a3"] and alert.source_tenant_id == "B"
    f = next(e.figures for e in alert.evidence if "delivery_mixup" in e.figures)
    assert f["delivery_mixup"] == "history" and f["source_request_ids"] == ["b1"]


def test_the_same_tenants_other_conversation_after_a_pause_is_cross_session() -> None:
    (alert,) = _high(_run(S, _paused(5, 3600.0, other_tenant="A")), "A")
    assert alert.kind == "cross_session_contamination" and alert.request_ids == ["a3"]


def test_past_the_horizon_a_conversation_is_not_judged() -> None:
    assert _high(_run(S.model_copy(update={"mixup_session_horizon_s": 1800.0}), _paused(6, 3600.0)), "A") == []


def test_a_conversation_that_resumes_with_its_own_history_after_a_pause_is_no_finding() -> None:
    # Its user pastes the other chat's answer, but the conversation carries its own latest answer.
    turns = _paused(7, 3600.0)
    by_id = {t[0]: t for t in turns}
    a2, b1 = by_id["a2"], by_id["b1"]
    rid, tenant, session, ts, _, answer = turns[-1]
    turns[-1] = (rid, tenant, session, ts, f"{a2[4]}\n\n{a2[5]}\n\nlook what the other chat said {b1[5]}", answer)
    assert _high(_run(S, turns), "A") == []


def _d(ts: float, rid: str, session: str | None, out: range, prompt: range = range(0), tenant: str = "T") -> Delivery:
    arr = [np.arange(r.start, r.stop, dtype=np.uint64) for r in (out, prompt)]
    return Delivery(ts, ts - 1.0, rid, tenant, session, None, arr[0], arr[1], set())


B = Bounds(horizon_s=1000.0, sessions=3, prints=100, min_answer=4)


def _held(t: SessionTails) -> list[str]:
    return [d.request_id for d in t.by_session.values()]


def test_a_session_keeps_only_its_newest_long_enough_answer() -> None:
    t = SessionTails()
    t.put(B, _d(1, "r1", "s1", range(10, 20)))
    t.put(B, _d(2, "r2", "s1", range(30, 32)))  # too short to tell: the one before stays
    t.put(B, _d(3, "r3", "s1", range(40, 50)))
    t.put(B, _d(4, "r4", None, range(60, 70)))  # no session: never a tail
    t.put(B, _d(2.5, "r-late", "s1", range(80, 90)))  # an older answer heard late: the newer one stays
    assert _held(t) == ["r3"] and t.prints == 10
    assert {k: list(v) for k, v in t.sketch().items()} == {k: [t.get("T", "s1")] for k in (40, 41, 42)}


def test_the_oldest_answered_go_first_past_each_bound() -> None:
    t = SessionTails()
    for i in range(4):  # a fourth session: past `sessions`
        t.put(B, _d(10 + i, f"r{i}", f"s{i}", range(100 * i, 100 * i + 10)))
    assert _held(t) == ["r1", "r2", "r3"]
    t.put(B, _d(20, "r1b", "s1", range(500, 510)))  # answered again: now the newest
    assert _held(t) == ["r2", "r3", "r1b"]
    t.put(B, _d(21, "big", "s9", range(600, 680)))  # 80 prints more: past `prints`
    assert _held(t) == ["r3", "r1b", "big"] and t.prints == 100
    t.put(B, _d(1100, "later", "s8", range(700, 710)))  # past the horizon of "big"
    assert _held(t) == ["later"] and set(t.sketch()) == {700, 701, 702}


def test_a_checkpoint_rebuilds_the_tails_from_the_deliveries_added_since_its_mark() -> None:
    s = S.model_copy(update={"mixup_session_max": 5})
    live = MixupLedger()
    for i in range(4):
        live.add(s, _d(10.0 * i, f"a{i}", f"s{i}", range(100 * i, 100 * i + 8)))
    live.mark()
    copy = pickle.loads(pickle.dumps(live))
    for i in range(4, 12):
        live.add(s, _d(10.0 * i, f"a{i}", f"s{i % 7}", range(100 * i, 100 * i + 8), range(i, i + 3)))
    changes = live.changes()
    assert changes is not None
    copy.replay(changes)
    assert _held(copy.tails) == _held(live.tails) == ["a7", "a8", "a9", "a10", "a11"]
    assert copy.tails.prints == live.tails.prints
    assert copy.latest(s, _d(200.0, "x", "s1", range(0))) is copy.tails.get("T", "s1")


def test_a_ledger_from_before_the_tails_restores_and_starts_them() -> None:
    old = MixupLedger()
    state = old.__getstate__()
    del state["tails"], state["_bounds"]
    ledger = MixupLedger.__new__(MixupLedger)
    ledger.__dict__.update(state)
    ledger.replay((0, [_d(1.0, "r", "s", range(8))]))  # a record from before: no bounds, nothing to put
    ledger.add(S, _d(2.0, "r2", "s", range(20, 30)))
    assert _held(ledger.tails) == ["r2"]


def _digest(ts: float, rid: str, key: str, prompt: range | list[int], output: range, domain: str) -> Digest:
    p, o = (np.array(list(r), dtype="<u8").tobytes() for r in (prompt, output))
    return Digest(ts, rid, key, p, o, domain, ts - 2.0, 200)


def _fleet_found(pause: float, settings: DetectionSettings = S) -> list[tuple[str, str, str]]:
    """A1 (in d1) answered, B1 (in d2) answered; other pools' chats fill the pause; then A1's turn in d1 carries B1."""
    fm = FleetMixups(settings)
    fill = []
    for i in range(int(pause // 60)):
        at = 10**6 + 100 * i
        fill.append(_digest(200.0 + 60 * i, f"f{i}", f"F\x1fF{i}", range(at, at + 20), range(at + 50, at + 70), "d3"))
    carried = [*range(2000, 2030), *range(3000, 3030), *range(4000, 4010)]
    for d in [
        _digest(100.0, "a1", "A\x1fA1", range(10, 40), range(1000, 1030), "d1"),
        _digest(130.0, "b1", "B\x1fB1", range(2000, 2030), range(3000, 3030), "d2"),
        *fill,
        _digest(200.0 + pause, "a3", "A\x1fA1", carried, range(5000, 5010), "d1"),
    ]:
        fm.learn(d, lambda keys: np.zeros(keys.size, dtype=bool))
    return [(where, d.request_id, sig.figures["delivery_mixup"]) for where, d, sig in fm.take()]


def test_the_fleet_finds_a_history_carried_across_pools_after_a_pause() -> None:
    # The window moved on (a digest a minute for an hour, in another pool); the conversations' latest answers stay.
    assert _fleet_found(3600.0, S.model_copy(update={"mixup_session_horizon_s": 0.0})) == []
    assert _fleet_found(3600.0) == [("d1", "a3", "history")]
