"""The one Sink base and the SinkSet fan-out both runners call sinks through."""

from __future__ import annotations

import logging
from collections import Counter

import pytest
from factories import request

from schemas.alert import Alert, IncidentResolved
from schemas.exchange import Exchange
from streams.sinks.base import Sink, SinkSet

HOOKS = (
    "on_event",
    "on_exchange",
    "on_alert",
    "on_resolved",
    "on_reject",
    "set_state_size_source",
    "set_lag_source",
    "set_behind_source",
    "close",
)


def _alert(i: int) -> Alert:
    return Alert(
        alert_id=f"a{i}", ts=float(i), kind="overlong_accepted", severity="high", cache_domain="d1", score=0.9,
        summary="s", group_key="g", incident_id="i",
    )  # fmt: skip


class Calls(Sink):
    """Records every hook it hears, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def on_event(self, type: str) -> None:
        self.calls.append(f"on_event:{type}")

    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        self.calls.append(f"on_exchange:{exchange.request_id}:{len(alerts)}")

    def on_alert(self, alert: Alert) -> None:
        self.calls.append(f"on_alert:{alert.alert_id}")

    def on_resolved(self, resolution: IncidentResolved) -> None:
        self.calls.append(f"on_resolved:{resolution.incident_id}")

    def on_reject(self, reason: str, detail: str) -> None:
        self.calls.append(f"on_reject:{reason}")

    def set_state_size_source(self, fn):  # type: ignore[no-untyped-def]
        self.calls.append(f"state:{fn()}")

    def set_lag_source(self, fn):  # type: ignore[no-untyped-def]
        self.calls.append(f"lag:{fn()}")

    def set_behind_source(self, fn):  # type: ignore[no-untyped-def]
        self.calls.append(f"behind:{fn()}")

    def close(self) -> None:
        self.calls.append("close")


class Broken(Sink):
    """Raises from every hook."""

    def __getattribute__(self, name: str):  # type: ignore[no-untyped-def]
        if name in HOOKS:

            def fail(*args: object) -> None:
                raise RuntimeError(f"{name} broke")

            return fail
        return super().__getattribute__(name)


def _every_hook(target: Sink) -> None:
    ex = Exchange(ts=1.0, request=request("r1", "t", 1.0), response=None, orphan="no_response")
    target.on_event("request")
    target.on_exchange(ex, [_alert(1)])
    target.on_alert(_alert(1))
    target.on_resolved(IncidentResolved(incident_id="i", group_key="g", cache_domain="d1",
                                        first_ts=1.0, last_ts=1.0, resolved_at=700.0, alerts=1))  # fmt: skip
    target.on_reject("not_json", "line 3")
    target.set_state_size_source(lambda: 7)
    target.set_lag_source(lambda: {"0": 2})
    target.set_behind_source(lambda: 1.5)
    target.close()


EXPECTED = ["on_event:request", "on_exchange:r1:1", "on_alert:a1", "on_resolved:i", "on_reject:not_json", "state:7",
            "lag:{'0': 2}", "behind:1.5", "close"]  # fmt: skip


def test_the_base_has_every_hook_as_a_no_op() -> None:
    for hook in HOOKS:
        assert callable(getattr(Sink, hook)), hook
    _every_hook(Sink())  # nothing raises, nothing needed overriding


def test_sinkset_keeps_going_past_a_sink_that_raises_and_counts_and_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before, after = Calls(), Calls()
    counters: Counter[str] = Counter()
    sinks = SinkSet([before, Broken(), after], counters)
    with caplog.at_level(logging.WARNING, logger="crosstalk.sinks"):
        _every_hook(sinks)
        sinks.on_alert(_alert(2))
    assert before.calls == after.calls == [*EXPECTED, "on_alert:a2"]
    assert counters == {f"sink_errors.Broken.{hook}": 2 if hook == "on_alert" else 1 for hook in HOOKS}
    first = [r for r in caplog.records if "Broken" in r.getMessage() and "on_alert" in r.getMessage()]
    assert first[0].levelno == logging.ERROR and first[0].exc_info is not None  # the traceback, once
    assert "on_alert broke" in str(first[0].exc_info[1])
    assert len({r.getMessage() for r in caplog.records if r.levelno == logging.ERROR}) == len(HOOKS)


def test_a_sink_failing_on_every_event_does_not_flood_the_log(caplog: pytest.LogCaptureFixture) -> None:
    counters: Counter[str] = Counter()
    sinks = SinkSet([Broken()], counters)
    with caplog.at_level(logging.WARNING, logger="crosstalk.sinks"):
        for _ in range(1000):
            sinks.on_event("request")
    assert counters["sink_errors.Broken.on_event"] == 1000
    assert len(caplog.records) == 4  # the 1st (with traceback), then the 10th, 100th and 1000th


def test_sinkset_takes_only_sinks() -> None:
    class Duck:
        def on_alert(self, alert: Alert) -> None: ...

    with pytest.raises(TypeError, match="Duck is not a"):
        SinkSet([Calls(), Duck()])  # type: ignore[list-item]
