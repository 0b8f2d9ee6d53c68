"""An input message and its intake, one for both Kafka topologies: its events validated once (size, schema,
wall-clock bound), each handed to the topology's step, what fails dead-lettered with its reason, what is kept counted;
and what the worker reads of a message besides its value (its headers, how a fetched batch is sliced)."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from detectors.pipeline import FUTURE_TS, EventClock, weak_canaries
from schemas.events import NDJSON_CONTENT_TYPE, Event, EventError, dropped_canaries, parse_event
from streams.kafka.frames import INPUT, Source
from streams.kafka.stages import DeadLetter
from streams.routing import PLACED

log = logging.getLogger("crosstalk.intake")
_INGESTED = {t: f"ingest.{t}" for t in ("request", "response", "cache_stats", "canary")}
T = TypeVar("T")

# The direct stage reads a fetched batch in slices of about this many bytes of input, sending each slice's alerts before
# reading the next: a fetch of 500 text-rich events took ~0.3 s to read, and the first event's alert waited for all
# of it (the text-rich p99 at the edge of the sustained rate). Bytes stand for the time a slice takes: text costs
# by its size, and batched text-free messages are many events each.
SLICE_BYTES = 256 << 10


def slices(ms: list[Any], limit: int) -> list[list[Any]]:
    """`ms` in order, cut into runs of at most `limit` bytes of value (a longer message is a run of its own)."""
    runs: list[list[Any]] = []
    run: list[Any] = []
    size = 0
    for m in ms:
        n = len(m.value or b"")
        if run and size + n > limit:
            runs.append(run)
            run, size = [], 0
        run.append(m)
        size += n
    if run:
        runs.append(run)
    return runs


@dataclass(slots=True)
class InputMessage:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    ndjson: bool  # content-type application/x-ndjson: one event per line
    placed: bool = False  # placed on its domain's partition by a crosstalk producer or worker (direct.PLACED header)


def message_lines(msg: InputMessage) -> Iterator[tuple[int | None, bytes]]:
    """The events of one (non-empty) input message: (line number, line) of each non-blank NDJSON line, or
    (None, value) for a message of one event."""
    assert msg.value is not None
    if not msg.ndjson:
        yield None, msg.value
        return
    for line_no, line in enumerate(msg.value.split(b"\n"), start=1):
        if line.strip():
            yield line_no, line


def parse_bounded(line: bytes, max_bytes: int, clock: EventClock, wall: float) -> Event:
    """Validate one event and bound its time by the wall clock: an event far ahead of it would drag every
    watermark (and, in the direct stage, every join and window expiry) with it, so it is rejected
    (EventError `future_ts`) before it can move anything (detectors/ordering.py). Admitting the time to
    `clock` is the caller's, once the event was used."""
    event = parse_event(line, max_bytes=max_bytes)
    future = clock.check(event.ts, wall)
    if future is not None:
        raise EventError(FUTURE_TS, future)
    return event


def dropped_warning(
    event: Event, source: Source, offset: int, line: int | None, key: bytes | None, counters: Counter[str]
) -> DeadLetter | None:
    """The dead-letter warning of an event kept without the canary markers that are not markers, or None.
    Its payload identifies the event (not its text: the event itself went on, fingerprinted)."""
    detail = weak_canaries(event, counters)
    if detail is None:
        return None
    ids = {"event_id": event.event_id, "type": event.type, "dropped": len(dropped_canaries(event))}
    return DeadLetter(orjson.dumps(ids), "weak_canary", detail, source, offset, line, key, severity="warning")


def reason_of(exc: Exception, otherwise: str = "invalid") -> tuple[str, str]:
    """The dead-letter reason and detail of an exception: an EventError's own, else `otherwise`."""
    if isinstance(exc, EventError):
        return exc.reason, exc.detail
    return otherwise, f"{type(exc).__name__}: {exc}"


def intake(
    messages: list[InputMessage],
    begin: Callable[[InputMessage], EventClock | None],
    wall: float,
    max_bytes: int,
    counters: Counter[str],
    dead: list[DeadLetter],
    step: Callable[[InputMessage, Event, bytes, int | None], T | None],
) -> Iterator[tuple[InputMessage, Event, T]]:
    """The events of input messages that the topology's `step` took, each with its message and what `step` made.

    `begin(msg)` is the stage's bookkeeping of a message: the event clock of its partition, or None to pass over it (a
    replay of what the state covers). Each line is validated and bounded by the wall clock `wall` (`parse_bounded`),
    then handed to `step`; its time is admitted to the clock once `step` used it. `step` returns None for an event it
    sent elsewhere (the direct stage's re-route): neither counted nor timed here. What fails, in validation or in
    `step`, is dead-lettered with its reason (an EventError's own, else `internal_error`, logged: a bug must not stop
    the worker); a kept event is counted (`ingest.<type>`) and warned of when markers were dropped from it
    (`weak_canary`). One generator for the whole batch: this is the per-event path of both Kafka topologies."""
    for msg in messages:
        clock = begin(msg)
        if clock is None:
            continue
        source = Source(INPUT, msg.partition)
        if msg.value is None:
            dead.append(DeadLetter(b"", "invalid", "empty message (tombstone)", source, msg.offset, key=msg.key))
            continue
        for line_no, line in message_lines(msg):
            try:
                event = parse_bounded(line, max_bytes, clock, wall)
                made = step(msg, event, line, line_no)
                if made is None:
                    continue
                ts = event.ts
                if ts > clock.high_water:  # bounded already (`parse_bounded`): admitting is raising the mark
                    clock.high_water = ts
            except Exception as exc:
                if not isinstance(exc, (EventError, ValueError)):  # a bug, not bad input
                    log.exception("intake: partition %s offset %s failed", msg.partition, msg.offset)
                reason, detail = reason_of(exc, "internal_error")
                dead.append(DeadLetter(line, reason, detail, source, msg.offset, line_no, msg.key))
                continue
            counters[_INGESTED[event.type]] += 1
            if dropped_canaries(event):  # markers that are not markers, dropped at validation: nearly never
                warning = dropped_warning(event, source, msg.offset, line_no, msg.key, counters)
                if warning is not None:
                    dead.append(warning)
            yield msg, event, made


def is_placed(headers: Any) -> bool:
    if not headers:
        return False
    items = headers.items() if isinstance(headers, dict) else headers
    return any(k == PLACED for k, _ in items)


def is_ndjson(headers: Any) -> bool:
    if not headers:
        return False
    items = headers.items() if isinstance(headers, dict) else headers
    return any(k.lower() == "content-type" and bytes(v).split(b";")[0].strip() == NDJSON_CONTENT_TYPE for k, v in items)
