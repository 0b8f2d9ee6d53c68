"""The worker's consumer lets the broker hold a fetch only `kafka.fetch_max_wait_ms` (Faust hard-codes 1.5 s), without
a broker: the worker's own KafkaPipeline builds its consumer thread, which builds the aiokafka consumer as Faust
would, with our long-poll. Why it matters (aiokafka's one fetch in flight per broker): streams/kafka/consumer.py
`FetchWaitThread`; measured in docs/textrich.md."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiokafka

from streams.kafka.app import KafkaPipeline
from streams.kafka.consumer import FetchWaitThread
from streams.settings import Settings


def _aiokafka_consumer(tmp_path: Path, **kafka: object) -> aiokafka.AIOKafkaConsumer:
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key"},
        kafka={"data_dir": str(tmp_path), "topology": "direct", **kafka},
    )
    pipe = KafkaPipeline(s)

    async def build() -> aiokafka.AIOKafkaConsumer:
        thread = pipe.app.consumer._new_consumer_thread()  # type: ignore[attr-defined]
        assert isinstance(thread, FetchWaitThread)
        consumer = thread._create_worker_consumer(pipe.app.transport)
        assert isinstance(consumer, aiokafka.AIOKafkaConsumer)
        return consumer

    return asyncio.run(build())


def test_the_consumer_long_polls_as_long_as_the_settings_say(tmp_path: Path) -> None:
    assert Settings().kafka.fetch_max_wait_ms == 100
    assert _aiokafka_consumer(tmp_path)._fetch_max_wait_ms == 100
    assert _aiokafka_consumer(tmp_path, fetch_max_wait_ms=1500)._fetch_max_wait_ms == 1500


def test_the_rest_of_fausts_consumer_settings_stay(tmp_path: Path) -> None:
    consumer = _aiokafka_consumer(tmp_path, fetch_max_wait_ms=250, max_message_bytes=3 << 20)
    assert consumer._fetch_max_wait_ms == 250
    assert consumer._max_partition_fetch_bytes == 3 << 20  # Faust's own mapping of its settings, untouched
    assert consumer._enable_auto_commit is False
