"""Where an event goes: its routing key and the internal partition that owns a key.

Light on purpose: the gateway producer imports this without Faust, OpenTelemetry or httpx.
"""

from __future__ import annotations

import zlib

from schemas.events import CacheStats, Event, Request, Response


def routing_key(event: Event) -> str:
    """The key that co-locates what must meet: both halves of a pair, a domain's stats, a tenant's canaries."""
    if isinstance(event, (Request, Response)):
        return event.request_id
    if isinstance(event, CacheStats):
        return event.cache_domain
    return event.tenant_id


def partition_of(key: str, partitions: int) -> int:
    """The internal partition (join or domain) that owns a routing key.

    The workers pick partitions themselves (they send batches, not keyed messages); CRC-32 is stable
    across processes and versions and runs in C, unlike a pure-Python murmur2.
    """
    return zlib.crc32(key.encode()) % partitions


def covering_keys(prefix: str, input_partitions: int, internal_partitions: int) -> list[str]:
    """Keys that land at least once on every input partition (Kafka's default murmur2 partitioner of
    keyed producer messages) and on every internal partition: events under them reach every watermark,
    e.g. to move event time past the end of a replayed log."""
    from kafka.partitioner.default import murmur2

    need_in, need_int = set(range(input_partitions)), set(range(internal_partitions))
    keys: list[str] = []
    i = 0
    while need_in or need_int:
        key = f"{prefix}-{i}"
        a = (murmur2(key.encode()) & 0x7FFFFFFF) % input_partitions
        b = partition_of(key, internal_partitions)
        if a in need_in or b in need_int:
            keys.append(key)
            need_in.discard(a)
            need_int.discard(b)
        i += 1
    return keys
