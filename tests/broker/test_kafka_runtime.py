"""The Kafka runtime against the real broker (scripts/kafka.sh up): same alerts as the embedded core.

Workers run as subprocesses. Waits are bounded; nothing asserts on wall-clock durations.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import orjson
import pytest
from conftest import wait_for  # one bounded-wait helper for all Kafka tests
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from streams.producer import produce_file
from streams.settings import Settings
from tests.support.incident import incident_with_ticks, split_lines

KafkaNames = Workers = Any  # fixtures of tests/conftest.py

pytestmark = pytest.mark.kafka

WAIT_S = 150.0


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The simulator's incident plus ticks, and the embedded runner's alert ids on the same file."""
    return incident_with_ticks(tmp_path_factory.mktemp("incident"))


class AlertReader:
    """Reads the alerts topic from the beginning, accumulating (alert_id -> count)."""

    def __init__(self, names: KafkaNames) -> None:
        self.consumer = KafkaConsumer(
            names.alerts_topic,
            bootstrap_servers=names.bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            group_id=None,
        )
        self.seen: dict[str, int] = {}
        self.kinds: dict[str, str] = {}
        self.resolved: set[str] = set()  # incident ids the core resolved (records beside the alerts)
        self.incidents: set[str] = set()  # incident ids the alerts named

    def poll(self) -> dict[str, int]:
        for records in self.consumer.poll(timeout_ms=500).values():
            for r in records:
                a = json.loads(r.value)
                if a.get("record") == "incident_resolved":
                    assert r.key == a["incident_id"].encode(), "resolutions are keyed by incident_id"
                    self.resolved.add(a["incident_id"])
                    continue
                assert r.key == a["alert_id"].encode(), "alerts are keyed by alert_id"
                self.seen[a["alert_id"]] = self.seen.get(a["alert_id"], 0) + 1
                self.kinds[a["alert_id"]] = a["kind"]
                self.incidents.add(a["incident_id"])
        return self.seen

    def wait_for_ids(self, expected: set[str], timeout_s: float = WAIT_S) -> set[str]:
        def done() -> bool:
            return expected <= set(self.poll())

        with contextlib.suppress(AssertionError):
            wait_for(done, timeout_s, interval_s=0.0, what="the expected alert ids")
        # Settle a little longer: anything extra would show up now.
        end = time.monotonic() + 3.0
        while time.monotonic() < end:
            self.poll()
        return set(self.seen)

    def close(self) -> None:
        self.consumer.close()


def _describe_diff(got: set[str], expected: dict[str, str], kinds: dict[str, str]) -> str:
    missing = {a: expected[a] for a in set(expected) - got}
    extra = {a: kinds.get(a) for a in got - set(expected)}
    return f"missing={missing} extra={extra}"


def _assert_same_alerts(reader: AlertReader, incident: dict[str, Any], workers: list[Any]) -> None:
    got = reader.wait_for_ids(set(incident["alerts"]))
    if got == set(incident["alerts"]):
        return
    # What tells a lost item from one judged in another order: each live worker's replays, late items, orphans,
    # restores and rebalances.
    telling = ("replayed", "late", "orphans", "restores", "fresh", "revok", "canary_scans", "restore_", "rewind")
    telling += ("stall", "stale", "idle", "gap", "dead", "ingest.messages", "snapshots")
    counts = []
    for w in workers:
        c = w.counters() if w.alive() else None
        counts.append({k: v for k, v in (c or {}).get("counters", {}).items() if any(t in k for t in telling)})
    logs = "\n---\n".join(f"{w.log_warnings()}\n... last lines:\n{w.log_tail(15)}" for w in workers)
    raise AssertionError(f"{_describe_diff(got, incident['alerts'], reader.kinds)}\ncounters: {counts}\n{logs}")


def _counters_of(w: Any) -> dict[str, Any]:
    """The worker's /counters, asked again while it does not answer: a worker busy replaying on a loaded machine can
    miss the 2 s a single request waits (CI saw None once, after every alert had come)."""
    c: dict[str, Any] = wait_for(w.counters, 60, what="the restarted worker's counters")
    return c


def test_incident_through_kafka_gives_the_embedded_alert_ids(
    kafka_names: KafkaNames, workers: Workers, incident: dict[str, Any]
) -> None:
    from tests.support.otlpcollector import OtlpReceiver  # loopback OTLP/HTTP, decodes the protobuf

    otlp = OtlpReceiver()
    w = workers.start(
        kafka_names, CROSSTALK_OTEL__ENABLED="true", CROSSTALK_OTEL__ENDPOINT=otlp.endpoint,
        CROSSTALK_OTEL__EXPORT_INTERVAL_S="1",
    )  # fmt: skip
    # Topics are created by the worker; the producer waits for them rather than guessing a delay.
    wait_for(lambda: w.counters() is not None or not w.alive(), 60, what="the worker's web server")
    assert w.alive(), w.log_tail()
    reader = AlertReader(kafka_names)
    try:
        res = produce_file(incident["path"], kafka_names.settings().kafka)
        assert not res.bad_lines
        _assert_same_alerts(reader, incident, [w])
        # The ticks end every incident: the core's resolutions reach the alerts topic, for `crosstalk deliver`.
        wait_for(lambda: reader.poll() is not None and reader.resolved, 60, what="incident resolutions")
        assert reader.resolved <= reader.incidents
        c = w.counters()
        assert c is not None and not c["deadletter"], c

        # Every alert also reaches the tracing backend as a span, from the worker itself.
        def alert_spans() -> set[str]:
            names = [s for s in otlp.spans() if s.name.startswith("crosstalk.alert ")]
            ids = {a.value.string_value for s in names for a in s.attributes if a.key == "crosstalk.alert.id"}
            return ids if ids >= set(incident["alerts"]) else set()

        assert wait_for(alert_spans, 60, what="alert spans over OTLP") == set(incident["alerts"])
        assert any(s.name == "chat glm-5.3" for s in otlp.spans())

        # Consumer lag of the input topic: in /counters and as a metric; all read, so it drains to 0.
        def drained() -> dict[str, int] | None:
            c = w.counters()
            lag = c.get("consumer_lag") if c else None
            return lag if lag and not any(lag.values()) else None

        assert set(wait_for(drained, 30, what="consumer lag 0")) <= {str(p) for p in range(4)}
        lag_points = wait_for(lambda: otlp.metric_points().get("crosstalk.consumer.lag"), 30, what="lag metric")
        assert all(p.as_int == 0 for p in lag_points)
        # How far event time trails the wall clock: the simulated incident happened months ago.
        behind = wait_for(lambda: otlp.metric_points().get("crosstalk.event_time.behind"), 30, what="behind metric")
        assert behind[-1].as_double > 30 * 86400
    finally:
        reader.close()
        otlp.stop()


# Small, frequent snapshots so that a stop lands between checkpoints with work in flight.
SNAPSHOT_OFTEN = {"CROSSTALK_KAFKA__SNAPSHOT_EVERY": "200", "CROSSTALK_KAFKA__SNAPSHOT_INTERVAL_S": "0.5"}


def _to_midway(w: Any, names: KafkaNames, incident: dict[str, Any], snapshots: str) -> str:
    """Produce the first 60 % of the incident and wait until worker `w` has stored two `snapshots` (a counter, e.g.
    "snapshots.join") and ingested a third of all events: the rest of the input, to produce later."""
    head, tail = split_lines(incident["path"], 0.6)
    produce_file(head, names.settings().kafka)
    total = incident["events"]

    def midway() -> bool:
        c = w.counters()
        return bool(
            c and c["counters"].get(snapshots, 0) >= 2 and c["counters"].get("ingest.messages", 0) >= total // 3
        )

    wait_for(midway, WAIT_S, interval_s=0.05, what="the worker to be mid-stream")
    return tail


def test_sigkill_mid_stream_loses_no_alert(kafka_names: KafkaNames, workers: Workers, incident: dict[str, Any]) -> None:
    w1 = workers.start(kafka_names, "before-kill", **SNAPSHOT_OFTEN)
    wait_for(lambda: w1.counters() is not None or not w1.alive(), 60, what="the worker's web server")
    reader = AlertReader(kafka_names)
    try:
        tail = _to_midway(w1, kafka_names, incident, "snapshots.domain")
        before = w1.counters()
        w1.kill()
        assert before is not None
        # The rest only now: however fast the first worker was, the next one has input left after restoring.
        produce_file(tail, kafka_names.settings().kafka)
        # A fresh data dir: the state must come back from the changelog, not from local disk.
        w2 = workers.start(kafka_names, "after-kill", **SNAPSHOT_OFTEN)
        _assert_same_alerts(reader, incident, [w1, w2])
        c = _counters_of(w2)
        assert c["counters"].get("restores.domain", 0) + c["counters"].get("restores.join", 0) > 0, c
    finally:
        reader.close()


def _commit_to_end(names: KafkaNames, topic: str) -> dict[int, tuple[int | None, int]]:
    """Move the pipeline's committed offsets on `topic` to its end, as a commit that passed the checkpoints would:
    {partition: (committed before, end)}. The group must be empty (its workers stopped)."""
    consumer = KafkaConsumer(bootstrap_servers=names.bootstrap, group_id=names.app_id, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(tps)
        before = {tp: consumer.committed(tp) for tp in tps}
        end = consumer.end_offsets(tps)
        consumer.commit({tp: OffsetAndMetadata(end[tp], None, -1) for tp in tps})
        return {tp.partition: (before[tp], end[tp]) for tp in tps}
    finally:
        consumer.close()


def test_a_commit_past_the_checkpoint_is_read_again_from_the_state(
    kafka_names: KafkaNames, workers: Workers, incident: dict[str, Any]
) -> None:
    # The state says where a partition resumes, not the committed offset: the join topic's offsets are moved past
    # every checkpoint while no worker runs, and the next worker must read again what its restored state lacks.
    w1 = workers.start(kafka_names, "before-stop", **SNAPSHOT_OFTEN)
    wait_for(lambda: w1.counters() is not None or not w1.alive(), 60, what="the worker's web server")
    reader = AlertReader(kafka_names)
    try:
        tail = _to_midway(w1, kafka_names, incident, "snapshots.join")
        w1.stop()  # leaves the group: its offsets can be moved
        skipped: dict[str, dict[int, int]] = {}
        for stage in ("join", "domain"):
            moved = _commit_to_end(kafka_names, f"{kafka_names.app_id}.{stage}")
            skipped[stage] = {p: end - (before or 0) for p, (before, end) in moved.items() if end > (before or 0)}
        assert skipped["join"] and skipped["domain"], f"nothing to skip: {skipped}"
        produce_file(tail, kafka_names.settings().kafka)
        w2 = workers.start(kafka_names, "after-stop", **SNAPSHOT_OFTEN)
        _assert_same_alerts(reader, incident, [w1, w2])
        c = _counters_of(w2)
        for stage in ("join", "domain"):
            assert c["counters"].get(f"rewinds.{stage}", 0) >= 1, (skipped, c["counters"])
    finally:
        reader.close()


def test_two_workers_share_partitions_and_give_the_same_alert_ids_on_batched_input(
    kafka_names: KafkaNames, workers: Workers, incident: dict[str, Any]
) -> None:
    a = workers.start(kafka_names, "a")
    b = workers.start(kafka_names, "b")
    for w in (a, b):
        wait_for(lambda w=w: w.counters() is not None or not w.alive(), 60, what="the workers' web servers")

    def both_assigned() -> bool:
        ca, cb = a.counters(), b.counters()
        return bool(ca and cb and ca["partitions"]["join"] and cb["partitions"]["join"])

    reader = AlertReader(kafka_names)
    try:
        # Batched input (25 events per message, application/x-ndjson): the same alerts as one per message.
        produce_file(incident["path"], kafka_names.settings().kafka, batch=25)
        _assert_same_alerts(reader, incident, [a, b])
        wait_for(both_assigned, 30, what="both workers to own join partitions")
        ca, cb = a.counters(), b.counters()
        assert ca and cb
        assert not set(ca["partitions"]["domain"]) & set(cb["partitions"]["domain"])
    finally:
        reader.close()


def _deadletter_consumer(names: KafkaNames) -> KafkaConsumer:
    return KafkaConsumer(
        names.deadletter_topic,
        bootstrap_servers=names.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )


def _event(i: int, **fields: Any) -> dict[str, Any]:
    base = {"event_id": f"e-{i}", "ts": 1_780_000_000.0 + i, "traceparent": None}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def test_bad_messages_go_to_the_dead_letter_topic_and_the_worker_keeps_going(
    kafka_names: KafkaNames, workers: Workers
) -> None:
    w = workers.start(kafka_names, "dlq", CROSSTALK_INGEST__MAX_EVENT_BYTES="4096")
    wait_for(lambda: w.counters() is not None or not w.alive(), 60, what="the worker's web server")
    good_req = _event(
        1, type="request", request_id="r1", tenant_id="t1", model="m", prompt_tokens=10, cache_domain="d1"
    )
    good_resp = _event(
        2, type="response", request_id="r1", tenant_id="t1", model="m", cache_domain="d1", status_code=200
    )
    bad: list[tuple[str, bytes | None, bytes]] = [
        ("not_json", b"x", b"this is not json {"),
        ("invalid", b"x", orjson.dumps({"type": "request", "event_id": "e-9"})),
        ("oversized", b"x", orjson.dumps(_event(3, type="canary", tenant_id="t1", marker="m" * 200, pad="p" * 5000))),
        ("duplicate", b"r1", orjson.dumps(good_req)),
    ]
    prod = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
    prod.send(kafka_names.input_topic, key=b"r1", value=orjson.dumps(good_req))
    for _, key, value in bad:
        prod.send(kafka_names.input_topic, key=key, value=value)
    prod.send(kafka_names.input_topic, key=b"r1", value=orjson.dumps(good_resp))
    prod.flush()
    prod.close()

    consumer = _deadletter_consumer(kafka_names)
    got: dict[str, tuple[bytes, dict[str, bytes]]] = {}
    try:

        def all_dead_lettered() -> bool:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    h = dict(r.headers)
                    got[h["x-crosstalk-reason"].decode()] = (r.value, h)
            return len(got) >= len(bad)

        wait_for(all_dead_lettered, WAIT_S, interval_s=0.0, what="every bad message in the dead-letter topic")
    finally:
        consumer.close()
    for reason, _, value in bad:
        assert reason in got, (reason, sorted(got), w.log_tail())
        raw, headers = got[reason]
        if reason == "duplicate":
            # Found at the join, after ingest validated it into a compact, text-free record: the dead letter
            # holds that record, and its headers point at the original message in the input topic.
            assert (
                raw != value
                and b'"e-1"' in raw
                and headers["x-crosstalk-source-topic"] == kafka_names.input_topic.encode()
            )
        else:
            assert raw == value, reason
        assert headers["x-crosstalk-detail"], reason
        assert headers["x-crosstalk-source-topic"].decode() in (kafka_names.input_topic, f"{kafka_names.app_id}.join")
        assert int(headers["x-crosstalk-source-offset"]) >= 0

    def processed_good_ones() -> dict[str, Any] | None:
        c = w.counters()
        return c if c and c["counters"].get("exchanges", 0) >= 1 else None

    c = wait_for(processed_good_ones, 60, what="the good pair to be joined after the bad messages")
    assert w.alive()
    assert c["counters"]["events.request"] == 1 and c["counters"]["events.response"] == 1
    assert c["deadletter"] == {"not_json": 1, "invalid": 1, "oversized": 1, "duplicate": 1}


def test_a_bad_line_in_a_batched_message_is_dead_lettered_alone(kafka_names: KafkaNames, workers: Workers) -> None:
    w = workers.start(kafka_names, "ndjson")
    wait_for(lambda: w.counters() is not None or not w.alive(), 60, what="the worker's web server")
    req = _event(1, type="request", request_id="r1", tenant_id="t1", model="m", prompt_tokens=10, cache_domain="d1")
    resp = _event(2, type="response", request_id="r1", tenant_id="t1", model="m", cache_domain="d1", status_code=200)
    value = b"\n".join([orjson.dumps(req), b"{broken", orjson.dumps(resp), b""])
    prod = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
    prod.send(kafka_names.input_topic, value=value, headers=[("content-type", b"application/x-ndjson")])
    prod.flush()
    prod.close()
    consumer = _deadletter_consumer(kafka_names)
    got: list[Any] = []
    try:
        wait_for(
            lambda: got.extend(r for rs in consumer.poll(timeout_ms=500).values() for r in rs) or got,
            WAIT_S,
            interval_s=0.0,
            what="the bad line in the dead-letter topic",
        )
    finally:
        consumer.close()
    assert len(got) == 1
    h = dict(got[0].headers)
    assert got[0].value == b"{broken"
    assert h["x-crosstalk-reason"] == b"not_json"
    assert h["x-crosstalk-source-line"] == b"2"
    assert h["x-crosstalk-source-topic"].decode() == kafka_names.input_topic

    def joined() -> dict[str, Any] | None:
        c = w.counters()
        return c if c and c["counters"].get("exchanges", 0) >= 1 else None

    c = wait_for(joined, 60, what="the good lines around the bad one to be joined")
    assert c["counters"]["events.request"] == 1 and c["counters"]["events.response"] == 1
    assert c["counters"]["ingest.messages"] == 1
    assert c["deadletter"] == {"not_json": 1}


def test_ready_only_once_assigned_and_consuming(kafka_names: KafkaNames, workers: Workers) -> None:
    """Issue 11: /ready answered 200 about 50 s before the worker had joined the consumer group."""
    import urllib.error
    import urllib.request

    w = workers.start(kafka_names, "ready")

    def ready() -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{w.port}/ready", timeout=2) as r:
                return json.loads(r.read()) if r.status == 200 else None
        except urllib.error.HTTPError as exc:
            assert exc.code == 503, exc.code
            return None
        except OSError:
            assert w.alive(), w.log_tail()
            return None

    body = wait_for(ready, 120, interval_s=0.1, what="/ready to answer 200")
    # The very first 200 already comes from a worker that holds input partitions.
    assert body["ready"] is True
    assert any(tp.startswith(f"{kafka_names.input_topic}:") for tp in body["assigned"]), body["assigned"]


def test_a_far_future_event_is_dead_lettered_and_moves_no_watermark(kafka_names: KafkaNames, workers: Workers) -> None:
    """Issue 11: one event far in the future moved every watermark to that time, for good."""
    w = workers.start(kafka_names, "future")
    wait_for(lambda: w.counters() is not None or not w.alive(), 60, what="the worker's web server")
    now = time.time()
    stats = {"type": "cache_stats", "cache_domain": "d1", "role": "prefill", "capacity_tokens": 10, "used_tokens": 1}
    prod = KafkaProducer(bootstrap_servers=kafka_names.bootstrap)
    for p in range(4):  # every input partition has a recent event time
        prod.send(
            kafka_names.input_topic, partition=p, value=orjson.dumps({**stats, "event_id": f"s{p}", "ts": now - 60})
        )
    poison = {**stats, "event_id": "poison", "ts": now + 10 * 365 * 86400.0}
    prod.send(kafka_names.input_topic, partition=1, value=orjson.dumps(poison))
    for p in range(4):
        prod.send(
            kafka_names.input_topic, partition=p, value=orjson.dumps({**stats, "event_id": f"t{p}", "ts": now - 30})
        )
    prod.flush()
    prod.close()

    def settled() -> dict[str, Any] | None:
        c = w.counters()
        if not c or c["counters"].get("events.cache_stats", 0) < 8:  # every good event reached its join partition
            return None
        return c if c["event_time"]["join_watermarks"] else None

    c = wait_for(settled, WAIT_S, what="the events to be read and a watermark to form")
    assert c["deadletter"] == {"future_ts": 1}
    assert all(ts <= now for ts in c["event_time"]["input"].values()), c["event_time"]
    assert all(wm <= now for wm in c["event_time"]["join_watermarks"].values()), c["event_time"]
    # The newest good events are 30 s old and the watermark trails them by the lateness: the worker says so.
    assert c["event_time"]["behind_wall_clock_s"] >= 30 + Settings().kafka.watermark_lateness_s - 1
    assert c["counters"]["events.cache_stats"] == 8
