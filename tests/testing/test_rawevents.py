"""The raw-event helpers shared by the Kafka tests and the benchmark (tests/support/rawevents.py)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.partitioner.default import murmur2

from schemas.events import CacheStats, parse_event_obj
from streams.routing import partition_of, routing_key
from streams.settings import KafkaSettings
from tests.support.rawevents import key_of, tick_events

EVENTS: list[dict[str, Any]] = [
    {"type": "request", "event_id": "q1", "ts": 10.0, "request_id": "req-1", "tenant_id": "acme", "model": "m",
     "prompt_tokens": 12, "cache_domain": "pool-a"},
    {"type": "response", "event_id": "r1", "ts": 11.0, "request_id": "req-1", "tenant_id": "acme", "model": "m",
     "cache_domain": "pool-a", "status_code": 200},
    {"type": "cache_stats", "event_id": "c1", "ts": 9.0, "cache_domain": "pool-a", "role": "prefill",
     "capacity_tokens": 100, "used_tokens": 5},
    {"type": "canary", "event_id": "k1", "ts": 8.0, "tenant_id": "globex",
     "marker": "CTK-CANARY-5f1c0a9e2b7d4c31a8e6f0d2"},
]  # fmt: skip


@pytest.mark.parametrize("ev", EVENTS, ids=lambda ev: ev["type"])
def test_key_of_a_raw_event_is_the_routing_key_of_the_parsed_one(ev: dict[str, Any]) -> None:
    assert key_of(ev) == routing_key(parse_event_obj(ev)).encode()


@pytest.mark.parametrize(("inputs", "internal"), [(1, 1), (4, 8), (12, 6)])
def test_ticks_reach_every_partition_after_the_last_event(inputs: int, internal: int) -> None:
    kafka = KafkaSettings(input_partitions=inputs, internal_partitions=internal)
    ticks = tick_events(500.0, kafka)
    parsed = [parse_event_obj(t) for t in ticks]
    assert all(isinstance(t, CacheStats) and t.ts == 4100.0 and t.role == "unified" for t in parsed)
    keys = [key_of(t) for t in ticks]
    assert {(murmur2(k) & 0x7FFFFFFF) % inputs for k in keys} == set(range(inputs))
    assert {partition_of(k.decode(), internal) for k in keys} == set(range(internal))
    assert len({t["event_id"] for t in ticks}) == len(ticks)  # never deduplicated away
    assert tick_events(0.0, kafka, ahead_s=30.0)[0]["ts"] == 30.0
