"""POST /v1/logs: the content of a GenAI call in its `gen_ai.client.inference.operation.details` log record,
joined to its span by trace and span id, or mapped alone when its span does not come.

The end-to-end test runs the real parts: the OpenAI SDK instrumented by opentelemetry-instrumentation-openai-v2
with `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only` (content only in the log record, none on
the span), the SDK's OTLP/HTTP span and log exporters, and crosstalk's receiver on loopback.
"""

from __future__ import annotations

import io
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from streams.embedded.output import EmbeddedOutput
from streams.inputs.otlp_decode import Span, SpanReject
from streams.inputs.otlp_join import LogJoiner
from streams.inputs.otlp_logs import DETAILS_EVENT, LogRecord
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.outputs import FunctionOutput
from streams.settings import Settings
from tests.support.chatserver import LeakyServer
from tests.support.recipes import exports, recipe

openai = pytest.importorskip("openai")
pytest.importorskip("opentelemetry.instrumentation.openai_v2")

WARM = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0.0}
SECRET = "the acme payroll export for march lists every salary above two hundred thousand with home addresses"


def test_openai_v2_event_only_content_through_v1_logs_raises_the_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    env = exports(recipe("otel-logs-env"))  # docs/connect.md's own environment for this route
    for name in ("OTEL_SEMCONV_STABILITY_OPT_IN", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
        monkeypatch.setenv(name, env[name])
    assert env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] == "event_only"
    traces_path = urlsplit(env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]).path
    logs_path = urlsplit(env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"]).path
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from streams.integrations.otel import TenantSpanProcessor, tenant

    server = LeakyServer()
    server.start()
    alerts = io.BytesIO()
    output = EmbeddedOutput(Settings(detection=WARM), alerts, io.BytesIO())
    receiver = OtlpReceiver(Settings(detection=WARM), output)
    port = receiver.start_in_thread()
    attributes = dict(pair.split("=", 1) for pair in env["OTEL_RESOURCE_ATTRIBUTES"].split(","))
    resource = Resource.create({"service.name": env["OTEL_SERVICE_NAME"], **attributes})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(TenantSpanProcessor())
    spans = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}{traces_path}")
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider(resource=resource)
    logs = OTLPLogExporter(endpoint=f"http://127.0.0.1:{port}{logs_path}")
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="test", max_retries=0)

    def chat(who: str, text: str) -> str:
        with tenant(who):
            r = client.chat.completions.create(model="glm-5.3", messages=[{"role": "user", "content": text}], user=who)
        return r.choices[0].message.content or ""

    try:
        chat("acme", SECRET)
        chat("globex", "hello, anything for me today?")
        server.leak = True
        assert chat("globex", "and now?") == SECRET
    finally:
        instrumentor.uninstrument()
        tracer_provider.shutdown()
        logger_provider.shutdown()
        receiver.stop_thread()
        output.close()
        server.stop()
    counters = receiver.counters
    assert counters["logs.requests"] == 3 and counters["spans.mapped"] == 3, dict(counters)
    assert receiver.joined.joiner.counters["joined"] == 3, dict(receiver.joined.joiner.counters)
    found = [orjson.loads(line) for line in alerts.getvalue().splitlines()]
    leak = [a for a in found if a["kind"] == "cross_tenant_contamination"]
    assert leak and (leak[0]["tenant_id"], leak[0]["source_tenant_id"]) == ("globex", "acme"), found
    assert leak[0]["response_id"] == "chatcmpl-3"  # the test server's id of the third answer


def details_json(tenant: str | None, trace_id: str, span_id: str, text: str) -> bytes:
    def kv(key: str, value: Any) -> dict[str, Any]:
        if isinstance(value, int):
            return {"key": key, "value": {"intValue": str(value)}}
        return {"key": key, "value": {"stringValue": value}}

    messages = orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}]).decode()
    attrs = [
        kv("gen_ai.operation.name", "chat"),
        kv("gen_ai.request.model", "glm-5.3"),
        kv("gen_ai.usage.input_tokens", 12),
        kv("gen_ai.input.messages", messages),
    ]
    resource = [kv("crosstalk.cache_domain", "d1")] + ([kv("user.id", tenant)] if tenant else [])
    record = {
        "timeUnixNano": str(time.time_ns()),
        "traceId": trace_id,
        "spanId": span_id,
        "eventName": DETAILS_EVENT,
        "attributes": attrs,
    }
    return orjson.dumps(
        {"resourceLogs": [{"resource": {"attributes": resource}, "scopeLogs": [{"logRecords": [record]}]}]}
    )


def test_a_record_whose_span_never_comes_is_mapped_alone_by_the_clock() -> None:
    """No further request arrives: the receiver's own tick maps the waiting record once logs_wait_s is over."""
    events: list[Any] = []
    receiver = OtlpReceiver(Settings(otlp={"logs_wait_s": 0.3}), FunctionOutput(events.append))
    port = receiver.start_in_thread()
    try:
        url = f"http://127.0.0.1:{port}/v1/logs"
        headers = {"content-type": "application/json"}
        r = httpx.post(url, content=details_json("acme", "ab" * 16, "cd" * 8, SECRET), headers=headers)
        assert r.status_code == 200 and r.json() == {}
        no_tenant = httpx.post(url, content=details_json(None, "ab" * 16, "ce" * 8, "hi"), headers=headers)
        assert no_tenant.status_code == 200
        assert events == []  # waiting for their spans
        deadline = time.monotonic() + 10
        counters = httpx.get(f"http://127.0.0.1:{port}/counters").json()
        while counters.get("join.alone.log", 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
            counters = httpx.get(f"http://127.0.0.1:{port}/counters").json()
        bad = httpx.post(url, content=b"\x0a\xff\xff", headers={"content-type": "application/x-protobuf"})
    finally:
        receiver.stop_thread()
    assert [e.type for e in events] == ["request", "response"]
    assert events[0].tenant_id == "acme" and events[0].prompt_fingerprint is not None
    assert counters["join.alone.log"] == 2 and counters["rejects.no_tenant"] == 1, counters
    assert bad.status_code == 400 and "not_otlp" in bad.text


def _span(sid: str, content: bool = False) -> Span:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat"}
    if content:
        attrs["gen_ai.input.messages"] = "[]"
    return Span("ab" * 16, sid, "chat", 1, 2, attrs, {})


def _record(sid: str) -> LogRecord:
    return LogRecord("ab" * 16, sid, DETAILS_EVENT, 5, {"gen_ai.input.messages": "[]"}, {})


def test_the_join_is_bounded_and_takes_each_half_once() -> None:
    j = LogJoiner(wait_s=5.0, max_pending=2, is_inference=lambda s: True)
    # Before any record: spans pass at once, a re-sent one too (the core refuses it as a duplicate).
    assert len(j.on_spans([_span("01" * 8), _span("01" * 8)], None, 0.0)) == 2
    assert j.on_logs([_record(f"{i:016x}") for i in range(3)], None, 0.0) == []
    over = j.expired(0.1)  # three waiting, room for two: the oldest goes alone at once
    assert [r.span.span_id for r in over] == [f"{0:016x}"] and j.counters["alone.log_overflow"] == 1
    # A record's span arrives: joined, its content on the span; the span sent again goes on to the core.
    [joined] = j.on_spans([_span(f"{1:016x}")], None, 1.0)
    assert isinstance(joined, Span) and "gen_ai.input.messages" in joined.attributes and j.counters["joined"] == 1
    # Records seen: a content-less span waits for its record; one with content does not.
    assert j.on_spans([_span("77" * 8), _span("78" * 8, content=True)], None, 1.0) == [_span("78" * 8, True)]
    assert j.on_logs([_record("78" * 8)], None, 1.0) == [] and j.counters["dropped.log_after_span"] == 1
    # The span of the overflowed record comes late: its record was mapped alone, the span adds nothing.
    assert j.on_spans([_span(f"{0:016x}")], None, 2.0) == [] and j.counters["dropped.span_after_log"] == 1
    # Another sender's record does not complete this sender's span.
    from streams.inputs.otlp import Sender

    assert j.on_logs([_record("77" * 8)], Sender("other", ("*",)), 2.0) == []
    late = j.expired(10.0)
    assert {r.span.span_id for r in late} == {f"{2:016x}", "77" * 8}
    assert j.pending == 0


def test_halves_still_waiting_at_shutdown_are_mapped_not_dropped() -> None:
    events: list[Any] = []
    receiver = OtlpReceiver(Settings(otlp={"logs_wait_s": 600}), FunctionOutput(events.append))
    port = receiver.start_in_thread()
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/logs",
        content=details_json("acme", "ab" * 16, "cd" * 8, SECRET),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200 and events == []
    receiver.stop_thread()
    assert [e.type for e in events] == ["request", "response"] and events[0].tenant_id == "acme"


def test_per_message_events_through_v1_logs_are_joined_to_their_span() -> None:
    """The older per-message events (semconv 1.30: gen_ai.user.message, gen_ai.choice; content in the body), as
    instrumentations on those conventions emit them inside the call's span. The pinned openai-v2 2.4b0 with
    util-genai 1.1b0 no longer emits them (its default mode is the latest one), so the SDK's own logger emits
    them here, through its OTLP log exporter, beside the span's exporter."""
    from opentelemetry._logs import LogRecord as ApiLogRecord
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    alerts = io.BytesIO()
    output = EmbeddedOutput(Settings(detection=WARM), alerts, io.BytesIO())
    receiver = OtlpReceiver(Settings(detection=WARM), output)
    port = receiver.start_in_thread()
    resource = Resource.create({"service.name": "gateway", "crosstalk.cache_domain": "glm53-pd-1"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces"))
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"http://127.0.0.1:{port}/v1/logs"))
    )
    tracer = tracer_provider.get_tracer("legacy-genai")
    logger = logger_provider.get_logger("legacy-genai")

    def call(who: str, prompt: str, answer: str) -> None:
        with tracer.start_as_current_span("chat glm-5.3") as span:
            span.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.system": "openai",
                    "gen_ai.request.model": "glm-5.3",
                    "gen_ai.usage.input_tokens": 40,
                    "gen_ai.usage.output_tokens": 40,
                    "crosstalk.tenant_id": who,
                }
            )
            logger.emit(ApiLogRecord(event_name="gen_ai.user.message", body={"content": prompt}))
            choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}
            logger.emit(ApiLogRecord(event_name="gen_ai.choice", body=choice))

    try:
        call("acme", SECRET, "Noted.")
        call("globex", "anything for me?", SECRET)
    finally:
        tracer_provider.shutdown()
        logger_provider.shutdown()
        receiver.stop_thread()
        output.close()
    joins = receiver.joined.joiner.counters
    assert receiver.counters["spans.mapped"] == 2 and joins["joined_events"] == 2, (dict(receiver.counters), joins)
    found = [orjson.loads(line) for line in alerts.getvalue().splitlines()]
    leak = [a for a in found if a["kind"] == "cross_tenant_contamination"]
    assert leak and (leak[0]["tenant_id"], leak[0]["source_tenant_id"]) == ("globex", "acme"), found


def test_per_message_events_whose_span_never_comes_are_dead_lettered() -> None:
    j = LogJoiner(wait_s=5.0, max_pending=10, is_inference=lambda s: True)
    rec = LogRecord("ab" * 16, "cd" * 8, "gen_ai.user.message", 5, {}, {}, {"content": "hi"})
    assert j.on_logs([rec, rec], None, 0.0) == []
    [ready] = j.expired(6.0)
    assert (
        isinstance(ready.span, SpanReject) and ready.span.reason == "no_span" and "2 per-message" in ready.span.detail
    )
    # A span waiting gets them as events; the answer (gen_ai.choice) completes it.
    assert j.on_spans([_span("ee" * 8)], None, 7.0) == []
    j.on_logs([LogRecord("ab" * 16, "ee" * 8, "gen_ai.user.message", 5, {}, {}, {"content": "hi"})], None, 7.0)
    choice = LogRecord("ab" * 16, "ee" * 8, "gen_ai.choice", 6, {}, {}, {"message": {"content": "yo"}})
    [span] = j.on_logs([choice], None, 7.0)
    assert [name for name, _ in span.events] == ["gen_ai.user.message", "gen_ai.choice"]
