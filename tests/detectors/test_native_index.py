"""The content index's native postings (detectors/_winnow_index.h) against its pure dicts: the same postings, owner
order included, the same query answers, the same copies (issue 28: alerts must not change)."""

from __future__ import annotations

import dataclasses
import pickle
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import detectors.postings as postings_module
from detectors.index import NATIVE, ContentIndex, Overlap
from detectors.postings import first_positions as _first_positions

pytestmark = pytest.mark.skipif(not NATIVE, reason="the native extension is not built")


def _pair(**kw: Any) -> tuple[ContentIndex, ContentIndex]:
    args = dict(window_s=60.0, max_docs=8, max_fingerprints=60, common_min_tenants=3) | kw
    return ContentIndex(**args, native=True), ContentIndex(**args, native=False)


def _postings(ix: ContentIndex) -> tuple[dict[int, int], list[tuple[int, list[tuple[str, int]]]]]:
    """The one-owner postings (a map: the native table's slot order is no dict order, and nothing reads it), and
    the several-owner ones with their owners in order (the order credits are summed in)."""
    multi = sorted((h, list(owners.items())) for h, owners in ix._multi.items())
    return dict(ix._single.items()), multi


def _ordered(ov: Overlap) -> dict[str, Any]:
    """An Overlap with every dict as its items in order, so that insertion order is compared too."""
    return {f.name: _items(getattr(ov, f.name)) for f in dataclasses.fields(ov)}


def _items(v: Any) -> Any:
    if isinstance(v, dict):
        return [(k, _items(x)) for k, x in v.items()]
    if isinstance(v, list):
        return [_items(x) for x in v]
    return v


def _same(a: ContentIndex, b: ContentIndex, probe: list[int]) -> None:
    assert _postings(a) == _postings(b)
    assert a.state_size() == b.state_size()
    assert [a.holders(h) for h in probe] == [b.holders(h) for h in probe]
    assert len(a._multi) == len(b._multi) and [h in a._multi for h in probe] == [h in b._multi for h in probe]
    assert [h in a._single for h in probe] == [h in b._single for h in probe]


texts = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c", "d"]),
        st.lists(st.integers(0, 30), min_size=0, max_size=14),  # repeats within a text too
        st.floats(0, 20),
        st.booleans(),  # then query an output of the next text's fingerprints
    ),
    min_size=1,
    max_size=50,
)


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(1, 3))
def test_native_postings_answer_as_the_dicts(ops: list[tuple[str, list[int], float, bool]], common: int) -> None:
    a, b = _pair(common_min_tenants=common)
    rng = random.Random(len(ops))
    big = [rng.getrandbits(64) for _ in range(31)]
    ts = 0.0
    for i, (tenant, idx, step, ask) in enumerate(ops):
        hashes = [big[j] for j in idx]
        ts += step
        for ix in (a, b):
            ix.add(tenant, f"s-{tenant}-{i % 2}", f"r{i}", ts, list(hashes), 1.0 + (i % 3) / 2)
            if i % 3 == 0:
                ix.advance(ts)
        _same(a, b, big)
        if ask:
            out = [big[(j * 7 + i) % 31] for j in range(12)]
            kw = dict(own_prompt=set(out[:2]), long_run=2, junction=(1, 2), in_order=6, positions=list(range(12)))
            qa = a.query("b", "s-b-0", out, **kw)  # type: ignore[arg-type]
            qb = b.query("b", "s-b-0", out, **kw)  # type: ignore[arg-type]
            assert _ordered(qa) == _ordered(qb)


def test_copies_and_changes_restore_the_same_postings() -> None:
    """A pickled native index restores as itself (and goes on alike); its changes replay onto a copy; and without the
    extension it restores as the pure path's dicts with the same postings."""
    a, b = _pair(max_docs=50, max_fingerprints=5_000, window_s=1e9)
    rng = random.Random(3)
    pool = [rng.getrandbits(64) for _ in range(400)]
    for i in range(60):
        tenant = f"t{rng.randint(0, 5)}"
        hashes = rng.sample(pool, rng.randint(1, 80))
        for ix in (a, b):
            ix.add(tenant, None, f"r{i}", float(i), hashes)
        if i == 20:
            copy = pickle.loads(pickle.dumps(a))
            a.mark()
    assert len(a._multi) > 10  # fingerprints of several tenants, some with three or more
    _same(a, b, pool)
    restored = pickle.loads(pickle.dumps(a))
    _same(restored, b, pool)
    changes = a.changes()
    assert changes is not None
    copy.replay(changes)
    _same(copy, b, pool)
    for ix in (restored, b, a):
        ix.add("t1", None, "late", 100.0, pool[:50])
    _same(restored, b, pool)
    state = pickle.dumps(a)
    try:
        postings_module._Postings = None  # type: ignore[assignment]
        plain = pickle.loads(state)
    finally:
        postings_module._Postings = type(a._single)  # type: ignore[assignment]
    assert type(plain._single) is dict and type(plain._multi) is dict
    assert _postings(plain)[1] == _postings(a)[1] and plain._single == dict(a._single.items())
    for ix in (plain, b, a):
        ix.add("t2", None, "after", 101.0, pool[100:160])
    _same(plain, b, pool)
    _same(a, b, pool)


def test_first_positions_native_and_pure() -> None:
    from detectors._winnow import first_positions

    rng = random.Random(9)
    for _ in range(200):
        hashes = [rng.randint(0, 40) for _ in range(rng.randint(0, 60))]
        needed = [rng.randint(0, 50) for _ in range(rng.randint(0, 10))]
        assert first_positions(hashes, needed) == _first_positions(hashes, needed)
    assert first_positions([1, 2**64 - 1], [2**64 - 1, -1, "x"]) == [1, -1, -1]


def test_the_table_refuses_texts_out_of_order() -> None:
    from detectors._winnow import Postings

    t = Postings()
    t.insert([1, 2], 5, "a")
    with pytest.raises(ValueError, match="out of order"):
        t.insert([3], 7, "a")
    with pytest.raises(ValueError, match="out of order"):
        t.drop([3], 6)
    t.drop([1, 2], 5)
    assert len(t) == 0 and t.get(1) is None and t.owners(1) is None
