"""The Kafka delivery consumer against the real broker and a real HTTP receiver on loopback."""

from __future__ import annotations

import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
import pytest
from conftest import wait_for  # one bounded-wait helper for every test
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from schemas.alert import Alert, IncidentResolved
from streams.kafka.deliver import DeliveryConsumer, run_delivery
from streams.settings import KafkaSettings, Settings, WebhookReceiver, WebhookSettings
from streams.sinks.webhook import verify_signature

pytestmark = pytest.mark.kafka

SECRET = "deliver-secret"
T0 = 1_780_000_000.0


class Receiver:
    def __init__(self, port: int = 0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                ok = verify_signature(
                    SECRET, self.headers["X-Crosstalk-Timestamp"], body, self.headers["X-Crosstalk-Signature"]
                )
                with outer.lock:
                    outer.requests.append({"body": orjson.loads(body), "verified": ok})
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def alert_ids(self) -> list[str]:
        with self.lock:
            return [aid for r in self.requests if r["verified"] for aid in r["body"]["alert_ids"]]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def make_alert(i: int) -> Alert:
    return Alert(
        alert_id=f"kal-{i}",
        ts=T0 + i,
        kind="cross_tenant_contamination",
        severity="critical",
        cache_domain=f"pool-{i % 2}",
        tenant_id="tenant-a",
        source_tenant_id="tenant-b",
        request_ids=[f"req-{i}"],
        score=0.9,
        summary="leak",
        group_key=f"cache_domain=pool-{i % 2},category=exposure",
        incident_id=f"inc-{i % 2}",
    )


def publish(bootstrap: str, topic: str, alerts: list[Alert]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for a in alerts:
        producer.send(topic, key=a.cache_domain.encode(), value=a.model_dump_json().encode())
    producer.send(topic, key=b"pool-0", value=b"not an alert")  # must not block the commit
    producer.flush()
    producer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return {p: c.committed(TopicPartition(topic, p)) for p in range(partitions)}
    finally:
        c.close()


def test_default_group_id() -> None:
    assert WebhookSettings().deliver_group_id == "crosstalk-deliver"


def test_delivery_commits_only_settled_offsets(kafka_bootstrap: str, tmp_path: Any) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"crosstalk.alerts.test-{run}", f"crosstalk-deliver-test-{run}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])
    admin.close()

    receiver = Receiver()
    port = receiver.port
    settings = Settings(
        kafka=KafkaSettings(bootstrap=kafka_bootstrap, alerts_topic=topic),
        webhooks=WebhookSettings(
            receivers=[WebhookReceiver(name="ops", url=f"http://127.0.0.1:{port}/hook", min_severity="info")],
            secret=SECRET,
            timeout_s=2.0,
            max_retries=100_000,
            backoff_initial_s=0.02,
            backoff_max_s=0.05,
            group_wait_s=0.0,
            group_interval_s=0.0,
            deliver_group_id=group,
            deadletter_path=str(tmp_path / "dl.jsonl"),
        ),
    )
    batch1 = [make_alert(i) for i in range(6)]
    batch2 = [make_alert(i) for i in range(6, 12)]

    # 1. Receiver up: everything delivered, then committed.
    publish(kafka_bootstrap, topic, batch1)
    stats = run_delivery(settings, max_idle_s=1.5)
    assert sorted(receiver.alert_ids()) == sorted(a.alert_id for a in batch1)
    assert stats.delivered >= 1 and stats.deadlettered == 0
    receiver.stop()

    # 2. Receiver down: the consumer reads batch 2, cannot deliver, is stopped → nothing committed.
    publish(kafka_bootstrap, topic, batch2)
    before = committed(kafka_bootstrap, group, topic, 2)
    stop = threading.Event()
    down = DeliveryConsumer(settings, stop_event=stop)
    t = threading.Thread(target=down.run)
    t.start()
    wait_for(lambda: down.stats.failures >= 3)
    stop.set()
    t.join(30)
    assert not t.is_alive()
    assert committed(kafka_bootstrap, group, topic, 2) == before
    assert down.stats.delivered == 0

    # 3. Restarted consumer, receiver still down for a while, then back: batch 2 arrives, batch 1
    #    is not re-read (it was committed), and nothing was skipped.
    again = DeliveryConsumer(settings)
    result: dict[str, Any] = {}
    t2 = threading.Thread(target=lambda: result.setdefault("stats", again.run(max_idle_s=1.5)))
    t2.start()
    wait_for(lambda: again.stats.failures >= 3)
    back = Receiver(port=port)
    try:
        t2.join(60)
        assert not t2.is_alive()
        assert sorted(back.alert_ids()) == sorted(a.alert_id for a in batch2)
        assert result["stats"].deadlettered == 0
    finally:
        back.stop()

    # All offsets (including the non-alert records) are committed to the end of the log.
    end = KafkaConsumer(bootstrap_servers=kafka_bootstrap)
    ends = end.end_offsets([TopicPartition(topic, p) for p in range(2)])
    end.close()
    assert committed(kafka_bootstrap, group, topic, 2) == {tp.partition: off for tp, off in ends.items()}
    assert again.invalid >= 1


def test_core_resolutions_on_the_alerts_topic_become_resolved_notifications(
    kafka_bootstrap: str, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    run = uuid.uuid4().hex[:8]
    topic, group = f"crosstalk.alerts.test-{run}", f"crosstalk-deliver-test-{run}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])
    admin.close()
    receiver = Receiver()
    settings = Settings(
        kafka=KafkaSettings(bootstrap=kafka_bootstrap, alerts_topic=topic),
        webhooks=WebhookSettings(
            receivers=[WebhookReceiver(name="ops", url=f"http://127.0.0.1:{receiver.port}/hook", min_severity="info")],
            secret=SECRET,
            group_wait_s=0.0,
            group_interval_s=0.0,
            deliver_group_id=group,
            deadletter_path=str(tmp_path / "dl.jsonl"),
        ),
    )
    alerts = [make_alert(0), make_alert(2)]  # both of incident inc-0

    def resolved(incident: str) -> IncidentResolved:
        return IncidentResolved(
            incident_id=incident,
            group_key="cache_domain=pool-0,category=exposure",
            cache_domain="pool-0",
            first_ts=T0,
            last_ts=T0 + 2,
            resolved_at=T0 + 602,
            alerts=2,
        )

    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for a in alerts:
        producer.send(topic, key=a.alert_id.encode(), value=a.model_dump_json().encode())
    for res in (resolved("inc-0"), resolved("inc-never-routed-here")):
        producer.send(topic, key=res.incident_id.encode(), value=res.model_dump_json().encode())
    producer.flush()
    producer.close()
    try:
        consumer = DeliveryConsumer(settings)
        with caplog.at_level("INFO", logger="streams.kafka.deliver"):
            consumer.run(max_idle_s=1.5)
        said = [r.getMessage() for r in caplog.records if r.name == "streams.kafka.deliver"]
        # It says what it does: where it reads, and every notification's outcome.
        assert any(m.startswith(f"deliver: reading {topic} as group {group}") for m in said), said
        assert sum("delivered firing notification" in m for m in said) == 1
        assert sum("delivered resolved notification" in m for m in said) == 1
        with receiver.lock:
            bodies = [r["body"] for r in receiver.requests if r["verified"]]
        assert [b["status"] for b in bodies] == ["firing", "resolved"]
        assert bodies[1]["alert_ids"] == ["kal-0", "kal-2"] and bodies[1]["incident_ids"] == ["inc-0"]
        assert bodies[1]["ends_at"] == "2026-05-28T20:36:42.000Z"  # the core's resolved_at, T0 + 602
        assert consumer.resolutions == 2 and consumer.invalid == 0
        assert committed(kafka_bootstrap, group, topic, 1) == {0: 4}  # resolutions settled and committed too
    finally:
        receiver.stop()


class _EarlyEmptyConsumer:
    """A consumer whose poll returns at once with nothing (no assignment yet, coordinator moving...)."""

    def __init__(self, stop: threading.Event, polls: int, **kwargs: Any) -> None:
        self.stop, self.left, self.timeouts = stop, polls, []

    def subscribe(self, topics: list[str], listener: Any = None) -> None:
        return None

    def poll(self, timeout_ms: int) -> dict[Any, Any]:
        self.timeouts.append(timeout_ms)
        self.left -= 1
        if self.left <= 0:
            self.stop.set()
        return {}

    def close(self, autocommit: bool = False) -> None:
        return None


def test_early_empty_polls_are_paced_not_spun(tmp_path: Any) -> None:
    stop = threading.Event()
    fakes: list[_EarlyEmptyConsumer] = []

    def factory(**kwargs: Any) -> _EarlyEmptyConsumer:
        fakes.append(_EarlyEmptyConsumer(stop, polls=5))
        return fakes[-1]

    settings = Settings(
        webhooks=WebhookSettings(
            receivers=[WebhookReceiver(name="ops", url="http://127.0.0.1:9/hook")],
            deadletter_path=str(tmp_path / "dl.jsonl"),
        )
    )
    consumer = DeliveryConsumer(settings, stop_event=stop, consumer_factory=factory)  # type: ignore[arg-type]
    consumer.run()
    # Every poll that came back early and empty was topped up with a wait for the rest of its timeout.
    assert consumer.polls == 5 and consumer.paced == 5
    assert all(t >= 100 for t in fakes[0].timeouts)


def test_deliver_without_receivers_idles_instead_of_exiting_2(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import argparse

    from streams.kafka import deliver

    monkeypatch.delenv("CROSSTALK_CONFIG", raising=False)
    monkeypatch.delenv("CROSSTALK_WEBHOOKS__RECEIVERS", raising=False)
    args = argparse.Namespace(config=None, topic=None, group_id=None, max_idle_s=0.05, loglevel="info")
    with caplog.at_level("ERROR"):
        assert deliver.run(args) == 0  # a supervisor would restart-loop on an exit
    assert any("no webhook receivers configured" in r.getMessage() and "idle" in r.getMessage() for r in caplog.records)
