"""Signals of the placeholder mechanism itself, read off one exchange's figures.

They run for every exchange: each reads the halves it needs once into locals and tests the cheapest,
most selective figure first.

- overlong_accepted: the prompt cannot have fitted the prefill pool, yet the client got 2xx.
- token_accounting_mismatch: the engine counted far fewer input tokens than the gateway sent (a one-token
  placeholder): below a floor share at once, or below half of the ratio learned as normal for the model and
  tenant (another tokenizer at the gateway: detectors/signals/accounting.py). Or twice as many or half as many as
  the tenant's own prompts of about the same size make of it: the usage of another prompt, delivered with its answer.
- impossible_prefill: time-to-first-token implies a prefill rate no hardware reaches.
"""

from __future__ import annotations

from typing import Any

from detectors.settings import DetectionSettings
from detectors.signals.accounting import RatioNorms, SizeNorms
from detectors.signals.base import DomainFacts, Stateless
from detectors.signals.words import n, pct
from schemas.alert import Signal
from schemas.events import Request, Response, Usage
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
        self._max_ratio = settings.accounting_max_ratio

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
    """Engine input tokens against the gateway's count, judged against the normal ratio of the exchange's
    (model, tenant) in this domain, learned as traffic goes (RatioNorms), and against a fixed floor.

    Two findings, one signal: the placeholder (far below: the floor, or half the norm, for a prompt of at least
    `accounting_min_gateway_tokens`: `basis` floor or learned), and another prompt's usage (a factor
    `accounting_max_ratio` above, or `accounting_min_ratio` below, what the key's neighbours in size make of the
    prompt, and `accounting_min_gap_tokens` apart: `basis` other_prompt, with its `direction`; SizeNorms).

    `_quick` and `_quick_hi`: a ratio between them raises nothing, whatever the key (below: the floor, the largest
    learned norm and the largest kept ratio times `accounting_min_ratio`; above: the smallest kept ratio times
    `accounting_max_ratio`; bounds kept between exact recomputations): the screen's and observe's first test, so that
    an ordinary exchange costs one division."""

    _REQUICK_EVERY = 256  # learns between exact recomputations of the quick bounds

    def __init__(self, settings: DetectionSettings) -> None:
        self.norms = _norms(settings)
        self.sizes = _sizes(settings)
        self._learned = 0
        self._raised: str | None = None  # the request whose usage was found another prompt's: not learned
        super().__init__(settings)
        self._requick()

    def _requick(self) -> None:
        s = self.s
        self._floor = s.accounting_floor_ratio
        self.sizes.rebound()
        lows = [s.accounting_floor_ratio, self.sizes.high * self._min_ratio]
        self._quick = max([*lows, *(n * self._min_ratio for n in self.norms.normals())])
        self._quick_hi = self.sizes.low * self._max_ratio

    def __getstate__(self) -> dict[str, Any]:
        return {"s": self._s, "norms": self.norms, "sizes": self.sizes}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A snapshot from before the norms (or the sizes) were learned holds less: the rest starts afresh.
        self.norms = state.get("norms") or _norms(state["s"])
        self.sizes = state.get("sizes") or _sizes(state["s"])
        self._learned = 0
        self._raised = None
        self.s = state["s"]
        self._requick()

    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]:
        request, response = ex.request, ex.response
        if request is None or response is None:
            return []
        usage = response.usage
        if usage is None:
            return []
        engine = usage.input_tokens
        gateway = request.prompt_tokens
        if engine is None:
            return []
        # The ratio decides for almost every exchange, so it is tested first (a zero count is judged below).
        if gateway and self._quick <= engine / gateway < self._quick_hi:
            return []
        s = self.s
        if not gateway or not _accepted(response, s):
            return []
        ratio = engine / gateway
        key = _key(request, response)
        if gateway >= s.accounting_min_gateway_tokens:
            normal = self.norms.normal(key)
            if ratio < self._floor or (normal is not None and ratio < normal * self._min_ratio):
                return [self._signal(usage, gateway, normal, "floor" if ratio < self._floor else "learned")]
        expected = self.sizes.expected(key, gateway, s.accounting_max_spread)
        if expected is None:
            return []
        direction = None
        if engine >= expected * self._max_ratio and engine - expected >= s.accounting_min_gap_tokens:
            direction = "above"
        # A provider that counts cached tokens apart (input + cached is the prompt) explains a shortfall up to them.
        counted = engine + (getattr(usage, "cached_input_tokens", None) or 0)
        if counted < expected * self._min_ratio and expected - counted >= s.accounting_min_gap_tokens:
            direction = "below"
        if direction is None:
            return []
        self._raised = request.request_id
        return [self._signal(usage, gateway, expected / gateway, "other_prompt", direction)]

    def _signal(self, usage: Usage, gateway: int, normal: float | None, basis: str, direction: str = "below") -> Signal:
        """`basis`: floor or learned for the placeholder, other_prompt for another prompt's usage (with its
        `direction`, a figure the placeholder's alerts never had; `normal_ratio` is then the neighbours')."""
        engine = usage.input_tokens or 0
        ratio = engine / gateway
        relative = ratio / (normal or 1.0)
        figures: dict[str, Any] = {"gateway_prompt_tokens": gateway, "engine_input_tokens": engine}
        figures |= {"ratio": round(ratio, 6), "normal_ratio": None if normal is None else round(normal, 4)}
        figures["basis"] = basis
        if basis == "other_prompt":
            figures["direction"] = direction
        # Evidence only: what the engine says it served from its prefix cache. Semconv counts it inside the input
        # tokens; a provider that counts it apart (input + cached near the gateway's count) explains the shortfall.
        # getattr: a usage restored from a snapshot taken before the field existed has no such attribute.
        cached = getattr(usage, "cached_input_tokens", None)
        if cached is not None:
            figures["engine_cached_input_tokens"] = cached
        if direction == "above" and basis == "other_prompt":
            score = min(1.0, 0.6 + 0.4 * min(1.0, relative / self._max_ratio - 1.0))
        else:
            score = min(1.0, 0.6 + 0.4 * max(0.0, 1 - relative / self._min_ratio))
        return Signal(name="token_accounting_mismatch", severity="high", score=score, figures=figures)

    def learn(self, ex: Exchange, include_output: bool = True) -> None:
        request, response = ex.request, ex.response
        if request is None or response is None or response.usage is None:
            return
        engine = response.usage.input_tokens
        gateway = request.prompt_tokens
        if engine is None or not gateway:
            return
        ratio = engine / gateway
        if ratio < self._floor or not _accepted(response, self.s):
            return  # the placeholder is never normal; an error's count says nothing of the tokenizers
        if self._raised == request.request_id:
            return  # another prompt's count says nothing of this tenant's
        key = _key(request, response)
        self.sizes.learn(key, gateway, engine)
        self._quick = max(self._quick, ratio * self._min_ratio)
        self._quick_hi = min(self._quick_hi, ratio * self._max_ratio)
        if gateway >= self.s.accounting_min_gateway_tokens:
            normal = self.norms.learn(key, ratio)
            if normal is not None and normal * self._min_ratio > self._quick:
                self._quick = normal * self._min_ratio
        self._learned += 1
        if self._learned % self._REQUICK_EVERY == 0:
            self._requick()  # exact again: norms that fell (or keys evicted) no longer hold the bounds

    def state_size(self) -> int:
        return self.norms.state_size() + self.sizes.state_size()


def _norms(s: DetectionSettings) -> RatioNorms:
    return RatioNorms(s.accounting_window, s.accounting_max_keys, s.accounting_learn_min)


def _sizes(s: DetectionSettings) -> SizeNorms:
    return SizeNorms(s.accounting_window, s.accounting_max_keys)


def _key(request: Request, response: Response) -> tuple[str, str]:
    # The engine's model (the response's) and the tenant: the tokenizer pair and the tenant's language.
    return (response.model, request.tenant_id)


class PrefillDetector(_Mechanism):
    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]:
        request, response = ex.request, ex.response
        if request is None or response is None:
            return []
        ttft_ms = response.ttft_ms
        if ttft_ms is None:
            return []
        tokens = request.prompt_tokens
        # Short prompts (most) are not judged: test that before the status (_accepted, inlined: per exchange).
        if tokens < self._prefill_min_tokens or not self._min_status <= response.status_code <= self._max_status:
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
        self, ex: Exchange, request: Request | None, response: Response | None, domain: DomainFacts
    ) -> list[Signal]:
        """`request` and `response`: the exchange's halves (the caller read them already)."""
        if request is None or response is None:
            return []  # each of the three needs both halves
        tokens = request.prompt_tokens
        out: list[Signal] = []
        # overlong: the prompt exceeds the domain's prefill capacity.
        capacity = domain.prefill_capacity
        if capacity is not None and tokens > capacity:
            out += self.overlong.observe(ex, domain)
        # accounting: the engine counted below the quick bound of the gateway's tokens (or the gateway counted 0).
        usage = response.usage
        if usage is not None:
            engine = usage.input_tokens
            accounting = self.accounting
            if engine is not None and not (tokens and accounting._quick <= engine / tokens < accounting._quick_hi):
                out += accounting.observe(ex, domain)
        # prefill: a long prompt with a 2xx status whose ttft implies a rate beyond the bound.
        ttft_ms = response.ttft_ms
        if ttft_ms is not None:
            prefill = self.prefill
            if (
                tokens >= prefill._prefill_min_tokens
                and prefill._min_status <= response.status_code <= prefill._max_status
            ):
                ttft_s = ttft_ms / 1000.0
                if not (ttft_s > 0 and tokens / ttft_s <= prefill._prefill_bound):
                    out += prefill.observe(ex, domain)
        return out


# Their words (registered with them, detectors/signals/registry.py): the alert summary's clause, the report's sentence.


def overlong_summary(f: dict[str, Any]) -> str:
    capacity = f["prefill_capacity_tokens"]
    return f"prompt {f['prompt_tokens']:,} tokens > prefill capacity {capacity:,}, HTTP {f['status_code']}"


def overlong_report(f: dict[str, Any]) -> str:
    return (
        f"The prompt had {n(f['prompt_tokens'])} tokens, {n(f['excess_tokens'])} more than the prefill "
        f"pool holds ({n(f['prefill_capacity_tokens'])}), yet it was answered with HTTP {f['status_code']}."
    )


def accounting_summary(f: dict[str, Any]) -> str:
    if f.get("direction") == "above":
        engine, gateway = f["engine_input_tokens"], f["gateway_prompt_tokens"]
        return f"engine counted {engine:,} input tokens for a prompt of {gateway:,}"
    return f"engine counted {f['engine_input_tokens']:,} of {f['gateway_prompt_tokens']:,} input tokens"


def accounting_report(f: dict[str, Any]) -> str:
    normal = f.get("normal_ratio")
    usual = (
        f" Its usual count for this model and tenant is {pct(normal)} of the gateway's."
        if isinstance(normal, int | float)
        else ""
    )
    other = (
        " An answer's usage counts the prompt it answered: this one counted another prompt."
        if f.get("basis") == "other_prompt"
        else ""
    )
    return (
        f"The gateway counted {n(f['gateway_prompt_tokens'])} prompt tokens; the engine reported "
        f"{n(f['engine_input_tokens'])}.{usual}{other}"
    )


def prefill_summary(f: dict[str, Any]) -> str:
    return f"ttft {f['ttft_ms']:.0f} ms for {f['prompt_tokens']:,} tokens"


def prefill_report(f: dict[str, Any]) -> str:
    return (
        f"The first token came after {n(f['ttft_ms'])} ms for {n(f['prompt_tokens'])} prompt tokens: "
        f"{n(f['implied_tokens_per_s'])} tokens/s, above the plausible {n(f['bound_tokens_per_s'])} tokens/s."
    )
