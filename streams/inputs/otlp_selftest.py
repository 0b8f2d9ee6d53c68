"""`crosstalk otlp --selftest`: send one GenAI span to a running receiver (or a Collector in front of it) and
say what arrived, from the receiver's own counters.

The span is what an instrumented gateway sends (OTLP/HTTP protobuf, as the SDK's exporter posts it) with
no message content, for tenant and cache domain `crosstalk-selftest`: it becomes one request and one
response event for that tenant, which no real tenant shares.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

SELFTEST_TENANT = "crosstalk-selftest"


@dataclass
class SelftestResult:
    ok: bool
    lines: list[str] = field(default_factory=list)


def selftest_request(now: float | None = None) -> tuple[bytes, str]:
    """(ExportTraceServiceRequest bytes, request id) of one chat span of 1 s ending now."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    end = time.time() if now is None else now
    rid = f"{SELFTEST_TENANT}-{secrets.token_hex(6)}"

    def kv(key: str, value: str | int) -> KeyValue:
        v = AnyValue(int_value=value) if isinstance(value, int) else AnyValue(string_value=value)
        return KeyValue(key=key, value=v)

    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.append(kv("service.name", "crosstalk-selftest"))
    span = rs.scope_spans.add().spans.add()
    span.trace_id, span.span_id = secrets.token_bytes(16), secrets.token_bytes(8)
    span.name, span.kind = "chat crosstalk-selftest", Span.SPAN_KIND_CLIENT
    span.start_time_unix_nano, span.end_time_unix_nano = int((end - 1.0) * 1e9), int(end * 1e9)
    for key, value in (
        ("gen_ai.operation.name", "chat"),
        ("gen_ai.request.model", "crosstalk-selftest"),
        ("gen_ai.usage.input_tokens", 1),
        ("gen_ai.usage.output_tokens", 1),
        ("crosstalk.tenant_id", SELFTEST_TENANT),
        ("crosstalk.cache_domain", SELFTEST_TENANT),
        ("crosstalk.request_id", rid),
        ("http.response.status_code", 200),
    ):
        span.attributes.append(kv(key, value))
    return req.SerializeToString(), rid


def _counters_url(traces_url: str) -> str:
    parts = urlsplit(traces_url)
    return urlunsplit((parts.scheme, parts.netloc, "/counters", "", ""))


def _counters(client: httpx.Client, url: str) -> dict[str, Any] | None:
    try:
        r = client.get(url)
        return dict(r.json()) if r.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _answer(status: int, body: bytes, ctype: str) -> tuple[bool, str]:
    """Whether the export was accepted whole, and what the endpoint said."""
    if status == 401:
        return False, (
            "the endpoint answered HTTP 401: it wants a sender's bearer token (otlp.tokens); give it as the SDK "
            "would: OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer%20<token>'"
        )
    if status != 200:
        return False, f"the endpoint answered HTTP {status}: {body[:300].decode('utf-8', 'replace')}"
    if "protobuf" not in ctype:
        return True, "the endpoint answered 200"
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    resp = ExportTraceServiceResponse()
    try:
        resp.ParseFromString(body)
    except Exception:
        return True, "the endpoint answered 200 (a body that is not an OTLP response)"
    ps = resp.partial_success
    if ps.rejected_spans:
        return False, f"the endpoint rejected the span: {ps.error_message}"
    return True, "the endpoint answered 200, no span rejected"


def run_selftest(
    traces_url: str, counters_url: str | None = None, headers: dict[str, str] | None = None, wait_s: float = 10.0
) -> SelftestResult:
    """Send the span, then read crosstalk's /counters until its mapped-span count moves (or `wait_s`)."""
    res = SelftestResult(ok=False)
    counters_url = counters_url or _counters_url(traces_url)
    body, rid = selftest_request()
    with httpx.Client(timeout=5.0) as client:
        before = _counters(client, counters_url)
        try:
            r = client.post(
                traces_url, content=body, headers={"content-type": "application/x-protobuf", **(headers or {})}
            )
        except httpx.HTTPError as exc:
            res.lines.append(f"cannot reach {traces_url}: {type(exc).__name__}: {exc}")
            return res
        accepted, said = _answer(r.status_code, r.content, r.headers.get("content-type", ""))
        res.lines.append(f"sent 1 GenAI span (request id {rid}, tenant {SELFTEST_TENANT}) to {traces_url}: {said}")
        if not accepted:
            return res
        if before is None:
            res.lines.append(
                f"no crosstalk counters at {counters_url} (a Collector in front?): pass --counters-url "
                "http://<crosstalk otlp host>:14318/counters to see what reached crosstalk"
            )
            res.ok = True
            return res
        deadline = time.monotonic() + wait_s
        after = before
        while time.monotonic() < deadline:  # through a Collector the span arrives after its batch timeout
            after = _counters(client, counters_url) or after
            if after.get("spans.mapped", 0) > before.get("spans.mapped", 0):
                break
            time.sleep(0.2)
    moved = {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(before) | set(after))}
    moved = {k: v for k, v in moved.items() if v and not k.startswith("requests")}
    if moved.get("spans.mapped", 0) >= 1:
        res.ok = True
        res.lines.append(f"crosstalk mapped it into a request and a response event ({_fmt(moved)})")
    else:
        res.lines.append(f"crosstalk did not map it within {wait_s:g} s; its counters moved: {_fmt(moved) or 'none'}")
    return res


def _fmt(moved: dict[str, int]) -> str:
    return ", ".join(f"{k} +{v}" for k, v in moved.items())


def otel_headers(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The headers an OpenTelemetry SDK would send: OTEL_EXPORTER_OTLP_TRACES_HEADERS, else
    OTEL_EXPORTER_OTLP_HEADERS ("k=v,k2=v2", values URL-encoded), e.g. the receiver's bearer token."""
    from urllib.parse import unquote

    env = os.environ if environ is None else environ
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    out = {}
    for item in raw.split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[unquote(key.strip())] = unquote(value.strip())
    return out


def selftest_main(args: Any, settings: Any) -> int:
    o = settings.otlp
    host = args.bind or o.bind
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    url = args.selftest_url or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    url = url or f"http://{host}:{args.port or o.port}/v1/traces"
    res = run_selftest(url, args.counters_url, headers=otel_headers())
    for line in res.lines:
        print(f"crosstalk otlp --selftest: {line}")
    print("crosstalk otlp --selftest: " + ("OK" if res.ok else "FAILED"))
    return 0 if res.ok else 1
