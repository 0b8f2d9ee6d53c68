"""Where an event goes: its routing key and the internal partition that owns a key.

Light on purpose: the gateway producer imports this without Faust, OpenTelemetry or httpx.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping

from schemas.events import CacheStats, Event, Request, Response

# Header of a message placed on its cache domain's input partition by a crosstalk producer or a direct worker: its
# canaries are on every partition already, and it is never re-routed (streams/kafka/direct.py).
PLACED = "crosstalk-placed"

# Headers of a dead letter, which says why and where it came from instead of holding the original (a worker's:
# streams/kafka/topics.py `dead_letter_headers`; a shell adapter's: streams/outputs/kafka.py).
H_REASON = "x-crosstalk-reason"
H_DETAIL = "x-crosstalk-detail"
H_SRC_TOPIC = "x-crosstalk-source-topic"
H_SRC_PARTITION = "x-crosstalk-source-partition"
H_SRC_OFFSET = "x-crosstalk-source-offset"
H_SRC_LINE = "x-crosstalk-source-line"
H_SEVERITY = "x-crosstalk-severity"  # "warning" on records of events that were kept (absent: rejected)


def routing_key(event: Event) -> str:
    """The key that co-locates what must meet: both halves of a pair, a domain's stats, a tenant's canaries."""
    if isinstance(event, (Request, Response)):
        return event.request_id
    if isinstance(event, CacheStats):
        return event.cache_domain
    return event.tenant_id


def domain_key(event: Event, domain_of_request: Mapping[str, str] | None = None) -> str | None:
    """The key of the direct topology (kafka.topology=direct): every event of a cache domain, both halves
    of a pair included, on one input partition: a request goes where its response's domain is (the caller
    knows it: `domain_of_request`), else to the domain it names. None for a canary (written to every
    partition) and for a request whose domain is unknown (keyed by its request_id instead: the pair will
    not meet, and is counted as orphans)."""
    if isinstance(event, (Response, CacheStats)):
        return event.cache_domain
    if isinstance(event, Request):
        # The response's domain first: the pair is evaluated where it was decoded (Exchange.cache_domain).
        known = None if domain_of_request is None else domain_of_request.get(event.request_id)
        return known if known is not None else event.cache_domain
    return None


class DomainHome:
    """Whether a cache domain's input partition is `partition` (of `partitions`): the domains a direct-topology
    Monitor may judge (`Monitor.owns`). A class, not a closure: the Monitor is pickled with it."""

    __slots__ = ("_seen", "partition", "partitions")

    def __init__(self, partition: int, partitions: int) -> None:
        self.partition = partition
        self.partitions = partitions
        self._seen: dict[str, bool] = {}

    def __call__(self, domain: str) -> bool:
        home = self._seen.get(domain)
        if home is None:
            if len(self._seen) > 100_000:  # junk domains: the map is a cache
                self._seen.clear()
            home = self._seen[domain] = input_partition_of(domain.encode(), self.partitions) == self.partition
        return home

    def __getstate__(self) -> tuple[int, int]:
        return self.partition, self.partitions

    def __setstate__(self, state: tuple[int, int]) -> None:
        self.partition, self.partitions = state
        self._seen = {}


def input_partition_of(key: bytes, partitions: int) -> int:
    """The input partition Kafka's default partitioner (murmur2, as the Java client) gives a keyed message."""
    from kafka.partitioner.default import murmur2

    return (murmur2(key) & 0x7FFFFFFF) % partitions


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
    need_in, need_int = set(range(input_partitions)), set(range(internal_partitions))
    keys: list[str] = []
    i = 0
    while need_in or need_int:
        key = f"{prefix}-{i}"
        a = input_partition_of(key.encode(), input_partitions)
        b = partition_of(key, internal_partitions)
        if a in need_in or b in need_int:
            keys.append(key)
            need_in.discard(a)
            need_int.discard(b)
        i += 1
    return keys
