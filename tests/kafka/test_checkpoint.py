"""Snapshots without a broker: acks only after a snapshot, outputs flushed first, the snapshot-time budget,
and no secret in a snapshot."""

from __future__ import annotations

import asyncio
import zlib
from collections import Counter

from factories import PROBE_MARKER, TEXTS, request, response

from detectors.canaries import CanaryRegistry
from detectors.dedup import Deduper
from detectors.front import Front
from detectors.join import Joiner
from detectors.monitor import Monitor, make_fingerprinter
from streams.kafka import checkpoint
from streams.kafka.direct import DirectState
from streams.kafka.stages import JoinState
from streams.settings import Settings
from tests.support.live import observe_now


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


def _leak_story(m: Monitor) -> list[str]:
    m.observe(request("p1", "probe-a", 1.0, text=f"remember {PROBE_MARKER}", canaries=[PROBE_MARKER]))
    m.observe(response("p1", "probe-a", 2.0, text="noted"))
    m.observe(request("r1", "bob", 10.0, text=TEXTS[3]))
    return [a.kind for a in observe_now(m, response("r1", "bob", 11.0, text=f"{TEXTS[4]} {PROBE_MARKER}"))]


def test_a_restored_monitor_ingests_text_with_its_own_markers_and_a_fresh_cache() -> None:
    # The ingest step (detectors/ingest.py) is derived, not stored: restored, it reads the restored markers.
    s = Settings(detection={"fingerprint_key": "ck-secret-key", "canary_tenants": ["probe-*"]})
    counters: Counter[str] = Counter()
    st = DirectState.fresh_direct(s.detection, counters)
    st.monitor.observe(request("r0", "alice", 0.5, text=TEXTS[5]))
    copy = checkpoint.loads(checkpoint.dumps(st, counters), s.detection, counters)
    assert isinstance(copy, DirectState)
    ingest = copy.monitor.front.ingest
    assert ingest is not None and ingest.keys is copy.monitor.canaries
    assert copy.monitor.sessions is not None and copy.monitor.sessions is not st.monitor.sessions
    assert _leak_story(copy.monitor) == _leak_story(st.monitor) == ["canary_leak"]
    staged = JoinState.fresh(s.detection)  # a staged join partition takes text-free records: no ingest step
    front = Front(staged.joiner, staged.dedup, None, counters)
    thawed = Front.__new__(Front)
    thawed.__setstate__(front.__getstate__())
    assert thawed.ingest is None and thawed.joiner is staged.joiner
    again = checkpoint.loads(checkpoint.dumps(staged, counters), s.detection, counters)
    assert isinstance(again, JoinState) and again.joiner.canaries.fingerprinter is not None


def test_a_front_and_joiner_snapshot_from_before_the_ingest_step_restore() -> None:
    # Before detectors/ingest.py, a Front pickled its four slots (no ingest flag) and a Joiner its session cache.
    s = Settings(detection={"fingerprint_key": "ck-secret-key"}).detection
    joiner = Joiner(s, CanaryRegistry(make_fingerprinter(s)))
    old = Joiner.__new__(Joiner)
    old.__setstate__({**joiner.__getstate__(), "sessions": object()})
    assert not hasattr(old, "sessions")
    front = Front.__new__(Front)
    front.__setstate__((None, {"counters": Counter(), "dedup": Deduper(10, 10.0), "joiner": old, "policy": None}))
    assert front.ingest is not None and front.ingest.keys is old.canaries
    out = front.join(request("r1", "bob", 1.0, text=TEXTS[0])) + front.join(response("r1", "bob", 2.0, text=TEXTS[1]))
    assert len(out) == 1 and out[0].prompt_print is not None and out[0].output_print is not None
