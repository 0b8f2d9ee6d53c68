"""`crosstalk probe --kafka`: the probe's events published to the real broker's input topic (gateway producer)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic

from schemas.events import parse_event
from streams.outputs import KafkaOutput, ValidatedOutput
from streams.probe.identities import Identity
from streams.probe.run import Prober
from streams.sim.serving.core import EngineConfig
from streams.sim.serving.server import EngineThread, LiveEngine

pytestmark = pytest.mark.kafka


def test_probe_events_reach_the_input_topic_keyed_and_valid(kafka_names: Any) -> None:
    admin = KafkaAdminClient(bootstrap_servers=kafka_names.bootstrap)
    admin.create_topics([NewTopic(kafka_names.input_topic, 2, 1)])
    admin.close()
    settings = kafka_names.settings(probe={"rate_per_s": 200.0})
    output = ValidatedOutput(KafkaOutput(settings, send_text=True), settings)
    with EngineThread(LiveEngine(EngineConfig(), "pd-abort-bug")) as th:
        prober = Prober(settings, th.base_url, [Identity("probe-a", "a"), Identity("probe-b", "b")], output=output)
        report = asyncio.run(prober.run_cycle())
        prober.close()
    assert report.exit_code == 1
    sent = sum(report.events.values())
    consumer = KafkaConsumer(
        kafka_names.input_topic,
        bootstrap_servers=kafka_names.bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=15_000,
        fetch_max_bytes=50 << 20,
    )
    msgs = []
    for msg in consumer:
        msgs.append(msg)
        if len(msgs) >= sent:
            break
    consumer.close()
    assert len(msgs) == sent
    events = [parse_event(m.value) for m in msgs]
    assert {e.type for e in events} == {"canary", "request", "response"}
    for m, e in zip(msgs, events, strict=True):
        if e.type in ("request", "response"):
            assert m.key == e.request_id.encode()  # keyed as the gateway library keys them
