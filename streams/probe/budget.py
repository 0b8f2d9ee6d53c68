"""The probe's budget: requests and tokens per run, and a rate limit, never exceeded.

A request is charged before it is sent (its prompt tokens plus the output tokens it may get back), so
the totals hold even when requests fail or run concurrently; a request the budget cannot cover is not
sent and is reported as skipped.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field


@dataclass
class Budget:
    max_requests: int
    max_tokens: int
    rate_per_s: float
    requests: int = 0
    tokens: int = 0
    skipped: int = 0
    _next_start: float = field(default=0.0, repr=False)
    _lock: asyncio.Lock | None = field(default=None, repr=False)

    def reserve(self, tokens: int) -> bool:
        if self.requests + 1 > self.max_requests or self.tokens + tokens > self.max_tokens:
            self.skipped += 1
            return False
        self.requests += 1
        self.tokens += tokens
        return True

    async def pace(self) -> None:
        """Wait for this request's start slot: at most `rate_per_s` starts per second, all identities together."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = time.monotonic()
            wait = self._next_start - now
            if wait > 0:
                await asyncio.sleep(wait)
            self._next_start = max(now, self._next_start) + 1.0 / self.rate_per_s
