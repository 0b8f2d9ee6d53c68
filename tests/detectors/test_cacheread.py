"""foreign_cache_read (detectors/signals/cacheread.py): a response whose engine says it served a prefix from its cache
that its own tenant never sent in the domain. Evidence beside another signal's alert; never an alert alone, never
a change of kind, severity or id."""

from __future__ import annotations

from typing import Any

from factories import request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert
from tests.support.live import observe_now

S = DetectionSettings(cache_read_window_s=600.0)


def _usage(engine: int, cached: int | None) -> dict[str, Any]:
    return {"input_tokens": engine, "output_tokens": 50, "cached_input_tokens": cached}


def _call(m: Monitor, rid: str, tenant: str, ts: float, tokens: int, cached: int | None, **kw: Any) -> list[Alert]:
    out = observe_now(m, request(rid, tenant, ts, tokens=tokens))
    return out + observe_now(m, response(rid, tenant, ts + 1, usage=_usage(kw.pop("engine", tokens), cached), **kw))


def _cache_read(alert: Alert) -> dict[str, Any] | None:
    found = [s for s in alert.evidence if s.name == "foreign_cache_read"]
    assert len(found) <= 1
    return found[0].figures if found else None


def test_alone_it_raises_no_alert() -> None:
    m = Monitor(S)
    # Tenant b's first request: 6,000 of its 8,000 tokens came from a prefix tenant a computed. Shared system
    # prompts do exactly this on an engine that does not salt its cache per tenant: no alert.
    assert _call(m, "a1", "a", 0.0, 8_000, None) == []
    assert _call(m, "b1", "b", 10.0, 8_000, 6_000) == []


def test_beside_a_mechanism_alert_it_is_evidence_and_changes_nothing_else() -> None:
    # The placeholder: the engine counted one token of an 8,000-token prompt and still claims a cached prefix.
    def placeholder(cached: int | None) -> Alert:
        m = Monitor(S)
        _call(m, "a1", "a", 0.0, 8_000, None)
        (alert,) = [a for a in _call(m, "b1", "b", 10.0, 8_000, cached, engine=1)]
        return alert

    plain, claimed = placeholder(None), placeholder(6_000)
    assert _cache_read(plain) is None
    figures = _cache_read(claimed)
    assert figures == {"engine_cached_input_tokens": 6_000, "own_longest_prompt_tokens": 0,
                       "gateway_prompt_tokens": 8_000, "window_s": 600.0}  # fmt: skip
    assert (claimed.alert_id, claimed.kind, claimed.severity) == (plain.alert_id, plain.kind, plain.severity)
    assert [s.name for s in claimed.evidence if s.name != "foreign_cache_read"] == [s.name for s in plain.evidence]


def _evidence_for(m: Monitor, rid: str, tenant: str, ts: float, cached: int, tokens: int = 8_000) -> Any:
    alerts = _call(m, rid, tenant, ts, tokens, cached, engine=1)  # a placeholder, so that an alert carries it
    assert alerts, "the placeholder raises an alert"
    return _cache_read(alerts[0])


def test_a_prefix_its_own_tenant_sent_is_no_evidence_until_the_window_passes() -> None:
    m = Monitor(S)
    _call(m, "b0", "b", 0.0, 7_000, None)
    assert _evidence_for(m, "b1", "b", 100.0, 6_500, tokens=7_000) is None  # b sent 7,000 tokens a moment ago
    assert _evidence_for(m, "b2", "b", 200.0, 7_500, tokens=9_000) == {  # more than b ever sent before
        "engine_cached_input_tokens": 7_500, "own_longest_prompt_tokens": 7_000, "gateway_prompt_tokens": 9_000,
        "window_s": 600.0,
    }  # fmt: skip
    # Long after b's last long prompt (over twice the window): its own prompts no longer explain a cached prefix.
    later = 200.0 + 2 * S.cache_read_window_s + 10
    assert _evidence_for(m, "b3", "b", later, 6_500) is not None


def test_short_reused_prefixes_are_everyday() -> None:
    m = Monitor(S)
    assert _evidence_for(m, "b1", "b", 0.0, S.cache_read_min_tokens - 1) is None
    assert _evidence_for(m, "b2", "c", 10.0, S.cache_read_min_tokens) is not None
