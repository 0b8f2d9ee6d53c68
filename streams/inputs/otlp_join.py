"""Joining a GenAI span with its `gen_ai.client.inference.operation.details` log record (the receiver's /v1/logs).

An instrumentation told to keep content off the span (`event_only`) sends the span (tenant, times, status) on
/v1/traces and the content in a log record on /v1/logs, each through its own batching exporter: either may
come first (the SDK's log batches leave every second, its span batches every five). Both carry the same trace
and span ids, which are the key here, scoped by the sender (a sender cannot complete another's span).

* A record whose span is waiting completes it now; else it waits for its span.
* A span waits for its record only if it carries no content of its own and this receiver has had such records
  (a deployment that sends no logs never waits).
* A span or record whose other half does not come within `otlp.logs_wait_s` is mapped alone: a span without
  content (as before logs existed), a record as a span of no duration (it carries the model, usage and
  content; the tenant only if it is on the record or its resource).
* The older per-message records (`gen_ai.user.message`, `gen_ai.choice`…, content in the body) become the
  events of their span, where the mapping reads them; several per span, they wait together, and a
  `gen_ai.choice` completes a waiting span. Without their span in time they are dead-lettered (`no_span`).
* Each half is taken once: a record for a span already mapped (and the reverse) is counted and dropped.
* Bounded: at most `otlp.logs_join_max` halves wait on each side once a request is handled; past it the
  oldest are mapped alone at once.

Times here are the receiver's monotonic clock (how long a half has waited), never event time.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from streams.inputs.otlp_decode import OtlpDecodeError, Span, SpanReject
from streams.inputs.otlp_logs import DETAILS_EVENT, LEGACY_EVENTS, LogRecord, answer, decode_logs

if TYPE_CHECKING:
    from streams.inputs.otlp import Mapped, Sender

Key = tuple[str, str, str]  # (sender, trace id, span id)
_CONTENT = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")
_MAX_MESSAGES = 10_000  # per-message records kept for one span: a history longer than this is cut, counted


@dataclass(slots=True)
class Ready:
    """A span to map now, with the sender whose tenants it may assert."""

    span: Span | SpanReject
    sender: Sender | None


def with_events(span: Span, records: list[LogRecord]) -> Span:
    """The span with the older per-message records as its events, where the mapping reads them (their body)."""
    added = [(r.event_name, r.body if isinstance(r.body, dict) else {"content": r.body}) for r in records]
    return replace(span, events=[*span.events, *added])


def merged(span: Span, rec: LogRecord) -> Span:
    """The span with what its record adds (the content above all); where both name an attribute, the span's."""
    return replace(
        span,
        attributes={**rec.attributes, **span.attributes},
        resource={**rec.resource, **span.resource},
    )


class LogJoiner:
    """The halves waiting for each other. Not thread-safe: the receiver calls it under its mapping lock."""

    def __init__(self, wait_s: float, max_pending: int, is_inference: Callable[[Span], bool]) -> None:
        self.wait_s = wait_s
        self.max_pending = max_pending
        self.is_inference = is_inference
        self.spans: OrderedDict[Key, tuple[Span, Sender | None, float]] = OrderedDict()
        self.logs: OrderedDict[Key, tuple[LogRecord, Sender | None, float]] = OrderedDict()
        self.events: OrderedDict[Key, tuple[list[LogRecord], Sender | None, float]] = OrderedDict()  # per message
        # Keys mapped lately, and which half did it (span | log | both): a log record for a span mapped without
        # it adds nothing the events have not got, nor a span for a record mapped alone; a span sent again
        # goes on to the core, which refuses it as a duplicate (its sender hears so).
        self.done: OrderedDict[Key, str] = OrderedDict()
        self.logs_seen = False
        self.counters: Counter[str] = Counter()

    @property
    def pending(self) -> int:
        return len(self.spans) + len(self.logs) + len(self.events)

    def _key(self, sender: Sender | None, trace_id: str, span_id: str) -> Key:
        return (sender.name if sender is not None else "", trace_id, span_id)

    def _finish(self, key: Key, by: str) -> None:
        self.done[key] = by
        self.done.move_to_end(key)
        while len(self.done) > 4 * self.max_pending:
            self.done.popitem(last=False)

    def on_spans(self, spans: list[Span | SpanReject], sender: Sender | None, now: float) -> list[Span | SpanReject]:
        """The spans of a /v1/traces request to map now (merged where their record waited); content-less
        inference spans wait for theirs once records have been seen."""
        out: list[Span | SpanReject] = []
        for span in spans:
            if isinstance(span, SpanReject) or not span.trace_id or not self.is_inference(span):
                out.append(span)
                continue
            key = self._key(sender, span.trace_id, span.span_id)
            waiting = self.events.pop(key, None)
            if waiting is not None:
                span = with_events(span, waiting[0])
                self.counters["joined_events"] += 1
            if key in self.logs:
                rec, _, _ = self.logs.pop(key)
                out.append(merged(span, rec))
                self.counters["joined"] += 1
                self._finish(key, "both")
            elif waiting is not None:
                out.append(span)
                self._finish(key, "both")
            elif self.done.get(key) == "log":
                self.counters["dropped.span_after_log"] += 1
            elif not self.logs_seen or any(k in span.attributes for k in _CONTENT):
                out.append(span)
                if self.logs_seen:
                    self._finish(key, "span")
            else:
                self.spans[key] = (span, sender, now)
                self.counters["spans_waited"] += 1
        return out

    def on_logs(self, records: list[LogRecord], sender: Sender | None, now: float) -> list[Span]:
        """The spans to map now for the records of a /v1/logs request (a record completes its waiting span);
        the others wait for their span."""
        out: list[Span] = []
        for rec in records:
            if rec.event_name in LEGACY_EVENTS:
                out += self._per_message(rec, sender, now)
                continue
            if rec.event_name != DETAILS_EVENT:
                self.counters["skipped.not_inference_details"] += 1
                continue
            self.logs_seen = True
            if not rec.trace_id or not rec.span_id:
                out.append(rec.as_span())  # nothing to join it by: alone (its reject says why if it cannot map)
                continue
            key = self._key(sender, rec.trace_id, rec.span_id)
            if key in self.spans:
                span, _, _ = self.spans.pop(key)
                out.append(merged(span, rec))
                self.counters["joined"] += 1
                self._finish(key, "both")
            elif key in self.done:
                self.counters["dropped.log_after_span"] += 1
            else:
                self.logs[key] = (rec, sender, now)
                self.counters["logs_waited"] += 1
        return out

    def _per_message(self, rec: LogRecord, sender: Sender | None, now: float) -> list[Span]:
        """An older per-message record: onto its waiting span (a `gen_ai.choice`, the answer, completes it), or it
        waits with the others of its span."""
        self.logs_seen = True
        if not rec.trace_id or not rec.span_id:
            self.counters["skipped.message_event_without_span"] += 1  # nothing to join it to
            return []
        key = self._key(sender, rec.trace_id, rec.span_id)
        if key in self.spans:
            span, who, since = self.spans.pop(key)
            span = with_events(span, [rec])
            self.counters["joined_events"] += 1
            if rec.event_name == "gen_ai.choice":
                self._finish(key, "both")
                return [span]
            self.spans[key] = (span, who, since)
        elif key in self.done:
            self.counters["dropped.log_after_span"] += 1
        else:
            waiting = self.events.setdefault(key, ([], sender, now))[0]
            if len(waiting) < _MAX_MESSAGES:
                waiting.append(rec)
            else:
                self.counters["dropped.message_events_over_cap"] += 1
        return []

    def _sides(self) -> list[tuple[OrderedDict[Key, tuple[Any, Sender | None, float]], str]]:
        return [(self.spans, "span"), (self.logs, "log"), (self.events, "events")]

    def _alone(self, key: Key, half: Span | LogRecord | list[LogRecord], sender: Sender | None, why: str) -> Ready:
        self.counters[f"alone.{why}"] += 1
        if isinstance(half, list):  # per-message records alone name no tenant, model or counts: a reject, said why
            self._finish(key, "log")
            detail = f"{len(half)} per-message log events whose span did not come within {self.wait_s:g} s"
            return Ready(SpanReject("no_span", detail, key[1], key[2]), sender)
        self._finish(key, "log" if isinstance(half, LogRecord) else "span")
        return Ready(half if isinstance(half, Span) else half.as_span(), sender)

    def expired(self, now: float) -> list[Ready]:
        """Halves to map alone now, oldest first: past `logs_join_max` on a side, or after waiting `wait_s`."""
        out: list[Ready] = []
        for side, name in self._sides():
            while len(side) > self.max_pending:
                key, (half, sender, _) = side.popitem(last=False)
                out.append(self._alone(key, half, sender, f"{name}_overflow"))
            while side:
                key, (half, sender, since) = next(iter(side.items()))
                if now - since < self.wait_s:
                    break
                side.popitem(last=False)
                out.append(self._alone(key, half, sender, name))
        return out


class JoinedInput:
    """The receiver's side of the join: /v1/logs requests, the spans of /v1/traces passing through the joiner
    (SpanMapper.before_map), and the halves whose wait ran out, mapped on the receiver's mapping thread.
    `receiver` is the OtlpReceiver (its mapper, its mapping lock and `deliver`)."""

    def __init__(self, receiver: Any) -> None:
        o = receiver.settings.otlp
        self.r = receiver
        mapper = receiver.mapper
        self.max_records = o.logs_max_records
        self.max_objects = o.max_decoded_objects
        self.joiner = LogJoiner(o.logs_wait_s, o.logs_join_max, lambda sp: mapper.is_inference(sp))
        self.joiner.logs_seen = o.logs_expected  # records are on their way: a content-less span waits from the start
        mapper.before_map = lambda spans, sender: self.joiner.on_spans(spans, sender, time.monotonic())

    def handle_logs(self, body: bytes | bytearray, content_type: str, sender: Sender | None) -> Mapped:
        """One /v1/logs request: its records joined or waiting, what is ready mapped and handed on."""
        from streams.inputs.otlp import Mapped

        encoding = "otlp_json" if "json" in content_type else "otlp_proto"
        with self.r._lock:
            try:
                records = decode_logs(body, encoding, self.max_records, self.max_objects)
            except OtlpDecodeError as exc:
                whole = SpanReject(exc.reason, exc.detail)
                return self.r.deliver(Mapped(rejects=[whole], payload_error=whole), sender, "logs")
            ready = self.joiner.on_logs([r for r in records if isinstance(r, LogRecord)], sender, time.monotonic())
            out = self.r.mapper.map_spans(ready, sender)
            out.rejects[:0] = [r for r in records if isinstance(r, SpanReject)]
            out = self.r.deliver(out, sender, "logs")
            self.flush_locked()
        return out

    def flush_locked(self, now: float | None = None) -> None:
        """Map the halves that waited long enough, all of them with `now` = inf (the caller holds the lock)."""
        for ready in self.joiner.expired(time.monotonic() if now is None else now):
            self.r.deliver(self.r.mapper.map_spans([ready.span], ready.sender), ready.sender, "joined")

    def flush(self) -> None:
        with self.r._lock:
            self.flush_locked()

    def flush_all(self) -> None:
        """At shutdown: every half still waiting for its other is mapped alone now; none is dropped."""
        with self.r._lock:
            self.flush_locked(float("inf"))

    async def tick(self) -> None:
        """Every fraction of the wait: halves whose wait ran out are mapped even if no request comes."""
        loop = asyncio.get_running_loop()
        step = max(0.05, min(1.0, self.joiner.wait_s / 4))
        while True:
            await asyncio.sleep(step)
            if self.joiner.pending:
                await loop.run_in_executor(self.r._pool, self.flush)


def logs_response(out: Mapped, ctype: str) -> Any:
    """The answer to a /v1/logs request: 400 (413 for too many records) when the payload is not an OTLP log
    export, else an ExportLogsServiceResponse whose partial_success counts the records not taken now."""
    from aiohttp import web

    if out.payload_error is not None:
        whole = out.payload_error
        status = 413 if whole.reason in ("too_many_records", "too_many_objects") else 400
        return web.Response(status=status, text=f"{whole.reason}: {whole.detail}")
    message = "; ".join(sorted({f"{r.reason}: {r.detail}" for r in out.rejects + out.refused}))[:1000]
    body, content_type = answer(out.rejected_spans, message, "json" in ctype)
    return web.Response(body=body, content_type=content_type)
