"""Which source a mixed output names, and runs that continue the receiver's own text (issue 10).

Each case runs under several fingerprint keys: winnowing selects different k-grams under each, and the claims
hold for all of them (the guarantees are in units, not in a lucky selection)."""

from __future__ import annotations

import random

import pytest
from factories import request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert
from tests.support.live import observe_now

KEYS = [f"attribution-test-key-{i}" for i in range(6)]


def _words(seed: int, n: int) -> list[str]:
    """`n` words no other text of these tests holds (and no stock phrase)."""
    rng = random.Random(seed)
    return ["".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(3)) for _ in range(n)]


def _text(words: list[str]) -> str:
    return " ".join(words)


def _monitor(key: str, **kw: object) -> Monitor:
    base: dict[str, object] = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": key}
    return Monitor(DetectionSettings(**(base | kw)))


def _run(m: Monitor, events: list) -> list[Alert]:
    out: list[Alert] = []
    for e in events:
        out += observe_now(m, e)
    return out


def _source(tenant: str, rid: str, ts: float, words: list[str], tokens_per_word: float) -> list:
    """A tenant whose prompt and answer hold `words`; the engine counted `tokens_per_word` tokens per word."""
    text = _text(words)
    return [
        request(rid, tenant, ts, text=text),
        response(rid, tenant, ts + 1, text=text, **_usage(round(len(words) * tokens_per_word))),
    ]


def _usage(tokens: int) -> dict[str, object]:
    return {"usage": {"input_tokens": 2_000, "output_tokens": tokens}}


# --- a mixed output names its dominant source --------------------------------------------------------------
@pytest.mark.parametrize("key", KEYS)
def test_a_mixed_output_names_the_source_of_most_leaked_tokens(key: str) -> None:
    # A's text costs the engine two tokens per unit (a word-unit text: weighed at the word ratio, 1.3), B's one (a
    # character-unit text): 70 units of A are ~91 tokens, 80 of B are 80, although B's passage gives more
    # fingerprints than A's (fingerprints count units, not tokens).
    a, b, own = _words(1, 120), _words(2, 120), _words(3, 60)
    page_a, page_b = a[20:90], b[20:100]

    def run(tokens_per_word_a: float, page_a: list[str] = page_a) -> list[Alert]:
        leaked = _text(own[:15] + page_a + own[15:30] + page_b + own[30:45])
        m = _monitor(key, overlap_usage_tokens=True)
        events = _source("A", "a1", 0, a, tokens_per_word_a) + _source("B", "b1", 10, b, 1.0)
        events += [request("v1", "V", 20, text="Tell me about my report."), response("v1", "V", 21, text=leaked)]
        return _run(m, events)

    alert, other = run(2.0)
    assert (alert.kind, alert.source_tenant_id) == ("cross_tenant_contamination", "A")
    assert SEVERITY_RANK[alert.severity] >= SEVERITY_RANK["high"]
    # The other origin is named beside it, and its page proves a leak too: it is a victim with an alert of its own.
    signal = next(s for s in alert.evidence if s.name == "cross_tenant_contamination")
    assert signal.source_tenant_id == "A" and signal.figures["other_sources"] == ["B"]
    assert (other.kind, other.source_tenant_id, other.request_ids) == ("cross_tenant_contamination", "B", ["v1"])
    assert SEVERITY_RANK[other.severity] >= SEVERITY_RANK["high"] and other.alert_id != alert.alert_id
    # Control: when A's units are of B's class, B put more tokens into the output and is named first. (A shorter page
    # of A: lengths are estimated from fingerprints, whose density varies by text and key by ~10 %.)
    assert [a.source_tenant_id for a in run(1.0, a[20:75])] == ["B", "A"]


# --- a run that continues the receiver's own text ------------------------------------------------------------
@pytest.mark.parametrize("key", KEYS)
def test_a_document_both_tenants_hold_is_not_a_page_inserted_into_the_output(key: str) -> None:
    # Both tenants work with the same file (vendored, or the same shared document); B's prompt holds its first
    # part, and B's answer goes on quoting the file past what B sent: 20 words that only A had in the window.
    # The strong-run rule is set aside: this is about short runs, which alone would be a high alert.
    doc, filler = _words(4, 120), _words(5, 40)
    settings = {"overlap_strong_matches": 100}
    m = _monitor(key, **settings)
    events = _source("A", "a1", 0, doc, 1.3)
    events += [
        request("b1", "B", 20, text="Why does this fail?\n" + _text(doc[:60])),
        response("b1", "B", 21, text=_text(doc[30:80] + filler)),
    ]
    assert [a for a in _run(m, events) if SEVERITY_RANK[a.severity] >= SEVERITY_RANK["warning"]] == []
    # Control: the same 20 words inserted between B's own text and new text, B's prompt without the file,
    # are a page of A's text in B's output.
    m = _monitor(key, **settings)
    own = _words(6, 60)
    events = _source("A", "a1", 0, doc, 1.3)
    events += [
        request("b1", "B", 20, text="Why does this fail?\n" + _text(own)),
        response("b1", "B", 21, text=_text(own[:30] + doc[60:80] + filler)),
    ]
    (alert,) = _run(m, events)
    assert (alert.source_tenant_id, alert.severity) in {("A", "high"), ("A", "critical")}
