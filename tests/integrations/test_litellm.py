"""The LiteLLM callback and guard with the real LiteLLM (mock_response: no network) and the real broker.

Capacities come the way they do in production: engine metrics on loopback -> `crosstalk scrape`'s
Scraper -> GET /limits or the compacted limits topic -> the guard."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network for the model cost map
litellm = pytest.importorskip("litellm")

from conftest import consume_records, wait_for  # noqa: E402

from schemas.events import unpack  # noqa: E402
from streams.inputs.scrape import KafkaPublisher, Scraper, limits_app  # noqa: E402
from streams.integrations.litellm import CrosstalkLogger  # noqa: E402
from streams.kafka.topics import ensure_topics  # noqa: E402
from tests.support.engines import Engines, sglang_text  # noqa: E402

SECRET = " ".join(f"confidential{i} quarterly figure{i} of acme" for i in range(12))
LONG = " ".join(f"word{i}" for i in range(600))  # ~1,200 tokens: over a 500-token pool
CAPACITY = 500


class LimitsServer:
    """GET /limits of a Scraper, as `crosstalk scrape` serves it, on a background loop."""

    def __init__(self, scraper: Scraper) -> None:
        from aiohttp import web

        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

        async def boot() -> tuple[Any, int]:
            runner = web.AppRunner(limits_app(scraper), access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        self.runner, self.port = asyncio.run_coroutine_threadsafe(boot(), self.loop).result(10)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture
def engines() -> Iterator[Engines]:
    e = Engines()
    yield e
    e.close()


def scraped(engines: Engines, names: Any, now: float | None = None) -> Scraper:
    url = engines.add("sglang", sglang_text(CAPACITY, 100, context_len=1_048_576), 1_048_576)
    target = {"url": url, "engine": "sglang", "cache_domain": "glm53-pd-1", "role": "prefill"}
    scraper = Scraper(names.settings(scrape={"targets": [target]}))
    asyncio.run(scraper.scrape_once(now=now))
    return scraper


def completion(logger: CrosstalkLogger, text: str, team: str = "team-acme") -> Any:
    """One call through LiteLLM; waits (in the same loop) for its logging callbacks, which LiteLLM runs
    as background tasks after returning."""

    async def call() -> Any:
        before = logger.counters["queued"]
        try:
            return await litellm.acompletion(
                model="openai/glm-5.3",
                messages=[{"role": "user", "content": text}],
                mock_response="Noted, thanks.",
                user=team,  # the end user: the default tenant source, which needs no LiteLLM database
            )
        finally:
            for _ in range(100):
                if logger.counters["queued"] >= before + 2:
                    break
                await asyncio.sleep(0.05)

    litellm.callbacks = [logger]
    try:
        return asyncio.run(call())
    finally:
        # LiteLLM copies callbacks into lists of its own on a call: a closed logger of an earlier test would
        # otherwise still get this test's calls.
        litellm.logging_callback_manager._reset_all_callbacks()
        litellm.callbacks = []


@pytest.mark.kafka
def test_callback_publishes_fingerprinted_events_with_the_gateway_count(kafka_names: Any) -> None:
    settings = kafka_names.settings(litellm={"guard": False, "cache_domains": {"glm-5.3": "glm53-pd-1"}})
    ensure_topics(settings.kafka)
    logger = CrosstalkLogger(settings)
    try:
        r = completion(logger, SECRET)
        assert r.choices[0].message.content == "Noted, thanks."
        wait_for(lambda: logger.counters["published.response"] == 1, 30, what="the callback to publish")
        logger.flush()
    finally:
        logger.close()
    recs = consume_records(kafka_names.bootstrap, kafka_names.input_topic, 2)
    events = {e["type"]: e for e in (orjson.loads(r.value) for r in recs)}
    req, resp = events["request"], events["response"]
    assert req["tenant_id"] == resp["tenant_id"] == "team-acme"
    assert req["request_id"] == resp["request_id"] and {r.key.decode() for r in recs} == {req["request_id"]}
    gateway_count = litellm.token_counter(model="glm-5.3", messages=[{"role": "user", "content": SECRET}])
    assert req["prompt_tokens"] == gateway_count > 0
    assert resp["cache_domain"] == "glm53-pd-1" and resp["status_code"] == 200 and resp["finish_reason"] == "stop"
    assert resp["usage"]["input_tokens"] is not None  # the engine's own count, next to the gateway's
    # Through the gateway library: packed prints (docs/contract.md), the hashes as base64.
    assert unpack(req["prompt_fingerprint"]["hashes_b64"], "Q", "hashes") and resp["output_fingerprint"]["words"] == 2
    assert all(b"confidential" not in r.value and b"Noted" not in r.value for r in recs)  # no text left LiteLLM


@pytest.mark.kafka
def test_guard_rejects_over_capacity_and_passes_within_via_http_limits(kafka_names: Any, engines: Engines) -> None:
    scraper = scraped(engines, kafka_names)
    server = LimitsServer(scraper)
    settings = kafka_names.settings(
        litellm={"cache_domains": {"glm-5.3": "glm53-pd-1"}, "limits_url": f"http://127.0.0.1:{server.port}/limits"}
    )
    ensure_topics(settings.kafka)
    logger = CrosstalkLogger(settings)
    try:
        with pytest.raises(litellm.ContextWindowExceededError) as exc:
            completion(logger, LONG)
        assert exc.value.status_code == 400
        assert "prefill capacity of 500 tokens of cache domain glm53-pd-1" in str(exc.value)
        ok = completion(logger, "a short question that fits")
        assert ok.choices[0].message.content == "Noted, thanks."
        assert (logger.counters["guard.rejected"], logger.counters["guard.passed"]) == (1, 1)
        logger.flush()
    finally:
        logger.close()
        server.close()
    # The refusal is published like any call (issue 26: the docs said so, and nothing was): a request with the
    # gateway's count and its 400, so the operator sees who was refused; the passed call's pair follows it.
    recs = consume_records(kafka_names.bootstrap, kafka_names.input_topic, 4)
    events = [orjson.loads(r.value) for r in recs]
    refused = {e["request_id"] for e in events if e["type"] == "response" and e["status_code"] == 400}
    assert len(refused) == 1
    pair = {e["type"]: e for e in events if e["request_id"] in refused}
    assert pair["request"]["tenant_id"] == "team-acme" and pair["request"]["prompt_tokens"] > CAPACITY
    assert pair["request"]["cache_domain"] == "glm53-pd-1" and "prompt_fingerprint" in pair["request"]


@pytest.mark.kafka
def test_guard_reads_the_limits_topic_and_ignores_stale_limits(kafka_names: Any, engines: Engines) -> None:
    fresh = scraped(engines, kafka_names)
    settings = kafka_names.settings(
        litellm={"cache_domains": {"glm-5.3": "glm53-pd-1"}, "limits_url": None, "limits_from_kafka": True},
        scrape={"limits_topic": f"{kafka_names.app_id}.limits"},
    )
    ensure_topics(settings.kafka)
    pub = KafkaPublisher(settings)
    pub([], fresh.limits.snapshot())
    pub.close()
    logger = CrosstalkLogger(settings)
    try:
        assert logger.limits is not None
        wait_for(lambda: logger.limits.counters["limits.kafka"] >= 1, 60, what="the limits topic")
        with pytest.raises(litellm.ContextWindowExceededError):
            completion(logger, LONG)
    finally:
        logger.close()

    # a limit older than limits_max_age_s is not enforced (bounded staleness), unless fail_closed
    stale = scraped(Engines(), kafka_names, now=time.time() - 3600)
    server = LimitsServer(stale)
    try:
        url = f"http://127.0.0.1:{server.port}/limits"
        base = {"cache_domains": {"glm-5.3": "glm53-pd-1"}, "limits_url": url, "limits_max_age_s": 60.0}
        open_logger = CrosstalkLogger(kafka_names.settings(litellm=base))
        asyncio.run(open_logger.check("glm-5.3", [{"role": "user", "content": LONG}]))
        assert open_logger.limits is not None and open_logger.limits.counters["limits.stale"] == 1
        closed = CrosstalkLogger(kafka_names.settings(litellm={**base, "fail_closed": True}))
        with pytest.raises(litellm.ServiceUnavailableError):
            asyncio.run(closed.check("glm-5.3", [{"role": "user", "content": "short"}]))
    finally:
        server.close()


def test_proxy_config_loads_the_callback_by_its_dotted_name(tmp_path: Any) -> None:
    """`litellm_settings: callbacks: streams.integrations.litellm.proxy_handler_instance` as the proxy resolves it."""
    from litellm.proxy.types_utils.utils import get_instance_fn

    inst = get_instance_fn(
        "streams.integrations.litellm.proxy_handler_instance", config_file_path=str(tmp_path / "config.yaml")
    )
    assert isinstance(inst, CrosstalkLogger)
    assert inst is get_instance_fn("streams.integrations.litellm.proxy_handler_instance")
    inst.close()
