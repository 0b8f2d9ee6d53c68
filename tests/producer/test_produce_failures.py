"""A message the cluster never takes is counted and reported, not dropped in silence (issue 42: `produce_file` sent
and forgot; on a 3-node cluster 44 events whose partitions had no leader for ~10 s failed after the producer's 10
retries and the run still ended well). On the real broker: a topic whose max.message.bytes refuses one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from kafka.admin import NewTopic

from streams.producer import admin_client, make_producer, produce_file

KafkaNames = Any  # fixture of tests/conftest.py

pytestmark = pytest.mark.kafka


def _stats(i: int, pad: int = 0) -> bytes:
    ev = {
        "type": "cache_stats", "event_id": f"cs-{i}", "ts": 1787821200.0 + i, "cache_domain": "d1" + "x" * pad,
        "role": "unified", "capacity_tokens": 1000, "used_tokens": 0,
    }  # fmt: skip
    return orjson.dumps(ev)


def test_a_message_the_cluster_refuses_is_counted(kafka_names: KafkaNames, tmp_path: Path) -> None:
    k = kafka_names.settings().kafka
    admin = admin_client(k.bootstrap)
    try:
        admin.create_topics([NewTopic(k.input_topic, 1, 1, topic_configs={"max.message.bytes": "2000"})])
    finally:
        admin.close()
    path = tmp_path / "events.jsonl"
    # Alone: kafka-python splits a refused batch of several records and then fails its flush (UnknownError).
    path.write_bytes(_stats(1, pad=5000) + b"\n")
    res = produce_file(str(path), k)
    # Handed to the client (an over-long domain name is a bad line, published for dead-lettering) ...
    assert sum(res.sent.values()) + sum(res.bad_lines.values()) == 1
    assert dict(res.failed) == {"MessageSizeTooLargeError": 1}, res.failed  # ... and refused by the broker


def test_the_producer_retries_until_its_delivery_timeout(kafka_bootstrap: str) -> None:
    # A count of retries ran out in about a second while a killed broker's partitions had no leader yet.
    from streams.settings import KafkaSettings

    prod = make_producer(KafkaSettings(bootstrap=kafka_bootstrap))
    try:
        assert prod.config["retries"] == float("inf") and prod.config["acks"] == -1
    finally:
        prod.close()
