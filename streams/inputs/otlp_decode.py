"""OTLP trace payloads (protobuf or OTLP/JSON) -> Span records, one span at a time (pure: no I/O).

A payload that is not OTLP at all raises OtlpDecodeError (the whole request is refused). Inside a
payload, a span that cannot be read -- a 400-digit time, an attribute nested a thousand deep, an
unparseable number -- becomes a SpanReject with a reason and the rest of the batch goes on: one bad
span must never cost the good ones next to it (an OTLP exporter does not retry a refused batch).
Rejects name the span by ids only: a span may carry message text, so no attribute value is quoted.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from streams.inputs.otlp_limits import BadWire, DecodeLimits, TooMuch, check_json_size, check_json_spans, check_proto

STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.StatusCode.STATUS_CODE_ERROR
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
MAX_NANOS = 2**64 - 1  # fixed64 in the proto: a larger time is not a time
# Attribute values deeper than this are not something any instrumentation writes; recursing further would
# only spend stack on a hostile payload (orjson itself stops at 1024 levels, Python's stack near 1000).
MAX_VALUE_DEPTH = 32
_HEX_ID = re.compile(r"[0-9a-fA-F]+")
_INT64 = re.compile(r"\s*[+-]?\d{1,20}\s*")


@dataclass(slots=True)
class Span:
    """The parts of one OTLP span the mapping reads, from either encoding."""

    trace_id: str  # lower-case hex
    span_id: str
    name: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    resource: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status_code: int = 0


@dataclass(slots=True)
class SpanReject:
    """A span that could not be mapped. Holds no attribute values: a span may carry message text."""

    reason: str
    detail: str
    trace_id: str = ""
    span_id: str = ""
    span_name: str = ""

    def record(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "detail": self.detail,
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "span_name": self.span_name,
        }


class OtlpDecodeError(ValueError):
    """The payload as a whole is not an OTLP trace export."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class SpanDecodeError(ValueError):
    """One span (or one resource's spans) cannot be read; the detail quotes no value."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --- OTLP/JSON -------------------------------------------------------------------------------------


def _json_any(v: Any, depth: int = 0) -> Any:
    """An OTLP/JSON AnyValue ({"stringValue": ...}) as a Python value."""
    if not isinstance(v, dict):
        return v
    if depth > MAX_VALUE_DEPTH:
        raise SpanDecodeError("too_deep", f"an attribute value nested deeper than {MAX_VALUE_DEPTH} levels")
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return _json_int(v["intValue"])  # int64 is a JSON string in OTLP/JSON
    if "doubleValue" in v:
        return _json_double(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_json_any(x, depth + 1) for x in _values(v["arrayValue"])]
    if "kvlistValue" in v:
        return _json_attrs(_values(v["kvlistValue"]), depth + 1)
    if "bytesValue" in v:
        try:
            return base64.b64decode(v["bytesValue"])
        except (binascii.Error, TypeError, ValueError):
            raise SpanDecodeError("bad_value", "a bytesValue that is not base64") from None
    return None


def _values(container: Any) -> list[Any]:
    container = container or {}
    values = container.get("values") or [] if isinstance(container, dict) else None
    if not isinstance(values, list):
        raise SpanDecodeError("bad_value", "an arrayValue/kvlistValue without a values list")
    return values


def _json_int(v: Any) -> int:
    """An intValue: int64 as a JSON string (or a number from a lax encoder). A longer string of digits is not
    an int64, and int() of thousands of digits is slow: refused by its length first."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, str) and _INT64.fullmatch(v):
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    raise SpanDecodeError("bad_number", "an intValue that is not an integer of at most 20 digits")


def _json_double(v: Any) -> float:
    """A doubleValue; protobuf JSON allows "NaN"/"Infinity" strings. Kept as a float: the mapping decides
    whether a non-finite value is an error where it is used (a token count) or harmless (an unread one)."""
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise SpanDecodeError("bad_number", "a doubleValue that is not a number")
    try:
        return float(v)
    except (ValueError, OverflowError):
        raise SpanDecodeError("bad_number", "a doubleValue that is not a number") from None


def _json_attrs(kvs: Iterable[Any], depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs or ():
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = _json_any(kv.get("value"), depth)
    return out


def _json_id(v: Any) -> str:
    """OTLP/JSON ids are hex strings (not protobuf-JSON base64); accept base64 from generic encoders too."""
    if not v:
        return ""
    s = str(v)[:256]
    if _HEX_ID.fullmatch(s) and len(s) in (16, 32):
        return s.lower()
    try:
        return base64.b64decode(s).hex()
    except ValueError:
        return s


def _nanos(v: Any, what: str) -> int:
    """A fixed64 time in ns: a JSON string of digits (or a number from a lax encoder)."""
    if v is None or v == "":
        return 0
    if isinstance(v, float) and math.isfinite(v):
        v = int(v)
    if isinstance(v, str) and _INT64.fullmatch(v):
        v = int(v)
    if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_NANOS:
        return v
    raise SpanDecodeError("bad_times", f"{what} is not a uint64 count of nanoseconds")


def _json_status(status: Any) -> int:
    if isinstance(status, str):
        return _STATUS_NAMES.get(status, 0)
    if isinstance(status, float) and status.is_integer():
        status = int(status)
    if isinstance(status, int) and not isinstance(status, bool):
        return status  # an open enum: an unknown code is kept (only ERROR is read)
    if status is None:
        return 0
    raise SpanDecodeError("bad_status", "status.code is not a StatusCode")


def _json_span(sp: Any, resource: dict[str, Any]) -> Span:
    if not isinstance(sp, dict):
        raise SpanDecodeError("bad_span", "a span that is not an object")
    status = sp.get("status") or {}
    events = []
    for e in sp.get("events") or ():
        if not isinstance(e, dict):
            raise SpanDecodeError("bad_span", "a span event that is not an object")
        events.append((str(e.get("name", ""))[:256], _json_attrs(e.get("attributes") or [])))
    return Span(
        trace_id=_json_id(sp.get("traceId")),
        span_id=_json_id(sp.get("spanId")),
        name=str(sp.get("name", ""))[:256],
        start_ns=_nanos(sp.get("startTimeUnixNano"), "startTimeUnixNano"),
        end_ns=_nanos(sp.get("endTimeUnixNano"), "endTimeUnixNano"),
        attributes=_json_attrs(sp.get("attributes") or []),
        resource=resource,
        events=events,
        status_code=_json_status(status.get("code", 0) if isinstance(status, dict) else None),
    )


def _ids_of(sp: Any) -> tuple[str, str, str]:
    """Ids of a span that failed to decode, for its reject (best effort, never raises)."""
    if not isinstance(sp, dict):
        return "", "", ""
    try:
        return _json_id(sp.get("traceId")), _json_id(sp.get("spanId")), str(sp.get("name", ""))[:256]
    except Exception:  # an id of a type str() cannot take: the reject goes without it
        return "", "", ""


def _failed(exc: BaseException, sp: Any) -> SpanReject:
    trace_id, span_id, name = _ids_of(sp)
    if isinstance(exc, SpanDecodeError):
        return SpanReject(exc.reason, exc.detail, trace_id, span_id, name)
    # Never the exception's message: float('...') and friends quote the value, which may be text.
    return SpanReject("bad_span", f"{type(exc).__name__} while decoding the span", trace_id, span_id, name)


# What reading a hostile span can raise: a decode error of ours, or a value of the wrong shape.
_SPAN_ERRORS = (SpanDecodeError, TypeError, ValueError, AttributeError, KeyError, OverflowError, RecursionError)


def spans_from_json(obj: Any) -> Iterator[Span | SpanReject]:
    """Spans of an ExportTraceServiceRequest in OTLP/JSON (as the OTLP/HTTP exporter, the Collector's
    file exporter and its Kafka exporter's otlp_json encoding write it); a span that cannot be read
    comes out as its SpanReject, in its place."""
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceSpans"), list):
        raise OtlpDecodeError("not_otlp", "no resourceSpans list")
    for rs in obj["resourceSpans"]:
        if not isinstance(rs, dict):
            raise OtlpDecodeError("not_otlp", "a resourceSpans entry that is not an object")
        scopes = rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []
        if not isinstance(scopes, list):
            raise OtlpDecodeError("not_otlp", "scopeSpans is not a list")
        resource_error: BaseException | None = None
        try:
            res = rs.get("resource") or {}
            resource = _json_attrs(res.get("attributes") or [] if isinstance(res, dict) else [])
        except _SPAN_ERRORS as exc:  # the resource is shared: each of its spans is rejected for it
            resource, resource_error = {}, exc
        for ss in scopes:
            spans = (ss or {}).get("spans") or [] if isinstance(ss, dict | None) else None
            if not isinstance(spans, list):
                raise OtlpDecodeError("not_otlp", "a scopeSpans entry without a spans list")
            for sp in spans:
                if resource_error is not None:
                    yield _failed(resource_error, sp)
                    continue
                try:
                    yield _json_span(sp, resource)
                except _SPAN_ERRORS as exc:
                    yield _failed(exc, sp)


# --- protobuf ----------------------------------------------------------------------------------------


def _pb_any(v: Any) -> Any:
    # protobuf's own parser refuses messages nested deeper than 100 levels: no bound needed here.
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_pb_any(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_any(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


def _pb_attrs(kvs: Iterable[Any]) -> dict[str, Any]:
    return {kv.key: _pb_any(kv.value) for kv in kvs}


def parse_proto(req: Any, data: bytes | bytearray) -> None:
    """Fill the protobuf message `req` from `data`; an undecodable body is one OtlpDecodeError (not_otlp)."""
    from google.protobuf.message import DecodeError

    try:
        req.ParseFromString(data)
    except (DecodeError, RecursionError) as exc:
        raise OtlpDecodeError("not_otlp", f"protobuf: {type(exc).__name__}") from None


def spans_from_proto(data: bytes | bytearray) -> Iterator[Span | SpanReject]:
    """Spans of a protobuf-encoded ExportTraceServiceRequest (OTLP/HTTP protobuf, Kafka otlp_proto)."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    parse_proto(req, data)
    for rs in req.resource_spans:
        resource = _pb_attrs(rs.resource.attributes)
        for ss in rs.scope_spans:
            for sp in ss.spans:
                yield Span(
                    trace_id=sp.trace_id.hex(),
                    span_id=sp.span_id.hex(),
                    name=sp.name,
                    start_ns=sp.start_time_unix_nano,
                    end_ns=sp.end_time_unix_nano,
                    attributes=_pb_attrs(sp.attributes),
                    resource=resource,
                    events=[(e.name, _pb_attrs(e.attributes)) for e in sp.events],
                    status_code=sp.status.code,
                )


def decode_spans(data: bytes | bytearray, encoding: str, limits: DecodeLimits | None = None) -> list[Span | SpanReject]:
    """encoding: otlp_proto | otlp_json | auto (JSON when the payload starts with '{'). With `limits`, a
    payload that would decode to more spans or objects is refused whole (OtlpDecodeError too_many_spans
    or too_many_objects) before anything is built (streams.inputs.otlp_limits)."""
    if encoding == "auto":
        encoding = "otlp_json" if data.lstrip()[:1] == b"{" else "otlp_proto"
    try:
        if encoding == "otlp_json":
            if limits is not None:
                check_json_size(data, limits)
            try:
                obj = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                raise OtlpDecodeError("not_json", str(exc)[:200]) from None
            if limits is not None:
                check_json_spans(obj, limits)
            return list(spans_from_json(obj))
        # every message costs at least 2 bytes: a payload this small cannot pass either limit
        if limits is not None and len(data) > 2 * min(limits.max_spans, limits.max_objects):
            check_proto(data, limits)
    except TooMuch as exc:
        raise OtlpDecodeError(exc.reason, exc.detail) from None
    except BadWire:
        raise OtlpDecodeError("not_otlp", "protobuf: DecodeError") from None
    return list(spans_from_proto(data))
