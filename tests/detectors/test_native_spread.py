"""The commonness record's native loops (detectors/_winnow_spread.h) against its numpy path: the same bits, inserts,
answers and noted changes, whatever the sequence of texts (issue 28: alerts must not change)."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.commonness import LEVELS, MAX_LEVELS, NATIVE, TenantSpread

pytestmark = pytest.mark.skipif(not NATIVE, reason="the native extension is not built")


def _pair(**kw: object) -> tuple[TenantSpread, TenantSpread]:
    return TenantSpread(native=True, **kw), TenantSpread(native=False, **kw)  # type: ignore[arg-type]


def _same(a: TenantSpread, b: TenantSpread) -> None:
    for ga, gb in ((a._cur, b._cur), (a._old, b._old)):
        assert (ga is None) == (gb is None)
        if ga is not None and gb is not None:
            assert np.array_equal(ga.bits, gb.bits)
            assert (ga.inserts, ga.started) == (gb.inserts, gb.started)
    assert a.rotations == b.rotations


def _changes(r: TenantSpread) -> object:
    ch = r.changes()
    if ch is None:
        return None
    return ch.inserts, [(row, offsets.tolist(), values.tolist()) for row, offsets, values in ch.rows]


# Small filters, so that probes collide within a call and across tenants, and generations rotate.
texts = st.lists(
    st.tuples(
        st.sampled_from(["t1", "t2", "t3", "t4"]),
        st.lists(st.integers(0, 400), min_size=0, max_size=60, unique=True),
        st.booleans(),  # as a numpy array rather than a list
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(texts, st.integers(10, 12), st.integers(1, 6), st.integers(1, MAX_LEVELS))
def test_native_record_equals_the_numpy_record(
    seq: list[tuple[str, list[int], bool]], bits: int, probes: int, levels: int
) -> None:
    a, b = _pair(bits_log2=bits, probes=probes, capacity=1000, epoch_s=50.0, levels=levels)
    rng = random.Random(len(seq))
    big = [rng.getrandbits(64) for _ in range(401)]  # fingerprints are 64-bit keyed hashes
    for i, (tenant, idx, as_array) in enumerate(seq):
        hashes: list[int] | np.ndarray = [big[j] for j in idx]
        if as_array:
            hashes = np.array(hashes, dtype=np.uint64)
        if i % 7 == 3:
            a.mark()
            b.mark()
        ts = i * 5.0
        if i % 4 == 1:  # a tag (provenance: the pairs row only, under a key no tenant id has)
            a.tag("authored", hashes, ts)
            b.tag("authored", hashes, ts)
        else:
            a.add(tenant, hashes, ts)
            b.add(tenant, hashes, ts)
        _same(a, b)
        assert _changes(a) == _changes(b)
        probe = [big[j] for j in range(0, 401, 3)]
        assert np.array_equal(a.tenants(probe), b.tenants(probe))
        assert np.array_equal(a.had(tenant, probe), b.had(tenant, probe))
        assert np.array_equal(a.tagged("authored", probe), b.tagged("authored", probe))
        assert a.tenants(probe).dtype == b.tenants(probe).dtype and a.had(tenant, probe).dtype == np.bool_


def test_a_long_run_at_the_production_size_stays_equal() -> None:
    """Full-size filters (2**21 bits), a thousand texts of a few hundred fingerprints of 20 tenants, marks, a rotation
    by capacity: bits and answers equal throughout; and a native record pickles and restores as the numpy one does."""
    a, b = _pair(bits_log2=21, capacity=60_000)
    rng = random.Random(5)
    pool = [rng.getrandbits(64) for _ in range(40_000)]
    for i in range(1000):
        if i % 100 == 0:
            a.mark()
            b.mark()
        hashes = rng.sample(pool, rng.randint(0, 400))
        tenant = f"t{rng.randint(0, 19)}"
        a.add(tenant, hashes, float(i))
        b.add(tenant, hashes, float(i))
        if i % 50 == 0:
            _same(a, b)
            assert _changes(a) == _changes(b)
            assert np.array_equal(a.tenants(hashes), b.tenants(hashes))
            assert np.array_equal(a.had(tenant, hashes), b.had(tenant, hashes))
    assert a.rotations == b.rotations >= 1
    _same(a, b)
    restored = pickle.loads(pickle.dumps(a))
    _same(restored, b)
    assert np.array_equal(restored.tenants(pool[:500]), b.tenants(pool[:500]))


def test_empty_and_foreign_key_types() -> None:
    a, b = _pair(bits_log2=12)
    assert a.tenants([]).size == 0 and a.had("t", []).size == 0  # nothing recorded yet
    a.add("t", [np.uint64(5), 7], 1.0)
    b.add("t", [5, 7], 1.0)
    _same(a, b)
    assert a.tenants((5, 7, 9)).tolist() == b.tenants([5, 7, 9]).tolist() == [1, 1, 0]
    assert a.tenants(np.array([5, 7], dtype=np.int64)).tolist() == [1, 1]
    assert a.tenants([]).size == 0


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("levels", [1, LEVELS, 4, MAX_LEVELS])
def test_a_record_counts_distinct_tenants_up_to_its_levels(native: bool, levels: int) -> None:
    """A record of `levels` counts each tenant once, up to `levels` ("that many or more"); a tenant met again adds
    nothing (the count a held page's receivers are taken out of, detectors/fleet.py `model_record`)."""
    r = TenantSpread(bits_log2=16, native=native, levels=levels)
    for i in range(MAX_LEVELS + 2):
        r.add(f"t{i}", [11, 12], float(i))
        r.add(f"t{i}", [11], float(i))  # the same tenant again
        assert r.tenants([11, 12, 13]).tolist() == [min(i + 1, levels)] * 2 + [0]
    restored = pickle.loads(pickle.dumps(r))
    assert restored.tenants([11]).tolist() == [levels]


def test_the_native_loops_refuse_generations_of_other_shapes() -> None:
    """The loops read a record's levels from the size of its generations: rows that are no whole number of `nbytes`,
    more levels than they count, or two generations of different levels are refused, never read past."""
    import detectors._winnow as w

    nbytes, mask = 64, (1 << 9) - 1
    four, five = np.zeros((4, nbytes), np.uint8), np.zeros((5, nbytes), np.uint8)
    assert bytes(w.spread_levels(four, five[:4], [1, 2], nbytes, mask, 3)) == b"\0\0"
    for cur, old in (
        (five, four),
        (np.zeros(4 * nbytes + 1, np.uint8), None),
        (np.zeros((MAX_LEVELS + 2, nbytes), np.uint8), None),
    ):
        with pytest.raises(ValueError):
            w.spread_levels(cur, old, [1], nbytes, mask, 3)
    with pytest.raises(ValueError):
        w.spread_add(five, four, [1], 7, nbytes, mask, 3, False)


def test_records_pickled_before_levels_were_a_choice_count_to_three() -> None:
    r = TenantSpread(bits_log2=12)
    for i in range(5):
        r.add(f"t{i}", [42], float(i))
    state = r.__getstate__()
    del state["levels"]  # as pickled by a version without the attribute
    old = TenantSpread.__new__(TenantSpread)
    old.__dict__.update(state)
    assert old.levels == LEVELS and old.tenants([42]).tolist() == [LEVELS]
    old.add("t9", [42, 43], 9.0)
    assert old.tenants([42, 43]).tolist() == [LEVELS, 1]
