"""Events as GenAI spans to `crosstalk otlp`'s receiver (OTLP/HTTP, JSON): a producer that needs no broker.

A request and its response (one call: same `request_id`, in one batch) become one GenAI inference span, with
the attributes the receiver maps back (streams/inputs/otlp.py): `crosstalk.request_id`, `crosstalk.tenant_id`,
`crosstalk.cache_domain`, `crosstalk.prompt_tokens` (the gateway's own count), the engine's usage, status,
finish reason, TTFT, the provider's response id, and the text as `gen_ai.input.messages` /
`gen_ai.output.messages`. The text is sent to the receiver, which fingerprints it with its key and drops it
(so the producer needs no fingerprint key); keep the receiver on loopback, or give it a token
(`otlp.tokens`) and this output the sender's. Trace and span ids derive from the request id, so a batch sent
again is the same spans, which the core drops as duplicates.

The LiteLLM callback uses it (`litellm.output = "otlp"`), on its own thread: a receiver that is slow or away
holds that thread (retried with backoff, then refused and logged), never LiteLLM's event loop.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import orjson
from pydantic import BaseModel

from schemas.events import Event, parse_event
from streams.outputs.base import Output, Produced, Refused

log = logging.getLogger("crosstalk.outputs.otlp")

_RETRY_STATUS = (429, 502, 503, 504)


def _obj(event: Produced) -> dict[str, Any]:
    if isinstance(event, BaseModel):
        return orjson.loads(event.model_dump_json(exclude_none=True))
    return dict(event)


def otlp_attribute(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        v: dict[str, Any] = {"boolValue": value}
    elif isinstance(value, int):
        v = {"intValue": str(value)}
    elif isinstance(value, float):
        v = {"doubleValue": value}
    elif isinstance(value, list):
        v = {"arrayValue": {"values": [{"stringValue": str(x)} for x in value]}}
    else:
        v = {"stringValue": str(value)}
    return {"key": key, "value": v}


def _messages(role: str, text: str) -> str:
    return orjson.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}]).decode()


def call_span(req: Mapping[str, Any], resp: Mapping[str, Any]) -> dict[str, Any]:
    """One call (a request and its response, as wire-event objects) as an OTLP/JSON GenAI span."""
    digest = hashlib.sha256(str(req["request_id"]).encode()).hexdigest()
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": req["model"],
        "gen_ai.response.model": resp.get("model") or req["model"],
        "crosstalk.request_id": req["request_id"],
        "crosstalk.tenant_id": req["tenant_id"],
        "crosstalk.cache_domain": resp.get("cache_domain") or req.get("cache_domain"),
        "crosstalk.prompt_tokens": req["prompt_tokens"],
        "http.response.status_code": resp["status_code"],
    }
    optional = {
        "gen_ai.conversation.id": req.get("session_id") or resp.get("session_id"),
        "gen_ai.request.max_tokens": req.get("max_output_tokens"),
        "crosstalk.context_window": req.get("context_window"),
        "gen_ai.response.id": resp.get("response_id"),
        "error.type": resp.get("error_type"),
        "crosstalk.ttft_ms": resp.get("ttft_ms"),
        "gen_ai.response.finish_reasons": [resp["finish_reason"]] if resp.get("finish_reason") else None,
        "gen_ai.input.messages": _messages("user", req["prompt_text"]) if req.get("prompt_text") else None,
        "gen_ai.output.messages": _messages("assistant", resp["output_text"]) if resp.get("output_text") else None,
    }
    usage = resp.get("usage") or {}
    optional["gen_ai.usage.input_tokens"] = usage.get("input_tokens")
    optional["gen_ai.usage.output_tokens"] = usage.get("output_tokens")
    attrs.update({k: v for k, v in optional.items() if v is not None})
    start = int(float(req["ts"]) * 1e9)
    end = max(start, int(float(resp["ts"]) * 1e9))
    return {
        "traceId": digest[:32],
        "spanId": digest[32:48],
        "name": f"chat {req['model']}",
        "kind": 3,  # CLIENT
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(end),
        "attributes": [otlp_attribute(k, v) for k, v in attrs.items()],
        "status": {"code": 2 if int(resp["status_code"]) >= 500 else 0},
    }


class OtlpOutput(Output):
    """POST each batch's calls as one ExportTraceServiceRequest to `url` (`crosstalk otlp`'s /v1/traces)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout_s: float = 5.0,
        retries: int = 3,
        service_name: str = "crosstalk-producer",
    ) -> None:
        headers = {"content-type": "application/json"}
        if token:
            headers["authorization"] = f"Bearer {token}"
        self.url = url
        self.retries = retries
        self.resource = {"attributes": [otlp_attribute("service.name", service_name)]}
        self._client = httpx.Client(timeout=timeout_s, headers=headers)

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        objs = [_obj(ev) for ev in events]
        requests = {o["request_id"]: o for o in objs if o.get("type") == "request"}
        spans, refused = [], []
        for o in objs:
            if o.get("type") != "response":
                continue
            req = requests.pop(o["request_id"], None)
            if req is None:
                refused.append(Refused(_model(o), "unpaired", "a response without its request in the batch"))
                continue
            spans.append(call_span(req, o))
        alone = "a request without its response in the batch"
        refused += [Refused(_model(o), "unpaired", alone) for o in requests.values()]
        if spans:
            body = orjson.dumps({"resourceSpans": [{"resource": self.resource, "scopeSpans": [{"spans": spans}]}]})
            refused += self._post(body, objs)
        return refused

    def _post(self, body: bytes, objs: list[dict[str, Any]]) -> list[Refused]:
        """Send, retrying what a receiver asks to retry (busy, restarting); raise when it never takes it."""
        delay = 0.5
        for attempt in range(self.retries + 1):
            try:
                r = self._client.post(self.url, content=body)
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
            else:
                if r.status_code == 200:
                    try:
                        partial = (r.json() or {}).get("partialSuccess") or {}
                    except ValueError:  # not the JSON answer asked for: taken, nothing to read
                        partial = {}
                    if partial.get("rejectedSpans"):
                        why = str(partial.get("errorMessage", ""))[:500]
                        log.warning("crosstalk otlp refused %s call(s): %s", partial["rejectedSpans"], why)
                        return [
                            Refused(_model(o), "receiver_refused", why) for o in objs if o.get("type") == "response"
                        ]
                    return []
                if r.status_code not in _RETRY_STATUS or attempt == self.retries:
                    r.raise_for_status()
                    raise httpx.HTTPStatusError(f"HTTP {r.status_code}", request=r.request, response=r)
            time.sleep(delay)
            delay *= 2
        return []

    def close(self) -> None:
        self._client.close()


def _model(obj: Mapping[str, Any]) -> Event:
    return parse_event(orjson.dumps(obj))
