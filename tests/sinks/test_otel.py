"""OtelSink against a real OTLP/HTTP receiver on loopback that decodes the protobuf requests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from schemas.alert import Alert, IncidentResolved, Signal
from schemas.events import Request, Response, Usage
from schemas.exchange import Exchange
from streams.settings import OtelSettings
from streams.sinks.otel import OtelSink
from tests.support.otlpcollector import OtlpReceiver

T0 = 1_780_000_000.0
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN_ID = "00f067aa0ba902b7"


@pytest.fixture
def otlp() -> Iterator[OtlpReceiver]:
    r = OtlpReceiver()
    yield r
    r.stop()


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind)


def attrs(obj: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in obj.attributes}


def exchange(i: int, tenant: str, traceparent: str | None) -> Exchange:
    rid = f"req-{i}"
    req = Request(
        type="request",
        event_id=f"e-req-{i}",
        ts=T0 + i,
        request_id=rid,
        tenant_id=tenant,
        model="llama-3-70b",
        prompt_tokens=1200,
        session_id=f"sess-{i}",
        cache_domain="pool-1",
        traceparent=traceparent,
    )
    resp = Response(
        type="response",
        event_id=f"e-resp-{i}",
        ts=T0 + i + 0.75,
        request_id=rid,
        tenant_id=tenant,
        model="llama-3-70b",
        cache_domain="pool-1",
        status_code=200,
        session_id=f"sess-{i}",
        finish_reason="stop",
        usage=Usage(input_tokens=1200, output_tokens=300),
        ttft_ms=80.0,
        traceparent=traceparent,
    )
    return Exchange(ts=resp.ts, request=req, response=resp)


def alert(request_ids: list[str], ts: float, kind: str = "cross_tenant_contamination") -> Alert:
    return Alert(
        alert_id=f"al-{'-'.join(request_ids)}",
        ts=ts,
        kind=kind,  # type: ignore[arg-type]
        severity="critical",
        cache_domain="pool-1",
        tenant_id="tenant-a",
        source_tenant_id="tenant-b",
        request_ids=request_ids,
        score=0.93,
        evidence=[Signal(name="content_overlap", severity="critical", score=0.93)],
        summary="leak",
        group_key="cache_domain=pool-1,category=exposure",
        incident_id="inc-1",
        incident_severity="warning",
    )


def test_spans_and_metrics_over_otlp_http(otlp: OtlpReceiver) -> None:
    sink = OtelSink(
        OtelSettings(enabled=True, endpoint=otlp.endpoint, export_interval_s=3600, span_hold_s=5.0),
        wall_clock=lambda: T0 + 10.0,
    )
    sink.set_state_size_source(lambda: {"index": 42, "joins": 3})
    sink.set_lag_source(lambda: 7)
    sink.set_behind_source(lambda: 2.5)
    for t in ("request", "response", "response", "cache_stats"):
        sink.on_event(t)
    sink.on_reject("invalid", "ts: bad")

    tp = f"00-{TRACE_ID}-{PARENT_SPAN_ID}-01"
    ex_src = exchange(0, "tenant-b", traceparent=None)
    sink.on_exchange(ex_src, [])
    ex_victim = exchange(1, "tenant-a", traceparent=tp)
    leak = alert(["req-1", "req-0"], ts=ex_victim.ts)
    sink.on_exchange(ex_victim, [leak])
    sink.on_alert(leak)  # the runner tells every sink again; no second alert span
    later = alert(["req-0", "req-1"], ts=ex_victim.ts + 0.1, kind="capacity_gap")
    later = later.model_copy(update={"alert_id": "al-capacity"})
    sink.on_alert(later)  # domain-level alert within span_hold_s: events still land on both spans
    sink.close()

    spans = otlp.spans()
    by_name: dict[str, list[Any]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    assert sorted(by_name) == [
        "chat llama-3-70b",
        "crosstalk.alert capacity_gap",
        "crosstalk.alert cross_tenant_contamination",
    ]
    chats = {attrs(s)["crosstalk.request_id"]: s for s in by_name["chat llama-3-70b"]}
    victim = chats["req-1"]
    a = attrs(victim)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "llama-3-70b"
    assert a["gen_ai.usage.input_tokens"] == 1200 and a["gen_ai.usage.output_tokens"] == 300
    assert a["gen_ai.response.finish_reasons"] == ["stop"]
    assert a["gen_ai.conversation.id"] == "sess-1"
    assert a["crosstalk.tenant_id"] == "tenant-a" and a["crosstalk.cache_domain"] == "pool-1"
    assert a["crosstalk.prompt_tokens"] == 1200 and a["http.response.status_code"] == 200
    # Event time, and the producer's trace continued.
    assert victim.start_time_unix_nano == int((T0 + 1) * 1e9)
    assert victim.end_time_unix_nano == int((T0 + 1.75) * 1e9)
    assert victim.trace_id.hex() == TRACE_ID and victim.parent_span_id.hex() == PARENT_SPAN_ID
    assert chats["req-0"].parent_span_id == b""  # no traceparent: a root span

    assert [attrs(e)["crosstalk.alert.id"] for e in victim.events] == [leak.alert_id, "al-capacity"]
    assert all(e.name == "crosstalk.alert" for e in victim.events)
    assert [attrs(e)["crosstalk.alert.id"] for e in chats["req-0"].events] == [leak.alert_id, "al-capacity"]

    [alert_span] = by_name["crosstalk.alert cross_tenant_contamination"]
    aa = attrs(alert_span)
    assert aa["crosstalk.alert.id"] == leak.alert_id and aa["crosstalk.alert.severity"] == "critical"
    assert aa["crosstalk.incident.severity"] == "warning"  # one response on content alone: no page yet (ADR 0018)
    assert aa["crosstalk.source_tenant_id"] == "tenant-b" and aa["crosstalk.alert.score"] == pytest.approx(0.93)
    linked = {(lk.trace_id, lk.span_id) for lk in alert_span.links}
    assert linked == {(s.trace_id, s.span_id) for s in chats.values()}

    points = otlp.metric_points()
    for name in (
        "crosstalk.events",
        "crosstalk.rejects",
        "crosstalk.alerts",
        "crosstalk.detection.latency",
        "crosstalk.state.size",
        "crosstalk.consumer.lag",
    ):
        assert name in points, name
    events = {attrs(p)["type"]: p.as_int for p in points["crosstalk.events"]}
    assert events == {"request": 1, "response": 2, "cache_stats": 1}
    assert {attrs(p)["reason"]: p.as_int for p in points["crosstalk.rejects"]} == {"invalid": 1}
    alerts = {(attrs(p)["kind"], attrs(p)["severity"]): p.as_int for p in points["crosstalk.alerts"]}
    assert alerts == {("cross_tenant_contamination", "critical"): 1, ("capacity_gap", "critical"): 1}
    [lat] = [p for p in points["crosstalk.detection.latency"] if attrs(p)["kind"] == "cross_tenant_contamination"]
    assert lat.count == 1 and lat.sum == pytest.approx(10.0 - 1.75, abs=1e-3)
    assert {attrs(p)["crosstalk.component"]: p.as_int for p in points["crosstalk.state.size"]} == {
        "index": 42,
        "joins": 3,
    }
    assert [p.as_int for p in points["crosstalk.consumer.lag"]] == [7]
    assert [p.as_double for p in points["crosstalk.event_time.behind"]] == [2.5]


def test_webhook_metrics_and_hold_zero(otlp: OtlpReceiver) -> None:
    sink = OtelSink(OtelSettings(enabled=True, endpoint=otlp.endpoint, export_interval_s=3600, span_hold_s=0))
    ex = exchange(5, "tenant-a", traceparent="garbage")
    leak = alert(["req-5"], ts=ex.ts)
    sink.on_exchange(ex, [leak])  # with no hold the span ends here, already carrying the event
    sink.on_webhook_delivery("ops", "delivered")
    sink.on_webhook_delivery("ops", "deadlettered")
    sink.on_webhook_failure("ops", "http_500")
    sink.on_resolved(
        IncidentResolved(
            incident_id="inc-1",
            group_key="cache_domain=pool-1,category=exposure",
            cache_domain="pool-1",
            first_ts=T0,
            last_ts=T0 + 5,
            resolved_at=T0 + 605,
            alerts=1,
        )
    )
    sink.close()
    [chat] = [s for s in otlp.spans() if s.name.startswith("chat")]
    assert [e.name for e in chat.events] == ["crosstalk.alert"]
    assert chat.parent_span_id == b""  # an invalid traceparent starts a new trace instead of failing
    points = otlp.metric_points()
    deliveries = {attrs(p)["outcome"]: p.as_int for p in points["crosstalk.webhook.deliveries"]}
    assert deliveries == {"delivered": 1, "deadlettered": 1}
    assert [attrs(p)["reason"] for p in points["crosstalk.webhook.failures"]] == ["http_500"]
    assert [(attrs(p)["category"], p.as_int) for p in points["crosstalk.incidents.resolved"]] == [("exposure", 1)]


# --------------------------------------------------------------------------- export never slows detection


class HangingCollector:
    """Accepts connections and reads, never answers: the worst collector there is."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.conns: list[socket.socket] = []
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.conns.append(conn)  # held open, never answered

    def stop(self) -> None:
        self._stop.set()
        for c in self.conns:
            c.close()
        self.sock.close()


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there any more: connection refused


def feed(sink: OtelSink, n: int) -> None:
    for i in range(n):
        sink.on_exchange(exchange(i, "tenant-a", traceparent=None), [])


def wait_until(cond: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not cond():
        time.sleep(0.05)
    assert cond(), "condition not met in time"


def test_collector_down_exports_off_the_pipeline_thread_and_counts_what_is_lost() -> None:
    settings = OtelSettings(
        enabled=True,
        endpoint=closed_port(),
        timeout_s=0.3,
        shutdown_timeout_s=0.5,
        span_hold_s=0,
        export_interval_s=3600,
    )
    sink = OtelSink(settings)
    # The configured per-export bound reaches the OTLP clients (their retries stop at it).
    assert [e.inner._client._timeout for e in sink._span_exporters] == [0.3]
    assert [e.inner._client._timeout for e in sink._metric_exporters] == [0.3]
    n = 1500  # about three export batches
    feed(sink, n)
    sink.close()
    stats = sink.export_stats
    wait_until(lambda: stats.get("spans") + stats.get("spans_dropped") == n)
    assert stats.get("spans") == 0 and stats.get("span_batches_dropped") >= 3  # every lost span counted
    assert stats.threads and threading.get_ident() not in stats.threads  # never exported on our thread
    assert stats.warnings == 1  # said while it happened (a worker may never reach close), not per batch


@pytest.mark.slow  # waits out the shutdown timeout by design
def test_hanging_collector_bounds_close_by_the_shutdown_timeout() -> None:
    collector = HangingCollector()
    try:
        settings = OtelSettings(
            enabled=True,
            endpoint=collector.endpoint,
            timeout_s=5.0,  # one export hangs this long ...
            shutdown_timeout_s=0.2,  # ... but close() waits only this long for the exporters
            span_hold_s=0,
            export_interval_s=3600,
        )
        sink = OtelSink(settings)
        feed(sink, 600)  # more than one batch: the exporter thread is stuck in a request by now
        wait_until(lambda: bool(collector.conns))
        sink.close()
        # close() returned while the export was still hanging: it did not wait for the collector.
        assert sink.close_report == {"waited_s": 0.2, "finished": False}
        stats = sink.export_stats
        wait_until(lambda: stats.get("spans") + stats.get("spans_dropped") == 600)
        assert stats.get("spans") == 0
        assert threading.get_ident() not in stats.threads
    finally:
        collector.stop()


@pytest.mark.parametrize("traces, metrics", [(True, False), (False, True)])
def test_traces_only_or_metrics_only(otlp: OtlpReceiver, traces: bool, metrics: bool) -> None:
    settings = OtelSettings(
        enabled=True, endpoint=otlp.endpoint, traces=traces, metrics=metrics, export_interval_s=3600, span_hold_s=0
    )
    sink = OtelSink(settings)
    sink.on_event("request")
    feed(sink, 3)
    sink.close()
    assert bool(otlp.spans()) is traces
    assert bool(otlp.metric_points()) is metrics
    paths_seen = {"traces" if otlp.traces else None, "metrics" if otlp.metrics else None} - {None}
    assert paths_seen == ({"traces"} if traces else {"metrics"})  # nothing sent to the other endpoint


def test_auth_header_reaches_the_collector_but_no_printout(otlp: OtlpReceiver) -> None:
    token = "Bearer otel-secret-73ab"
    settings = OtelSettings(enabled=True, endpoint=otlp.endpoint, headers={"Authorization": token}, span_hold_s=0)
    sink = OtelSink(settings)
    feed(sink, 1)
    sink.close()
    got = [{k.lower(): v for k, v in h.items()}.get("authorization") for h in otlp.headers]
    assert got and all(v == token for v in got)
    assert token not in repr(settings) and token not in settings.model_dump_json()
