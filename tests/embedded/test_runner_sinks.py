"""The embedded runner hands the core's results to sinks: a sink overriding one hook gets exactly that hook's
calls, and a sink that raises is counted while the run, the other sinks and the alerts go on unchanged."""

from __future__ import annotations

import io
import json

from factories import request, response, stats

from schemas.alert import Alert
from schemas.exchange import Exchange
from streams.embedded.runner import EmbeddedRunner
from streams.settings import Settings
from streams.sinks.base import Sink
from streams.sinks.jsonl import AlertWriter

OVER = 900_000


class OnlyExchanges(Sink):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None, list[str]]] = []

    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        self.seen.append((exchange.request_id, exchange.orphan, [a.kind for a in alerts]))


class FailsOnAlert(Sink):
    def on_alert(self, alert: Alert) -> None:
        raise RuntimeError("receiver down")


def _events() -> list:
    return [
        stats(ts=0, context_window=None),
        request("r1", "t", 1, tokens=OVER),
        response("r1", "t", 2, input_tokens=1),
        request("r2", "t", 3, cache_domain="d1"),  # never answered: an orphan, evaluated at the end of input
    ]


def _run(sinks: list[Sink]) -> tuple[EmbeddedRunner, list[Alert]]:
    runner = EmbeddedRunner(Settings(), sinks, rejects_out=io.BytesIO())
    alerts = [a for e in _events() for a in runner.feed(e)]
    return runner, alerts + runner.finish(0.0).alerts[len(alerts) :]


def test_a_sink_overriding_only_on_exchange_hears_every_evaluated_exchange() -> None:
    only = OnlyExchanges()
    runner, alerts = _run([only])
    assert [a.kind for a in alerts] == ["overlong_accepted"]
    # The pair while observing (with the alert it raised), the orphan from the final flush.
    assert only.seen == [("r1", None, ["overlong_accepted"]), ("r2", "no_response", [])]
    assert runner.result.counters["exchanges"] == len(only.seen)


def test_a_failing_sink_is_counted_and_the_others_still_get_identical_alerts() -> None:
    clean_out, out = io.BytesIO(), io.BytesIO()
    _, reference = _run([AlertWriter(clean_out)])
    only = OnlyExchanges()
    runner, alerts = _run([FailsOnAlert(), AlertWriter(out), only])
    assert [a.alert_id for a in alerts] == [a.alert_id for a in reference] and alerts
    assert out.getvalue() == clean_out.getvalue() != b""  # the writer after the failing sink still wrote
    assert [json.loads(line)["alert_id"] for line in out.getvalue().splitlines()] == [a.alert_id for a in alerts]
    assert len(only.seen) == 2
    assert runner.result.counters["sink_errors.FailsOnAlert.on_alert"] == len(alerts)
    assert runner.rejects.counts == {}  # a sink's failure is not the event's: nothing dead-lettered
