"""The Kafka stages keep a request with a weak canary marker, drop the marker and dead-letter a warning
(issue 24): the staged ingest and the direct stage, as the embedded replay does (tests/embedded)."""

from __future__ import annotations

import time
from collections import Counter

import orjson
from factories import PROBE_MARKER, weak_canary_story

from streams.kafka.direct import DirectStage, DirectState
from streams.kafka.inputmsg import InputMessage
from streams.kafka.stages import DeadLetter
from streams.routing import input_partition_of
from streams.settings import Settings
from tests.support.rawevents import tick_events
from tests.support.stagepipe import run_lines

T0 = 1_780_000_000.0


def _check_warning(dead: list[DeadLetter], counters: Counter[str]) -> None:
    (dl,) = dead
    assert (dl.severity, dl.reason, dl.line) == ("warning", "weak_canary", None)
    assert dl.detail.startswith("canaries[0]: 4 hex digits") and "kept" in dl.detail
    assert orjson.loads(dl.payload) == {"event_id": "q2", "type": "request", "dropped": 1}
    assert counters["canaries.dropped_weak"] == 1 and counters["ingest.request"] == 3


def test_staged_ingest_keeps_the_request() -> None:
    s = Settings(detection={"fingerprint_key": "k"})
    lines = weak_canary_story(T0) + [orjson.dumps(t) for t in tick_events(T0 + 30, s.kafka)]
    pipe = run_lines(s, lines, batch=1)
    kinds = sorted((a.kind, a.tenant_id, a.source_tenant_id) for a in pipe.out.alerts)
    assert kinds == [("canary_leak", "acme", "probe-b")], kinds
    _check_warning(pipe.out.dead, pipe.counters)
    # The marker crossed the internal topics as keyed hashes only (the warning's payload names no marker).
    assert PROBE_MARKER.encode() not in pipe.out.dead[0].payload


def test_direct_stage_keeps_the_request() -> None:
    s = Settings(detection={"fingerprint_key": "k"}, kafka={"topology": "direct"})
    counters: Counter[str] = Counter()
    stage, st = DirectStage(s, counters), DirectState.fresh_direct(s.detection, counters)
    # On the story's domain's own partition: the direct stage sends another partition's domain on (issue 28).
    q = input_partition_of(b"d1", s.kafka.input_partitions)
    msgs = [InputMessage(q, off, b"d1", line, False) for off, line in enumerate(weak_canary_story(T0))]
    res = stage.read(st, q, msgs, time.time())
    assert st.monitor is not None
    alerts = res.alerts + st.monitor.flush()
    kinds = sorted((a.kind, a.tenant_id, a.source_tenant_id) for a in alerts)
    assert kinds == [("canary_leak", "acme", "probe-b")], kinds
    _check_warning(res.dead, counters)
