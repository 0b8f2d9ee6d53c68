"""Capacity state of one cache domain, and the `capacity_gap` signal.

The incident's root condition: a context window (1,048,576) advertised larger than the prefill
pool (681,280). Raised once per domain and again whenever the figures change.
"""

from __future__ import annotations

from typing import Any

from detectors.pool import PoolClock
from schemas.alert import Signal
from schemas.events import CacheStats


class CapacityTracker:
    def __init__(self, horizon_s: float = 900.0) -> None:
        self.prefill_capacity: int | None = None
        self.context_window: int | None = None
        self.used: dict[str, tuple[int, int]] = {}  # role -> (used, capacity)
        self._alerted: tuple[int, int] | None = None
        # Tokens the domain allocated over event time, from every exchange's engine counts (`detectors/pool.py`).
        self.clock = PoolClock(horizon_s)
        # role -> (prefix-cache hits, queries) at its last cache_stats, and the share served from the cache
        # between its last two (tokens): figures for a responder, never a verdict (one pool-wide counter cannot
        # say whose blocks were reused).
        self.reuse: dict[str, tuple[int, int]] = {}
        self.reuse_share: dict[str, tuple[float, int]] = {}  # role -> (hit share, tokens queried) over that interval

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "clock" not in state:  # a snapshot from before the clock: it starts now
            self.clock = PoolClock(900.0)
        if "reuse" not in state:  # a snapshot from before the reuse figures
            self.reuse, self.reuse_share = {}, {}

    def allocated_since(self, ts: float) -> float:
        """Tokens the domain allocated after event time `ts` (never more than the truth)."""
        return self.clock.since(ts)

    def observe_stats(self, ev: CacheStats) -> None:
        role, capacity = ev.role, ev.capacity_tokens
        self.used[role] = (ev.used_tokens, capacity)
        if role in ("prefill", "unified") and capacity > 0:
            self.prefill_capacity = capacity
        window = ev.context_window
        if window:
            self.context_window = window
        self._observe_reuse(role, ev.prefix_cache_hits_total, ev.prefix_cache_queries_total)

    def _observe_reuse(self, role: str, hits: int | None, queries: int | None) -> None:
        if hits is None or queries is None or hits > queries:
            return
        before = self.reuse.get(role)
        self.reuse[role] = (hits, queries)
        if before is None or hits < before[0] or queries < before[1]:
            return  # the first reading, or the engine restarted (its counters begin again): no interval yet
        asked = queries - before[1]
        if asked > 0:
            self.reuse_share[role] = ((hits - before[0]) / asked, asked)

    def reuse_figures(self) -> dict[str, float | int]:
        """The prefill pool's prefix-cache reuse over its latest scrape interval, for an alert's evidence."""
        for role in ("prefill", "unified"):
            if role in self.reuse_share:
                share, asked = self.reuse_share[role]
                return {"prefix_cache_hit_share": round(min(share, 1.0), 4), "prefix_cache_queried_tokens": asked}
        return {}

    def observe_window(self, context_window: int | None) -> bool:
        """Requests also tell the advertised window; the largest one seen is what clients were promised.

        Returns whether the window grew: if not, gap() has nothing new to say (it ran after every
        earlier change), so the caller may skip it.
        """
        if context_window and (self.context_window is None or context_window > self.context_window):
            self.context_window = context_window
            return True
        return False

    def gap(self) -> Signal | None:
        cap, win = self.prefill_capacity, self.context_window
        if cap is None or win is None or win <= cap or self._alerted == (cap, win):
            return None
        self._alerted = (cap, win)
        return Signal(
            name="capacity_gap",
            severity="warning",
            score=min(1.0, (win - cap) / win + 0.3),
            figures={"context_window": win, "prefill_capacity_tokens": cap, "gap_tokens": win - cap},
        )

    @property
    def pool_tokens(self) -> int | None:
        """The largest KV pool of the domain (any role), in tokens: how much it holds before freed pages are reused."""
        caps = [c for _, c in self.used.values() if c > 0]
        return max(caps) if caps else None

    def pressure(self) -> float | None:
        """Highest used/capacity over the roles, or None before any cache_stats."""
        ratios = [u / c for u, c in self.used.values() if c > 0]
        return max(ratios) if ratios else None
