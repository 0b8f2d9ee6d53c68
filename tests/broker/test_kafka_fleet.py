"""The fleet record across workers on the real broker (streams/kafka/fleet.py): a worker hears, through the fleet
topic, what the model wrote on the other worker's partitions, and judges as one process would.

A phrase the model wrote for A in domain d1 and for C in domain d2, judged by two different workers, is its habit:
R's answer with it in d1 is no leak. The control, without C's session, is a leak of A's. Workers run as
subprocesses; waits are bounded; nothing asserts on wall-clock durations."""

from __future__ import annotations

import random
import time
from typing import Any

import orjson
import pytest
from conftest import wait_for
from factories import request, response
from kafka import KafkaConsumer, KafkaProducer

from streams.routing import input_partition_of, partition_of

KafkaNames = Workers = Any  # fixtures of tests/conftest.py

pytestmark = pytest.mark.kafka

WAIT_S = 120.0
# Warm at once, so that R's answer is judged as it comes (a cold domain's hold is tests/broker/test_quiet_input.py's).
WARM = {"CROSSTALK_DETECTION__OVERLAP_WARMUP_DOCS": "0", "CROSSTALK_DETECTION__OVERLAP_WARMUP_S": "0"}


def _domains(first: list[int], second: list[int], partitions: int, of: Any) -> tuple[str, str]:
    """A domain judged on one of `first`'s partitions and one on `second`'s (`of`: domain -> partition)."""
    names = [f"fleet-d{i}" for i in range(256)]
    d1 = next(d for d in names if of(d, partitions) in first)
    d2 = next(d for d in names if of(d, partitions) in second)
    return d1, d2


def _two_domains(names: KafkaNames, a: Any, b: Any, topology: str) -> tuple[str, str]:
    """A domain judged by worker `a` and one judged by worker `b`, once the two share the judging partitions."""
    k = names.settings().kafka
    n = k.input_partitions if topology == "direct" else k.internal_partitions
    # Where a domain is judged: its input partition (direct), or its domain-stage partition (staged).
    of = (lambda d, q: input_partition_of(d.encode(), q)) if topology == "direct" else partition_of

    def split() -> tuple[list[int], list[int]] | None:
        # The judging partitions shared out between the two (a partition shows once its state exists: the test
        # waits for the assignment instead, from the consumer's view).
        ca, cb = a.counters(), b.counters()
        if not ca or not cb:
            return None
        topic = names.input_topic if topology == "direct" else f"{names.app_id}.domain"
        mine = [[int(tp.rsplit(":", 1)[1]) for tp in c["assigned"] if tp.rsplit(":", 1)[0] == topic] for c in (ca, cb)]
        return (mine[0], mine[1]) if mine[0] and mine[1] and sorted(mine[0] + mine[1]) == list(range(n)) else None

    first, second = wait_for(split, 90, what="two workers sharing the partitions")
    return _domains(first, second, n, of)


def _world(d1: str, d2: str, with_c: bool) -> tuple[list[bytes], list[bytes]]:
    """(the sessions that teach the phrase, and R's exchange two minutes of event time later), as input lines."""
    rng = random.Random(11)
    pool = rng.sample([f"q{i:04d}" for i in range(5000)], 400)
    phrase, own, other = " ".join(pool[:24]), pool[24:84], pool[84:]
    base = time.time() - 7200
    first: list[Any] = []
    for i, (tenant, domain) in enumerate([("A", d1), ("C", d2)] if with_c else [("A", d1)]):
        words = " ".join(other[i * 10 : i * 10 + 10])
        first += [
            request(f"s{i}", tenant, base + i, text=words, session_id=f"s{i}", cache_domain=domain),
            response(f"s{i}", tenant, base + i + 0.5, text=f"{phrase} {words}", session_id=f"s{i}", domain=domain),
        ]
    for j in range(4):  # d1's own traffic meanwhile
        words = " ".join(other[200 + j * 10 : 210 + j * 10])
        first += [
            request(f"w{j}", f"W{j}", base + 30 + j, text=words, session_id=f"w{j}", cache_domain=d1),
            response(f"w{j}", f"W{j}", base + 30.5 + j, text=f"ok {words}", session_id=f"w{j}", domain=d1),
        ]
    answer = " ".join(own[:20]) + f" {phrase} " + " ".join(own[20:40])
    second = [
        request("r1", "R", base + 120, text="tell me something", session_id="r", cache_domain=d1),
        response("r1", "R", base + 121, text=answer, session_id="r", domain=d1),
    ]
    return [e.model_dump_json(exclude_none=True).encode() for e in first], [
        e.model_dump_json(exclude_none=True).encode() for e in second
    ]


def _send(names: KafkaNames, lines: list[bytes], domain_of: dict[str, str]) -> None:
    k = names.settings().kafka
    prod = KafkaProducer(bootstrap_servers=k.bootstrap)
    for line in lines:
        key = domain_of[orjson.loads(line)["request_id"]].encode()
        prod.send(k.input_topic, key=key, value=line, partition=input_partition_of(key, k.input_partitions))
    prod.flush()
    prod.close()


def _r_alerts(names: KafkaNames, want_any: bool) -> list[dict[str, Any]]:
    consumer = KafkaConsumer(
        names.alerts_topic, bootstrap_servers=names.bootstrap, auto_offset_reset="earliest", group_id=None
    )
    got: list[dict[str, Any]] = []
    try:
        end = time.monotonic() + (WAIT_S if want_any else 20.0)
        while time.monotonic() < end and not (want_any and got):
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    a = orjson.loads(r.value)
                    if a.get("tenant_id") == "R" and a.get("severity") in ("high", "critical"):
                        got.append(a)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("topology", ["direct", "staged"])
@pytest.mark.parametrize("with_c", [True, False])
def test_a_worker_hears_what_the_model_wrote_on_another_workers_partitions(
    kafka_names: KafkaNames, workers: Workers, topology: str, with_c: bool
) -> None:
    a = workers.start(kafka_names, "a", **WARM, CROSSTALK_KAFKA__TOPOLOGY=topology)
    b = workers.start(kafka_names, "b", **WARM, CROSSTALK_KAFKA__TOPOLOGY=topology)
    d1, d2 = _two_domains(kafka_names, a, b, topology)
    lines, later = _world(d1, d2, with_c)
    domain_of = {"s0": d1, "s1": d2, "r1": d1} | {f"w{j}": d1 for j in range(4)}
    _send(kafka_names, lines, domain_of)

    def heard() -> bool:
        # C's digest, told by b, heard by a (and A's by b).
        ca, cb = a.counters(), b.counters()
        if not ca or not cb:
            return False
        told = ca["counters"].get("fleet.told", 0) + cb["counters"].get("fleet.told", 0)
        return told >= 5 + with_c and (not with_c or ca["counters"].get("fleet.heard", 0) >= 1)

    try:
        wait_for(heard, WAIT_S, what="the workers to tell what they judged, and to hear each other")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{a.counters()}\n{b.counters()}\n{a.log_tail(40)}") from None
    _send(kafka_names, later, domain_of)
    alerts = _r_alerts(kafka_names, want_any=not with_c)
    if with_c:
        # C's session was judged by the other worker: heard, the phrase is the model's habit in d1 too.
        assert alerts == [], (alerts, a.log_tail(40))
    else:
        assert [x["source_tenant_id"] for x in alerts] == ["A"], (alerts, a.log_tail(40))


def _twice(d1: str, d2: str) -> list[bytes]:
    """A's answer in d1, handed again under its response id to R in d2 a minute later (a response cache keyed wrongly):
    it quotes neither prompt, so only the id says whose it is (ADR 0022). Then another exchange in d2, which moves the
    event time of R's worker past the fleet's delay."""
    rng = random.Random(23)
    pool = rng.sample([f"z{i:04d}" for i in range(5000)], 200)
    prompt_a, prompt_r, answer = " ".join(pool[:60]), " ".join(pool[60:120]), " ".join(pool[120:180])
    base = time.time() - 7200
    events = [
        request("a1", "A", base, text=f"my order {prompt_a}", session_id="a", cache_domain=d1),
        response("a1", "A", base + 2, text=answer, session_id="a", domain=d1, response_id="chatcmpl-twice"),
        request("r1", "R", base + 60, text=f"my ticket {prompt_r}", session_id="r", cache_domain=d2),
        response("r1", "R", base + 62, text=answer, session_id="r", domain=d2, response_id="chatcmpl-twice"),
        request("w1", "W", base + 200, text=" ".join(pool[180:]), session_id="w", cache_domain=d2),
        response("w1", "W", base + 201, text="fine thanks", session_id="w", domain=d2, response_id="chatcmpl-w"),
    ]
    return [e.model_dump_json(exclude_none=True).encode() for e in events]


@pytest.mark.parametrize("topology", ["direct", "staged"])
def test_one_answer_under_one_id_judged_by_two_workers_names_its_owner(
    kafka_names: KafkaNames, workers: Workers, topology: str
) -> None:
    # A's exchange is judged by one worker, R's by the other: only the fleet topic (frame F3, with the response id)
    # brings the pair together, and the worker that judged R raises the alert.
    a = workers.start(kafka_names, "a", **WARM, CROSSTALK_KAFKA__TOPOLOGY=topology)
    b = workers.start(kafka_names, "b", **WARM, CROSSTALK_KAFKA__TOPOLOGY=topology)
    d1, d2 = _two_domains(kafka_names, a, b, topology)
    _send(kafka_names, _twice(d1, d2), {"a1": d1, "r1": d2, "w1": d2})
    alerts = _r_alerts(kafka_names, want_any=True)
    assert [x["source_tenant_id"] for x in alerts] == ["A"], (alerts, a.counters(), b.counters())
    figures = [e["figures"] for e in alerts[0]["evidence"] if e["name"] == "cross_tenant_contamination"]
    assert figures and figures[0]["delivery_mixup"] == "same_response", alerts
