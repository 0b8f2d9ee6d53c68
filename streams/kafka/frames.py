"""The framing of the workers' internal topics: many items per Kafka message.

One Kafka message per event costs a Faust stream step and a producer send at every stage, tens of
microseconds each, far more than the detectors spend on a text-free event (bench/bench_kafka.py).
So the stages exchange batches: one message carries every item one stage produced for one
partition of the next, plus the event-time progress of the sender.

Every item keeps the position of the message it came from (source partition, offset, seq), so a
consumer drops replayed items one by one however a restarted upstream cuts its batches.

Layout: an orjson header line, then the payloads back to back (their lengths are in the header):

    {"v":2,"items":[[topic,partition,offset,seq,kind,length(,[ts,rank,id],cache_domain)],...],
     "wm":[join_partition,watermark]|null,"marks":{"<input partition>":newest_event_time,...}|null,
     "idle":[<input partition>,...]|null}\\n<payloads>

Payloads stay opaque bytes (records of streams/kafka/records.py): no escaping, no second parse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from detectors.pipeline import OrderKey

VERSION = 2
INPUT = "input"  # Source.topic of an item caused by an input-topic message
JOIN = "join"  # ... by a join-topic message


class FrameError(ValueError):
    """An internal message that is not a batch of this version (a bug or a foreign producer)."""


class Source(NamedTuple):
    """The topic partition whose message caused an item: replays are recognised per source."""

    topic: str  # INPUT | JOIN
    partition: int


@dataclass(slots=True)
class Item:
    source: Source
    offset: int  # of the source message
    seq: int  # n-th output caused by that message
    kind: str  # event | canary | exchange | stats
    payload: bytes
    # join -> domain: the item's order key and cache domain, so that the domain stage can order and
    # hold it as bytes, decoding it once when it is released
    order: OrderKey | None = None
    cache_domain: str | None = None

    @property
    def pos(self) -> tuple[int, int]:
        return (self.offset, self.seq)


@dataclass(slots=True)
class Batch:
    items: list[Item]
    wm: tuple[int, float] | None = None  # join -> domain: (join partition, its watermark)
    # ingest -> join: the newest event time read so far from each input partition
    marks: dict[int, float] | None = None
    idle: list[int] | None = None  # ... and which of those input partitions have gone quiet


def split(items: list[Item], max_bytes: int) -> list[list[Item]]:
    """Consecutive runs of items whose payloads fit one message (an item larger than that goes alone)."""
    runs: list[list[Item]] = [[]]
    size = 0
    for it in items:
        n = len(it.payload) + 80  # + its header entry, generously
        if runs[-1] and size + n > max_bytes:
            runs.append([])
            size = 0
        runs[-1].append(it)
        size += n
    return runs


def _entry(it: Item) -> list[object]:
    head: list[object] = [it.source.topic, it.source.partition, it.offset, it.seq, it.kind, len(it.payload)]
    if it.order is not None:
        head += [list(it.order), it.cache_domain]
    return head


def _finite(x: float) -> float | None:
    return x if x != float("-inf") else None


def _time(x: Any) -> float:
    return float(x) if x is not None else float("-inf")


def encode(batch: Batch) -> bytes:
    header = orjson.dumps(
        {
            "v": VERSION,
            "items": [_entry(it) for it in batch.items],
            # -inf (a join partition with no promise yet) as null: JSON has no infinities.
            "wm": [batch.wm[0], _finite(batch.wm[1])] if batch.wm is not None else None,
            "marks": {str(k): _finite(v) for k, v in batch.marks.items()} if batch.marks is not None else None,
            "idle": batch.idle,
        }
    )
    return b"\n".join((header, b"".join(it.payload for it in batch.items)))


def decode(value: bytes) -> Batch:
    head, sep, body = value.partition(b"\n")
    if not sep:
        raise FrameError("no header line")
    try:
        h = orjson.loads(head)
        if h.get("v") != VERSION:
            raise FrameError(f"batch version {h.get('v')!r} != {VERSION}")
        items: list[Item] = []
        at = 0
        sources: dict[tuple[str, int], Source] = {}  # one Source per partition, not one per item
        for entry in h["items"]:
            topic, partition, offset, seq, kind, length = entry[:6]
            source = sources.get((topic, partition))
            if source is None:
                if topic not in (INPUT, JOIN) or type(partition) is not int:
                    raise FrameError(f"unknown source {topic!r}:{partition!r}")
                source = sources[(topic, partition)] = Source(topic, partition)
            if type(offset) is not int or type(seq) is not int:
                raise FrameError(f"position {offset!r}:{seq!r} is not two integers")
            order = cache_domain = None
            if len(entry) > 6:
                ts, rank, ident = entry[6]
                order = OrderKey(float(ts), int(rank), str(ident))
                cache_domain = str(entry[7])
            end = at + length
            items.append(Item(source, offset, seq, kind, body[at:end], order, cache_domain))
            at = end
        if at != len(body):
            raise FrameError(f"payload lengths add up to {at}, body has {len(body)} bytes")
        wm = h.get("wm")
        marks = h.get("marks")
        idle = h.get("idle")
        return Batch(
            items,
            (int(wm[0]), _time(wm[1])) if wm is not None else None,
            {int(k): _time(v) for k, v in marks.items()} if marks is not None else None,
            [int(x) for x in idle] if idle is not None else None,
        )
    except FrameError:
        raise
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise FrameError(f"malformed batch: {type(exc).__name__}: {exc}") from None
