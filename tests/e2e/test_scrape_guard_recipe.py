"""The scrape + guard recipe of docs/connect.md, as written: the document's [scrape] TOML (its target addresses
replaced by engine look-alikes on loopback), `crosstalk scrape --once`, then the continuous scraper's /limits
feeding the LiteLLM guard."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from conftest import wait_for

from tests.support.engines import Engines, sglang_text, vllm_text
from tests.support.recipes import ROOT, commands, recipe
from tests.support.workerproc import free_port

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.fixture
def engines() -> Iterator[Engines]:
    e = Engines()
    yield e
    e.close()


def _config(engines: Engines, tmp_path: Path, limits_port: int) -> Path:
    """The document's TOML, each documented target address served by a look-alike of its engine."""
    text = recipe("scrape-toml")
    looks = {
        "http://10.0.0.5:30000": engines.add("p", sglang_text(681_280, 100_000), 1_048_576),
        "http://10.0.0.6:30000": engines.add("d", sglang_text(900_000, 10_000), 1_048_576),
        "http://10.0.0.7:8000": engines.add("v", vllm_text(2_000, 16, 0.25), 131_072),
    }
    for documented, served in looks.items():
        assert text.count(f'"{documented}"') == 1, documented
        text = text.replace(f'"{documented}"', f'"{served}"')
    text = text.replace("limits_port = 6067", f"limits_port = {limits_port}")
    path = tmp_path / "crosstalk.toml"
    path.write_text(text)
    return path


def _env(config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")}
    return env | {"CROSSTALK_CONFIG": str(config), "PYTHONPATH": str(ROOT)}


def test_scrape_once_then_the_guard_reads_its_limits(engines: Engines, tmp_path: Path) -> None:
    port = free_port()
    config = _config(engines, tmp_path, port)
    [once, continuous, curl] = commands(recipe("scrape-run"))
    assert once == ["crosstalk", "scrape", "--once"] and curl[:2] == ["curl", "-s"]
    assert continuous == ["crosstalk", "scrape", "--to", "kafka"]  # run below with its events to stdout (no broker)
    out = subprocess.run(
        [sys.executable, "-m", "streams.cli", *once[1:]],
        cwd=ROOT,
        env=_env(config),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    stats = [orjson.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    got = sorted((e["cache_domain"], e["role"], e["capacity_tokens"]) for e in stats)
    assert got == [("glm53-pd-1", "decode", 900_000), ("glm53-pd-1", "prefill", 681_280), ("vllm-a", "unified", 32_000)]

    # The continuous scraper serves /limits; the guard in front of glm-5.3 enforces glm53-pd-1's prefill pool.
    proc = subprocess.Popen(
        [sys.executable, "-m", "streams.cli", "scrape"],
        cwd=ROOT,
        env=_env(config),
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "scrape.log").open("wb"),
    )
    try:
        url = f"http://{curl[2].replace('6067', str(port))}"

        def limits() -> dict[str, Any] | None:
            assert proc.poll() is None, (tmp_path / "scrape.log").read_text()
            try:
                body = httpx.get(url, timeout=2).json()
            except (httpx.HTTPError, ValueError):
                return None
            return body if "glm53-pd-1" in body.get("domains", {}) else None

        body = wait_for(limits, 60, what="/limits")
        assert body["domains"]["glm53-pd-1"]["prefill_capacity_tokens"] == 681_280
        litellm = pytest.importorskip("litellm")
        from streams.integrations.litellm import CrosstalkLogger
        from streams.settings import Settings

        guard = CrosstalkLogger(
            Settings(
                detection={"fingerprint_key": "recipe-key"},
                litellm={"cache_domains": {"glm-5.3": "glm53-pd-1"}, "limits_url": url},
            )
        )
        try:
            with pytest.raises(litellm.ContextWindowExceededError, match="681280 tokens of cache domain glm53-pd-1"):
                asyncio.run(guard.check("glm-5.3", data={"prompt": list(range(700_000))}))
            asyncio.run(guard.check("glm-5.3", data={"prompt": list(range(600_000))}))
        finally:
            guard.close()
    finally:
        proc.terminate()
        proc.wait(30)
