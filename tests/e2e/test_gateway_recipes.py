"""The gateway recipes of docs/connect.md, run from the document's own text (tests/support/recipes.py).

Envoy AI Gateway: the Helm values the document shows (`envoy-values`) say where the spans go, which request
header becomes which span attribute, and the resource attributes. The spans are the ones Envoy's OpenInference
recorder sets for a chat completion, made by the OpenTelemetry SDK with that resource and the attribute the
header mapping names, and sent by its OTLP/HTTP exporter to the receiver `crosstalk otlp` runs (embedded).
"""

from __future__ import annotations

import io
from urllib.parse import urlsplit

import orjson
import yaml
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from streams.embedded.output import EmbeddedOutput
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.settings import Settings
from tests.support.gateways import envoy_openinference_attrs
from tests.support.recipes import recipe

SECRET = "initech's layoffs of two hundred staff in the austin office are announced on monday, not before"
WARM = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0.0}


def envoy_env() -> dict[str, str]:
    values = yaml.safe_load(recipe("envoy-values"))
    return {e["name"]: str(e["value"]) for e in values["extProc"]["extraEnvVars"]}


def test_the_envoy_recipe_maps_a_tenant_header_and_raises_the_leak() -> None:
    env = envoy_env()
    assert env["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/protobuf"
    headers = dict(pair.split(":", 1) for pair in env["OTEL_AIGW_SPAN_REQUEST_HEADER_ATTRIBUTES"].split(","))
    tenant_attr = headers["x-tenant-id"]
    resource = dict(pair.split("=", 1) for pair in env["OTEL_RESOURCE_ATTRIBUTES"].split(","))
    path = urlsplit(env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]).path

    alerts = io.BytesIO()
    output = EmbeddedOutput(Settings(detection=WARM), alerts, io.BytesIO())
    receiver = OtlpReceiver(Settings(detection=WARM), output)
    port = receiver.start_in_thread(0)
    try:
        provider = TracerProvider(resource=Resource.create({"service.name": "ai-gateway", **resource}))
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}{path}")
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("envoyproxy/ai-gateway")
        for tenant, prompt, answer in (
            ("acme", SECRET, "Understood, I will keep that to myself."),
            ("globex", "any news from texas?", SECRET),  # the stale KV: acme's prompt in globex's answer
        ):
            with tracer.start_as_current_span("ChatCompletion") as span:
                span.set_attributes({**envoy_openinference_attrs(prompt, answer), tenant_attr: tenant})  # type: ignore[arg-type]
        provider.shutdown()
    finally:
        receiver.stop_thread()
        output.close()
    assert receiver.counters["spans.mapped"] == 2, dict(receiver.counters)
    found = [orjson.loads(line) for line in alerts.getvalue().splitlines()]
    leak = [a for a in found if a["kind"] == "cross_tenant_contamination"]
    assert leak, found
    assert leak[0]["tenant_id"] == "globex" and leak[0]["source_tenant_id"] == "acme"
    assert leak[0]["cache_domain"] == resource["crosstalk.cache_domain"]
