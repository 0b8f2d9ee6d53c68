"""Checkpoints stored in the background, without a broker: the stage goes on while its checkpoint is flushed and
written, a covered message is acked only after the manifest that covers it, a failed write or flush acks
nothing and leaves the previous manifest, and a partition revoked mid-flush writes nothing."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_incremental_checkpoint import canon

from streams.kafka import checkpoint
from streams.kafka.checkpoint import Checkpointer
from streams.kafka.stages import DomainState
from streams.settings import Settings
from tests.support.stagepipe import StagePipeline

Log = list[tuple[str, Any]]


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    from streams.sim.simulate import SimConfig, write_simulation

    d = tmp_path_factory.mktemp("sim")
    summary = write_simulation(d, SimConfig(duration_s=40.0, fault_at_s=10.0))
    return [line for line in Path(summary["events_path"]).read_bytes().splitlines() if line.strip()]


class _Message:
    def __init__(self, offset: int, log: Log) -> None:
        self.offset, self.log, self.acked = offset, log, False

    def ack(self) -> None:
        self.acked = True
        self.log.append(("ack", self.offset))


class _Table(dict[bytes, bytes]):
    """Logs each write (a piece or the manifest); raises at the write of `fail_key`."""

    def __init__(self, log: Log, manifest: bytes) -> None:
        super().__init__()
        self.log, self.manifest = log, manifest
        self.fail_key: bytes | None = None

    def __setitem__(self, key: bytes, value: bytes) -> None:
        if key == self.fail_key:
            raise OSError("changelog write failed")
        self.log.append(("manifest" if key == self.manifest else "piece", key))
        super().__setitem__(key, value)


class _Flush:
    """The producer's flush: waits until opened (the broker is slow), or raises when told to."""

    def __init__(self, log: Log) -> None:
        self.log, self.open = log, asyncio.Event()
        self.error: Exception | None = None

    async def __call__(self) -> None:
        self.log.append(("flush", None))
        await self.open.wait()
        if self.error is not None:
            raise self.error


class _Stage:
    """One domain partition of the pipeline, its messages held as the Faust loop holds them."""

    def __init__(self, lines: list[bytes]) -> None:
        self.s = Settings.model_validate(
            {"detection": {"fingerprint_key": "bg-key"}, "kafka": {"snapshot_interval_s": 0.001}}
        )
        self.pipe = StagePipeline(self.s)
        self.cp = Checkpointer(self.s.kafka, self.pipe.counters)
        self.chunks = self._chunks(lines, 60)
        next(self.chunks)
        self.q = max(self.pipe.domain_states, key=lambda q: len(self.pipe.domain_states[q].table.domains))
        self.st = self.pipe.domain_states[self.q]
        self.log: Log = []
        self.table = _Table(self.log, checkpoint.snapshot_key("domain", self.q))
        self.flush = _Flush(self.log)
        self.msgs: list[_Message] = []

    def _chunks(self, lines: list[bytes], size: int) -> Iterator[None]:
        n = self.pipe.settings.kafka.input_partitions
        for start in range(0, len(lines), size):
            self.pipe.feed(((start + i) % n, line) for i, line in enumerate(lines[start : start + size]))
            yield

    def process(self, n: int) -> None:
        """More input, and n more messages of the partition held (their offsets are the state's position)."""
        next(self.chunks)
        for _ in range(n):
            m = _Message(len(self.msgs), self.log)
            self.msgs.append(m)
            self.st.offset = m.offset
            self.cp.hold("domain", self.q, m)

    async def maybe(self) -> bool:
        self.cp.not_before.clear()  # due on every call: the time budget is test_checkpoint's
        return await self.cp.maybe("domain", self.q, self.st, self.table, self.flush)

    def restored(self) -> DomainState | None:
        got = Checkpointer(self.s.kafka, Counter()).restore(
            "domain", self.q, self.table, self.s.detection, self.pipe.public
        )
        assert got is None or isinstance(got, DomainState)
        return got

    def acked(self) -> list[int]:
        return [m.offset for m in self.msgs if m.acked]


def test_the_stage_goes_on_while_its_checkpoint_is_stored_and_acks_follow_the_manifest(lines: list[bytes]) -> None:
    async def run() -> None:
        t = _Stage(lines)
        t.process(3)
        assert await t.maybe()
        covered = canon(t.st)  # the cut: the state after message 2
        await asyncio.sleep(0)
        assert t.log == [("flush", None)] and not t.table  # the broker is slow: flushing, nothing written yet
        t.process(2)  # ... while the stage goes on with new messages
        assert not await t.maybe(), "a second checkpoint of the partition while one is in flight"
        assert t.acked() == [] and not t.table
        t.flush.open.set()
        await t.cp.settle()
        kinds = [kind for kind, _ in t.log]
        assert kinds[0] == "flush" and kinds.count("manifest") == 1
        assert kinds.index("manifest") == max(i for i, k in enumerate(kinds) if k != "ack") < kinds.index("ack")
        assert t.acked() == [0, 1, 2]  # exactly what the cut covered; 3 and 4 wait for the next checkpoint
        assert t.cp.manifests[("domain", t.q)].offset == 2
        again = t.restored()
        assert again is not None and again.offset == 2 and canon(again) == covered != canon(t.st)
        assert await t.maybe()
        await t.cp.settle()
        assert t.acked() == [0, 1, 2, 3, 4]
        assert canon(t.restored()) == canon(t.st)

    asyncio.run(run())


def test_a_failed_write_acks_nothing_and_leaves_the_previous_manifest(lines: list[bytes]) -> None:
    async def run() -> None:
        t = _Stage(lines)
        t.flush.open.set()
        t.process(2)
        assert await t.maybe()
        await t.cp.settle()
        first = canon(t.st)
        t.process(2)
        t.table.fail_key = t.table.manifest
        assert await t.maybe()
        await t.cp.settle()
        assert t.acked() == [0, 1] and t.pipe.counters["snapshot_errors.domain"] == 1
        restored = t.restored()  # a worker that starts now reads the last complete manifest
        assert restored is not None and restored.offset == 1 and canon(restored) == first
        # The worker goes on: the next checkpoint covers (and acks) the failed one's messages too, and its
        # pieces include the changes the failed cut had taken.
        t.table.fail_key = None
        t.process(1)
        assert await t.maybe()
        await t.cp.settle()
        assert t.acked() == [0, 1, 2, 3, 4]
        assert canon(t.restored()) == canon(t.st)

    asyncio.run(run())


def test_a_failed_flush_acks_nothing_and_fails_the_stage(lines: list[bytes]) -> None:
    async def run() -> None:
        t = _Stage(lines)
        t.process(2)
        t.flush.error = ConnectionError("broker gone")
        t.flush.open.set()
        assert await t.maybe()
        await t.cp.settle()
        assert t.acked() == [] and not t.table
        t.process(1)
        with pytest.raises(ConnectionError):  # as if the stage had flushed itself: the worker restarts
            await t.maybe()

    asyncio.run(run())


def test_a_partition_revoked_while_flushing_writes_and_acks_nothing(lines: list[bytes]) -> None:
    async def run() -> None:
        t = _Stage(lines)
        t.process(2)
        assert await t.maybe()
        await asyncio.sleep(0)
        flushing = t.cp.inflight[("domain", t.q)]
        t.cp.forget("domain", t.q)  # the rebalance: the partition's next owner replays from the last ack
        t.flush.open.set()
        assert await flushing is False
        assert t.acked() == [] and not t.table
        assert t.pipe.counters["snapshot_abandoned.domain"] == 1 and t.restored() is None

    asyncio.run(run())


def test_the_cut_only_pickles_and_compression_runs_off_the_event_loop(
    lines: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compressing a busy index whole took ~0.3 s; in the cut it stalled every partition's input (issue 28)."""
    packed_in: set[int] = set()
    real_pack = checkpoint.pieces.pack

    def pack(name: Any, raw: bytes, whole: bool) -> bytes:
        packed_in.add(threading.get_ident())
        return real_pack(name, raw, whole)

    monkeypatch.setattr(checkpoint.pieces, "pack", pack)

    async def run() -> None:
        t = _Stage(lines)
        t.process(2)
        assert await t.maybe()
        cut_pieces = t.cp.inflight[("domain", t.q)]
        assert not packed_in, "the cut compressed a piece on the event loop"
        t.flush.open.set()
        assert await cut_pieces is True
        assert packed_in and threading.get_ident() not in packed_in
        assert t.acked() == [0, 1] and canon(t.restored()) == canon(t.st)

    asyncio.run(run())


def test_a_failed_compression_acks_nothing_and_the_next_checkpoint_copies_whole(
    lines: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_pack = checkpoint.pieces.pack
    fail = [False]

    def pack(name: Any, raw: bytes, whole: bool) -> bytes:
        if fail[0]:
            raise MemoryError("no room to compress")
        return real_pack(name, raw, whole)

    monkeypatch.setattr(checkpoint.pieces, "pack", pack)

    async def run() -> None:
        t = _Stage(lines)
        t.flush.open.set()
        t.process(2)
        assert await t.maybe()
        await t.cp.settle()
        first = canon(t.st)
        t.process(2)
        fail[0] = True
        assert await t.maybe()
        await t.cp.settle()
        assert t.acked() == [0, 1] and t.pipe.counters["snapshot_errors.domain"] == 1
        restored = t.restored()
        assert restored is not None and restored.offset == 1 and canon(restored) == first
        fail[0] = False
        t.process(1)
        assert await t.maybe()
        await t.cp.settle()
        assert t.acked() == [0, 1, 2, 3, 4]
        manifest = t.cp.manifests[("domain", t.q)]
        assert all(len(chain.keys) == 1 for chain in manifest.chains.values()), "the lost cut's changes are nowhere"
        assert canon(t.restored()) == canon(t.st)

    asyncio.run(run())
