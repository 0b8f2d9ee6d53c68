"""OpenInference LLM spans (Envoy AI Gateway's default convention) map like GenAI spans.

The spans are the ones Envoy AI Gateway v1.1 records for a chat completion (its
internal/tracing/openinference/openai tests: input.value, llm.input_messages.N.message.*, llm.model_name,
llm.token_count.*, output.value), made with the real OpenTelemetry SDK and sent by its real OTLP/HTTP exporter
to crosstalk's receiver on loopback. Before this mapping every one was skipped as "not GenAI inference".
"""

from __future__ import annotations

import io

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from detectors.monitor import make_fingerprinter
from schemas.events import Request, Response
from streams.inputs.otlp import SpanMapper
from streams.inputs.otlp_decode import Span
from streams.inputs.otlp_http import OtlpReceiver
from streams.outputs import FunctionOutput
from streams.settings import Settings
from tests.support.gateways import envoy_openinference_attrs

SECRET = "acme's merger with globex closes on the ninth of march at four hundred million dollars and nobody else knows"


def envoy_attrs(tenant: str, prompt: str, answer: str) -> dict[str, object]:
    """Envoy's attributes plus the tenant its OTEL_AIGW_SPAN_REQUEST_HEADER_ATTRIBUTES mapping copies from a header."""
    return {**envoy_openinference_attrs(prompt, answer), "crosstalk.tenant_id": tenant}


def test_an_openinference_llm_span_maps_to_a_request_and_response_with_its_content() -> None:
    s = Settings()
    m = SpanMapper(s.otlp, make_fingerprinter(s.detection))
    span = Span(
        "ab" * 16, "cd" * 8, "ChatCompletion", 10**18, 10**18 + 2 * 10**9, envoy_attrs("acme", SECRET, "ok"), {}
    )
    out = m.map_spans([span])
    assert not out.rejects and not out.skipped
    req, resp = out.events
    assert isinstance(req, Request) and isinstance(resp, Response)
    assert req.tenant_id == "acme" and req.model == "gpt-5-nano" and req.max_output_tokens == 256
    assert req.prompt_tokens == 20  # the engine's count: OpenInference has no gateway count of its own
    assert resp.usage is not None and (resp.usage.input_tokens, resp.usage.output_tokens) == (20, 10)
    assert req.prompt_fingerprint is not None and resp.output_fingerprint is not None
    assert req.cache_domain == "openai"  # no server.address on Envoy's span: the provider's pool
    assert m.counters["openinference"] == 1
    # The same span with only input.value/output.value (llm.*_messages hidden) gives the same prompt print.
    bare = {k: v for k, v in envoy_attrs("acme", SECRET, "ok").items() if "_messages." not in k}
    req2, _ = m.map_spans([Span("ab" * 16, "ef" * 8, "ChatCompletion", 10**18, 10**18 + 1, bare, {})]).events
    assert isinstance(req2, Request) and req2.prompt_fingerprint is not None
    assert req2.prompt_fingerprint.hashes == req.prompt_fingerprint.hashes


def test_other_openinference_kinds_and_a_disabled_mapping_are_skipped() -> None:
    s = Settings(otlp={"openinference": False})
    m = SpanMapper(s.otlp, make_fingerprinter(s.detection))
    llm = Span("ab" * 16, "cd" * 8, "ChatCompletion", 10**18, 10**18 + 1, envoy_attrs("acme", "hi", "ok"), {})
    chain = Span("ab" * 16, "ce" * 8, "chain", 10**18, 10**18 + 1, {"openinference.span.kind": "CHAIN"}, {})
    assert m.map_spans([llm, chain]).skipped["not_genai_inference"] == 2
    on = SpanMapper(Settings().otlp, make_fingerprinter(s.detection))
    assert on.map_spans([chain]).skipped["not_genai_inference"] == 1


@pytest.fixture
def receiver_and_events():  # type: ignore[no-untyped-def]
    settings = Settings(detection={"fingerprint_key": "k" * 32})
    events: list[object] = []
    receiver = OtlpReceiver(settings, FunctionOutput(events.append))
    port = receiver.start_in_thread(0)
    yield port, events, receiver
    receiver.stop_thread()


def test_envoy_openinference_spans_through_the_real_exporter_raise_a_leak_alert(receiver_and_events) -> None:  # type: ignore[no-untyped-def]
    """Two tenants through Envoy's OpenInference recorder, one answer leaking the other's prompt: the events the
    receiver hands on, replayed by the embedded core, raise cross_tenant_contamination naming both."""
    from streams.embedded.runner import EmbeddedRunner

    port, events, receiver = receiver_and_events
    provider = TracerProvider(resource=Resource.create({"service.name": "ai-gateway"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")))
    tracer = provider.get_tracer("envoyproxy/ai-gateway")
    with tracer.start_as_current_span("ChatCompletion") as sp:
        sp.set_attributes(envoy_attrs("acme", SECRET, "Noted, I will keep it confidential."))  # type: ignore[arg-type]
    with tracer.start_as_current_span("ChatCompletion") as sp:
        sp.set_attributes(envoy_attrs("globex", "what is new today?", SECRET))  # type: ignore[arg-type]
    provider.shutdown()
    assert receiver.counters["spans.mapped"] == 2 and receiver.counters["spans.skipped"] == 0
    runner = EmbeddedRunner(
        Settings(detection={"fingerprint_key": "k" * 32, "overlap_warmup_docs": 0, "overlap_warmup_s": 0.0}), []
    )
    for ev in events:
        runner.feed_checked(ev, "test")  # type: ignore[arg-type]
    runner.finish(0.0)
    leaks = [a for a in runner.result.alerts if a.kind == "cross_tenant_contamination"]
    assert leaks and leaks[0].tenant_id == "globex" and leaks[0].source_tenant_id == "acme"


def test_the_openinference_openai_instrumentation_through_the_real_exporter_raises_the_leak() -> None:
    """Arize's own producer: the OpenAI SDK instrumented by openinference-instrumentation-openai, the tenant set
    with its `using_user` context (user.id on the span), the spans sent by the SDK's OTLP exporter."""
    pytest.importorskip("openinference.instrumentation.openai")
    import openai
    from openinference.instrumentation import using_user
    from openinference.instrumentation.openai import OpenAIInstrumentor

    from streams.embedded.output import EmbeddedOutput
    from tests.support.chatserver import ChatServer

    chat = ChatServer()
    chat.start()
    warm = Settings(detection={"overlap_warmup_docs": 0, "overlap_warmup_s": 0.0})
    alerts = io.BytesIO()
    output = EmbeddedOutput(warm, alerts, io.BytesIO())
    receiver = OtlpReceiver(warm, output)
    port = receiver.start_in_thread()
    provider = TracerProvider(resource=Resource.create({"crosstalk.cache_domain": "glm53-pd-1"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{chat.port}/v1", api_key="test", max_retries=0)

    def ask(who: str, text: str) -> str:
        with using_user(who):
            r = client.chat.completions.create(model="glm-5.3", messages=[{"role": "user", "content": text}])
        return r.choices[0].message.content or ""

    try:
        ask("acme", SECRET)
        chat.leak_next = True  # the next answer is the previous caller's prompt: acme's, to globex
        assert ask("globex", "anything for me?") == SECRET
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
        receiver.stop_thread()
        output.close()
        chat.stop()
    assert receiver.mapper.counters["openinference"] == 2 and receiver.counters["spans.mapped"] == 2
    found = [orjson.loads(line) for line in alerts.getvalue().splitlines()]
    leak = [a for a in found if a["kind"] == "cross_tenant_contamination"]
    assert leak and (leak[0]["tenant_id"], leak[0]["source_tenant_id"]) == ("globex", "acme"), found
