"""Signals of the placeholder mechanism itself, read off one exchange's figures.

- overlong_accepted: the prompt cannot have fitted the prefill pool, yet the client got 2xx.
- token_accounting_mismatch: the engine counted far fewer input tokens than the gateway sent
  (a one-token placeholder), beyond tokenizer differences of a few percent.
- impossible_prefill: time-to-first-token implies a prefill rate no hardware reaches.
"""

from __future__ import annotations

from detectors.exchange import Exchange
from detectors.settings import DetectionSettings
from schemas.alert import Signal


def _accepted(ex: Exchange, s: DetectionSettings) -> bool:
    return ex.response is not None and s.overlong_min_status <= ex.response.status_code <= s.overlong_max_status


class OverlongDetector:
    def __init__(self, settings: DetectionSettings) -> None:
        self.s = settings

    def observe(self, ex: Exchange, prefill_capacity: int | None) -> list[Signal]:
        if ex.request is None or prefill_capacity is None or not _accepted(ex, self.s):
            return []
        tokens = ex.request.prompt_tokens
        if tokens <= prefill_capacity:
            return []
        assert ex.response is not None
        return [
            Signal(
                name="overlong_accepted",
                severity="high",
                score=min(1.0, 0.7 + 0.3 * (tokens - prefill_capacity) / prefill_capacity),
                figures={
                    "prompt_tokens": tokens,
                    "prefill_capacity_tokens": prefill_capacity,
                    "excess_tokens": tokens - prefill_capacity,
                    "status_code": ex.response.status_code,
                },
            )
        ]


class AccountingDetector:
    def __init__(self, settings: DetectionSettings) -> None:
        self.s = settings

    def observe(self, ex: Exchange) -> list[Signal]:
        if ex.request is None or ex.response is None or ex.response.usage is None or not _accepted(ex, self.s):
            return []
        engine = ex.response.usage.input_tokens
        gateway = ex.request.prompt_tokens
        if engine is None or gateway < self.s.accounting_min_gateway_tokens:
            return []
        ratio = engine / gateway
        if ratio >= self.s.accounting_min_ratio:
            return []
        return [
            Signal(
                name="token_accounting_mismatch",
                severity="high",
                score=min(1.0, 0.6 + 0.4 * (1 - ratio / self.s.accounting_min_ratio)),
                figures={"gateway_prompt_tokens": gateway, "engine_input_tokens": engine, "ratio": round(ratio, 6)},
            )
        ]


class PrefillDetector:
    def __init__(self, settings: DetectionSettings) -> None:
        self.s = settings

    def observe(self, ex: Exchange) -> list[Signal]:
        if ex.request is None or ex.response is None or ex.response.ttft_ms is None or not _accepted(ex, self.s):
            return []
        tokens = ex.request.prompt_tokens
        if tokens < self.s.prefill_min_tokens:
            return []
        ttft_s = ex.response.ttft_ms / 1000.0
        bound = self.s.prefill_max_tokens_per_s
        if ttft_s > 0 and tokens / ttft_s <= bound:
            return []
        rate = tokens / ttft_s if ttft_s > 0 else float("inf")
        return [
            Signal(
                name="impossible_prefill",
                severity="high",
                score=0.6 if rate == float("inf") else min(1.0, 0.5 + 0.1 * rate / bound),
                figures={
                    "prompt_tokens": tokens,
                    "ttft_ms": ex.response.ttft_ms,
                    "implied_tokens_per_s": None if rate == float("inf") else round(rate),
                    "bound_tokens_per_s": bound,
                },
            )
        ]
