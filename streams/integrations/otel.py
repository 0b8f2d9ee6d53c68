"""Put the tenant on your gateway's GenAI spans, for `crosstalk otlp` (docs/connect.md).

Instrumentations such as opentelemetry-instrumentation-openai-v2 know the model and the tokens but not
who is calling. The gateway knows: it says so once per request, and every GenAI span started inside
gets the tenant as `crosstalk.tenant_id` (the first of `otlp.tenant_attributes`).

    from opentelemetry import trace
    from streams.integrations.otel import TenantSpanProcessor, tenant

    trace.get_tracer_provider().add_span_processor(TenantSpanProcessor())
    with tenant("acme"):                     # around the LLM call, in the request handler
        client.chat.completions.create(...)

The tenant travels as W3C baggage (`crosstalk.tenant_id`), so a tenant set by an upstream service
(propagated in the `baggage` header) is honoured too; a contextvar carries it where no OpenTelemetry
context is attached. Only this module's names are public; it needs opentelemetry-sdk and nothing else.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import baggage, context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

__all__ = ["TENANT_ATTRIBUTE", "TENANT_BAGGAGE_KEY", "TenantSpanProcessor", "current_tenant", "tenant"]

TENANT_ATTRIBUTE = "crosstalk.tenant_id"  # what `crosstalk otlp` reads first (otlp.tenant_attributes)
TENANT_BAGGAGE_KEY = "crosstalk.tenant_id"
_tenant: contextvars.ContextVar[str | None] = contextvars.ContextVar("crosstalk_tenant", default=None)


@contextmanager
def tenant(tenant_id: str) -> Iterator[None]:
    """Everything started inside this block (in this task or thread) belongs to `tenant_id`."""
    if not tenant_id:
        raise ValueError("tenant id must be a non-empty string")
    var_token = _tenant.set(tenant_id)
    ctx_token = context.attach(baggage.set_baggage(TENANT_BAGGAGE_KEY, tenant_id))
    try:
        yield
    finally:
        context.detach(ctx_token)
        _tenant.reset(var_token)


def current_tenant(parent_context: Any = None) -> str | None:
    """The tenant from baggage (this process's or an upstream's), else from the contextvar."""
    value = baggage.get_baggage(TENANT_BAGGAGE_KEY, parent_context)
    if value:
        return str(value)
    return _tenant.get()


class TenantSpanProcessor(SpanProcessor):
    """Sets `attribute` (crosstalk.tenant_id) on each span that starts while a tenant is known.

    genai_only: only spans that carry `gen_ai.operation.name` when they start (openai-v2 and
    opentelemetry-util-genai set it then); False tags every span (for instrumentations that set it
    later). A span that already names a tenant keeps it."""

    def __init__(self, attribute: str = TENANT_ATTRIBUTE, genai_only: bool = True) -> None:
        self.attribute = attribute
        self.genai_only = genai_only

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        attrs = span.attributes or {}
        if self.genai_only and "gen_ai.operation.name" not in attrs:
            return
        if self.attribute in attrs:
            return
        who = current_tenant(parent_context)
        if who:
            span.set_attribute(self.attribute, who)

    def on_end(self, span: ReadableSpan) -> None:
        return None

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
