"""The direct topology (kafka.topology=direct) against the real broker: input keyed by cache domain, one
stage, a Monitor per input partition — the embedded core's alert ids, through a kill, on bad input too.

Workers run as subprocesses. Waits are bounded; nothing asserts on wall-clock durations.
"""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import orjson
import pytest
from conftest import wait_for
from kafka import KafkaConsumer, KafkaProducer

from streams.producer import produce_file, response_domains
from streams.routing import input_partition_of
from tests.support.incident import incident_with_ticks, split_lines

KafkaNames = Workers = Any  # fixtures of tests/conftest.py

pytestmark = pytest.mark.kafka

WAIT_S = 150.0
DIRECT = {"CROSSTALK_KAFKA__TOPOLOGY": "direct"}


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The simulator's incident plus ticks, and the embedded runner's alert ids on the same file."""
    return incident_with_ticks(tmp_path_factory.mktemp("incident-direct"))


def _direct(names: KafkaNames) -> Any:
    return names.settings().kafka.model_copy(update={"topology": "direct"})


def _records(names: KafkaNames, topic: str) -> KafkaConsumer:
    return KafkaConsumer(
        topic, bootstrap_servers=names.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False, group_id=None
    )


def _alert_ids(consumer: KafkaConsumer, seen: dict[str, int], shown: dict[str, str] | None = None) -> dict[str, int]:
    for records in consumer.poll(timeout_ms=500).values():
        for r in records:
            a = json.loads(r.value)
            if a.get("record") != "incident_resolved":
                assert r.key == a["alert_id"].encode()
                seen[a["alert_id"]] = seen.get(a["alert_id"], 0) + 1
                if shown is not None:  # what a failure shows of an unexpected alert (no text: alerts hold none)
                    ev = [(e["name"], e["severity"], e.get("figures", {})) for e in a.get("evidence", [])]
                    shown[a["alert_id"]] = f"{a['kind']}/{a['severity']} {a.get('request_ids')} {ev}"
    return seen


def _same_alerts(names: KafkaNames, expected: dict[str, str], workers: list[Any]) -> dict[str, int]:
    consumer = _records(names, names.alerts_topic)
    seen: dict[str, int] = {}
    shown: dict[str, str] = {}
    try:
        with contextlib.suppress(AssertionError):  # the comparison below says what is missing
            wait_for(
                lambda: set(expected) <= set(_alert_ids(consumer, seen, shown)), WAIT_S, 0.0, "the expected alerts"
            )
        end = time.monotonic() + 3.0  # anything extra would show up now
        while time.monotonic() < end:
            _alert_ids(consumer, seen, shown)
    finally:
        consumer.close()
    alive = [(w, w.counters()) for w in workers if w.alive()]
    logs = "\n---\n".join(f"{c}\n{w.log_tail(60)}" for w, c in alive)
    missing, extra = set(expected) - set(seen), set(seen) - set(expected)
    unexpected = "\n".join(shown[a] for a in extra)
    # Input read past (a state that skipped offsets) loses alerts silently wherever no alert depends on it.
    gaps = sum(c["counters"].get("direct.offset_gaps", 0) for _, c in alive if c)
    assert not missing and not extra and not gaps, f"missing={missing} extra={extra} gaps={gaps}\n{unexpected}\n{logs}"
    return seen


@pytest.mark.parametrize("batch", [1, 25])
def test_direct_topology_gives_the_embedded_alert_ids(
    kafka_names: KafkaNames, workers: Workers, incident: dict[str, Any], batch: int
) -> None:
    w = workers.start(kafka_names, **DIRECT)
    wait_for(lambda: w.counters() is not None or not w.alive(), 60, what="the worker's web server")
    assert w.alive(), w.log_tail()
    res = produce_file(incident["path"], _direct(kafka_names), batch=batch)
    assert not res.bad_lines
    _same_alerts(kafka_names, incident["alerts"], [w])
    c = w.counters()
    assert c is not None and c["topology"] == "direct" and not c["deadletter"], c
    assert sorted(c["partitions"]["direct"]) == [0, 1, 2, 3] and not c["partitions"]["join"]
    assert c["counters"]["exchanges"] > 0 and not c["counters"].get("ingest.batches")  # no internal topics


def _mid_stream(
    names: KafkaNames, workers: Workers, incident: dict[str, Any], name: str, batch: int = 1
) -> tuple[Any, str, dict[str, str], dict[str, str]]:
    """A worker (snapshotting often) that has read a third of the incident's events, of the first 60 % produced:
    (the worker, the rest of the file, the domains the requests are keyed by, the worker's environment)."""
    env = {**DIRECT, "CROSSTALK_KAFKA__SNAPSHOT_EVERY": "200", "CROSSTALK_KAFKA__SNAPSHOT_INTERVAL_S": "0.5"}
    w = workers.start(names, name, **env)
    wait_for(lambda: w.counters() is not None or not w.alive(), 60, what="the worker's web server")
    head, tail = split_lines(incident["path"], 0.6)
    # Requests keyed by their responses' domains, some of which come only in the tail.
    domains = response_domains(incident["path"], 10**9)
    produce_file(head, _direct(names), domains=domains, batch=batch)

    def midway() -> bool:
        c = w.counters()
        cs = c["counters"] if c else {}
        read = sum(v for k, v in cs.items() if k.startswith("events."))
        return cs.get("snapshots.direct", 0) >= 2 and read >= incident["events"] // 3

    wait_for(midway, WAIT_S, interval_s=0.05, what="the worker to be mid-stream")
    return w, tail, domains, env


def test_direct_sigkill_mid_stream_loses_no_alert(
    kafka_names: KafkaNames, workers: Workers, incident: dict[str, Any]
) -> None:
    w1, tail, domains, env = _mid_stream(kafka_names, workers, incident, "before-kill")
    w1.kill()
    # The rest only now: however fast the first worker was, the next one has input left after restoring.
    produce_file(tail, _direct(kafka_names), domains=domains)
    # A fresh data dir: the state must come back from the changelog, not from local disk.
    w2 = workers.start(kafka_names, "after-kill", **env)
    _same_alerts(kafka_names, incident["alerts"], [w1, w2])
    # Its web server shares the event loop with checkpoints every 0.5 s: one answer may take longer than the 2-s call.
    c = wait_for(w2.counters, 30, what="the restored worker's counters")
    assert c["counters"].get("restores.direct", 0) > 0, c
    assert not c["counters"].get("restore_errors.direct"), c  # restored, not started afresh after a failure


def test_direct_bad_input_is_dead_lettered_and_the_worker_goes_on(kafka_names: KafkaNames, workers: Workers) -> None:
    w = workers.start(kafka_names, **DIRECT)
    wait_for(lambda: w.counters() is not None or not w.alive(), 60, what="the worker's web server")
    k = kafka_names.settings().kafka
    good = {
        "type": "cache_stats", "event_id": "cs-1", "ts": time.time(), "cache_domain": "d1", "role": "unified",
        "capacity_tokens": 1000, "used_tokens": 0,
    }  # fmt: skip
    future = {**good, "event_id": "cs-2", "ts": time.time() + 10 * 365 * 86400}
    prod = KafkaProducer(bootstrap_servers=k.bootstrap)
    key = b"d1"
    part = input_partition_of(key, k.input_partitions)
    for value in (b"{not json", None, orjson.dumps(future), orjson.dumps(good), orjson.dumps(good)):
        prod.send(k.input_topic, key=key, value=value, partition=part)
    prod.flush()
    prod.close()

    def counted() -> dict[str, int] | None:
        c = w.counters()
        dl = c["deadletter"] if c else {}
        return dl if sum(dl.values()) >= 4 else None

    dl = wait_for(counted, 60, what="four dead letters")
    assert dl == {"invalid": 1, "not_json": 1, "future_ts": 1, "duplicate": 1}, dl
    dlq = _records(kafka_names, kafka_names.deadletter_topic)
    try:
        got: list[Any] = []
        wait_for(lambda: got.extend(r for rs in dlq.poll(timeout_ms=500).values() for r in rs) or len(got) >= 4, 30)
    finally:
        dlq.close()
    reasons = sorted(dict(r.headers)["x-crosstalk-reason"].decode() for r in got)
    assert reasons == ["duplicate", "future_ts", "invalid", "not_json"]
    assert w.alive()
    c = w.counters()
    assert c is not None and c["counters"].get("ingest.cache_stats") == 1


def test_two_direct_workers_share_the_partitions_and_give_the_same_alert_ids(
    kafka_names: KafkaNames, workers: Workers, incident: dict[str, Any]
) -> None:
    a = workers.start(kafka_names, "a", **DIRECT)
    b = workers.start(kafka_names, "b", **DIRECT)
    for w in (a, b):
        wait_for(lambda w=w: w.counters() is not None or not w.alive(), 60, what="the workers' web servers")
    # Published while the group may still be rebalancing: partitions move between them mid-stream.
    produce_file(incident["path"], _direct(kafka_names), batch=25)
    _same_alerts(kafka_names, incident["alerts"], [a, b])

    def both_own_partitions() -> bool:
        ca, cb = a.counters(), b.counters()
        return bool(ca and cb and ca["partitions"]["direct"] and cb["partitions"]["direct"])

    wait_for(both_own_partitions, 60, what="both workers to own input partitions")
    ca, cb = a.counters(), b.counters()
    assert ca and cb and not set(ca["partitions"]["direct"]) & set(cb["partitions"]["direct"])


def test_a_worker_joining_mid_stream_takes_partitions_and_loses_nothing(
    kafka_names: KafkaNames, workers: Workers, incident: dict[str, Any]
) -> None:
    a, tail, domains, env = _mid_stream(kafka_names, workers, incident, "first", batch=25)
    b = workers.start(kafka_names, "second", **env)  # the group rebalances while the first is mid-stream
    produce_file(tail, _direct(kafka_names), domains=domains, batch=25)
    _same_alerts(kafka_names, incident["alerts"], [a, b])
