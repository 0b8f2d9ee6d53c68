"""The LiteLLM guard under bad limits and every prompt shape (issue 25); the real LiteLLM token counter, real
HTTP for /limits. No broker: the guard decides before anything is published."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
litellm = pytest.importorskip("litellm")

from prometheus_client import REGISTRY  # noqa: E402

from streams.integrations.litellm import CrosstalkLogger  # noqa: E402
from streams.settings import Settings  # noqa: E402

LONG = " ".join(f"word{i}" for i in range(600))  # ~1,200 tokens: over a 500-token pool
SHORT = "a short question that fits"
KEY = {"fingerprint_key": "guard-test-key"}


class LimitsServer:
    """GET /limits answering `body()`; with `drip`, a body that never ends until release() (a slow peer)."""

    def __init__(self, domains: dict[str, Any] | None = None, drip: bool = False) -> None:
        from aiohttp import web

        self.domains = domains or {}
        self.drip = drip
        self.released = threading.Event()
        self.hits = 0
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

        async def limits(request: web.Request) -> web.StreamResponse:
            self.hits += 1
            if not self.drip:
                return web.json_response({"domains": self.domains})
            resp = web.StreamResponse()
            await resp.prepare(request)
            await resp.write(b'{"domains": {')
            while not self.released.is_set():  # one byte now and then, never the end
                await resp.write(b" ")
                await asyncio.sleep(0.2)
            return resp

        async def boot() -> tuple[Any, int]:
            app = web.Application()
            app.router.add_get("/limits", limits)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

        self.runner, self.port = asyncio.run_coroutine_threadsafe(boot(), self.loop).result(10)
        self.url = f"http://127.0.0.1:{self.port}/limits"

    def close(self) -> None:
        self.released.set()
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def fresh(capacity: int = 500, ts: Any = None) -> dict[str, Any]:
    return {"ts": time.time() if ts is None else ts, "prefill_capacity_tokens": capacity, "context_window": 1_048_576}


@pytest.fixture
def loggers() -> Iterator[list[CrosstalkLogger]]:
    made: list[CrosstalkLogger] = []
    yield made
    for lg in made:
        lg.close()


def guard(loggers: list[CrosstalkLogger], url: str | None, **litellm_settings: Any) -> CrosstalkLogger:
    s = Settings(
        detection=KEY,
        litellm={"cache_domains": {"glm-5.3": "glm53-pd-1"}, "limits_url": url, **litellm_settings},
    )
    lg = CrosstalkLogger(s)
    loggers.append(lg)
    return lg


def check(lg: CrosstalkLogger, model: str = "glm-5.3", **data: Any) -> None:
    asyncio.run(lg.check(model, data={"model": model, **data}))


def test_a_dripping_limits_server_holds_no_request(loggers: list[CrosstalkLogger]) -> None:
    """A slow /limits held the refresh lock and every request waited behind it (hung at 40 s)."""
    server = LimitsServer(drip=True)
    try:
        lg = guard(loggers, server.url, limits_first_wait_s=0.2, limits_timeout_s=60.0)
        done = threading.Event()

        def many() -> None:
            async def all_checks() -> None:
                await asyncio.gather(*(lg.check("glm-5.3", [{"role": "user", "content": SHORT}]) for _ in range(20)))

            asyncio.run(all_checks())
            done.set()

        threading.Thread(target=many, daemon=True).start()
        # The checks finish while the server is still dripping its one endless answer.
        assert done.wait(120), "requests waited for the limits server"
        assert not server.released.is_set() and server.hits == 1
        assert lg.counters["guard.no_limit"] == 20  # nothing known yet: open (fail_closed is off)
    finally:
        server.close()


@pytest.mark.parametrize(
    "data",
    [
        {"prompt": LONG},  # completions
        {"prompt": [LONG]},
        {"prompt": list(range(1000))},  # token ids
        {"input": LONG},  # Responses API
        {"input": [{"role": "user", "content": [{"type": "input_text", "text": LONG}]}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": LONG}]}]},
    ],
    ids=["prompt", "prompt-list", "prompt-ids", "input", "input-items", "messages-parts"],
)
def test_every_prompt_shape_is_checked(loggers: list[CrosstalkLogger], data: dict[str, Any]) -> None:
    server = LimitsServer({"glm53-pd-1": fresh()})
    try:
        lg = guard(loggers, server.url)
        with pytest.raises(litellm.ContextWindowExceededError):
            check(lg, **data)
        check(lg, prompt=SHORT)
        check(lg, input=SHORT)
        assert (lg.counters["guard.rejected"], lg.counters["guard.passed"]) == (1, 2)
    finally:
        server.close()


def test_an_unmapped_model_alias_is_checked_per_setting(loggers: list[CrosstalkLogger]) -> None:
    server = LimitsServer({"glm53-pd-1": fresh(500), "other": fresh(100_000)})
    try:
        strict = guard(loggers, server.url)
        with pytest.raises(litellm.ContextWindowExceededError, match="cache domain glm53-pd-1"):
            check(strict, model="my-alias", messages=[{"role": "user", "content": LONG}])
        assert strict.counters["guard.unmapped"] == 1
        closed = guard(loggers, server.url, unmapped_models="fail_closed")
        with pytest.raises(litellm.ServiceUnavailableError, match="maps to no cache domain"):
            check(closed, model="my-alias", messages=[{"role": "user", "content": SHORT}])
        opened = guard(loggers, server.url, unmapped_models="open")
        check(opened, model="my-alias", messages=[{"role": "user", "content": LONG}])
        assert opened.counters["guard.no_limit"] == 1
    finally:
        server.close()


def test_a_future_limit_does_not_stick(loggers: list[CrosstalkLogger], caplog: pytest.LogCaptureFixture) -> None:
    lg = guard(loggers, None)
    assert lg.limits is not None
    now = time.time()
    assert not lg.limits.offer("glm53-pd-1", fresh(10_000_000, ts=now + 86_400), "kafka")
    assert lg.limits.offer("glm53-pd-1", fresh(500, ts=now), "kafka")
    with pytest.raises(litellm.ContextWindowExceededError):
        check(lg, messages=[{"role": "user", "content": LONG}])
    assert lg.limits.counters["limits.future_ts"] == 1
    assert "in the future" in caplog.text


@pytest.mark.parametrize(
    "record",
    [
        {"ts": "2026-12-01T10:00:00Z", "prefill_capacity_tokens": 500},
        {"ts": None, "prefill_capacity_tokens": 500},
        {"ts": "now", "prefill_capacity_tokens": None},
        {"ts": 1.0e9, "prefill_capacity_tokens": "lots"},
        {"ts": 1.0e9, "prefill_capacity_tokens": 1e300},
        "not an object",
    ],
)
def test_a_bad_limit_record_is_rejected_once_not_raised_per_request(
    loggers: list[CrosstalkLogger], record: Any, caplog: pytest.LogCaptureFixture
) -> None:
    if isinstance(record, dict) and record.get("ts", 0.0) == 1.0e9:
        record = {**record, "ts": time.time()}
    server = LimitsServer({"glm53-pd-1": record})
    try:
        lg = guard(loggers, server.url)
        for _ in range(3):
            check(lg, messages=[{"role": "user", "content": LONG}])  # fail open: no usable limit, no exception
        assert lg.limits is not None and lg.limits.counters["limits.bad_record"] >= 1
        assert lg.counters["guard.no_limit"] == 3
        assert caplog.text.count("rejected") == 1  # one line, not one per request or per refresh
    finally:
        server.close()


def test_a_stale_limit_fails_open_with_a_log_line_and_an_exported_counter(
    loggers: list[CrosstalkLogger], caplog: pytest.LogCaptureFixture
) -> None:
    def stale() -> float:
        return REGISTRY.get_sample_value("crosstalk_guard_decisions_total", {"decision": "stale"}) or 0.0

    before = stale()
    server = LimitsServer({"glm53-pd-1": fresh(500, ts=time.time() - 3600)})
    try:
        lg = guard(loggers, server.url, limits_max_age_s=60.0)
        with caplog.at_level(logging.WARNING, logger="crosstalk.litellm"):
            check(lg, messages=[{"role": "user", "content": LONG}])  # not enforced: passes
        assert "is 3600 s old" in caplog.text and "not enforced" in caplog.text
        assert stale() == before + 1
    finally:
        server.close()
