"""Where a restored staged partition resumes when the committed offset passed its state (ADR 0001, point 4).

The broker test (`tests/broker/test_kafka_runtime.py::test_a_commit_past_the_checkpoint_is_read_again_from_the_state`)
runs it end to end; this one pins the decisions with a consumer that records what it is asked.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from faust.types import TP

from streams.kafka.consumer import Rewinds

TOPIC = TP("app.join", 2)


class _Consumer:
    def __init__(self, earliest: int = 0) -> None:
        self.earliest = earliest
        self.sought: list[tuple[TP, int]] = []

    async def earliest_offsets(self, *tps: TP) -> dict[TP, int]:
        return {tp: self.earliest for tp in tps}

    async def rewind(self, tp: TP, offset: int) -> None:
        self.sought.append((tp, offset))


def _past(r: Rewinds, c: Any, covered: int, offset: int) -> bool:
    return asyncio.run(r.past(c, "join", TOPIC, covered, offset))


def test_the_first_message_past_the_state_seeks_back_once_and_the_queue_beyond_is_dropped() -> None:
    counters: Counter[str] = Counter()
    r, c = Rewinds(counters), _Consumer()
    assert _past(r, c, 154, 161) is True
    assert c.sought == [(TOPIC, 155)]
    # Messages already queued past the state: dropped, not sought again.
    assert _past(r, c, 154, 162) is True
    assert _past(r, c, 154, 170) is True
    assert c.sought == [(TOPIC, 155)]
    assert counters["rewinds.join"] == 1 and counters["rewind_dropped.join"] == 2
    # The message sought came: the next gap (a new one) seeks again.
    r.forget("join", 2)
    assert _past(r, c, 170, 180) is True
    assert c.sought[-1] == (TOPIC, 171) and counters["rewinds.join"] == 2


def test_messages_gone_from_the_topic_are_a_counted_gap_not_an_endless_wait() -> None:
    counters: Counter[str] = Counter()
    r, c = Rewinds(counters), _Consumer(earliest=158)
    assert _past(r, c, 154, 161) is False
    assert c.sought == [] and counters["restore_gaps.join"] == 1 and not r.pending


def test_a_state_that_moved_on_meanwhile_is_sought_from_where_it_stops_now() -> None:
    counters: Counter[str] = Counter()
    r, c = Rewinds(counters), _Consumer()
    assert _past(r, c, 154, 161) is True
    # Another want for the same partition (the state advanced): not a queued message of the old seek.
    assert _past(r, c, 158, 170) is True
    assert c.sought == [(TOPIC, 155), (TOPIC, 159)]
