"""The latest answer of every conversation, kept after the ledger's window has let it go.

A conversation sent with another conversation's history (detectors/mixup_history.py, ADR 0023) is told by two
deliveries: the answer its own session was given last, which the prompt has lost, and the other session's exchange,
which it carries. Both are older than the turn, often far older than the ledger's window (`mixup_window_s`, the
longest request): a user comes back to a chat after lunch, and a history store hands them a conversation that ended an
hour ago. The ledger's window is sized for requests in flight, not for conversations, so such a turn went unjudged.

`SessionTails` keeps, per (tenant, session), the newest delivery whose answer is long enough to tell
(`mixup_min_matches`), for `mixup_session_horizon_s` of event time, at most `mixup_session_max` sessions and
`mixup_session_prints` fingerprints (8 bytes each), the least recently answered dropped first. It holds only what the
ledger held (sorted fingerprints, ids and times; no text). Deliveries are found by their smallest output fingerprints,
as the ledger finds copies: a prompt that carries an answer whole holds them.

Checkpoints: the tails change only when the ledger adds a delivery, and `put` is a function of the deliveries put and
the bounds, so a ledger's changes (the deliveries it added, with the bounds) rebuild them on the copy. The sketch is
derived and never copied. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from detectors.mixup import Delivery
    from detectors.settings import DetectionSettings

# A delivery is found by its smallest output fingerprints (a MinHash sketch): a copy of its answer, or a prompt that
# carries it whole, has the same ones, so it is always found; a partial copy is found with a probability of at least
# the two outputs' Jaccard similarity. Searching every earlier output instead cost +60 % on one hot domain. The
# ledger's window (detectors/mixup.py) and its tails are found the same way.
SKETCH = 3
Sketch = dict[int, "deque[Delivery]"]  # a key (a sketch fingerprint, a number) -> the deliveries under it, oldest first


def sketch_keys(d: Delivery) -> list[int]:
    """The fingerprints `d` is found by."""
    keys: list[int] = d.out[:SKETCH].tolist()
    return keys


def file(index: Sketch, keys: Iterable[int], d: Delivery) -> None:
    """`d` found under each of `keys`, after the deliveries filed before it (a sketch; the numbers' index)."""
    for key in keys:
        index.setdefault(key, deque()).append(d)


def unfile(index: Sketch, keys: Iterable[int], d: Delivery) -> None:
    """Removes `d`, the oldest delivery filed under each of `keys` (the ledger drops its oldest first)."""
    for key in keys:
        q = index.get(key)
        if q and q[0] is d:
            q.popleft()
            if not q:
                del index[key]


def enter(sketch: Sketch, d: Delivery) -> None:
    """`d` found under each of its sketch fingerprints, after the deliveries entered before it."""
    file(sketch, sketch_keys(d), d)


def size(d: Delivery) -> int:
    """What a delivery holds against the ledger's print bounds: its fingerprints and its numbers (8 bytes each; a
    delivery pickled before the numbers has none)."""
    ids = sum(len(k) for k in (getattr(d, "out_ids", None), getattr(d, "prompt_ids", None)) if k is not None)
    return int(d.out.size + d.prompt.size) + ids


class Bounds(NamedTuple):
    horizon_s: float
    sessions: int
    prints: int
    min_answer: int


def bounds(s: DetectionSettings) -> Bounds | None:
    """The tails' bounds from the settings; None when off (`mixup_session_horizon_s` 0, or no history check)."""
    if not s.mixup_history or s.mixup_session_horizon_s <= 0:
        return None
    return Bounds(s.mixup_session_horizon_s, s.mixup_session_max, s.mixup_session_prints, s.mixup_min_matches)


class SessionTails:
    def __init__(self) -> None:
        self.by_session: OrderedDict[tuple[str, str], Delivery] = OrderedDict()
        self.prints = 0
        self._sketch: Sketch | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_sketch": None}

    def get(self, tenant_id: str, session_id: str) -> Delivery | None:
        return self.by_session.get((tenant_id, session_id))

    def put(self, b: Bounds, d: Delivery) -> None:
        """`d` becomes its session's tail if its answer is long enough to tell; the oldest past a bound go."""
        if d.session_id is None or d.out.size < b.min_answer:
            return
        tails, key = self.by_session, (d.tenant_id, d.session_id)
        if (newer := tails.get(key)) is not None and newer.ts > d.ts:
            return  # heard late (the fleet's digests can be): the session's newer answer stays its tail
        old = tails.pop(key, None)
        if old is not None:
            self._drop(old)
        tails[key] = d
        self.prints += size(d)
        if self._sketch is not None:
            enter(self._sketch, d)
        horizon = d.ts - b.horizon_s
        while tails:
            first = next(iter(tails.values()))
            if first.ts >= horizon and len(tails) <= b.sessions and self.prints <= b.prints:
                break
            tails.popitem(last=False)
            self._drop(first)

    def _drop(self, d: Delivery) -> None:
        self.prints -= size(d)
        if self._sketch is not None:
            for key in sketch_keys(d):
                held = self._sketch.get(key)
                if held is not None:
                    rest = deque(x for x in held if x is not d)  # by identity: a delivery's arrays have no equality
                    if rest:
                        self._sketch[key] = rest
                    else:
                        del self._sketch[key]

    def sketch(self) -> Sketch:
        """The tails by their smallest output fingerprints (derived: rebuilt after a restore)."""
        sketch = self._sketch
        if sketch is None:
            sketch = self._sketch = {}
            for d in self.by_session.values():
                enter(sketch, d)
        return sketch

    def __len__(self) -> int:
        return len(self.by_session)
