"""Event-time re-ordering: the one order key and the one buffer, for every runner.

A cache domain must see its items in event time whatever order they arrived in (files merged, Kafka
partitions interleaved). Ties are broken by content, never by arrival, so two runners that receive
the same items in different orders evaluate them in the same order. The embedded `DomainMonitor`
and the Kafka domain stage both hold items here until a watermark passes them. A domain's own event
time passes an item only when a later instant has come (`release_before`): items of one instant
(two responses completed in the same millisecond) may arrive in any order, and none is judged before
the others are here (ADR 0011, stop 67).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Generic, NamedTuple, TypeVar

from schemas.events import CacheStats
from schemas.exchange import Exchange

T = TypeVar("T")

# Rank of an item kind within one instant: a domain's capacity is known before the exchanges of that instant.
STATS_RANK = 0
EXCHANGE_RANK = 1


class OrderKey(NamedTuple):
    ts: float  # event time
    rank: int  # STATS_RANK | EXCHANGE_RANK
    ident: str  # cache_stats: event_id; exchange: request_id


def order_key(item: CacheStats | Exchange) -> OrderKey:
    if isinstance(item, CacheStats):
        return OrderKey(item.ts, STATS_RANK, item.event_id)
    return OrderKey(item.ts, EXCHANGE_RANK, item.request_id)


class EventTimeBuffer(Generic[T]):
    """Items held until event time `upto` passes them, released in (order key, arrival) order.

    What is held is opaque (a model, or bytes that are cheaper to pickle into a snapshot than a model);
    the key alone decides the order. The arrival sequence only separates equal keys (a duplicate).
    """

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[OrderKey, int, T]] = []
        self._seq = 0

    def push(self, key: OrderKey, item: T) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (key, self._seq, item))

    def release(self, upto: float) -> Iterator[T]:
        """Pop every item with event time <= upto, in order (lazily: stop iterating to keep the rest): for a
        watermark that says every item up to `upto` has come."""
        heap = self._heap
        while heap and heap[0][0][0] <= upto:
            yield heapq.heappop(heap)[2]

    def release_before(self, upto: float) -> Iterator[T]:
        """Pop every item with event time < upto, in order: for event time that reached `upto`, where more items
        of that very instant may still come (a tie is judged once all of it is here)."""
        heap = self._heap
        while heap and heap[0][0][0] < upto:
            yield heapq.heappop(heap)[2]

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
