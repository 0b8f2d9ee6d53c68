"""Checkpoints of the stateful stages' partitions, and when to take them.

A partition's state is cut into pieces (streams/kafka/pieces.py: the partition, and per cache domain its
monitor, content index and long-horizon record). The first checkpoint writes every piece whole; later ones
write only what changed: the index's texts inserted and dropped, the record's changed bytes, and the small
pieces that differ. Checkpoint cost thus follows the traffic since the last checkpoint, not the index size.

Storage: a Faust table with a compacted changelog, keys under `{stage}:v{format}:{partition}`:
    ...:{seq}:{i}   a piece version (a pickle, zlib-compressed but for an index's changes), written once,
                    never overwritten while referenced
    (the prefix)    the manifest: the checkpoint's seq, the offset it covers, and per piece the exact keys
                    to read, its whole copy first, then its changes in order
The manifest is written after every piece it names, and piece versions it no longer names are deleted
only after it. A crash before the manifest leaves the previous manifest naming only versions that still
exist (the half-written ones are swept on restore), so a restore never mixes checkpoints. A piece's
changes are rewritten as a whole copy once they outweigh it (or number CHAIN_MAX), which bounds both a
restore's reading and the table to about twice the state. A domain that expired drops out of the next
manifest and its versions are deleted.

An input message is acked only after the broker acknowledged every write of a checkpoint that covers it
(streams/kafka/changelog.py), and the producer is flushed before each checkpoint, so a checkpoint never covers
an output that could still be lost, and a commit never passes a checkpoint (ADR 0001).
The stage waits only for the cut: its pieces pickled at a consistent point, with the input offset and the
held messages they cover. The flush, the pickles' compression and digests (in a thread: zlib and blake2b
release the GIL), the piece writes, the manifest and then the acks run in a background task per partition
while the stage goes on (at most one in flight per partition; the next cut waits for it), so a round of
checkpoints no longer stalls the input (issues 16 and 28). A write that fails leaves the previous
manifest in place and the covered messages held for the next checkpoint (whose pieces are then copied whole:
the changes since the failed cut are not in the table); a partition revoked while its checkpoint flushes
abandons it before anything is written (the next owner replays from the last ack).

Settings, the fingerprinter and the worker's counters are not state: the settings hold the secret
fingerprint key, the fingerprinter a word cache of millions of entries, and the counters belong to
the process. They are left out of every piece (pickle persistent ids) and supplied again on load,
so no changelog or RocksDB file holds the key.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import logging
import pickle
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from detectors.pipeline import DetectionSettings, PublicSet, make_fingerprinter
from streams.kafka import pieces
from streams.kafka.changelog import ChangelogPartition
from streams.kafka.pieces import Name, process_id
from streams.kafka.stages import DomainState, JoinState
from streams.settings import KafkaSettings

log = logging.getLogger("crosstalk.checkpoint")

# Part of every snapshot's table key: state pickled by a version with another layout is not loaded
# (the partition starts fresh from its committed offset) instead of failing on missing attributes.
# 6: Exchange & co. moved detectors.exchange -> schemas.exchange (join state pickles class paths)
SNAPSHOT_FORMAT = 7  # 7: incremental checkpoints, a manifest and pieces
State = JoinState | DomainState
CHAIN_MAX = 32  # changes after a piece's whole copy before it is copied whole again
Table = MutableMapping[bytes, bytes]


def snapshot_key(stage: str, partition: int) -> bytes:
    """The partition's manifest; its piece versions are keyed under it."""
    return f"{stage}:v{SNAPSHOT_FORMAT}:{partition}".encode()


def piece_key(stage: str, partition: int, seq: int, i: int) -> bytes:
    return f"{stage}:v{SNAPSHOT_FORMAT}:{partition}:{seq}:{i}".encode()


@dataclass(slots=True)
class Chain:
    """One piece in a manifest: the keys of its whole copy and of its changes since, in order."""

    keys: list[bytes]
    whole_bytes: int
    change_bytes: int = 0
    digest: bytes = b""  # of the whole copy: an unchanged piece is not written again


@dataclass(slots=True)
class Manifest:
    seq: int
    offset: int
    chains: dict[Name, Chain] = field(default_factory=dict)

    def dumps(self) -> bytes:
        rows = [(n, c.keys, c.whole_bytes, c.change_bytes, c.digest) for n, c in self.chains.items()]
        return pickle.dumps({"seq": self.seq, "offset": self.offset, "pieces": rows}, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def loads(cls, blob: bytes) -> Manifest:
        d = pickle.loads(blob)
        return cls(d["seq"], d["offset"], {tuple(n): Chain(list(k), w, c, g) for n, k, w, c, g in d["pieces"]})

    def versions(self) -> set[bytes]:
        return {k for c in self.chains.values() for k in c.keys}


@dataclass(slots=True)
class Written:
    """What one checkpoint wrote."""

    seq: int
    bytes: int = 0
    whole: int = 0  # pieces copied whole
    changes: int = 0  # pieces written as their changes
    kept: int = 0  # pieces unchanged since the last checkpoint
    deleted: int = 0  # piece versions no manifest names any more


@dataclass(slots=True)
class Pending:
    """A piece the cut pickled: its whole copy (`old`: the chain it may equal) or its changes (`old`: the chain
    they extend)."""

    name: Name
    raw: bytes
    whole: bool
    old: Chain | None


@dataclass(slots=True)
class Cut:
    """A checkpoint taken but not stored yet: the pieces pickled at the cut, and the held messages it covers.
    `seal` turns them into the bytes it writes and the manifest naming them."""

    key: tuple[str, int]
    manifest: Manifest  # the chains of pieces kept as they were; `seal` adds the others
    pending: list[Pending]
    done: Written
    events: list[Any] = field(default_factory=list)
    writes: list[tuple[bytes, bytes]] = field(default_factory=list)
    sealed: bool = False

    def seal(self) -> None:
        """Compress and digest the pickles, and name them in the manifest. Reads only this cut's own bytes: it runs
        in a thread while the stage goes on (most of its time is zlib and blake2b, which release the GIL)."""
        if self.sealed:
            return
        stage, partition = self.key
        seq, chains, done = self.manifest.seq, self.manifest.chains, self.done
        for p in self.pending:
            old = p.old
            if p.whole:
                digest = hashlib.blake2b(p.raw, digest_size=16).digest()
                if old is not None and old.change_bytes == 0 and old.digest == digest:
                    chains[p.name] = old
                    done.kept += 1
                    continue
                k = piece_key(stage, partition, seq, len(self.writes))
                self.writes.append((k, pieces.pack(p.name, p.raw, True)))
                chains[p.name] = Chain([k], len(p.raw), 0, digest)
                done.whole += 1
            else:
                assert old is not None
                k = piece_key(stage, partition, seq, len(self.writes))
                self.writes.append((k, pieces.pack(p.name, p.raw, False)))
                chains[p.name] = Chain([*old.keys, k], old.whole_bytes, old.change_bytes + len(p.raw), old.digest)
                done.changes += 1
        self.pending = []
        self.sealed = True


def store_url(setting: str) -> str:
    if setting != "auto":
        return setting
    try:
        import rocksdict  # noqa: F401
    except ImportError:
        return "memory://"
    return "rocksdb://"


def store_options(k: KafkaSettings) -> dict[str, int]:
    """A table's store options (RocksDB's; the memory store ignores them): bounded per table partition, where Faust's
    defaults (3 x 64 MB write buffers, a 2 GB block cache, 500 MB compressed) let each database grow for a long time."""
    mb = 1024 * 1024
    return {
        "write_buffer_size": k.store_write_buffer_mb * mb,
        "max_write_buffer_number": 2,
        "block_cache_size": k.store_block_cache_mb * mb,
        "block_cache_compressed_size": k.store_block_cache_mb * mb,
    }


def dumps(state: State, counters: Counter[str]) -> bytes:
    """The whole partition as one pickle (the layout before pieces; bench_checkpoint's baseline)."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = lambda obj: process_id(obj, counters)  # type: ignore[method-assign]
    pickler.dump(state)
    return zlib.compress(buf.getvalue(), 1)


def loads(blob: bytes, settings: DetectionSettings, counters: Counter[str], public: PublicSet | None = None) -> State:
    fingerprinter = make_fingerprinter(settings)
    unpickler = pickle.Unpickler(io.BytesIO(zlib.decompress(blob)))
    known = {"fingerprinter": fingerprinter, "settings": settings, "counters": counters, "public": public}
    unpickler.persistent_load = known.__getitem__  # type: ignore[method-assign]
    state = unpickler.load()
    if not isinstance(state, (JoinState, DomainState)):
        raise TypeError(f"not a stage snapshot: {type(state).__name__}")
    if isinstance(state, DomainState):
        # A snapshot never holds the operator's corpus: each domain gets the process's back.
        for dm in state.table.domains.values():
            dm.attach(public)
    return state


class Checkpointer:
    """Holds each partition's unacked events until a snapshot covers them."""

    def __init__(self, kafka: KafkaSettings, counters: Counter[str]) -> None:
        self.kafka = kafka
        self.counters = counters
        self.held: dict[tuple[str, int], list[Any]] = {}  # (stage, partition) -> events not yet acked
        self.last_snapshot: dict[tuple[str, int], float] = {}
        # The snapshot-time budget (snapshot_max_share), per stage: its partitions share one agent's time, so a
        # budget per partition let a worker with several busy partitions spend a multiple of the share.
        self.not_before: dict[str, float] = {}
        self.manifests: dict[tuple[str, int], Manifest] = {}  # the last one written or restored
        self.seq: dict[tuple[str, int], int] = {}  # the last seq used (also by a checkpoint that failed)
        self.spoiled: set[tuple[str, int]] = set()  # a store failed after its cut: next cut copies pieces whole
        self.inflight: dict[tuple[str, int], asyncio.Task[bool]] = {}  # the partition's checkpoint being stored
        self.epoch: dict[tuple[str, int], int] = {}  # bumped when a partition is revoked: its in-flight is stale
        self.failed: dict[tuple[str, int], BaseException] = {}  # a flush that raised, re-raised in the stage

    def hold(self, stage: str, partition: int, event: Any) -> None:
        self.held.setdefault((stage, partition), []).append(event)

    def forget(self, stage: str, partition: int) -> None:
        """A revoked partition: its held events will be re-read by the next owner."""
        key = (stage, partition)
        self.held.pop(key, None)
        self.manifests.pop(key, None)
        self.seq.pop(key, None)
        self.spoiled.discard(key)
        self.failed.pop(key, None)
        # Not cancelled (that could cut a producer flush short): it sees the new epoch after its flush and
        # writes and acks nothing; the partition's next owner replays from the last ack.
        self.inflight.pop(key, None)
        self.epoch[key] = self.epoch.get(key, 0) + 1

    def write(self, stage: str, partition: int, state: State, table: Table) -> Written:
        """One checkpoint at once: its cut, then its store."""
        return self.store(self.cut(stage, partition, state), table)

    def cut(self, stage: str, partition: int, state: State) -> Cut:
        """The checkpoint's pickles, taken now (synchronously: a consistent point of the state): the changed pieces,
        whole or as their changes. The pieces' change tracking restarts here. Sizes are of the pickles."""
        key = (stage, partition)
        prev = self.manifests.get(key)
        before = prev.chains if prev is not None else {}
        # After a failed store the table lacks the changes since that cut: copy every piece whole once.
        chainable = key not in self.spoiled
        seq = self.seq[key] = max(self.seq.get(key, 0), prev.seq if prev is not None else 0) + 1
        done = Written(seq)
        pending: list[Pending] = []
        chains: dict[Name, Chain] = {}
        live: list[tuple[Name, Any]] = []
        for name, obj in pieces.parts(state):
            live.append((name, obj))
            old = before.get(name)
            if chainable and old is not None and len(old.keys) <= CHAIN_MAX:
                delta = pieces.changes(name, obj)
                if delta == b"":
                    chains[name] = old
                    done.kept += 1
                    continue
                if delta is not None and old.change_bytes + len(delta) <= old.whole_bytes:
                    pending.append(Pending(name, delta, False, old))
                    continue
            pending.append(Pending(name, pieces.whole(name, obj, self.counters), True, old))
        for name, obj in live:
            pieces.mark(name, obj)
        return Cut(key, Manifest(seq, state.offset, chains), pending, done)

    def store(self, cut: Cut, table: Table) -> Written:
        """A cut into the table: its pieces, then the manifest naming them, then the versions it dropped."""
        stage, partition = cut.key
        done = cut.done
        prev = self.manifests.get(cut.key)
        try:
            cut.seal()
            for k, blob in cut.writes:
                table[k] = blob
                done.bytes += len(blob)
            blob = cut.manifest.dumps()
            table[snapshot_key(stage, partition)] = blob  # last: it makes the new versions the partition's state
        except BaseException:
            self.spoiled.add(cut.key)
            raise
        done.bytes += len(blob)
        self.manifests[cut.key] = cut.manifest
        self.spoiled.discard(cut.key)
        if prev is not None:
            for k in prev.versions() - cut.manifest.versions():
                table.pop(k, None)
                done.deleted += 1
        return done

    def restore(
        self, stage: str, partition: int, table: Table, settings: DetectionSettings, public: PublicSet | None = None
    ) -> State | None:
        """The partition's state as its manifest names it (None: no checkpoint yet); then piece versions no
        manifest names (left by a checkpoint that crashed before its manifest) are deleted.

        A checkpoint that cannot be read (a piece missing, a class changed) is deleted with every version,
        logged and counted (`restore_errors.<stage>`): the partition starts fresh from its committed offset
        rather than crash-looping its agent."""
        try:
            return self._restore(stage, partition, table, settings, public)
        except Exception:
            log.exception("%s: checkpoint of partition %s could not be restored; starting fresh", stage, partition)
            self.counters[f"restore_errors.{stage}"] += 1
            self.manifests.pop((stage, partition), None)
            self.seq.pop((stage, partition), None)
            self._sweep(stage, partition, table, set())
            table.pop(snapshot_key(stage, partition), None)
            return None

    def _sweep(self, stage: str, partition: int, table: Table, named: set[bytes]) -> None:
        prefix = snapshot_key(stage, partition) + b":"
        for k in [k for k in list(table.keys()) if k.startswith(prefix) and k not in named]:
            table.pop(k, None)
            self.counters[f"snapshot_swept.{stage}"] += 1

    def _restore(
        self, stage: str, partition: int, table: Table, settings: DetectionSettings, public: PublicSet | None
    ) -> State | None:
        blob = table.get(snapshot_key(stage, partition))
        if not blob:
            return None
        manifest = Manifest.loads(blob)
        blobs: dict[Name, list[bytes]] = {}
        for name, chain in manifest.chains.items():
            got = [table.get(k) for k in chain.keys]
            missing = [k for k, b in zip(chain.keys, got, strict=True) if b is None]
            if missing:
                raise LookupError(f"{stage} partition {partition}: checkpoint {manifest.seq} misses {missing[0]!r}")
            blobs[name] = [b for b in got if b is not None]
        state = pieces.assemble(blobs, settings, self.counters, public)
        key = (stage, partition)
        self.manifests[key] = manifest
        self.seq[key] = manifest.seq
        self.spoiled.discard(key)
        for name, obj in pieces.parts(state):
            pieces.mark(name, obj)
        self._sweep(stage, partition, table, manifest.versions())
        return state

    async def maybe(
        self,
        stage: str,
        partition: int,
        state: State,
        table: MutableMapping[bytes, bytes],
        flush: Callable[[], Awaitable[Any]],
        force: bool = False,
    ) -> bool:
        """Cut a checkpoint of the partition if due (or forced) and store it in the background: outputs
        flushed first, then the pieces and the manifest, then the acks. True if one was cut. A checkpoint
        still in flight makes a due one wait for the next message (a forced one waits for it)."""
        key = (stage, partition)
        failed = self.failed.pop(key, None)
        if failed is not None:
            raise failed  # as if the stage had flushed itself: its outputs may be lost, so it must not go on
        held = self.held.get(key)
        if not held:
            return False
        now = time.monotonic()
        due = (
            len(held) >= self.kafka.snapshot_every
            or now - self.last_snapshot.get(key, 0.0) >= self.kafka.snapshot_interval_s
        )
        if not force and (not due or now < self.not_before.get(stage, 0.0)):
            return False
        running = self.inflight.get(key)
        if running is not None and not running.done():
            if not force:
                return False
            epoch = self.epoch.get(key, 0)
            await asyncio.wait([running])
            held = self.held.get(key)
            if self.epoch.get(key, 0) != epoch or not held:  # revoked meanwhile
                return False
            now = time.monotonic()
        try:
            cut = self.cut(stage, partition, state)
        except Exception:
            # Not fatal: the events stay unacked and are replayed from the last good checkpoint.
            log.exception("%s: snapshot of partition %s failed", stage, partition)
            self.counters[f"snapshot_errors.{stage}"] += 1
            self.last_snapshot[key] = now
            return False
        took = time.monotonic() - now
        cut.events = held
        self.held[key] = []
        self.counters[f"snapshot_ms.{stage}.last"] = round(took * 1000)
        self.last_snapshot[key] = now
        # A whole copy of a large partition (the first, or a piece's periodic rewrite) can take seconds:
        # taken every interval regardless, it would leave the stage no time for its input.
        self.not_before[stage] = now + took / self.kafka.snapshot_max_share
        # The task inherits the stage's context (Faust's current event: the table's changelog partition).
        self.inflight[key] = asyncio.create_task(self._finish(cut, table, flush, self.epoch.get(key, 0)))
        return True

    async def _finish(self, cut: Cut, table: Table, flush: Callable[[], Awaitable[Any]], epoch: int) -> bool:
        """The background half of a checkpoint: flush, store, ack — in that order, or nothing acked."""
        key = cut.key
        stage, partition = key
        started = time.monotonic()
        try:
            await flush()
        except Exception as exc:
            # Outputs the cut covers may be lost: nothing is acked, and the stage fails on its next message as
            # it did when it flushed itself (the worker replays from the last ack).
            if self.epoch.get(key, 0) == epoch:
                self.failed[key] = exc
            return False
        if self.epoch.get(key, 0) != epoch:
            self.counters[f"snapshot_abandoned.{stage}"] += 1
            return False
        try:
            # Off the event loop: compressing a busy domain's index whole took ~0.3 s, a stall of every
            # partition's input when it ran in the cut (text-rich p99 latency 1.5 s).
            await asyncio.to_thread(cut.seal)
        except Exception:
            log.exception("%s: snapshot of partition %s failed", stage, partition)
            self.counters[f"snapshot_errors.{stage}"] += 1
            self.spoiled.add(key)  # the cut's changes are nowhere: the next cut copies every piece whole
            self.held[key] = cut.events + self.held.get(key, [])
            return False
        if self.epoch.get(key, 0) != epoch:
            self.counters[f"snapshot_abandoned.{stage}"] += 1
            return False
        try:
            done = self.store(cut, table)
            # The acks wait for the broker: offsets Faust commits must never pass a checkpoint it does not hold.
            if isinstance(table, ChangelogPartition):
                await table.written()
        except Exception:
            log.exception("%s: snapshot of partition %s failed", stage, partition)
            self.counters[f"snapshot_errors.{stage}"] += 1
            self.spoiled.add(key)  # the table may lack the cut's changes: the next cut copies every piece whole
            if self.epoch.get(key, 0) == epoch:
                # Held again, ahead of those that came since: the next checkpoint covers and acks them.
                self.held[key] = cut.events + self.held.get(key, [])
            return False
        if self.epoch.get(key, 0) != epoch:
            # Revoked while its writes went out: the next owner restores them, and replays what they cover.
            self.counters[f"snapshot_abandoned.{stage}"] += 1
            return False
        self.counters[f"snapshots.{stage}"] += 1
        self.counters[f"snapshot_bytes.{stage}.last"] = done.bytes
        self.counters[f"snapshot_bytes.{stage}"] += done.bytes
        self.counters[f"snapshot_pieces.{stage}.whole"] += done.whole
        self.counters[f"snapshot_pieces.{stage}.changes"] += done.changes
        self.counters[f"snapshot_store_ms.{stage}.last"] = round((time.monotonic() - started) * 1000)
        for ev in cut.events:
            ev.ack()
        return True

    async def settle(self) -> None:
        """Wait for every checkpoint in flight (a clean stop; tests)."""
        for task in list(self.inflight.values()):
            if not task.done():
                await asyncio.wait([task])
