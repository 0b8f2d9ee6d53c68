"""Duplicate event ids: a repeated event_id must be ignored downstream (at-least-once producers)."""

from __future__ import annotations

from collections import OrderedDict


class Deduper:
    """Remembers event ids for `window_s` of event time, and at most `capacity` of them.

    Producers retry within seconds or minutes; an id older than the window is not a retry any more.
    Bounding by time keeps the memory flat at steady state; the count cap guards against bursts.
    """

    def __init__(self, capacity: int, window_s: float = float("inf")) -> None:
        self.capacity = capacity
        self.window_s = window_s
        self._seen: OrderedDict[str, float] = OrderedDict()

    def seen(self, event_id: str, ts: float = 0.0) -> bool:
        """True if event_id was seen before (a duplicate); records it otherwise."""
        seen = self._seen
        if event_id in seen:
            return True
        seen[event_id] = ts
        horizon = ts - self.window_s
        # Insertion order is close to event-time order: the front holds the oldest ids.
        while len(seen) > self.capacity or next(iter(seen.values())) < horizon:
            seen.popitem(last=False)
        return False

    def state_size(self) -> int:
        return len(self._seen)
