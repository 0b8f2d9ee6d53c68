"""Duplicate event ids: a repeated event_id must be ignored downstream (at-least-once producers)."""

from __future__ import annotations

from collections import deque
from itertools import islice
from typing import Any

from detectors.changes import StoredAsIs

DedupChanges = tuple[int, list[tuple[str, float]]]  # (marked ids that left the front, ids that came, in order)


class Deduper(StoredAsIs):
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
        # The held ids as a set, with two queues in step: the ids in arrival order and each one's time. Ids
        # leave only from the front, so the queues say which id leaves next and when, and the set only answers
        # membership. A set rather than a dict of times: every event looks up an id in the whole window (a
        # full window is tens of thousands of ids, beyond the CPU's caches), and a set's lookup probes its
        # table in place, where a dict's reads an index and then an entry elsewhere, and expiry reads the front's
        # time from its queue, not by a second lookup of the front's id.
        self._seen: set[str] = set()
        self._order: deque[str] = deque()
        self._times: deque[float] = deque()
        # The time of the front (oldest) id, so that the common call, which expires nothing, reads
        # one attribute instead of looking the front up.
        self._front_ts = float("-inf")

    def seen(self, event_id: str, ts: float = 0.0) -> bool:
        """True if event_id was seen before (a duplicate); records it otherwise."""
        seen = self._seen
        if event_id in seen:
            return True
        seen.add(event_id)
        order, times = self._order, self._times
        order.append(event_id)
        times.append(ts)
        front_ts = self._front_ts
        horizon = ts - self.window_s
        if front_ts < horizon or len(seen) > self.capacity:
            # Expiry, inlined (a full window drops about one id per event, and a call costs as much as the rest).
            # The front's time is read from `_front_ts` (kept equal to the front's), then the next front's.
            size = len(seen)
            if size == 1:  # the id just recorded is the only one: the front, which neither bound drops
                self._front_ts = ts
                return False
            capacity = self.capacity
            # Insertion order is close to event-time order: the front holds the oldest ids.
            while front_ts < horizon or len(seen) > capacity:
                seen.remove(order.popleft())
                times.popleft()
                front_ts = times[0]
            self._front_ts = front_ts
            self._popped += size - len(seen)
        return False

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
        ids = list(islice(reversed(order), keep))
        times = list(islice(reversed(self._times), keep))
        ids.reverse()
        times.reverse()
        return min(removed, len0), list(zip(ids, times, strict=True))

    def replay(self, changes: DedupChanges) -> None:
        """Apply `changes()` of the instance this one is a marked copy of."""
        left, came = changes
        seen, order, times = self._seen, self._order, self._times
        for _ in range(left):
            seen.remove(order.popleft())
            times.popleft()
        for event_id, ts in came:
            seen.add(event_id)
            order.append(event_id)
            times.append(ts)
        self._front_ts = times[0] if times else float("-inf")

    def state_size(self) -> int:
        return len(self._seen)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "_times" not in state:
            # A snapshot from before the set: its _seen maps each id to its time, in arrival order (a dict, or an
            # OrderedDict before the queue of ids existed).
            held: dict[str, float] = self._seen  # type: ignore[assignment]
            if "_order" not in state:
                self._order = deque(held)
            self._times = deque(held[i] for i in self._order)
            self._seen = set(held)
        # The front's time, whatever the snapshot held: _expire trusts it (older snapshots held -inf for unknown).
        self._front_ts = self._times[0] if self._times else float("-inf")
