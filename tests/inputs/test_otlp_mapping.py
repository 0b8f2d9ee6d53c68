"""OTLP GenAI spans -> crosstalk events: both encodings, the configurable mapping, rejects, replay."""

from __future__ import annotations

import io
from pathlib import Path

import orjson
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from detectors.monitor import make_fingerprinter
from schemas.events import Request, Response
from streams.embedded.runner import EmbeddedRunner
from streams.inputs.otlp import SpanMapper, spans_from_json
from streams.settings import Settings
from streams.sim.simulate import SimConfig, iter_simulation
from tests.support.otlp import export_request, span_of, to_otlp_lines

SECRET = "the quarterly numbers of acme corp are confidential and must never reach another customer ever again"


def _kv(key: str, value: object) -> KeyValue:
    if isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(int_value=value))
    if isinstance(value, list):
        values = [AnyValue(string_value=v) for v in value]
        return KeyValue(key=key, value=AnyValue(array_value=ArrayValue(values=values)))
    return KeyValue(key=key, value=AnyValue(string_value=str(value)))


def proto_request(attrs: dict[str, object], resource: dict[str, object] | None = None, **span_kw: object) -> bytes:
    span = Span(
        trace_id=bytes.fromhex("4bf92f3577b34da6a3ce929d0e0e4736"),
        span_id=bytes.fromhex("00f067aa0ba902b7"),
        name="chat glm-5.3",
        start_time_unix_nano=1_787_817_600_000_000_000,
        end_time_unix_nano=1_787_817_605_200_000_000,
        attributes=[_kv(k, v) for k, v in attrs.items()],
        **span_kw,  # type: ignore[arg-type]
    )
    rs = ResourceSpans(scope_spans=[ScopeSpans(spans=[span])])
    rs.resource.attributes.extend(_kv(k, v) for k, v in (resource or {}).items())
    return ExportTraceServiceRequest(resource_spans=[rs]).SerializeToString()


BASE = {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "glm-5.3",
    "gen_ai.usage.input_tokens": 1,
    "gen_ai.usage.output_tokens": 311,
    "gen_ai.response.finish_reasons": ["stop"],
    "gen_ai.conversation.id": "s-9",
    "crosstalk.prompt_tokens": 812_345,
    "crosstalk.cache_domain": "glm53-pd-1",
    "gen_ai.input.messages": orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": SECRET}]}]).decode(),
    "gen_ai.output.messages": orjson.dumps(
        [{"role": "assistant", "parts": [{"type": "text", "content": "hello"}], "finish_reason": "stop"}]
    ).decode(),
}


def mapper(**otlp: object) -> SpanMapper:
    s = Settings(otlp=otlp)
    return SpanMapper(s.otlp, make_fingerprinter(s.detection))


def test_protobuf_span_maps_to_request_and_response_with_fingerprints_and_no_text() -> None:
    m = mapper()
    out = m.map_payload(proto_request(BASE, resource={"user.id": "acme"}), "otlp_proto")
    assert not out.rejects
    req, resp = out.events
    assert isinstance(req, Request) and isinstance(resp, Response)
    assert req.request_id == resp.request_id == "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
    assert req.tenant_id == resp.tenant_id == "acme"  # from the resource: span attributes first, then resource
    assert req.prompt_tokens == 812_345 and resp.usage is not None and resp.usage.input_tokens == 1
    assert resp.cache_domain == "glm53-pd-1" and resp.status_code == 200 and resp.finish_reason == "stop"
    assert req.session_id == "s-9" and resp.duration_ms == pytest.approx(5200.0)
    assert req.ts == pytest.approx(1_787_817_600.0) and resp.ts == pytest.approx(1_787_817_605.2)
    assert req.traceparent == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    fp = make_fingerprinter(Settings().detection)
    # A prompt's print carries its name-like words and its numbers, keyed (none here: known to be none, ADR 0019, 0027).
    assert req.prompt_fingerprint == fp.fingerprint(SECRET).model_copy(update={"tools": [], "identifiers": []})
    assert req.prompt_text is None and resp.output_text is None
    assert "quarterly" not in req.model_dump_json() + resp.model_dump_json()


def test_json_and_protobuf_encodings_give_the_same_events() -> None:
    from google.protobuf.json_format import MessageToDict

    data = proto_request(BASE, resource={"crosstalk.tenant_id": "acme"})
    msg = ExportTraceServiceRequest()
    msg.ParseFromString(data)
    as_json = MessageToDict(msg)
    # OTLP/JSON ids are hex, not protobuf-JSON's base64 (OTLP spec, JSON Protobuf Encoding).
    for rs in as_json["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                sp["traceId"] = "4bf92f3577b34da6a3ce929d0e0e4736"
                sp["spanId"] = "00f067aa0ba902b7"
    a = mapper().map_payload(data, "otlp_proto").events
    b = mapper().map_payload(orjson.dumps(as_json), "auto").events
    assert [e.model_dump() for e in a] == [e.model_dump() for e in b]
    # and base64 ids (a generic protobuf-JSON encoder) are understood too
    c = mapper().map_payload(orjson.dumps(MessageToDict(msg)), "otlp_json").events
    assert c[0].request_id == a[0].request_id


def test_configurable_mapping_attributes() -> None:
    attrs = {**BASE, "app.customer": "globex", "app.pool": "pool-7", "app.rid": "r-77", "app.ttft": 41.0}
    del attrs["crosstalk.cache_domain"]
    m = mapper(
        tenant_attributes=["app.customer"],
        cache_domain_attributes=["app.pool"],
        request_id_attributes=["app.rid"],
        ttft_ms_attributes=["app.ttft"],
    )
    req, resp = m.map_payload(proto_request(attrs), "otlp_proto").events
    assert (req.tenant_id, resp.cache_domain, req.request_id, resp.ttft_ms) == ("globex", "pool-7", "r-77", 41.0)


@pytest.mark.parametrize(
    ("drop", "reason"),
    [("crosstalk.tenant_id", "no_tenant"), ("gen_ai.request.model", "no_model")],
)
def test_unmappable_spans_are_rejected_with_reason_and_no_values(drop: str, reason: str) -> None:
    attrs = {**BASE, "crosstalk.tenant_id": "acme"}
    del attrs[drop]
    out = mapper().map_payload(proto_request(attrs), "otlp_proto")
    assert not out.events and [r.reason for r in out.rejects] == [reason]
    assert "quarterly" not in orjson.dumps(out.rejects[0].record()).decode()
    assert out.rejects[0].span_id == "00f067aa0ba902b7"


def test_non_genai_spans_are_skipped_and_garbage_is_a_reject() -> None:
    m = mapper()
    out = m.map_payload(proto_request({"http.request.method": "GET"}), "otlp_proto")
    assert not out.events and not out.rejects and out.skipped["not_genai_inference"] == 1
    bad = m.map_payload(b"\x0a\xff\xff\xff", "otlp_proto")
    assert [r.reason for r in bad.rejects] == ["not_otlp"]
    bad = m.map_payload(b"{not json", "auto")
    assert [r.reason for r in bad.rejects] == ["not_json"]


def test_error_span_without_status_attribute_is_a_5xx_and_no_domain_falls_back_to_server_address() -> None:
    attrs = {**BASE, "crosstalk.tenant_id": "acme", "server.address": "10.0.0.5", "server.port": 30000}
    del attrs["crosstalk.cache_domain"]
    out = mapper().map_payload(proto_request(attrs, status=Status(code=2)), "otlp_proto")
    resp = out.events[1]
    assert resp.status_code == 500 and resp.cache_domain == "10.0.0.5:30000"


def test_legacy_span_events_and_indexed_attributes_carry_content() -> None:
    span = span_of(
        {"request_id": "r1", "model": "m", "tenant_id": "t", "prompt_tokens": 5, "ts": 1.0},
        {"model": "m", "cache_domain": "d", "status_code": 200, "ts": 2.0},
    )
    span["attributes"].append({"key": "gen_ai.completion.0.content", "value": {"stringValue": SECRET}})
    span["events"] = [
        {"name": "gen_ai.user.message", "attributes": [{"key": "content", "value": {"stringValue": SECRET}}]}
    ]
    (s,) = spans_from_json(export_request([span]))
    req, resp = mapper().map_spans([s]).events
    fp = make_fingerprinter(Settings().detection).fingerprint(SECRET)
    known = {"identifiers": []}  # the numbers are read from both texts (none here)
    assert req.prompt_fingerprint == fp.model_copy(update={"tools": [], **known})
    assert resp.output_fingerprint == fp.model_copy(update=known)


def _edge_fingerprinted(events: list[dict], settings: Settings) -> list[dict]:
    """What a gateway that fingerprints at the edge (GatewayProducer) writes in crosstalk's own format."""
    fp = make_fingerprinter(settings.detection)
    out = []
    for ev in events:
        ev = dict(ev)
        if ev.get("prompt_text") is not None:
            ev["prompt_fingerprint"] = fp.fingerprint(ev.pop("prompt_text")).model_dump(mode="json")
        if ev.get("output_text") is not None:
            ev["output_fingerprint"] = fp.fingerprint(ev.pop("output_text")).model_dump(mode="json")
        out.append(ev)
    return out


@pytest.mark.slow  # a simulated incident replayed twice (events and spans)
def test_replay_of_an_otlp_json_incident_gives_the_same_alert_ids(tmp_path: Path) -> None:
    events_it, _ = iter_simulation(SimConfig(seed=5, duration_s=240.0, fault_at_s=60.0, rate=2.0, tenants=8))
    events = [orjson.loads(orjson.dumps(e)) for e in events_it]
    settings = Settings(ingest={"reorder_lateness_s": 3600.0})
    native = tmp_path / "events.jsonl"
    native.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in _edge_fingerprinted(events, settings)))
    otlp = tmp_path / "otlp.jsonl"
    otlp.write_bytes(b"".join(line + b"\n" for line in to_otlp_lines(events)))
    assert b"resourceSpans" in otlp.read_bytes()

    a = EmbeddedRunner(settings, rejects_out=io.BytesIO()).run_files([str(native)])
    b = EmbeddedRunner(settings, rejects_out=io.BytesIO()).run_files([str(otlp)], format="otlp-json")
    assert not a.rejects and not b.rejects
    assert a.events == b.events
    kinds = {al.kind for al in a.alerts}
    assert {"overlong_accepted", "cross_tenant_contamination"} & kinds or "canary_leak" in kinds
    assert len(a.alerts) > 3
    assert sorted(al.alert_id for al in b.alerts) == sorted(al.alert_id for al in a.alerts)


@pytest.mark.slow  # crosstalk replay as a subprocess on a simulated incident's spans
def test_cli_replay_format_otlp_json(tmp_path: Path) -> None:
    from streams.cli.main import main as cli_main

    events_it, _ = iter_simulation(SimConfig(seed=3, duration_s=120.0, fault_at_s=30.0, rate=2.0, tenants=6))
    otlp = tmp_path / "spans.jsonl"
    otlp.write_bytes(b"".join(line + b"\n" for line in to_otlp_lines(orjson.loads(orjson.dumps(e)) for e in events_it)))
    alerts, rejects = tmp_path / "alerts.jsonl", tmp_path / "rejects.jsonl"
    args = ["replay", "--format", "otlp-json", str(otlp), "--alerts-out", str(alerts), "--rejects", str(rejects)]
    assert cli_main([*args, "--quiet", "--no-progress"]) == 0
    got = [orjson.loads(x) for x in alerts.read_bytes().splitlines()]
    assert any(a["kind"] != "capacity_gap" for a in got)
    assert not rejects.exists()
