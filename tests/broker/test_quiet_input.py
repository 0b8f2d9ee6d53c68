"""Issue 25: when all input goes quiet, the worker releases everything up to the idle watermark, including
the last exchange before the pause, without waiting for some later event (real broker, worker subprocess)."""

from __future__ import annotations

import json
import time
from typing import Any

import orjson
import pytest
from conftest import consume_records, wait_for
from kafka import KafkaProducer

pytestmark = pytest.mark.kafka


def test_the_last_exchange_before_a_pause_is_released(kafka_names: Any, workers: Any) -> None:
    # Short idle and heartbeat settings so the test waits seconds, not the production 30 s; the logic is the same.
    w = workers.start(
        kafka_names,
        "quiet",
        CROSSTALK_KAFKA__WATERMARK_IDLE_S="3",
        CROSSTALK_KAFKA__HEARTBEAT_INTERVAL_S="1",
    )
    wait_for(lambda: w.ready() or not w.alive(), 120, what="the worker to be assigned")
    assert w.alive(), w.log_tail()
    t0 = time.time() - 30.0
    # One exchange and nothing after it, as a probe's last call before a pause: a high alert on its own
    # (the engine counted 10 prompt tokens where the gateway counted 50,000).
    req = {"type": "request", "event_id": "quiet-q", "ts": t0, "request_id": "quiet-r", "tenant_id": "acme",
           "model": "m", "prompt_tokens": 50_000, "cache_domain": "d-quiet"}  # fmt: skip
    resp = {"type": "response", "event_id": "quiet-p", "ts": t0 + 2.0, "request_id": "quiet-r",
            "tenant_id": "acme", "model": "m", "cache_domain": "d-quiet", "status_code": 200,
            "usage": {"input_tokens": 10, "output_tokens": 5}}  # fmt: skip
    prod = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
    for ev in (req, resp):
        prod.send(kafka_names.input_topic, key=b"quiet-r", value=orjson.dumps(ev))
    prod.flush()
    prod.close()
    recs = consume_records(kafka_names.bootstrap, kafka_names.alerts_topic, 1, timeout_s=120)
    alerts = [json.loads(r.value) for r in recs]
    assert [(a["kind"], a["tenant_id"]) for a in alerts] == [("token_accounting_mismatch", "acme")]
    c = w.counters()
    assert c is not None and c["counters"]["events.response"] == 1
