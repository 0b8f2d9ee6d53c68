"""A join partition that is slow is not gone: the domain stage waits for it (items judged in order), and one with
no watermark yet says it is alive. Only silence for watermark_stalled_s (a hung owner) lets the others go on."""

from __future__ import annotations

from collections import Counter

import orjson

from streams.kafka import frames
from streams.kafka.frames import Batch
from streams.kafka.stages import NEG_INF, DomainStage, DomainState, JoinStage, JoinState
from streams.settings import Settings
from tests.support.stagepipe import StagePipeline

S = Settings(detection={"fingerprint_key": "k"}, kafka={"watermark_idle_s": 30.0, "watermark_stalled_s": 300.0})
PARTS = S.kafka.internal_partitions


def _wm(q: int, wm: float) -> Batch:
    return Batch([], (q, wm))


def test_a_join_partition_slower_than_watermark_idle_s_still_holds_the_domain_back() -> None:
    counters: Counter[str] = Counter()
    stage, st = DomainStage(S, counters, started=0.0), DomainState.fresh(S.detection, counters)
    stage.restored(0, 0.0)
    for q in range(PARTS):
        stage.handle(st, 0, _wm(q, 100.0), now=1.0)
    assert st.released == 100.0
    # Join partition 3 goes quiet (its worker busy with a restore) while the others move on.
    for q in range(PARTS - 1):
        stage.handle(st, 0, _wm(q, 200.0), now=1.0 + S.kafka.watermark_idle_s + 5.0)
    assert st.released == 100.0, "a join partition slower than watermark_idle_s was taken for gone"
    for q in range(PARTS - 1):
        stage.handle(st, 0, _wm(q, 300.0), now=1.0 + S.kafka.watermark_stalled_s + 5.0)
    assert st.released == 300.0, "a hung join partition must not hold every domain back for ever"


def test_a_fresh_domain_partition_waits_watermark_idle_s_from_when_it_was_taken_up() -> None:
    counters: Counter[str] = Counter()
    stage = DomainStage(S, counters, started=0.0)  # the worker started long before this partition came to it
    st = DomainState.fresh(S.detection, counters)
    now = 1000.0
    stage.restored(1, now)
    for q in range(PARTS - 1):
        stage.handle(st, 1, _wm(q, 50.0), now=now)
    assert st.released == NEG_INF, "join partition 3 was skipped before it could have been heard"
    stage.handle(st, 1, _wm(0, 60.0), now=now + S.kafka.watermark_idle_s + 1.0)
    assert st.released == 50.0  # never heard of for that long: gone


def test_a_join_partition_with_no_watermark_yet_tells_every_domain_partition_it_is_alive() -> None:
    counters: Counter[str] = Counter()
    join = JoinStage(S, counters, started=0.0)
    st = JoinState.fresh(S.detection)
    # Within watermark_idle_s of the start, with input partitions not heard of yet: no promise possible.
    res = join.handle(st, 2, 0, Batch([], None, {0: 10.0}, []), now=1.0)
    assert st.wm == NEG_INF
    assert sorted(s.partition for s in res.sends) == list(range(PARTS))
    sent = [frames.decode(frames.encode(Batch(s.items, s.wm))) for s in res.sends]
    assert {b.wm for b in sent} == {(2, NEG_INF)}  # -inf survives the frame (JSON has no infinities)
    # Once per heartbeat interval, not per message.
    assert not join.handle(st, 2, 1, Batch([], None, {0: 11.0}, []), now=2.0).sends
    assert join.handle(st, 2, 2, Batch([], None, {0: 12.0}, []), now=1.0 + S.kafka.heartbeat_interval_s).sends
    # The domain stage hears it: join partition 2 now holds it back instead of being skipped later.
    domain, dst = DomainStage(S, counters, started=0.0), DomainState.fresh(S.detection, counters)
    domain.restored(0, 1.0)
    for q in (0, 1, 3):
        domain.handle(dst, 0, _wm(q, 40.0), now=1.0)
    domain.handle(dst, 0, sent[0], now=1.0)
    domain.handle(dst, 0, _wm(0, 41.0), now=1.0 + S.kafka.watermark_idle_s + 1.0)
    assert dst.released == NEG_INF


def test_an_input_partition_read_to_the_end_by_its_last_owner_is_reported_idle_by_the_next() -> None:
    """Worker A read input partition 0 to its end and lost it in a rebalance; B has nothing to read there, so it
    sends no mark for it. B reports it idle watermark_idle_s after it was assigned, and the join partitions stop
    waiting for it then, not watermark_stalled_s later as for a hung reader."""
    pipe = StagePipeline(S, now=100.0)
    t0 = 1_780_000_000.0

    def stats(i: int, ts: float) -> bytes:
        return orjson.dumps({"type": "cache_stats", "event_id": f"c{i}-{ts}", "ts": ts, "cache_domain": f"d{i}",
                             "role": "unified", "capacity_tokens": 10, "used_tokens": 0})  # fmt: skip

    pipe.feed([(i, stats(i, t0)) for i in range(S.kafka.input_partitions)], wall=t0 + 10)
    pipe.ingest.forget(0)  # the rebalance: A's reader is gone, B's takes partition 0 up with nothing to read
    pipe.ingest.assign([0], pipe.now)
    for step in range(1, 8):
        pipe.now += 5.0
        pipe.feed([(i, stats(i, t0 + step)) for i in range(1, S.kafka.input_partitions)], wall=t0 + 10)
        pipe.heartbeat()
    wms = {st.wm for st in pipe.join_states.values()}
    assert min(wms) > t0 + 5, f"the join partitions still wait for input partition 0: {wms}"
