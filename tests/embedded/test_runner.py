"""The embedded runner keeps going when the core fails on one event: dead-lettered, counted."""

from __future__ import annotations

import io
import json

import pytest
from factories import request, response, stats

from streams.embedded.runner import EmbeddedRunner
from streams.settings import Settings


def test_a_failure_inside_the_core_is_dead_lettered_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    rejects = io.BytesIO()
    runner = EmbeddedRunner(Settings(), rejects_out=rejects)
    real_observe = runner.monitor.observe_evaluated

    def flaky(event):  # type: ignore[no-untyped-def]
        if getattr(event, "request_id", None) == "boom":
            raise RuntimeError("detector bug")
        return real_observe(event)

    monkeypatch.setattr(runner.monitor, "observe_evaluated", flaky)
    runner.feed(stats(ts=0, context_window=None), "f", 1)
    runner.feed(request("boom", "t", 1), "f", 2)
    runner.feed(request("r1", "t", 2, tokens=900_000), "f", 3)
    alerts = runner.feed(response("r1", "t", 3, input_tokens=1), "f", 4)
    alerts += runner.tick(3.0)  # a live runner's clock: what waited for a later instant is judged
    assert [a.kind for a in alerts] == ["overlong_accepted"]
    (row,) = [json.loads(x) for x in rejects.getvalue().splitlines()]
    assert (row["line"], row["reason"]) == (2, "internal_error") and "detector bug" in row["detail"]
    assert runner.rejects.counts["internal_error"] == 1


def test_live_feed_rejects_events_ahead_of_the_wall_clock() -> None:
    rejects = io.BytesIO()
    runner = EmbeddedRunner(Settings(), rejects_out=rejects)
    runner._wall_clock = lambda: 1_000_000.0
    assert runner.feed(stats(ts=1_000_000.0 + 301, context_window=None), "live", 1) == []
    (row,) = [json.loads(x) for x in rejects.getvalue().splitlines()]
    assert row["reason"] == "future_ts" and "wall clock" in row["detail"]
    assert runner.monitor.watermark == float("-inf") and not runner.monitor.domains  # nothing moved
    runner.feed(stats(ts=1_000_000.0 + 299, context_window=None), "live", 2)
    runner.feed(request("r1", "t", 1_000_000.0 + 299, tokens=900_000), "live", 3)
    alerts = runner.feed(response("r1", "t", 1_000_000.0 + 299.5, input_tokens=1), "live", 4)
    alerts += runner.tick(1_000_000.0)
    assert [a.kind for a in alerts] == ["overlong_accepted"]
