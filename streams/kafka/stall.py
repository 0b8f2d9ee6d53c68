"""A partition the consumer stopped delivering although it has messages to read: found, and read again.

Seen in the broker tests about once in ten restarts with a backlog on every partition (docs/operations.md, "Messages
cleared from the stream buffers"): an input partition stayed assigned, fetchable, neither paused nor
buffered, while the consumer delivered the other partitions' messages and the broker held hundreds of messages past
its read position. Nothing came for it until the worker was restarted; meanwhile the ingest reported it idle, the
join gave up on the responses still in it, and their requests came out as orphans.

The cause found (a recovery's end clears stream buffers that already hold fetched messages) is mended where it
happens (streams/kafka/readagain.py). This watch is the net for any other: every
`stall_check_s` the worker asks the broker for the end of each fetchable partition, and one whose next offset to read
has not moved for `stall_s` (and over a few of the consumer's fetch rounds, so a consumer blocked by back-pressure,
which fetches nothing, never counts) while the end lies past it is read again from its committed offset. A partition
in that state is also not "idle" for the watermarks: it has messages, they are only not read yet.

Pure: the caller passes the clock, the fetch rounds and each partition's positions in.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

P = TypeVar("P", bound=Hashable)  # a topic-partition (Faust's TP in the shell)


@dataclass(slots=True)
class _Seen:
    offset: int  # the next offset to read when first seen there with messages past it
    since: float  # the caller's clock then
    rounds: int  # the consumer's fetch rounds then


class StallWatch(Generic[P]):
    """Partitions whose next offset to read stays put while the broker holds messages past it."""

    def __init__(self, stall_s: float, min_rounds: int = 3) -> None:
        self.stall_s = stall_s
        self.min_rounds = min_rounds
        self._seen: dict[P, _Seen] = {}
        # The offset each partition was last read again from: until it moves past it, what lies beyond is taken to be
        # no message (a transaction's commit marker ends a transactional producer's partition one past its record),
        # and the re-read itself (from the committed offset, back up to here) is no new stall.
        self._fired: dict[P, int] = {}
        # Read to their end at the last check: the only partitions a silence may call idle (`caught_up`).
        self._caught_up: set[P] = set()

    def check(self, now: float, rounds: int, positions: Mapping[P, tuple[int, int]]) -> list[tuple[P, int]]:
        """`positions`: for each partition fetchable now, (next offset to read, end offset on the broker). Returns the
        (partition, offset) pairs to read again: stalled for `stall_s` and `min_rounds` fetch rounds, once until the
        partition moves past that offset (a second seek there would find what the first found). A partition not passed
        (revoked, paused, buffered, rebalancing) starts over; one read to its end is caught up."""
        seen, fired, caught_up = self._seen, self._fired, self._caught_up
        for p in [p for p in seen if p not in positions]:
            del seen[p]
        caught_up.clear()
        out: list[tuple[P, int]] = []
        for p, (offset, end) in positions.items():
            if end <= offset:
                seen.pop(p, None)  # read to its end: not behind
                fired.pop(p, None)
                caught_up.add(p)
                continue
            if offset <= fired.get(p, -1):
                seen.pop(p, None)
                caught_up.add(p)  # read again from here and nothing came: what lies past it is no message
                continue
            s = seen.get(p)
            if s is None or s.offset != offset:
                seen[p] = _Seen(offset, now, rounds)  # moved (or first seen behind): the clock starts again
                continue
            if now - s.since >= self.stall_s and rounds - s.rounds >= self.min_rounds:
                out.append((p, offset))
                fired[p] = offset
                del seen[p]
        return out

    def behind(self) -> set[P]:
        """Partitions with messages past their next offset at the last check (not idle, whatever their silence), but
        for those read again from there that have not moved past it since."""
        return set(self._seen)

    def caught_up(self) -> set[P]:
        """Partitions read to their end at the last check: positive evidence, so a partition the check did not see
        (paused while its stage restores, buffered, just assigned, or a check that failed) is never among them. Only
        these may be reported idle: a silence alone is also what a partition waiting for its reader looks like, and
        a join partition that took it for idle would pass its backlog's canary plants (found 2026-12-05: the broker
        test with two workers, about one run in four on a loaded machine)."""
        return set(self._caught_up)

    def forget(self) -> None:
        """A rebalance: positions start over with the new assignment."""
        self._seen.clear()
        self._fired.clear()
        self._caught_up.clear()
