"""The Collector's Kafka exporter topic -> `crosstalk otlp --from-kafka` -> input topic -> a worker -> alert.

Real ExportTraceServiceRequest messages (opentelemetry-proto), in both encodings the exporter writes
(otlp_proto, otlp_json), on the real broker."""

from __future__ import annotations

import json
import time
from typing import Any

import orjson
import pytest
from conftest import consume_records, wait_for
from google.protobuf.json_format import MessageToDict
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from test_otlp_mapping import BASE, proto_request

from schemas.events import parse_event_obj
from streams.embedded.runner import EmbeddedRunner
from streams.inputs.otlp_http import bridge_kafka
from streams.kafka.topics import admin_client, ensure_topics
from streams.settings import Settings
from tests.support.rawevents import tick_events

pytestmark = pytest.mark.kafka

T0 = 1_787_817_600.0


def as_otlp_json(data: bytes, trace_id: str, span_id: str) -> bytes:
    """The otlp_json encoding: protobuf JSON mapping with hex ids, as the Collector's pdata marshaler writes."""
    msg = ExportTraceServiceRequest()
    msg.ParseFromString(data)
    d = MessageToDict(msg)
    for rs in d["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                sp["traceId"], sp["spanId"] = trace_id, span_id
    return orjson.dumps(d)


def test_collector_topic_both_encodings_to_worker_alerts(kafka_names: Any, workers: Any) -> None:
    app = kafka_names.app_id
    proto_topic, json_topic = f"{app}.otlp_spans", f"{app}.otlp_spans_json"
    s_proto = kafka_names.settings(otlp={"kafka_topic": proto_topic, "kafka_group_id": f"{app}-otlp"})
    s_json = kafka_names.settings(
        otlp={"kafka_topic": json_topic, "kafka_group_id": f"{app}-otlpj", "kafka_encoding": "otlp_json"}
    )
    ensure_topics(s_proto.kafka)
    admin = admin_client(kafka_names.bootstrap)
    try:
        admin.create_topics([NewTopic(proto_topic, 1, 1), NewTopic(json_topic, 1, 1)])
    finally:
        admin.close()

    overlong = {**BASE, "crosstalk.tenant_id": "acme"}  # 812,345 prompt tokens, engine says 1, HTTP 200
    data_a = proto_request(overlong)
    trace_b, span_b = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
    data_b = as_otlp_json(proto_request({**overlong, "crosstalk.tenant_id": "globex"}), trace_b, span_b)
    no_tenant = as_otlp_json(proto_request(BASE), "6bf92f3577b34da6a3ce929d0e0e4738", "20f067aa0ba902b9")
    prod = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
    prod.send(proto_topic, data_a)
    prod.send(proto_topic, b"\x0a\xff\xff\xff not protobuf")
    prod.send(json_topic, data_b)
    prod.send(json_topic, no_tenant)
    prod.flush()

    a = bridge_kafka(s_proto, idle_exit_s=3.0)
    b = bridge_kafka(s_json, idle_exit_s=3.0)
    assert (a["messages"], a["events"], a["rejects.not_otlp"]) == (2, 2, 1)
    assert (b["messages"], b["events"], b["rejects.no_tenant"]) == (2, 2, 1)

    # the events on crosstalk's input topic: keyed by request id, traceparent header, no text
    recs = consume_records(kafka_names.bootstrap, kafka_names.input_topic, 4)
    events = [orjson.loads(r.value) for r in recs]
    assert sorted((e["type"], e["tenant_id"]) for e in events) == [
        ("request", "acme"),
        ("request", "globex"),
        ("response", "acme"),
        ("response", "globex"),
    ]
    assert {r.key.decode() for r in recs} == {e["request_id"] for e in events}
    assert all(dict(r.headers)["traceparent"].startswith(b"00-") for r in recs)
    assert all(
        "prompt_text" not in e and "quarterly" not in r.value.decode() for e, r in zip(events, recs, strict=True)
    )
    dead = consume_records(kafka_names.bootstrap, kafka_names.deadletter_topic, 2)
    reasons = sorted(dict(r.headers)["x-crosstalk-reason"].decode() for r in dead)
    assert reasons == ["no_tenant", "not_otlp"]
    assert all(b"quarterly" not in r.value for r in dead)  # dead letters name the span, never its text
    assert {dict(r.headers).get("x-crosstalk-source-topic") for r in dead} == {
        proto_topic.encode(),
        json_topic.encode(),
    }

    # engine stats and the closing ticks, then a worker detects
    stats = {
        "type": "cache_stats",
        "event_id": "eng-1",
        "ts": T0 - 10,
        "cache_domain": "glm53-pd-1",
        "role": "prefill",
        "capacity_tokens": 681_280,
        "used_tokens": 612_000,
        "context_window": 1_048_576,
    }
    extra = [stats, *tick_events(T0, s_proto.kafka)]
    for ev in extra:
        prod.send(kafka_names.input_topic, orjson.dumps(ev), key=ev["cache_domain"].encode())
    prod.flush()
    prod.close()
    # what the embedded core says about the same events: the worker must say exactly that
    runner = EmbeddedRunner(Settings())
    for ev in sorted([stats, *events, *extra[1:]], key=lambda e: e["ts"]):
        runner.feed(parse_event_obj(ev))
    expected = {al.alert_id: al for al in runner.finish(time.perf_counter()).alerts}
    exposure = [al for al in expected.values() if al.request_ids]
    assert sorted(al.tenant_id for al in exposure) == ["acme", "globex"]
    assert all(al.severity in ("high", "critical") for al in exposure)

    w = workers.start(kafka_names, "otlp")
    reader = KafkaConsumer(
        kafka_names.alerts_topic, bootstrap_servers=kafka_names.bootstrap, auto_offset_reset="earliest", group_id=None
    )
    seen: dict[str, Any] = {}
    try:

        def all_alerts() -> bool:
            for records in reader.poll(timeout_ms=500).values():
                for r in records:
                    al = json.loads(r.value)
                    if al.get("record") == "incident_resolved":  # resolutions share the alerts topic
                        continue
                    seen[al["alert_id"]] = al
            return set(expected) <= set(seen)

        wait_for(all_alerts, 150, interval_s=0.0, what="the alerts of the OTLP spans\n" + w.log_tail())
    finally:
        reader.close()
    assert set(seen) == set(expected)


def test_bridge_command_runs_until_sigterm(kafka_names: Any, tmp_path: Any) -> None:
    import os
    import signal
    import subprocess
    import sys

    app = kafka_names.app_id
    topic = f"{app}.otlp_spans"
    s = kafka_names.settings()
    ensure_topics(s.kafka)
    admin = admin_client(kafka_names.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    env = {
        **os.environ,
        **kafka_names.env(),
        "CROSSTALK_OTLP__KAFKA_TOPIC": topic,
        "CROSSTALK_OTLP__KAFKA_GROUP_ID": f"{app}-bridge",
    }
    cmd = [sys.executable, "-m", "streams.cli", "otlp", "--from-kafka", "--to", "kafka"]
    log = (tmp_path / "bridge.log").open("wb")
    proc = subprocess.Popen(cmd, env=env, stderr=log)
    try:
        prod = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
        prod.send(topic, proto_request({**BASE, "crosstalk.tenant_id": "acme"}))
        prod.flush()
        prod.close()
        recs = consume_records(kafka_names.bootstrap, kafka_names.input_topic, 2, timeout_s=90)
        assert sorted(orjson.loads(r.value)["type"] for r in recs) == ["request", "response"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        log.close()
    assert code == 0, (tmp_path / "bridge.log").read_text()


def test_bridge_dead_letters_hostile_spans_commits_and_goes_on(kafka_names: Any) -> None:
    """Issue 25: a span the mapping cannot take made the bridge die before it committed, and so again on
    every restart. Now each becomes a dead letter with its reason, the good spans of the same records are
    published, and the offsets are committed."""
    from otlp_hostile import CASES, batch

    app = kafka_names.app_id
    topic = f"{app}.otlp_hostile"
    s = kafka_names.settings(
        otlp={"kafka_topic": topic, "kafka_group_id": f"{app}-hostile", "kafka_encoding": "otlp_json"}
    )
    ensure_topics(s.kafka)
    admin = admin_client(kafka_names.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    cases = [c for c in CASES if c != "cjk_2_6M"]  # 7.8 MB: over the broker's default message size
    prod = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
    for i, case in enumerate(cases):
        prod.send(topic, batch(case, (f"g{i}-1", f"g{i}-2")))
    prod.flush()
    prod.close()

    counts = bridge_kafka(s, idle_exit_s=3.0)
    assert counts["messages"] == len(cases) and counts["events"] == 4 * len(cases)
    assert sum(v for k, v in counts.items() if k.startswith("rejects.")) == len(cases)
    dead = consume_records(kafka_names.bootstrap, kafka_names.deadletter_topic, len(cases))
    assert sorted(dict(r.headers)["x-crosstalk-reason"].decode() for r in dead) == sorted(CASES[c] for c in cases)
    recs = consume_records(kafka_names.bootstrap, kafka_names.input_topic, 4 * len(cases))
    assert len({orjson.loads(r.value)["request_id"] for r in recs}) == 2 * len(cases)
    # committed: a restart of the same group has nothing left to read
    assert bridge_kafka(s, idle_exit_s=3.0)["messages"] == 0


def test_bridge_creates_the_topics_it_uses(kafka_names: Any, tmp_path: Any) -> None:
    """Issue 26: with auto-creation off (compose, kafka.sh) nothing created otlp_spans, and the bridge logged
    "Topic otlp_spans not found" about 30 times a second. It creates its topics, as the worker does."""
    import os
    import signal
    import subprocess
    import sys

    from streams.kafka.topics import delete_topics

    app = kafka_names.app_id
    topic = f"{app}.otlp_fresh"
    env = {
        **os.environ,
        **kafka_names.env(),
        "CROSSTALK_OTLP__KAFKA_TOPIC": topic,
        "CROSSTALK_OTLP__KAFKA_PARTITIONS": "2",
        "CROSSTALK_OTLP__KAFKA_GROUP_ID": f"{app}-fresh",
    }
    cmd = [sys.executable, "-m", "streams.cli", "otlp", "--from-kafka", "--to", "kafka"]
    log_path = tmp_path / "bridge.log"
    log = log_path.open("wb")
    proc = subprocess.Popen(cmd, env=env, stderr=log)
    admin = admin_client(kafka_names.bootstrap)
    try:
        wait_for(lambda: topic in admin.list_topics() or proc.poll() is not None, 60, what=f"{topic} to exist")
        assert proc.poll() is None, log_path.read_text()
        assert len(admin.describe_topics([topic])[0]["partitions"]) == 2
        prod = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
        prod.send(topic, proto_request({**BASE, "crosstalk.tenant_id": "acme"}))
        prod.flush()
        prod.close()
        recs = consume_records(kafka_names.bootstrap, kafka_names.input_topic, 2, timeout_s=90)
        assert sorted(orjson.loads(r.value)["type"] for r in recs) == ["request", "response"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        log.close()
        admin.close()
        delete_topics(kafka_names.bootstrap, [topic])
    text = log_path.read_text()
    assert code == 0, text
    assert "not found" not in text.lower() and f"{topic} created" in text


def test_bridge_without_a_broker_fails_once_with_a_clear_message(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    from tests.support.workerproc import free_port

    env = {
        **os.environ,
        "CROSSTALK_KAFKA__BOOTSTRAP": f"127.0.0.1:{free_port()}",  # nothing listens there
        "CROSSTALK_DETECTION__FINGERPRINT_KEY": "bridge-test-key",
    }
    cmd = [sys.executable, "-m", "streams.cli", "otlp", "--from-kafka", "--to", "kafka"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if "crosstalk.otlp ERROR" in line]
    assert len(errors) == 1 and "otlp_spans" in errors[0] and "kafka-topics.sh --create" in errors[0], out.stderr
