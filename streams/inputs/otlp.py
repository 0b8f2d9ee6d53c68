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
  ``gen_ai.usage.cache_read.input_tokens`` (semantic-conventions-genai: evidence only),
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

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from operator import attrgetter
from typing import Any

import orjson
from pydantic import ValidationError

from detectors.edge_words import EdgeWords
from detectors.fingerprint import Fingerprinter
from detectors.monitor import make_fingerprinter
from schemas.events import Event, EventError, parse_event, parse_event_obj
from schemas.messages import parts_text, tool_calls_line
from streams.inputs.otlp_decode import (
    STATUS_ERROR,
    OtlpDecodeError,
    Span,
    SpanReject,
    decode_spans,
    spans_from_json,
    spans_from_proto,
)
from streams.inputs.otlp_limits import DecodeLimits
from streams.inputs.otlp_openinference import as_genai, is_llm_span
from streams.settings import OtlpSettings, Settings

__all__ = [
    "Mapped",
    "OtlpDecodeError",
    "Sender",
    "Span",
    "SpanMapper",
    "SpanReject",
    "decode_spans",
    "otlp_json_decoder",
    "spans_from_json",
    "spans_from_proto",
]

_MESSAGE_EVENTS = {"gen_ai.system.message", "gen_ai.user.message", "gen_ai.assistant.message", "gen_ai.tool.message"}
_HTTP_STATUS = re.compile(r"[1-5][0-9][0-9]")
_INDEXED = re.compile(r"^gen_ai\.(prompt|completion)\.(\d+)\.content$")
# {"message": {"message": ...}} wrappers deeper than this are no instrumentation's shape (gen_ai.choice has one).
_MAX_MESSAGE_DEPTH = 8


@dataclass
class Mapped:
    events: list[Event] = field(default_factory=list)
    rejects: list[SpanReject] = field(default_factory=list)  # one per span (or one for the whole payload)
    skipped: Counter[str] = field(default_factory=Counter)  # spans that are not GenAI inference: not errors
    payload_error: SpanReject | None = None  # the payload was not OTLP at all (also in `rejects`)
    refused: list[SpanReject] = field(default_factory=list)  # events of mapped spans the detection core refused

    @property
    def rejected_spans(self) -> int:
        """Spans not taken: each mapping reject, and each span with an event the core refused (once)."""
        return len(self.rejects) + len({(r.trace_id, r.span_id) for r in self.refused})


@dataclass(frozen=True, slots=True)
class Sender:
    """An authenticated sender (streams.inputs.otlp_auth): the tenants its spans may assert.

    `tenants`: glob patterns of ordinary tenants. A probe tenant (one matching detection.canary_tenants)
    may be asserted only by a sender with `probe`, whatever its patterns say, and only such a sender may
    carry canary markers: a sender that may speak for every customer still cannot plant canaries."""

    name: str
    tenants: tuple[str, ...] = ()
    probe: bool = False
    probe_tenants: tuple[str, ...] = ()

    def may_assert(self, tenant: str) -> bool:
        if any(fnmatchcase(tenant, p) for p in self.probe_tenants):
            return self.probe
        return any(fnmatchcase(tenant, p) for p in self.tenants)


# --- text of the messages ----------------------------------------------------------------------


def _messages_text(value: Any, depth: int = 0) -> list[str]:
    """Text parts of a gen_ai.*.messages value: a JSON string (span attribute) or decoded list."""
    if depth > _MAX_MESSAGE_DEPTH:
        raise EventError("too_deep", f"messages wrapped in more than {_MAX_MESSAGE_DEPTH} message objects")
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
                out.extend(parts_text(m["parts"]))
            elif "content" in m:  # older shapes: {"role", "content": "..."}; gen_ai.choice {"message": {...}}
                out.extend(parts_text(m["content"]))
            elif isinstance(m.get("message"), dict):
                out.extend(_messages_text([m["message"]], depth + 1))
            elif m.get("type", "text") == "text" and isinstance(m.get("content"), str):
                out.append(m["content"])
            line = tool_calls_line(m.get("tool_calls"))  # older shapes: an assistant message's or choice's calls
            if line:
                out.append(line)
    return out


def _content(span: Span) -> tuple[str | None, str | None]:
    attrs = span.attributes
    prompt: list[str] = []
    output: list[str] = []
    if "gen_ai.system_instructions" in attrs:
        prompt += _messages_text(attrs["gen_ai.system_instructions"])
    if "gen_ai.input.messages" in attrs:
        prompt += _messages_text(attrs["gen_ai.input.messages"])
    if isinstance(defs := attrs.get("gen_ai.tool.definitions"), str) and defs:  # opt-in: the declared functions
        prompt.append(defs)
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


def _number(v: Any, what: str) -> float | None:
    """A numeric attribute as a finite float; None if absent or not a number (as if not set). A value that
    is a number but not a finite one ("inf", "1e999", NaN, a doubleValue of Infinity) is no count and no
    status: EventError(bad_number), so that the span is rejected with a reason, never guessed at."""
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    except OverflowError:  # an int of hundreds of digits
        raise EventError("bad_number", f"{what} is out of range") from None
    if f != f or f in (float("inf"), float("-inf")):
        raise EventError("bad_number", f"{what} is not a finite number")
    return f


def _int(v: Any, what: str = "a count") -> int | None:
    f = _number(v, what)
    if f is None:
        return None
    n = v if isinstance(v, int) else int(f)  # an int is kept exact; the schema bounds it (<= 2**53)
    return n if n >= 0 else None


def _float(v: Any, what: str = "a duration") -> float | None:
    return _number(v, what)


class SpanMapper:
    """Maps spans to events with one settings object and one Fingerprinter (same key as the monitor)."""

    def __init__(self, settings: OtlpSettings, fingerprinter: Fingerprinter) -> None:
        self.s = settings
        self.fp = fingerprinter
        self.words = EdgeWords(fingerprinter)  # the tool names and identifiers the monitor reads go with the print
        self.counters: Counter[str] = Counter()
        # What the spans of a payload pass through before they are mapped: the receiver's join with their
        # log records (streams.inputs.otlp_join); None elsewhere.
        self.before_map: Callable[[list[Span | SpanReject], Sender | None], list[Span | SpanReject]] | None = None

    def is_inference(self, span: Span) -> bool:
        op = span.attributes.get("gen_ai.operation.name")
        return op in self.s.operations

    def map_spans(self, spans: Iterable[Span | SpanReject], sender: Sender | None = None) -> Mapped:
        """Events of the inference spans; every other span is skipped (counted) or rejected with a reason.
        Nothing a span holds can stop the batch: the spans after it are mapped all the same."""
        out = Mapped()
        for span in spans:
            if isinstance(span, SpanReject):  # could not even be decoded
                out.rejects.append(span)
                continue
            if not self.is_inference(span):
                if not (self.s.openinference and is_llm_span(span)):
                    out.skipped["not_genai_inference"] += 1
                    continue
                span = as_genai(span)  # an OpenInference LLM span (Envoy AI Gateway's default)
                self.counters["openinference"] += 1
            try:
                out.events.extend(self.map_span(span, sender))
            except EventError as exc:
                out.rejects.append(SpanReject(exc.reason, exc.detail, span.trace_id, span.span_id, span.name))
            except (RecursionError, OverflowError, ValueError, TypeError) as exc:
                # A shape no rule above foresaw. Never the message: it may quote a value.
                detail = f"{type(exc).__name__} while mapping the span"
                out.rejects.append(SpanReject("bad_span", detail, span.trace_id, span.span_id, span.name))
        self.counters.update({f"skipped.{k}": v for k, v in out.skipped.items()})
        self.counters.update(f"rejects.{r.reason}" for r in out.rejects)
        self.counters["events"] += len(out.events)
        return out

    def _fingerprint(self, text: str, what: str) -> dict[str, Any]:
        try:
            return self.words.attach(self.fp.fingerprint(text), text, what == "prompt").model_dump(mode="json")
        except ValidationError:
            # Only size can fail it: more selected hashes than a fingerprint may hold (2.6 M CJK characters
            # fit under the body limit). Refused, not cut: a cut fingerprint would misstate the text.
            raise EventError("text_too_long", f"the {what} text gives more fingerprint hashes than allowed") from None

    def _authorize(self, sender: Sender, tenant: str, canaries: Any) -> None:
        if not sender.may_assert(tenant):
            raise EventError("tenant_not_allowed", f"sender {sender.name!r} may not assert tenant {tenant[:128]!r}")
        if canaries and not sender.probe:
            raise EventError("canary_not_allowed", f"sender {sender.name!r} may not register canaries")

    def map_span(self, span: Span, sender: Sender | None = None) -> list[Event]:
        """Request + response events of one GenAI inference span; EventError(reason) if it cannot be mapped.

        With a `sender` (an authenticated receiver), the tenant must be one it may assert, and the request
        id is scoped by it (`<sender>/<id>`): a sender that reuses another's request id makes a different
        id, so it cannot turn that sender's real span into a duplicate, nor join its own half to it."""
        s = self.s
        if not span.trace_id or not span.span_id:
            raise EventError("no_span_id", "span has no trace or span id")
        if span.start_ns <= 0 or span.end_ns < span.start_ns:
            raise EventError("bad_times", f"start {span.start_ns} end {span.end_ns}")
        a = span.attributes
        tenant, model, domain = self._who(span)
        usage_in = _int(a.get("gen_ai.usage.input_tokens", a.get("gen_ai.usage.prompt_tokens")), "input tokens")
        usage_out = _int(a.get("gen_ai.usage.output_tokens", a.get("gen_ai.usage.completion_tokens")), "output tokens")
        prompt_tokens = self._prompt_tokens(span, usage_in)
        canaries = _lookup(span, s.canary_attributes)
        if sender is not None:
            self._authorize(sender, tenant, canaries)
        rid = _lookup(span, s.request_id_attributes)
        request_id = str(rid) if rid is not None else f"{span.trace_id}-{span.span_id}"
        if sender is not None:
            request_id = f"{sender.name}/{request_id}"
        session = _lookup(span, s.session_attributes)
        common: dict[str, Any] = {
            "request_id": request_id,
            "tenant_id": tenant,
            "cache_domain": domain,
            "traceparent": f"00-{span.trace_id}-{span.span_id}-01",
        }
        if session is not None:
            common["session_id"] = str(session)
        prompt_text, output_text = _content(span)
        request = self._request(span, common, model, prompt_tokens, canaries, prompt_text)
        response = self._response(span, common, model, usage_in, usage_out, output_text)
        return [parse_event_obj(request), parse_event_obj(response)]

    def _who(self, span: Span) -> tuple[str, str, str]:
        """(tenant, model, cache domain) of the span, each from the first attribute that names it."""
        s, a = self.s, span.attributes
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
        if domain is None and s.cache_domain_from_provider:
            # A hosted provider's one pool, as seen from this gateway (gen_ai.system before semconv 1.37).
            domain = _lookup(span, ("gen_ai.provider.name", "gen_ai.system"))
        if domain is None:
            raise EventError("no_cache_domain", f"none of {list(s.cache_domain_attributes)} nor server.address")
        return str(tenant), str(model), str(domain)

    def _prompt_tokens(self, span: Span, usage_in: int | None) -> int:
        s = self.s
        prompt_tokens = _int(_lookup(span, s.prompt_tokens_attributes), "the prompt token count")
        if prompt_tokens is None and s.prompt_tokens_from_usage:
            # Without the gateway's own count the engine's is all there is: token_accounting_mismatch
            # cannot fire on such spans (documented), but everything else still can.
            prompt_tokens = usage_in
            self.counters["prompt_tokens_from_usage"] += 1
        if prompt_tokens is None:
            names = list(s.prompt_tokens_attributes)
            raise EventError("no_prompt_tokens", f"none of {names} nor gen_ai.usage.input_tokens")
        return prompt_tokens

    def _request(
        self,
        span: Span,
        common: dict[str, Any],
        model: str,
        prompt_tokens: int,
        canaries: Any,
        prompt_text: str | None,
    ) -> dict[str, Any]:
        a = span.attributes
        request: dict[str, Any] = {
            "type": "request",
            "event_id": f"otlp:{common['request_id']}:req",
            "ts": span.start_ns / 1e9,
            **common,
            "model": model,
            "prompt_tokens": prompt_tokens,
        }
        max_tokens = _int(a.get("gen_ai.request.max_tokens"), "gen_ai.request.max_tokens")
        if max_tokens is not None:
            request["max_output_tokens"] = max_tokens
        window = _int(_lookup(span, self.s.context_window_attributes), "the context window")
        if window is not None:
            request["context_window"] = window
        if canaries:
            request["canaries"] = [str(c) for c in (canaries if isinstance(canaries, list) else [canaries])]
        if prompt_text is not None:
            request["prompt_fingerprint"] = self._fingerprint(prompt_text, "prompt")
        return request

    def _cached(self, v: Any) -> int | None:
        """The cached input tokens, a figure of evidence only (docs/detection.md): one that is no count the schema
        takes is left out and counted, never the cause of the span's reject."""
        try:
            n = _int(v, "cached input tokens")
        except EventError:
            n = -1
        if n is None and v is None:
            return None
        if n is None or not 0 <= n <= 2**53:
            self.counters["cache_read_dropped"] += 1
            return None
        return n

    def _response(
        self,
        span: Span,
        common: dict[str, Any],
        model: str,
        usage_in: int | None,
        usage_out: int | None,
        output_text: str | None,
    ) -> dict[str, Any]:
        s, a = self.s, span.attributes
        status = _int(_lookup(span, s.status_code_attributes), "the status code")
        error_type = a.get("error.type")
        error_type = str(error_type)[:128] if error_type not in (None, "") else None
        if status is None and error_type is not None and _HTTP_STATUS.fullmatch(error_type):
            status = int(error_type)  # semconv: error.type is the status code when that is all that is known
        if status is None:
            failed = span.status_code == STATUS_ERROR or error_type is not None
            status = s.error_status_code if failed else 200
        response: dict[str, Any] = {
            "type": "response",
            "event_id": f"otlp:{common['request_id']}:resp",
            "ts": span.end_ns / 1e9,
            **common,
            "model": str(a.get("gen_ai.response.model") or model),
            "status_code": status,
            "duration_ms": (span.end_ns - span.start_ns) / 1e6,
        }
        reasons = a.get("gen_ai.response.finish_reasons")
        if isinstance(reasons, list) and reasons:
            response["finish_reason"] = str(reasons[0])[:64]
        elif isinstance(reasons, str) and reasons:
            response["finish_reason"] = reasons[:64]
        response_id = a.get("gen_ai.response.id")
        if isinstance(response_id, str) and response_id:
            response["response_id"] = response_id[:256]
        if error_type is not None:
            response["error_type"] = error_type
        if usage_in is not None or usage_out is not None:
            response["usage"] = {"input_tokens": usage_in, "output_tokens": usage_out}
            cached = self._cached(a.get("gen_ai.usage.cache_read.input_tokens"))
            if cached is not None:
                response["usage"]["cached_input_tokens"] = cached
        ttft_s = _float(_lookup(span, s.ttft_s_attributes), "the time to first token")
        ttft_ms = _float(_lookup(span, s.ttft_ms_attributes), "the time to first token")
        if ttft_ms is None and ttft_s is not None:
            ttft_ms = ttft_s * 1000.0
        if ttft_ms is not None and ttft_ms >= 0:
            response["ttft_ms"] = ttft_ms
        if output_text is not None:
            response["output_fingerprint"] = self._fingerprint(output_text, "output")
        return response

    def map_payload(self, data: bytes | bytearray, encoding: str, sender: Sender | None = None) -> Mapped:
        """A whole ExportTraceServiceRequest; an undecodable payload is one reject (without span ids)."""
        try:
            limits = DecodeLimits(self.s.max_spans_per_request, self.s.max_decoded_objects)
            spans = decode_spans(data, encoding, limits)
        except OtlpDecodeError as exc:
            whole = SpanReject(exc.reason, exc.detail)
            out = Mapped(rejects=[whole], payload_error=whole)
            self.counters[f"rejects.{exc.reason}"] += 1
            return out
        if self.before_map is not None:
            spans = self.before_map(spans, sender)
        return self.map_spans(spans, sender)


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
