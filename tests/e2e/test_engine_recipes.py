"""The engine recipes of docs/connect.md ("What the engines report beyond the pool"), as written: the document's
sample /metrics served over HTTP on loopback in place of its target addresses, the document's `[scrape]` TOML,
`crosstalk scrape --once` as a subprocess, and its output compared with the `cache_stats` the document shows."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from streams.inputs.scrape import Scraper
from streams.settings import load_settings
from tests.support.engines import Engines, sglang_text
from tests.support.recipes import ROOT, commands, recipe

pytestmark = pytest.mark.slow  # CLI runs as subprocesses


@pytest.fixture
def engines() -> Iterator[Engines]:
    e = Engines()
    yield e
    e.close()


def _scrape_once(toml: str, looks: dict[str, str], tmp_path: Path) -> tuple[list[dict[str, Any]], Path]:
    """`crosstalk scrape --once` (the command the document gives) with the document's TOML, each documented
    target address served by a look-alike; its cache_stats, and the settings file."""
    for documented, served in looks.items():
        assert toml.count(f'"{documented}"') == 1, documented
        toml = toml.replace(f'"{documented}"', f'"{served}"')
    toml = toml.replace("limits_port = 6067", "limits_port = 0")
    config = tmp_path / "crosstalk.toml"
    config.write_text(toml)
    [once] = [c for c in commands(recipe("scrape-run")) if "--once" in c]
    assert once == ["crosstalk", "scrape", "--once"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")}
    out = subprocess.run(
        [sys.executable, "-m", "streams.cli", *once[1:]],
        cwd=ROOT,
        env=env | {"CROSSTALK_CONFIG": str(config), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return [orjson.loads(line) for line in out.stdout.splitlines() if line.startswith("{")], config


def _shown(name: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in recipe(name).splitlines() if line.strip()]


def _matches(got: dict[str, Any], shown: dict[str, Any]) -> bool:
    return all(got.get(k) == v for k, v in shown.items())


def test_vllm_hybrid_pool_recipe(engines: Engines, tmp_path: Path) -> None:
    """The vLLM target of the document's [scrape] example, serving the document's hybrid-model sample: the pool
    is vLLM's own kv_cache_size_tokens (463,459), not num_gpu_blocks x block_size (2,560)."""
    looks = {
        "http://10.0.0.5:30000": engines.add("p", sglang_text(681_280, 100_000), 1_048_576),
        "http://10.0.0.6:30000": engines.add("d", sglang_text(900_000, 10_000), 1_048_576),
        "http://10.0.0.7:8000": engines.add("v", recipe("vllm-hybrid-metrics"), 131_072),
    }
    got, _ = _scrape_once(recipe("scrape-toml"), looks, tmp_path)
    [shown] = _shown("vllm-hybrid-stats")
    [vllm] = [e for e in got if e["cache_domain"] == shown["cache_domain"]]
    assert _matches(vllm, shown), (vllm, shown)
    assert vllm["capacity_tokens"] != 320 * 8


def test_sglang_pd_recipe_derives_roles(engines: Engines, tmp_path: Path) -> None:
    """The document's PD pair with no role set: each server's role comes from its own metrics, with its
    hand-off queue and transfer figures."""
    looks = {
        "http://10.0.0.5:30000": engines.add("p", recipe("sglang-prefill-metrics"), 1_048_576),
        "http://10.0.0.6:30000": engines.add("d", recipe("sglang-decode-metrics"), 1_048_576),
    }
    toml = recipe("scrape-pd-toml")
    assert "role" not in toml.replace("# sglang", "")  # the recipe's point: no role in the settings
    got, config = _scrape_once(toml, looks, tmp_path)
    shown = _shown("scrape-pd-stats")
    assert len(got) == len(shown) == 2
    for want in shown:
        assert [e for e in got if _matches(e, want)], (want, got)
    # The domain's limit, as /limits serves it: the prefill server's pool only.
    scraper = Scraper(load_settings(str(config)))
    asyncio.run(scraper.scrape_once())
    limit = scraper.limits.domain("glm53-pd-1")
    assert limit is not None and limit["prefill_capacity_tokens"] == 681_280 and len(limit["targets"]) == 1
