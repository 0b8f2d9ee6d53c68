"""Input read past a partition's state, sought back (streams/kafka/gaps.py): the rule alone, and the direct stage of a
worker's own KafkaPipeline (Faust app built, not started) with the consumer's seek recorded."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from faust.types import TP, Message

from streams.kafka.app import KafkaPipeline
from streams.kafka.gaps import InputGaps
from streams.routing import input_partition_of
from streams.settings import Settings


def test_messages_in_order_replays_and_a_commit_marker_are_read_on() -> None:
    gaps = InputGaps(Counter())
    # 28 and 30 were read before (replays); 32 follows a transaction's marker at 31.
    assert gaps.read_now(0, 30, [28, 30, 31, 33, 34]) == (0, 5, None)
    assert gaps.read_now(1, -1, [500, 501]) == (0, 2, None)  # a fresh state starts anywhere
    assert not gaps.pending and not gaps.counters


def test_a_message_past_the_state_stops_the_slice_and_seeks_back() -> None:
    counters: Counter[str] = Counter()
    gaps = InputGaps(counters)
    assert gaps.read_now(0, 30, [31, 32, 41, 42]) == (0, 2, (33, 41))
    assert gaps.pending == {0: (33, 41)}
    assert counters["direct.rewinds"] == 1 and counters["direct.rewind_dropped"] == 2


def test_after_the_seek_what_was_fetched_before_is_dropped_until_the_partitions_next_message() -> None:
    counters: Counter[str] = Counter()
    gaps = InputGaps(counters)
    gaps.pending[0] = (33, 41)
    assert gaps.read_now(0, 32, [43, 44]) == (2, 2, None)  # queued before the seek
    assert gaps.read_now(0, 32, [33, 34, 35]) == (0, 3, None)  # the messages it had skipped
    assert not gaps.pending and counters["direct.rewind_dropped"] == 2


def test_a_gap_the_log_really_has_is_read_on_after_one_seek() -> None:
    gaps = InputGaps(Counter())
    gaps.pending[0] = (33, 41)
    # Nothing between 32 and 41 is ever delivered (aborted records): 41 comes first again, and is read on.
    assert gaps.read_now(0, 32, [41, 42]) == (0, 2, None)
    assert not gaps.pending
    gaps.pending[0] = (33, 41)
    gaps.forget(0)  # revoked: the next assignment seeks to the committed offset
    assert gaps.read_now(0, 32, [33]) == (0, 1, None)


def _message(offset: int) -> Message:
    """A cache_stats event of a domain at home on input partition 0."""
    parts = Settings().kafka.input_partitions
    domain = next(d for d in (f"d{i}" for i in range(100)) if input_partition_of(d.encode(), parts) == 0)
    ev = {"type": "cache_stats", "event_id": f"cs-{offset}", "ts": time.time(), "cache_domain": domain,
          "role": "unified", "capacity_tokens": 1000, "used_tokens": offset}  # fmt: skip
    return Message("input", 0, offset, time.time(), 0, [], domain.encode(), orjson.dumps(ev), None)


def test_the_direct_stage_reads_only_what_follows_its_state_and_has_the_rest_read_again(tmp_path: Path) -> None:
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key"},
        kafka={"data_dir": str(tmp_path), "topology": "direct"},
    )
    pipe = KafkaPipeline(s)
    seeks: list[tuple[TP, int, int]] = []
    read: list[list[int]] = []

    def reread_upto(tp: TP, offset: int, upto: int) -> asyncio.Future[None]:
        seeks.append((tp, offset, upto))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done

    original = pipe.direct.read

    def recording(st: Any, p: int, msgs: list[Any], wall: float) -> Any:
        read.append([m.offset for m in msgs])
        return original(st, p, msgs, wall)

    async def nothing(*_: Any, **__: Any) -> Any:
        return False

    pipe.app.consumer.reread_upto = reread_upto  # type: ignore[attr-defined]
    pipe.direct.read = recording  # type: ignore[method-assign]
    pipe._direct_out = pipe._tell = pipe.checkpoints.maybe = nothing  # type: ignore[assignment,method-assign]

    async def run() -> None:
        await pipe._direct_slice(0, [_message(o) for o in (0, 1, 2)])
        await pipe._direct_slice(0, [_message(o) for o in (3, 9, 10)])  # 4..8 never came
        await pipe._direct_slice(0, [_message(o) for o in (11, 12)])  # fetched before the seek back
        await pipe._direct_slice(0, [_message(o) for o in range(4, 11)])  # the re-read

    asyncio.run(run())
    assert seeks == [(TP(pipe.names.input, 0), 4, 9)]
    assert read == [[0, 1, 2], [3], list(range(4, 11))]
    assert pipe.direct_states[0].offset == 10 and not pipe.counters["direct.offset_gaps"]
    assert pipe.counters["ingest.cache_stats"] == 11  # every message once


def test_a_seek_back_that_fails_is_logged_and_not_kept(caplog: pytest.LogCaptureFixture) -> None:
    gaps = InputGaps(Counter())

    class Consumer:
        def reread_upto(self, tp: TP, offset: int, upto: int) -> asyncio.Future[None]:
            failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            failed.set_exception(KeyError(tp))
            return failed

    async def run() -> None:
        gaps.seek_back(Consumer(), TP("input", 0), (4, 9))
        await asyncio.sleep(0)  # the done callbacks run

    asyncio.run(run())
    assert not gaps._seeks and "a seek back of the input failed" in caplog.text
