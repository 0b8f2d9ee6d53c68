"""The fleet record across partitions (detectors/fleet.py): each partition tells the digests of what it judged, and
hears everyone else's.

    domain/direct partition p --judged--> digests --<app_id>.fleet--> every worker --> each other partition's fleet

A partition's table notes the digests of the exchanges its domains judged (`DomainTable.told`); after each batch
the worker sends them to the fleet topic as one message keyed by the partition (`encode`), and every worker reads
the whole topic (`FleetReader`: no consumer group, every partition of it) and hands each message to its partitions
other than the one that told it (`deliver`). A digest is learned `fleet_delay_s` of event time after its exchange,
in (event time, request id) order, so whatever arrives within that delay is learned where one process would learn it
(tests/parity.py runs the in-memory topologies with this delivery); one that arrives later is learned when it
comes, with the rest of its message before any of it is checked for a mix-up (`Fleet.settle`), counted
`fleet.late`, and the record knows less meanwhile (a text stays evidence longer, never the reverse).

Each partition keeps its own record, advanced by its own event time: partitions of one worker stand at different
event times (a backlog, a restart), and one record shared by them would show the slower ones what the model wrote
after their time (ADR 0017, alternatives). A record is never in a snapshot: a partition taken on (fresh or restored)
learns what its worker heard lately (at most `fleet_pending_hashes` fingerprints), and a starting worker reads the
topic from `fleet_replay_s` before its start. A digest learned twice changes nothing (the record is a set of pairs
and tags). Digests carry fingerprints and ids, never text.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import struct
import time
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from typing import Any

from detectors.pipeline import Digest
from streams.kafka.direct import DirectState
from streams.kafka.stages import DomainState
from streams.kafka.topics import topic_names, topic_specs
from streams.settings import Settings

log = logging.getLogger("crosstalk.fleet")
_HEAD = struct.Struct("<dHHII")  # event time, id and key lengths, prompt and output byte lengths
# F2 adds where and when it was delivered (detectors/fleet_mixup.py): the request's event time, the status and the
# cache domain's length (the domain follows the key). F1 messages (a worker from before) still decode, without them.
_WHERE = struct.Struct("<dHH")
# F3 adds the provider's response id (its length here, its bytes after the domain): one id on two tenants' answers.
_RESPONSE = struct.Struct("<H")
# F4 adds the identifiers of the prompt and of the output (ADR 0027): their byte lengths here (_NONE: unknown), their
# bytes after the output's prints.
_IDS = struct.Struct("<HH")
_NONE = 0xFFFF
# F5 adds the prompt's two counts, the gateway's and the engine's (ADR 0029); _UNCOUNTED: unknown. A prompt whose
# answer was lost sends the gateway's count alone (ADR 0031): a reader before that reads both as unknown.
_COUNTS = struct.Struct("<II")
_UNCOUNTED = 0xFFFFFFFF
_VERSION, _V4, _V3, _V2, _V1 = b"F5", b"F4", b"F3", b"F2", b"F1"


class FleetFrameError(ValueError):
    """A fleet message that is not one of ours (counted and skipped: the record only knows less)."""


def encode(digests: Iterable[Digest]) -> bytes:
    parts = [_VERSION]
    for d in digests:
        rid, key, dom, resp = d.request_id.encode(), d.key.encode(), d.domain.encode(), d.response.encode()
        sent = d.ts if d.sent is None else d.sent
        parts += [
            _HEAD.pack(d.ts, len(rid), len(key), len(d.prompt), len(d.output)),
            _WHERE.pack(sent, d.status, len(dom)),
            _RESPONSE.pack(len(resp)),
            _IDS.pack(*(_NONE if x is None else len(x) for x in (d.prompt_ids, d.output_ids))),
            _COUNTS.pack(*_counts(d)),
        ]
        parts += [rid, key, dom, resp, d.prompt, d.output, d.prompt_ids or b"", d.output_ids or b""]
    return b"".join(parts)


def _size(d: Digest) -> int:
    named = len(d.request_id.encode()) + len(d.key.encode()) + len(d.domain.encode()) + len(d.response.encode())
    ids = sum(len(x) for x in (d.prompt_ids, d.output_ids) if x is not None)
    return _HEAD.size + _WHERE.size + _RESPONSE.size + _IDS.size + _COUNTS.size + named + ids


def _counts(d: Digest) -> tuple[int, int]:
    """The two counts as the frame holds them: a count past uint32 (hostile) or unknown is _UNCOUNTED; a lost answer's
    prompt count (`asked`) rides as the gateway's, the engine's unknown."""
    c = d.counts
    if c is None or not all(0 <= x < _UNCOUNTED for x in c):
        asked = getattr(d, "asked", None)
        return (asked if asked is not None and 0 <= asked < _UNCOUNTED else _UNCOUNTED), _UNCOUNTED
    return c[0], c[1]


def split(digests: list[Digest], limit: int) -> tuple[list[bytes], int]:
    """The digests as messages of at most `limit` bytes each, and how many were too large for one message alone: those
    go without their prompt (the record then learns the answer only, which can only keep the prompt's text evidence)."""
    out: list[bytes] = []
    run: list[Digest] = []
    size, cut = 2, 0
    for d in digests:
        one = _size(d) + len(d.prompt) + len(d.output)
        if one + 2 > limit:
            d, cut = dataclasses.replace(d, prompt=b"", output=d.output[: (limit // 2) // 8 * 8]), cut + 1
            one = _size(d) + len(d.output)
        if run and size + one > limit:
            out.append(encode(run))
            run, size = [], 2
        run.append(d)
        size += one
    if run:
        out.append(encode(run))
    return out, cut


def decode(blob: bytes) -> list[Digest]:
    version = blob[:2]
    if version not in (_VERSION, _V4, _V3, _V2, _V1):
        raise FleetFrameError("not a fleet message")
    where = 0 if version == _V1 else _WHERE.size
    more = _RESPONSE.size if version in (_VERSION, _V4, _V3) else 0
    ids = _IDS.size if version in (_VERSION, _V4) else 0
    counted = _COUNTS.size if version == _VERSION else 0
    out, i, n = [], 2, len(blob)
    while i < n:
        if i + _HEAD.size + where + more + ids + counted > n:
            raise FleetFrameError("truncated fleet message")
        ts, lr, lk, lp, lo = _HEAD.unpack_from(blob, i)
        sent, status, ld = _WHERE.unpack_from(blob, i + _HEAD.size) if where else (ts, 0, 0)
        (lx,) = _RESPONSE.unpack_from(blob, i + _HEAD.size + where) if more else (0,)
        li, lj = _IDS.unpack_from(blob, i + _HEAD.size + where + more) if ids else (_NONE, _NONE)
        gc, ec = _COUNTS.unpack_from(blob, i + _HEAD.size + where + more + ids) if counted else (_UNCOUNTED,) * 2
        if not (math.isfinite(ts) and math.isfinite(sent)):  # a NaN would break the waiting digests' order for good
            raise FleetFrameError("an event time that is no number")
        i += _HEAD.size + where + more + ids + counted
        known = [0 if x == _NONE else x for x in (li, lj)]
        end = i + lr + lk + ld + lx + lp + lo + sum(known)
        if end > n or lp % 8 or lo % 8 or known[0] % 8 or known[1] % 8:
            raise FleetFrameError("truncated fleet message")
        names = []
        for length in (lr, lk, ld, lx):  # request id, key, cache domain, response id
            names.append(blob[i : i + length].decode())
            i += length
        rid, key, domain, response = names
        prompt, output = blob[i : i + lp], blob[i + lp : i + lp + lo]
        i += lp + lo
        pi = None if li == _NONE else blob[i : i + li]
        oi = None if lj == _NONE else blob[i + known[0] : end]
        counts = None if _UNCOUNTED in (gc, ec) else (gc, ec)
        asked = gc if ec == _UNCOUNTED and gc != _UNCOUNTED and not 200 <= status <= 299 else None
        out.append(
            Digest(
                ts, rid, key, prompt, output, domain, sent if where else None, status, response, pi, oi, counts, asked
            )
        )
        i = end
    return out


def listen(st: DomainState) -> None:
    """The partition's table notes what it judged for the others (`DomainTable.told`)."""
    if st.table.told is None:
        st.table.told = []


def told(st: DomainState) -> list[Digest]:
    """What the partition judged since the last call (and forgets it)."""
    out = st.table.told or []
    st.table.told = []
    return out


def deliver(origin: int, digests: list[Digest], states: Mapping[int, DomainState], counters: Counter[str]) -> None:
    """Digests told by partition `origin` to every other partition held here."""
    for p, st in states.items():
        if p == origin:
            continue
        fleet = st.table.fleet
        late = fleet.late
        for d in digests:
            fleet.push(d)
        st.table.drain_fleet()  # a mix-up a late digest completed: out with the partition's next alerts
        counters["fleet.heard"] += len(digests)
        if fleet.late > late:
            counters["fleet.late"] += fleet.late - late


def origin_of(key: bytes | None) -> int | None:
    try:
        return int(key) if key is not None else None
    except ValueError:
        return None


class FleetReader:
    """Every partition of the fleet topic, read from `replay_s` before the start, handed to `on_message`."""

    def __init__(
        self, bootstrap: str, topic: str, partitions: int, replay_s: float, on_message: Any, counters: Counter[str]
    ) -> None:
        self.bootstrap, self.topic, self.partitions, self.replay_s = bootstrap, topic, partitions, replay_s
        self.on_message = on_message
        self.counters = counters

    async def run(self) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, group_id=None)
        await consumer.start()
        try:
            # Its partition count is the one topics.py created it with (and checks on every start).
            tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
            consumer.assign(tps)
            # The end first: a message told after it is read whatever the search below finds. Seeking to the end
            # where no message is recent enough would skip one told meanwhile (a worker started with another
            # missed the other's first digests: tests/broker/test_kafka_fleet.py).
            ends = await consumer.end_offsets(tps)
            since = int((time.time() - self.replay_s) * 1000)
            offsets = await consumer.offsets_for_times(dict.fromkeys(tps, since))
            for tp in tps:
                found = offsets.get(tp)
                consumer.seek(tp, ends[tp] if found is None else min(found.offset, ends[tp]))
            while True:
                batches = await consumer.getmany(timeout_ms=500, max_records=500)
                for records in batches.values():
                    for rec in records:
                        self._one(rec.key, rec.value)
        finally:
            with contextlib.suppress(Exception):
                await consumer.stop()

    def _one(self, key: bytes | None, value: bytes | None) -> None:
        origin = origin_of(key)
        try:
            digests = decode(value or b"")
        except (FleetFrameError, UnicodeDecodeError, struct.error) as exc:
            self._malformed(f"{type(exc).__name__}: {exc}")
            return
        if origin is None:
            self._malformed(f"key {key!r} names no partition")
            return
        self.on_message(origin, digests)

    def _malformed(self, why: str) -> None:
        # Not ours, or damaged: skipped (the record only knows less), counted, and said once per hundred.
        n = self.counters["fleet.malformed"]
        self.counters["fleet.malformed"] += 1
        if n % 100 == 0:
            log.warning("fleet topic: a message skipped (%s); %d so far", why, n + 1)


class FleetTalk:
    """The worker's side (a mixin of `KafkaPipeline`, streams/kafka/app.py): tell after each batch, hear always."""

    settings: Settings
    counters: Counter[str]
    fleet_topic: Any
    _recent_hashes: int
    direct_states: dict[int, DirectState]
    domain_states: dict[int, DomainState]

    def _states(self) -> dict[int, DomainState]:
        """The partitions this worker judges: the direct topology's input partitions, or the staged domain ones."""
        if self.settings.kafka.topology == "direct":
            return dict(self.direct_states)
        return dict(self.domain_states)

    async def _tell(self, p: int, st: DomainState) -> None:
        """What partition `p` judged since its last batch, to the fleet topic (before the checkpoint that acks it,
        which flushes the producer: a restart re-judges and tells again what was not acked)."""
        digests = told(st)
        if not digests:
            return
        # Under the topic's message limit, with room for the record's own framing.
        messages, cut = split(digests, self.settings.kafka.max_message_bytes - 4096)
        for value in messages:
            await self.fleet_topic.send(key=str(p).encode(), value=value)
        self.counters["fleet.told"] += len(digests)
        if cut:
            self.counters["fleet.oversized"] += cut

    def _heard(self, origin: int, digests: list[Digest]) -> None:
        deliver(origin, digests, self._states(), self.counters)
        # Kept a while for a partition this worker takes on later (`_joined`): it would not hear them again.
        recent = self._recent()
        for d in digests:
            recent.append((origin, d))
            self._recent_hashes += d.hashes
        while recent and self._recent_hashes > self.settings.detection.fleet_pending_hashes:
            self._recent_hashes -= recent.popleft()[1].hashes

    def _recent(self) -> deque[tuple[int, Digest]]:
        got: deque[tuple[int, Digest]] | None = getattr(self, "_recent_digests", None)
        if got is None:
            got = self._recent_digests = deque[tuple[int, Digest]]()
            self._recent_hashes = 0
        return got

    def _fleet_wire(self, app: Any, topic: str) -> None:
        """The fleet topic to tell on, and its reader, run as long as the app."""
        self.fleet_topic = app.topic(topic, value_serializer="raw", key_serializer="raw")
        app.task(self._read_fleet)

    def _joined(self, p: int, st: Any) -> None:
        """A partition this worker now judges (fresh or restored): it tells from now on, and learns what the worker
        heard recently. A join partition judges nothing."""
        if not isinstance(st, DomainState):
            return
        listen(st)
        # Its record is not in its snapshot (it would be most of it, copied at every checkpoint): rebuilt here from
        # what this worker heard lately, its own earlier digests too (those it judges again are learned twice,
        # which changes nothing).
        for _, d in self._recent():
            st.table.fleet.push(d)
            self.counters["fleet.heard"] += 1

    async def _read_fleet(self) -> None:
        """The fleet topic, read for as long as the worker runs; restarted after a broker error."""
        k = self.settings.kafka
        name = topic_names(k).fleet
        parts = topic_specs(k)[name][0]
        reader = FleetReader(k.bootstrap, name, parts, k.fleet_replay_s, self._heard, self.counters)
        while True:
            try:
                await reader.run()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the record only knows less meanwhile: say so, and read again
                self.counters["fleet.reader_errors"] += 1
                log.warning("fleet topic reader: %s: %s; reading again in 2 s", type(exc).__name__, exc)
                await asyncio.sleep(2.0)
