"""`crosstalk alerts` on the real broker: the alerts topic as readable lines, filtered, read without a consumer
group (it never moves `crosstalk deliver`'s offsets), and --follow printing an alert produced while it runs."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import IO

import pytest
from conftest import wait_for
from kafka import KafkaProducer
from kafka.admin import NewTopic

from streams.producer import admin_client
from tests.support.alerts import RESOLVED, SAMPLE, alert
from tests.support.kafkanames import KafkaNames
from tests.support.recipes import ROOT

pytestmark = pytest.mark.kafka


@pytest.fixture
def topic(kafka_names: KafkaNames) -> Iterator[str]:
    name = kafka_names.alerts_topic
    admin = admin_client(kafka_names.bootstrap)
    try:
        admin.create_topics([NewTopic(name, 2, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
    for i, a in enumerate(SAMPLE):
        producer.send(name, key=a.cache_domain.encode(), value=a.model_dump_json().encode(), partition=i % 2)
    producer.send(name, key=b"x", value=b"not an alert", partition=0)
    producer.send(name, key=b"y", value=None, partition=1)  # a tombstone
    producer.send(name, key=RESOLVED.incident_id.encode(), value=RESOLVED.model_dump_json().encode(), partition=1)
    producer.flush()
    producer.close()
    yield name


def _env(names: KafkaNames, topic: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")}
    return env | names.env() | {"CROSSTALK_KAFKA__ALERTS_TOPIC": topic, "PYTHONPATH": str(ROOT)}


def test_alerts_on_the_topic_as_lines_with_filters(kafka_names: KafkaNames, topic: str) -> None:
    cmd = [sys.executable, "-m", "streams.cli", "alerts", "--domain", "glm53-pd-1", "--min-severity", "warning"]
    out = subprocess.run(cmd, cwd=ROOT, env=_env(kafka_names, topic), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and all("glm53-pd-1" in line for line in lines), lines
    assert any("tenant=acme ← globex" in line for line in lines)
    assert "not JSON" in out.stderr and "crosstalk alerts: 2 shown; skipped 1 empty, 1 not_json" in out.stderr


def test_follow_prints_an_alert_produced_while_it_runs(kafka_names: KafkaNames, topic: str) -> None:
    cmd = [sys.executable, "-m", "streams.cli", "alerts", "--follow", "--from-beginning", "--tenant", "probe-a",
           "--tenant", "acme"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=_env(kafka_names, topic), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    got: list[str] = []
    assert proc.stdout is not None
    reader = threading.Thread(target=_collect, args=(proc.stdout, got), daemon=True)
    reader.start()
    try:
        wait_for(lambda: len(got) >= 1, 60, what="the alert already on the topic")
        assert "acme" in got[0]
        producer = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
        new = alert(9, "canary_leak", "critical", "pool-z", "probe-a")
        producer.send(topic, value=new.model_dump_json().encode(), partition=1)
        producer.flush()
        producer.close()
        wait_for(lambda: len(got) >= 2, 60, what="the alert produced while following")
        assert "canary_leak" in got[1] and "pool-z" in got[1]
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert len(got) == 2  # the others match no --tenant


def _collect(stream: IO[str], into: list[str]) -> None:
    for line in stream:
        into.append(line.rstrip("\n"))
