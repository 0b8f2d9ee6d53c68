"""What the engines report today (issue 40): vLLM's own group-aware pool size, both engines' prefix-cache reuse,
SGLang's hybrid pools and prefill/decode hand-off, and a target's role derived from its metrics.

The exposition text is produced by prometheus_client from the metric definitions of vLLM main
(vllm/v1/metrics/loggers.py, vllm/config/cache.py at 002f10e0) and SGLang main
(python/sglang/srt/metrics/collector.py at 00ae9c15), served over real HTTP on loopback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import orjson
import pytest

from schemas.events import CacheStats
from streams.inputs.engine_metrics import samples, sglang_reading, sglang_role, vllm_reading
from streams.inputs.scrape import Scraper
from streams.kafka import records
from streams.settings import Settings
from tests.support.engines import Engines, sglang_pd_text, vllm_current_text, vllm_text


@pytest.fixture
def engines() -> Iterator[Engines]:
    e = Engines()
    yield e
    e.close()


def test_vllm_hybrid_pool_is_the_engines_own_figure_not_blocks_times_block_size() -> None:
    """320 blocks x 8 = 2,560 tokens, where vLLM reports 463,459: the product would refuse valid prompts."""
    r = vllm_reading(vllm_current_text(0.25, hits=0, queries=0))
    assert r.capacity_tokens == 463_459
    assert r.used_tokens == round(0.25 * 463_459)
    # Before vLLM profiles the cache, or in a version without the label: the product, as before.
    assert vllm_reading(vllm_current_text(0.5, 0, 0, kv_cache_size_tokens="None")).capacity_tokens == 2_560
    assert vllm_reading(vllm_text(4096, 16, 0.5)).capacity_tokens == 65_536


def test_vllm_pool_per_engine_is_the_smallest_and_a_bad_own_figure_is_refused() -> None:
    two = vllm_reading(vllm_current_text(0.5, 10, 40, engines=2))
    assert (two.capacity_tokens, two.series) == (463_459, 2)
    assert (two.prefix_cache_hits, two.prefix_cache_queries) == (20, 80)  # summed over the engines
    with pytest.raises(ValueError, match="kv_cache_size_tokens"):
        vllm_reading(vllm_current_text(0.5, 0, 0, kv_cache_size_tokens="1e300"))


def test_prefix_cache_counters_are_read_and_nonsense_is_left_out_with_a_note() -> None:
    r = vllm_reading(vllm_current_text(0.1, hits=1_200, queries=5_000))
    assert (r.prefix_cache_hits, r.prefix_cache_queries, r.dropped) == (1_200, 5_000, ())
    bad = vllm_current_text(0.1, 1, 2).replace("vllm:prefix_cache_hits_total{", 'vllm:prefix_cache_hits_total{x="",')
    bad = bad.replace('x="",engine="0",model_name="glm-5.3"} 1.0', 'x="",engine="0",model_name="glm-5.3"} NaN')
    r = vllm_reading(bad)
    assert r.capacity_tokens == 463_459 and r.prefix_cache_hits is None  # the capacity reading stands
    assert r.dropped == ("vllm:prefix_cache_hits_total: not a count in 0..2^53",)
    s = sglang_reading(sglang_pd_text("unified", 681_280, 1_000, tokens=(9_000, 3_000), cache_hit_rate=0.4))
    assert (s.prefix_cache_hits, s.prefix_cache_queries, s.cache_hit_rate) == (3_000, 9_000, 0.4)
    s = sglang_reading(sglang_pd_text("unified", 681_280, 1_000, cache_hit_rate=float("inf"), swa_token_usage=0.7))
    assert (
        s.cache_hit_rate is None and s.swa_usage == 0.7 and s.dropped == ("sglang:cache_hit_rate: not a share in 0..1",)
    )


@pytest.mark.parametrize(
    ("role", "queues", "want"),
    [
        ("prefill", (0, 0), "prefill"),  # utilization -1: a prefill server even when idle
        ("prefill", (3, 1), "prefill"),
        ("decode", (2, 1), "decode"),
        ("decode", (0, 0), None),  # an idle decode server looks unified: no guess
        ("unified", (0, 0), None),
    ],
)
def test_sglang_role_from_its_own_metrics(role: str, queues: tuple[int, int], want: str | None) -> None:
    text = sglang_pd_text(role, 681_280, 1_000, queues)
    assert sglang_role(samples(text)) == want
    assert sglang_reading(text).handoff_queue_reqs == sum(queues)


def test_sglang_role_evidence_of_both_sides_is_no_role() -> None:
    both = sglang_pd_text("prefill", 681_280, 0, (1, 0), num_decode_transfer_queue_reqs=2)
    assert sglang_role(samples(both)) is None


def test_scrape_derives_roles_remembers_them_and_publishes_only_prefill_limits(engines: Engines) -> None:
    p = engines.add("p", sglang_pd_text("prefill", 500_000, 0), 1_048_576)
    d = engines.add("d", sglang_pd_text("decode", 900_000, 0, (0, 0)), 1_048_576)
    u = engines.add("u", sglang_pd_text("decode", 700_000, 0, (0, 0)), 1_048_576)  # idle, alone in its domain
    v = engines.add("v", vllm_current_text(0.25, 1_200, 5_000), 131_072)
    targets = [
        {"url": p, "engine": "sglang", "cache_domain": "pd", "name": "p"},
        {"url": d, "engine": "sglang", "cache_domain": "pd", "name": "d"},
        {"url": u, "engine": "sglang", "cache_domain": "solo", "name": "u"},
        {"url": v, "engine": "vllm", "cache_domain": "vllm-a", "role": "unified", "name": "v"},
    ]
    scraper = Scraper(Settings.model_validate({"scrape": {"timeout_s": 2.0, "targets": targets}}))

    def round_(now: float) -> dict[str, CacheStats]:
        got = asyncio.run(scraper.scrape_once(now=now))
        names = {500_000: "p", 900_000: "d", 700_000: "u"}
        return {names.get(s.capacity_tokens, "v"): s for s in got}

    round_(1_787_817_600.0)  # the targets are scraped at once: the prefill server's role is known after it
    first = round_(1_787_817_615.0)
    assert (first["p"].role, first["p"].role_source) == ("prefill", "derived")  # utilization -1
    assert (first["d"].role, first["d"].role_source) == ("decode", "derived")  # idle, beside a prefill server
    assert (first["u"].role, first["u"].role_source) == ("unified", "assumed")  # nothing tells: as before
    assert (first["v"].role, first["v"].role_source) == ("unified", "configured")
    assert first["v"].capacity_tokens == 463_459 and first["v"].prefix_cache_hits_total == 1_200
    engines.metrics["u"] = sglang_pd_text("decode", 700_000, 50_000, (2, 1))  # requests arrive on it
    second = round_(1_787_817_630.0)
    assert (second["u"].role, second["u"].role_source, second["u"].handoff_queue_reqs) == ("decode", "derived", 3)
    engines.metrics["u"] = sglang_pd_text("decode", 700_000, 0, (0, 0))  # idle again: still the decode pool
    third = round_(1_787_817_645.0)
    assert (third["u"].role, third["u"].role_source) == ("decode", "derived")
    assert scraper.limits.domain("pd")["prefill_capacity_tokens"] == 500_000  # type: ignore[index]
    assert scraper.limits.domain("pd")["targets"] == ["p"]  # type: ignore[index]
    assert scraper.limits.domain("solo") is None  # a decode pool is no prefill limit


def test_new_cache_stats_fields_cross_the_internal_topics_and_old_records_still_decode() -> None:
    stats = CacheStats.model_validate(
        {"type": "cache_stats", "event_id": "e", "ts": 1.0, "cache_domain": "d", "role": "prefill",
         "capacity_tokens": 10, "used_tokens": 1, "prefix_cache_hits_total": 5, "prefix_cache_queries_total": 9,
         "cache_hit_rate": 0.5, "handoff_queue_reqs": 2, "role_source": "derived"}
    )  # fmt: skip
    back, _ = records.event_from_record(records.event_record(stats))
    assert back == stats
    # A record a previous version's worker left on the join topic, before these fields: decodes with None.
    kind, values, keys = orjson.loads(records.event_record(stats))
    for added in records._ADDED[CacheStats]:
        del values[added]
    old, _ = records.event_from_record(orjson.dumps([kind, values, keys]))
    assert isinstance(old, CacheStats) and old.capacity_tokens == 10
    assert old.prefix_cache_hits_total is None and old.role_source is None
