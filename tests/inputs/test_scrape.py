"""`crosstalk scrape` against real HTTP servers on loopback serving each engine's exposition text.

The exposition text is produced by prometheus_client (the library both engines expose metrics with)
from the metric definitions in the engines' sources: same names, help texts, label names."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from streams.cli.main import main as cli_main
from streams.inputs.engine_metrics import MetricsError, sglang_reading, vllm_reading
from streams.inputs.scrape import Scraper, serve
from streams.settings import Settings
from tests.support.engines import Engines, sglang_text, vllm_text


def test_engine_mappings() -> None:
    r = sglang_reading(sglang_text(681_280, 612_000))
    assert (r.capacity_tokens, r.used_tokens, r.context_window, r.model) == (681_280, 612_000, 1_048_576, "glm-5.3")
    v = vllm_reading(vllm_text(4096, 16, 0.65))
    assert (v.capacity_tokens, v.used_tokens) == (65_536, round(0.65 * 65_536))
    assert vllm_reading(vllm_text(4096, 16, 0.5, legacy=True)).used_tokens == 32_768
    # two data-parallel engines: the smaller pool and the higher share (a prompt must fit one of them)
    two = vllm_reading(vllm_text(4096, 16, 0.8, engines=2))
    assert (two.capacity_tokens, two.used_tokens, two.series) == (3996 * 16, round(0.8 * 3996 * 16), 2)
    with pytest.raises(MetricsError) as e:
        vllm_reading("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1\n")
    assert e.value.reason == "missing_metric"
    with pytest.raises(MetricsError) as e:
        sglang_reading("this is { not exposition text")
    assert e.value.reason in ("unparseable", "missing_metric")


@pytest.fixture
def engines() -> Iterator[Engines]:
    e = Engines()
    yield e
    e.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def settings_for(engines: Engines) -> Settings:
    sg = engines.add("sglang", sglang_text(681_280, 612_000), 1_048_576)
    vl = engines.add("vllm", vllm_text(4096, 16, 0.65), 32_768)
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens here
    return Settings(
        scrape={
            "timeout_s": 2.0,
            "targets": [
                {"url": sg, "engine": "sglang", "cache_domain": "glm53-pd-1", "role": "prefill", "name": "sg-p"},
                {"url": vl, "engine": "vllm", "cache_domain": "vllm-1", "role": "unified", "name": "vl"},
                {"url": down, "engine": "vllm", "cache_domain": "vllm-2", "role": "unified", "name": "down"},
            ],
        }
    )


def test_scrape_round_values_match_and_a_down_target_is_counted(engines: Engines) -> None:
    scraper = Scraper(settings_for(engines))
    stats = asyncio.run(scraper.scrape_once(now=1_787_817_600.0))
    by = {s.cache_domain: s for s in stats}
    assert set(by) == {"glm53-pd-1", "vllm-1"}
    sg, vl = by["glm53-pd-1"], by["vllm-1"]
    assert (sg.role, sg.capacity_tokens, sg.used_tokens, sg.context_window) == ("prefill", 681_280, 612_000, 1_048_576)
    assert (vl.role, vl.capacity_tokens, vl.used_tokens, vl.context_window) == ("unified", 65_536, 42_598, 32_768)
    assert sg.ts == 1_787_817_600.0 and sg.model == "glm-5.3"
    assert scraper.failures.labels("down", "unreachable")._value.get() == 1
    # the engine changes: the next round follows it
    engines.metrics["sglang"] = sglang_text(681_280, 100_000)
    again = asyncio.run(scraper.scrape_once(now=1_787_817_615.0))
    assert {s.cache_domain: s.used_tokens for s in again}["glm53-pd-1"] == 100_000
    assert scraper.failures.labels("down", "unreachable")._value.get() == 2


def test_limits_endpoint_and_metrics_while_serving(engines: Engines) -> None:
    scraper = Scraper(settings_for(engines))
    got: dict[str, Any] = {}

    async def scenario() -> None:
        stop = asyncio.Event()
        port_ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        emitted: list[Any] = []
        task = asyncio.create_task(
            serve(scraper, lambda ev, lim: emitted.append(ev), port=0, stop=stop, on_port=port_ready.set_result)
        )
        port = await port_ready
        async with httpx.AsyncClient() as c:
            for _ in range(50):
                if emitted:
                    break
                await asyncio.sleep(0.1)
            got["limits"] = (await c.get(f"http://127.0.0.1:{port}/limits")).json()
            got["metrics"] = (await c.get(f"http://127.0.0.1:{port}/metrics")).text
        stop.set()
        await task

    asyncio.run(scenario())
    domains = got["limits"]["domains"]
    assert domains["glm53-pd-1"]["prefill_capacity_tokens"] == 681_280
    assert domains["glm53-pd-1"]["context_window"] == 1_048_576
    assert domains["vllm-1"]["prefill_capacity_tokens"] == 65_536
    assert "vllm-2" not in domains  # down: no limit is invented
    assert 'crosstalk_scrape_failures_total{reason="unreachable",target="down"} 1.0' in got["metrics"]


def test_cli_scrape_once_writes_cache_stats(engines: Engines, tmp_path: Path) -> None:
    s = settings_for(engines)
    cfg = tmp_path / "crosstalk.toml"
    lines = []
    for t in s.scrape.targets:
        lines += [
            "[[scrape.targets]]",
            f'url = "{t.url}"',
            f'engine = "{t.engine}"',
            f'cache_domain = "{t.cache_domain}"',
            f'role = "{t.role}"',
        ]
    cfg.write_text("[scrape]\ntimeout_s = 2.0\n" + "\n".join(lines) + "\n")
    out = tmp_path / "stats.jsonl"
    assert cli_main(["--config", str(cfg), "scrape", "--once", "--out", str(out)]) == 0
    events = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert sorted((e["cache_domain"], e["capacity_tokens"]) for e in events) == [
        ("glm53-pd-1", 681_280),
        ("vllm-1", 65_536),
    ]
