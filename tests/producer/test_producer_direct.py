"""Producing for the direct topology (kafka.topology=direct) on the real broker: every event of a cache
domain, both halves of a pair included, on that domain's input partition; canaries on every partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from kafka import KafkaConsumer

from streams.producer import GatewayProducer, produce_file
from streams.routing import input_partition_of

pytestmark = pytest.mark.kafka
T0 = 1_787_821_200.0
PARTS = 4


def _request(rid: str, domain: str | None = None) -> dict[str, Any]:
    ev = {"type": "request", "event_id": f"{rid}-q", "ts": T0, "request_id": rid, "tenant_id": "t", "model": "m",
          "prompt_tokens": 10}  # fmt: skip
    if domain is not None:
        ev["cache_domain"] = domain
    return ev


def _response(rid: str, domain: str) -> dict[str, Any]:
    return {"type": "response", "event_id": f"{rid}-r", "ts": T0 + 1, "request_id": rid, "tenant_id": "t",
            "model": "m", "cache_domain": domain, "status_code": 200}  # fmt: skip


CANARY = {"type": "canary", "event_id": "c1", "ts": T0, "tenant_id": "probe", "marker": "CT-" + "ab12" * 8}


def _placed(names: Any, n: int) -> dict[str, list[int]]:
    """event_id -> the partitions it was written to."""
    consumer = KafkaConsumer(names.input_topic, bootstrap_servers=names.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)  # fmt: skip
    out: dict[str, list[int]] = {}
    got = 0
    for msg in consumer:
        for line in msg.value.split(b"\n"):
            out.setdefault(orjson.loads(line)["event_id"], []).append(msg.partition)
            got += 1
        if got >= n:
            break
    consumer.close()
    return out


def _direct_settings(names: Any) -> Any:
    return names.settings(kafka={"topology": "direct", "input_partitions": PARTS})


def test_gateway_producer_holds_a_request_until_its_response_names_the_domain(kafka_names: Any) -> None:
    kafka_names.create()
    gp = GatewayProducer(_direct_settings(kafka_names))
    assert gp.publish(_request("r1")) is None, "held: its domain is not known yet"
    gp.publish(_request("r2", "dom-b"))
    gp.publish(CANARY)
    gp.publish(_response("r1", "dom-a"))
    gp.publish(_response("r2", "dom-b"))
    gp.publish(_request("r3"))  # never answered: sent on close, keyed by its request_id, counted
    gp.close()
    assert gp.counts["unpaired"] == 1
    placed = _placed(kafka_names, 9)
    a, b = input_partition_of(b"dom-a", PARTS), input_partition_of(b"dom-b", PARTS)
    assert placed["r1-q"] == placed["r1-r"] == [a]
    assert placed["r2-q"] == placed["r2-r"] == [b]
    assert sorted(placed["c1"]) == list(range(PARTS))
    assert placed["r3-q"] == [input_partition_of(b"r3", PARTS)]


@pytest.mark.parametrize("batch", [1, 3])
def test_produce_file_keys_a_request_by_its_responses_domain(kafka_names: Any, tmp_path: Path, batch: int) -> None:
    kafka_names.create()
    events = [_request("r1"), CANARY, _request("r2", "dom-b"), _response("r1", "dom-a"), _response("r2", "dom-b")]
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    res = produce_file(str(path), _direct_settings(kafka_names).kafka, batch=batch)
    assert not res.bad_lines and sum(res.sent.values()) == 5
    placed = _placed(kafka_names, 4 + PARTS)
    a, b = input_partition_of(b"dom-a", PARTS), input_partition_of(b"dom-b", PARTS)
    assert placed["r1-q"] == placed["r1-r"] == [a]
    assert placed["r2-q"] == placed["r2-r"] == [b]
    assert sorted(placed["c1"]) == list(range(PARTS))
