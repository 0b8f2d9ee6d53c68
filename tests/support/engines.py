"""Engine look-alikes for tests: SGLang and vLLM Prometheus exposition text, and loopback HTTP servers
serving it with /v1/models.

The text is produced by prometheus_client (the library both engines expose metrics with) from the
metric definitions in the engines' sources: same names, help texts and label names."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest


def sglang_text(capacity: int, used: int, usage: float | None = None, context_len: int = 1_048_576) -> str:
    """As sglang/srt/metrics/collector.py (SchedulerMetricsCollector) exposes it."""
    reg = CollectorRegistry()
    labels = {"model_name": "glm-5.3", "engine_type": "prefill", "tp_rank": "0", "pp_rank": "0"}
    for name, doc, value in (
        ("sglang:max_total_num_tokens", "Maximum total number of tokens", capacity),
        ("sglang:num_used_tokens", "The number of used tokens.", used),
        ("sglang:token_usage", "The token usage.", used / capacity if usage is None else usage),
        ("sglang:context_len", "Context length", context_len),
        ("sglang:num_running_reqs", "The number of running requests.", 3),
    ):
        Gauge(name, doc, list(labels), registry=reg).labels(**labels).set(value)
    return generate_latest(reg).decode()


def vllm_text(blocks: int, block_size: int, usage: float, legacy: bool = False, engines: int = 1) -> str:
    """As vllm/v1/metrics/loggers.py (PrometheusStatLogger) exposes it; legacy: the pre-0.10 usage name."""
    reg = CollectorRegistry()
    usage_name = "vllm:gpu_cache_usage_perc" if legacy else "vllm:kv_cache_usage_perc"
    g = Gauge(usage_name, "KV-cache usage. 1 means 100 percent usage.", ["model_name", "engine"], registry=reg)
    info = Gauge(
        "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig",
        ["block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization", "num_gpu_blocks", "engine"],
        registry=reg,
    )
    for e in range(engines):
        g.labels("glm-5.3", str(e)).set(usage if e == 0 else usage / 2)
        info.labels(str(block_size), "auto", "True", "0.9", str(blocks - 100 * e), str(e)).set(1)
    return generate_latest(reg).decode()


# vllm/config/cache.py (vLLM main, commit 002f10e0): CacheConfig.metrics_info() writes every field as a label,
# str() of its value ("None" until set). The values are those of a hybrid attention+Mamba model on one GPU.
VLLM_CACHE_CONFIG = {
    "block_size": "8",
    "user_specified_block_size": "False",
    "user_specified_mamba_block_size": "False",
    "kv_cache_layout": "LBNHC",
    "prefix_match_unit": "None",
    "gpu_memory_utilization": "0.8",
    "cache_dtype": "auto",
    "is_attention_free": "False",
    "num_gpu_blocks_override": "None",
    "sliding_window": "None",
    "enable_prefix_caching": "True",
    "prefix_caching_hash_algo": "sha256",
    "attn_group_size": "None",
    "prefix_cache_retention_interval": "0",
    "kv_cache_dtype_skip_layers": "[]",
    "mamba_page_size_padded": "None",
    "skip_page_size_padded": "None",
    "mamba_block_size": "16",
    "mamba_cache_dtype": "auto",
    "mamba_ssm_cache_dtype": "auto",
    "mamba_cache_mode": "align",
    "enable_mamba_fine_grained_prefix_cache": "False",
    "replayssm_buffer_len": "16",
    "use_replayssm": "False",
    "use_kda_recoverssm": "False",
    "num_gpu_blocks": "320",
    "num_cpu_blocks": "None",
    "effective_attention_block_size": "8",
    "kv_cache_size_tokens": "463459",
    "kv_cache_max_concurrency": "1.77",
    "kv_sharing_fast_prefill": "False",
    "kv_cache_memory_bytes": "None",
    "kv_offloading_size": "None",
    "kv_offloading_backend": "native",
}


def vllm_current_text(usage: float, hits: int, queries: int, engines: int = 1, **config: str) -> str:
    """As vllm/v1/metrics/loggers.py (PrometheusStatLogger, main) exposes it: cache_config_info with every
    CacheConfig field as a label (VLLM_CACHE_CONFIG, overridden by `config`; "None" for a field not set) and
    the prefix-cache counters in tokens, per engine (data-parallel rank)."""
    reg = CollectorRegistry()
    labelnames = ["model_name", "engine"]
    g = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labelnames, registry=reg)
    q = Counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                labelnames, registry=reg)  # fmt: skip
    h = Counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.",
                labelnames, registry=reg)  # fmt: skip
    info_labels = {**VLLM_CACHE_CONFIG, **config}
    info = Gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", [*info_labels, "engine"],
                 registry=reg)  # fmt: skip
    for e in range(engines):
        g.labels("glm-5.3", str(e)).set(usage)
        q.labels("glm-5.3", str(e)).inc(queries)
        h.labels("glm-5.3", str(e)).inc(hits)
        info.labels(**info_labels, engine=str(e)).set(1)
    return generate_latest(reg).decode()


def sglang_pd_text(
    role: str,
    capacity: int,
    used: int,
    queues: tuple[int, int] = (0, 0),
    tokens: tuple[int, int] = (0, 0),
    **gauges: float,
) -> str:
    """An SGLang server of a PD pair (or unified), as collector.py (SchedulerMetricsCollector, main, commit
    00ae9c15) and scheduler_metrics_mixin.py expose it: every gauge is written on each log, the PD queues of
    the other side stay 0, `utilization` is -1 on a prefill server, and `engine_type` is "unified" whatever the
    mode. `queues`: this side's two queue lengths (prefill: prealloc, inflight; decode: prealloc, transfer);
    `tokens`: the tokenizer's counters (prompt tokens, cached prompt tokens)."""
    reg = CollectorRegistry()
    labels = {"model_name": "glm-5.3", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    values: dict[str, float] = {
        "max_total_num_tokens": capacity,
        "num_used_tokens": used,
        "token_usage": used / capacity,
        "swa_token_usage": 0.0,
        "mamba_usage": 0.0,
        "cache_hit_rate": 0.0,
        "num_prefill_prealloc_queue_reqs": queues[0] if role == "prefill" else 0,
        "num_prefill_inflight_queue_reqs": queues[1] if role == "prefill" else 0,
        "num_decode_prealloc_queue_reqs": queues[0] if role == "decode" else 0,
        "num_decode_transfer_queue_reqs": queues[1] if role == "decode" else 0,
        "kv_transfer_speed_gb_s": 0.0,
        "kv_transfer_latency_ms": 0.0,
        "utilization": -1.0 if role == "prefill" else 0.0,
        "context_len": 1_048_576,
        **gauges,
    }
    for name, value in values.items():
        Gauge(f"sglang:{name}", name, list(labels), registry=reg).labels(**labels).set(value)
    tokenizer = {"model_name": "glm-5.3"}
    for name, value in zip(("prompt_tokens", "cached_tokens"), tokens, strict=True):
        Counter(f"sglang:{name}", name, list(tokenizer), registry=reg).labels(**tokenizer).inc(value)
    return generate_latest(reg).decode()


class Engines:
    """Engine look-alikes on loopback: /metrics (exposition text) and /v1/models, on a background loop."""

    def __init__(self) -> None:
        self.metrics: dict[str, str] = {}
        self.models: dict[str, dict[str, Any]] = {}
        self.ports: dict[str, int] = {}
        self._loop = asyncio.new_event_loop()
        self._runners: list[Any] = []
        threading.Thread(target=self._loop.run_forever, daemon=True).start()

    def add(self, name: str, metrics: str, max_model_len: int | None) -> str:
        from aiohttp import web

        self.metrics[name] = metrics
        card: dict[str, Any] = {"id": "glm-5.3", "object": "model", "owned_by": "vllm"}
        if max_model_len is not None:
            card["max_model_len"] = max_model_len
        self.models[name] = {"object": "list", "data": [card]}

        async def boot() -> int:
            app = web.Application()

            async def metrics(_: Any) -> Any:
                return web.Response(text=self.metrics[name])

            async def models(_: Any) -> Any:
                return web.json_response(self.models[name])

            app.router.add_get("/metrics", metrics)
            app.router.add_get("/v1/models", models)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self._runners.append(runner)
            return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        self.ports[name] = asyncio.run_coroutine_threadsafe(boot(), self._loop).result(10)
        return f"http://127.0.0.1:{self.ports[name]}"

    def close(self) -> None:
        for r in self._runners:
            asyncio.run_coroutine_threadsafe(r.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
