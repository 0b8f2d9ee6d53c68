"""Reading events from files: JSON Lines (optionally .gz) or stdin, with a rejects file for bad lines.

Bad lines never stop a run: each goes to the rejects file with its source, line number, reason and
the original bytes, and is counted.
"""

from __future__ import annotations

import gzip
import heapq
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import orjson

from schemas.events import Event, EventError, parse_event

_RAW_KEEP = 64 * 1024  # of an oversized line, the head is kept as evidence; the rest is not stored twice


def open_binary(path: str) -> BinaryIO:
    if path == "-":
        return sys.stdin.buffer
    raw = Path(path).open("rb")  # noqa: SIM115 - the caller closes what it is handed
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def input_size(paths: Iterable[str]) -> int | None:
    """Total bytes on disk (for a progress bar); None when stdin is among them."""
    total = 0
    for p in paths:
        if p == "-":
            return None
        total += Path(p).stat().st_size
    return total


@dataclass
class Rejects:
    """The dead-letter file of the embedded runner."""

    out: BinaryIO | None
    listener: Callable[[str, str], None] | None = None  # e.g. metrics: told (reason, detail) of each reject
    counts: Counter[str] = field(default_factory=Counter)

    def add(self, source: str, line: int | None, reason: str, detail: str, raw: bytes) -> None:
        self.counts[reason] += 1
        if self.listener is not None:
            self.listener(reason, detail)
        if self.out is None:
            return
        record = {
            "source": source,
            "line": line,
            "reason": reason,
            "detail": detail,
            "raw": raw[:_RAW_KEEP].decode("utf-8", errors="replace"),
            "raw_truncated": len(raw) > _RAW_KEEP,
        }
        self.out.write(orjson.dumps(record) + b"\n")

    def close(self) -> None:
        if self.out is not None:
            self.out.flush()


@dataclass(order=True, slots=True)
class Parsed:
    ts: float
    seq: int
    source: str = field(compare=False)
    line: int = field(compare=False)
    event: Event = field(compare=False)
    raw_len: int = field(compare=False)


# A decoder for another line format (e.g. streams.inputs.otlp.otlp_json_decoder): one line -> any number of
# validated events, and (reason, detail, evidence bytes) for what could not be decoded.
LineDecoder = Callable[[bytes], Iterable["Event | tuple[str, str, bytes]"]]


class LineReader:
    """Validated events of one file, in file order; bad lines go to `rejects`."""

    def __init__(
        self, path: str, rejects: Rejects, max_bytes: int, progress: Counter[str], decode: LineDecoder | None = None
    ) -> None:
        self.path = path
        self.rejects = rejects
        self.max_bytes = max_bytes
        self.progress = progress
        self.decode = decode

    def __iter__(self) -> Iterator[Parsed]:
        src = "<stdin>" if self.path == "-" else self.path
        with open_binary(self.path) as fh:
            for lineno, raw in enumerate(fh, start=1):
                self.progress["bytes"] += len(raw)
                line = raw.strip()
                if not line:
                    continue
                if self.decode is not None:
                    for item in self.decode(line):
                        if isinstance(item, tuple):
                            self.rejects.add(src, lineno, *item)
                        else:
                            yield Parsed(item.ts, 0, src, lineno, item, len(raw))
                    continue
                try:
                    ev = parse_event(line, max_bytes=self.max_bytes)
                except EventError as exc:
                    self.rejects.add(src, lineno, exc.reason, exc.detail, line)
                    continue
                yield Parsed(ev.ts, 0, src, lineno, ev, len(raw))


def in_event_time_order(readers: list[LineReader], lateness_s: float, counters: Counter[str]) -> Iterator[Parsed]:
    """Merge files by event time and re-sort stragglers within `lateness_s`.

    Each file is assumed nearly sorted (as logs are); an event later than the allowed lateness is
    still processed, at once, and counted as `late` rather than dropped.
    """
    seq = 0

    def numbered(reader: LineReader) -> Iterator[Parsed]:
        nonlocal seq
        for p in reader:
            seq += 1
            p.seq = seq
            yield p

    buffer: list[Parsed] = []
    horizon = float("-inf")
    for p in heapq.merge(*(numbered(r) for r in readers)):
        if p.ts < horizon:
            counters["late"] += 1
            yield p
            continue
        heapq.heappush(buffer, p)
        horizon = max(horizon, p.ts - lateness_s)
        while buffer and buffer[0].ts <= horizon:
            yield heapq.heappop(buffer)
    while buffer:
        yield heapq.heappop(buffer)
