"""The direct topology's input, read again where it passed its state: no message accepted by Kafka is skipped.

A partition's state (`DirectState.offset`) is the last input offset it read. The next message should be the one
after it. Where a later one comes instead, the messages between never reached the state: a batch dropped at a
rebalance that was not read again, or one fetched before a seek and delivered after it (docs/operations.md, the
direct topology's flake of stops 59-62). Read on, the state would skip them for good, and their alerts with them.

So the partition is sought back to the offset after its state, once (`InputGaps.read_now`, then the consumer's
`reread_upto`). Kafka's own gaps are kept: a transaction's commit marker takes one offset (a gap of one is read on
at once), and aborted records or records gone with retention are never delivered; after the seek back, the first
message at or after the sought offset, up to the one that came too early, is the partition's next, so a gap the
log really has costs one seek and is read on. Until that message comes, what was queued beyond it (fetched before
the seek) is dropped, and read again after it. Counted on `/counters`: `direct.rewinds`, `direct.rewind_dropped`;
the state's own count of gaps it read on is `direct.offset_gaps`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

log = logging.getLogger("crosstalk.kafka")
MARKER_GAP = 2  # a commit marker between two transactions' records: the next record is two offsets on


class InputGaps:
    """Per input partition: the seek back in progress, as (the offset sought, the offset that came too early)."""

    def __init__(self, counters: Counter[str]) -> None:
        self.counters = counters
        self.pending: dict[int, tuple[int, int]] = {}
        self._seeks: set[asyncio.Future[None]] = set()  # in flight: a task only the loop refers to can be collected

    def seek_back(self, consumer: Any, tp: Any, back: tuple[int, int]) -> None:
        """Has the consumer read the partition again from `back[0]` (`BatchGuardConsumer.reread_upto`); it drops what
        was fetched before, at once, and seeks in a task of its own."""
        seek = consumer.reread_upto(tp, *back)
        self._seeks.add(seek)
        seek.add_done_callback(self._sought)

    def _sought(self, seek: asyncio.Future[None]) -> None:
        self._seeks.discard(seek)
        if not seek.cancelled() and seek.exception() is not None:  # a revocation voids it: the assignment seeks
            log.warning("a seek back of the input failed: %r", seek.exception())

    def forget(self, partition: int) -> None:
        """Revoked: the next assignment starts where the consumer seeks it."""
        self.pending.pop(partition, None)

    def read_now(self, partition: int, covered: int, offsets: list[int]) -> tuple[int, int, tuple[int, int] | None]:
        """Of a slice of one partition's messages (`offsets`, in order) whose state covers `covered` (-1: none yet),
        which to read now: (first, stop, back). Read `offsets[first:stop]`; drop the rest; if `back` is given, seek
        the partition back to `back[0]` and accept as its next message any from there up to `back[1]`."""
        first, prev = 0, covered
        sought = self.pending.get(partition)
        if sought is not None:
            lo, hi = sought
            while first < len(offsets) and not lo <= offsets[first] <= hi:
                first += 1  # fetched before the seek back: queued beyond the one that came too early
            self.counters["direct.rewind_dropped"] += first
            if first == len(offsets):
                return first, first, None
            del self.pending[partition]
            prev = offsets[first]  # the partition's next message: a gap up to it is the log's own
        for i in range(first + (sought is not None), len(offsets)):
            offset = offsets[i]
            if prev >= 0 and offset > prev + MARKER_GAP:
                back = (prev + 1, offset)
                self.pending[partition] = back
                self.counters["direct.rewinds"] += 1
                self.counters["direct.rewind_dropped"] += len(offsets) - i
                log.warning(
                    "partition %d: offset %d came after %d; reading again from %d", partition, offset, prev, prev + 1
                )
                return first, i, back
            prev = max(prev, offset)
        return first, len(offsets), None


def revoked_skipped(counters: Counter[str], messages: list[Any]) -> None:
    """Messages dropped at a rebalance: counted, and logged by partition and offsets (a partition's next owner must
    read them again; the broker tests' failure output shows where)."""
    counters["direct.revoked_skipped"] += len(messages)
    log.info("dropped at a rebalance, to be read again: %s", offset_spans(messages))


def offset_spans(messages: list[Any]) -> dict[int, str]:
    """Kafka messages' partitions and the offsets they span ("first-last"), for a log line."""
    spans: dict[int, tuple[int, int]] = {}
    for m in messages:
        lo, hi = spans.get(m.partition, (m.offset, m.offset))
        spans[m.partition] = (min(lo, m.offset), max(hi, m.offset))
    return {p: f"{lo}-{hi}" for p, (lo, hi) in spans.items()}
