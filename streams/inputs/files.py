"""Reading events from files: JSON Lines (optionally .gz) or stdin, with a rejects file for bad lines.

Bad lines never stop a run: each goes to the rejects file with its source, line number, reason and
the original bytes, and is counted.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import uuid
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from detectors.ordering import FUTURE_TS, EventClock, JumpGuard
from schemas.events import Event, EventError, parse_event
from streams.io import bounded_lines, open_binary
from streams.sinks.base import ByteOut

_RAW_KEEP = 64 * 1024  # of an oversized line, the head is kept as evidence; the rest is not stored twice


class InputError(Exception):
    """An input that cannot be read at all (missing, a directory, not gzip): the CLI's exit code 3."""


def check_inputs(paths: Iterable[str]) -> None:
    """Fail fast, before any output is written, on inputs that cannot be read; raise InputError."""
    for path in paths:
        if path == "-":
            continue
        p = Path(path)
        if not p.exists():
            raise InputError(f"{path}: no such file")
        if p.is_dir():
            raise InputError(f"{path}: is a directory")
        if not p.is_file():
            # A pipe (`<(zcat …)`) or a device: peeking at its head would consume it (a buffered read takes
            # up to 8 KiB), and the run would read what is left. Its errors come when it is read.
            continue
        try:
            with p.open("rb") as fh:
                head = fh.read(2)
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if path.endswith(".gz") and head != b"\x1f\x8b":
            raise InputError(f"{path}: not a gzip file (the name ends in .gz)")


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
    """The dead-letter file of the embedded runner: one JSON line per rejected input line.

    Each record names the run (`run_id`: runs appending to one file stay apart), the source, line,
    reason and detail, and the original bytes: as text in `raw` when they are UTF-8, else exactly,
    base64-encoded, in `raw_b64` (with `raw` null). Of an oversized line only the head is kept."""

    out: ByteOut | None
    listener: Callable[[str, str], None] | None = None  # e.g. metrics: told (reason, detail) of each reject
    counts: Counter[str] = field(default_factory=Counter)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    warnings: Counter[str] = field(default_factory=Counter)  # kept lines with a part dropped, by reason

    def warn(self, source: str, line: int | None, reason: str, detail: str, event_id: str) -> None:
        """A line that was *kept* with a part of it dropped (e.g. a weak canary marker): one record with
        `"severity": "warning"`, the reason and the event id, but not the line (it was processed, and
        its text is fingerprinted and discarded like any other)."""
        self.warnings[reason] += 1
        if self.out is None:
            return
        record = {"run_id": self.run_id, "source": source, "line": line, "severity": "warning", "kept": True}
        record |= {"reason": reason, "detail": detail, "event_id": event_id}
        self.out.write(orjson.dumps(record) + b"\n")

    def add(
        self, source: str, line: int | None, reason: str, detail: str, raw: bytes, *, withhold: bool = False
    ) -> None:
        """`withhold`: the line may hold text that must not be stored (an OTLP line: message content); the
        record keeps its size and a SHA-256 of the bytes read (`raw` null, `raw_withheld` true) instead."""
        self.counts[reason] += 1
        if self.listener is not None:
            self.listener(reason, detail)
        if self.out is None:
            return
        head = raw[:_RAW_KEEP]
        record: dict[str, object] = {"run_id": self.run_id, "source": source, "line": line}
        record |= {"reason": reason, "detail": detail}
        if withhold:
            record |= {"raw": None, "raw_withheld": True, "raw_bytes_read": len(raw)}
            record["raw_sha256"] = hashlib.sha256(raw).hexdigest()
            self.out.write(orjson.dumps(record) + b"\n")
            return
        try:
            record["raw"] = head.decode("utf-8")
        except UnicodeDecodeError:
            record["raw"] = None
            record["raw_b64"] = base64.b64encode(head).decode("ascii")
        record["raw_truncated"] = len(raw) > _RAW_KEEP
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


# A decoder for another line format (e.g. streams.inputs.otlp.otlp_json_decoder): one line -> any number of
# validated events, and (reason, detail, evidence bytes) for what could not be decoded.
LineDecoder = Callable[[bytes], Iterable["Event | tuple[str, str, bytes]"]]


class StopFlag:
    """Shared by the readers of one run: set on Ctrl-C, after which every reader ends at its next line
    (as if its file ended there), so the re-sorting buffers drain and nothing read is lost."""

    def __init__(self) -> None:
        self.is_set = False

    def set(self) -> None:
        self.is_set = True


class LineReader:
    """Validated events of one file, in file order; bad lines go to `rejects`.

    Event time is bounded on the way in (detectors/ordering.py): a line stamped more than
    `max_skew_s` past the wall clock `now`, or a lone line far ahead of the rest of its file, is
    rejected as `future_ts` before it can move any clock. A file that ends early (truncated or
    corrupt gzip, a read error) stops this reader cleanly: what was read stays read, the error is a
    reject with reason `input_error` and is kept in `errors`."""

    def __init__(
        self,
        path: str,
        rejects: Rejects,
        max_bytes: int,
        progress: Counter[str],
        decode: LineDecoder | None = None,
        *,
        max_skew_s: float | None = None,
        now: float | None = None,
        stop: StopFlag | None = None,
        parse: Callable[[bytes], Event] | None = None,
    ) -> None:
        self.path = path
        # One line -> its validated event, or EventError (a job of a split replay validates other jobs' lines
        # without their text: streams/embedded/jobs.py).
        self.parse = parse
        self.rejects = rejects
        self.max_bytes = max_bytes
        self.progress = progress
        self.decode = decode
        self.max_skew_s = max_skew_s
        self.now = now
        self.stop = stop if stop is not None else StopFlag()
        self.errors: list[str] = []
        self.lines = 0  # non-blank lines read: each one ends up processed or rejected

    def __iter__(self) -> Iterator[Parsed]:
        src = "<stdin>" if self.path == "-" else self.path
        if self.max_skew_s is None:
            for p, _raw in self._parsed(src):
                yield p
            return
        clock = EventClock(self.max_skew_s)
        guard: JumpGuard[tuple[Parsed, bytes]] = JumpGuard(self.max_skew_s)
        for p, raw in self._parsed(src):
            detail = clock.admit(p.ts, self.now)
            released = guard.push(p.ts, (p, raw)) if detail is None else []
            if detail is not None:
                self.rejects.add(src, p.line, FUTURE_TS, detail, raw)
            for (q, qraw), why in released:
                if why is None:
                    yield q
                else:
                    self.rejects.add(src, q.line, FUTURE_TS, why, qraw)
        for (q, _qraw), _why in guard.end():
            yield q

    def _parsed(self, src: str) -> Iterator[tuple[Parsed, bytes]]:
        lineno = 0
        stop = self.stop
        try:
            with open_binary(self.path) as fh:
                for raw, size in bounded_lines(fh, self.max_bytes):
                    if stop.is_set:
                        return
                    lineno += 1
                    self.progress["bytes"] += size
                    line = raw.strip()
                    if not line:
                        continue
                    self.lines += 1
                    if size > self.max_bytes:
                        # an OTLP line carries message text: of it, only its size and a hash are kept
                        detail = f"{size} bytes > limit {self.max_bytes}"
                        self.rejects.add(src, lineno, "oversized", detail, line, withhold=self.decode is not None)
                        continue
                    if self.decode is not None:
                        for item in self.decode(line):
                            if isinstance(item, tuple):
                                self.rejects.add(src, lineno, *item)
                            else:
                                yield Parsed(item.ts, 0, src, lineno, item), line
                        continue
                    try:
                        ev = parse_event(line, max_bytes=self.max_bytes) if self.parse is None else self.parse(line)
                    except EventError as exc:
                        self.rejects.add(src, lineno, exc.reason, exc.detail, line)
                        continue
                    yield Parsed(ev.ts, 0, src, lineno, ev), line
        except KeyboardInterrupt:  # most often lands here, in a blocking read: end this input cleanly
            stop.set()
        except (EOFError, OSError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
            msg = f"{src}: input ended early after line {lineno} ({type(exc).__name__}: {exc})"
            self.errors.append(msg)
            self.rejects.add(src, lineno + 1, "input_error", msg, b"")


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
