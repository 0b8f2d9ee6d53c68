"""The deduper's change tracking: a copy taken at a mark, brought forward by `replay(changes())`, is the live
deduper — same ids, same order, same answers afterwards — whatever came and left (time window and count cap),
and the changes hold the new ids, not the window's."""

from __future__ import annotations

import copy
import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.dedup import Deduper

# (id number, time step): ids repeat (duplicates), time moves forward in uneven steps, sometimes not at all.
CALLS = st.lists(st.tuples(st.integers(0, 60), st.floats(0.0, 3.0)), max_size=120)


def _feed(d: Deduper, calls: list[tuple[int, float]], t0: float) -> tuple[list[bool], float]:
    out, t = [], t0
    for i, step in calls:
        t += step
        out.append(d.seen(f"e{i}", t))
    return out, t


def _state(d: Deduper) -> tuple[set[str], list[str], list[float], float]:
    return set(d._seen), list(d._order), list(d._times), d._front_ts if d._order else float("-inf")


@settings(max_examples=300, deadline=None)
@given(before=CALLS, after=CALLS, probe=CALLS, capacity=st.integers(1, 40), window=st.sampled_from([5.0, 20.0, 1e9]))
def test_a_marked_copy_replayed_is_the_live_deduper(
    before: list[tuple[int, float]],
    after: list[tuple[int, float]],
    probe: list[tuple[int, float]],
    capacity: int,
    window: float,
) -> None:
    live = Deduper(capacity, window)
    _, t = _feed(live, before, 0.0)
    live.mark()
    marked = pickle.loads(pickle.dumps(live))  # what the last checkpoint holds
    _, t = _feed(live, after, t)
    changes = live.changes()
    assert changes is not None
    marked.replay(pickle.loads(pickle.dumps(changes)))
    assert _state(marked) == _state(live)
    # And it goes on answering alike.
    assert _feed(marked, probe, t)[0] == _feed(live, probe, t)[0]


def test_changes_carry_the_new_ids_not_the_window() -> None:
    d = Deduper(1_000_000, 3600.0)
    for i in range(20_000):
        d.seen(f"id-{i}", float(i) / 10)
    d.mark()
    assert d.changes() == (0, [])
    for i in range(20_000, 20_100):
        d.seen(f"id-{i}", float(i) / 10)
    left, came = d.changes() or (None, None)
    assert left == 0 and [i for i, _ in came or []] == [f"id-{i}" for i in range(20_000, 20_100)]
    # Time moves past the window of all of them: the ids that left are a count, not a list, and the new ones
    # that left too are not sent at all.
    d.seen("late", 20_100 / 10 + 3600.0 + 1.0)
    left, came = d.changes() or (None, None)
    assert left == 20_000 and came == [("late", 20_100 / 10 + 3600.0 + 1.0)]


def test_an_unmarked_deduper_has_no_changes_and_old_pickles_restore() -> None:
    d = Deduper(10, 60.0)
    d.seen("a", 1.0)
    assert d.changes() is None, "never marked: only a whole copy will do"
    old = copy.copy(d)
    for name in ("_popped", "_mark"):
        old.__dict__.pop(name, None)  # as pickled before change tracking existed
    restored = pickle.loads(pickle.dumps(old))
    assert restored.seen("a", 2.0) and not restored.seen("b", 2.0)
    restored.mark()
    restored.seen("c", 3.0)
    assert restored.changes() == (0, [("c", 3.0)])
