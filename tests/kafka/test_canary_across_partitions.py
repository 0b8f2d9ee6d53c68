"""A marker planted on one input partition and leaked in a response on another is found however far apart the
ingest reads the two partitions (Kafka orders nothing across partitions: a backlog after a restart or a
rebalance is read a partition at a time). The join scans a response's words for markers once its watermark
passed the exchange, i.e. once every input partition was read past it (streams/kafka/stages.py, `_route`)."""

from __future__ import annotations

import orjson
from factories import PROBE_MARKER, TEXTS

from streams.routing import input_partition_of
from streams.settings import Settings
from tests.support.rawevents import key_of, tick_events
from tests.support.stagepipe import StagePipeline

T0 = 1_780_000_000.0


def _story() -> list[dict[str, object]]:
    common = {"model": "m", "cache_domain": "d1"}
    return [
        {"type": "canary", "event_id": "c1", "ts": T0, "tenant_id": "probe-b", "marker": PROBE_MARKER},
        {"type": "request", "event_id": "q3", "ts": T0 + 20, "request_id": "r3", "tenant_id": "acme",
         "prompt_tokens": 300, "prompt_text": TEXTS[5], **common},
        {"type": "response", "event_id": "p3", "ts": T0 + 21, "request_id": "r3", "tenant_id": "acme",
         "status_code": 200, "usage": {"input_tokens": 300, "output_tokens": 60},
         "output_text": f"as noted in {PROBE_MARKER} earlier", **common},
    ]  # fmt: skip


def _by_partition(s: Settings, events: list[dict[str, object]]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for e in events:
        out.setdefault(input_partition_of(key_of(e), s.kafka.input_partitions), []).append(orjson.dumps(e))
    return out


def _run(leak_first: bool) -> tuple[list[tuple[str, str, str | None]], StagePipeline]:
    s = Settings(detection={"fingerprint_key": "k"})
    parts = _by_partition(s, _story())
    plant_p = input_partition_of(key_of(_story()[0]), s.kafka.input_partitions)
    leak_p = input_partition_of(key_of(_story()[2]), s.kafka.input_partitions)
    assert plant_p != leak_p, "the story must put the plant and the leak on different input partitions"
    pipe = StagePipeline(s)
    order = sorted(parts, key=lambda p: (p != leak_p) if leak_first else (p != plant_p))
    # Every input partition is known before the first read, as after a restart (the watermark waits for all).
    for p in range(s.kafka.input_partitions):
        pipe.ingest.publish({p: T0 - 1})
    for p in order:
        pipe.feed((p, line) for line in parts[p])
    ticks = [orjson.dumps(t) for t in tick_events(T0 + 60, s.kafka)]
    for t in ticks:
        pipe.feed([(input_partition_of(key_of(orjson.loads(t)), s.kafka.input_partitions), t)])
    pipe.heartbeat()
    return sorted((a.kind, a.tenant_id, a.source_tenant_id) for a in pipe.out.alerts), pipe


def test_a_plant_read_after_the_leak_on_another_partition_still_finds_it() -> None:
    kinds, pipe = _run(leak_first=True)
    assert ("canary_leak", "acme", "probe-b") in kinds, kinds
    assert pipe.counters["join.canary_scans_held"] >= 1  # it did wait: the test exercised the race


def test_the_plant_read_first_gives_the_same_alert() -> None:
    kinds, _ = _run(leak_first=False)
    assert ("canary_leak", "acme", "probe-b") in kinds, kinds
