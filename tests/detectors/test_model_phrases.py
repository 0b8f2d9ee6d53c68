"""The model's stock phrases are common however few tenants write their language (docs/adr/0004, "precision").

Provenance decides whose a text is. A phrase that first appeared in the model's answers (a greeting, a disclaimer, a
stock opener, and its re-sends in multi-turn histories) is the model's once it is in `common_min_sessions` (2)
sessions' answers, whatever tenants received them: where only two tenants write Japanese, the model's Japanese
opener is no evidence either. A phrase a tenant introduced in a prompt (its system prompt, its files) stays that
tenant's however often the model repeats it, until a second tenant holds it (`shared_min_tenants` = 2: then it is a
shared template or a public text, no evidence for a content-only alert)."""

from __future__ import annotations

import random

import numpy as np
import pytest
from factories import request, response

from detectors.monitor import Monitor, make_fingerprinter
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert
from tests.support.live import observe_now

WORDS = [f"q{i:04d}" for i in range(5000)]  # private vocabulary: no chance k-grams between random texts


def _settings(**kw: object) -> DetectionSettings:
    base: dict[str, object] = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "stock-phrases"}
    return DetectionSettings.model_validate(base | kw)


def _high(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if a.tenant_id == "R" and SEVERITY_RANK[a.severity] >= SEVERITY_RANK["high"]]


def _world(seed: int, sessions: list[tuple[str, str]], **kw: object) -> tuple[set[int], list[Alert]]:
    """Each (tenant, where) is a session holding one 24-word phrase, in the model's answer, the user's prompt or both,
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
        prompt = f"{words} {phrase}" if where in ("prompt", "both") else words
        answer = f"{phrase} {words}" if where in ("output", "both") else f"noted {words}"
        out += observe_now(m, request(f"{tenant}{i}", tenant, 1.0 + i, text=prompt, session_id=sid))
        out += observe_now(m, response(f"{tenant}{i}", tenant, 1.5 + i, text=answer, session_id=sid))
    out += observe_now(m, request("r1", "R", 50, text="tell me something", session_id="r"))
    (dm,) = m.domains.values()
    hashes = make_fingerprinter(m.settings).fingerprint_text(phrase).hashes
    why = set(dm.overlap._explain("R", hashes, np.asarray(hashes, dtype=np.uint64))[0])
    answer = " ".join(own[:20]) + f" {phrase} " + " ".join(own[20:40])
    return why, out + observe_now(m, response("r1", "R", 51, text=answer, session_id="r"))


@pytest.mark.parametrize("seed", range(6))
def test_a_phrase_the_model_wrote_in_two_sessions_answers_is_its_habit(seed: int) -> None:
    # Only one other tenant writes R's language: its two sessions' answers are enough (the model's opener).
    why, alerts = _world(seed, [("A", "output"), ("A", "output")])
    assert why == {3} and _high(alerts) == []
    # Control: with the record off the same fingerprints are unexplained and R's answer is flagged naming A.
    why, alerts = _world(seed, [("A", "output"), ("A", "output")], common_min_sessions=0)
    assert 3 not in why
    assert [a.source_tenant_id for a in _high(alerts)] == ["A"]


@pytest.mark.parametrize("seed", range(6))
def test_a_phrase_a_tenant_introduced_stays_its_own_however_often_the_model_repeats_it(seed: int) -> None:
    # A's system prompt holds it and the model writes it in every A session: A's matter, and a page of it is a leak.
    why, alerts = _world(seed, [("A", "both")] * 5)
    assert 3 not in why
    assert [a.source_tenant_id for a in _high(alerts)] == ["A"]  # and R's answer is judged warm


@pytest.mark.parametrize("seed", range(6))
def test_one_answer_is_its_tenants_and_two_tenants_share_what_both_hold(seed: int) -> None:
    # One session's answer (a whole response delivered elsewhere is this): A's, a page of it is a leak.
    why, alerts = _world(seed, [("A", "output")])
    assert 3 not in why
    assert [a.source_tenant_id for a in _high(alerts)] == ["A"]
    # Two tenants sending it in their prompts (one vendor's template): shared for both, no one's secret. It is no
    # evidence for a content-only alert (`shared_min_tenants`), though it would still name a source next to a
    # mechanism.
    _, alerts = _world(seed, [("A", "prompt"), ("B", "prompt")])
    assert _high(alerts) == []
    _, alerts = _world(seed, [("A", "prompt"), ("B", "prompt")], shared_min_tenants=3)
    assert _high(alerts) != []  # control: counted as rare, the same text is a page


@pytest.mark.parametrize("seed", range(3))
def test_text_a_tenant_keeps_sending_stays_authored_across_generations(seed: int) -> None:
    # The long-horizon record rotates (here every 5 s of event time); A re-sends its file in every session and the
    # model quotes it: the file stays A's, and a page of it in R's answer is a leak.
    rng = random.Random(seed)
    pool = rng.sample(WORDS, 200)
    phrase, own = " ".join(pool[:30]), pool[30:]
    m = Monitor(_settings(spread_epoch_s=5.0))
    out: list[Alert] = []
    for i in range(6):
        sid = f"a{i}"
        out += observe_now(m, request(f"a{i}", "A", 1.0 + 10 * i, text=f"file: {phrase}", session_id=sid))
        out += observe_now(m, response(f"a{i}", "A", 2.0 + 10 * i, text=f"you wrote {phrase}", session_id=sid))
    out += observe_now(m, request("r1", "R", 80, text="tell me something", session_id="r"))
    answer = " ".join(own[:20]) + f" {phrase} " + " ".join(own[20:40])
    out += observe_now(m, response("r1", "R", 81, text=answer, session_id="r"))
    assert [a.source_tenant_id for a in _high(out)] == ["A"]


def _twice(seed: int, where: str) -> list[list[Alert]]:
    """A's one session holds a 24-word phrase (`where`: in the model's answer, or A's prompt and the answer), learned
    while cold; then the model writes it in two answers to R, in two sessions of R that never sent it. Returns the
    alerts on each of R's answers."""
    rng = random.Random(seed)
    pool = rng.sample(WORDS, 300)
    phrase, own = " ".join(pool[:24]), pool[24:]
    m = Monitor(_settings(overlap_warmup_docs=2))
    prompt = f"{' '.join(own[:10])} {phrase}" if where == "both" else " ".join(own[:10])
    observe_now(m, request("a1", "A", 1.0, text=prompt, session_id="a"))
    observe_now(m, response("a1", "A", 1.5, text=f"{phrase} {' '.join(own[10:20])}", session_id="a"))
    out = []
    for i in range(2):
        words = own[40 + 60 * i : 100 + 60 * i]
        observe_now(m, request(f"r{i}", "R", 50.0 + i, text=" ".join(words[:10]), session_id=f"r{i}"))
        answer = " ".join(words[10:30]) + f" {phrase} " + " ".join(words[30:50])
        out.append(_high(observe_now(m, response(f"r{i}", "R", 50.5 + i, text=answer, session_id=f"r{i}"))))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_a_model_phrase_flagged_once_is_habit_when_the_model_writes_it_again(seed: int) -> None:
    # One session's answer is A's (a whole response delivered to R is this): R's first answer with it is flagged. The
    # model writing it again in R's next session, which never sent it, makes two sessions' answers: the model's habit.
    first, second = _twice(seed, "output")
    assert [a.source_tenant_id for a in first] == ["A"]
    assert second == []


@pytest.mark.parametrize("seed", range(6))
def test_a_page_a_tenant_authored_is_flagged_each_time_it_reaches_the_receiver(seed: int) -> None:
    # Control: the same phrase introduced in A's prompt is A's text; the model writing it into R's answers twice is
    # two leaks of A's page, both flagged (the flagged answer's session counts for the model, authored text never
    # becomes its habit through that).
    first, second = _twice(seed, "both")
    assert [a.source_tenant_id for a in first] == ["A"]
    assert [a.source_tenant_id for a in second] == ["A"]
