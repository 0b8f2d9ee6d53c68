"""A real worker on the real broker keeps a request with a weak canary marker: the good marker is planted
(its leak alerts), and the dead-letter topic gets a warning record, marked as such, not the line."""

from __future__ import annotations

from typing import Any

import orjson
from conftest import Workers, consume_records, wait_for
from factories import weak_canary_story
from kafka import KafkaProducer

from tests.support.kafkanames import KafkaNames

T0 = 1_780_000_000.0


def test_worker_keeps_the_request_and_dead_letters_a_warning(kafka_names: KafkaNames, workers: Workers) -> None:
    w = workers.start(kafka_names, "weak", CROSSTALK_DETECTION__FINGERPRINT_KEY="k")
    wait_for(lambda: w.counters() is not None or not w.alive(), 60, what="the worker's web server")
    prod = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
    for line in weak_canary_story(T0):
        prod.send(kafka_names.input_topic, key=orjson.loads(line)["request_id"].encode(), value=line)
    prod.flush()
    prod.close()
    (dead,) = consume_records(kafka_names.bootstrap, kafka_names.deadletter_topic, 1, timeout_s=150)
    headers = dict(dead.headers)
    assert headers["x-crosstalk-severity"] == b"warning" and headers["x-crosstalk-reason"] == b"weak_canary"
    assert orjson.loads(dead.value) == {"event_id": "q2", "type": "request", "dropped": 1}

    def counted() -> dict[str, Any] | None:
        c = w.counters()
        return c if c and c["counters"].get("events.request", 0) == 3 else None

    c = wait_for(counted, 150, what="all three requests in the core")
    assert c["warnings"] == {"weak_canary": 1} and c["deadletter"] == {}
    assert c["counters"]["canaries.dropped_weak"] == 1
