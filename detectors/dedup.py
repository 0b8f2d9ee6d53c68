"""Duplicate event ids: a repeated event_id must be ignored downstream (at-least-once producers)."""

from __future__ import annotations

from collections import OrderedDict


class Deduper:
    """Remembers the last `capacity` event ids; memory is bounded, so very old replays pass again."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()

    def seen(self, event_id: str) -> bool:
        """True if event_id was seen before (a duplicate); records it otherwise."""
        if event_id in self._seen:
            return True
        self._seen[event_id] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
        return False

    def state_size(self) -> int:
        return len(self._seen)
