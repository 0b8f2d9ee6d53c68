"""The prefill pool size an engine reports on its Prometheus endpoint, for the ladder to bracket.

SGLang: `sglang:max_total_num_tokens` (KV cache pool size in tokens; in a disaggregated deployment the
prefill server's series, `engine_type="prefill"`). Other engines' metrics are not read: pass
`--pool-tokens` instead.
"""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

_METRIC = "sglang:max_total_num_tokens"


def pool_from_text(text: str) -> int | None:
    """The prefill pool in tokens from SGLang exposition text (prefill series first, else unified/unlabelled)."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == _METRIC:
                found.setdefault(sample.labels.get("engine_type", "unified"), sample.value)
    for role in ("prefill", "unified"):
        if role in found and found[role] > 0:
            return int(found[role])
    return None


def pool_from_metrics(url: str, timeout_s: float = 10.0) -> int | None:
    """None when the endpoint cannot be read or reports no pool; the prober then uses window fractions."""
    try:
        resp = httpx.get(url, timeout=timeout_s)
        resp.raise_for_status()
        return pool_from_text(resp.text)
    except (httpx.HTTPError, ValueError):
        return None
