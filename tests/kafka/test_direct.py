"""The direct topology's stage without a broker: the embedded core's alerts on input keyed by cache domain,
replays skipped, bad input dead-lettered with its reason, and a checkpoint restored mid-stream that goes on
to the same alerts."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from detectors.monitor import Monitor
from schemas.events import parse_event
from streams.kafka.checkpoint import Checkpointer
from streams.kafka.direct import DirectStage, DirectState
from streams.kafka.gaps import offset_spans
from streams.kafka.inputmsg import InputMessage
from streams.routing import domain_key, input_partition_of, routing_key
from streams.settings import Settings

PARTS = 4


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    from streams.sim.simulate import SimConfig, write_simulation

    d = tmp_path_factory.mktemp("sim-direct")
    summary = write_simulation(d, SimConfig(duration_s=240.0, fault_at_s=80.0))
    return [line for line in Path(summary["events_path"]).read_bytes().splitlines() if line.strip()]


def _partitioned(lines: list[bytes]) -> dict[int, list[bytes]]:
    """Each line on the input partition the producer's direct keying gives it (canaries on every one)."""
    events = [parse_event(line) for line in lines]
    rdom = {e.request_id: e.cache_domain for e in events if e.type == "response"}
    out: dict[int, list[bytes]] = {q: [] for q in range(PARTS)}
    for line, ev in zip(lines, events, strict=True):
        key = domain_key(ev, rdom)
        targets = range(PARTS) if key is None else [input_partition_of(key.encode(), PARTS)]
        for q in targets:
            out[q].append(line)
    return out


def _feed(
    stage: DirectStage, states: dict[int, DirectState], parts: dict[int, list[bytes]], start: int, end: int
) -> Any:
    alerts = []
    dead = []
    for q, qlines in parts.items():
        msgs = [InputMessage(q, off, None, qlines[off], False) for off in range(start, min(end, len(qlines)))]
        res = stage.read(states[q], q, msgs, time.time())
        alerts += res.alerts
        dead += res.dead
    return alerts, dead


def _embedded(lines: list[bytes], s: Settings) -> set[str]:
    m = Monitor(s.detection)
    ids = set()
    for line in lines:
        ids |= {a.alert_id for a in m.observe(parse_event(line))}
    ids |= {a.alert_id for a in m.flush()}
    return ids


def _flush(states: dict[int, DirectState]) -> set[str]:
    out = set()
    for st in states.values():
        assert st.monitor is not None
        out |= {a.alert_id for a in st.monitor.flush()}
    return out


def test_domain_keys_put_both_halves_of_a_pair_and_a_domain_on_one_partition(lines: list[bytes]) -> None:
    events = [parse_event(line) for line in lines]
    rdom = {e.request_id: e.cache_domain for e in events if e.type == "response"}
    assert any(e.type == "request" and e.cache_domain is None for e in events), "some requests name no domain"
    where: dict[str, set[int]] = {}
    for ev in events:
        key = domain_key(ev, rdom)
        if ev.type == "canary":
            assert key is None
            continue
        assert key is not None
        rid = getattr(ev, "request_id", None)
        if rid is not None and rid in rdom:
            where.setdefault(rid, set()).add(input_partition_of(key.encode(), PARTS))
    assert where and all(len(ps) == 1 for ps in where.values())
    # The staged keys would have split them: a request keyed by request_id, stats by domain.
    assert {routing_key(e) for e in events if e.type == "request"} != {
        domain_key(e, rdom) for e in events if e.type == "request"
    }


def test_the_direct_stage_gives_the_embedded_alert_ids(lines: list[bytes]) -> None:
    s = Settings()
    counters: Counter[str] = Counter()
    stage = DirectStage(s, counters)
    states = {q: DirectState.fresh_direct(s.detection, counters) for q in range(PARTS)}
    parts = _partitioned(lines)
    alerts, dead = _feed(stage, states, parts, 0, max(map(len, parts.values())))
    expected = _embedded(lines, s)
    assert expected, "the incident must raise alerts"
    assert not dead
    assert {a.alert_id for a in alerts} | _flush(states) == expected
    assert counters["exchanges"] > 0 and counters["ingest.response"] > 0


def test_a_checkpoint_restored_mid_stream_goes_on_to_the_same_alerts(lines: list[bytes]) -> None:
    s = Settings()
    parts = _partitioned(lines)
    end = max(map(len, parts.values()))
    half = end // 2
    counters: Counter[str] = Counter()
    stage = DirectStage(s, counters)
    states = {q: DirectState.fresh_direct(s.detection, counters) for q in range(PARTS)}
    first, _ = _feed(stage, states, parts, 0, half)
    table: dict[bytes, bytes] = {}
    cp = Checkpointer(s.kafka, counters)
    for q, st in states.items():
        cp.write("direct", q, st, table)
    # A new process: the states come back from the table; the input is re-read from the beginning.
    counters2: Counter[str] = Counter()
    restored = {}
    for q in range(PARTS):
        st = Checkpointer(s.kafka, counters2).restore("direct", q, table, s.detection)
        assert isinstance(st, DirectState) and st.monitor is not None
        assert st.monitor.counters is counters2, "the process's counters, not a pickled copy"
        restored[q] = st
    stage2 = DirectStage(s, counters2)
    second, dead = _feed(stage2, restored, parts, 0, end)
    assert not dead
    assert counters2["direct.replayed_skipped"] == sum(min(half, len(x)) for x in parts.values())
    ids = [a.alert_id for a in first + second]
    assert len(ids) == len(set(ids)), "no alert raised twice across the restart"
    assert set(ids) | _flush(restored) == _embedded(lines, s)


def _one_partition() -> tuple[Counter[str], DirectStage, DirectState]:
    s = Settings()
    counters: Counter[str] = Counter()
    return counters, DirectStage(s, counters), DirectState.fresh_direct(s.detection, counters)


def test_bad_input_is_dead_lettered_with_its_reason_and_moves_nothing() -> None:
    counters, stage, st = _one_partition()
    now = time.time()
    good = {"type": "cache_stats", "event_id": "c1", "ts": now, "cache_domain": "dom", "role": "unified",
            "capacity_tokens": 10, "used_tokens": 0}  # fmt: skip
    future = {**good, "event_id": "c2", "ts": now + 10 * 365 * 86400.0}
    batch = b"\n".join([orjson.dumps(good), b"{broken", orjson.dumps(future), orjson.dumps(good)])
    msgs = [
        InputMessage(0, 0, b"d", None, False),  # a tombstone
        InputMessage(0, 1, b"d", batch, True),
        InputMessage(0, 1, b"d", batch, True),  # the same offset again: a replay, skipped
    ]
    res = stage.read(st, 0, msgs, now)
    assert [(d.reason, d.offset, d.line) for d in res.dead] == [
        ("invalid", 0, None),
        ("not_json", 1, 2),
        ("future_ts", 1, 3),
        ("duplicate", 1, 4),
    ]
    assert st.clock is not None and st.clock.high_water == now, "the far-future event moved no clock"
    assert counters["ingest.cache_stats"] == 1 and counters["direct.replayed_skipped"] == 1
    assert res.event_types == ["cache_stats"]


def test_offsets_the_state_never_read_are_counted() -> None:
    counters, stage, st = _one_partition()
    now = time.time()
    stats = {"type": "cache_stats", "ts": now, "cache_domain": "dom", "role": "unified", "capacity_tokens": 10,
             "used_tokens": 0}  # fmt: skip
    read = [orjson.dumps({**stats, "event_id": f"c{i}"}) for i in range(4)]
    # 0 and 1 in order, 3 after a transaction's marker at 2: read on as a log is. 7 after 4 to 6: input read past.
    msgs = [InputMessage(0, off, b"d", line, False) for off, line in zip((0, 1, 3, 7), read, strict=True)]
    stage.read(st, 0, msgs, now)
    assert counters["direct.offset_gaps"] == 1 and counters["ingest.cache_stats"] == 4
    assert st.offset == 7


def _pair(rid: str, domain: str, ts: float, text: str = "the quick brown fox jumps over the lazy dog") -> list[bytes]:
    req = {
        "type": "request",
        "event_id": f"{rid}-q",
        "ts": ts,
        "request_id": rid,
        "tenant_id": "t",
        "model": "m",
        "prompt_tokens": 10,
        "prompt_text": text,
    }
    resp = {"type": "response", "event_id": f"{rid}-r", "ts": ts + 1, "request_id": rid, "tenant_id": "t",
            "model": "m", "cache_domain": domain, "status_code": 200}  # fmt: skip
    return [orjson.dumps(req), orjson.dumps(resp)]


def test_input_keyed_otherwise_goes_to_its_domains_partition_and_is_never_judged_here() -> None:
    """Partition 0 of 4 is the home of "dom" (Kafka's murmur2 of the key), not of "d1" (partition 1). A producer
    on the staged keys (request id) sends pairs of both there: the "dom" pair is judged here; the "d1" response is
    sent again keyed by its domain, with its waiting request (as fingerprints); a request that comes after its
    re-routed response follows it; a cache_stats of "d1" goes too; an event that came back re-routed and is still
    not at home is dead-lettered (the topic's partitions are not the settings'), as is a request of "d1" whose
    response never came here, once it is an orphan."""
    assert (input_partition_of(b"dom", PARTS), input_partition_of(b"d1", PARTS)) == (0, 1)
    counters, stage, st = _one_partition()
    now = time.time()
    home, away = _pair("q1", "dom", now), _pair("q2", "d1", now)
    late_req, late_resp = _pair("q3", "d1", now)
    stats = orjson.dumps({"type": "cache_stats", "event_id": "c2", "ts": now, "cache_domain": "d1",
                          "role": "unified", "capacity_tokens": 10, "used_tokens": 0})  # fmt: skip
    orphan = orjson.dumps({**orjson.loads(away[0]), "event_id": "q4-q", "request_id": "q4", "cache_domain": "d1"})
    lines = [home[0], home[1], away[0], away[1], late_resp, late_req, stats, orphan]
    msgs = [InputMessage(0, i, line[:4], line, False) for i, line in enumerate(lines)]
    msgs.append(InputMessage(0, len(lines), b"d1", stats.replace(b'"c2"', b'"c3"'), False, True))  # back again
    res = stage.read(st, 0, msgs, now + 2)
    assert [orjson.loads(v)["event_id"] for _, v, _ in res.reroute] == ["q2-q", "q2-r", "q3-r", "q3-q", "c2"]
    assert {(k, q) for k, _, q in res.reroute} == {(b"d1", 1)}
    rerouted_request = orjson.loads(res.reroute[0][1])
    assert rerouted_request["prompt_fingerprint"]["hashes"] and "prompt_text" not in rerouted_request
    assert orjson.loads(res.reroute[3][1])["prompt_text"]  # it was never read here: as its producer sent it
    assert counters["exchanges"] == 1 and set(st.monitor.domains) == {"dom"}  # only "dom" is judged here
    assert [(d.reason, d.offset) for d in res.dead] == [("misrouted", 8)]
    assert counters["direct.rerouted.response"] == 2 and counters["direct.rerouted.request"] == 2
    # The orphan request of "d1" (its response never came here) is dead-lettered, not judged here.
    res = stage.read(st, 0, [InputMessage(0, 9, b"dom", orjson.dumps({**orjson.loads(stats), "event_id": "c4",
                                                                       "cache_domain": "dom", "ts": now + 900}),
                                          False)], now + 900)  # fmt: skip
    misrouted = [d for d in res.dead if d.reason == "misrouted"]
    assert len(misrouted) == 1 and b"q4" in misrouted[0].payload and "not its domain's" in misrouted[0].detail
    assert set(st.monitor.domains) == {"dom"} and counters["direct.misrouted"] == 2


def test_a_request_follows_its_rerouted_response_across_a_restart() -> None:
    """The response of "d1" came to partition 0 first and was sent on; the worker then restarted from a
    checkpoint taken in between (another worker, a fresh stage): the request read next still follows it."""
    counters, stage, st = _one_partition()
    now = time.time()
    req, resp = _pair("q5", "d1", now)
    stage.read(st, 0, [InputMessage(0, 0, b"q5", resp, False)], now + 2)
    table: dict[bytes, bytes] = {}
    s = Settings()
    Checkpointer(s.kafka, counters).write("direct", 0, st, table)
    after = Checkpointer(s.kafka, counters).restore("direct", 0, table, s.detection)
    assert isinstance(after, DirectState)
    res = DirectStage(s, counters).read(after, 0, [InputMessage(0, 1, b"q5", req, False)], now + 2)
    assert [(orjson.loads(v)["event_id"], q) for _, v, q in res.reroute] == [("q5-q", 1)]
    assert not res.dead and counters["direct.rerouted.request"] == 1


def test_a_checkpoint_copies_the_new_event_ids_not_the_dedup_window(lines: list[bytes]) -> None:
    s = Settings()
    parts = _partitioned(lines)
    q = max(parts, key=lambda p: len(parts[p]))
    counters: Counter[str] = Counter()
    stage = DirectStage(s, counters)
    st = DirectState.fresh_direct(s.detection, counters)
    n = len(parts[q])
    _feed(stage, {q: st}, {q: parts[q]}, 0, n - 20)
    table: dict[bytes, bytes] = {}
    cp = Checkpointer(s.kafka, counters)
    first = cp.write("direct", q, st, table)
    _feed(stage, {q: st}, {q: parts[q]}, n - 20, n)
    second = cp.write("direct", q, st, table)
    assert st.monitor is not None and st.monitor.dedup.state_size() > 500
    assert first.whole >= 1 and second.changes >= 1
    chain = cp.manifests[("direct", q)].chains[("dd",)]
    # The window's ids were copied once; the second checkpoint added the 20 events' ids as a change.
    assert len(chain.keys) == 2 and 0 < chain.change_bytes < chain.whole_bytes / 10, chain
    restored = Checkpointer(s.kafka, Counter()).restore("direct", q, table, s.detection)
    assert isinstance(restored, DirectState) and restored.monitor is not None
    assert restored.monitor.dedup._seen == st.monitor.dedup._seen
    assert list(restored.monitor.dedup._order) == list(st.monitor.dedup._order)


def test_a_canary_from_a_foreign_producer_is_copied_to_every_other_partition() -> None:
    """Markers are known per partition: crosstalk's producers write a canary to every partition (marked placed); one
    copy from another producer is copied on by the worker that reads it, and still registered where it landed."""
    counters, stage, st = _one_partition()
    now = time.time()
    canary = {"type": "canary", "event_id": "k1", "ts": now, "tenant_id": "probe-1", "marker": "CT-" + "ab12" * 8}
    placed = {**canary, "event_id": "k2", "marker": "CT-" + "cd34" * 8}
    res = stage.read(
        st,
        0,
        [InputMessage(0, 0, b"probe-1", orjson.dumps(canary), False),
         InputMessage(0, 1, None, orjson.dumps(placed), False, True)],
        now,
    )  # fmt: skip
    assert [(k, q) for k, _, q in res.reroute] == [(None, 1), (None, 2), (None, 3)]
    assert all(orjson.loads(v)["event_id"] == "k1" for _, v, _ in res.reroute)
    assert st.monitor.canaries.state_size() == 2 and counters["direct.rerouted.canary"] == 1


def test_messages_dropped_at_a_rebalance_are_logged_by_partition_and_offsets() -> None:
    msgs = [InputMessage(p, off, None, b"", False) for p, off in ((2, 41), (2, 40), (0, 7), (2, 43))]
    assert offset_spans(msgs) == {2: "40-43", 0: "7-7"}
