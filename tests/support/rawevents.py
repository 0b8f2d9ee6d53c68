"""Raw events (JSON dicts) for feeding a Kafka pipeline in tests and the benchmark.

- `key_of`: the Kafka message key of a raw event, without validating it (a producer loop that validated
  every event would measure validation, not the pipeline);
- `tick_events`: cache_stats of idle dummy domains far ahead in event time, covering every input and
  internal partition. A stream never "ends": these move every partition's watermark past everything
  before them, as flush() does for the embedded core.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from streams.routing import covering_keys
from streams.settings import KafkaSettings

TICK_PREFIX = "zz-tick"


def key_of(ev: Mapping[str, Any]) -> bytes:
    """streams.routing.routing_key, on a raw event (tests/testing/test_rawevents.py checks they agree)."""
    t = ev["type"]
    if t in ("request", "response"):
        return str(ev["request_id"]).encode()
    if t == "cache_stats":
        return str(ev["cache_domain"]).encode()
    return str(ev["tenant_id"]).encode()


def tick_events(last_ts: float, kafka: KafkaSettings, ahead_s: float = 3600.0) -> list[dict[str, Any]]:
    """One cache_stats per covering key at `last_ts + ahead_s`: an idle unified pool, no signal."""
    keys = covering_keys(TICK_PREFIX, kafka.input_partitions, kafka.internal_partitions)
    return [
        {
            "type": "cache_stats",
            "event_id": f"tick-{i}",
            "ts": last_ts + ahead_s,
            "cache_domain": domain,
            "role": "unified",
            "capacity_tokens": 1_000_000,
            "used_tokens": 0,
        }
        for i, domain in enumerate(keys)
    ]
