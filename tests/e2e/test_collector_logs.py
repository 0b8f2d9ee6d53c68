"""Log records through the OpenTelemetry Collector: deploy/otel-collector.yaml's logs pipeline, as shipped, carries
the `gen_ai.client.inference.operation.details` records of a gateway in `event_only` mode (content in the record,
none on the span) to `crosstalk otlp`'s /v1/logs, beside the spans to /v1/traces; the receiver joins them.

The Collector is the real one scripts/test.sh builds from deploy/otelcol-builder.yaml; the gateway is the OpenAI
SDK instrumented by opentelemetry-instrumentation-openai-v2 with docs/connect.md's `otel-logs-env` content mode,
its spans and records sent by the SDK's own OTLP/HTTP exporters to the Collector. Before the logs pipeline the
Collector had none: the records never left it, and the leak had no content to be found by.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

from streams.embedded.output import EmbeddedOutput
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.settings import Settings
from tests.support.chatserver import LeakyServer
from tests.support.recipes import commands, exports, leading_env, recipe
from tests.support.workerproc import free_port

openai = pytest.importorskip("openai")
pytest.importorskip("opentelemetry.instrumentation.openai_v2")

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("CROSSTALK_OTELCOL", ROOT / ".tools" / "bin" / "otelcol-crosstalk"))
CONFIG = ROOT / "deploy" / "otel-collector.yaml"
WARM = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0.0}
SECRET = "the acme payroll export for march lists every salary above two hundred thousand with home addresses"


def _need_collector() -> None:
    if not BINARY.exists():
        msg = f"no OpenTelemetry Collector at {BINARY} (scripts/test.sh builds it with Go)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _until(cond: Any, timeout_s: float, what: Any) -> None:
    """Wait for `cond()`; `what()` says what was waited for, read when the time is up."""
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what()}")
        time.sleep(0.2)


def test_the_shipped_config_has_a_logs_pipeline_for_every_route() -> None:
    import yaml

    pipelines = yaml.safe_load(CONFIG.read_text())["service"]["pipelines"]
    assert pipelines["logs"]["receivers"] == ["otlp"]
    assert pipelines["logs"]["exporters"] == "${env:CROSSTALK_LOGS_EXPORTERS:-[otlp_http/crosstalk]}"
    _need_collector()
    routes = [("[kafka]", None), ("[otlp_http/crosstalk]", None), ("[kafka]", "[debug]")]
    for route, logs in routes:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | {"CROSSTALK_EXPORTERS": route}
        if logs is not None:
            env["CROSSTALK_LOGS_EXPORTERS"] = logs
        out = subprocess.run(
            [str(BINARY), "validate", f"--config={CONFIG}"], env=env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, (route, out.stderr)


def test_event_only_content_through_the_collector_reaches_v1_logs_and_raises_the_leak(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _need_collector()
    env = exports(recipe("otel-logs-env"))  # docs/connect.md's content mode and signal paths
    for name in ("OTEL_SEMCONV_STABILITY_OPT_IN", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
        monkeypatch.setenv(name, env[name])
    assert env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] == "event_only"
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from streams.integrations.otel import TenantSpanProcessor, tenant

    # crosstalk otlp as the document's recipe starts it (the receiver `crosstalk otlp` runs, in-process here:
    # detectors in-process, alerts to a buffer)
    [receiver_cmd, collector_cmd] = commands(recipe("collector-logs"))
    receiver_env, receiver_args = leading_env(receiver_cmd)
    assert receiver_args == ["crosstalk", "otlp"]
    for name, value in receiver_env.items():
        monkeypatch.setenv(name, value)
    settings = Settings(detection=WARM)
    assert settings.otlp.logs_expected  # spans wait for their records from the start: the Collector may reorder
    alerts = io.BytesIO()
    output = EmbeddedOutput(settings, alerts, io.BytesIO())
    receiver = OtlpReceiver(settings, output)
    port = receiver.start_in_thread()
    # the Collector as the recipe starts it, with the shipped config unchanged
    route, cmd = leading_env(collector_cmd)
    assert cmd[1:] == ["--config", "deploy/otel-collector.yaml"]
    http_port, grpc_port = free_port(), free_port()
    traces_path = urlsplit(env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]).path
    logs_path = urlsplit(env["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"]).path
    coll_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CROSSTALK_"))} | route
    coll_env |= {
        "OTLP_HTTP_ENDPOINT": f"127.0.0.1:{http_port}",
        "OTLP_GRPC_ENDPOINT": f"127.0.0.1:{grpc_port}",
        "CROSSTALK_OTLP_ENDPOINT": f"http://127.0.0.1:{port}{traces_path}",
        "CROSSTALK_OTLP_LOGS_ENDPOINT": f"http://127.0.0.1:{port}{logs_path}",
    }
    log = tmp_path / "collector.log"

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:]

    with log.open("wb") as fh:
        collector = subprocess.Popen([str(BINARY), "--config", str(CONFIG)], env=coll_env, stdout=fh, stderr=fh)
    server = LeakyServer()
    server.start()
    try:
        _until(lambda: _listening(http_port), 60, lambda: "the Collector\n" + tail())
        # the gateway: its spans and records to the Collector's OTLP/HTTP port, on the document's paths
        attributes = dict(pair.split("=", 1) for pair in env["OTEL_RESOURCE_ATTRIBUTES"].split(","))
        resource = Resource.create({"service.name": env["OTEL_SERVICE_NAME"], **attributes})
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(TenantSpanProcessor())
        spans = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{http_port}{traces_path}")
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        logger_provider = LoggerProvider(resource=resource)
        logs = OTLPLogExporter(endpoint=f"http://127.0.0.1:{http_port}{logs_path}")
        logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
        instrumentor = OpenAIInstrumentor()
        instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{server.port}/v1", api_key="test", max_retries=0)

        def chat(who: str, text: str) -> str:
            with tenant(who):
                r = client.chat.completions.create(
                    model="glm-5.3", messages=[{"role": "user", "content": text}], user=who
                )
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
        joined = receiver.joined.joiner.counters
        _until(lambda: joined["joined"] >= 3, 60, lambda: f"joins {dict(joined)} {dict(receiver.counters)}\n{tail()}")
    finally:
        collector.send_signal(signal.SIGTERM)
        collector.wait(60)
        receiver.stop_thread()
        output.close()
        server.stop()
    counters = receiver.counters
    assert counters["logs.requests"] >= 1 and counters["spans.mapped"] == 3, dict(counters)
    assert joined["joined"] == 3 and not any(k.startswith("alone.") for k in joined), dict(joined)
    found = [orjson.loads(line) for line in alerts.getvalue().splitlines()]
    leak = [a for a in found if a["kind"] == "cross_tenant_contamination"]
    assert leak and (leak[0]["tenant_id"], leak[0]["source_tenant_id"]) == ("globex", "acme"), found


def test_with_logs_expected_a_span_that_comes_before_any_record_waits_for_it() -> None:
    """The reordering the Collector's two pipelines cause, without it: the first call's span before its record."""
    from streams.inputs.otlp_decode import Span
    from streams.inputs.otlp_logs import DETAILS_EVENT, LogRecord
    from streams.outputs import FunctionOutput

    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m", "crosstalk.tenant_id": "acme"}
    for expected, joined in ((False, 0), (True, 1)):
        receiver = OtlpReceiver(Settings(otlp={"logs_expected": expected}), FunctionOutput(lambda ev: None))
        joiner = receiver.joined.joiner
        span = Span("ab" * 16, "cd" * 8, "chat m", 10**18, 10**18 + 1, attrs, {})
        first = joiner.on_spans([span], None, 0.0)
        assert len(first) == 1 - joined  # mapped at once (content lost), or waiting for its record
        rec = LogRecord("ab" * 16, "cd" * 8, DETAILS_EVENT, 10**18 + 1, dict(attrs), {}, None)
        joiner.on_logs([rec], None, 0.1)
        assert joiner.counters["joined"] == joined
