"""End to end with the real libraries: the OpenAI SDK, instrumented by opentelemetry-instrumentation-openai-v2,
calls an OpenAI-compatible test server on loopback; the real OTLP/HTTP exporter sends the spans to
crosstalk's receiver, which maps them and runs the detectors in-process. The server then leaks one
tenant's prompt into another tenant's answer, and the alert names both."""

from __future__ import annotations

import gzip
import io
import random
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from schemas.events import Request, Response
from streams.embedded.output import EmbeddedOutput
from streams.inputs.otlp_http import OtlpReceiver
from streams.outputs import JsonlOutput
from streams.settings import Settings
from tests.support.chatserver import ANSWER
from tests.support.chatserver import ChatServer as BaseChatServer
from tests.support.otlp import export_request, span_of

openai = pytest.importorskip("openai")
pytest.importorskip("opentelemetry.instrumentation.openai_v2")

WORDS = """ledger invoice quarterly margin forecast vendor audit payroll ticket cluster shard replica token gradient
kernel tensor bucket region tenant session cache page prefill decode window budget latency throughput
contract renewal pipeline merge branch commit rollback deploy canary metric alert pager runbook incident""".split()  # noqa: SIM905


def private_text(seed: int, words: int = 120) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) + str(rng.randrange(1000)) for _ in range(words))


class ChatServer(BaseChatServer):
    """`leak_from` makes the next answer another tenant's last prompt (the stale-KV failure as the client sees
    it: HTTP 200, someone else's text)."""

    def __init__(self) -> None:
        super().__init__()
        self.last_prompt: dict[str, str] = {}
        self.leak_from: str | None = None

    def answer(self, body: dict[str, Any], prompt: str, headers: Any) -> str:
        if self.leak_from is not None:
            content = self.last_prompt[self.leak_from]
            self.leak_from = None
        else:
            content = ANSWER
        self.last_prompt[body.get("user", "?")] = prompt
        return content


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    s = ChatServer()
    s.start()
    yield s
    s.stop()


SETTINGS = Settings(detection={"overlap_warmup_docs": 0, "overlap_warmup_s": 0.0})


def test_openai_sdk_spans_through_the_receiver_raise_a_cross_tenant_alert(
    chat_server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    # The gateway's part, as docs/connect.md shows it: the public helper puts the tenant on GenAI spans.
    from streams.integrations.otel import TenantSpanProcessor, tenant

    alerts = io.BytesIO()
    output = EmbeddedOutput(SETTINGS, alerts, io.BytesIO())
    receiver = OtlpReceiver(SETTINGS, output)
    port = receiver.start_in_thread()
    # openai-v2 2.4b0 with util-genai 1.1b0 sets no server.address on the span: the deployment names its
    # cache domain as a resource attribute (OTEL_RESOURCE_ATTRIBUTES or the Collector's resource processor).
    resource = Resource.create({"service.name": "gateway", "crosstalk.cache_domain": "glm53-pd-1"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(TenantSpanProcessor())
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")))
    instrumentor = OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{chat_server.port}/v1", api_key="test", max_retries=0)

    def chat(who: str, text: str) -> str:
        with tenant(who):
            r = client.chat.completions.create(model="glm-5.3", messages=[{"role": "user", "content": text}], user=who)
        return r.choices[0].message.content or ""

    try:
        for i in range(3):
            chat("acme", private_text(100 + i))
            chat("globex", private_text(200 + i))
        chat_server.leak_from = "acme"
        leaked = chat("globex", private_text(300))
        assert leaked == private_text(102)  # the server really returned acme's last prompt to globex
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
        receiver.stop_thread()
        output.close()

    assert receiver.counters["spans.mapped"] == 7 and not [k for k in receiver.counters if k.startswith("rejects")]
    result = output.runner.result
    assert result.events["request"] == result.events["response"] == 7
    found = [a for a in result.alerts if a.kind == "cross_tenant_contamination"]
    assert found, [a.kind for a in result.alerts]
    alert = found[0]
    assert (alert.tenant_id, alert.source_tenant_id) == ("globex", "acme")
    assert alert.severity in ("high", "critical")
    assert alert.cache_domain == "glm53-pd-1"
    # the alert went out as JSON Lines and holds no text of either tenant
    out = alerts.getvalue().decode()
    assert alert.alert_id in out and private_text(102).split()[0] not in out


def test_json_encoding_over_http_and_a_bad_payload(tmp_path: Any) -> None:
    events = io.BytesIO()
    rejects = io.BytesIO()
    receiver = OtlpReceiver(SETTINGS, JsonlOutput(events, rejects))
    port = receiver.start_in_thread()
    try:
        good = span_of(
            {"request_id": "r-1", "model": "m", "tenant_id": "acme", "prompt_tokens": 9, "ts": 100.0},
            {"model": "m", "cache_domain": "d1", "status_code": 200, "ts": 101.5, "output_text": private_text(1)},
        )
        no_tenant = span_of(
            {"request_id": "r-2", "model": "m", "tenant_id": "x", "prompt_tokens": 9, "ts": 100.0},
            {"model": "m", "cache_domain": "d1", "status_code": 200, "ts": 101.0},
        )
        no_tenant["attributes"] = [a for a in no_tenant["attributes"] if a["key"] != "crosstalk.tenant_id"]
        url = f"http://127.0.0.1:{port}/v1/traces"
        r = httpx.post(
            url, content=orjson.dumps(export_request([good, no_tenant])), headers={"content-type": "application/json"}
        )
        assert r.status_code == 200
        assert r.json()["partialSuccess"]["rejectedSpans"] == "1"
        assert "no_tenant" in r.json()["partialSuccess"]["errorMessage"]
        again = span_of(
            {"request_id": "r-3", "model": "m", "tenant_id": "acme", "prompt_tokens": 9, "ts": 102.0},
            {"model": "m", "cache_domain": "d1", "status_code": 200, "ts": 103.0},
        )
        zipped = gzip.compress(orjson.dumps(export_request([again])))
        headers = {"content-type": "application/json", "content-encoding": "gzip"}
        assert httpx.post(url, content=zipped, headers=headers).status_code == 200
        bad = httpx.post(url, content=b"\x0a\xff\xff", headers={"content-type": "application/x-protobuf"})
        assert bad.status_code == 400 and "not_otlp" in bad.text
        counters = httpx.get(f"http://127.0.0.1:{port}/counters").json()
        assert counters["rejects.no_tenant"] == 1 and counters["rejects.not_otlp"] == 1
    finally:
        receiver.stop_thread()
    lines = [orjson.loads(x) for x in events.getvalue().splitlines()]
    assert [(e["type"], e["request_id"]) for e in lines] == [
        ("request", "r-1"),
        ("response", "r-1"),
        ("request", "r-3"),
        ("response", "r-3"),
    ]
    parsed = Response.model_validate_json(orjson.dumps(lines[1]))
    assert parsed.output_fingerprint is not None and parsed.output_text is None
    assert Request.model_validate_json(orjson.dumps(lines[0])).tenant_id == "acme"
    rej = [orjson.loads(x) for x in rejects.getvalue().splitlines()]
    assert [r["reason"] for r in rej] == ["no_tenant", "not_otlp"]


def test_oversized_and_compression_bomb_bodies_get_413() -> None:
    settings = Settings(otlp={"max_body_bytes": 4096})
    receiver = OtlpReceiver(settings, JsonlOutput(io.BytesIO(), io.BytesIO()))
    port = receiver.start_in_thread()
    try:
        url = f"http://127.0.0.1:{port}/v1/traces"
        bomb = gzip.compress(b"{" + b" " * 5_000_000 + b"}")  # ~5 KB on the wire, 5 MB inflated
        r = httpx.post(url, content=bomb, headers={"content-type": "application/json", "content-encoding": "gzip"})
        assert r.status_code == 413
        r = httpx.post(url, content=b"x" * 10_000, headers={"content-type": "application/x-protobuf"})
        assert r.status_code == 413
        assert receiver.counters["rejects.oversized"] == 2 and receiver.counters["requests"] == 0
    finally:
        receiver.stop_thread()
