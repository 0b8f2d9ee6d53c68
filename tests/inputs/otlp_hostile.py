"""Hostile OTLP/JSON spans of issue 25, shared by the receiver, replay and Kafka bridge tests.

Each case is one span that must become a per-span reject with the given reason, while the good spans
sent with it are mapped as usual."""

from __future__ import annotations

import random
import time
from typing import Any

import orjson

from tests.support.otlp import export_request, span_of

T_NOW = time.time() - 600.0  # recent: the live core refuses spans from the future, not from the past


def good_span(rid: str, tenant: str = "acme", t: float = T_NOW, **req: Any) -> dict[str, Any]:
    return span_of(
        {"request_id": rid, "model": "m", "tenant_id": tenant, "prompt_tokens": 9, "ts": t, **req},
        {"model": "m", "cache_domain": "d1", "status_code": 200, "ts": t + 1.5},
    )


def with_attr(span: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    span["attributes"] = [a for a in span["attributes"] if a["key"] != key] + [{"key": key, "value": value}]
    return span


def _deep_messages(depth: int) -> str:
    return "[" + '{"message":' * depth + '{"content":"hi"}' + "}" * depth + "]"


def cjk_text(n: int, seed: int = 25) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(n))


def hostile_span(case: str, rid: str) -> dict[str, Any]:
    """One span of `case` (see CASES); its request id is `rid`."""
    s = good_span(rid)
    if case == "tokens_inf":
        return with_attr(s, "crosstalk.prompt_tokens", {"stringValue": "inf"})
    if case == "usage_1e999":
        return with_attr(s, "gen_ai.usage.input_tokens", {"stringValue": "1e999"})
    if case == "status_double_infinity":
        return with_attr(s, "http.response.status_code", {"doubleValue": "Infinity"})
    if case == "tokens_nan":
        return with_attr(s, "crosstalk.prompt_tokens", {"doubleValue": "NaN"})
    if case == "start_400_digits":
        s["startTimeUnixNano"] = "1" + "0" * 399  # and an end after it: end >= start passes the order check
        s["endTimeUnixNano"] = "2" + "0" * 399
        return s
    if case == "messages_1000_deep":
        return with_attr(s, "gen_ai.input.messages", {"stringValue": _deep_messages(1000)})
    if case == "cjk_2_6M":
        msgs = [{"role": "user", "parts": [{"type": "text", "content": cjk_text(2_600_000)}]}]
        return with_attr(s, "gen_ai.input.messages", {"stringValue": orjson.dumps(msgs).decode()})
    raise ValueError(case)


CASES = {
    "tokens_inf": "bad_number",
    "usage_1e999": "bad_number",
    "status_double_infinity": "bad_number",
    "tokens_nan": "bad_number",
    "start_400_digits": "bad_times",
    "messages_1000_deep": "too_deep",
    "cjk_2_6M": "text_too_long",
}


def batch(case: str, good_rids: tuple[str, ...] = ("good-1", "good-2")) -> bytes:
    """An export request: a good span, the hostile one, another good span."""
    spans = [good_span(good_rids[0]), hostile_span(case, f"bad-{case}"), good_span(good_rids[1])]
    return orjson.dumps(export_request(spans))
