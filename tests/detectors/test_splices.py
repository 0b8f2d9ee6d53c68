"""Two streams spliced (detectors/mixup_splice.py, `mixup_splices`): a run of one tenant's answer delivered inside
another tenant's answer streamed at the same time. The shared text is in both outputs; the receiver is the side whose
delivered text exceeds what its usage (the engine's own count) explains. Each scenario runs through the embedded,
direct and staged runners (tests/parity.py)."""

from __future__ import annotations

import pytest
from factories import high_on as _high
from factories import private_texts as _texts
from factories import request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert

S = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key="splices")
# Text units per output token of both tenants' answers: usage = words / RATIO.
RATIO = 0.75


def _usage(text: str, extra_words: int = 0) -> dict[str, object]:
    words = len(text.split()) - extra_words
    return {"usage": {"input_tokens": 300, "output_tokens": round(words / RATIO)}}


def _warm(m: Monitor, seed: int) -> list[Alert]:
    """Five answers of each tenant, one at a time, with their usage: the ratio each tenant's text has."""
    out: list[Alert] = []
    texts = _texts(100 + seed, 10)
    for i, text in enumerate(texts):
        tenant, ts = "AB"[i % 2], 10.0 * i
        out += m.observe(request(f"w{i}", tenant, ts, text=f"question {i} {text[:200]}"))
        answer = " ".join(text.split()[20:50])
        out += m.observe(response(f"w{i}", tenant, ts + 2.0, text=answer, **_usage(answer)))
    return out


def _pair(seed: int, a_gets: bool, b_gets: bool, usage: bool = True) -> list[Alert]:
    """A and B streamed at the same time (200 s to 206 s); 25 words of each answer spliced into the other's as asked,
    with each usage counting its own answer only."""
    prompt_a, prompt_b, *words = _texts(seed, 6)
    answer_a, answer_b = f"{words[0]} {words[1][:200]}", f"{words[2]} {words[3][:200]}"  # about 90 words each
    piece_a, piece_b = " ".join(answer_a.split()[10:35]), " ".join(answer_b.split()[10:35])
    out_a = f"{answer_a} {piece_b if a_gets else ''}".strip()
    out_b = f"{answer_b} {piece_a if b_gets else ''}".strip()
    m = Monitor(S)
    alerts = _warm(m, seed)
    alerts += m.observe(request("a", "A", 200.0, text=f"my question {prompt_a}"))
    alerts += m.observe(request("b", "B", 201.0, text=f"my question {prompt_b}"))
    kw_a = _usage(out_a, 25 if a_gets else 0) if usage else {"input_tokens": None}
    kw_b = _usage(out_b, 25 if b_gets else 0) if usage else {"input_tokens": None}
    alerts += m.observe(response("a", "A", 205.0, text=out_a, **kw_a))
    alerts += m.observe(response("b", "B", 206.0, text=out_b, **kw_b))
    return alerts


@pytest.mark.parametrize("seed", range(3))
def test_a_run_of_another_stream_in_an_answer_names_its_source_and_only_the_receiver(seed: int) -> None:
    alerts = _pair(seed, a_gets=False, b_gets=True)
    (alert,) = _high(alerts, "B")
    assert alert.source_tenant_id == "A" and alert.request_ids == ["b"]
    assert any(e.figures.get("delivery_mixup") == "splice" for e in alert.evidence)
    assert _high(alerts, "A") == []
    # Without a usage nothing tells the receiver (content still judges the text: it found A's answer in B's here).
    unused = _pair(seed, True, False, usage=False)
    assert not any(e.figures.get("delivery_mixup", "").startswith("splice") for a in unused for e in a.evidence)


@pytest.mark.parametrize("seed", range(2))
def test_the_receiver_delivered_first_gets_a_late_alert(seed: int) -> None:
    alerts = _pair(seed, a_gets=True, b_gets=False)
    assert [(a.request_ids, a.source_tenant_id) for a in _high(alerts, "A")] == [(["a"], "B")]
    assert _high(alerts, "B") == []


@pytest.mark.parametrize("seed", range(2))
def test_two_streams_crossed_both_ways_name_each_other(seed: int) -> None:
    alerts = _pair(seed, a_gets=True, b_gets=True)
    assert [a.source_tenant_id for a in _high(alerts, "A")] == ["B"]
    assert [a.source_tenant_id for a in _high(alerts, "B")] == ["A"]


def test_a_shared_passage_whose_usage_explains_both_answers_is_no_splice() -> None:
    # Both usages count every word: the engine wrote the shared text for both (a phrase the tenants' model knows).
    # Whether B's answer holds A's delivered text is content's to judge, as before.
    prompt_a, prompt_b, answer_a, answer_b, _, _ = _texts(7, 6)
    common = " ".join(answer_a.split()[10:35])
    m = Monitor(S)
    alerts = _warm(m, 7)
    pair = (("a", "A", 200.0, prompt_a, answer_a), ("b", "B", 201.0, prompt_b, answer_b))
    for rid, tenant, ts, prompt, answer in pair:
        out = f"{' '.join(answer.split()[:40])} {common}"
        alerts += m.observe(request(rid, tenant, ts, text=f"my question {prompt}"))
        alerts += m.observe(response(rid, tenant, ts + 5.0, text=out, **_usage(out)))
    assert not any(e.figures.get("delivery_mixup", "").startswith("splice") for a in alerts for e in a.evidence)


def test_answers_not_streamed_at_the_same_time_are_no_splice() -> None:
    # B's request was sent after A's answer was delivered: no stream of A's was open to cross into it.
    prompt_a, prompt_b, answer_a, answer_b, _, _ = _texts(8, 6)
    piece_a = " ".join(answer_a.split()[10:35])
    out_a, out_b = " ".join(answer_a.split()[:40]), f"{' '.join(answer_b.split()[:40])} {piece_a}"
    m = Monitor(S.model_copy(update={"mixup_copy_before_s": 0}))
    alerts = _warm(m, 8)
    alerts += m.observe(request("a", "A", 200.0, text=f"my question {prompt_a}"))
    alerts += m.observe(response("a", "A", 205.0, text=out_a, **_usage(out_a)))
    alerts += m.observe(request("b", "B", 230.0, text=f"my question {prompt_b}"))
    alerts += m.observe(response("b", "B", 236.0, text=out_b, **_usage(out_b, 25)))
    assert not any(e.figures.get("delivery_mixup") == "splice" for a in alerts for e in a.evidence)


def test_a_tenant_whose_text_per_token_varies_widely_is_not_judged() -> None:
    # Answers in several languages (or code and prose) spread the ratio: a spliced run hides in the tenant's variety,
    # and the tenant's own variety must not read as one.
    prompt_a, prompt_b, *words = _texts(9, 6)
    m = Monitor(S)
    alerts: list[Alert] = []
    for i, text in enumerate(_texts(109, 10)):
        tenant, ts, answer = "AB"[i % 2], 10.0 * i, " ".join(text.split()[20:50])
        used = round(len(answer.split()) / (0.4 + 0.2 * (i // 2)))  # 0.4 to 1.2 words per token
        alerts += m.observe(request(f"w{i}", tenant, ts, text=f"question {i} {text[:200]}"))
        alerts += m.observe(response(f"w{i}", tenant, ts + 2.0, text=answer, usage={"output_tokens": used}))
    answer_a, answer_b = f"{words[0]} {words[1][:200]}", f"{words[2]} {words[3][:200]}"
    out_b = f"{answer_b} {' '.join(answer_a.split()[10:35])}"
    alerts += m.observe(request("a", "A", 200.0, text=f"my question {prompt_a}"))
    alerts += m.observe(request("b", "B", 201.0, text=f"my question {prompt_b}"))
    alerts += m.observe(response("a", "A", 205.0, text=answer_a, **_usage(answer_a)))
    alerts += m.observe(response("b", "B", 206.0, text=out_b, **_usage(out_b, 25)))
    assert not any(e.figures.get("delivery_mixup", "").startswith("splice") for a in alerts for e in a.evidence)
