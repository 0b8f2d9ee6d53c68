"""How much an OTLP trace payload decodes to, bounded before anything is built (pure: no I/O).

A body's bytes bound its wire size, not what it decodes to: 16 MiB of empty spans (`\\x12\\x00` each)
became 8.4 M span objects and 3.5 GB, and 5.6 M `{}` spans in OTLP/JSON 1.9 GB (issue 42). So before the
protobuf parser or orjson builds a single object, the payload is measured here, cheaply, and refused
whole past `otlp.max_spans_per_request` spans or `otlp.max_decoded_objects` decoded values:

* protobuf: the wire format is walked without building anything, descending only into the fields that
  are messages in the trace schema, counting every message and every span, and stopping at the bound;
* OTLP/JSON: every JSON value but the first is preceded by `{`, `[` or `,`, so counting those three bytes
  (a C-speed pass each) bounds the number of values orjson would build. Bytes inside strings count too,
  so the bound is an over-estimate, never an under-estimate; spans are counted once parsed, before any
  span is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# message-typed fields of the trace schema (opentelemetry-proto trace/v1, common/v1, resource/v1):
# message -> {field number: message type of that field}. Any other length-delimited field is a string,
# bytes, or unknown, and is stepped over without being read.
_SCHEMA: dict[str, dict[int, str]] = {
    "request": {1: "resource_spans"},
    "resource_spans": {1: "resource", 2: "scope_spans"},
    "resource": {1: "key_value"},
    "scope_spans": {1: "scope", 2: "span"},
    "scope": {3: "key_value"},
    "span": {9: "key_value", 11: "event", 13: "link", 15: "status"},
    "event": {3: "key_value"},
    "link": {5: "key_value"},
    "status": {},
    "key_value": {2: "any_value"},
    "any_value": {5: "array_value", 6: "key_value_list"},
    "array_value": {1: "any_value"},
    "key_value_list": {1: "key_value"},
    # logs/v1 (POST /v1/logs): the same walk, from its own root
    "logs_request": {1: "resource_logs"},
    "resource_logs": {1: "resource", 2: "scope_logs"},
    "scope_logs": {1: "scope", 2: "log_record"},
    "log_record": {5: "any_value", 6: "key_value"},
}
# what the unit limit (max_spans) counts, and the reason past it
_UNITS = {"span": ("too_many_spans", "spans"), "log_record": ("too_many_records", "log records")}
MAX_DEPTH = 100  # protobuf's own parser refuses deeper messages


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    """otlp.max_spans_per_request and otlp.max_decoded_objects."""

    max_spans: int
    max_objects: int


class TooMuch(ValueError):
    """The payload decodes to more than its limits allow; `reason` is the reject reason."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class BadWire(ValueError):
    """Not protobuf wire format (the protobuf parser would refuse it too)."""


def _varint(data: bytes | bytearray | memoryview, i: int, end: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= end or shift > 63:
            raise BadWire("a varint runs past its message")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def check_proto(data: bytes | bytearray, limits: DecodeLimits, root: str = "request") -> None:
    """Count the messages and spans of a protobuf ExportTraceServiceRequest (root `logs_request`: the log
    records of an ExportLogsServiceRequest) without decoding it; TooMuch past a limit, BadWire if the wire
    format is broken. Stops at the first limit passed, so a bomb costs at most max_objects steps."""
    objects = spans = 0
    stack: list[tuple[str, int]] = []  # (message type, end offset) of the messages being walked
    kind, i, end = root, 0, len(data)
    while True:
        if i >= end:
            if i > end or kind.startswith("group"):
                raise BadWire("a field or group runs past its message")
            if not stack:
                return
            kind, end = stack.pop()
            continue
        key = data[i]
        if key < 0x80:  # one-byte keys and values, nearly all of them: no call (the walk is per field)
            i += 1
        else:
            key, i = _varint(data, i, end)
        field, wire = key >> 3, key & 7
        if wire == 0:
            if i < end and data[i] < 0x80:
                i += 1
            else:
                _, i = _varint(data, i, end)
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        elif wire in (2, 3):
            if wire == 2:
                if i < end and data[i] < 0x80:
                    n, i = data[i], i + 1
                else:
                    n, i = _varint(data, i, end)
                sub = _SCHEMA.get(kind, {}).get(field)
                if sub is None:
                    i += n
                    continue
            else:  # an unknown group (the parser keeps it): walked to its end, nothing in it decoded
                sub, n = f"group{field}", end - i
            objects += 1
            if objects > limits.max_objects:
                raise TooMuch("too_many_objects", f"the payload decodes to more than {limits.max_objects} messages")
            if sub in _UNITS:
                spans += 1
                if spans > limits.max_spans:
                    reason, what = _UNITS[sub]
                    raise TooMuch(reason, f"more than {limits.max_spans} {what} in one request")
            if len(stack) >= MAX_DEPTH:
                raise BadWire("messages nested deeper than 100 levels")
            stack.append((kind, end))
            kind, end = sub, i + n
            if end > stack[-1][1]:
                raise BadWire("a message runs past its parent")
        elif wire == 4 and kind == f"group{field}":
            kind, end = stack.pop()
        else:  # an end of group that closes nothing; 6 and 7 do not exist
            raise BadWire(f"wire type {wire}")


def check_json_size(data: bytes | bytearray, limits: DecodeLimits) -> None:
    """An upper bound of the values orjson would build from `data`: TooMuch past max_objects."""
    bound = data.count(b"{") + data.count(b"[") + data.count(b",") + 1
    if bound > limits.max_objects:
        raise TooMuch("too_many_objects", f"the payload may decode to more than {limits.max_objects} JSON values")


def check_json_spans(obj: Any, limits: DecodeLimits) -> None:
    """Spans of a parsed OTLP/JSON request, counted before any is read (shapes not OTLP are left to the
    decoder, which refuses them with its own reasons)."""
    spans = 0
    for rs in obj.get("resourceSpans") or () if isinstance(obj, dict) else ():
        scopes = (rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans")) if isinstance(rs, dict) else None
        for ss in scopes if isinstance(scopes, list) else ():
            got = ss.get("spans") if isinstance(ss, dict) else None
            spans += len(got) if isinstance(got, list) else 0
            if spans > limits.max_spans:
                raise TooMuch("too_many_spans", f"more than {limits.max_spans} spans in one request")
