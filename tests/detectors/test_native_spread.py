"""The commonness record's native loops (detectors/_winnow_spread.h) against its numpy path: the same bits, inserts,
answers and noted changes, whatever the sequence of texts (issue 28: alerts must not change)."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.commonness import NATIVE, TenantSpread

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
@given(texts, st.integers(10, 12), st.integers(1, 6))
def test_native_record_equals_the_numpy_record(seq: list[tuple[str, list[int], bool]], bits: int, probes: int) -> None:
    a, b = _pair(bits_log2=bits, probes=probes, capacity=1000, epoch_s=50.0)
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
