"""`crosstalk produce` against hostile files and tools' message limits, on the real broker (issue 11)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic

from streams.cli.main import EXIT_INPUT, EXIT_PARTIAL, main
from streams.producer import BATCH_BYTES, produce_file

pytestmark = pytest.mark.kafka
T0 = 1_787_821_200.0
KCAT_DEFAULT_MESSAGE_MAX_BYTES = 1_000_000  # librdkafka's message.max.bytes default


def request(i: int, text: str = "") -> dict:
    return {"type": "request", "event_id": f"e{i}", "ts": T0 + i, "request_id": f"r{i}", "tenant_id": "t",
            "model": "m", "prompt_tokens": 10, "prompt_text": text}  # fmt: skip


def consume(bootstrap: str, topic: str, n: int) -> list:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000, fetch_max_bytes=50 << 20)  # fmt: skip
    out = []
    for msg in consumer:
        out.append(msg)
        if len(out) >= n:
            break
    consumer.close()
    return out


@pytest.fixture
def topic(kafka_names) -> str:  # type: ignore[no-untyped-def]
    admin = KafkaAdminClient(bootstrap_servers=kafka_names.bootstrap)
    admin.create_topics([NewTopic(kafka_names.input_topic, 1, 1)])  # broker defaults: a 1 MB message limit
    admin.close()
    return kafka_names.input_topic


@pytest.mark.parametrize("topology", ["staged", "direct"])
def test_batches_are_sized_by_bytes_under_the_default_client_limit(  # type: ignore[no-untyped-def]
    kafka_names, topic: str, tmp_path: Path, topology: str
) -> None:
    # Direct batches hold one partition's lines: they too stay under the limit (they once grew to `batch` lines).
    words = " ".join(f"word{i}" for i in range(2500))  # ~15 KB of text per event: 100 events ~ 1.5 MB
    src = tmp_path / "e.jsonl"
    src.write_text("".join(json.dumps(request(i, words) | {"cache_domain": "d1"}) + "\n" for i in range(300)))
    res = produce_file(str(src), kafka_names.settings(kafka={"topology": topology}).kafka, batch=100)
    assert sum(res.sent.values()) == 300
    msgs = consume(kafka_names.bootstrap, topic, 10**6)
    assert sum(len(m.value.split(b"\n")) for m in msgs) == 300
    assert max(len(m.value) for m in msgs) <= BATCH_BYTES < KCAT_DEFAULT_MESSAGE_MAX_BYTES
    assert len(msgs) > 3  # 100 such events would not have fitted one message


def test_hostile_lines_are_counted_and_the_file_is_still_published(kafka_names, topic: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lines = [
        b'{"type":"request","event_id":"x","ts":1' + b"0" * 400 + b',"request_id":"r","tenant_id":"t","model":"m",'
        b'"prompt_tokens":1}',
        json.dumps(request(1) | {"ts": 1e20}).encode(),
        b'{"prompt_text":"' + b"A" * (2 << 20) + b'"}',  # over max_event_bytes (1 MiB below)
        json.dumps(request(2)).encode(),
    ]
    src = tmp_path / "e.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    res = produce_file(str(src), kafka_names.settings().kafka, max_bytes=1 << 20, send_bad=False)
    assert res.sent == {"request": 1} and res.bad_lines == {"invalid": 2, "oversized": 1}


def test_a_truncated_gzip_publishes_what_was_read_and_exits_non_zero(kafka_names, topic: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = gzip.compress("".join(json.dumps(request(i, "some words here")) + "\n" for i in range(2000)).encode())
    gz = tmp_path / "cut.jsonl.gz"
    gz.write_bytes(data[: len(data) // 2])
    env = ["--bootstrap", kafka_names.bootstrap, "--topic", topic, "--no-progress"]
    assert main(["produce", str(gz), *env]) == EXIT_PARTIAL
    assert main(["produce", str(tmp_path / "missing.jsonl"), *env]) == EXIT_INPUT
    msgs = consume(kafka_names.bootstrap, topic, 1)
    assert msgs and json.loads(msgs[0].value)["event_id"] == "e0"
