"""gen_ai.usage.cache_read.input_tokens (open-telemetry/semantic-conventions-genai registry; OpenInference
llm.token_count.prompt_details.cache_read): read onto the response's usage as `cached_input_tokens`, carried as a
figure of the token-accounting evidence and the foreign_cache_read evidence, never a verdict (docs/detection.md).
Before it, nothing read it."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from detectors.monitor import make_fingerprinter
from schemas.events import Response, parse_event
from streams.embedded.runner import EmbeddedRunner
from streams.inputs.otlp import SpanMapper
from streams.inputs.otlp_decode import Span
from streams.inputs.otlp_http import OtlpReceiver
from streams.kafka import records
from streams.outputs import FunctionOutput
from streams.settings import Settings
from tests.support.gateways import envoy_openinference_attrs

KEY: dict[str, Any] = {"fingerprint_key": "k" * 32}
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"


def attrs(tenant: str, **more: object) -> dict[str, object]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "glm-5.3",
        "gen_ai.usage.input_tokens": 3000,
        "gen_ai.usage.output_tokens": 20,
        "crosstalk.tenant_id": tenant,
        "crosstalk.cache_domain": "glm53-pd-1",
        **more,
    }


def mapper() -> SpanMapper:
    s = Settings(detection=KEY)
    return SpanMapper(s.otlp, make_fingerprinter(s.detection))


def span(a: dict[str, object], sid: str = "cd" * 8) -> Span:
    return Span("ab" * 16, sid, "chat glm-5.3", 10**18, 10**18 + 10**9, a, {})


def test_the_cache_read_count_reaches_the_responses_usage() -> None:
    _, resp = mapper().map_span(span(attrs("acme", **{CACHE_READ: 2048})))
    assert isinstance(resp, Response) and resp.usage is not None
    assert (resp.usage.input_tokens, resp.usage.cached_input_tokens) == (3000, 2048)
    _, resp = mapper().map_span(span(attrs("acme")))
    assert isinstance(resp, Response) and resp.usage is not None and resp.usage.cached_input_tokens is None
    # OpenInference's name for it (Envoy AI Gateway, Arize's instrumentations).
    oi = {**envoy_openinference_attrs("hello", "ok"), "crosstalk.tenant_id": "acme"}
    oi["llm.token_count.prompt_details.cache_read"] = 16
    out = mapper().map_spans([Span("ab" * 16, "ce" * 8, "ChatCompletion", 10**18, 10**18 + 1, oi, {})])
    resp = out.events[1]
    assert isinstance(resp, Response) and resp.usage is not None and resp.usage.cached_input_tokens == 16


@pytest.mark.parametrize("bad", ["many", -5, float("inf"), 2**60, True])
def test_a_cache_read_that_is_no_count_is_left_out_and_counted_not_the_spans_reject(bad: object) -> None:
    m = mapper()
    out = m.map_spans([span(attrs("acme", **{CACHE_READ: bad}))])
    assert not out.rejects and len(out.events) == 2
    resp = out.events[1]
    assert isinstance(resp, Response) and resp.usage is not None and resp.usage.cached_input_tokens is None
    assert resp.usage.input_tokens == 3000
    assert m.counters["cache_read_dropped"] == 1


def test_response_records_written_before_the_cached_count_still_decode() -> None:
    """A response record a worker wrote before `cached_input_tokens` (join topic, snapshot), in both layouts."""
    raw = {"type": "response", "event_id": "e1", "ts": 1.0, "request_id": "r1", "tenant_id": "acme"}
    raw |= {"model": "m", "cache_domain": "d", "status_code": 200, "usage": {"input_tokens": 5, "output_tokens": 2}}
    old = parse_event(orjson.dumps(raw))
    assert isinstance(old, Response)
    kind, values, keys = orjson.loads(records.event_record(old))
    del values["usage"]["cached_input_tokens"]
    as_object = orjson.dumps([kind, values, keys])
    values["usage"] = [5, 2]  # the array layout's nesting
    as_array = orjson.dumps([kind, [values[f] for f in Response.model_fields], keys])
    for rec in (as_object, as_array):
        back, _ = records.event_from_record(rec)
        assert back == old and isinstance(back, Response) and back.usage is not None
        assert back.usage.cached_input_tokens is None
    new = parse_event(orjson.dumps({**raw, "usage": {"input_tokens": 5, "output_tokens": 2, "cached_input_tokens": 4}}))
    assert isinstance(new, Response)
    back, _ = records.event_from_record(records.event_record(new))
    assert back == new and isinstance(back, Response) and back.usage is not None and back.usage.cached_input_tokens == 4


def test_the_accounting_evidence_carries_the_engines_cached_count_through_the_real_receiver() -> None:
    """A gateway that counted 4,096 prompt tokens, an engine that reports 1 input token and 1,024 read from its prefix
    cache: the spans go through the OpenTelemetry SDK's own OTLP/HTTP exporter to crosstalk's receiver, and the
    token_accounting_mismatch evidence names the engine's cached count beside its input count, with
    foreign_cache_read beside it (the tenant never sent a prompt in the domain). The alert's severity is the
    signal's own, as without the figures."""
    events: list[object] = []
    receiver = OtlpReceiver(Settings(detection=KEY), FunctionOutput(events.append))
    port = receiver.start_in_thread(0)
    try:
        provider = TracerProvider(resource=Resource.create({"service.name": "gateway"}))
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("gateway")
        placeholder = {"crosstalk.prompt_tokens": 4096, "gen_ai.usage.input_tokens": 1, CACHE_READ: 1024}
        plain = {"crosstalk.prompt_tokens": 4096, "gen_ai.usage.input_tokens": 1}
        for who, extra in (("globex", placeholder), ("initech", plain)):
            with tracer.start_as_current_span("chat glm-5.3") as sp:
                sp.set_attributes({**attrs(who), **extra})  # type: ignore[dict-item]
        provider.shutdown()
        assert receiver.counters["spans.mapped"] == 2
    finally:
        receiver.stop_thread()
    runner = EmbeddedRunner(Settings(detection=KEY), [])
    for ev in events:
        runner.feed_checked(ev, "test")  # type: ignore[arg-type]
    runner.finish(0.0)
    figures, foreign = {}, {}
    for alert in runner.result.alerts:
        for sig in alert.evidence:
            if sig.name == "token_accounting_mismatch":
                figures[alert.tenant_id] = (alert.severity, sig.severity, sig.figures)
            if sig.name == "foreign_cache_read":
                foreign[alert.tenant_id] = sig.figures
    assert set(figures) == {"globex", "initech"}
    g_alert, g_sig, g = figures["globex"]
    i_alert, i_sig, i = figures["initech"]
    assert (
        g["engine_cached_input_tokens"] == 1024 and g["engine_input_tokens"] == 1 and g["gateway_prompt_tokens"] == 4096
    )
    # globex sent nothing in the domain before: the 1,024 cached tokens are KV another request computed.
    assert foreign == {"globex": {"engine_cached_input_tokens": 1024, "own_longest_prompt_tokens": 0,
                                  "gateway_prompt_tokens": 4096, "window_s": 3600.0}}  # fmt: skip
    assert "engine_cached_input_tokens" not in i  # no figure where the span said nothing
    assert (g_alert, g_sig) == (i_alert, i_sig)  # evidence only: the same severity either way
