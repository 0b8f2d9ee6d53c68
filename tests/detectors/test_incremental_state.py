"""Change records of the content index and the long-horizon record: a copy taken at a mark plus the changes
since is the live object, down to dict order; past its bound (or a rotation) a record asks for a whole copy."""

from __future__ import annotations

import pickle

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.commonness import TenantSpread
from detectors.index import ContentIndex


def _index_state(ix: ContentIndex) -> tuple[object, ...]:
    return (
        list(ix._single.items()),
        [(h, list(owners.items())) for h, owners in ix._multi.items()],
        [(d.doc_id, d.tenant_id, d.session_id, d.request_id, d.ts, d.hashes) for d in ix._docs.values()],
        list(ix._order),
        ix._next_id,
        ix.docs_seen,
        ix.first_ts,
        ix._fingerprints,
    )


# (tenant, fingerprints, event-time step); marks fall between texts
texts = st.lists(
    st.tuples(
        st.sampled_from("abcd"), st.lists(st.integers(0, 40), min_size=0, max_size=12, unique=True), st.floats(0, 30)
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(texts, st.sets(st.integers(0, 59), max_size=6))
def test_index_copy_plus_changes_is_the_live_index(ops: list[tuple[str, list[int], float]], marks: set[int]) -> None:
    ix = ContentIndex(window_s=60.0, max_docs=8, max_fingerprints=40, common_min_tenants=3)
    copy: ContentIndex | None = None
    ts = 0.0
    for i, (tenant, hashes, step) in enumerate(ops):
        if i in marks:
            changes = ix.changes()
            if copy is not None and changes is not None:
                copy.replay(changes)
                assert _index_state(copy) == _index_state(ix)
            copy = pickle.loads(pickle.dumps(ix))
            ix.mark()
        ts += step
        ix.add(tenant, f"s-{tenant}", f"r{i}", ts, hashes)
        if i % 3 == 0:
            ix.advance(ts)
    changes = ix.changes()
    if copy is not None and changes is not None:
        copy.replay(changes)
        assert _index_state(copy) == _index_state(ix)


def test_index_record_is_bounded_and_not_pickled() -> None:
    ix = ContentIndex(window_s=1e9, max_docs=5, max_fingerprints=1000, common_min_tenants=3)
    assert ix.changes() is None  # never marked: a whole copy
    ix.mark()
    ix.add("a", None, "r0", 1.0, [1, 2])
    assert pickle.loads(pickle.dumps(ix)).changes() is None
    assert len(ix.changes() or []) == 1
    for i in range(6):
        ix.add("a", None, f"r{i + 1}", 2.0 + i, [10 + i])
    assert ix.changes() is None  # more changes than the index holds: a whole copy is cheaper


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abc"), st.lists(st.integers(0, 2**63), min_size=1, max_size=20)),
        min_size=1,
        max_size=30,
    ),
    st.sets(st.integers(0, 29), max_size=5),
)
def test_spread_copy_plus_changes_is_the_live_record(ops: list[tuple[str, list[int]]], marks: set[int]) -> None:
    sp = TenantSpread(bits_log2=12, capacity=60)
    copy: TenantSpread | None = None
    for i, (tenant, hashes) in enumerate(ops):
        if i in marks:
            changes = sp.changes()
            if copy is not None and changes is not None:
                copy.replay(changes)
                assert _same_spread(copy, sp)
            copy = pickle.loads(pickle.dumps(sp))
            sp.mark()
        sp.add(tenant, hashes, float(i))
    changes = sp.changes()
    if copy is not None and changes is not None:
        copy.replay(changes)
        assert _same_spread(copy, sp)


def _same_spread(a: TenantSpread, b: TenantSpread) -> bool:
    def gens(s: TenantSpread) -> list[tuple[bytes, int, float] | None]:
        return [None if g is None else (g.bits.tobytes(), g.inserts, g.started) for g in (s._cur, s._old)]

    return gens(a) == gens(b) and a.rotations == b.rotations


def test_spread_rotation_asks_for_a_whole_copy() -> None:
    sp = TenantSpread(bits_log2=12, capacity=10)
    sp.add("a", [1, 2, 3], 0.0)
    sp.mark()
    sp.add("b", [1], 1.0)
    delta = sp.changes()
    assert delta is not None and delta.rows and delta.inserts == sp._cur.inserts  # type: ignore[union-attr]
    sp.add("c", list(np.arange(100, 120)), 2.0)
    sp.add("c", [7], 3.0)  # the generation is full: rotates
    assert sp.rotations == 1 and sp.changes() is None
