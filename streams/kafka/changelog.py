"""One partition of a Faust table, written through the table's public surface, each write's delivery awaitable.

A checkpoint (streams/kafka/checkpoint.py) writes a partition's pieces and manifest to a Faust table. Written as
`table[key] = value`, Faust puts the changelog message into its producer buffer and keeps no handle on it: nothing
says when it reached the broker. Faust's `Producer.flush` gives up on that buffer after 0.1 s without a send, so
a commit could pass a checkpoint still buffered, and a revoked worker's late manifest could land after the next
owner restored. Until 2026-12-05 a barrier put into Faust's producer buffer closed both holes, at the price of five
Faust internals followed by digest (ADR 0012).

Here each write sets the table's store (`table.data`) and sends the changelog message itself, to the partition it
belongs to (`table.send_changelog`: both public), keeping the message's future. The checkpointer acks the input a
checkpoint covers only after every future of it resolved, so the offsets Faust commits never pass a checkpoint the
broker does not hold; a revocation waits for the revoked partitions' futures before their next owner can restore.

The store still needs Faust's current event: a RocksDB store files a key under the current event's partition
(`faust.stores.rocksdb.Store._set`). The streams set it; the direct topology's batch handler sets it itself
(streams/kafka/app.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, MutableMapping
from typing import Any

WRITE_TIMEOUT_S = 60.0  # past the producer's own request timeout and retries: a send that never resolves


class WriteLost(RuntimeError):
    """A changelog write failed or did not resolve in time: the checkpoint it belongs to is not on the broker."""


class ChangelogPartition(MutableMapping[bytes, bytes]):
    """The keys of one partition of a Faust table (`table`, its changelog partition `partition`)."""

    def __init__(self, table: Any, partition: int) -> None:
        self.table = table
        self.partition = partition
        self.sent: list[asyncio.Future[Any]] = []  # changelog messages not yet known to be on the broker
        self._prune_at = 64

    def __getitem__(self, key: bytes) -> bytes:
        return self.table.data[key]

    def __setitem__(self, key: bytes, value: bytes) -> None:
        self.table.data[key] = value
        self._keep(self.table.send_changelog(self.partition, key, value))

    def __delitem__(self, key: bytes) -> None:
        del self.table.data[key]
        # A tombstone, as Faust's own delete sends it: raw, so no serializer turns None into a value.
        self._keep(self.table.send_changelog(self.partition, key, None, value_serializer="raw"))

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.table.data)

    def __len__(self) -> int:
        return len(self.table.data)

    def _keep(self, fut: asyncio.Future[Any]) -> None:
        self.sent.append(fut)
        if len(self.sent) > self._prune_at:  # written often but never awaited (restores' sweeps): stays small
            self.sent = [f for f in self.sent if not f.done() or f.cancelled() or f.exception() is not None]
            self._prune_at = max(64, 2 * len(self.sent))  # amortized: a checkpoint's many writes in flight at once

    async def written(self, timeout_s: float = WRITE_TIMEOUT_S) -> None:
        """Return once every write so far is on the broker; raise `WriteLost` if one failed or timed out. Several
        callers may wait at once (a checkpoint's acks, a revocation): each waits for the same writes."""
        sent = list(self.sent)
        if not sent:
            return
        _, late = await asyncio.wait(sent, timeout=timeout_s)
        # Forgotten either way: a checkpoint whose write failed is given up (its events stay held, and the next
        # one copies every piece whole), and a later one must not wait on its writes again.
        waited = set(sent)
        self.sent = [f for f in self.sent if f not in waited]
        failed = [f for f in sent if f.done() and (f.cancelled() or f.exception() is not None)]
        if late:
            raise WriteLost(f"{len(late)} changelog write(s) of partition {self.partition} not acknowledged in time")
        if failed:
            first = failed[0]
            cause = None if first.cancelled() else first.exception()
            raise WriteLost(f"a changelog write of partition {self.partition} failed: {cause!r}") from cause
