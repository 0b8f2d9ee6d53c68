"""The privacy-preferred deployment (text never leaves the gateway) gets the coverage rule: GatewayProducer sends
each fingerprint's k-gram positions, and what the monitor reads off the real broker alerts as if it had seen the
text (docs/adr/0004, "coverage"). A producer older than the field (no positions) gets the run-count rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from kafka import KafkaConsumer

from schemas.events import unpack
from streams.embedded.runner import EmbeddedRunner
from streams.producer import GatewayProducer
from tests.support.stockphrases import PAGE_SEEDS, STOCK_SEEDS, receivers, settings, traffic

pytestmark = pytest.mark.kafka


def _alerts(path: Path, coverage: bool = True) -> set[tuple[str, str, str | None]]:
    result = EmbeddedRunner(settings(coverage)).run_files([str(path)])
    assert not result.rejects
    return {(a.alert_id, a.severity, a.tenant_id) for a in result.alerts}


def _consume(bootstrap: str, topic: str, n: int) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)  # fmt: skip
    out: list[bytes] = []
    for msg in consumer:
        out.append(msg.value)
        if len(out) >= n:
            break
    consumer.close()
    return out


def test_edge_fingerprints_with_positions_alert_as_the_text_does(kafka_names: Any, tmp_path: Path) -> None:
    kafka_names.create()
    events = traffic(tmp_path, sim=False)
    text_path = tmp_path / "text.jsonl"
    text_path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    s = settings()
    gp = GatewayProducer(s.model_copy(update={"kafka": kafka_names.settings().kafka}))
    for e in events:
        gp.publish(e)
    gp.close()
    sent = _consume(kafka_names.bootstrap, kafka_names.input_topic, len(events))
    assert len(sent) == len(events)
    # Partitions interleave: back in the input's order, so that both runs read the same sequence.
    order = {e["event_id"]: i for i, e in enumerate(events)}
    sent.sort(key=lambda v: order[orjson.loads(v)["event_id"]])
    prints = [d[f] for d in map(orjson.loads, sent) for f in ("prompt_fingerprint", "output_fingerprint") if f in d]
    # Packed (the producer's default): 8 bytes of base64 per hash, 4 per position, one position per hash.
    assert prints and all("hashes" not in fp and "positions" not in fp for fp in prints)
    assert all(len(unpack(fp["positions_b64"], "I", "p")) == len(unpack(fp["hashes_b64"], "Q", "h")) for fp in prints)
    assert not any(b"prompt_text" in v or b"output_text" in v or b"w0001" in v for v in sent)
    wire_path = tmp_path / "wire.jsonl"
    wire_path.write_bytes(b"\n".join(sent) + b"\n")

    by_text = _alerts(text_path)
    assert _alerts(wire_path) == by_text
    stock = {f"cov-rx-{s}" for s in STOCK_SEEDS}
    assert {t for _, sev, t in by_text if t in stock and sev in ("high", "critical")} == set()
    assert {t for _, sev, t in by_text if sev in ("high", "critical")} >= {f"cov-rx-{s}" for s in PAGE_SEEDS}

    # The same messages from a producer older than the field: no positions, the count rule.
    older = []
    for v in sent:
        d = orjson.loads(v)
        for f in ("prompt_fingerprint", "output_fingerprint"):
            if f in d:  # and in the JSON lists of a producer older than the packed form
                d[f]["hashes"] = unpack(d[f].pop("hashes_b64"), "Q", "h")
                del d[f]["positions_b64"]
        older.append(orjson.dumps(d))
    older_path = tmp_path / "older.jsonl"
    older_path.write_bytes(b"\n".join(older) + b"\n")
    old = EmbeddedRunner(s).run_files([str(older_path)])
    assert not old.rejects
    assert receivers(old.alerts, STOCK_SEEDS) == stock
    assert _alerts(older_path) == _alerts(text_path, coverage=False)
