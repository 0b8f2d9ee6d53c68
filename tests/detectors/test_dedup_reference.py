"""The deduper (a set of held ids, with their arrival order and times in two queues) answers exactly as the
dict-of-times deduper it replaced, kept here as the reference: same answers, same held ids in the same order,
same front time, same changes for a checkpoint; and a snapshot of the old layout restores into the new one."""

from __future__ import annotations

import pickle
from collections import deque
from itertools import islice
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.dedup import Deduper


class ReferenceDeduper:
    """detectors/dedup.py as of 368a005 (a dict of id -> time plus a queue of its keys), unchanged."""

    _popped = 0
    _mark: tuple[int, int] | None = None

    def __init__(self, capacity: int, window_s: float = float("inf")) -> None:
        self.capacity = capacity
        self.window_s = window_s
        self._seen: dict[str, float] = {}
        self._order: deque[str] = deque()
        self._front_ts = float("-inf")

    def seen(self, event_id: str, ts: float = 0.0) -> bool:
        seen = self._seen
        if event_id in seen:
            return True
        seen[event_id] = ts
        self._order.append(event_id)
        if self._front_ts < ts - self.window_s or len(seen) > self.capacity:
            self._expire(ts)
        return False

    def _expire(self, ts: float) -> None:
        seen, order = self._seen, self._order
        size = len(seen)
        if size == 1:
            self._front_ts = ts
            return
        horizon = ts - self.window_s
        capacity = self.capacity
        front_ts = self._front_ts
        while front_ts < horizon or len(seen) > capacity:
            del seen[order.popleft()]
            front_ts = seen[order[0]]
        self._front_ts = front_ts
        self._popped += size - len(seen)

    def mark(self) -> None:
        self._mark = (self._popped, len(self._order))

    def changes(self) -> tuple[int, list[tuple[str, float]]] | None:
        if self._mark is None:
            return None
        popped0, len0 = self._mark
        order = self._order
        removed = self._popped - popped0
        came = len(order) - len0 + removed
        keep = min(came, len(order))
        seen = self._seen
        tail = list(islice(reversed(order), keep))
        tail.reverse()
        return min(removed, len0), [(i, seen[i]) for i in tail]

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "_order" not in state:
            self._seen = dict(self._seen)
            self._order = deque(self._seen)
        self._front_ts = self._seen[self._order[0]] if self._order else float("-inf")


# (id number, time step): ids repeat (duplicates), time moves mostly forward in uneven steps, sometimes not at
# all, sometimes back (late events: insertion order is not time order).
CALLS = st.lists(st.tuples(st.integers(0, 80), st.floats(-4.0, 6.0)), max_size=300)


def _held(d: Deduper | ReferenceDeduper) -> tuple[list[tuple[str, float]], float, int]:
    if isinstance(d, Deduper):
        assert set(d._seen) == set(d._order) and len(d._seen) == len(d._order) == len(d._times)
        pairs = list(zip(d._order, d._times, strict=True))
    else:
        assert list(d._seen) == list(d._order)
        pairs = list(d._seen.items())
    return pairs, d._front_ts if pairs else float("-inf"), d._popped


@settings(max_examples=400, deadline=None)
@given(
    calls=CALLS,
    capacity=st.integers(1, 50),
    window=st.sampled_from([0.0, 3.0, 20.0, float("inf")]),
    mark_at=st.integers(0, 300),
)
def test_the_deduper_answers_as_the_reference(
    calls: list[tuple[int, float]], capacity: int, window: float, mark_at: int
) -> None:
    new, ref = Deduper(capacity, window), ReferenceDeduper(capacity, window)
    t = 0.0
    for n, (i, step) in enumerate(calls):
        if n == mark_at:
            new.mark()
            ref.mark()
        t += step
        assert new.seen(f"e{i}", t) == ref.seen(f"e{i}", t)
        assert _held(new) == _held(ref)
        assert new.state_size() == len(ref._seen) <= capacity
    assert new.changes() == ref.changes()


@settings(max_examples=200, deadline=None)
@given(before=CALLS, after=CALLS, capacity=st.integers(1, 50), window=st.sampled_from([3.0, 20.0, float("inf")]))
def test_a_snapshot_of_the_reference_layout_restores_and_answers_alike(
    before: list[tuple[int, float]], after: list[tuple[int, float]], capacity: int, window: float
) -> None:
    ref = ReferenceDeduper(capacity, window)
    t = 0.0
    for i, step in before:
        t += step
        ref.seen(f"e{i}", t)
    ref.mark()
    # The old layout's pickled state, restored by the new class (as a checkpoint taken before the change) and
    # by the old one (whose restore sets the front's time, which a live one with no time bound leaves unknown).
    state: dict[str, Any] = pickle.loads(pickle.dumps(ref.__dict__))
    new = Deduper.__new__(Deduper)
    new.__setstate__(state)
    ref = pickle.loads(pickle.dumps(ref))
    assert _held(new) == _held(ref)
    for i, step in after:
        t += step
        assert new.seen(f"e{i}", t) == ref.seen(f"e{i}", t)
    assert _held(new) == _held(ref) and new.changes() == ref.changes()


def test_a_snapshot_from_before_the_queue_restores_in_arrival_order() -> None:
    from collections import OrderedDict

    state = {"capacity": 3, "window_s": 10.0, "_seen": OrderedDict([("a", 1.0), ("b", 2.0), ("c", 2.5)])}
    d = Deduper.__new__(Deduper)
    d.__setstate__(state)
    assert (list(d._order), list(d._times), d._front_ts) == (["a", "b", "c"], [1.0, 2.0, 2.5], 1.0)
    assert d.seen("b", 3.0) and not d.seen("d", 3.0)  # the cap of 3 drops "a", the front
    assert not d.seen("a", 3.0) and list(d._order) == ["c", "d", "a"]


def test_long_runs_with_a_full_window_answer_alike() -> None:
    """Tens of thousands of ids through full windows (time and count bounds), with late events and checkpoints."""
    import random

    rng = random.Random(5)
    for capacity, window in ((50_000, 40.0), (300, 1e9), (5_000, 5.0)):
        new, ref = Deduper(capacity, window), ReferenceDeduper(capacity, window)
        t = 0.0
        for n in range(30_000):
            t += rng.choice((0.0, 0.01, 0.02, 0.05, -0.02))  # late events too
            event_id = f"e{rng.randrange(12_000)}"
            assert new.seen(event_id, t) == ref.seen(event_id, t)
            if n % 2_000 == 0:
                new.mark()
                ref.mark()
            if n % 2_000 == 1_999:
                assert new.changes() == ref.changes()
        assert _held(new) == _held(ref) and new._popped > 10_000
