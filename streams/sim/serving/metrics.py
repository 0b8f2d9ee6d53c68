"""Prometheus metrics of the test engine, named and labelled as SGLang exposes them.

Names and help texts follow SGLang's own collector (python/sglang/srt/metrics/collector.py,
SchedulerMetricsCollector / TokenizerMetricsCollector): `sglang:max_total_num_tokens` (KV pool size in
tokens), `sglang:num_used_tokens`, `sglang:token_usage` (used / max), `sglang:num_running_reqs`,
`sglang:num_queue_reqs`, `sglang:cache_hit_rate`, the counters `sglang:prompt_tokens_total`,
`sglang:generation_tokens_total`, `sglang:num_requests_total`, `sglang:num_aborted_requests_total` and the
histogram `sglang:time_to_first_token_seconds`. Rendered by prometheus_client, the library SGLang uses,
so the exposition text is the same format a scraper meets in production. A disaggregated deployment runs
a prefill and a decode server, each with its own /metrics; this one process serves both sets on
`/metrics`, told apart by the `engine_type` label (`prefill` / `decode`) that SGLang puts on scheduler
metrics, and each server's own view on `/metrics/prefill` and `/metrics/decode`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from streams.sim.serving.core import EngineCore

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 15.0, 20.0)


class TtftHistogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(TTFT_BUCKETS) + 1)
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(TTFT_BUCKETS, seconds)] += 1
        self.total += seconds

    def buckets(self) -> list[tuple[str, float]]:
        out, acc = [], 0
        for bound, n in zip([*(str(b) for b in TTFT_BUCKETS), "+Inf"], self.counts, strict=True):
            acc += n
            out.append((bound, float(acc)))
        return out


class SglangCollector:
    def __init__(self, core: EngineCore, ttft: TtftHistogram, queued: dict[str, int], only: str | None = None) -> None:
        self.core = core
        self.ttft = ttft
        self.queued = queued  # engine_type -> requests waiting for pool pages
        self.only = only  # "prefill" / "decode": one server's view, as a real P/D deployment exposes it

    def collect(self) -> Iterator[Metric]:
        core = self.core
        model = core.config.model
        labels = ["model_name", "engine_type", "tp_rank", "pp_rank"]
        sides = {
            "prefill": (core.prefill.capacity_tokens, core.prefill_used_tokens()),
            "decode": (core.decode.capacity_tokens, core.decode_used_tokens()),
        }
        if self.only is not None:
            sides = {self.only: sides[self.only]}
        gauges = {
            "max_total_num_tokens": ("Maximum total number of tokens in the KV cache pool.", lambda c, u, t: c),
            "num_used_tokens": ("The number of used tokens.", lambda c, u, t: u),
            "token_usage": ("The token usage.", lambda c, u, t: round(u / c, 6) if c else 0.0),
            "num_running_reqs": ("The number of running requests.", lambda c, u, t: core.running),
            "num_queue_reqs": ("The number of requests in the waiting queue.", lambda c, u, t: self.queued.get(t, 0)),
        }
        for name, (doc, value) in gauges.items():
            g = GaugeMetricFamily(f"sglang:{name}", doc, labels=labels)
            for engine_type, (cap, used) in sides.items():
                g.add_metric([model, engine_type, "0", "0"], float(value(cap, used, engine_type)))
            yield g
        cnt = core.counters
        if "prefill" in sides:
            hit = GaugeMetricFamily("sglang:cache_hit_rate", "The prefix cache hit rate.", labels=labels)
            rate = cnt.cached_tokens / cnt.prompt_tokens if cnt.prompt_tokens else 0.0
            hit.add_metric([model, "prefill", "0", "0"], rate)
            yield hit
        counters = {
            "prompt_tokens": ("Number of prefill tokens processed.", cnt.prompt_tokens),
            "generation_tokens": ("Number of generation tokens processed.", cnt.generation_tokens),
            "num_requests": ("The number of requests.", cnt.requests),
            "num_aborted_requests": ("Number of requests aborted.", cnt.aborted),
        }
        for name, (doc, total) in counters.items():
            c = CounterMetricFamily(f"sglang:{name}", doc, labels=["model_name"])
            c.add_metric([model], float(total))
            yield c
        h = HistogramMetricFamily(
            "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels=["model_name"]
        )
        h.add_metric([model], self.ttft.buckets(), self.ttft.total)
        yield h


def exposition(collector: SglangCollector) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)
