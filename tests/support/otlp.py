"""crosstalk events -> OTLP/JSON GenAI spans: the same traffic as a gateway's OpenTelemetry export.

Used by the tests (an incident replayed from OTLP must give the alert ids of the same incident in
crosstalk's own format) and handy to try `crosstalk replay --format otlp-json` on simulated traffic.
Each request/response pair becomes one `chat` span (start = request ts, end = response ts) with the
GenAI semconv attributes and the `crosstalk.*` attributes of OtlpSettings' defaults; cache_stats and
canary events, and requests that never got a response, stay crosstalk events on their own lines.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from streams.outputs.otlp import otlp_attribute


def _attr(key: str, value: Any) -> dict[str, Any]:
    # One OTLP/JSON attribute, as the LiteLLM callback's OTLP output writes it (the same encoding on both sides).
    return otlp_attribute(key, value)


def _ids(request_id: str) -> tuple[str, str]:
    h = hashlib.sha256(request_id.encode()).hexdigest()
    return h[:32], h[32:48]


def span_of(req: dict[str, Any], resp: dict[str, Any]) -> dict[str, Any]:
    """One OTLP/JSON span of a request/response pair (text as gen_ai.input/output.messages)."""
    trace_id, span_id = _ids(req["request_id"])
    a: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": req["model"],
        "gen_ai.response.model": resp["model"],
        "crosstalk.request_id": req["request_id"],
        "crosstalk.tenant_id": req["tenant_id"],
        "crosstalk.cache_domain": resp["cache_domain"],
        "crosstalk.prompt_tokens": req["prompt_tokens"],
        "http.response.status_code": resp["status_code"],
    }
    optional = {
        "gen_ai.conversation.id": req.get("session_id"),
        "gen_ai.request.max_tokens": req.get("max_output_tokens"),
        "crosstalk.context_window": req.get("context_window"),
        "crosstalk.canaries": req.get("canaries") or None,
        "crosstalk.ttft_ms": resp.get("ttft_ms"),
        "gen_ai.response.finish_reasons": [resp["finish_reason"]] if resp.get("finish_reason") else None,
    }
    usage = resp.get("usage") or {}
    optional["gen_ai.usage.input_tokens"] = usage.get("input_tokens")
    optional["gen_ai.usage.output_tokens"] = usage.get("output_tokens")
    if req.get("prompt_text") is not None:
        msgs = [{"role": "user", "parts": [{"type": "text", "content": req["prompt_text"]}]}]
        optional["gen_ai.input.messages"] = orjson.dumps(msgs).decode()
    if resp.get("output_text") is not None:
        out = [{"role": "assistant", "parts": [{"type": "text", "content": resp["output_text"]}]}]
        optional["gen_ai.output.messages"] = orjson.dumps(out).decode()
    a.update({k: v for k, v in optional.items() if v is not None})
    return {
        "traceId": trace_id,
        "spanId": span_id,
        "name": f"chat {req['model']}",
        "kind": 3,  # SPAN_KIND_CLIENT
        "startTimeUnixNano": str(round(float(req["ts"]) * 1e9)),
        "endTimeUnixNano": str(round(float(resp["ts"]) * 1e9)),
        "attributes": [_attr(k, v) for k, v in a.items()],
        "status": {"code": 2 if resp["status_code"] >= 500 else 0},
    }


def export_request(spans: list[dict[str, Any]], service: str = "gateway") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [_attr("service.name", service)]},
                "scopeSpans": [{"scope": {"name": "crosstalk.testing.otlp"}, "spans": spans}],
            }
        ]
    }


def to_otlp_lines(events: Iterable[dict[str, Any]], spans_per_line: int = 50) -> Iterator[bytes]:
    """OTLP/JSON lines (ExportTraceServiceRequest per line) plus pass-through lines, roughly in time order.

    Events must be JSON-ready dicts with ts as epoch seconds. A replay re-sorts within
    ingest.reorder_lateness_s, which must exceed the longest request for an exact re-ordering.
    """
    pending: dict[str, dict[str, Any]] = {}
    batch: list[dict[str, Any]] = []
    for ev in events:
        kind = ev.get("type")
        if kind == "request":
            pending[ev["request_id"]] = ev
            continue
        if kind == "response" and ev["request_id"] in pending:
            batch.append(span_of(pending.pop(ev["request_id"]), ev))
            if len(batch) >= spans_per_line:
                yield orjson.dumps(export_request(batch))
                batch = []
            continue
        yield orjson.dumps(ev)
    if batch:
        yield orjson.dumps(export_request(batch))
    for req in pending.values():
        yield orjson.dumps(req)
