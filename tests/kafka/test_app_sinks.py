"""The Faust app's glue to the sinks, without a broker: the worker's own KafkaPipeline (Faust app built, not
started) with its topics' `send` recorded in memory, fed by the real ingest and join stages. A sink overriding
one hook hears that hook; a sink that raises is counted (on /counters) and the alerts still go out.
The same wiring with the OpenTelemetry sink runs on the real broker in tests/broker/test_kafka_runtime.py."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
from factories import request, response, stats

from schemas.alert import Alert, IncidentResolved
from schemas.exchange import Exchange
from streams.embedded.runner import EmbeddedRunner
from streams.kafka import frames
from streams.kafka.app import KafkaPipeline
from streams.kafka.inputmsg import InputMessage
from streams.kafka.stages import DomainState, JoinState
from streams.routing import covering_keys
from streams.settings import Settings
from streams.sinks.base import Sink, SinkSet

OVER = 900_000


class Topic:
    """Stands in for a Faust topic: what the app sends, per partition."""

    def __init__(self) -> None:
        self.sent: dict[int | None, list[bytes]] = defaultdict(list)

    async def send(self, key: Any = None, value: Any = None, partition: int | None = None, headers: Any = None) -> None:
        self.sent[partition].append(value)


class OnlyExchanges(Sink):
    def __init__(self) -> None:
        self.request_ids: list[str] = []

    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        self.request_ids.append(exchange.request_id)


class OnlyResolved(Sink):
    def __init__(self) -> None:
        self.resolved: list[IncidentResolved] = []

    def on_resolved(self, resolution: IncidentResolved) -> None:
        self.resolved.append(resolution)


class OnlyRejects(Sink):
    def __init__(self) -> None:
        self.reasons: list[str] = []

    def on_reject(self, reason: str, detail: str) -> None:
        self.reasons.append(reason)


class FailsOnAlert(Sink):
    def on_alert(self, alert: Alert) -> None:
        raise RuntimeError("collector down")


def _lines(s: Settings) -> list[bytes]:
    events = [
        stats(ts=0, context_window=None),
        request("r1", "t", 1, tokens=OVER),
        response("r1", "t", 2, input_tokens=1),
    ]
    lines = [e.model_dump_json().encode() for e in events]
    # Event time far ahead on every partition, so watermarks release the pair and the incident resolves.
    for i, d in enumerate(covering_keys("zz-tick", s.kafka.input_partitions, s.kafka.internal_partitions)):
        tick = {"type": "cache_stats", "event_id": f"tick-{i}", "ts": 7200.0, "cache_domain": d, "role": "unified",
                "capacity_tokens": 1_000_000, "used_tokens": 0}  # fmt: skip
        lines.append(orjson.dumps(tick))
    return [*lines, b'{"type": "request", "ts": "not a time"}']


async def _drive(app: KafkaPipeline, lines: list[bytes]) -> None:
    """What the three agents do with these messages, minus Faust's streams and the broker."""
    n = app.settings.kafka.input_partitions
    msgs = [InputMessage(i % n, i // n, None, line, False) for i, line in enumerate(lines)]
    res = app.ingest.read(msgs, time.monotonic(), time.time())
    for dl in res.dead:
        await app._dead_letter(dl)
    app.ingest.publish(res.newest, res.read_to)
    for send in app.ingest.sends(res.to_join, time.monotonic(), force=True):
        await app._send(app.join_topic, send, "ingest.batches")
    det = app.settings.detection
    for p, values in sorted(app.join_topic.sent.items()):
        st = JoinState.fresh(det)
        for offset, value in enumerate(values):
            await app._join_batch(st, p, offset, frames.decode(value))
    for q, values in sorted(app.domain_topic.sent.items()):
        ds = DomainState.fresh(det, app.counters, app.public)
        for offset, value in enumerate(values):
            await app._domain_batch(ds, q, offset, frames.decode(value))


def test_sinks_overriding_one_hook_each_and_a_failing_one_in_the_kafka_app(tmp_path: Path) -> None:
    s = Settings(detection={"fingerprint_key": "unit-test-fingerprint-key"}, kafka={"data_dir": str(tmp_path)})
    app = KafkaPipeline(s)
    for name in ("join_topic", "domain_topic", "alerts_topic", "dlq_topic"):
        setattr(app, name, Topic())
    exchanges, resolved, rejects = OnlyExchanges(), OnlyResolved(), OnlyRejects()
    app.sinks = SinkSet([FailsOnAlert(), exchanges, resolved, rejects], app.counters)
    lines = _lines(s)
    asyncio.run(_drive(app, lines))

    published = [orjson.loads(v) for values in app.alerts_topic.sent.values() for v in values]
    alerts = [r for r in published if "alert_id" in r]
    embedded = EmbeddedRunner(s).run_files([_write(tmp_path, lines)]).alerts
    assert [a["alert_id"] for a in alerts] == [a.alert_id for a in embedded] and alerts  # byte-identical ids
    assert exchanges.request_ids == ["r1"]
    assert [r.incident_id for r in resolved.resolved] == [alerts[0]["incident_id"]]
    assert rejects.reasons == ["invalid"] and app.counters["deadletter.invalid"] == 1
    assert app.counters["sink_errors.FailsOnAlert.on_alert"] == len(alerts)
    assert app.status()["counters"]["sink_errors.FailsOnAlert.on_alert"] == len(alerts)  # on /counters


def _write(tmp_path: Path, lines: list[bytes]) -> str:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return str(path)
