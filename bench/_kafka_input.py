"""The Kafka benchmark's inputs: simulator lines as keyed messages, end markers and ticks, batched messages.

End markers: one over-long request per domain partition (an alert every time), after every real event;
then ticks (tests/support/rawevents.py) push event time past everything. When the markers' alerts have
all come out, every domain partition has processed everything before them.
"""

from __future__ import annotations

import zlib
from typing import Any

import orjson

from streams.routing import input_partition_of, partition_of
from streams.settings import Settings
from tests.support.rawevents import key_of, tick_events

PREFILL_CAPACITY = 681_280
OVERLONG_TOKENS = 900_000
PER_MESSAGE = 100  # events per message of the batched-input run


def one_per_partition(prefix: str, partitions: int) -> list[str]:
    """Names whose key lands on each internal partition once (streams.kafka.topics.partition_of)."""
    out: dict[int, str] = {}
    i = 0
    while len(out) < partitions:
        name = f"{prefix}-{i}"
        out.setdefault(partition_of(name, partitions), name)
        i += 1
    return [out[p] for p in range(partitions)]


def overlong_pair(rid: str, domain: str, ts: float, tenant: str = "bench-tenant") -> tuple[dict, dict]:
    req = {
        "type": "request",
        "event_id": f"{rid}-req",
        "ts": ts,
        "request_id": rid,
        "tenant_id": tenant,
        "model": "glm-5.3",
        "prompt_tokens": OVERLONG_TOKENS,
        "cache_domain": domain,
    }
    resp = {
        "type": "response",
        "event_id": f"{rid}-resp",
        "ts": ts,
        "request_id": rid,
        "tenant_id": tenant,
        "model": "glm-5.3",
        "cache_domain": domain,
        "status_code": 200,
        "usage": {"input_tokens": 1, "output_tokens": 12},
        "ttft_ms": 40.0,
    }
    return req, resp


def prefill_stats(domain: str, ts: float) -> dict[str, Any]:
    return {
        "type": "cache_stats",
        "event_id": f"{domain}-stats-{ts:.3f}",
        "ts": ts,
        "cache_domain": domain,
        "role": "prefill",
        "capacity_tokens": PREFILL_CAPACITY,
        "used_tokens": 0,
    }


def end_of_data(last_ts: float, partitions: int) -> tuple[list[dict[str, Any]], list[str]]:
    """End markers (an over-long pair on one domain per domain partition) and tick events.

    The ticks (idle domains far ahead in event time, on every input and join partition) move every watermark
    past everything; the markers' alerts then come out of every domain partition after the last
    real item of that partition: when all have been read, the pipeline has processed everything."""
    events: list[dict[str, Any]] = []
    domains = one_per_partition("zz-bench-end", partitions)
    for d in domains:
        events.append(prefill_stats(d, last_ts + 0.5))
        events.extend(overlong_pair(f"{d}-marker", d, last_ts + 1.0))
    events.extend(tick_events(last_ts, Settings().kafka))
    return events, domains


def build_input(lines: list[bytes], partitions: int) -> tuple[list[tuple[bytes, bytes]], list[str]]:
    """(key, value) messages: the events, then end markers and ticks."""
    msgs = []
    last_ts = 0.0
    for raw in lines:
        ev = orjson.loads(raw)
        last_ts = max(last_ts, float(ev["ts"]))
        msgs.append((key_of(ev), raw))
    extra, domains = end_of_data(last_ts, partitions)
    msgs.extend((key_of(ev), orjson.dumps(ev)) for ev in extra)
    return msgs, domains


def batched(msgs: list[tuple[bytes, bytes]], n_events: int, per_message: int) -> list[tuple[bytes | None, bytes]]:
    """The same input with the events `per_message` to a message (application/x-ndjson, no key); the end
    markers and ticks after them stay one keyed message each, so that every input partition gets a tick."""
    out: list[tuple[bytes | None, bytes]] = []
    for i in range(0, n_events, per_message):
        out.append((None, b"\n".join(v for _, v in msgs[i : min(i + per_message, n_events)])))
    out.extend(msgs[n_events:])
    return out


# --- the direct topology (kafka.topology=direct): input keyed by cache domain ---------------------------

Direct = list[tuple[bytes | None, bytes, int]]  # (key, value, input partition)


def domain_key_of(ev: dict[str, Any], domain_of_request: dict[str, str]) -> bytes | None:
    """streams.routing.domain_key on a raw event (None: a canary, written to every partition)."""
    t = ev["type"]
    if t == "canary":
        return None
    if t == "request":
        dom = domain_of_request.get(ev["request_id"]) or ev.get("cache_domain")
        return str(dom if dom is not None else ev["request_id"]).encode()
    return str(ev["cache_domain"]).encode()


def one_per_input_partition(prefix: str, partitions: int) -> list[str]:
    """Domain names whose key Kafka's partitioner puts on each input partition once."""
    out: dict[int, str] = {}
    i = 0
    while len(out) < partitions:
        name = f"{prefix}-{i}"
        out.setdefault(input_partition_of(name.encode(), partitions), name)
        i += 1
    return [out[p] for p in range(partitions)]


def direct_input(lines: list[bytes], input_partitions: int) -> tuple[Direct, list[str], int]:
    """The same events keyed by cache domain, canaries on every partition, then one end marker per input
    partition and the ticks. Returns the messages, the marker domains and the count of real events."""
    evs = [orjson.loads(raw) for raw in lines]
    rdom = {e["request_id"]: e["cache_domain"] for e in evs if e["type"] == "response" and e.get("cache_domain")}
    msgs: Direct = []
    last_ts = 0.0
    for raw, ev in zip(lines, evs, strict=True):
        last_ts = max(last_ts, float(ev["ts"]))
        key = domain_key_of(ev, rdom)
        if key is None:
            msgs.extend((None, raw, q) for q in range(input_partitions))
        else:
            msgs.append((key, raw, input_partition_of(key, input_partitions)))
    n_events = len(msgs)
    domains = one_per_input_partition("zz-bench-end", input_partitions)
    extra: list[dict[str, Any]] = []
    for d in domains:
        extra.append(prefill_stats(d, last_ts + 0.5))
        extra.extend(overlong_pair(f"{d}-marker", d, last_ts + 1.0))
    extra.extend(tick_events(last_ts, Settings().kafka))
    for ev in extra:
        key = domain_key_of(ev, {})
        assert key is not None
        msgs.append((key, orjson.dumps(ev), input_partition_of(key, input_partitions)))
    return msgs, domains, n_events


def direct_batched(msgs: Direct, n_events: int, per_message: int) -> Direct:
    """The events `per_message` to a message, each message one partition's (in their order); the end
    markers and ticks after them stay one message each."""
    by_partition: dict[int, list[bytes]] = {}
    out: Direct = []
    for _, value, q in msgs[:n_events]:
        group = by_partition.setdefault(q, [])
        group.append(value)
        if len(group) >= per_message:
            out.append((None, b"\n".join(group), q))
            by_partition[q] = []
    out.extend((None, b"\n".join(g), q) for q, g in by_partition.items() if g)
    out.extend(msgs[n_events:])
    return out


def spread_domains(lines: list[bytes], ways: int) -> list[bytes]:
    """The same traffic over `ways` times as many cache domains (a service with more engine instances):
    an exchange's request and response go to one copy of their domain (a stable hash of the request id),
    each domain's cache_stats samples round robin over its copies. The direct topology
    runs one domain on one partition, so a two-worker run needs more busy domains than partitions."""
    out: list[bytes] = []
    turn: dict[str, int] = {}
    for raw in lines:
        ev = orjson.loads(raw)
        dom = ev.get("cache_domain")
        if dom:
            if ev["type"] == "cache_stats":
                j = turn.get(dom, 0)
                turn[dom] = (j + 1) % ways
            else:
                j = zlib.crc32(str(ev.get("request_id")).encode()) % ways
            ev["cache_domain"] = f"{dom}~{j}"
        out.append(orjson.dumps(ev))
    return out
