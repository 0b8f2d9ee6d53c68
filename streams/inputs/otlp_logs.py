"""OTLP log records -> the GenAI inference event `gen_ai.client.inference.operation.details` (pure decoding).

GenAI instrumentations put message content in this event when asked to keep it off the span
(`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only`, openai-v2 with opentelemetry-util-genai);
the receiver takes them on `POST /v1/logs` (streams.inputs.otlp_join joins each to its span). The event's
attributes are the span's GenAI attributes plus the content (`gen_ai.input.messages`, `gen_ai.output.messages`,
`gen_ai.system_instructions`), and its trace and span ids are those of the span it belongs to
(open-telemetry/semantic-conventions-genai docs/gen-ai/gen-ai-events.md at 002c8a6).

A record that cannot be read becomes a SpanReject (ids only, never a value: a record holds message text).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from streams.inputs.otlp_decode import (
    OtlpDecodeError,
    Span,
    SpanDecodeError,
    SpanReject,
    _json_any,
    _json_attrs,
    _json_id,
    _nanos,
    _pb_any,
    _pb_attrs,
    parse_proto,
)
from streams.inputs.otlp_limits import BadWire, DecodeLimits, TooMuch, check_json_size, check_proto

DETAILS_EVENT = "gen_ai.client.inference.operation.details"
# The older per-message events (semconv 1.30 and before; openai-v2's default mode with
# OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true): one record per message, the content in its body.
LEGACY_EVENTS = frozenset(
    {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message", "gen_ai.choice"}
)


@dataclass(slots=True)
class LogRecord:
    """The parts of one OTLP log record the mapping reads."""

    trace_id: str
    span_id: str
    event_name: str
    time_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    body: Any = None  # the older per-message events carry their content here

    def as_span(self) -> Span:
        """The record alone, as a span of no duration at its time (no span arrived to join it)."""
        return Span(
            self.trace_id, self.span_id, self.event_name, self.time_ns, self.time_ns, self.attributes, self.resource
        )


def _event_name(name: Any, attributes: dict[str, Any]) -> str:
    # LogRecord.event_name (proto 1.5+); before it, the `event.name` attribute.
    return str(name or attributes.get("event.name") or "")[:256]


def _json_record(rec: Any, resource: dict[str, Any]) -> LogRecord:
    if not isinstance(rec, dict):
        raise SpanDecodeError("bad_log", "a log record that is not an object")
    attrs = _json_attrs(rec.get("attributes") or [])
    when = _nanos(rec.get("timeUnixNano"), "timeUnixNano") or _nanos(rec.get("observedTimeUnixNano"), "observed")
    return LogRecord(
        _json_id(rec.get("traceId")),
        _json_id(rec.get("spanId")),
        _event_name(rec.get("eventName"), attrs),
        when,
        attrs,
        resource,
        _json_any(rec.get("body")),
    )


def _reject(exc: BaseException, rec: Any) -> SpanReject:
    ids = ("", "")
    if isinstance(rec, dict):
        with contextlib.suppress(Exception):  # an id of a type str() cannot take: the reject goes without it
            ids = (_json_id(rec.get("traceId")), _json_id(rec.get("spanId")))
    if isinstance(exc, SpanDecodeError):
        return SpanReject(exc.reason, exc.detail, *ids)
    return SpanReject("bad_log", f"{type(exc).__name__} while decoding the log record", *ids)


_ERRORS = (SpanDecodeError, TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError)


def logs_from_json(obj: Any) -> Iterator[LogRecord | SpanReject]:
    """Records of an ExportLogsServiceRequest in OTLP/JSON."""
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceLogs"), list):
        raise OtlpDecodeError("not_otlp", "no resourceLogs list")
    for rl in obj["resourceLogs"]:
        if not isinstance(rl, dict) or not isinstance(rl.get("scopeLogs") or [], list):
            raise OtlpDecodeError("not_otlp", "a resourceLogs entry without a scopeLogs list")
        res = rl.get("resource") or {}
        try:
            resource = _json_attrs(res.get("attributes") or [] if isinstance(res, dict) else [])
        except _ERRORS as exc:
            yield SpanReject("bad_log", f"the resource cannot be read ({type(exc).__name__})")
            continue
        for sl in rl.get("scopeLogs") or []:
            records = sl.get("logRecords") if isinstance(sl, dict) else None
            if not isinstance(records or [], list):
                raise OtlpDecodeError("not_otlp", "a scopeLogs entry without a logRecords list")
            for rec in records or []:
                try:
                    yield _json_record(rec, resource)
                except _ERRORS as exc:
                    yield _reject(exc, rec)


def logs_from_proto(data: bytes | bytearray) -> Iterator[LogRecord | SpanReject]:
    """Records of a protobuf-encoded ExportLogsServiceRequest."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    req = ExportLogsServiceRequest()
    parse_proto(req, data)
    for rl in req.resource_logs:
        resource = _pb_attrs(rl.resource.attributes)
        for sl in rl.scope_logs:
            for rec in sl.log_records:
                attrs = _pb_attrs(rec.attributes)
                yield LogRecord(
                    rec.trace_id.hex(),
                    rec.span_id.hex(),
                    _event_name(getattr(rec, "event_name", ""), attrs),
                    rec.time_unix_nano or rec.observed_time_unix_nano,
                    attrs,
                    resource,
                    _pb_any(rec.body) if rec.HasField("body") else None,
                )


def decode_logs(
    data: bytes | bytearray, encoding: str, max_records: int, max_objects: int | None = None
) -> list[LogRecord | SpanReject]:
    """encoding: otlp_proto | otlp_json. More than `max_records` records, or with `max_objects` a payload that
    would decode to more messages or JSON values (otlp.max_decoded_objects), is refused whole, the latter
    before anything is built (streams.inputs.otlp_limits)."""
    if max_objects is not None:
        limits = DecodeLimits(max_records, max_objects)
        try:
            if encoding == "otlp_json":
                check_json_size(data, limits)
            elif len(data) > 2 * min(max_records, max_objects):  # every message costs at least 2 bytes
                check_proto(data, limits, root="logs_request")
        except TooMuch as exc:
            raise OtlpDecodeError(exc.reason, exc.detail) from None
        except BadWire:
            raise OtlpDecodeError("not_otlp", "protobuf: DecodeError") from None
    if encoding == "otlp_json":
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise OtlpDecodeError("not_json", str(exc)[:200]) from None
        records = logs_from_json(obj)
    else:
        records = logs_from_proto(data)
    out: list[LogRecord | SpanReject] = []
    for rec in records:
        out.append(rec)
        if len(out) > max_records:
            raise OtlpDecodeError("too_many_records", f"more than {max_records} log records in one request")
    return out


def answer(rejected: int, message: str, json: bool) -> tuple[bytes, str]:
    """An ExportLogsServiceResponse (body, content type); partial_success names the records not taken."""
    if json:
        payload: dict[str, Any] = {}
        if rejected:
            payload["partialSuccess"] = {"rejectedLogRecords": str(rejected), "errorMessage": message}
        return orjson.dumps(payload), "application/json"
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    resp = ExportLogsServiceResponse()
    if rejected:
        resp.partial_success.rejected_log_records = rejected
        resp.partial_success.error_message = message
    return resp.SerializeToString(), "application/x-protobuf"
