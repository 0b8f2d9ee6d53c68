"""The consumer group's session and rebalance timeouts come from the settings (issue 42): with Faust's fixed 60 s, a
worker killed without leaving kept its partitions unread for a minute on a 3-node cluster, and a whole-cluster
restart right after such a kill held the rebalance for another minute (bench/bench_cluster.py). Without a broker:
the worker's own KafkaPipeline builds its aiokafka consumer as Faust would."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiokafka
import pytest
from pydantic import ValidationError

from streams.kafka.app import KafkaPipeline
from streams.settings import Settings


def _consumer(tmp_path: Path, **kafka: object) -> aiokafka.AIOKafkaConsumer:
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key"},
        kafka={"data_dir": str(tmp_path), "topology": "direct", **kafka},
    )
    pipe = KafkaPipeline(s)

    async def build() -> aiokafka.AIOKafkaConsumer:
        thread = pipe.app.consumer._new_consumer_thread()  # type: ignore[attr-defined]
        consumer = thread._create_worker_consumer(pipe.app.transport)
        assert isinstance(consumer, aiokafka.AIOKafkaConsumer)
        return consumer

    return asyncio.run(build())


def test_the_group_timeouts_are_the_settings(tmp_path: Path) -> None:
    default = _consumer(tmp_path)
    # Not Faust's 60 s: with it a killed worker's partitions stayed unread for a minute (docs/operations.md)
    assert (default._session_timeout_ms, default._rebalance_timeout_ms) == (15_000, 20_000)
    long = _consumer(tmp_path, session_timeout_s=60, rebalance_timeout_s=90)
    assert (long._session_timeout_ms, long._rebalance_timeout_ms) == (60_000, 90_000)


def test_a_session_timeout_the_broker_refuses_is_refused_here() -> None:
    # Kafka's group.min.session.timeout.ms is 6 s: a shorter one would fail every join, worker after worker.
    with pytest.raises(ValidationError):
        Settings(kafka={"session_timeout_s": 3})
