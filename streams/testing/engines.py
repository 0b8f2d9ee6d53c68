"""Engine look-alikes for tests: SGLang and vLLM Prometheus exposition text, and loopback HTTP servers
serving it with /v1/models.

The text is produced by prometheus_client (the library both engines expose metrics with) from the
metric definitions in the engines' sources: same names, help texts and label names."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest


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
