"""The live test engine over real HTTP on loopback: the openai SDK as client, Prometheus parsing of /metrics,
the emitted events against the wire contract, and randomized concurrent load in fixed mode."""

from __future__ import annotations

import asyncio
import os
import random
import urllib.error
import urllib.request
from typing import Any

import openai
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from schemas.events import parse_event
from streams.sim.serving.core import EngineConfig
from streams.sim.serving.server import EngineThread, LiveEngine

CONFIG = EngineConfig(context_window=8192, prefill_pool_tokens=4096, decode_pool_tokens=8192, cache_domain="sim-t")


def _words(tenant: str, n: int, nonce: int) -> str:
    return " ".join(f"{tenant}x{nonce}w{i}" for i in range(n))


def test_chat_streaming_and_not_agree_and_models_advertise_the_window() -> None:
    with EngineThread(LiveEngine(CONFIG, "fixed")) as th:
        client = openai.OpenAI(base_url=th.base_url, api_key="alice", max_retries=0)
        cards = client.models.list().data
        assert [c.id for c in cards] == ["glm-sim"] and cards[0].model_extra["max_model_len"] == 8192
        prompt = _words("alice", 300, 1)
        plain = client.chat.completions.create(
            model="glm-sim", messages=[{"role": "user", "content": prompt}], max_tokens=40
        )
        assert plain.usage is not None and plain.usage.prompt_tokens == 300 and plain.usage.completion_tokens == 40
        assert plain.choices[0].message.content == " ".join(prompt.split()[:40])
        stream = client.chat.completions.create(
            model="glm-sim",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=40,
            stream=True,
            stream_options={"include_usage": True},
        )
        parts, usage = [], None
        for chunk in stream:
            usage = chunk.usage or usage
            parts += [c.delta.content for c in chunk.choices if c.delta and c.delta.content]
        assert "".join(parts) == plain.choices[0].message.content
        assert usage is not None and usage.prompt_tokens == 300


def test_bad_requests_get_clear_errors() -> None:
    with EngineThread(LiveEngine(CONFIG, "fixed")) as th:
        body = orjson.dumps({"model": "glm-sim", "messages": [{"role": "user", "content": "hi"}]})
        with pytest.raises(urllib.error.HTTPError) as no_key:
            urllib.request.urlopen(urllib.request.Request(th.base_url + "/chat/completions", data=body), timeout=10)
        assert no_key.value.code == 401
        req = urllib.request.Request(
            th.base_url + "/chat/completions", data=b"{not json", headers={"Authorization": "Bearer a"}
        )
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=10)
        assert exc.value.code == 400 and b"error" in exc.value.read()
        client = openai.OpenAI(base_url=th.base_url, api_key="a", max_retries=0)
        with pytest.raises(openai.BadRequestError, match="maximum context length"):
            client.chat.completions.create(model="glm-sim", messages=[{"role": "user", "content": "w " * 9000}])
        with pytest.raises(openai.BadRequestError, match="prefill KV cache pool"):
            client.chat.completions.create(model="glm-sim", messages=[{"role": "user", "content": "w " * 5000}])


def test_metrics_are_sglang_names_in_prometheus_format() -> None:
    with EngineThread(LiveEngine(CONFIG, "pd-abort-bug")) as th:
        client = openai.OpenAI(base_url=th.base_url, api_key="a", max_retries=0)
        client.chat.completions.create(model="glm-sim", messages=[{"role": "user", "content": "w " * 5000}])
        text = urllib.request.urlopen(th.base_url.removesuffix("/v1") + "/metrics", timeout=10).read().decode()
    samples = {
        (s.name, s.labels.get("engine_type")): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }
    assert samples[("sglang:max_total_num_tokens", "prefill")] == 4096
    assert samples[("sglang:max_total_num_tokens", "decode")] == 8192
    assert ("sglang:num_used_tokens", "prefill") in samples and ("sglang:token_usage", "decode") in samples
    assert samples[("sglang:num_aborted_requests_total", None)] == 1
    assert samples[("sglang:prompt_tokens_total", None)] == 1  # the placeholder, as the buggy engine counts it
    assert samples[("sglang:time_to_first_token_seconds_count", None)] == 1


def test_emitted_events_follow_the_contract_and_leave_probes_out() -> None:
    events: list[dict[str, Any]] = []
    with EngineThread(LiveEngine(CONFIG, "pd-abort-bug", on_event=events.append)) as th:
        client = openai.OpenAI(base_url=th.base_url, api_key="victim", max_retries=0)
        client.chat.completions.create(
            model="glm-sim",
            messages=[{"role": "user", "content": "w " * 100}],
            extra_headers={"X-Crosstalk-Probe": "1"},
        )
        client.chat.completions.create(model="glm-sim", messages=[{"role": "user", "content": _words("v", 200, 1)}])
        other = openai.OpenAI(base_url=th.base_url, api_key="other", max_retries=0)
        other.chat.completions.create(model="glm-sim", messages=[{"role": "user", "content": "w " * 5000}])
    parsed = [parse_event(orjson.dumps(e)) for e in events]
    kinds = [e.type for e in parsed]
    assert kinds.count("request") == 2 and kinds.count("response") == 2  # the probe's are the prober's to send
    assert {e.cache_domain for e in parsed if e.type == "cache_stats"} == {"sim-t"}
    bug = next(e for e in parsed if e.type == "response" and e.tenant_id == "other")
    assert bug.status_code == 200 and bug.usage is not None and bug.usage.input_tokens == 1
    assert bug.output_text and "vx1w0" in bug.output_text  # the victim's words, read from stale pages


@pytest.mark.slow  # hundreds of concurrent HTTP requests
def test_fixed_mode_under_random_concurrent_load_never_mixes_tenants() -> None:
    rng = random.Random(7)
    with EngineThread(LiveEngine(CONFIG, "fixed")) as th:

        async def one(tenant: str, k: int) -> tuple[str, int, str | None, int]:
            n = rng.choice([50, 400, 1500, 3000, 4000, 5000])
            async with openai.AsyncOpenAI(base_url=th.base_url, api_key=tenant, max_retries=0) as c:
                try:
                    r = await c.chat.completions.create(
                        model="glm-sim", messages=[{"role": "user", "content": _words(tenant, n, k)}], max_tokens=64
                    )
                except openai.BadRequestError:
                    return tenant, n, None, 400
                return tenant, n, r.choices[0].message.content, 200

        async def load() -> list[tuple[str, int, str | None, int]]:
            tenants = [f"t{i}" for i in range(5)]
            return await asyncio.gather(*(one(rng.choice(tenants), k) for k in range(60)))

        results = asyncio.run(load())
        assert th.engine.leaks == []
    assert {status for *_, status in results} == {200, 400}
    for tenant, n, content, status in results:
        if status == 400:
            assert n > 4096
            continue
        assert content and all(w.startswith(f"{tenant}x") for w in content.split())


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"messages": "hi"}',
        b'{"messages": []}',
        b'{"messages": [{"role": "user", "content": 5}]}',
        b'{"messages": ["x"]}',
        b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -3}',
        b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "many"}',
        b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 100000}',
        b"\xff\xfe",
    ],
)
def test_hostile_bodies_get_400_and_the_engine_keeps_serving(body: bytes) -> None:
    with EngineThread(LiveEngine(CONFIG, "fixed")) as th:
        url, auth = th.base_url + "/chat/completions", {"Authorization": "Bearer a"}
        req = urllib.request.Request(url, data=body, headers=auth)
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=10)
        assert exc.value.code == 400 and orjson.loads(exc.value.read())["error"]["message"]
        ok = openai.OpenAI(base_url=th.base_url, api_key="a", max_retries=0).chat.completions.create(
            model="glm-sim", messages=[{"role": "user", "content": "still here"}], max_tokens=8
        )
        assert ok.choices[0].message.content == "still here"


def test_crosstalk_scrape_reads_both_pools_from_the_engine(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scrape input, tested against this engine: one target per server, as in a real P/D deployment."""
    from streams.cli.main import main

    with EngineThread(LiveEngine(CONFIG, "pd-abort-bug")) as th:
        root = th.base_url.removesuffix("/v1")
        cfg = tmp_path / "scrape.toml"
        cfg.write_text(
            "".join(
                f'[[scrape.targets]]\nurl = "{root}"\nengine = "sglang"\ncache_domain = "sim-t"\n'
                f'role = "{role}"\nmetrics_path = "/metrics/{role}"\n'
                for role in ("prefill", "decode")
            )
        )
        for var in [v for v in os.environ if v.startswith("CROSSTALK_")]:
            monkeypatch.delenv(var)
        out = tmp_path / "stats.jsonl"
        once = ["--once", "--to", "jsonl", "--out", str(out), "--limits-port", "0"]
        code = main(["--config", str(cfg), "scrape", *once])
    assert code == 0
    stats = {e["role"]: e for e in map(orjson.loads, out.read_bytes().splitlines()) if e["type"] == "cache_stats"}
    assert stats["prefill"]["capacity_tokens"] == 4096 and stats["decode"]["capacity_tokens"] == 8192
    assert stats["prefill"]["context_window"] == 8192
