"""Issue 25 through the real OTLP/HTTP receiver: one bad span is a per-span reject answered as
partialSuccess (the rest of the batch is processed), spans the detection core refuses are named there
too, and the real OTLP exporter sees success for a batch that carries a bad span."""

from __future__ import annotations

import io
import time
from typing import Any

import httpx
import orjson
import pytest
from otlp_hostile import CASES, T_NOW, batch, good_span, with_attr

from streams.embedded.output import EmbeddedOutput
from streams.inputs.otlp_http import OtlpReceiver
from streams.outputs import JsonlOutput
from streams.settings import Settings
from tests.support.otlp import export_request

SETTINGS = Settings(detection={"overlap_warmup_docs": 0, "overlap_warmup_s": 0.0})
JSON = {"content-type": "application/json"}


class Served:
    def __init__(self, receiver: OtlpReceiver, events: io.BytesIO, rejects: io.BytesIO) -> None:
        self.receiver, self.events, self.rejects = receiver, events, rejects
        self.url = f"http://127.0.0.1:{receiver.port}"

    def post(self, body: bytes, **headers: str) -> httpx.Response:
        return httpx.post(f"{self.url}/v1/traces", content=body, headers={**JSON, **headers}, timeout=60)

    def event_ids(self) -> list[tuple[str, str]]:
        return [(e["type"], e["request_id"]) for e in map(orjson.loads, self.events.getvalue().splitlines())]

    def reject_reasons(self) -> list[str]:
        return [orjson.loads(x)["reason"] for x in self.rejects.getvalue().splitlines()]


@pytest.fixture
def jsonl() -> Any:
    events, rejects = io.BytesIO(), io.BytesIO()
    receiver = OtlpReceiver(SETTINGS, JsonlOutput(events, rejects))
    receiver.start_in_thread()
    yield Served(receiver, events, rejects)
    receiver.stop_thread()


@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_span_is_a_partial_success_and_the_rest_of_the_batch_is_mapped(jsonl: Served, case: str) -> None:
    r = jsonl.post(batch(case))
    assert r.status_code == 200, r.text
    partial = r.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert partial["errorMessage"].startswith(CASES[case] + ":")
    assert jsonl.event_ids() == [
        ("request", "good-1"),
        ("response", "good-1"),
        ("request", "good-2"),
        ("response", "good-2"),
    ]
    assert jsonl.reject_reasons() == [CASES[case]]
    counters = httpx.get(f"{jsonl.url}/counters").json()
    assert counters[f"rejects.{CASES[case]}"] == 1 and counters["spans.mapped"] == 2


def test_protobuf_infinite_double_is_a_partial_success(jsonl: Served) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )
    from test_otlp_mapping import BASE, proto_request

    data = proto_request({**BASE, "crosstalk.tenant_id": "acme"})
    req = ExportTraceServiceRequest()
    req.ParseFromString(data)
    span = req.resource_spans[0].scope_spans[0].spans[0]
    bad = req.resource_spans[0].scope_spans[0].spans.add()
    bad.CopyFrom(span)
    bad.span_id = bytes.fromhex("00f067aa0ba902b8")
    for kv in bad.attributes:
        if kv.key == "crosstalk.prompt_tokens":
            kv.value.double_value = float("inf")
    r = httpx.post(
        f"{jsonl.url}/v1/traces",
        content=req.SerializeToString(),
        headers={"content-type": "application/x-protobuf"},
    )
    assert r.status_code == 200
    resp = ExportTraceServiceResponse()
    resp.ParseFromString(r.content)
    assert resp.partial_success.rejected_spans == 1 and "bad_number" in resp.partial_success.error_message
    assert len(jsonl.event_ids()) == 2


def test_a_span_without_ids_is_a_span_reject_not_a_refused_payload(jsonl: Served) -> None:
    no_ids = good_span("no-ids")
    del no_ids["traceId"], no_ids["spanId"]
    r = jsonl.post(orjson.dumps(export_request([no_ids, good_span("ok")])))
    assert r.status_code == 200 and r.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert jsonl.event_ids() == [("request", "ok"), ("response", "ok")]


# --- spans the detection core refuses ---------------------------------------------------------------------


@pytest.fixture
def embedded() -> Any:
    alerts, rejects = io.BytesIO(), io.BytesIO()
    output = EmbeddedOutput(SETTINGS, alerts, rejects)
    receiver = OtlpReceiver(SETTINGS, output)
    receiver.start_in_thread()
    yield Served(receiver, alerts, rejects)
    receiver.stop_thread()
    output.close()


def test_core_rejects_future_duplicate_and_canary_tenant_are_in_partial_success(embedded: Served) -> None:
    first = embedded.post(orjson.dumps(export_request([good_span("r-1")])))
    assert first.status_code == 200 and first.json() == {}

    future = good_span("r-future", t=time.time() + 30 * 86400)
    canary = with_attr(
        good_span("r-canary", tenant="acme"),
        "crosstalk.canaries",
        {"arrayValue": {"values": [{"stringValue": "CTK-CANARY-" + "ab" * 16}]}},
    )
    again = embedded.post(orjson.dumps(export_request([good_span("r-1"), future, canary, good_span("r-2")])))
    assert again.status_code == 200
    partial = again.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "3"
    for reason in ("duplicate", "future_ts", "canary_tenant"):
        assert reason + ":" in partial["errorMessage"]
    assert set(embedded.reject_reasons()) == {"duplicate", "future_ts", "canary_tenant"}
    result = embedded.receiver.output.runner.result
    assert result.events["request"] == 2  # r-1 once, r-2


# --- the real OTLP exporter ------------------------------------------------------------------------------


def test_real_exporter_batch_with_an_infinite_token_count_is_exported(jsonl: Served) -> None:
    """The SDK exporter does not retry a 500: before, the good spans of the batch were lost with it."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExportResult

    provider = TracerProvider(resource=Resource.create({"crosstalk.cache_domain": "d1"}))
    tracer = provider.get_tracer("test")
    spans = []
    for rid, tokens in (("sdk-1", 12), ("sdk-bad", float("inf")), ("sdk-2", 7)):
        start = int(T_NOW * 1e9)
        span = tracer.start_span(
            "chat m",
            start_time=start,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "crosstalk.tenant_id": "acme",
                "crosstalk.request_id": rid,
                "gen_ai.usage.input_tokens": tokens,
            },
        )
        span.end(end_time=start + 1_000_000_000)
        spans.append(span)
    exporter = OTLPSpanExporter(endpoint=f"{jsonl.url}/v1/traces")
    try:
        assert exporter.export(spans) == SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
        provider.shutdown()
    assert sorted({rid for _, rid in jsonl.event_ids()}) == ["sdk-1", "sdk-2"]
    assert jsonl.reject_reasons() == ["bad_number"]


def test_a_span_the_core_refuses_leaves_no_canary_marker_in_the_rejects(embedded: Served) -> None:
    """Issue 42: the canary_tenant reject kept the whole event, marker included; now its ids, a size and a
    hash, and the reason."""
    marker = "CTK-CANARY-" + "5e" * 16
    canary = with_attr(good_span("r-canary", tenant="acme"), "crosstalk.canaries",
                       {"arrayValue": {"values": [{"stringValue": marker}]}})  # fmt: skip
    r = embedded.post(orjson.dumps(export_request([canary])))
    assert r.json()["partialSuccess"]["errorMessage"].startswith("canary_tenant:")
    stored = embedded.rejects.getvalue().decode()
    assert marker not in stored and "5e5e5e5e" not in stored
    (reject,) = map(orjson.loads, stored.splitlines())
    evidence = orjson.loads(reject["raw"])
    assert reject["reason"] == "canary_tenant" and evidence["request_id"] == "r-canary"
    assert len(evidence["sha256"]) == 64 and evidence["withheld_bytes"] > 0 and "canaries" not in evidence
