"""The engine's prefix-cache reuse on an alert's evidence (issue 40): the prefill pool's share of queried prompt
tokens served from its cache between its last two cache_stats, as a figure of the `cache_pressure` signal."""

from __future__ import annotations

import pickle

from factories import request, response, stats

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from detectors.signals.capacity import CapacityTracker
from schemas.alert import Alert

OVER = 800_000  # > 681,280: an overlong prompt the pool accepted raises an alert with cache_pressure beside it


def _pressure(events: list) -> dict:
    m = Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0))
    alerts: list[Alert] = []
    for e in events:
        alerts += m.observe(e)
    (a,) = [x for x in alerts + m.flush() if x.kind == "overlong_accepted"]
    return next(s.figures for s in a.evidence if s.name == "cache_pressure")


def _overlong(ts: float) -> list:
    return [request("r", "a", ts, tokens=OVER), response("r", "a", ts + 1, input_tokens=OVER, ttft_ms=20_000)]


def test_the_pools_reuse_between_its_last_two_readings_is_on_the_evidence() -> None:
    figures = _pressure(
        [
            stats(ts=0, prefix_cache_hits_total=1_000, prefix_cache_queries_total=4_000),
            stats(ts=15, prefix_cache_hits_total=1_600, prefix_cache_queries_total=5_000),
            *_overlong(20),
        ]
    )
    assert figures["prefix_cache_hit_share"] == 0.6 and figures["prefix_cache_queried_tokens"] == 1_000


def test_no_interval_no_figure_and_a_restarted_engine_starts_again() -> None:
    one = _pressure([stats(ts=0, prefix_cache_hits_total=5, prefix_cache_queries_total=9), *_overlong(2)])
    assert "prefix_cache_hit_share" not in one  # one reading is no interval
    restarted = _pressure(
        [
            stats(ts=0, prefix_cache_hits_total=9_000, prefix_cache_queries_total=10_000),
            stats(ts=15, prefix_cache_hits_total=10, prefix_cache_queries_total=100),  # counters began again
            *_overlong(20),
        ]
    )
    assert "prefix_cache_hit_share" not in restarted
    assert "prefix_cache_hit_share" not in _pressure([stats(ts=0), stats(ts=15), *_overlong(20)])


def test_a_snapshot_from_before_the_reuse_figures_restores() -> None:
    old = CapacityTracker()
    for name in ("reuse", "reuse_share"):
        delattr(old, name)
    restored = pickle.loads(pickle.dumps(old))
    assert restored.reuse_figures() == {}
    restored.observe_stats(stats(ts=0, prefix_cache_hits_total=1, prefix_cache_queries_total=2))
    restored.observe_stats(stats(ts=1, prefix_cache_hits_total=2, prefix_cache_queries_total=4))
    assert restored.reuse_figures() == {"prefix_cache_hit_share": 0.5, "prefix_cache_queried_tokens": 2}
