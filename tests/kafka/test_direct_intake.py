"""The direct topology's hand-over from the consumer (streams/kafka/consumer.py) to its stage, without a broker:
the worker's own KafkaPipeline (Faust app built, not started). A batch handed over before a revocation is dropped
whole, even when its partition comes back to the same worker: the consumer reads it again from the last commit,
and processing the stale copy first would move the fresh state past messages it never saw. The same hand-over
runs on the real broker in tests/broker/test_kafka_direct.py (two workers, SIGKILL)."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from faust.types import TP

from streams.kafka import app as app_mod
from streams.kafka.app import KafkaPipeline
from streams.settings import Settings


def pipeline(tmp_path: Path) -> tuple[KafkaPipeline, list[tuple[int, list[Any]]]]:
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key"},
        kafka={"data_dir": str(tmp_path), "topology": "direct"},
    )
    pipe = KafkaPipeline(s)
    batches: list[tuple[int, list[Any]]] = []

    async def record(messages: list[Any], gen: int) -> None:
        batches.append((gen, list(messages)))

    pipe._direct_batch = record  # type: ignore[method-assign]
    return pipe, batches


async def drain(pipe: KafkaPipeline) -> None:
    task = asyncio.create_task(pipe._direct(None))
    for _ in range(20):
        await asyncio.sleep(0)
    task.cancel()


def test_batches_handed_over_between_revocations_reach_the_stage_together(tmp_path: Path) -> None:
    pipe, batches = pipeline(tmp_path)

    async def run() -> None:
        await pipe._direct_intake(["m1", "m2"])
        await pipe._direct_intake(["m3"])
        await drain(pipe)

    asyncio.run(run())
    assert batches == [(0, ["m1", "m2", "m3"])]
    assert pipe.counters["direct.revoked_skipped"] == 0


def test_a_batch_from_before_a_revocation_is_dropped_whole_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="crosstalk.kafka")
    pipe, batches = pipeline(tmp_path)
    tp = TP(pipe.names.input, 0)

    async def run() -> None:
        await pipe._on_assigned(pipe.app, {tp})
        await pipe._direct_intake([SimpleNamespace(partition=0, offset=7), SimpleNamespace(partition=0, offset=8)])
        await pipe._on_revoked(pipe.app, {tp})
        await pipe._on_assigned(pipe.app, {tp})  # back to the same worker
        await pipe._direct_intake(["fresh"])
        await drain(pipe)

    asyncio.run(run())
    assert batches == [(1, ["fresh"])]
    assert pipe.counters["direct.revoked_skipped"] == 2
    assert "to be read again: {0: '7-8'}" in caplog.text


def test_revoking_only_internal_partitions_keeps_the_batches(tmp_path: Path) -> None:
    pipe, batches = pipeline(tmp_path)

    async def run() -> None:
        await pipe._direct_intake(["m1"])
        await pipe._on_revoked(pipe.app, {TP(pipe.names.direct_table + "-changelog", 0)})
        await drain(pipe)

    asyncio.run(run())
    assert batches == [(0, ["m1"])]


class _Msg:
    def __init__(self, partition: int, offset: int, size: int) -> None:
        self.partition, self.offset, self.value = partition, offset, b"x" * size


def test_a_fetched_batch_is_read_in_slices_by_bytes_each_partition_in_order(tmp_path: Path) -> None:
    """A slice's alerts go out before the next slice is read (SLICE_BYTES): a fetch of 500 text-rich events took
    ~0.3 s, and the first event's alert waited for all of it."""
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key"},
        kafka={"data_dir": str(tmp_path), "topology": "direct"},
    )
    pipe = KafkaPipeline(s)
    read: list[tuple[int, list[int]]] = []

    async def record(p: int, ms: list[Any]) -> None:
        read.append((p, [m.offset for m in ms]))
        await asyncio.sleep(0)

    pipe._direct_slice = record  # type: ignore[method-assign]
    quarter = app_mod.SLICE_BYTES // 4
    msgs = [_Msg(0, o, quarter) for o in range(9)] + [_Msg(1, 0, 3 * app_mod.SLICE_BYTES), _Msg(1, 1, 10)]
    msgs.insert(4, _Msg(1, 5, 10))  # interleaved partitions: each keeps its own order

    async def run() -> None:
        await pipe._on_assigned(pipe.app, {TP(pipe.names.input, 0), TP(pipe.names.input, 1)})
        await pipe._direct_batch(msgs, pipe.revocations)

    asyncio.run(run())
    assert read == [(0, [0, 1, 2, 3]), (0, [4, 5, 6, 7]), (0, [8]), (1, [5]), (1, [0]), (1, [1])]


def test_a_revocation_between_slices_skips_the_rest_of_the_batch(tmp_path: Path) -> None:
    s = Settings(
        detection={"fingerprint_key": "unit-test-fingerprint-key"},
        kafka={"data_dir": str(tmp_path), "topology": "direct"},
    )
    pipe = KafkaPipeline(s)
    tp = TP(pipe.names.input, 0)
    read: list[list[int]] = []

    async def record(p: int, ms: list[Any]) -> None:
        read.append([m.offset for m in ms])
        await pipe._on_revoked(pipe.app, {tp})  # the rebalance lands while the first slice's outputs are sent

    pipe._direct_slice = record  # type: ignore[method-assign]
    msgs = [_Msg(0, o, app_mod.SLICE_BYTES // 2) for o in range(6)]

    async def run() -> None:
        await pipe._on_assigned(pipe.app, {tp})
        await pipe._direct_batch(msgs, pipe.revocations)

    asyncio.run(run())
    assert read == [[0, 1]]
    assert pipe.counters["direct.revoked_skipped"] == 4
