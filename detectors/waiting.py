"""The join's halves waiting for their other half, as a piece that copies itself as its changes.

Up to `max_pending_joins` (200k) halves wait when a producer loses halves, so a snapshot copies them as what changed
since the last copy. Nothing is tracked per event: the changes are found by comparing the live halves with their copy
at the last mark. The Joiner only appends and removes (never moves a half), so the halves that stayed keep their order
ahead of every half that came since, which are a suffix of the live order, read from the end in O(changes).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from detectors.changes import StoredAsIs

WaitingChanges = tuple[list[str], list[tuple[str, Any]]]  # (request ids gone, (request id, half) come), in order


class Waiting(StoredAsIs, OrderedDict[str, Any]):
    """request id -> its waiting half, in arrival order; a piece (detectors/signals/base.py `Piece`)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # The halves as of the last mark (a shallow copy: halves are never changed in place) and the changes the last
        # `changes()` found, which the next `mark()` applies to it in O(changes). Neither is state: never pickled.
        self._seen: dict[str, Any] | None = None
        self._delta: WaitingChanges | None = None

    def __reduce__(self) -> tuple[type[Waiting], tuple[list[tuple[str, Any]]]]:
        return self.__class__, (list(self.items()),)

    def mark(self) -> None:
        seen, delta = self._seen, self._delta
        self._delta = None
        if seen is not None and delta is not None:  # what `changes()` found: the copy follows it
            gone, came = delta
            for k in gone:
                seen.pop(k, None)
            seen.update(came)
            return
        self._seen = dict(self)

    def changes(self) -> WaitingChanges | None:
        """(keys gone, halves come) since the last mark; None if never marked. Replayed in that order they give the
        live order; a key whose half was replaced leaves and comes. If the counts show the suffix read from the end
        was not all of them, every half is compared."""
        seen = self._seen
        if seen is None:
            return None
        gone = list(seen.keys() - self.keys())  # C speed: a set difference of the keys
        came: list[tuple[str, Any]] = []
        for k in reversed(self):
            h = self[k]
            if seen.get(k) is h:
                break
            came.append((k, h))
        came.reverse()
        replaced = [k for k, _ in came if k in seen]
        if len(self) - len(came) != len(seen) - len(gone) - len(replaced):
            came = [(k, h) for k, h in self.items() if seen.get(k) is not h]
            replaced = [k for k, _ in came if k in seen]
        self._delta = ([*gone, *replaced], came)
        return self._delta

    def replay(self, changes: WaitingChanges) -> None:
        gone, came = changes
        for k in gone:
            self.pop(k, None)
        self.update(came)


def upgrade(halves: Any) -> Waiting:
    """Waiting halves restored from a snapshot: a plain OrderedDict in one written before they were a piece of their
    own (the shell found their changes then); the same halves, in the same order, as a `Waiting`."""
    return halves if isinstance(halves, Waiting) else Waiting(halves)
