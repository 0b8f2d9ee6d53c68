"""The test engine's functional core: prefill/decode disaggregation over paged KV pools, no I/O, no clock.

Tokens are whitespace-separated words. The toy "model" echoes the KV it attends to: the output is the
words of the decode pages of the request, from the first page on, up to `max_tokens`. So whatever a
request reads is visible in what it writes: its own prompt normally, another tenant's text (and canary
markers) when it reads pages it does not own.

Modes (switchable at run time, as a deploy would):
- `fixed`: a prompt the prefill pool cannot hold is rejected with 400.
- `pd-abort-bug`: such a prompt is marked aborted and replaced by a one-token placeholder that is still
  forwarded to decode; the decode side allocates the pages of the original length, receives no KV,
  attends to what is left in them (the last requests' pages) and answers 200 with `prompt_tokens=1`
  (the GLM-5.3/SGLang mechanism, Aug-Sep 2026).
- `prefix-collision`: within capacity, the prefix cache is keyed by the first few tokens only, so a
  prompt starting like another tenant's cached prompt is served that tenant's pages: content-only leaks,
  HTTP 200, correct token counts.
A prompt above the advertised context window is rejected with 400 in every mode (as engines do in the
tokenizer, before scheduling).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from streams.sim.serving.pool import CacheEntry, PagedPool, PrefixCache

Mode = Literal["fixed", "pd-abort-bug", "prefix-collision"]
MODES: tuple[Mode, ...] = ("fixed", "pd-abort-bug", "prefix-collision")


@dataclass(frozen=True)
class EngineConfig:
    model: str = "glm-sim"
    context_window: int = 8192  # advertised (max_model_len)
    prefill_pool_tokens: int = 4096  # what the prefill KV pool holds (sglang:max_total_num_tokens, prefill)
    decode_pool_tokens: int = 16384
    page_size: int = 16
    collision_key_tokens: int = 8  # prefix-collision: the cache key covers only this many first tokens
    prefill_tokens_per_s: float = 200_000.0  # simulated prefill speed (TTFT = uncached tokens / this)
    decode_tokens_per_s: float = 2_000.0
    cache_domain: str = "engine-sim"
    max_cache_entries: int = 256


class Rejected(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass
class Job:
    tenant: str
    prompt_tokens: int  # what the client sent, in engine tokens
    reported_prompt_tokens: int  # usage.prompt_tokens as the engine reports it
    computed_tokens: int  # tokens actually prefilled (TTFT is proportional)
    cached_tokens: int
    aborted: bool
    output: list[str]
    finish_reason: str
    attended_owners: list[str | None]  # owner tenant of every decode page attended (ground truth)
    decode_pages: list[int] = field(default_factory=list)
    prefill_entry: CacheEntry | None = None
    done: bool = False

    @property
    def foreign_owners(self) -> set[str]:
        """Tenants other than the requester whose pages this request read (ground truth of a leak)."""
        return {o for o in self.attended_owners if o is not None and o != self.tenant}


@dataclass
class Counters:
    requests: int = 0
    rejected: int = 0
    aborted: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    cached_tokens: int = 0
    leaked: int = 0  # responses that attended another tenant's pages (ground truth)


class EngineCore:
    def __init__(self, config: EngineConfig, mode: Mode = "fixed") -> None:
        self.config = config
        self.prefill = PagedPool(config.prefill_pool_tokens, config.page_size)
        self.decode = PagedPool(config.decode_pool_tokens, config.page_size)
        self.counters = Counters()
        self.running = 0
        self._cache_exact = PrefixCache(self.prefill, None, config.max_cache_entries)
        self._cache_collide = PrefixCache(self.prefill, config.collision_key_tokens, config.max_cache_entries)
        self.mode: Mode = "fixed"
        self.set_mode(mode)

    # --- mode ------------------------------------------------------------------------------------
    def set_mode(self, mode: Mode) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
        if mode != self.mode:
            # A deploy restarts the prefill server: its cache is gone (pages stay stale, as memory does).
            for cache in (self._cache_exact, self._cache_collide):
                while cache.evict_one():
                    pass
        self.mode = mode

    @property
    def cache(self) -> PrefixCache:
        return self._cache_collide if self.mode == "prefix-collision" else self._cache_exact

    # --- admission -------------------------------------------------------------------------------
    def check(self, tokens: int) -> None:
        """Raise Rejected for a prompt this mode refuses outright."""
        c = self.config
        if tokens > c.context_window:
            raise Rejected(
                400,
                "context_length_exceeded",
                f"This model's maximum context length is {c.context_window} tokens; the prompt has {tokens}.",
            )
        if tokens > self.prefill.capacity_tokens and self.mode != "pd-abort-bug":
            raise Rejected(
                400,
                "prompt_exceeds_kv_pool",
                f"The prompt ({tokens} tokens) does not fit the prefill KV cache pool "
                f"({self.prefill.capacity_tokens} tokens).",
            )

    def over_capacity(self, tokens: int) -> bool:
        return tokens > self.prefill.capacity_tokens

    def can_start(self, tokens: int, max_tokens: int) -> bool:
        """Whether the pools have room now (else the caller waits for running requests to finish)."""
        if self.over_capacity(tokens):
            return True  # the aborted path takes whatever decode pages are free
        need_p = self.prefill.pages_for(tokens)
        need_d = self.decode.pages_for(tokens + max_tokens)
        if need_d > self.decode.num_pages:
            return True  # can never fit: start() reports it
        return len(self.prefill.free) + self.cache.evictable_pages() >= need_p and len(self.decode.free) >= need_d

    def start(self, tenant: str, tokens: list[str], max_tokens: int) -> Job:
        """Prefill (or the aborted placeholder path), KV transfer and decode of one request."""
        n = len(tokens)
        self.check(n)
        self.counters.requests += 1
        if self.over_capacity(n):
            return self._start_aborted(tenant, n, max_tokens)
        return self._start_normal(tenant, tokens, max_tokens)

    def _start_normal(self, tenant: str, tokens: list[str], max_tokens: int) -> Job:
        ps = self.config.page_size
        n = len(tokens)
        cache = self.cache
        need = self.prefill.pages_for(n)
        if not cache.make_room(need):
            raise Rejected(503, "kv_pool_busy", "the prefill KV pool is busy; retry")
        entry, matched = cache.lookup(tokens)
        pages = self.prefill.alloc(need)
        if entry is not None and matched:
            # Reuse = the cached pages' KV for the first `matched` pages (copied: the toy has no refcounts).
            self.prefill.copy_from(pages[:matched], self.prefill.read(entry.pages[:matched]))
            entry.hits += 1
            cache.touch(entry)
        else:
            matched = 0
        self.prefill.write(pages[matched:], tokens, tenant, start=matched * ps)
        cached = min(n, matched * ps)
        own = cache.insert(tokens, pages, tenant)
        own.pins += 1  # held while prefilling (counted as used)
        dpages = self.decode.alloc(min(self.decode.pages_for(n + max_tokens), len(self.decode.free)))
        src = self.prefill.read(pages)
        self.decode.copy_from(dpages[: len(src)], src[: len(dpages)])
        attended = dpages[: len(src)]
        return self._decoded(tenant, n, n, n - cached, cached, False, attended, max_tokens, dpages, own)

    def _start_aborted(self, tenant: str, n: int, max_tokens: int) -> Job:
        # Marked aborted at the prefill server, swapped for a one-token placeholder, still forwarded;
        # the decode server pre-allocates pages for the original length and attends to them unwritten.
        self.counters.aborted += 1
        dpages = self.decode.alloc(min(self.decode.pages_for(n), len(self.decode.free)))
        return self._decoded(tenant, n, 1, 1, 0, True, dpages, max_tokens, dpages, None)

    def _decoded(
        self,
        tenant: str,
        n: int,
        reported: int,
        computed: int,
        cached: int,
        aborted: bool,
        attended: list[int],
        max_tokens: int,
        dpages: list[int],
        entry: CacheEntry | None,
    ) -> Job:
        out: list[str] = []
        owners: list[str | None] = []
        for page in self.decode.read(attended):
            if len(out) >= max_tokens:
                break
            if page.tokens:
                owners.append(page.owner)
                out.extend(page.tokens[: max_tokens - len(out)])
        job = Job(
            tenant=tenant,
            prompt_tokens=n,
            reported_prompt_tokens=reported,
            computed_tokens=computed,
            cached_tokens=cached,
            aborted=aborted,
            output=out,
            finish_reason="length" if len(out) >= max_tokens else "stop",
            attended_owners=owners,
            decode_pages=dpages,
            prefill_entry=entry,
        )
        c = self.counters
        c.prompt_tokens += reported
        c.generation_tokens += len(out)
        c.cached_tokens += cached
        c.leaked += bool(job.foreign_owners)
        self.running += 1
        return job

    def prefill_done(self, job: Job) -> None:
        if job.prefill_entry is not None:
            # Either cache can unpin: both manage the same prefill pool.
            self._cache_exact.unpin(job.prefill_entry)
            job.prefill_entry = None

    def finish(self, job: Job) -> None:
        if job.done:
            return
        self.prefill_done(job)
        self.decode.release(job.decode_pages)
        job.decode_pages = []
        job.done = True
        self.running -= 1

    # --- figures for /metrics and cache_stats ----------------------------------------------------
    def prefill_used_tokens(self) -> int:
        """Tokens held by running requests (not the evictable cache), as SGLang's num_used_tokens."""
        return (self.prefill.used_pages - self.cache.evictable_pages()) * self.config.page_size

    def decode_used_tokens(self) -> int:
        return self.decode.used_pages * self.config.page_size
