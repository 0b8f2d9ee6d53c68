"""`foreign_cache_read`: the engine served part of a prompt from KV its own tenant never computed in this domain.

A response's usage may say how many of its input tokens the engine read from its prefix cache (OTel
`gen_ai.usage.cache_read.input_tokens`, OpenAI `prompt_tokens_details.cached_tokens`: `Usage.cached_input_tokens`).
A prefix cache holds only what some request of the domain prefilled, and a prefix of C tokens is reused only by a
prompt that starts with the same C tokens. So when a tenant's response claims C cached tokens and that tenant sent
no prompt of C tokens or more in this domain within `cache_read_window_s`, the KV it read was computed for another
tenant's request (or one the operator warmed the cache with): cross-tenant KV sharing, on this response.

What it is not: a leak by itself. Tenants that share a system prompt share its prefix, legitimately, on every engine
that does not salt its cache per tenant (vLLM's `cache_salt`, SGLang's per-request extra key). So the signal is
`info`: it never raises an alert alone and changes no severity. It is evidence on the alert another signal raises
for the same response (a content finding that names another tenant, a mechanism signal): the engine's own word that
this response read KV another tenant's request produced. On a deployment that salts per tenant it should never
appear, and its count (`foreign_cache_read` in the evidence) says the isolation is off.

Bounded: three numbers per tenant (its longest prompt over at least the last `cache_read_window_s`, at most twice
that), `cache_read_max_tenants` tenants at most, the least recently seen evicted: an evicted tenant counts as having
sent nothing, so eviction can add this evidence to an alert but never take an alert away.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from detectors.settings import DetectionSettings
from detectors.signals.base import DomainFacts
from detectors.signals.words import n
from schemas.alert import Signal
from schemas.exchange import Exchange


class CacheReadDetector:
    def __init__(self, settings: DetectionSettings) -> None:
        self.min_tokens = settings.cache_read_min_tokens
        self.window_s = settings.cache_read_window_s
        self.max_tenants = settings.cache_read_max_tenants
        # tenant -> [bucket start, longest prompt since then, longest in the bucket before]: the longest over at
        # least the last window_s (at most twice that), so a claim of "never sent" errs toward silence
        self._longest: OrderedDict[str, list[float]] = OrderedDict()

    def _own(self, tenant_id: str, ts: float) -> float:
        seen = self._longest.get(tenant_id)
        if seen is None:
            return 0
        start, current, before = seen
        age = ts - start
        return max(current, before) if age < self.window_s else current if age < 2 * self.window_s else 0

    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]:
        request, response = ex.request, ex.response
        if request is None or response is None or response.usage is None:
            return []
        # getattr: a usage restored from a snapshot taken before the field existed has no such attribute.
        cached = getattr(response.usage, "cached_input_tokens", None)
        if not cached or cached < self.min_tokens:
            return []
        own = int(self._own(request.tenant_id, request.ts))
        if cached <= own:
            return []
        figures = {"engine_cached_input_tokens": cached, "own_longest_prompt_tokens": own,
                   "gateway_prompt_tokens": request.prompt_tokens, "window_s": self.window_s}  # fmt: skip
        return [Signal(name="foreign_cache_read", severity="info", score=0.0, figures=figures)]

    def learn(self, ex: Exchange, include_output: bool = True) -> None:
        request = ex.request
        if request is None or not request.prompt_tokens:
            return
        tenant, tokens, ts = request.tenant_id, request.prompt_tokens, request.ts
        longest = self._longest
        seen = longest.get(tenant)
        if seen is None or ts - seen[0] >= 2 * self.window_s:
            longest[tenant] = [ts, tokens, 0]
        elif ts - seen[0] >= self.window_s:
            longest[tenant] = [ts, tokens, seen[1]]  # a new bucket; the last one still counts for a window
        elif tokens > seen[1]:
            seen[1] = tokens
        longest.move_to_end(tenant)
        while len(longest) > self.max_tenants:
            longest.popitem(last=False)

    def state_size(self) -> int:
        return len(self._longest)


def summary(f: dict[str, Any]) -> str:
    return f"{f['engine_cached_input_tokens']:,} input tokens read from KV its tenant never sent in this domain"


def report(f: dict[str, Any]) -> str:
    return (
        f"The engine served {n(f['engine_cached_input_tokens'])} of the prompt's tokens from its prefix cache, while "
        f"this tenant's longest prompt in the domain over the last {n(f['window_s'])} s had "
        f"{n(f['own_longest_prompt_tokens'])}: that KV was computed for another request."
    )
