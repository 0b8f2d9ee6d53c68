"""Signals of the placeholder mechanism itself, read off one exchange's figures.

They run for every exchange: each reads the halves it needs once into locals and tests the cheapest,
most selective figure first. Fields are read from the models' __dict__ (pydantic keeps them there) where
several are read: a model's attribute read is several times slower than a dict read, as
BaseModel.__getattr__ defeats CPython's attribute cache.

- overlong_accepted: the prompt cannot have fitted the prefill pool, yet the client got 2xx.
- token_accounting_mismatch: the engine counted far fewer input tokens than the gateway sent
  (a one-token placeholder), beyond tokenizer differences of a few percent.
- impossible_prefill: time-to-first-token implies a prefill rate no hardware reaches.
"""

from __future__ import annotations

from typing import Any

from detectors.settings import DetectionSettings
from detectors.signals.base import DomainFacts, Stateless
from schemas.alert import Signal
from schemas.events import Response
from schemas.exchange import Exchange


def _accepted(response: Response, s: DetectionSettings) -> bool:
    return s.overlong_min_status <= response.status_code <= s.overlong_max_status


class _Mechanism(Stateless):
    """A detector with its settings `s`, and the thresholds it reads per exchange copied to plain attributes
    (a settings model's attribute read is slow too). Setting `s` refreshes the copies; a snapshot holds `s`
    only, as before the copies existed, and restoring one makes them."""

    def __init__(self, settings: DetectionSettings) -> None:
        self.s = settings

    @property
    def s(self) -> DetectionSettings:
        return self._s

    @s.setter
    def s(self, settings: DetectionSettings) -> None:
        self._s = settings
        self._min_status = settings.overlong_min_status
        self._max_status = settings.overlong_max_status
        self._min_ratio = settings.accounting_min_ratio
        self._prefill_min_tokens = settings.prefill_min_tokens
        self._prefill_bound = settings.prefill_max_tokens_per_s

    def __getstate__(self) -> dict[str, Any]:
        return {"s": self._s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.s = state["s"]


class OverlongDetector(_Mechanism):
    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]:
        # The cheapest, most selective test first: almost every prompt fits.
        request = ex.request
        prefill_capacity = domain.prefill_capacity
        if request is None or prefill_capacity is None:
            return []
        tokens = request.prompt_tokens
        if tokens <= prefill_capacity:
            return []
        response = ex.response
        if response is None or not _accepted(response, self.s):
            return []
        return [
            Signal(
                name="overlong_accepted",
                severity="high",
                score=min(1.0, 0.7 + 0.3 * (tokens - prefill_capacity) / prefill_capacity),
                figures={
                    "prompt_tokens": tokens,
                    "prefill_capacity_tokens": prefill_capacity,
                    "excess_tokens": tokens - prefill_capacity,
                    "status_code": response.status_code,
                },
            )
        ]


class AccountingDetector(_Mechanism):
    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]:
        d = ex.__dict__
        request, response = d["request"], d["response"]
        if request is None or response is None:
            return []
        usage = response.usage
        if usage is None:
            return []
        engine = usage.input_tokens
        gateway = request.prompt_tokens
        if engine is None:
            return []
        # The ratio decides for almost every exchange, so it is tested first; a zero gateway count
        # is left to the division below, after the other tests, as it always was.
        if gateway and engine / gateway >= self._min_ratio:
            return []
        s = self.s
        if gateway < s.accounting_min_gateway_tokens or not _accepted(response, s):
            return []
        ratio = engine / gateway
        return [
            Signal(
                name="token_accounting_mismatch",
                severity="high",
                score=min(1.0, 0.6 + 0.4 * (1 - ratio / self.s.accounting_min_ratio)),
                figures={"gateway_prompt_tokens": gateway, "engine_input_tokens": engine, "ratio": round(ratio, 6)},
            )
        ]


class PrefillDetector(_Mechanism):
    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]:
        d = ex.__dict__
        request, response = d["request"], d["response"]
        if request is None or response is None:
            return []
        r = response.__dict__
        ttft_ms = r["ttft_ms"]
        if ttft_ms is None:
            return []
        tokens = request.prompt_tokens
        # Short prompts (most) are not judged: test that before the status (_accepted, inlined: per exchange).
        if tokens < self._prefill_min_tokens or not self._min_status <= r["status_code"] <= self._max_status:
            return []
        ttft_s = ttft_ms / 1000.0
        bound = self._prefill_bound
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
                    "ttft_ms": response.ttft_ms,
                    "implied_tokens_per_s": None if rate == float("inf") else round(rate),
                    "bound_tokens_per_s": bound,
                },
            )
        ]


class MechanismScreen:
    """The three detectors above in one call per exchange, for a domain's plan (detectors/domain.py): what
    `overlong.observe(ex, domain) + accounting.observe(ex, domain) + prefill.observe(ex, domain)` returns.

    Almost every exchange raises none of their signals, and three calls that each read the halves again cost
    more than the tests themselves. The screen reads each figure once and applies each detector's own quick
    rejection, with that detector's thresholds; a detector that might raise a signal is then called as
    usual, so the signals are the detector's own (property-tested in tests/detectors/test_mechanism_screen.py).
    """

    __slots__ = ("accounting", "overlong", "prefill")

    def __init__(self, overlong: OverlongDetector, accounting: AccountingDetector, prefill: PrefillDetector) -> None:
        self.overlong = overlong
        self.accounting = accounting
        self.prefill = prefill

    def observe(
        self, ex: Exchange, request: dict[str, Any] | None, response: Response | None, domain: DomainFacts
    ) -> list[Signal]:
        """`request`: the fields (__dict__) of the exchange's request, `response` its response (the caller read
        them already)."""
        if request is None or response is None:
            return []  # each of the three needs both halves
        r = response.__dict__
        tokens = request["prompt_tokens"]
        out: list[Signal] = []
        # overlong: the prompt exceeds the domain's prefill capacity.
        capacity = domain.prefill_capacity
        if capacity is not None and tokens > capacity:
            out += self.overlong.observe(ex, domain)
        # accounting: the engine counted below the ratio of the gateway's tokens (or the gateway counted 0).
        usage = r["usage"]
        if usage is not None:
            engine = usage.input_tokens
            if engine is not None and not (tokens and engine / tokens >= self.accounting._min_ratio):
                out += self.accounting.observe(ex, domain)
        # prefill: a long prompt with a 2xx status whose ttft implies a rate beyond the bound.
        ttft_ms = r["ttft_ms"]
        if ttft_ms is not None:
            prefill = self.prefill
            if tokens >= prefill._prefill_min_tokens and prefill._min_status <= r["status_code"] <= prefill._max_status:
                ttft_s = ttft_ms / 1000.0
                if not (ttft_s > 0 and tokens / ttft_s <= prefill._prefill_bound):
                    out += prefill.observe(ex, domain)
        return out
