"""The Kafka stages without a broker: the worker's own stage classes, frames and records, wired in memory
(tests/support/stagepipe.py). The same properties are tested against the real broker in
tests/broker/test_kafka_runtime.py; these run in seconds and pinpoint the stage that breaks."""

from __future__ import annotations

import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from detectors.reorder import STATS_RANK, OrderKey
from schemas.events import CacheStats
from streams.embedded.runner import EmbeddedRunner
from streams.kafka import checkpoint, frames, records
from streams.kafka.ingest import IngestStage
from streams.kafka.inputmsg import InputMessage
from streams.kafka.stages import DomainStage, DomainState
from streams.settings import Settings
from tests.support.rawevents import tick_events
from tests.support.stagepipe import StagePipeline, run_lines

KEY = "unit-test-fingerprint-key"
MARKER = "CTK-CANARY-5f1c0a9e2b7d4c31a8e6f0d2"
SECRET_TEXT = "zebra quantum marmalade obelisk"


def _settings(**kafka: Any) -> Settings:
    return Settings(detection={"fingerprint_key": KEY}, kafka=kafka)


def _ticks(last_ts: float, s: Settings) -> list[bytes]:
    return [orjson.dumps(t) for t in tick_events(last_ts, s.kafka)]


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from streams.sim.simulate import SimConfig, write_simulation

    d = tmp_path_factory.mktemp("incident")
    summary = write_simulation(d, SimConfig(duration_s=180.0, fault_at_s=60.0))
    lines = [line for line in Path(summary["events_path"]).read_bytes().splitlines() if line.strip()]
    s = _settings()
    lines += _ticks(max(orjson.loads(line)["ts"] for line in lines), s)
    path = d / "events.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    alerts = {a.alert_id for a in EmbeddedRunner(s).run_files([str(path)]).alerts}
    assert len(alerts) > 3, "the incident must raise alerts, else the comparison proves nothing"
    return {"lines": lines, "alerts": alerts}


def _internal_bytes(pipe: StagePipeline) -> list[bytes]:
    """The snapshot of every partition, as the changelogs would get it."""
    out = [checkpoint.dumps(st, pipe.counters) for st in pipe.join_states.values()]
    out += [checkpoint.dumps(st, pipe.counters) for st in pipe.domain_states.values()]
    return out


# batch=1 is the inner-loop proof; other batchings and a restart run in the full suite.
@pytest.mark.parametrize("batch", [1, pytest.param(97, marks=pytest.mark.slow)])
def test_stages_give_the_embedded_alert_ids(incident: dict[str, Any], batch: int) -> None:
    pipe = run_lines(_settings(), incident["lines"], batch=batch)
    assert {a.alert_id for a in pipe.out.alerts} == incident["alerts"]
    assert not pipe.out.dead
    kinds = Counter(orjson.loads(v).get("record", "alert") for _, v in pipe.out.published)
    assert kinds["alert"] == len(pipe.out.alerts)
    # The ticks close every incident: the core's resolutions travel beside the alerts.
    assert kinds["incident_resolved"] >= 1


@pytest.mark.slow  # snapshots and restores every stage at several points
def test_a_restart_from_snapshots_gives_the_same_alerts(incident: dict[str, Any]) -> None:
    s = _settings()
    lines = incident["lines"]
    half = len(lines) // 2
    first = run_lines(s, lines[:half], batch=50)
    # A new worker restores every partition from its snapshot (with a fresh fingerprinter and settings).
    second = StagePipeline(s)
    second.counters = first.counters
    second.join_states = {
        p: checkpoint.loads(checkpoint.dumps(st, first.counters), s.detection, first.counters, second.public)  # type: ignore[misc]
        for p, st in first.join_states.items()
    }
    second.domain_states = {
        q: checkpoint.loads(checkpoint.dumps(st, first.counters), s.detection, first.counters, second.public)  # type: ignore[misc]
        for q, st in first.domain_states.items()
    }
    # Kafka's offsets go on: the input and join topics are not reset by a worker restart.
    second.ingest = first.ingest
    second.input_offsets = first.input_offsets
    second.join_offsets = first.join_offsets
    n = s.kafka.input_partitions
    for start in range(half, len(lines), 50):
        second.feed(((start + i) % n, line) for i, line in enumerate(lines[start : start + 50]))
    assert not second.out.dead
    got = {a.alert_id for a in first.out.alerts} | {a.alert_id for a in second.out.alerts}
    assert got == incident["alerts"]
    assert second.counters["join.replayed_skipped"] == second.counters["domain.replayed_skipped"] == 0


def test_no_text_marker_or_key_leaves_the_ingest(tmp_path: Path) -> None:
    s = _settings()
    t0 = 1_780_000_000.0
    events = [
        {"type": "canary", "event_id": "c1", "ts": t0, "tenant_id": "probe-a", "marker": MARKER},
        {"type": "request", "event_id": "q1", "ts": t0 + 1, "request_id": "r1", "tenant_id": "acme", "model": "m",
         "prompt_tokens": 10, "prompt_text": f"please summarise {SECRET_TEXT} for me"},
        {"type": "response", "event_id": "p1", "ts": t0 + 2, "request_id": "r1", "tenant_id": "acme", "model": "m",
         "cache_domain": "d1", "status_code": 200, "output_text": f"sure: {SECRET_TEXT} and {MARKER}"},
    ]  # fmt: skip
    pipe = StagePipeline(s)
    sent: list[bytes] = []
    original = pipe._encode

    def capture(send: Any) -> bytes:
        sent.append(original(send))
        return sent[-1]

    pipe._encode = capture  # type: ignore[method-assign]
    pipe.feed((0, orjson.dumps(e)) for e in events)
    # Every input partition past the pair, so that the watermarks release it.
    pipe.feed(enumerate(_ticks(t0 + 10, s)[: s.kafka.input_partitions]))
    assert any(a.kind == "canary_leak" for a in pipe.out.alerts), pipe.out.alerts
    assert len(sent) > 3
    snapshots = [zlib.decompress(blob) for blob in _internal_bytes(pipe)]
    for blob in sent + snapshots:
        for secret in (b"zebra", b"marmalade", b"5f1c0a9e2b7d4c31", KEY.encode()):
            assert secret not in blob.lower()


def test_bad_input_is_dead_lettered_with_reason_and_position() -> None:
    s = _settings()
    s = s.model_copy(update={"ingest": s.ingest.model_copy(update={"max_event_bytes": 2048})})
    good = {"type": "cache_stats", "event_id": "s1", "ts": 1_780_000_000.0, "cache_domain": "d", "role": "prefill",
            "capacity_tokens": 10, "used_tokens": 1}  # fmt: skip
    stage = IngestStage(s, Counter())
    batched = b"\n".join([orjson.dumps(good), b"{broken", b"", orjson.dumps({**good, "event_id": "s2"})])
    msgs = [
        InputMessage(0, 0, b"k", b"not json {", False),
        InputMessage(0, 1, None, orjson.dumps({"type": "request", "event_id": "x"}), False),
        InputMessage(1, 0, None, orjson.dumps({**good, "pad": "p" * 5000}), False),
        InputMessage(1, 1, None, None, False),
        InputMessage(2, 7, None, batched, True),
        InputMessage(3, 0, None, orjson.dumps({"type": "canary", "event_id": "c", "ts": 1_780_000_000.0,
                                               "tenant_id": "acme", "marker": MARKER}), False),
    ]  # fmt: skip
    res = stage.read(msgs, now=1.0, wall=time.time())
    got = [(d.reason, d.source.topic, d.source.partition, d.offset, d.line) for d in res.dead]
    assert got == [
        ("not_json", "input", 0, 0, None),
        ("invalid", "input", 0, 1, None),
        ("oversized", "input", 1, 0, None),
        ("invalid", "input", 1, 1, None),
        ("not_json", "input", 2, 7, 2),
        ("canary_tenant", "input", 3, 0, None),
    ]
    assert res.dead[0].key == b"k" and res.dead[0].payload == b"not json {"
    assert res.dead[4].payload == b"{broken"
    assert sum(len(v) for v in res.to_join.values()) == 2  # the two good lines around the bad one
    assert res.event_types == ["cache_stats", "cache_stats"]


def test_a_duplicate_is_dead_lettered_at_the_join_without_its_text() -> None:
    s = _settings()
    req = {"type": "request", "event_id": "q1", "ts": 1_780_000_000.0, "request_id": "r1", "tenant_id": "t",
           "model": "m", "prompt_tokens": 3, "prompt_text": SECRET_TEXT}  # fmt: skip
    pipe = StagePipeline(s)
    pipe.feed([(0, orjson.dumps(req)), (1, orjson.dumps(req))])
    assert [d.reason for d in pipe.out.dead] == ["duplicate"]
    dead = pipe.out.dead[0]
    assert dead.source == frames.Source(frames.INPUT, 1) and dead.offset == 0
    assert b"zebra" not in dead.payload and b"q1" in dead.payload


def test_a_far_future_event_is_rejected_and_moves_no_watermark() -> None:
    s = _settings()
    wall = time.time()
    t0 = wall - 3600.0
    pipe = StagePipeline(s)
    stats = {"type": "cache_stats", "ts": t0, "cache_domain": "d", "role": "prefill", "capacity_tokens": 10,
             "used_tokens": 1}  # fmt: skip
    pipe.feed([(p, orjson.dumps({**stats, "event_id": f"s{p}"})) for p in range(4)], wall=wall)
    before = dict(pipe.ingest.input_max)
    wms = {p: st.wm for p, st in pipe.join_states.items()}
    poison = {**stats, "event_id": "poison", "ts": wall + 10 * 365 * 86400.0}
    pipe.feed([(2, orjson.dumps(poison))], wall=wall)
    pipe.heartbeat()
    assert [d.reason for d in pipe.out.dead] == ["future_ts"]
    assert pipe.ingest.input_max == before
    assert {p: st.wm for p, st in pipe.join_states.items()} == wms
    assert all(ts < wall for st in pipe.join_states.values() for ts in st.marks.values())


def test_the_domain_stage_survives_an_alert_at_the_end_of_time() -> None:
    """Issue 11: the Kafka domain agent crashed on "year 10000 is out of range" and lost the alert."""
    s = _settings()
    end_of_time = 253402300800.0  # 10000-01-01T00:00:00Z
    stats = CacheStats.model_construct(
        type="cache_stats", event_id="s", ts=end_of_time, cache_domain="d", role="prefill", capacity_tokens=681280,
        used_tokens=0, model=None, context_window=1_048_576, evicted_tokens_total=None, traceparent=None,
    )  # fmt: skip
    item = frames.Item(
        frames.Source(frames.JOIN, 0),
        0,
        0,
        "stats",
        records.event_record(stats),
        OrderKey(end_of_time, STATS_RANK, "s"),
        "d",
    )
    counters: Counter[str] = Counter()
    stage = DomainStage(s, counters, started=0.0)
    st = DomainState.fresh(s.detection, counters)
    batches = [frames.Batch([item], wm=(p, end_of_time + 10)) for p in range(s.kafka.internal_partitions)]
    results = [stage.handle(st, 0, frames.decode(frames.encode(b)), now=1.0) for b in batches]
    published = [v for r in results for _, v in r.published]
    dead = [d for r in results for d in r.dead]
    # The schema now bounds event time to year 9999, so only a forged record gets here; whatever the core
    # does with it (an alert, or an error), the stage returns: never a crashed agent, never silent. The domain
    # judges it at the watermark (ADR 0011, stop 67), so an error there is the domain's, named with its detail.
    assert len(published) + len(dead) == 1
    if dead:
        assert dead[0].reason == "internal_error" and "advancing domain 'd'" in dead[0].detail


def test_replayed_items_are_skipped_by_position() -> None:
    s = _settings()
    pipe = StagePipeline(s)
    req = {"type": "request", "event_id": "q1", "ts": 1_780_000_000.0, "request_id": "r1", "tenant_id": "t",
           "model": "m", "prompt_tokens": 3, "cache_domain": "d"}  # fmt: skip
    pipe.feed([(0, orjson.dumps(req))])
    # The same input message again, as a restarted ingest would re-send it: same source position.
    res = pipe.ingest.read([InputMessage(0, 0, None, orjson.dumps(req), False)], 1.0, time.time())
    for send in pipe.ingest.sends(res.to_join, 1.0, force=True):
        pipe.join_topic[send.partition].append(pipe._encode(send))
    pipe.drain()
    assert pipe.counters["join.replayed_skipped"] == 1
    assert not pipe.out.dead  # skipped, not a duplicate: the position says it was applied


def test_quiet_input_releases_the_last_exchange_without_a_later_event() -> None:
    """Issue 25: with only a little traffic, the last exchange before a pause stayed pending until some
    later event arrived: the join watermark trailed the newest mark by watermark_lateness_s even once
    every input partition had gone quiet, and the last exchange's event time is that newest mark."""
    s = _settings(watermark_idle_s=30.0)
    pipe = StagePipeline(s, now=100.0)  # past the start-up wait for unheard partitions
    t0 = time.time() - 60.0
    req = {"type": "request", "event_id": "q1", "ts": t0, "request_id": "r1", "tenant_id": "acme",
           "model": "m", "prompt_tokens": 50_000, "cache_domain": "d"}  # fmt: skip
    resp = {"type": "response", "event_id": "p1", "ts": t0 + 2.0, "request_id": "r1", "tenant_id": "acme",
            "model": "m", "cache_domain": "d", "status_code": 200,
            "usage": {"input_tokens": 10, "output_tokens": 5}}  # fmt: skip
    pipe.feed([(0, orjson.dumps(req)), (0, orjson.dumps(resp))])
    pipe.heartbeat()
    assert pipe.out.alerts == []  # input partition 0 is live: its newest item may still have company
    pipe.now += s.kafka.watermark_idle_s + 1.0  # everything written has been read, and nothing came since
    pipe.heartbeat()
    assert [a.kind for a in pipe.out.alerts] == ["token_accounting_mismatch"]
    assert all(len(st.pending) == 0 for st in pipe.domain_states.values())
