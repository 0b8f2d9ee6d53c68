"""The other direction of a proven mix-up (detectors/mixup_crossed.py, ADR 0030): two streams crossed at a gateway
hand text both ways. Once one direction is proven (here by the owner's numbers in the receiver's answer, ADR 0027),
the owner's output holding a little of the receiver's prompt, common text counted, names the owner a receiver too.
Every scenario also runs through the embedded, direct and staged runners (tests/parity.py)."""

from __future__ import annotations

from factories import Exchanged, run_exchanges
from factories import high_on as _high
from factories import private_texts as _texts

from detectors.settings import DetectionSettings
from schemas.alert import Alert

S = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key="crossed", fleet_delay_s=30.0)
T0 = 10_000.0


def _run(events: list[Exchanged]) -> list[Alert]:
    return run_exchanges(S, events, T0)


def _modes(alerts: list[Alert]) -> set[str]:
    return {e.figures["delivery_mixup"] for a in alerts for e in a.evidence if "delivery_mixup" in e.figures}


def _streams(seed: int, back: int, a_sent: float = 100.0, r_domain: str = "d2") -> list[Exchanged]:
    """R's answer carries A's case (its numbers); A's answer carries `back` words of R's prompt."""
    words_a, words_r, answer_a, answer_r = _texts(seed, 4)
    prompt_a = f"{words_a} My order 38713357 was paid from DE44500105175407324931."
    quote = " ".join(words_r.split()[:back])
    return [
        ("a1", "A", a_sent, a_sent + 4.0, "d1", prompt_a, f"{answer_a[:300]} {quote}".strip()),
        ("r1", "R", 100.5, 104.5, r_domain, words_r, f"{answer_r[:300]} order 38713357, DE44500105175407324931"),
    ]


def test_the_owner_of_a_proven_mixup_holding_the_receivers_prompt_text_is_high_too() -> None:
    for r_domain in ("d1", "d2"):
        assert _high(_run(_streams(3, 0, r_domain=r_domain)), "A") == []  # one direction only: the owner is clean
        alerts = _run(_streams(3, 9, r_domain=r_domain))
        (on_r,) = _high(alerts, "R")
        (on_a,) = _high(alerts, "A")
        assert on_r.source_tenant_id == "A" and on_a.source_tenant_id == "R"
        f = on_a.evidence[0].figures
        assert f["delivery_mixup"] == "crossed" and f["source_request_ids"] == ["r1"] and f["matched_fingerprints"] >= 2
        assert "its answer holds tenant R's prompt too: the two streams crossed (crossed)" in on_a.summary


def test_text_can_only_cross_between_requests_open_at_once() -> None:
    # A was answered and gone a minute before R was sent: nothing of R's prompt existed to cross into A's answer.
    alerts = _run(_streams(4, 9, a_sent=30.0))
    assert "crossed" not in _modes(alerts) and _high(alerts, "A") == []


def test_text_the_owners_own_prompt_holds_is_its_own() -> None:
    a, r = _streams(5, 9)
    quote = " ".join(r[5].split()[:9])
    alerts = _run([(*a[:5], f"{a[5]} {quote}", a[6]), r])  # A had pasted the same words: its answer quotes them
    assert "crossed" not in _modes(alerts) and _high(alerts, "A") == []
