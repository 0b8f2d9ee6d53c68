"""The model's stock phrases are common however few tenants write their language (docs/adr/0004, "stock phrases").

A phrase the model writes in the answers of `common_min_sessions` sessions of at least two tenants is its habit,
not a tenant's private text. Where only two tenants write Japanese, the model's Japanese quoting formula is held by
two tenants, and the tenant rule (`common_min_tenants` = 3) never calls it common. Prompts never count, and one
tenant's sessions never suffice: a tenant's private text that it sends in every session (a system prompt, its
files), or that the model writes for it alone, stays rare, and a page of it is still a leak."""

from __future__ import annotations

import random

import pytest
from factories import request, response

from detectors.monitor import Monitor, make_fingerprinter
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert

WORDS = [f"q{i:04d}" for i in range(5000)]  # private vocabulary: no chance k-grams between random texts


def _settings(**kw: object) -> DetectionSettings:
    base: dict[str, object] = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "stock-phrases"}
    return DetectionSettings.model_validate(base | kw)


def _high(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if a.tenant_id == "R" and SEVERITY_RANK[a.severity] >= SEVERITY_RANK["high"]]


def _world(seed: int, sessions: list[tuple[str, str]], **kw: object) -> tuple[set[int], list[Alert]]:
    """Each (tenant, where) is a session holding one 24-word phrase, in the model's answer or in the user's prompt,
    beside words of its own; then R's answer holds the phrase between R's own words. Returns how the overlap
    detector explains the phrase's fingerprints just before R's answer (3: common), and the alerts."""
    rng = random.Random(seed)
    pool = rng.sample(WORDS, 300)
    phrase, own, other = " ".join(pool[:24]), pool[24:84], pool[84:]
    # Cold until R's answer (a domain learns stock phrases in its warm-up): no setup answer is flagged, so each is
    # learned as its tenant's, as a stock phrase the model writes for a second tenant is before alerts start.
    m = Monitor(_settings(**({"overlap_warmup_docs": 2 * len(sessions)} | kw)))
    out: list[Alert] = []
    for i, (tenant, where) in enumerate(sessions):
        sid, words = f"{tenant}-{i}", " ".join(other[i * 10 : i * 10 + 10])
        prompt = f"{words} {phrase}" if where == "prompt" else words
        answer = f"{phrase} {words}" if where == "output" else f"noted {words}"
        out += m.observe(request(f"{tenant}{i}", tenant, 1.0 + i, text=prompt, session_id=sid))
        out += m.observe(response(f"{tenant}{i}", tenant, 1.5 + i, text=answer, session_id=sid))
    out += m.observe(request("r1", "R", 50, text="tell me something", session_id="r"))
    (dm,) = m.domains.values()
    why = set(dm.overlap._explain("R", make_fingerprinter(m.settings).fingerprint_text(phrase).hashes)[0])
    answer = " ".join(own[:20]) + f" {phrase} " + " ".join(own[20:40])
    return why, out + m.observe(response("r1", "R", 51, text=answer, session_id="r"))


@pytest.mark.parametrize("seed", range(6))
def test_a_phrase_in_three_sessions_answers_of_two_tenants_is_the_models_and_no_evidence(seed: int) -> None:
    why, alerts = _world(seed, [("A", "output"), ("A", "output"), ("B", "output")])
    assert why == {3} and _high(alerts) == []
    # Control: with the record off the same fingerprints are unexplained (two tenants are not "common").
    why, _ = _world(seed, [("A", "output"), ("A", "output"), ("B", "output")], common_min_sessions=0)
    assert 3 not in why


@pytest.mark.parametrize("seed", range(6))
def test_one_tenants_sessions_and_prompts_never_make_it_common(seed: int) -> None:
    # The model writing it for one tenant in many sessions: that tenant's matter, and a page of it is a leak.
    why, alerts = _world(seed, [("A", "output")] * 5)
    assert 3 not in why
    assert [a.source_tenant_id for a in _high(alerts)] == ["A"]  # and R's answer is judged warm
    # Two tenants sending it in their prompts, in many sessions: prompts do not count.
    why, _ = _world(seed, [("A", "prompt")] * 5 + [("B", "prompt")])
    assert 3 not in why
    # Two sessions' answers of two tenants: below the count.
    why, _ = _world(seed, [("A", "output"), ("B", "output")])
    assert 3 not in why
