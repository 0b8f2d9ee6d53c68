"""streams.integrations.otel: the tenant lands on GenAI spans, from the gateway's block or an upstream's baggage."""

from __future__ import annotations

import pytest
from opentelemetry import context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streams.integrations.otel import TENANT_ATTRIBUTE, TenantSpanProcessor, current_tenant, tenant

GENAI = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}


def _tracer(**kw: bool) -> tuple[object, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(TenantSpanProcessor(**kw))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("t"), exporter


def test_genai_spans_inside_the_block_carry_the_tenant_and_others_do_not() -> None:
    tracer, exported = _tracer()
    with tenant("acme"):
        tracer.start_span("chat m", attributes=GENAI).end()  # type: ignore[attr-defined]
        tracer.start_span("GET /", attributes={"http.method": "GET"}).end()  # type: ignore[attr-defined]
        tracer.start_span("chat m", attributes={**GENAI, TENANT_ATTRIBUTE: "set-by-caller"}).end()  # type: ignore[attr-defined]
    tracer.start_span("chat m", attributes=GENAI).end()  # type: ignore[attr-defined]  # outside: nobody
    got = [(s.name, (s.attributes or {}).get(TENANT_ATTRIBUTE)) for s in exported.get_finished_spans()]
    assert got == [("chat m", "acme"), ("GET /", None), ("chat m", "set-by-caller"), ("chat m", None)]
    assert current_tenant() is None


def test_an_upstream_tenant_in_the_baggage_header_is_honoured() -> None:
    tracer, exported = _tracer(genai_only=False)
    ctx = W3CBaggagePropagator().extract({"baggage": "crosstalk.tenant_id=globex"})
    token = context.attach(ctx)
    try:
        tracer.start_span("anything").end()  # type: ignore[attr-defined]
    finally:
        context.detach(token)
    [span] = exported.get_finished_spans()
    assert (span.attributes or {})[TENANT_ATTRIBUTE] == "globex"


def test_an_empty_tenant_is_refused() -> None:
    with pytest.raises(ValueError), tenant(""):
        pass
