"""A stale page cannot outlive its pool (detectors/pool.py): a content match whose newest source text is several
turnovers of the domain's largest KV pool old is at most a warning, and only when it is a whole response (what a
delivery mix-up hands over); a passage inside an answer is then info. Within the pool it is judged as before."""

from __future__ import annotations

import random

import pytest
from factories import request, response, stats
from hypothesis import given
from hypothesis import strategies as st

from detectors.monitor import Monitor
from detectors.pool import PoolClock
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert
from tests.support.live import observe_now

WORDS = [f"w{i:04d}" for i in range(6000)]
POOL = 100_000  # tokens: the domain's largest pool


def _settings(**kw: object) -> DetectionSettings:
    base = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "pool-horizon-tests"}
    return DetectionSettings.model_validate(base | kw)


def _leak_after(allocated: int, seed: int, whole: bool = False, **kw: object) -> Alert | None:
    """Tenant S sends a private text; other traffic allocates `allocated` tokens; then R's answer carries 30 words of
    S's text inside 40 of its own (`whole`: R's answer is S's whole text). Returns R's cross-tenant alert, if any."""
    rng = random.Random(seed)
    words = rng.sample(WORDS, 400)
    private, own = " ".join(words[:80]), words[80:]
    m = Monitor(_settings(**kw))
    observe_now(m, stats(domain="d1", ts=0, capacity=POOL, used=10_000))
    observe_now(m, request("s1", "S", 1, text=private))
    observe_now(m, response("s1", "S", 2, text="noted", input_tokens=200))
    t, left, i = 3.0, allocated, 0
    while left > 0:  # filler traffic of another tenant, 8,000 tokens a call, 5 s apart
        n = min(left, 8_000)
        observe_now(m, request(f"f{i}", "F", t, text=" ".join(own[i % 200 : i % 200 + 5])))
        observe_now(m, response(f"f{i}", "F", t + 1, text="ok", input_tokens=n - 50))
        t, left, i = t + 5, left - n, i + 1
    page = " ".join(words[20:50])
    observe_now(m, request("r1", "R", t + 10, text="hello there"))
    out = private if whole else f"{' '.join(own[300:320])} {page} {' '.join(own[320:340])}"
    alerts = [
        a for a in observe_now(m, response("r1", "R", t + 11, text=out)) if a.kind == "cross_tenant_contamination"
    ]
    assert len(alerts) <= 1
    return alerts[0] if alerts else None


@pytest.mark.parametrize("seed", range(4))
def test_a_source_gone_from_the_pool_makes_a_warning_only_for_a_whole_response(seed: int) -> None:
    near = _leak_after(POOL // 2, seed)
    assert near is not None and SEVERITY_RANK[near.severity] >= SEVERITY_RANK["high"]
    assert near.evidence[0].figures["pool_turnovers"] < 1
    # Past the pool a passage inside R's own answer is what a public echo looks like: no alert.
    assert _leak_after(3 * POOL, seed) is None
    # A whole response of S is what a delivery mix-up (a gateway's response cache) hands over: a warning.
    far = _leak_after(3 * POOL, seed, whole=True)
    assert far is not None and far.severity == "warning" and far.evidence[0].figures["pool_turnovers"] > 2
    # The share rule off: the passage is a warning, as before.
    kept = _leak_after(3 * POOL, seed, overlap_beyond_pool_share=0)
    assert kept is not None and kept.severity == "warning"
    # The horizon off: judged as if the pool held everything.
    off = _leak_after(3 * POOL, seed, overlap_pool_turnovers=0)
    assert off is not None and SEVERITY_RANK[off.severity] >= SEVERITY_RANK["high"]


def test_without_cache_stats_nothing_is_out_of_the_pool() -> None:
    clock = PoolClock(900.0)
    clock.add(0.0, 10**9)
    clock.add(10.0, 10**9)
    assert clock.since(0.0) == 10**9  # what came after the first mark
    assert clock.since(11.0) == 0  # no mark as late: nothing is known to have been allocated since


@given(st.lists(st.tuples(st.floats(0, 50), st.integers(0, 10_000)), min_size=1, max_size=60), st.floats(0, 3000))
def test_since_never_exceeds_what_was_allocated_after(steps: list[tuple[float, int]], at: float) -> None:
    clock, t, log = PoolClock(900.0), 0.0, []
    for dt, tokens in steps:
        t += dt
        clock.add(t, tokens)
        log.append((t, tokens))
    truth = sum(n for ts, n in log if ts >= at)
    assert 0 <= clock.since(at) <= truth
    assert len(clock._marks) <= 900.0 / clock.step_s + 2  # bounded by the window
