"""token_accounting_mismatch against the normal engine/gateway ratio, learned per model and tenant (issue 24):
a gateway counting with another tokenizer is normal once learned; the placeholder is an alert from the start."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest
from factories import request, response

from detectors.domain import DomainMonitor
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert
from schemas.exchange import Exchange
from tests.support.live import judge_now, observe_now

GATEWAY = 30_000


def _call(m: Monitor, i: int, tenant: str, engine: int, gateway: int = GATEWAY, model: str = "glm") -> list[Alert]:
    ts = 10.0 * i
    rid = f"{tenant}-{i}"
    out = observe_now(m, request(rid, tenant, ts, tokens=gateway, model=model))
    return out + observe_now(m, response(rid, tenant, ts + 1, input_tokens=engine, ttft_ms=2_000, model=model))


def _accounting(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if a.kind == "token_accounting_mismatch"]


def test_a_steady_3x_ratio_raises_nothing_after_it_is_learned() -> None:
    # Through a real LiteLLM proxy: 9 of 9 normal calls raised a high alert (gateway 3x the engine's count).
    m = Monitor(DetectionSettings())
    alerts = [a for i in range(60) for a in _call(m, i, "acme", GATEWAY // 3)]
    assert _accounting(alerts) == []


def test_the_placeholder_is_high_from_the_first_event_and_after_learning() -> None:
    m = Monitor(DetectionSettings())
    (first,) = _accounting(_call(m, 0, "acme", 1, gateway=800_000))
    assert first.severity == "high" and first.evidence[0].figures["basis"] == "floor"
    for i in range(1, 40):
        assert _accounting(_call(m, i, "acme", GATEWAY // 3)) == []
    (late,) = _accounting(_call(m, 40, "acme", 1, gateway=800_000))
    f = late.evidence[0].figures
    # The norm is kept in eighths of an octave: within 5 % of a third.
    assert late.severity == "high" and f["normal_ratio"] == pytest.approx(1 / 3, rel=0.05)
    assert f["engine_input_tokens"] == 1


def test_a_sudden_change_from_the_learned_ratio_raises() -> None:
    m = Monitor(DetectionSettings())
    for i in range(20):
        assert _accounting(_call(m, i, "acme", GATEWAY // 3)) == []
    # A tenth of the gateway's count: above the floor, so only the learned norm (a third) makes it an alert,
    # and the fixed rule of old (half the gateway's count) would have raised the 3x calls too.
    (a,) = _accounting(_call(m, 20, "acme", GATEWAY // 10))
    f = a.evidence[0].figures
    assert a.severity == "high" and f["basis"] == "learned" and f["ratio"] == 0.1
    assert f["normal_ratio"] == pytest.approx(1 / 3, rel=0.05)
    assert _accounting(_call(m, 21, "acme", GATEWAY // 3)) == []  # and the norm holds


def test_each_tenant_and_model_has_its_own_norm() -> None:
    # A tenant writing Japanese counts 3x at the gateway, one writing English 1x, on one model; another model
    # counts alike for both. None of them is abnormal, whatever the mix.
    m = Monitor(DetectionSettings())
    calls = [("ja", "glm", GATEWAY // 3), ("en", "glm", GATEWAY), ("en", "llama", GATEWAY // 2)]
    for i in range(30):
        for tenant, model, engine in calls:
            assert _accounting(_call(m, i, tenant, engine, model=model)) == []
    # The English tenant at the Japanese tenant's ratio is a departure for it.
    (a,) = _accounting(_call(m, 31, "en", GATEWAY // 3, model="glm"))
    assert a.tenant_id == "en" and a.evidence[0].figures["normal_ratio"] == 1.0


def test_a_lasting_change_becomes_the_norm_within_half_a_window() -> None:
    s = DetectionSettings()
    m = Monitor(s)
    for i in range(s.accounting_window):
        _call(m, i, "acme", GATEWAY)
    # The gateway moves to another tokenizer: alerts until the new ratio is the majority of the window.
    raised = [bool(_accounting(_call(m, 100 + i, "acme", GATEWAY // 3))) for i in range(s.accounting_window)]
    assert raised[0] and not raised[-1]
    assert sum(raised) <= s.accounting_window // 2 + 1


def _exchange(i: int, engine: int) -> Exchange:
    req = request(f"r{i}", "acme", 10.0 * i, tokens=GATEWAY, model="glm")
    return Exchange(ts=10.0 * i + 1, request=req, response=response(f"r{i}", "acme", 10.0 * i + 1, input_tokens=engine))


def test_the_learned_norm_survives_a_snapshot() -> None:
    dm = DomainMonitor("d1", DetectionSettings())
    for i in range(20):
        assert judge_now(dm, _exchange(i, GATEWAY)) == []
    # The domain's snapshot, as the Kafka checkpoints store it: a third of the gateway's count departs from
    # the learned 1x for the restored domain ...
    restored = DomainMonitor.loads(dm.dumps(), DetectionSettings())
    assert restored.detectors["accounting"].norms.state_size() == 20
    assert _accounting(judge_now(restored, _exchange(20, GATEWAY // 3)))
    # ... while a fresh one, which has learned nothing, lets it pass (it is above the floor).
    assert judge_now(DomainMonitor("d1", DetectionSettings()), _exchange(20, GATEWAY // 3)) == []


def test_a_snapshot_from_before_the_norms_restores_and_learns() -> None:
    from detectors.signals.mechanism import AccountingDetector

    s = DetectionSettings()
    old = AccountingDetector.__new__(AccountingDetector)
    old.__setstate__({"s": s})  # what a snapshot of the stateless detector held
    assert old.state_size() == 0 and old._quick == s.accounting_floor_ratio
    assert pickle.loads(pickle.dumps(old)).norms.learn_min == s.accounting_learn_min


def test_errors_and_the_placeholder_are_never_learned() -> None:
    m = Monitor(DetectionSettings())
    for i in range(20):
        _call(m, i, "acme", 1, gateway=800_000)  # each one an alert, none of them normal
        observe_now(m, request(f"e{i}", "acme", 10.0 * i + 5, tokens=GATEWAY, model="glm"))
        observe_now(m, response(f"e{i}", "acme", 10.0 * i + 6, input_tokens=10, status=500, model="glm"))
    det = m.domain("d1").detectors["accounting"]
    assert det.state_size() == 0
    assert len(_accounting(_call(m, 30, "acme", 1, gateway=800_000))) == 1


# Another prompt's usage (ADR 0020): an answer delivered to the wrong request carries the usage of the prompt it
# answered. Judged against the tenant's own counts of prompts of about the same size.


def _usage_call(m: Monitor, i: int, tenant: str, gateway: int, engine: int, **usage: int) -> list[Alert]:
    ts = 10.0 * i
    rid = f"{tenant}-u{i}"
    out = observe_now(m, request(rid, tenant, ts, tokens=gateway, model="glm"))
    resp = response(rid, tenant, ts + 1, input_tokens=engine, ttft_ms=300, model="glm")
    if usage:
        resp = resp.model_copy(update={"usage": resp.usage.model_copy(update=usage)})  # type: ignore[union-attr]
    return out + observe_now(m, resp)


def _learn(m: Monitor, tenant: str, sizes: list[int], engine: Callable[[int], int], n: int = 12) -> None:
    for i in range(n):
        gateway = sizes[i % len(sizes)]
        assert _accounting(_usage_call(m, i, tenant, gateway, engine(gateway))) == []


def test_an_answer_counting_another_prompt_is_high_both_ways() -> None:
    # A swap between a 300-token and a 900-token chat turn: each answer carries the other's usage.
    m = Monitor(DetectionSettings())
    _learn(m, "short", [280, 300, 320], lambda g: g)
    _learn(m, "long", [800, 900, 1_000], lambda g: round(g * 1.1))
    (up,) = _accounting(_usage_call(m, 50, "short", 300, 990))
    (down,) = _accounting(_usage_call(m, 51, "long", 900, 300))
    for a, direction in ((up, "above"), (down, "below")):
        f = a.evidence[0].figures
        assert a.severity in ("high", "critical") and f["basis"] == "other_prompt" and f["direction"] == direction
    assert up.evidence[0].figures["normal_ratio"] == 1.0
    assert "counted another prompt" in up.summary or "input tokens for a prompt of" in up.summary
    # The tenants' own next turns are normal again: the swapped counts were not learned as theirs.
    for i in range(52, 60):
        assert _accounting(_usage_call(m, i, "short", 300, 300)) == []
        assert _accounting(_usage_call(m, i, "long", 900, 990)) == []


def test_a_fixed_overhead_on_short_prompts_is_no_departure() -> None:
    # A template or injected system prompt the gateway does not count: 200 tokens on every prompt. Its ratio runs
    # from 5x (50 tokens) to 1.2x (1,000); neighbours in size agree, so no size departs by 2x.
    m = Monitor(DetectionSettings())
    sizes = [50, 60, 75, 90, 110, 140, 170, 210, 260, 330, 400, 500, 620, 780, 1_000]
    for i in range(200):
        g = sizes[(i * 7) % len(sizes)]
        assert _accounting(_usage_call(m, i, "acme", g, g + 200)) == [], g
    # ... while a 400-token prompt answered with a 1,100-token prompt's usage departs (its neighbours say 600).
    assert _accounting(_usage_call(m, 300, "acme", 400, 1_300))


def test_too_few_or_disagreeing_neighbours_and_a_small_gap_are_not_judged() -> None:
    s = DetectionSettings()
    m = Monitor(s)
    # Too few prompts of about this size.
    _learn(m, "cold", [300], lambda g: g, n=3)
    _learn(m, "cold", [3_000], lambda g: g, n=10)
    assert _accounting(_usage_call(m, 20, "cold", 300, 1_200)) == []
    # Neighbours that disagree (images counted by estimate): an octave either way.
    for i in range(16):
        _usage_call(m, 30 + i, "loose", 400, 280 if i % 2 else 560)
    assert _accounting(_usage_call(m, 60, "loose", 400, 1_300)) == []
    # A tiny prompt: 3x, but fewer tokens apart than the gap.
    _learn(m, "tiny", [40], lambda g: g)
    assert _accounting(_usage_call(m, 70, "tiny", 40, 120)) == []
    assert _accounting(_usage_call(m, 71, "tiny", 40, 40 + s.accounting_min_gap_tokens + 60))


def test_a_provider_counting_cached_tokens_apart_explains_a_shortfall() -> None:
    # Anthropic-style usage: input_tokens excludes what was read from the cache.
    m = Monitor(DetectionSettings())
    _learn(m, "acme", [500, 600], lambda g: g)
    assert _accounting(_usage_call(m, 40, "acme", 600, 100, cached_input_tokens=500)) == []
    assert _accounting(_usage_call(m, 41, "acme", 600, 100))


def test_large_prompts_keep_the_placeholder_rule() -> None:
    m = Monitor(DetectionSettings())
    _learn(m, "acme", [GATEWAY], lambda g: g)
    (a,) = _accounting(_usage_call(m, 41, "acme", GATEWAY, GATEWAY // 3))
    assert a.evidence[0].figures["basis"] == "learned" and "direction" not in a.evidence[0].figures


def test_the_counts_survive_a_snapshot_and_an_old_one_restores() -> None:
    from detectors.signals.mechanism import AccountingDetector

    dm = DomainMonitor("d1", DetectionSettings())
    for i in range(12):
        req = request(f"r{i}", "acme", 10.0 * i, tokens=300, model="glm")
        resp = response(f"r{i}", "acme", 10.0 * i + 1, input_tokens=300, model="glm")
        assert judge_now(dm, Exchange(ts=10.0 * i + 1, request=req, response=resp)) == []
    restored = DomainMonitor.loads(dm.dumps(), DetectionSettings())
    req = request("r99", "acme", 500.0, tokens=300, model="glm")
    swapped = Exchange(ts=501.0, request=req, response=response("r99", "acme", 501.0, input_tokens=900, model="glm"))
    assert _accounting(judge_now(restored, swapped))
    # A detector pickled before the counts existed held its settings and norms only.
    old = AccountingDetector.__new__(AccountingDetector)
    old.__setstate__({"s": DetectionSettings(), "norms": restored.detectors["accounting"].norms})
    assert old.sizes.state_size() == 0 and old.norms.state_size() == 0
