"""Snapshots of the stateful stages' partitions, and when to take them.

One zlib-compressed pickle per partition, in a Faust table with a compacted changelog. An input
message is acked only after a snapshot that covers it was written, and the producer is flushed
before each snapshot, so a snapshot never covers an output that could still be lost (ADR 0001).

Settings, the fingerprinter and the worker's counters are not state: the settings hold the secret
fingerprint key, the fingerprinter a word cache of millions of entries, and the counters belong to
the process. They are left out of every snapshot (pickle persistent ids) and supplied again on load,
so no changelog or RocksDB file holds the key.
"""

from __future__ import annotations

import io
import logging
import pickle
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from detectors.fingerprint import Fingerprinter
from detectors.monitor import make_fingerprinter
from detectors.public import PublicSet
from detectors.settings import DetectionSettings
from streams.kafka.stages import DomainState, JoinState
from streams.settings import KafkaSettings

log = logging.getLogger("crosstalk.checkpoint")

# Part of every snapshot's table key: state pickled by a version with another layout is not loaded
# (the partition starts fresh from its committed offset) instead of failing on missing attributes.
SNAPSHOT_FORMAT = 6  # 6: Exchange & co. moved detectors.exchange -> schemas.exchange (join state pickles class paths)
State = JoinState | DomainState


def snapshot_key(stage: str, partition: int) -> bytes:
    return f"{stage}:v{SNAPSHOT_FORMAT}:{partition}".encode()


def store_url(setting: str) -> str:
    if setting != "auto":
        return setting
    try:
        import rocksdict  # noqa: F401
    except ImportError:
        return "memory://"
    return "rocksdb://"


def dumps(state: State, counters: Counter[str]) -> bytes:
    def persistent_id(obj: object) -> str | None:
        if isinstance(obj, Fingerprinter):
            return "fingerprinter"
        if isinstance(obj, DetectionSettings):
            return "settings"
        if isinstance(obj, PublicSet):  # the operator's corpus is the process's, loaded from its file
            return "public"
        if obj is counters:
            return "counters"
        return None

    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = persistent_id  # type: ignore[method-assign]
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
        # Each domain's overlap detector pickles its corpus as None (as DomainMonitor.loads re-attaches it).
        for dm in state.table.domains.values():
            dm.overlap.public = public
    return state


class Checkpointer:
    """Holds each partition's unacked events until a snapshot covers them."""

    def __init__(self, kafka: KafkaSettings, counters: Counter[str]) -> None:
        self.kafka = kafka
        self.counters = counters
        self.held: dict[tuple[str, int], list[Any]] = {}  # (stage, partition) -> events not yet acked
        self.last_snapshot: dict[tuple[str, int], float] = {}
        self.not_before: dict[tuple[str, int], float] = {}  # the snapshot-time budget (snapshot_max_share)

    def hold(self, stage: str, partition: int, event: Any) -> None:
        self.held.setdefault((stage, partition), []).append(event)

    def forget(self, stage: str, partition: int) -> None:
        """A revoked partition: its held events will be re-read by the next owner."""
        self.held.pop((stage, partition), None)

    async def maybe(
        self,
        stage: str,
        partition: int,
        state: State,
        table: MutableMapping[bytes, bytes],
        flush: Callable[[], Awaitable[Any]],
        force: bool = False,
    ) -> bool:
        """Snapshot the partition if due (or forced): outputs first, then the snapshot, then the acks."""
        key = (stage, partition)
        held = self.held.get(key)
        if not held:
            return False
        now = time.monotonic()
        due = (
            len(held) >= self.kafka.snapshot_every
            or now - self.last_snapshot.get(key, 0.0) >= self.kafka.snapshot_interval_s
        )
        if not force and (not due or now < self.not_before.get(key, 0.0)):
            return False
        await flush()
        try:
            blob = dumps(state, self.counters)
        except Exception:
            # Not fatal: the events stay unacked and are replayed from the last good snapshot.
            log.exception("%s: snapshot of partition %s failed", stage, partition)
            self.counters[f"snapshot_errors.{stage}"] += 1
            self.last_snapshot[key] = now
            return False
        table[snapshot_key(stage, partition)] = blob
        took = time.monotonic() - now
        self.counters[f"snapshots.{stage}"] += 1
        self.counters[f"snapshot_bytes.{stage}.last"] = len(blob)
        self.counters[f"snapshot_ms.{stage}.last"] = round(took * 1000)
        for ev in held:
            ev.ack()
        held.clear()
        self.last_snapshot[key] = now
        # A whole-partition snapshot grows with the content index (seconds at production sizes): taken
        # every interval regardless, it would leave the stage no time for its input.
        self.not_before[key] = now + took / self.kafka.snapshot_max_share
        return True
