"""The very same answer to two unrelated prompts (detectors/mixup.py `_identical`, ADR 0028).

A whole response handed to another tenant whose text quotes neither prompt (the model answered in its own words) gives
the copy rule no owner. Two tenants given one answer word for word, with uncommon text in it, to prompts that share
no uncommon text cannot both have been answered: one got the other's. Every scenario also runs through the embedded,
direct and staged runners (tests/parity.py)."""

from __future__ import annotations

from factories import Exchanged, run_exchanges
from factories import high_on as _high
from factories import private_texts as _texts

from detectors.settings import DetectionSettings
from schemas.alert import Alert

S = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key="identical", fleet_delay_s=30.0)
T0 = 10_000.0
# (request id, tenant, sent, delivered, domain, prompt, answer); times from T0
Event = Exchanged


def _run(settings: DetectionSettings, events: list[Event]) -> list[Alert]:
    return run_exchanges(settings, events, T0)


def _modes(alerts: list[Alert]) -> set[str]:
    return {e.figures["delivery_mixup"] for a in alerts for e in a.evidence if "delivery_mixup" in e.figures}


STOCK = "Certainly. Below is a summary of the key points you asked about, with the details that matter most to you."


def _stock(seed: int) -> list[Event]:
    """Three tenants of each pool answered with the model's stock opening a quarter of an hour before: common text."""
    return [
        (
            f"s{d}{i}",
            f"S{i}",
            -900.0 + i,
            -890.0 + i,
            d,
            _texts(seed + i, 1)[0],
            f"{STOCK} {_texts(seed + 9 + i, 1)[0]}",
        )
        for d in ("d1", "d2")
        for i in range(3)
    ]


def _pair(seed: int, r_domain: str = "d1", owner_done: float = 103.0, receiver_done: float = 104.0) -> list[Event]:
    """A asks one thing and R another; both are given A's answer (the stock opening and a dozen words of A's case),
    which quotes neither prompt. Content alone calls R's copy a warning at most: too little uncommon text."""
    prompt_a, prompt_r, words = _texts(seed, 3)
    answer = f"{STOCK} {' '.join(words.split()[:12])}."
    return [
        *_stock(seed + 100),
        ("a1", "A", 100.0, owner_done, "d1", prompt_a, answer),
        ("r1", "R", 100.5, receiver_done, r_domain, prompt_r, answer),
    ]


def test_one_answer_to_two_unrelated_prompts_is_high_on_the_later_delivery() -> None:
    for r_domain in ("d1", "d2"):  # one pool, and a gateway handing it to a client of another
        events = _pair(3, r_domain)
        assert _high(_run(S.model_copy(update={"mixup": False, "fleet_mixups": False}), events), "R") == []
        alerts = _run(S, events)
        (alert,) = _high(alerts, "R")
        f = alert.evidence[0].figures
        assert alert.source_tenant_id == "A" and alert.kind == "cross_tenant_contamination"
        assert f["delivery_mixup"] == "identical" and f["source_request_ids"] == ["a1"]
        assert "the very answer tenant A was given, to an unrelated prompt (identical)" in alert.summary
        assert _high(alerts, "A") == []  # the owner got its own answer


def test_the_prompt_that_holds_more_of_the_answer_owns_it_whatever_the_order() -> None:
    *stock, a, r = _pair(4, owner_done=105.0, receiver_done=103.0)  # R's copy came first
    # The answer restates one phrase of A's question (too little for the copy's owner rule).
    answer = f"{a[6]} {' '.join(a[5].split()[:9])}"
    alerts = _run(S, [*stock, (*a[:6], answer), (*r[:6], answer)])
    (alert,) = _high(alerts, "R")
    assert alert.source_tenant_id == "A" and _modes(alerts) <= {"identical", "copy"}
    assert _high(alerts, "A") == []
    # Neither prompt holds any of it: the earlier delivery is the owner (a copy is handed over once it exists).
    (alert,) = _high(_run(S, [*stock, a, r]), "A")
    assert alert.source_tenant_id == "R"


def test_one_question_asked_twice_has_one_answer() -> None:
    # Both prompts hold one document (two tenants asking about the same text): the same answer is no leak.
    *stock, a, r = _pair(5)
    doc = _texts(55, 1)[0]
    events = [*stock, (*a[:5], f"{a[5]} {doc}", a[6]), (*r[:5], f"{r[5]} {doc}", r[6])]
    assert "identical" not in _modes(_run(S, events))


def test_answers_that_differ_or_prompts_too_short_to_tell_are_not_judged() -> None:
    *stock, a, r = _pair(6)
    # R's answer is A's with a few words of its own more: two answers, not one handed over.
    assert "identical" not in _modes(_run(S, [*stock, a, (*r[:6], f"{r[6]} Regards, the support team")]))
    # Prompts of a few words share nothing because they hold next to nothing.
    events = [*stock, (*a[:5], "Hello there", a[6]), (*r[:5], "Hi again", r[6])]
    assert "identical" not in _modes(_run(S, events))


def test_a_stock_answer_many_sessions_were_given_is_no_witness() -> None:
    *stock, a, r = _pair(7)
    # Three other tenants got this very answer, minutes apart, before: the model's stock reply, common text now.
    again = [
        (f"t{i}", f"T{i}", -3_000.0 + 400 * i, -2_990.0 + 400 * i, "d1", _texts(90 + i, 1)[0], a[6]) for i in range(3)
    ]
    alerts = [x for x in _run(S, [*stock, *again, a, r]) if x.tenant_id in ("A", "R")]
    assert "identical" not in _modes(alerts)


def test_an_answer_handed_over_again_from_before_is_a_copy_of_the_earlier_receiver() -> None:
    # A response cache keyed wrongly: A's answer served to R a minute after A got it (mixup_copy_before_s).
    *stock, a, r = _pair(8)
    (alert,) = _high(_run(S, [*stock, a, ("r1", "R", 160.0, 161.0, *r[4:])]), "R")
    assert alert.source_tenant_id == "A" and alert.evidence[0].figures["source_request_ids"] == ["a1"]
    # Five minutes later still (a cache keeps its answers: ADR 0034); past the copies' window nothing pairs them.
    assert "identical" in _modes(_run(S, [*stock, a, ("r1", "R", 400.0, 401.0, *r[4:])]))
    assert "identical" not in _modes(_run(S, [*stock, a, ("r1", "R", 760.0, 761.0, *r[4:])]))
