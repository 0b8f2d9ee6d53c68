"""Duplicate event ids: a repeated event_id must be ignored downstream (at-least-once producers)."""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any

DedupChanges = tuple[int, list[tuple[str, float]]]  # (marked ids that left the front, ids that came, in order)


class Deduper:
    """Remembers event ids for `window_s` of event time, and at most `capacity` of them.

    Producers retry within seconds or minutes; an id older than the window is not a retry any more.
    Bounding by time keeps the memory flat at steady state; the count cap guards against bursts.

    Checkpoints copy it incrementally (streams/kafka/pieces.py): ids arrive only at the back and leave only
    from the front, so what changed since `mark()` is how many ids left the front and the ids that came
    and are still held — a checkpoint costs the new events, not the whole window of ids.
    """

    # Class defaults: instances pickled before change tracking restore with them.
    _popped = 0  # ids that ever left the front
    _mark: tuple[int, int] | None = None  # (_popped, length) at the last mark; None: only a whole copy will do

    def __init__(self, capacity: int, window_s: float = float("inf")) -> None:
        self.capacity = capacity
        self.window_s = window_s
        # A plain dict plus a queue of its keys in insertion order, rather than an OrderedDict: ids
        # leave only from the front, so the queue stays exactly the dict's key order, and every
        # event pays a dict insert and an append instead of the OrderedDict's slower insert.
        self._seen: dict[str, float] = {}
        self._order: deque[str] = deque()
        # The time of the front (oldest) id, so that the common call, which expires nothing, reads
        # one attribute instead of looking the front up.
        self._front_ts = float("-inf")

    def seen(self, event_id: str, ts: float = 0.0) -> bool:
        """True if event_id was seen before (a duplicate); records it otherwise."""
        seen = self._seen
        if event_id in seen:
            return True
        seen[event_id] = ts
        self._order.append(event_id)
        if self._front_ts < ts - self.window_s or len(seen) > self.capacity:
            self._expire(ts)
        return False

    def _expire(self, ts: float) -> None:
        """Drop the ids that left the window or the count cap once `ts` came; the front is known to qualify.

        A full window drops about one id per event: the loop reads the front's time from `_front_ts` (kept
        equal to the front's entry) and looks up only the next front, not each front twice."""
        seen, order = self._seen, self._order
        size = len(seen)
        if size == 1:  # the id just recorded is the only one: the front, which neither bound drops
            self._front_ts = ts
            return
        horizon = ts - self.window_s
        capacity = self.capacity
        front_ts = self._front_ts
        # Insertion order is close to event-time order: the front holds the oldest ids.
        while front_ts < horizon or len(seen) > capacity:
            del seen[order.popleft()]
            front_ts = seen[order[0]]
        self._front_ts = front_ts
        self._popped += size - len(seen)

    def mark(self) -> None:
        """A checkpoint copied this state: changes count from here."""
        self._mark = (self._popped, len(self._order))

    def changes(self) -> DedupChanges | None:
        """What `replay` needs to bring a copy taken at the last mark up to now; None before any mark."""
        if self._mark is None:
            return None
        popped0, len0 = self._mark
        order = self._order
        removed = self._popped - popped0
        came = len(order) - len0 + removed  # the length moves by what came minus what left
        keep = min(came, len(order))
        seen = self._seen
        tail = list(islice(reversed(order), keep))
        tail.reverse()
        return min(removed, len0), [(i, seen[i]) for i in tail]

    def replay(self, changes: DedupChanges) -> None:
        """Apply `changes()` of the instance this one is a marked copy of."""
        left, came = changes
        seen, order = self._seen, self._order
        for _ in range(left):
            del seen[order.popleft()]
        for event_id, ts in came:
            seen[event_id] = ts
            order.append(event_id)
        self._front_ts = seen[order[0]] if order else float("-inf")

    def state_size(self) -> int:
        return len(self._seen)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "_order" not in state:
            # A snapshot from before the queue: its _seen is an OrderedDict in insertion order.
            self._seen = dict(self._seen)
            self._order = deque(self._seen)
        # The front's time, whatever the snapshot held: _expire trusts it (older snapshots held -inf for unknown).
        self._front_ts = self._seen[self._order[0]] if self._order else float("-inf")
