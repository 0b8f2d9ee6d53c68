"""The domain's MechanismScreen returns exactly what the three mechanism detectors return one after the other,
whatever the figures and thresholds; domains use it only when those detectors lead the registry unchanged; and
the core's cheaper paths keep their snapshots as before (dedup front time, a domain's settings)."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.dedup import Deduper
from detectors.domain import DomainMonitor
from detectors.plan import Plan
from detectors.settings import DetectionSettings
from detectors.signals.capacity import CapacityTracker
from detectors.signals.mechanism import AccountingDetector, MechanismScreen, OverlongDetector, PrefillDetector
from schemas.events import Request, Response, Usage
from schemas.exchange import Exchange

TOKENS = st.one_of(st.integers(0, 5), st.integers(0, 2_000_000), st.sampled_from([1024, 32_768, 681_280]))


@st.composite
def exchanges(draw: st.DrawFn) -> Exchange:
    req = Request(
        type="request", event_id="e1", ts=1.0, request_id="r", tenant_id="t", model="m",
        prompt_tokens=draw(TOKENS), context_window=draw(st.none() | TOKENS),
    )  # fmt: skip
    usage = draw(st.none() | st.builds(Usage, input_tokens=st.none() | TOKENS, output_tokens=st.none() | TOKENS))
    resp = Response(
        type="response", event_id="e2", ts=2.0, request_id="r", tenant_id="t", model="m", cache_domain="d",
        status_code=draw(st.sampled_from([200, 201, 299, 300, 413, 500])), usage=usage,
        ttft_ms=draw(st.none() | st.sampled_from([0.0, 0.5, 1.0, 80.0, 1e4]) | st.floats(0, 1e6)),
    )  # fmt: skip
    halves = draw(st.sampled_from(["both", "request", "response"]))
    return Exchange(
        ts=2.0, request=req if halves != "response" else None, response=resp if halves != "request" else None
    )


SETTINGS = st.builds(
    DetectionSettings,
    prefill_min_tokens=st.sampled_from([0, 1, 32_768]),
    accounting_min_ratio=st.sampled_from([0.01, 0.5, 0.99]),
    accounting_min_gateway_tokens=st.sampled_from([0, 1, 1024]),
    prefill_max_tokens_per_s=st.sampled_from([1.0, 400_000.0]),
    overlong_min_status=st.sampled_from([200, 300]),
    overlong_max_status=st.sampled_from([299, 599]),
)


@settings(max_examples=400, deadline=None)
@given(ex=exchanges(), s=SETTINGS, capacity=st.none() | TOKENS)
def test_the_screen_returns_what_the_three_detectors_return(
    ex: Exchange, s: DetectionSettings, capacity: int | None
) -> None:
    facts = CapacityTracker()
    facts.prefill_capacity = capacity
    detectors = (OverlongDetector(s), AccountingDetector(s), PrefillDetector(s))
    try:
        expected = [sig for d in detectors for sig in d.observe(ex, facts)]
    except ZeroDivisionError:  # a zero gateway count under accounting_min_gateway_tokens=0: the detector's own
        expected = None
    screen = MechanismScreen(*detectors)
    try:
        got = screen.observe(ex, ex.request, ex.response, facts)
    except ZeroDivisionError:
        got = None
    assert got == expected


def test_domains_screen_only_the_registered_mechanism_detectors() -> None:
    s = DetectionSettings()
    dm = DomainMonitor("d", s)
    plan = Plan(dm.detectors)
    assert plan.screen is not None
    assert len(plan.observers) == len(dm.detectors) - 3  # the screen stands for the three
    # Another detector in a mechanism detector's place: no screen, every detector observed as registered.
    other = {"overlong": PrefillDetector(s), **{k: v for k, v in dm.detectors.items() if k != "overlong"}}
    plan = Plan(other)
    assert plan.screen is None and len(plan.observers) == len(other)


def test_a_domain_pickles_its_settings_alone_and_restores_the_copy() -> None:
    s = DetectionSettings(domain_lateness_s=2.5)
    dm = DomainMonitor("d", s)
    state = dm.__getstate__()
    assert "s" in state and not {"_s", "_lateness", "_plan"} & set(state)
    assert list(state)[:2] == ["cache_domain", "s"]  # the keys and order of snapshots from before the copy
    restored = pickle.loads(pickle.dumps(dm))
    assert (restored.s, restored._lateness) == (s, 2.5)
    restored.s = DetectionSettings()
    assert restored._lateness == 0.0


def test_a_deduper_restored_with_an_unknown_front_time_expires_exactly() -> None:
    d = Deduper(1_000, 10.0)
    for i in range(20):
        d.seen(f"e{i}", float(i))
    state = dict(d.__dict__, _front_ts=float("-inf"))  # how an older snapshot could hold it: unknown
    old = Deduper.__new__(Deduper)
    old.__setstate__(state)
    assert old._front_ts == 9.0  # the front's own time (e0..e8 left the window), not -inf
    # An -inf front would drop e9 here, though it is still inside the window (horizon 5).
    assert not old.seen("new", 15.0) and old.state_size() == 12 and old.seen("e9", 15.0)
