"""OTLP GenAI spans -> crosstalk request/response events (pure mapping: no I/O, no clock).

One GenAI inference span (``gen_ai.operation.name`` = chat | text_completion | generate_content)
becomes a ``request`` event at the span's start and a ``response`` event at its end, with the same
``request_id``. Message content, when the span carries it, is fingerprinted here with the keyed hash
and the text dropped: nothing downstream of this module ever holds it.

Names used (checked against open-telemetry/semantic-conventions docs/registry/attributes/gen-ai.md at
384d661 and opentelemetry-instrumentation-openai-v2 2.4b0 / opentelemetry-util-genai 1.3b0; see
docs/adr/0005-telemetry-inputs.md):

* ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.request.max_tokens``,
  ``gen_ai.usage.input_tokens``/``output_tokens`` (older ``gen_ai.usage.prompt_tokens``/``completion_tokens``),
  ``gen_ai.response.finish_reasons``, ``gen_ai.conversation.id``, ``gen_ai.response.time_to_first_chunk`` (s);
* content: ``gen_ai.system_instructions``, ``gen_ai.input.messages``, ``gen_ai.output.messages`` (JSON
  strings of ``{"role", "parts": [{"type": "text", "content"}]}``, emitted by openai-v2 with
  ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` and
  ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only``); span events
  ``gen_ai.{system,user,assistant,tool}.message`` / ``gen_ai.choice`` and ``gen_ai.content.prompt`` /
  ``gen_ai.content.completion`` (deprecated); OpenLLMetry-style ``gen_ai.prompt.N.content`` /
  ``gen_ai.completion.N.content``.

What semconv leaves open (tenant, cache domain, the gateway's own prompt-token count, TTFT, context
window, request id) is looked up in configurable attribute lists, span attributes first, then the
resource's (OtlpSettings).
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import orjson

from detectors.fingerprint import Fingerprinter
from detectors.monitor import make_fingerprinter
from schemas.events import Event, EventError, parse_event, parse_event_obj
from streams.settings import OtlpSettings, Settings

STATUS_ERROR = 2  # opentelemetry.proto.trace.v1.Status.StatusCode.STATUS_CODE_ERROR
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_MESSAGE_EVENTS = {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message"}
_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.content$")


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


@dataclass
class Mapped:
    events: list[Event] = field(default_factory=list)
    rejects: list[SpanReject] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # spans that are not GenAI inference: not errors


class OtlpDecodeError(ValueError):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


# --- decoding both encodings into Span ----------------------------------------------------------


def _json_any(v: Any) -> Any:
    """An OTLP/JSON AnyValue ({"stringValue": ...}) as a Python value."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])  # int64 is a JSON string in OTLP/JSON
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_json_any(x) for x in (v["arrayValue"] or {}).get("values", [])]
    if "kvlistValue" in v:
        return _json_attrs((v["kvlistValue"] or {}).get("values", []))
    if "bytesValue" in v:
        return base64.b64decode(v["bytesValue"])
    return None


def _json_attrs(kvs: Iterable[Any]) -> dict[str, Any]:
    return {kv["key"]: _json_any(kv.get("value")) for kv in kvs or () if isinstance(kv, dict) and "key" in kv}


def _json_id(v: Any) -> str:
    """OTLP/JSON ids are hex strings (not protobuf-JSON base64); accept base64 from generic encoders too."""
    if not v:
        return ""
    s = str(v)
    if re.fullmatch(r"[0-9a-fA-F]+", s) and len(s) in (16, 32):
        return s.lower()
    try:
        return base64.b64decode(s).hex()
    except ValueError:
        return s


def spans_from_json(obj: Any) -> Iterator[Span]:
    """Spans of an ExportTraceServiceRequest in OTLP/JSON (as the OTLP/HTTP exporter, the Collector's
    file exporter and its Kafka exporter's otlp_json encoding write it)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("resourceSpans"), list):
        raise OtlpDecodeError("not_otlp", "no resourceSpans list")
    for rs in obj["resourceSpans"]:
        resource = _json_attrs(((rs or {}).get("resource") or {}).get("attributes", []))
        for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
            for sp in (ss or {}).get("spans") or []:
                status = (sp.get("status") or {}).get("code", 0)
                yield Span(
                    trace_id=_json_id(sp.get("traceId")),
                    span_id=_json_id(sp.get("spanId")),
                    name=str(sp.get("name", "")),
                    start_ns=int(sp.get("startTimeUnixNano") or 0),
                    end_ns=int(sp.get("endTimeUnixNano") or 0),
                    attributes=_json_attrs(sp.get("attributes", [])),
                    resource=resource,
                    events=[
                        (str(e.get("name", "")), _json_attrs(e.get("attributes", []))) for e in sp.get("events") or ()
                    ],
                    status_code=_STATUS_NAMES.get(status, 0) if isinstance(status, str) else int(status),
                )


def _pb_any(v: Any) -> Any:
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


def spans_from_proto(data: bytes) -> Iterator[Span]:
    """Spans of a protobuf-encoded ExportTraceServiceRequest (OTLP/HTTP protobuf, Kafka otlp_proto)."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    req = ExportTraceServiceRequest()
    try:
        req.ParseFromString(data)
    except DecodeError as exc:
        raise OtlpDecodeError("not_otlp", f"protobuf: {exc}") from None
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


def decode_spans(data: bytes, encoding: str) -> list[Span]:
    """encoding: otlp_proto | otlp_json | auto (JSON when the payload starts with '{')."""
    if encoding == "auto":
        encoding = "otlp_json" if data.lstrip()[:1] == b"{" else "otlp_proto"
    if encoding == "otlp_json":
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise OtlpDecodeError("not_json", str(exc)) from None
        try:
            return list(spans_from_json(obj))
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            if isinstance(exc, OtlpDecodeError):
                raise
            raise OtlpDecodeError("not_otlp", f"{type(exc).__name__}: {exc}") from None
    return list(spans_from_proto(data))


# --- text of the messages ----------------------------------------------------------------------


def _parts_text(parts: Any) -> list[str]:
    out: list[str] = []
    if isinstance(parts, str):
        return [parts]
    for p in parts if isinstance(parts, list) else ():
        if isinstance(p, str):
            out.append(p)
        elif isinstance(p, dict) and p.get("type", "text") == "text" and isinstance(p.get("content"), str):
            out.append(p["content"])
    return out


def _messages_text(value: Any) -> list[str]:
    """Text parts of a gen_ai.*.messages value: a JSON string (span attribute) or decoded list."""
    if isinstance(value, str | bytes):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError:
            return [value.decode("utf-8", "replace") if isinstance(value, bytes) else value]
    if isinstance(value, dict):
        value = [value]
    out: list[str] = []
    for m in value if isinstance(value, list) else ():
        if isinstance(m, str):
            out.append(m)
        elif isinstance(m, dict):
            if "parts" in m:
                out.extend(_parts_text(m["parts"]))
            elif "content" in m:  # older shapes: {"role", "content": "..."}; gen_ai.choice {"message": {...}}
                out.extend(_parts_text(m["content"]))
            elif isinstance(m.get("message"), dict):
                out.extend(_messages_text([m["message"]]))
            elif m.get("type", "text") == "text" and isinstance(m.get("content"), str):
                out.append(m["content"])
    return out


def _content(span: Span) -> tuple[str | None, str | None]:
    attrs = span.attributes
    prompt: list[str] = []
    output: list[str] = []
    if "gen_ai.system_instructions" in attrs:
        prompt += _messages_text(attrs["gen_ai.system_instructions"])
    if "gen_ai.input.messages" in attrs:
        prompt += _messages_text(attrs["gen_ai.input.messages"])
    if "gen_ai.output.messages" in attrs:
        output += _messages_text(attrs["gen_ai.output.messages"])
    indexed: list[tuple[str, int, str]] = []
    for key, value in attrs.items():
        m = _INDEXED.match(key)
        if m and isinstance(value, str):
            indexed.append((m.group(1), int(m.group(2)), value))
    for kind, _, value in sorted(indexed):
        (prompt if kind == "prompt" else output).append(value)
    for name, ev in span.events:
        if name in _MESSAGE_EVENTS:
            prompt += _messages_text([ev]) if "content" in ev else []
        elif name == "gen_ai.choice":
            output += _messages_text([ev])
        elif name == "gen_ai.content.prompt" and "gen_ai.prompt" in ev:
            prompt += _messages_text(ev["gen_ai.prompt"])
        elif name == "gen_ai.content.completion" and "gen_ai.completion" in ev:
            output += _messages_text(ev["gen_ai.completion"])
    return ("\n".join(prompt) if prompt else None), ("\n".join(output) if output else None)


# --- the mapping ---------------------------------------------------------------------------------


def _lookup(span: Span, names: Iterable[str]) -> Any:
    for name in names:
        v = span.attributes.get(name)
        if v is None:
            v = span.resource.get(name)
        if v is not None and v != "":
            return v
    return None


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        n = int(float(v))
    except (TypeError, ValueError):
        return None
    return n if n >= 0 else None


def _float(v: Any) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


class SpanMapper:
    """Maps spans to events with one settings object and one Fingerprinter (same key as the monitor)."""

    def __init__(self, settings: OtlpSettings, fingerprinter: Fingerprinter) -> None:
        self.s = settings
        self.fp = fingerprinter
        self.counters: Counter[str] = Counter()

    def is_inference(self, span: Span) -> bool:
        op = span.attributes.get("gen_ai.operation.name")
        return op in self.s.operations

    def map_spans(self, spans: Iterable[Span]) -> Mapped:
        out = Mapped()
        for span in spans:
            if not self.is_inference(span):
                out.skipped["not_genai_inference"] += 1
                continue
            try:
                out.events.extend(self.map_span(span))
            except EventError as exc:
                out.rejects.append(SpanReject(exc.reason, exc.detail, span.trace_id, span.span_id, span.name))
        self.counters.update({f"skipped.{k}": v for k, v in out.skipped.items()})
        self.counters.update(f"rejects.{r.reason}" for r in out.rejects)
        self.counters["events"] += len(out.events)
        return out

    def map_span(self, span: Span) -> list[Event]:
        """Request + response events of one GenAI inference span; EventError(reason) if it cannot be mapped."""
        s = self.s
        if not span.trace_id or not span.span_id:
            raise EventError("no_span_id", "span has no trace or span id")
        if span.start_ns <= 0 or span.end_ns < span.start_ns:
            raise EventError("bad_times", f"start {span.start_ns} end {span.end_ns}")
        a = span.attributes
        tenant = _lookup(span, s.tenant_attributes)
        if tenant is None:
            raise EventError("no_tenant", f"none of {list(s.tenant_attributes)} on the span or its resource")
        model = a.get("gen_ai.request.model") or a.get("gen_ai.response.model")
        if not model:
            raise EventError("no_model", "neither gen_ai.request.model nor gen_ai.response.model")
        domain = _lookup(span, s.cache_domain_attributes)
        if domain is None and s.cache_domain_from_server_address and a.get("server.address"):
            port = a.get("server.port")
            domain = f"{a['server.address']}:{port}" if port else str(a["server.address"])
        if domain is None:
            domain = s.default_cache_domain
        if domain is None:
            raise EventError("no_cache_domain", f"none of {list(s.cache_domain_attributes)} nor server.address")
        usage_in = _int(a.get("gen_ai.usage.input_tokens", a.get("gen_ai.usage.prompt_tokens")))
        usage_out = _int(a.get("gen_ai.usage.output_tokens", a.get("gen_ai.usage.completion_tokens")))
        prompt_tokens = _int(_lookup(span, s.prompt_tokens_attributes))
        if prompt_tokens is None and s.prompt_tokens_from_usage:
            # Without the gateway's own count the engine's is all there is: token_accounting_mismatch
            # cannot fire on such spans (documented), but everything else still can.
            prompt_tokens = usage_in
            self.counters["prompt_tokens_from_usage"] += 1
        if prompt_tokens is None:
            names = list(s.prompt_tokens_attributes)
            raise EventError("no_prompt_tokens", f"none of {names} nor gen_ai.usage.input_tokens")
        rid = _lookup(span, s.request_id_attributes)
        request_id = str(rid) if rid is not None else f"{span.trace_id}-{span.span_id}"
        session = _lookup(span, s.session_attributes)
        traceparent = f"00-{span.trace_id}-{span.span_id}-01"
        prompt_text, output_text = _content(span)

        request: dict[str, Any] = {
            "type": "request",
            "event_id": f"otlp:{request_id}:req",
            "ts": span.start_ns / 1e9,
            "request_id": request_id,
            "tenant_id": str(tenant),
            "model": str(model),
            "prompt_tokens": prompt_tokens,
            "cache_domain": str(domain),
            "traceparent": traceparent,
        }
        if session is not None:
            request["session_id"] = str(session)
        max_tokens = _int(a.get("gen_ai.request.max_tokens"))
        if max_tokens is not None:
            request["max_output_tokens"] = max_tokens
        window = _int(_lookup(span, s.context_window_attributes))
        if window is not None:
            request["context_window"] = window
        canaries = _lookup(span, s.canary_attributes)
        if canaries:
            request["canaries"] = [str(c) for c in (canaries if isinstance(canaries, list) else [canaries])]
        if prompt_text is not None:
            request["prompt_fingerprint"] = self.fp.fingerprint(prompt_text).model_dump(mode="json")

        status = _int(_lookup(span, s.status_code_attributes))
        if status is None:
            status = s.error_status_code if span.status_code == STATUS_ERROR else 200
        response: dict[str, Any] = {
            "type": "response",
            "event_id": f"otlp:{request_id}:resp",
            "ts": span.end_ns / 1e9,
            "request_id": request_id,
            "tenant_id": str(tenant),
            "model": str(a.get("gen_ai.response.model") or model),
            "cache_domain": str(domain),
            "status_code": status,
            "duration_ms": (span.end_ns - span.start_ns) / 1e6,
            "traceparent": traceparent,
        }
        if session is not None:
            response["session_id"] = str(session)
        reasons = a.get("gen_ai.response.finish_reasons")
        if isinstance(reasons, list) and reasons:
            response["finish_reason"] = str(reasons[0])[:64]
        elif isinstance(reasons, str) and reasons:
            response["finish_reason"] = reasons[:64]
        if usage_in is not None or usage_out is not None:
            response["usage"] = {"input_tokens": usage_in, "output_tokens": usage_out}
        ttft_s = _float(_lookup(span, s.ttft_s_attributes))
        ttft_ms = _float(_lookup(span, s.ttft_ms_attributes))
        if ttft_ms is None and ttft_s is not None:
            ttft_ms = ttft_s * 1000.0
        if ttft_ms is not None and ttft_ms >= 0:
            response["ttft_ms"] = ttft_ms
        if output_text is not None:
            response["output_fingerprint"] = self.fp.fingerprint(output_text).model_dump(mode="json")
        return [parse_event_obj(request), parse_event_obj(response)]

    def map_payload(self, data: bytes, encoding: str) -> Mapped:
        """A whole ExportTraceServiceRequest; an undecodable payload is one reject."""
        try:
            spans = decode_spans(data, encoding)
        except OtlpDecodeError as exc:
            out = Mapped(rejects=[SpanReject(exc.reason, exc.detail)])
            self.counters[f"rejects.{exc.reason}"] += 1
            return out
        return self.map_spans(spans)


def otlp_json_decoder(settings: Settings) -> Callable[[bytes], list[Event | tuple[str, str, bytes]]]:
    """The line decoder of `crosstalk replay --format otlp-json` (streams.inputs.files.LineDecoder).

    A line with ``resourceSpans`` is an ExportTraceServiceRequest in OTLP/JSON (the Collector's file
    exporter writes one per line); any other line is read as a crosstalk event, so engine cache_stats and
    prober canaries can sit in the same file. A span's events come out in event-time order. Rejected spans
    are recorded by reason and ids only: the line itself may hold message text.
    """
    mapper = SpanMapper(settings.otlp, make_fingerprinter(settings.detection))
    max_bytes = settings.ingest.max_event_bytes

    def decode(line: bytes) -> list[Event | tuple[str, str, bytes]]:
        if b'"resourceSpans"' not in line:
            try:
                return [parse_event(line, max_bytes=max_bytes)]
            except EventError as exc:
                return [(exc.reason, exc.detail, line)]
        out = mapper.map_payload(line, "otlp_json")
        items: list[Event | tuple[str, str, bytes]] = sorted(out.events, key=attrgetter("ts"))
        items += [(r.reason, r.detail, orjson.dumps(r.record())) for r in out.rejects]
        return items

    return decode
