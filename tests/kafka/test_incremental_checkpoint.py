"""Incremental checkpoints without a broker: a restore from a whole copy and its changes is the live state,
a crash between the pieces and the manifest restores the previous checkpoint (never a mix of the two), and an
expired domain leaves the manifest and the table."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from streams.kafka import checkpoint
from streams.kafka.checkpoint import Checkpointer, Written
from streams.kafka.stages import DomainState
from streams.settings import Settings
from tests.support.stagepipe import StagePipeline

KEY = "incremental-test-key"


def canon(o: Any, seen: set[int] | None = None) -> Any:
    """A plain-data picture of an object graph: dicts as ordered item lists (their order is state too),
    arrays as bytes, objects by class and attributes. Sharing is not compared, values are; nor the worker's
    counters, which belong to the process, not to the state."""
    if isinstance(o, (int, float, str, bytes, bool, type(None))):
        return o
    if isinstance(o, np.ndarray):
        return ("ndarray", o.dtype.str, o.shape, o.tobytes())
    if isinstance(o, np.generic):
        return o.item()
    seen = set() if seen is None else seen
    if id(o) in seen:
        return ("cycle",)
    seen.add(id(o))
    try:
        if isinstance(o, dict):
            return (type(o).__name__, [(canon(k, seen), canon(v, seen)) for k, v in o.items()])
        if isinstance(o, (list, tuple, deque)):
            return (type(o).__name__, [canon(v, seen) for v in o])
        if isinstance(o, (set, frozenset)):
            return (type(o).__name__, sorted(map(repr, o)))
        getstate = getattr(o, "__getstate__", None)
        state = getstate() if getstate is not None else None
        if not isinstance(state, dict):
            state = dict(getattr(o, "__dict__", {}))
            for cls in type(o).__mro__:
                for slot in getattr(cls, "__slots__", ()):
                    if hasattr(o, slot):
                        state[slot] = getattr(o, slot)
        return (type(o).__qualname__, [(k, canon(v, seen)) for k, v in state.items() if k != "counters"])
    finally:
        seen.discard(id(o))


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    from streams.sim.simulate import SimConfig, write_simulation

    d = tmp_path_factory.mktemp("sim")
    summary = write_simulation(d, SimConfig(duration_s=60.0, fault_at_s=20.0))
    out = [line for line in Path(summary["events_path"]).read_bytes().splitlines() if line.strip()]
    assert len(out) > 400
    return out


def _settings() -> Settings:
    return Settings.model_validate({"detection": {"fingerprint_key": KEY}})


def _chunks(pipe: StagePipeline, lines: list[bytes], size: int) -> Iterator[None]:
    n = pipe.settings.kafka.input_partitions
    for start in range(0, len(lines), size):
        pipe.feed(((start + i) % n, line) for i, line in enumerate(lines[start : start + size]))
        yield


def _write_all(cp: Checkpointer, pipe: StagePipeline, table: dict[bytes, bytes]) -> list[Written]:
    done = [cp.write("domain", q, st, table) for q, st in pipe.domain_states.items()]
    done += [cp.write("join", p, st, table) for p, st in pipe.join_states.items()]
    return done


def _restore_all(s: Settings, table: dict[bytes, bytes], pipe: StagePipeline) -> tuple[Any, Any]:
    cp = Checkpointer(s.kafka, pipe.counters)
    domains = {q: cp.restore("domain", q, table, s.detection, pipe.public) for q in pipe.domain_states}
    joins = {p: cp.restore("join", p, table, s.detection, pipe.public) for p in pipe.join_states}
    return domains, joins


def test_whole_copy_and_changes_restore_the_live_state(lines: list[bytes]) -> None:
    s = _settings()
    pipe = StagePipeline(s)
    cp = Checkpointer(s.kafka, pipe.counters)
    table: dict[bytes, bytes] = {}
    written: list[Written] = []
    for _ in _chunks(pipe, lines, 120):
        written += _write_all(cp, pipe, table)
    assert sum(w.changes for w in written) > 0, "no piece was ever written as its changes"
    chained = [n for (stage, _), m in cp.manifests.items() for n, c in m.chains.items() if len(c.keys) > 1]
    assert {"ix", "sp", "ms"} <= {n[0] for n in chained}  # the model stock-phrase record too
    domains, joins = _restore_all(s, table, pipe)
    for q, st in pipe.domain_states.items():
        assert canon(domains[q]) == canon(st)
    for p, js in pipe.join_states.items():
        assert canon(joins[p]) == canon(js)
    # The table holds exactly what the manifests name (old versions were deleted).
    named = {k for m in cp.manifests.values() for k in m.versions()}
    assert set(table) == named | {checkpoint.snapshot_key(stage, p) for stage, p in cp.manifests}


def test_a_checkpoint_after_a_few_events_writes_their_changes_not_the_partition(lines: list[bytes]) -> None:
    s = _settings()
    pipe = StagePipeline(s)
    cp = Checkpointer(s.kafka, pipe.counters)
    table: dict[bytes, bytes] = {}
    for _ in _chunks(pipe, lines[:-40], 400):
        pass
    _write_all(cp, pipe, table)
    for _ in _chunks(pipe, lines[-40:], 40):
        pass
    busiest = max(pipe.domain_states, key=lambda q: len(pipe.domain_states[q].table.domains))
    st = pipe.domain_states[busiest]
    incremental = cp.write("domain", busiest, st, table)
    whole = Checkpointer(s.kafka, Counter()).write("domain", busiest, st, {})
    assert incremental.changes >= 1 and whole.changes == 0
    assert incremental.bytes * 3 < whole.bytes


class _CrashingTable(dict[bytes, bytes]):
    """Raises at the n-th write from when it is armed, or at the write of `crash_key`: the process died there."""

    def __init__(self) -> None:
        super().__init__()
        self.countdown: int | None = None
        self.crash_key: bytes | None = None

    def __setitem__(self, key: bytes, value: bytes) -> None:
        if key == self.crash_key or self.countdown == 0:
            raise RuntimeError("crash")
        if self.countdown is not None:
            self.countdown -= 1
        super().__setitem__(key, value)


@pytest.mark.parametrize("crash_at", ["manifest", "second piece"])
def test_a_crash_before_the_manifest_restores_the_previous_checkpoint(lines: list[bytes], crash_at: str) -> None:
    s = _settings()
    pipe = StagePipeline(s)
    cp = Checkpointer(s.kafka, pipe.counters)
    table = _CrashingTable()
    feed = _chunks(pipe, lines, 80)
    next(feed)
    next(feed)
    q = max(pipe.domain_states, key=lambda q: len(pipe.domain_states[q].table.domains))
    st = pipe.domain_states[q]
    cp.write("domain", q, st, table)
    next(feed)
    cp.write("domain", q, st, table)  # a checkpoint with changes: the one a restore must give back
    covered = canon(st)
    next(feed)
    if crash_at == "manifest":
        table.crash_key = checkpoint.snapshot_key("domain", q)
    else:
        table.countdown = 1
    with pytest.raises(RuntimeError, match="crash"):
        cp.write("domain", q, st, table)
    table.countdown = table.crash_key = None
    orphans = len(table)
    # A new worker: the last manifest's versions exactly, the half-written checkpoint swept away.
    again = Checkpointer(s.kafka, Counter()).restore("domain", q, table, s.detection, pipe.public)
    assert canon(again) == covered
    assert len(table) < orphans
    assert set(table) == cp.manifests[("domain", q)].versions() | {checkpoint.snapshot_key("domain", q)}
    # The worker that failed goes on: its next checkpoint covers everything since the last good one.
    next(feed)
    cp.write("domain", q, st, table)
    assert canon(Checkpointer(s.kafka, Counter()).restore("domain", q, table, s.detection, pipe.public)) == canon(st)


def test_an_expired_domain_leaves_the_manifest_and_its_versions_are_deleted(lines: list[bytes]) -> None:
    s = _settings()
    pipe = StagePipeline(s)
    cp = Checkpointer(s.kafka, pipe.counters)
    table: dict[bytes, bytes] = {}
    for _ in _chunks(pipe, lines[:300], 150):
        _write_all(cp, pipe, table)
    q, st = next((q, st) for q, st in pipe.domain_states.items() if st.table.domains)
    gone = next(iter(st.table.domains))
    before = cp.manifests[("domain", q)]
    old_keys = {k for n, c in before.chains.items() if n[1:] == (gone,) for k in c.keys}
    assert len(old_keys) >= 3
    st.table.expire(max(st.table._activity.values()) + s.detection.domain_idle_s + 1)
    assert gone not in st.table.domains and st.table.take_flushed() is not None
    cp.write("domain", q, st, table)
    after = cp.manifests[("domain", q)]
    assert not [n for n in after.chains if n[1:] == (gone,)]
    assert not old_keys & set(table)
    restored = Checkpointer(s.kafka, Counter()).restore("domain", q, table, s.detection, pipe.public)
    assert isinstance(restored, DomainState) and gone not in restored.table.domains
    # Back under the same name: a new monitor, copied whole (not chained onto the expired one's versions).
    st.table.get(gone, max(st.table._activity.values(), default=0.0))
    cp.write("domain", q, st, table)
    assert all(len(c.keys) == 1 for n, c in cp.manifests[("domain", q)].chains.items() if n[1:] == (gone,))
    assert canon(Checkpointer(s.kafka, Counter()).restore("domain", q, table, s.detection, pipe.public)) == canon(st)


def test_a_checkpoint_missing_a_piece_starts_fresh_counted_and_cleared(lines: list[bytes]) -> None:
    s = _settings()
    pipe = StagePipeline(s)
    cp = Checkpointer(s.kafka, pipe.counters)
    table: dict[bytes, bytes] = {}
    for _ in _chunks(pipe, lines[:200], 200):
        _write_all(cp, pipe, table)
    q = next(q for q, st in pipe.domain_states.items() if st.table.domains)
    named = sorted(cp.manifests[("domain", q)].versions())
    del table[named[0]]
    counters: Counter[str] = Counter()
    assert Checkpointer(s.kafka, counters).restore("domain", q, table, s.detection, pipe.public) is None
    assert counters["restore_errors.domain"] == 1
    prefix = checkpoint.snapshot_key("domain", q)
    assert not [k for k in table if k.startswith(prefix)]


def test_no_piece_holds_the_fingerprint_key(lines: list[bytes]) -> None:
    import zlib

    s = _settings()
    pipe = StagePipeline(s)
    cp = Checkpointer(s.kafka, pipe.counters)
    table: dict[bytes, bytes] = {}
    for _ in _chunks(pipe, lines[:300], 100):
        _write_all(cp, pipe, table)
    manifests = {checkpoint.snapshot_key(stage, p) for stage, p in cp.manifests}
    for key, blob in table.items():
        raw = blob if key in manifests or blob[:1] == b"\x80" else zlib.decompress(blob)  # pickle or zlib
        assert KEY.encode() not in raw
