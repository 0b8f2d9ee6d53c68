"""An answer to another request's prompt, told by the identifiers it carries (detectors/mixup_ids.py, ADR 0027).

The receiver's answer restates another tenant's case in words of its own (no passage is shared with any text the
monitor saw), keeping that case's order and phone numbers. Each scenario runs through the embedded, direct and staged
runners (tests/parity.py), so the identifiers travel in the workers' records and the fleet's frames too."""

from __future__ import annotations

import pytest
from factories import Exchanged, run_exchanges
from factories import high_on as _high
from factories import private_texts as _texts

from detectors.settings import DetectionSettings
from schemas.alert import Alert

S = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key="identifiers", fleet_delay_s=30.0)
# (request id, tenant, sent, delivered, domain, prompt, answer); times from T0
T0 = 1_000.0
Event = Exchanged


def _run(settings: DetectionSettings, events: list[Event]) -> list[Alert]:
    return run_exchanges(settings, events, T0)


def _case(
    seed: int, owner_domain: str, receiver_done: float, owner_done: float, third: str | None = None
) -> list[Event]:
    """R's request, then A's half a second later; R is answered from A's prompt (the KV of A handed to R's decode)."""
    words_a, words_r, answer_words, words_b = _texts(seed, 4)
    prompt_a = f"{words_a} I placed order 38713357, paid from DE44500105175407324931; call me on +1-989-449-4163."
    prompt_r = f"{words_r} Please summarise the attached release notes for version 4.2 in two lines."
    # A's case restated in other words: no passage of A's prompt, its numbers kept.
    leaked = f"{answer_words} regarding 38713357 the refund to DE44500105175407324931 is done; we ring +1-989-449-4163."
    events: list[Event] = [
        ("r1", "R", 100.0, receiver_done, "d2", prompt_r, leaked),
        ("a1", "A", 100.5, owner_done, owner_domain, prompt_a, f"{words_b[:200]} Your refund is on its way."),
    ]
    if third is not None:
        events.append(("b1", "B", -40.0, -35.0, "d3", third, "Closed, thank you."))  # before any copy's window
    return events


@pytest.mark.parametrize("owner_domain", ["d1", "d2"])
@pytest.mark.parametrize("owner_later", [True, False])
def test_an_answer_holding_another_prompts_identifiers_is_high_and_names_its_owner(
    owner_domain: str, owner_later: bool
) -> None:
    # Across pools (prefill shared, decode apart) and within one; the owner delivered after the receiver or before.
    events = _case(3, owner_domain, *((103.0, 104.0) if owner_later else (104.0, 103.0)))
    assert _high(_run(S.model_copy(update={"mixup_identifiers": False}), events), "R") == []
    (alert,) = _high(_run(S, events), "R")
    f = alert.evidence[0].figures
    assert alert.source_tenant_id == "A" and alert.kind == "cross_tenant_contamination"
    assert f["delivery_mixup"] == "identifiers" and f["identifiers"] == 3 and f["source_request_ids"] == ["a1"]
    assert alert.request_ids == ["r1"] and alert.cache_domain == "d2"
    assert alert.summary.startswith("response to tenant R on d2 shares 3 identifiers of tenant A")
    assert "an answer to tenant A's recent prompt: 3 of its identifiers" in alert.summary
    assert _high(_run(S, events), "A") == []  # the owner got its own answer


def test_identifiers_a_third_tenant_wrote_are_public_and_one_alone_is_no_evidence() -> None:
    words = _texts(9, 1)[0]
    # B's ticket held the order number two minutes earlier: two of A's numbers are left, still an answer to A's prompt.
    (alert,) = _high(_run(S, _case(4, "d1", 103.0, 104.0, third=f"{words} ticket 38713357 was closed")), "R")
    assert alert.evidence[0].figures["identifiers"] == 2
    # B held the phone number too: one number alone could be anyone's (a bug number a model writes, a constant).
    third = f"{words} ticket 38713357 was closed, call +1-989-449-4163"
    assert _high(_run(S, _case(4, "d1", 103.0, 104.0, third=third)), "R") == []
    one = S.model_copy(update={"mixup_min_identifiers": 1})
    (alert,) = _high(_run(one, _case(4, "d1", 103.0, 104.0, third=third)), "R")
    assert alert.evidence[0].figures["identifiers"] == 1


def test_requests_that_did_not_overlap_are_not_paired() -> None:
    # A was sent and answered more than HANDED_WITHIN_S (120 s) before R's request was sent: R's answer cannot be
    # decoded from A's prompt in flight, nor be A's answer handed over again.
    (r, a) = _case(5, "d1", 103.0, 104.0)
    assert _high(_run(S, [r, ("a1", "A", -30.0, -28.0, *a[4:])]), "R") == []
    assert _high(_run(S, [r, ("a1", "A", -10.0, -8.0, *a[4:])]), "R") != []  # within it: a prefix or an answer kept


@pytest.mark.parametrize("owner_domain", ["d1", "d2"])
def test_an_owner_stamped_just_after_the_answer_by_another_clock_is_still_its_owner(owner_domain: str) -> None:
    # KV handed to the wrong decode slot, with A's request event stamped by another component's clock 1.1 s after R
    # was answered (blind-v3's prefill/decode pools did this). The numbers say whose case it is, not the order.
    r, a = _case(6, owner_domain, 103.0, 106.0)
    late = [r, ("a1", "A", 104.1, *a[3:])]
    (alert,) = _high(_run(S, late), "R")
    assert alert.source_tenant_id == "A" and alert.evidence[0].figures["delivery_mixup"] == "identifiers"
    assert _high(_run(S.model_copy(update={"mixup_clock_skew_s": 0.0}), late), "R") == []
    # Stamped later than any skew allows: A's prompt did not exist when R's answer was written.
    assert _high(_run(S, [r, ("a1", "A", 103.0 + S.mixup_clock_skew_s + 1.0, 115.0, *a[4:])]), "R") == []


def test_an_answer_of_another_tenant_handed_over_again_is_found_by_its_numbers() -> None:
    # A response cache keyed on the question's meaning: A's answer, a stock reply around A's numbers (one of them the
    # model wrote), served to R a minute later under R's own greeting. Not the very same answer (ADR 0028), and its
    # text quotes no prompt: no copy is told, the numbers tell.
    words_a, words_r, stock = _texts(13, 3)
    answer = f"{stock} Your refund of 1076.88 for order 5251295 is on its way."
    prompt_a = f"{words_a} The coffee machine of order 5251295 arrived broken."
    events: list[Event] = [
        ("a1", "A", 100.0, 104.0, "d1", prompt_a, f"Dear Anna Keller, {answer}"),
        ("r1", "R", 160.0, 161.0, "d2", f"{words_r} Where is my parcel?", f"Dear Rosa Lindqvist, {answer}"),
    ]
    (alert,) = _high(_run(S, events), "R")
    f = alert.evidence[0].figures
    assert alert.source_tenant_id == "A" and f["source_request_ids"] == ["a1"] and f["identifiers"] == 2
    # Neither number in A's prompt: a text the model writes, twice (a documentation's examples), is nobody's case.
    events[0] = ("a1", "A", 100.0, 104.0, "d1", f"{words_a} The coffee machine arrived broken.", events[0][6])
    assert all(e.figures.get("delivery_mixup") != "identifiers" for x in _run(S, events) for e in x.evidence)


def test_an_answer_that_quotes_its_own_prompts_identifiers_as_much_is_its_own() -> None:
    (r, a) = _case(6, "d1", 103.0, 104.0)
    prompt_r = f"{r[5]} Order 55120934, invoice 77310459 and parcel 61827354 are mine."
    answer = f"{r[6]} Your order 55120934, invoice 77310459 and parcel 61827354 are noted."  # three of its own
    assert _high(_run(S, [(*r[:5], prompt_r, answer), a]), "R") == []
    answer = f"{r[6]} Your order 55120934 is noted."  # one of its own, three of A's: A's case it answers
    (alert,) = _high(_run(S, [(*r[:5], prompt_r, answer), a]), "R")
    assert alert.source_tenant_id == "A"


def test_numbers_inside_a_passage_both_texts_hold_are_left_to_content() -> None:
    # R's answer quotes a passage of A's prompt, numbers and all: content judges it (it knows what is public, and what
    # R was shown before); the numbers add nothing.
    (r, a) = _case(11, "d1", 103.0, 104.0)
    alerts = _run(S, [(*r[:6], f"{r[6]} {a[5]}"), a])
    assert all(e.figures.get("delivery_mixup") != "identifiers" for x in alerts for e in x.evidence)


def test_dates_versions_and_short_numbers_are_no_identifiers() -> None:
    (r, a) = _case(7, "d1", 103.0, 104.0)
    tail = " on 2026-03-18 at 12:30, release 1.2.3, room 4711, total 25.00"
    events = [(*r[:5], r[5], f"{_texts(8, 1)[0]}{tail}"), (*a[:5], f"{a[5]}{tail}", a[6])]
    assert _high(_run(S, events), "R") == []


def test_numbers_raise_what_content_found_and_keep_its_figures() -> None:
    # A content finding naming the owner below high (a page it held for a warning) is raised by the numbers; its own
    # figures (how many fingerprints, which requests) stay, the numbers' count is added.
    from detectors.mixup_verdict import _escalate
    from schemas.alert import Signal

    content = Signal(name="cross_tenant_contamination", severity="warning", score=0.5, source_tenant_id="A",
                     figures={"matched_fingerprints": 15, "source_request_ids": ["a0", "a1"]})  # fmt: skip
    numbers = Signal(name="cross_tenant_contamination", severity="high", score=1.0, source_tenant_id="A",
                     figures={"delivery_mixup": "identifiers", "matched_fingerprints": 0, "identifiers": 2,
                              "source_request_ids": ["a1"]})  # fmt: skip
    (raised,) = _escalate([content], numbers)
    assert raised.severity == "high"
    f = raised.figures
    assert f["matched_fingerprints"] == 15 and f["source_request_ids"] == ["a0", "a1"]
    assert f["identifiers"] == 2 and f["delivery_mixup"] == "identifiers"


def _named_case(seed: int, answer_names: str, third: str | None = None) -> list[Event]:
    """A's ticket names its customer and one order number; R's answer, decoded from A's prompt, restates both."""
    words_a, words_r, answer_words, words_b = _texts(seed, 4)
    prompt_a = f"{words_a}\nCustomer: Makogon Oksana Panasivna <hruban@example.com>\nOrder SO-8068854 arrived broken."
    prompt_r = f"{words_r}\nCustomer: Kristen Reid\nWhere is my parcel? Please reply in English."
    leaked = f"Dear {answer_names},\n{answer_words} Your refund for order SO-8068854 is on its way."
    events: list[Event] = [
        ("r1", "R", 100.0, 103.0, "d2", prompt_r, leaked),
        ("a1", "A", 100.5, 104.0, "d1", prompt_a, f"{words_b[:200]} We are sorry."),
    ]
    if third is not None:
        events.append(("b1", "B", 60.0, 61.0, "d3", third, "Closed, thank you."))
    return events


def test_an_answer_with_another_prompts_customer_name_and_one_number_names_its_owner() -> None:
    # One number alone is no case (a constant, a bug number); with the full name of the owner's customer it is.
    (alert,) = _high(_run(S, _named_case(21, "Makogon Oksana Panasivna")), "R")
    f = alert.evidence[0].figures
    assert alert.source_tenant_id == "A" and f["delivery_mixup"] == "identifiers" and f["identifiers"] == 2
    assert f["source_request_ids"] == ["a1"]
    # The receiver's own customer named, or nobody: one number of A's is all that is left.
    assert _high(_run(S, _named_case(21, "Kristen Reid")), "R") == []
    assert _high(_run(S, _named_case(21, "Sir or Madam")), "R") == []


def test_a_name_without_a_number_or_one_a_third_tenant_wrote_is_no_evidence() -> None:
    words = _texts(22, 1)[0]
    # B wrote the name too: a name two tenants hold is a public one (a company's founder, a street). Names are read
    # only in texts that hold a number (they count only beside one): B's ticket has its own.
    third = f"{words} Makogon Oksana Panasivna will call about ticket 55512093."
    assert _high(_run(S, _named_case(22, "Makogon Oksana Panasivna", third=third)), "R") == []
    # The answer keeps the name and no number: names alone are words a model may write for anyone.
    events = _named_case(22, "Makogon Oksana Panasivna")
    r = events[0]
    events[0] = (*r[:6], r[6].replace(" for order SO-8068854", ""))
    assert _high(_run(S, events), "R") == []
