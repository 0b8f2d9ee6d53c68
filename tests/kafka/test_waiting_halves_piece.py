"""The Joiner's waiting halves as a checkpoint piece of their own (streams/kafka/pieces.py), without a broker.

A producer that loses halves leaves up to `max_pending_joins` (200k) of them waiting; copied whole with the
partition, every checkpoint pickled all of them. As their own piece they are copied whole once and then as
their changes (keys gone, halves come), found by comparing with the last copy. The properties: after any
sequence of arrivals, joins, expiries, evictions and replaced halves, a restore from the whole copy and its
changes gives the live halves in the live order (the order is state: expiry and the bound read it), and a
checkpoint after a few changes writes those, not the waiting halves."""

from __future__ import annotations

import pickle
import zlib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.waiting import Waiting
from streams.kafka import pieces
from streams.kafka.checkpoint import Checkpointer
from streams.kafka.stages import JoinState
from streams.settings import Settings

S = Settings.model_validate({"detection": {"fingerprint_key": "waiting-halves-test-key"}})


@dataclass
class Half:  # stands in for join._Half: any picklable value; identity tells a replaced half from a kept one
    rid: str
    n: int


def _restored(table: dict[bytes, bytes]) -> JoinState:
    got = Checkpointer(S.kafka, Counter()).restore("join", 0, table, S.detection)
    assert isinstance(got, JoinState)
    return got


def _picture(state: JoinState) -> list[list[tuple[str, str, int]]]:
    j = state.joiner
    return [[(k, h.rid, h.n) for k, h in d.items()] for d in (j._requests, j._responses)]


ops = st.lists(
    st.tuples(st.sampled_from(["add", "join", "expire", "replace", "cut"]), st.integers(0, 30), st.booleans()),
    max_size=80,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_a_restore_from_the_whole_copy_and_its_changes_is_the_live_halves_in_order(
    steps: list[tuple[str, int, bool]],
) -> None:
    state = JoinState.fresh(S.detection)
    cp = Checkpointer(S.kafka, Counter())
    table: dict[bytes, bytes] = {}
    cp.write("join", 0, state, table)
    for n, (op, i, response) in enumerate(steps):
        d = state.joiner._responses if response else state.joiner._requests
        rid = f"r{i}"
        if op == "add" and rid not in d:
            d[rid] = Half(rid, n)
        elif op == "join":
            d.pop(rid, None)
        elif op == "expire" and d:
            d.popitem(last=False)
        elif op == "replace" and rid in d:
            d.pop(rid)
            d[rid] = Half(rid, n)  # a new half under a key seen before: it moves to the end
        elif op == "cut":
            cp.write("join", 0, state, table)
            assert _picture(_restored(table)) == _picture(state)
    cp.write("join", 0, state, table)
    assert _picture(_restored(table)) == _picture(state)


def test_a_checkpoint_after_a_few_changes_writes_them_not_every_waiting_half() -> None:
    state = JoinState.fresh(S.detection)
    requests = state.joiner._requests
    for i in range(20_000):
        requests[f"r{i}"] = Half(f"r{i}", i)
    cp = Checkpointer(S.kafka, Counter())
    table: dict[bytes, bytes] = {}
    first = cp.write("join", 0, state, table)
    for i in range(100):  # 100 joined, 100 arrived
        del requests[f"r{i}"]
        requests[f"n{i}"] = Half(f"n{i}", i)
    second = cp.write("join", 0, state, table)
    assert second.changes >= 1
    assert second.bytes * 20 < first.bytes
    assert _picture(_restored(table)) == _picture(state)


def test_the_partition_piece_names_the_waiting_halves_instead_of_holding_them() -> None:
    state = JoinState.fresh(S.detection)
    for i in range(1000):
        state.joiner._responses[f"r{i}"] = Half(f"r{i}", i)
    with_halves = len(pieces.whole(pieces.JOIN, state, Counter()))
    state.joiner._responses.clear()
    without = len(pieces.whole(pieces.JOIN, state, Counter()))
    assert with_halves == without


def test_halves_stored_as_a_plain_dict_before_they_copied_themselves_restore() -> None:
    # A release before detectors/waiting.py stored the halves as a plain OrderedDict and their changes as
    # (keys gone, halves come): such a snapshot restores as the halves it held, which now copy themselves.
    state = JoinState.fresh(S.detection)
    requests = state.joiner._requests
    for i in range(5):
        requests[f"r{i}"] = Half(f"r{i}", i)
    counters: Counter[str] = Counter()
    stored = {name: [pieces.pack(name, pieces.whole(name, obj, counters), True)] for name, obj in pieces.parts(state)}
    old_whole = zlib.compress(pickle.dumps(OrderedDict(requests), protocol=pickle.HIGHEST_PROTOCOL), 1)
    old_changes = pickle.dumps((["r0"], [("n9", Half("n9", 9))]), protocol=pickle.HIGHEST_PROTOCOL)
    stored[pieces.WAIT_REQ] = [old_whole, old_changes]
    got = pieces.assemble(stored, S.detection, counters)
    assert isinstance(got, JoinState) and isinstance(got.joiner._requests, Waiting)
    assert [(k, h.n) for k, h in got.joiner._requests.items()] == [
        ("r1", 1),
        ("r2", 2),
        ("r3", 3),
        ("r4", 4),
        ("n9", 9),
    ]
    got.joiner._requests.mark()
    got.joiner._requests.pop("r1")
    assert got.joiner._requests.changes() == (["r1"], [])


def test_a_copy_of_the_halves_holds_the_halves_not_the_trail_of_their_changes() -> None:
    halves = Waiting([("a", Half("a", 1))])
    halves.mark()
    halves["b"] = Half("b", 2)
    assert halves.changes() is not None
    copy = pickle.loads(pickle.dumps(halves))
    assert list(copy.items()) == list(halves.items()) and copy.changes() is None  # never marked: a whole copy


def test_a_snapshot_whose_markers_rode_in_the_partition_piece_restores_them() -> None:
    # Before the markers were a piece of their own ("can"), the join piece pickled the registry inline.
    state = JoinState.fresh(S.detection)
    state.joiner.canaries.register("probe-a", "CTK-CANARY-3f9a0c1be27d5a60", None, 5.0)
    counters: Counter[str] = Counter()
    real = pieces._front_of
    with mock.patch.object(pieces, "_front_of", lambda s: {k: v for k, v in real(s).items() if k != ("can",)}):
        stored = {n: [pieces.pack(n, pieces.whole(n, obj, counters), True)] for n, obj in pieces.parts(state)}
    assert ("can",) not in stored
    got = pieces.assemble(stored, S.detection, counters)
    assert isinstance(got, JoinState) and got.joiner.canaries.state_size() == 1
    keys = got.joiner.canaries.token_keys("seen CTK-CANARY-3f9a0c1be27d5a60 here")
    assert [h.owner_tenant_id for h in got.joiner.canaries.scan_keys(keys)] == ["probe-a"]
