"""A Kafka worker whose input went quiet brings a cold domain's held finding out by its clock (issue 40): the
direct stage and the domain stage each take the wall clock as an argument (`tick`), and the worker's timer
(streams/kafka/clock.py) ticks them only once its input is read to the end."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import Any

import orjson
import pytest
from factories import TEXTS, request, response

from streams.kafka.clock import HeldClock
from streams.kafka.direct import DirectStage, DirectState
from streams.kafka.inputmsg import InputMessage
from streams.kafka.stages import DomainResult
from streams.settings import Settings
from tests.support.stagepipe import StagePipeline

HOLD = 600.0
COLD = {"fingerprint_key": "held-clock-tests", "overlap_warmup_docs": 10**6, "overlap_warmup_slow_docs": 10**6}


def _leak(t0: float) -> list[bytes]:
    """src quotes a passage, and dst's answer carries it: a content-only finding, held while d1 is cold. Then a
    request of a later instant, so the answer is judged (and its finding held) as the input is read."""
    events = [
        request("s0", "src", t0, text=TEXTS[0]),
        response("s0", "src", t0 + 1, text="Noted, thank you."),
        request("d0", "dst", t0 + 10, text="Please help with my question."),
        response("d0", "dst", t0 + 11, text=TEXTS[0]),
        request("e0", "else", t0 + 12, text="And another thing."),
    ]
    return [e.model_dump_json(exclude_none=True).encode() for e in events]


def test_the_direct_stage_judges_a_held_finding_by_the_clock() -> None:
    s = Settings(detection=COLD)
    counters: Counter[str] = Counter()
    stage, st = DirectStage(s, counters), DirectState.fresh_direct(s.detection, counters)
    msgs = [InputMessage(0, off, b"d1", line, False, placed=True) for off, line in enumerate(_leak(1000.0))]
    stage.partitions = 1
    assert stage.read(st, 0, msgs, time.time()).alerts == []
    assert st.monitor.state_size()["held_findings"] == 1
    assert stage.tick(st, 0, 1011.0 + HOLD - 1).alerts == []
    res = stage.tick(st, 0, 1011.0 + HOLD)
    (alert,) = res.alerts
    assert (alert.tenant_id, alert.source_tenant_id, alert.ts) == ("dst", "src", 1011.0 + HOLD)
    assert [k for k, _ in res.published] == [alert.alert_id.encode()]
    assert stage.tick(st, 0, 1011.0 + 10 * HOLD).alerts == []


def test_the_domain_stage_judges_a_held_finding_by_the_clock() -> None:
    pipe = StagePipeline(Settings(detection=COLD))
    n = pipe.settings.kafka.input_partitions
    for i, line in enumerate(_leak(1000.0)):
        pipe.feed([(i % n, line)])
    pipe.now += 10 * pipe.settings.kafka.watermark_idle_s  # the input went quiet: the ingest reports it idle
    pipe.heartbeat()
    pipe.heartbeat()
    held = sum(
        dm.state_size()["held_findings"] for st in pipe.domain_states.values() for dm in st.table.domains.values()
    )
    assert pipe.out.alerts == [] and held == 1  # the exchange was judged and held: no later event will judge it
    ticked = [pipe.domain.tick(st, q, 1011.0 + HOLD) for q, st in pipe.domain_states.items()]
    (alert,) = [a for res in ticked for a in res.alerts]
    assert (alert.tenant_id, alert.source_tenant_id) == ("dst", "src")
    assert sum(len(res.published) for res in ticked) == 1


class _Worker(HeldClock):
    def __init__(self, lag: dict[str, int]) -> None:
        s = self.settings = Settings(detection=COLD)
        counters: Counter[str] = Counter()
        self._holds_logged = {}
        self.app = type("App", (), {"rebalancing": False})()
        self.direct = DirectStage(s, counters)
        self.direct.partitions = 1
        st = DirectState.fresh_direct(s.detection, counters)
        # Live input: the leak's response came 700 s ago (its finding waited the 600 s hold), nothing since.
        leak = _leak(time.time() - 711.0)
        msgs = [InputMessage(0, off, b"d1", line, False, placed=True) for off, line in enumerate(leak)]
        self.direct.read(st, 0, msgs, time.time())
        self.direct_states, self.domain_states = {0: st}, {}
        self.lag = lag
        self.emitted: list[Any] = []

    def consumer_lag(self) -> dict[str, int]:
        return self.lag

    async def _emit(self, res: DomainResult) -> None:
        self.emitted += [orjson.loads(v)["kind"] for _, v in res.published]


def test_the_worker_ticks_only_once_its_input_is_read_to_the_end(caplog: pytest.LogCaptureFixture) -> None:
    behind = _Worker({"0": 5})  # a backlog: its events are older than the clock, and event time judges them
    with caplog.at_level(logging.INFO, logger="crosstalk.clock"):
        asyncio.run(behind._tick_held())
        asyncio.run(behind._tick_held())
    (record,) = caplog.records  # the hold, logged once over two ticks
    assert record.getMessage().startswith("direct partition 0: domain d1 is cold: 1 content-only finding(s) held")
    assert behind.emitted == [] and behind.direct_states[0].monitor.state_size()["held_findings"] == 1
    quiet = _Worker({"0": 0})
    asyncio.run(quiet._tick_held())
    assert quiet.emitted == ["cross_tenant_contamination"]
