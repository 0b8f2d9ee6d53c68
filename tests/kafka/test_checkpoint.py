"""Snapshots without a broker: acks only after a snapshot, outputs flushed first, the snapshot-time budget,
and no secret in a snapshot."""

from __future__ import annotations

import asyncio
import zlib
from collections import Counter

from streams.kafka import checkpoint
from streams.kafka.stages import JoinState
from streams.settings import Settings


class _Event:
    def __init__(self) -> None:
        self.acked = False

    def ack(self) -> None:
        self.acked = True


def test_acks_wait_for_a_snapshot_written_after_the_flush() -> None:
    s = Settings(detection={"fingerprint_key": "ck-secret-key"}, kafka={"snapshot_every": 2, "snapshot_max_share": 1})
    counters: Counter[str] = Counter()
    cp = checkpoint.Checkpointer(s.kafka, counters)
    state = JoinState.fresh(s.detection)
    table: dict[bytes, bytes] = {}
    order: list[str] = []

    async def flush() -> None:
        order.append("flush")

    async def run() -> None:
        first, second = _Event(), _Event()
        cp.hold("join", 0, first)
        cp.last_snapshot[("join", 0)] = float("inf")  # the interval is not due; only the count decides
        assert not await cp.maybe("join", 0, state, table, flush)
        assert not first.acked and not table and not order
        cp.hold("join", 0, second)
        assert await cp.maybe("join", 0, state, table, flush)
        await cp.settle()  # the flush, the store and the acks run in the background
        assert order == ["flush"] and first.acked and second.acked

    asyncio.run(run())
    assert checkpoint.snapshot_key("join", 0) in table  # the manifest, written last
    for key, blob in table.items():  # settings and fingerprinter stay out of every piece
        raw = blob if key == checkpoint.snapshot_key("join", 0) else zlib.decompress(blob)
        assert b"ck-secret-key" not in raw
    restored = checkpoint.Checkpointer(s.kafka, counters).restore("join", 0, table, s.detection)
    assert isinstance(restored, JoinState)
    assert restored.joiner.fingerprinter.key_id == state.joiner.fingerprinter.key_id


def test_a_slow_snapshot_defers_the_next_one() -> None:
    s = Settings(detection={"fingerprint_key": "k"}, kafka={"snapshot_every": 1, "snapshot_max_share": 0.0001})
    cp = checkpoint.Checkpointer(s.kafka, Counter())
    state = JoinState.fresh(s.detection)
    table: dict[bytes, bytes] = {}

    async def flush() -> None:
        return None

    async def run() -> list[bool]:
        done = []
        for _ in range(3):
            cp.hold("join", 0, _Event())
            done.append(await cp.maybe("join", 0, state, table, flush))
        cp.hold("join", 0, _Event())
        done.append(await cp.maybe("join", 0, state, table, flush, force=True))
        return done

    # Any real snapshot takes > 0 s, so with a 0.01 % budget the next two wait; a forced one does not.
    assert asyncio.run(run()) == [True, False, False, True]


def test_a_restored_domain_partition_gets_the_workers_public_corpus_back() -> None:
    from detectors.public import PublicSet
    from streams.kafka.stages import DomainState

    s = Settings(detection={"fingerprint_key": "k"})
    counters: Counter[str] = Counter()
    public = PublicSet("winnow-v1", "kid", s.detection.k, s.detection.w, [1, 2, 3])
    st = DomainState.fresh(s.detection, counters, public)
    st.table.get("d1", 1.0)
    blob = checkpoint.dumps(st, counters)
    again = checkpoint.loads(blob, s.detection, counters, public)
    assert isinstance(again, DomainState)
    assert again.table.public is public and again.table.domains["d1"].overlap.public is public
    assert checkpoint.loads(blob, s.detection, counters, None).table.domains["d1"].overlap.public is None


def test_the_snapshot_budget_is_the_stages_not_each_partitions() -> None:
    s = Settings(detection={"fingerprint_key": "k"}, kafka={"snapshot_every": 1, "snapshot_max_share": 0.0001})
    cp = checkpoint.Checkpointer(s.kafka, Counter())
    states = {p: JoinState.fresh(s.detection) for p in (0, 1)}
    table: dict[bytes, bytes] = {}

    async def flush() -> None:
        return None

    async def run() -> list[bool]:
        done = []
        for p in (0, 1, 0, 1):
            cp.hold("join", p, _Event())
            done.append(await cp.maybe("join", p, states[p], table, flush))
        return done

    # Partition 0's snapshot spent the stage's budget: partition 1 waits too (one agent runs both).
    assert asyncio.run(run()) == [True, False, False, False]
