"""`crosstalk report --from-kafka`: the alerts topic of the real broker, read to its end."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.report.command import add_arguments, run

from .report_fixtures import Run

pytestmark = pytest.mark.kafka


def test_report_from_the_alerts_topic(incident: Run, kafka_names: Any, tmp_path: Path, monkeypatch: Any) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    topic = kafka_names.alerts_topic
    admin = KafkaAdminClient(bootstrap_servers=kafka_names.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    finally:
        admin.close()
    lines = [line for line in incident.alerts.read_bytes().splitlines() if line.strip()]
    producer = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
    try:
        for line in lines:
            producer.send(topic, key=orjson.loads(line)["alert_id"].encode(), value=line)
        producer.send(topic, key=orjson.loads(lines[0])["alert_id"].encode(), value=lines[0])  # redelivered
        producer.send(topic, key=b"junk", value=b"{not an alert")
        # The workers' incident resolutions share the topic: they are no alert and no unreadable line.
        resolved = {
            "record": "incident_resolved",
            "incident_id": "inc-1",
            "group_key": "g",
            "cache_domain": "d",
            "first_ts": 1.0,
            "last_ts": 2.0,
            "resolved_at": 602.0,
            "alerts": 1,
        }
        producer.send(topic, key=b"inc-1", value=orjson.dumps(resolved))
        producer.flush(timeout=30)
    finally:
        producer.close()

    monkeypatch.setenv("CROSSTALK_KAFKA__BOOTSTRAP", kafka_names.bootstrap)
    p = argparse.ArgumentParser()
    add_arguments(p)
    out = tmp_path / "from-kafka.html"
    args = p.parse_args(["--from-kafka", "--topic", topic, "--events", str(incident.events), "--out", str(out)])
    args.no_progress = True
    assert run(args) == 0
    html = out.read_text()
    for label in incident.contaminated:
        assert f'data-request-id="{label["request_id"]}"' in html
    assert f'data-affected="{len(incident.contaminated)}"' in html
    assert f"{len(lines)} distinct alerts (1 redelivered copies" in html
    assert "1 input lines could not be read" in html and "not json" in html


def test_missing_topic_is_a_clear_error(kafka_names: Any, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("CROSSTALK_KAFKA__BOOTSTRAP", kafka_names.bootstrap)
    monkeypatch.setenv("CROSSTALK_REPORT__KAFKA_TIMEOUT_S", "10")
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--from-kafka", "--topic", f"{kafka_names.app_id}.nope", "--out", str(tmp_path / "x.html")])
    with pytest.raises(SystemExit, match="does not exist"):
        run(args)
    assert not (tmp_path / "x.html").exists()
