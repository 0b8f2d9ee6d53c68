"""The prefill pool size an engine reports on its Prometheus endpoint, for the ladder to bracket.

SGLang: `sglang:max_total_num_tokens` (KV cache pool size in tokens; in a disaggregated deployment the
prefill server's series, `engine_type="prefill"`). Other engines' metrics are not read: pass
`--pool-tokens` instead. The read is bounded like a scrape's (a total deadline, a byte cap, only the
needed lines kept), and a value that is no token count (+Inf, NaN, 1e308, 0.5) is no pool size.
"""

from __future__ import annotations

import asyncio

import httpx

from streams.inputs.engine_metrics import MetricsError, samples, tokens
from streams.inputs.scrape_http import FetchError, fetch_exposition

_METRIC = "sglang:max_total_num_tokens"


def pool_from_text(text: str) -> int | None:
    """The prefill pool in tokens from SGLang exposition text (prefill series first, else unified/unlabelled)."""
    found: dict[str, float] = {}
    for labels, value in samples(text).get(_METRIC, []):
        found.setdefault(labels.get("engine_type", "unified"), value)
    for role in ("prefill", "unified"):
        if role in found:
            pool = tokens(_METRIC, found[role])
            if pool > 0:
                return pool
    return None


async def _read(url: str, timeout_s: float, max_bytes: int) -> str:
    async with httpx.AsyncClient(timeout=timeout_s) as client, asyncio.timeout(timeout_s):
        return await fetch_exposition(client, url, "sglang", max_bytes)


def pool_from_metrics(url: str, timeout_s: float = 10.0, max_bytes: int = 16 * 2**20) -> int | None:
    """None when the endpoint cannot be read within timeout_s (in all), or reports no believable pool; the
    prober then uses window fractions."""
    try:
        return pool_from_text(asyncio.run(_read(url, timeout_s, max_bytes)))
    except (FetchError, MetricsError, TimeoutError):
        return None
