"""Engine KV-cache metrics (Prometheus exposition text) -> absolute pool capacity and use, per engine.

Pure: text in, numbers out. Parsed with prometheus_client's own parser (the library both engines
use to expose them). The names, checked against the engines' sources (docs/adr/0005-telemetry-inputs.md):

SGLang (python/sglang/srt/metrics/collector.py, metrics_collector.py; v0.4 - v0.5):
  capacity  ``sglang:max_total_num_tokens``   gauge, tokens the KV pool holds
  used      ``sglang:num_used_tokens``        gauge, tokens in use; else ``sglang:token_usage`` (0-1) x capacity
  window    ``sglang:context_len``            gauge (when /v1/models gives no max_model_len)

vLLM (vllm/v1/metrics/loggers.py; V1 engine, >= 0.8):
  capacity  ``vllm:cache_config_info``        info gauge (value 1) with labels ``num_gpu_blocks`` x ``block_size``
  used      ``vllm:kv_cache_usage_perc``      gauge 0-1 (>= 0.10); ``vllm:gpu_cache_usage_perc`` before (deprecated)
  window    /v1/models ``max_model_len``

Several series of one metric (data-parallel ranks, engines) are separate pools: a prompt must fit
into one of them, so the reading is conservative: the smallest capacity and the highest used share.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class PoolReading:
    capacity_tokens: int
    used_tokens: int
    model: str | None = None
    context_window: int | None = None
    series: int = 1  # pools (label sets) the reading summarises


class MetricsError(ValueError):
    """The exposition text parses but lacks what the engine mapping needs; `reason` is a short label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)]; raises MetricsError(reason=unparseable) on bad exposition text."""
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[s.name].append((dict(s.labels), float(s.value)))
    except (ValueError, IndexError, TypeError) as exc:
        raise MetricsError("unparseable", f"exposition text: {exc}") from None
    return out


def _pool_key(labels: dict[str, str], drop: tuple[str, ...] = ()) -> Labels:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


def _combine(pools: list[tuple[float, float]], model: str | None, window: int | None) -> PoolReading:
    """(capacity, used) per pool -> the conservative reading: smallest capacity, highest used share."""
    pools = [(c, u) for c, u in pools if c > 0]
    if not pools:
        raise MetricsError("no_capacity", "every pool reports capacity 0 (engine not initialised yet?)")
    capacity = min(c for c, _ in pools)
    share = max(min(max(u / c, 0.0), 1.0) for c, u in pools)
    return PoolReading(int(capacity), round(share * capacity), model, window, len(pools))


def sglang_reading(text: str) -> PoolReading:
    s = samples(text)
    caps = s.get("sglang:max_total_num_tokens")
    if not caps:
        raise MetricsError("missing_metric", "sglang:max_total_num_tokens not exposed (is --enable-metrics on?)")
    used = {_pool_key(lb): v for lb, v in s.get("sglang:num_used_tokens", [])}
    usage = {_pool_key(lb): v for lb, v in s.get("sglang:token_usage", [])}
    pools: list[tuple[float, float]] = []
    for labels, cap in caps:
        key = _pool_key(labels)
        if key in used:
            pools.append((cap, used[key]))
        elif key in usage:
            pools.append((cap, usage[key] * cap))
        elif len(caps) == 1 and (used or usage):  # differently labelled but unambiguous
            pools.append((cap, next(iter(used.values())) if used else next(iter(usage.values())) * cap))
        else:
            raise MetricsError("missing_metric", "neither sglang:num_used_tokens nor sglang:token_usage")
    model = caps[0][0].get("model_name")
    window = s.get("sglang:context_len")
    return _combine(pools, model, int(window[0][1]) if window else None)


def _int_label(labels: dict[str, str], name: str) -> int | None:
    try:
        return int(float(labels[name]))
    except (KeyError, ValueError):
        return None  # vLLM writes "None" before the KV cache is profiled


def vllm_reading(text: str) -> PoolReading:
    s = samples(text)
    infos = s.get("vllm:cache_config_info")
    if not infos:
        raise MetricsError("missing_metric", "vllm:cache_config_info not exposed")
    usage_name = "vllm:kv_cache_usage_perc" if "vllm:kv_cache_usage_perc" in s else "vllm:gpu_cache_usage_perc"
    usage = s.get(usage_name)
    if not usage:
        raise MetricsError("missing_metric", "neither vllm:kv_cache_usage_perc nor vllm:gpu_cache_usage_perc")
    by_engine = {lb.get("engine", ""): v for lb, v in usage}
    pools: list[tuple[float, float]] = []
    for labels, _ in infos:
        blocks, block_size = _int_label(labels, "num_gpu_blocks"), _int_label(labels, "block_size")
        if blocks is None or block_size is None:
            raise MetricsError("no_capacity", "cache_config_info has no num_gpu_blocks/block_size yet")
        engine = labels.get("engine", "")
        share = by_engine.get(engine, max(by_engine.values()))
        pools.append((blocks * block_size, share * blocks * block_size))
    model = usage[0][0].get("model_name")
    return _combine(pools, model, None)


READERS = {"sglang": sglang_reading, "vllm": vllm_reading}


def max_model_len(models_json: Any, model: str | None = None) -> tuple[str | None, int | None]:
    """(model id, max_model_len) from an OpenAI-style /v1/models answer (vLLM and SGLang both add the field)."""
    data = models_json.get("data") if isinstance(models_json, dict) else None
    if not isinstance(data, list) or not data:
        return None, None
    entry = next((m for m in data if isinstance(m, dict) and m.get("id") == model), None) if model else None
    entry = entry or (data[0] if isinstance(data[0], dict) else {})
    n = entry.get("max_model_len")
    return entry.get("id"), int(n) if isinstance(n, int | float) and n > 0 else None
