"""The framing of the workers' internal topics: many items per Kafka message.

One Kafka message per event costs a Faust stream step and a producer send at every stage, tens of
microseconds each, far more than the detectors spend on a text-free event (bench/bench_kafka.py).
So the stages exchange batches: one message carries every item one stage produced for one
partition of the next, plus the sending join partition's watermark.

Every item keeps the position of the message it came from (source, offset, seq), so a consumer
drops replayed items one by one however a restarted upstream cuts its batches.

Layout: an orjson header line, then the payloads back to back (their lengths are in the header):

    {"v":1,"items":[[src,offset,seq,kind,length(,[ts,rank,id,cache_domain])],...],"wm":[join_partition,watermark]|null,
     "marks":{"i<partition>":newest_event_time,...}|null,"idle":["i<partition>",...]|null}\\n<payloads>

Payloads stay opaque bytes (raw event JSON, an Exchange's JSON): no escaping, no second parse.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

VERSION = 1


class FrameError(ValueError):
    """An internal message that is not a batch of this version (a bug or a foreign producer)."""


@dataclass(slots=True)
class Item:
    src: str  # "i<partition>" of the input topic or "j<partition>" of the join topic
    offset: int  # of the source message
    seq: int  # n-th output caused by that message
    kind: str  # event | canary | exchange | stats
    payload: bytes
    # join -> domain: the item's order key (event time, kind rank, id) and its cache domain, so that
    # the domain stage can order and hold it as bytes, validating it once when it is released
    meta: tuple[float, int, str, str] | None = None

    @property
    def pos(self) -> tuple[int, int]:
        return (self.offset, self.seq)


@dataclass(slots=True)
class Batch:
    items: list[Item]
    wm: tuple[int, float] | None = None  # join -> domain: (join partition, its watermark)
    # ingest -> join: the newest event time read so far from each input partition ("i<partition>")
    marks: dict[str, float] | None = None
    idle: list[str] | None = None  # ... and which of those input partitions have gone quiet


def split(items: list[Item], max_bytes: int) -> list[list[Item]]:
    """Consecutive runs of items whose payloads fit one message (an item larger than that goes alone)."""
    runs: list[list[Item]] = [[]]
    size = 0
    for it in items:
        n = len(it.payload) + 64  # + its header entry, generously
        if runs[-1] and size + n > max_bytes:
            runs.append([])
            size = 0
        runs[-1].append(it)
        size += n
    return runs


def encode(batch: Batch) -> bytes:
    header = orjson.dumps(
        {
            "v": VERSION,
            "items": [
                [it.src, it.offset, it.seq, it.kind, len(it.payload), *([list(it.meta)] if it.meta else [])]
                for it in batch.items
            ],
            "wm": list(batch.wm) if batch.wm is not None else None,
            "marks": batch.marks,
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
        view = memoryview(body)
        for entry in h["items"]:
            src, offset, seq, kind, length = entry[:5]
            m = entry[5] if len(entry) > 5 else None
            meta = (float(m[0]), int(m[1]), str(m[2]), str(m[3])) if m is not None else None
            items.append(Item(src, int(offset), int(seq), kind, bytes(view[at : at + length]), meta))
            at += length
        if at != len(body):
            raise FrameError(f"payload lengths add up to {at}, body has {len(body)} bytes")
        wm = h.get("wm")
        marks = h.get("marks")
        idle = h.get("idle")
        return Batch(
            items,
            (int(wm[0]), float(wm[1])) if wm is not None else None,
            {str(k): float(v) for k, v in marks.items()} if marks is not None else None,
            [str(x) for x in idle] if idle is not None else None,
        )
    except FrameError:
        raise
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise FrameError(f"malformed batch: {type(exc).__name__}: {exc}") from exc
