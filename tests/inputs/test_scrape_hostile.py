"""`crosstalk scrape` against bad readings and hostile peers (issue 25), over real HTTP on loopback.

A value that is no token count is that target's status (a reason, a counter), never a published limit, and
never the process's end; a slow, endless or huge /metrics costs its own target a bounded time and memory,
never the other targets' rounds; SIGTERM and SIGINT end the process promptly."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from streams.cli.main import main as cli_main
from streams.inputs.scrape import Scraper, serve
from streams.settings import Settings
from tests.support.engines import Engines, sglang_text, vllm_text
from tests.support.hostile import HostileServer

REPO = Path(__file__).resolve().parents[2]
GOOD_SG = sglang_text(681_280, 612_000)


def sg_with(metric: str, value: str) -> str:
    """The good SGLang text with one sample's value replaced verbatim."""
    text, n = re.subn(rf"^({re.escape(metric)}\{{[^}}]*\}}) .*$", rf"\g<1> {value}", GOOD_SG, flags=re.M)
    assert n == 1
    return text


def vl_with(label: str, value: str) -> str:
    text, n = re.subn(rf'{label}="[^"]*"', f'{label}="{value}"', vllm_text(4096, 16, 0.65))
    assert n == 1
    return text


BAD_READINGS = [
    ("sglang", sg_with("sglang:max_total_num_tokens", "+Inf"), "unparseable"),
    ("sglang", sg_with("sglang:max_total_num_tokens", "1e308"), "unparseable"),
    ("sglang", sg_with("sglang:max_total_num_tokens", "1e20"), "unparseable"),
    ("sglang", sg_with("sglang:max_total_num_tokens", "0.5"), "unparseable"),
    ("sglang", sg_with("sglang:max_total_num_tokens", "NaN"), "unparseable"),
    ("sglang", sg_with("sglang:max_total_num_tokens", "-681280"), "unparseable"),
    ("sglang", sg_with("sglang:max_total_num_tokens", "0"), "no_capacity"),
    ("sglang", sg_with("sglang:num_used_tokens", "NaN"), "unparseable"),
    ("sglang", sg_with("sglang:num_used_tokens", "+Inf"), "unparseable"),
    ("sglang", sg_with("sglang:num_used_tokens", "-5"), "unparseable"),
    ("sglang", sg_with("sglang:token_usage", "NaN"), "unparseable"),
    ("sglang", sg_with("sglang:context_len", "+Inf"), "unparseable"),
    ("sglang", sg_with("sglang:context_len", "1e300"), "unparseable"),
    ("sglang", sg_with("sglang:context_len", "0"), "unparseable"),
    ("vllm", vl_with("num_gpu_blocks", "inf"), "unparseable"),
    ("vllm", vl_with("num_gpu_blocks", "1e300"), "unparseable"),
    ("vllm", vl_with("num_gpu_blocks", "nan"), "unparseable"),
    ("vllm", vl_with("num_gpu_blocks", "0.5"), "unparseable"),
    ("vllm", vl_with("num_gpu_blocks", "-16"), "unparseable"),
    ("vllm", vl_with("num_gpu_blocks", "lots"), "unparseable"),
    ("vllm", vl_with("block_size", "Infinity"), "unparseable"),
    ("vllm", vl_with("num_gpu_blocks", "None"), "no_capacity"),
    ("vllm", vllm_text(4096, 16, float("nan")), "unparseable"),
    ("vllm", vllm_text(4096, 16, float("inf")), "unparseable"),
    ("vllm", vllm_text(4096, 16, -0.5), "unparseable"),
]


@pytest.fixture
def engines() -> Iterator[Engines]:
    e = Engines()
    yield e
    e.close()


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    with HostileServer(drip_s=0.2, rate=4_000_000, big_bytes=32 * 2**20) as srv:
        yield srv


def _settings(targets: list[tuple[str, str, str]], **scrape: Any) -> Settings:
    """targets: (url, engine, cache_domain); each named after its domain."""
    ts = [
        {"url": u, "engine": e, "cache_domain": d, "role": "prefill", "name": d}
        for u, e, d in targets
    ]  # fmt: skip
    return Settings(scrape={"timeout_s": 5.0, **scrape, "targets": ts})


async def _limits_json(port: int) -> dict[str, Any]:
    async with httpx.AsyncClient() as c:
        return (await c.get(f"http://127.0.0.1:{port}/limits")).json()  # type: ignore[no-any-return]


# --- one bad value -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("engine", "text", "reason"), BAD_READINGS)
def test_a_bad_reading_is_that_targets_status_never_a_limit(
    engines: Engines, engine: str, text: str, reason: str
) -> None:
    bad = engines.add("bad", text, 32_768)
    good = engines.add("good", GOOD_SG, 1_048_576)
    scraper = Scraper(_settings([(bad, engine, "bad"), (good, "sglang", "good")]))
    got: dict[str, Any] = {}

    async def scenario() -> None:
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        emitted: list[Any] = []
        done = await serve(scraper, lambda ev, lim: emitted.append((ev, lim)), rounds=1, on_port=ready.set_result)
        got["limits"] = scraper.limits.snapshot()
        got["emitted"], got["done"] = emitted, done

    asyncio.run(scenario())
    assert got["done"] is True
    assert set(got["limits"]) == {"good"}  # nothing published for the bad target, the good one unaffected
    assert got["limits"]["good"]["prefill_capacity_tokens"] == 681_280
    assert [ev[0].cache_domain for ev, _ in got["emitted"]] == ["good"]
    assert scraper.failures.labels("bad", reason)._value.get() == 1
    status = scraper.targets()["bad"]
    assert status["status"] == reason and status["detail"] and status["last_ok"] is None
    assert scraper.targets()["good"]["status"] == "ok"


def test_bad_target_status_is_served_on_limits_and_counted_on_metrics(engines: Engines) -> None:
    bad = engines.add("bad", sg_with("sglang:max_total_num_tokens", "+Inf"), None)
    good = engines.add("good", GOOD_SG, None)
    scraper = Scraper(_settings([(bad, "sglang", "bad"), (good, "sglang", "good")], interval_s=0.1))
    got: dict[str, Any] = {}

    async def scenario() -> None:
        stop = asyncio.Event()
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve(scraper, lambda ev, lim: None, stop=stop, on_port=ready.set_result))
        port = await ready
        for _ in range(100):
            if scraper.failures.labels("bad", "unparseable")._value.get() >= 2:
                break
            await asyncio.sleep(0.1)
        got["limits"] = await _limits_json(port)
        async with httpx.AsyncClient() as c:
            got["metrics"] = (await c.get(f"http://127.0.0.1:{port}/metrics")).text
        stop.set()
        await asyncio.wait_for(task, 30)  # stop is honoured promptly (the unfixed scraper waits for the drip)

    asyncio.run(scenario())
    assert set(got["limits"]["domains"]) == {"good"}
    bad_status = got["limits"]["targets"]["bad"]
    assert bad_status["status"] == "unparseable" and "inf" in bad_status["detail"]
    assert 'crosstalk_scrape_failures_total{reason="unparseable",target="bad"}' in got["metrics"]
    assert 'crosstalk_scrape_target_ok{target="bad"} 0.0' in got["metrics"]
    assert 'crosstalk_scrape_target_ok{target="good"} 1.0' in got["metrics"]


@pytest.mark.parametrize(
    ("window", "reason"),
    [
        (1e300, "models_unparseable"),
        (2**41, "models_unparseable"),
        ("inf", "models_unparseable"),
        (True, "models_unparseable"),
        (-1, "models_unparseable"),
        (0.5, "models_unparseable"),
        (float("inf"), "models_unavailable"),  # json.dumps writes Infinity: not JSON
        (10**400, "models_unavailable"),  # orjson refuses a number that is infinite as a double
    ],
)
def test_a_bad_max_model_len_is_counted_and_not_believed(engines: Engines, window: object, reason: str) -> None:
    url = engines.add("vl", vllm_text(4096, 16, 0.5), None)
    engines.models["vl"] = {"object": "list", "data": [{"id": "glm-5.3", "object": "model", "max_model_len": window}]}
    scraper = Scraper(_settings([(url, "vllm", "vl")]))
    stats = asyncio.run(scraper.scrape_once())
    assert [s.capacity_tokens for s in stats] == [65_536]  # the capacity still counts
    assert stats[0].context_window is None  # the window is not taken on trust
    assert scraper.failures.labels("vl", reason)._value.get() == 1
    assert scraper.targets()["vl"]["models"] == reason


def test_cli_once_survives_a_bad_target_and_writes_the_good_one(engines: Engines, tmp_path: Path) -> None:
    bad = engines.add("bad", sg_with("sglang:max_total_num_tokens", "+Inf"), None)
    good = engines.add("good", GOOD_SG, None)
    cfg = tmp_path / "crosstalk.toml"
    cfg.write_text(_toml([(bad, "bad"), (good, "good")]))
    out = tmp_path / "stats.jsonl"
    assert cli_main(["--config", str(cfg), "scrape", "--once", "--out", str(out)]) == 0
    assert [orjson.loads(x)["cache_domain"] for x in out.read_bytes().splitlines()] == ["good"]


def _toml(targets: list[tuple[str, str]], **scrape: object) -> str:
    head = "[scrape]\ntimeout_s = 5.0\n" + "".join(f"{k} = {v}\n" for k, v in scrape.items())
    return head + "".join(
        f'[[scrape.targets]]\nurl = "{u}"\nengine = "sglang"\ncache_domain = "{d}"\nrole = "prefill"\nname = "{d}"\n'
        for u, d in targets
    )


# --- slow, endless and huge peers --------------------------------------------------------------------


def _cli(tmp_path: Path, toml: str, *extra: str) -> tuple[subprocess.Popen[str], Path]:
    cfg, out = tmp_path / "crosstalk.toml", tmp_path / "stats.jsonl"
    cfg.write_text(toml)
    cmd = [sys.executable, "-m", "streams.cli", "--config", str(cfg), "scrape", "--out", str(out), *extra]
    return subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True), out


def test_once_with_a_dripping_target_ends_at_the_deadline(hostile: HostileServer, tmp_path: Path) -> None:
    # One byte every 0.2 s: httpx's per-read timeout (5 s) never trips; only a total deadline ends it.
    proc, out = _cli(
        tmp_path, _toml([(hostile.url("drip"), "drip"), (hostile.url("ok"), "good")], deadline_s=1.0), "--once"
    )
    try:
        _, err = proc.communicate(timeout=60)  # the unfixed scraper drips on for as long as the peer does
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert [orjson.loads(x)["cache_domain"] for x in out.read_bytes().splitlines()] == ["good"]
    assert "scrape of drip (drip) failed: deadline" in err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("once", [True, False])
def test_signals_end_the_scraper_promptly(hostile: HostileServer, tmp_path: Path, sig: int, once: bool) -> None:
    toml = _toml([(hostile.url("drip"), "drip"), (hostile.url("ok"), "good")], deadline_s=3600.0, interval_s=0.2)
    proc, out = _cli(tmp_path, toml, *(["--once"] if once else []), "--limits-port", "0")
    try:
        for _ in range(300):  # the good target's scrape is written while the drip goes on
            if out.exists() and out.stat().st_size:
                break
            time.sleep(0.1)
        assert out.stat().st_size, "the good target was never written"
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)  # the unfixed scraper ignores both until the drip ends
    finally:
        proc.kill()
    assert proc.returncode == (130 if once else 0), err
    assert "Traceback" not in err


def test_a_dripping_target_never_stalls_another_targets_rounds(hostile: HostileServer) -> None:
    s = _settings(
        [(hostile.url("drip"), "sglang", "drip"), (hostile.url("ok"), "sglang", "good")],
        deadline_s=3600.0,
        interval_s=0.1,
    )
    scraper = Scraper(s)
    got: dict[str, Any] = {"ts": []}

    async def scenario() -> None:
        stop = asyncio.Event()
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        emitted: list[Any] = []
        task = asyncio.create_task(
            serve(scraper, lambda ev, lim: emitted.append(lim), stop=stop, on_port=ready.set_result)
        )
        port = await ready
        for _ in range(300):
            limits = await _limits_json(port)
            if "good" in limits["domains"]:
                got["ts"].append(limits["domains"]["good"]["ts"])
            if len(set(got["ts"])) >= 4:
                break
            await asyncio.sleep(0.1)
        got["emitted"] = list(emitted)
        stop.set()
        await asyncio.wait_for(task, 30)  # stop is honoured promptly (the unfixed scraper waits for the drip)

    asyncio.run(scenario())
    assert len(set(got["ts"])) >= 4  # /limits kept moving: four distinct scrapes of the good target
    assert all(set(lim) == {"good"} for lim in got["emitted"])
    assert scraper.targets()["good"]["status"] == "ok"
    assert "drip" not in scraper.targets()  # its first scrape is still dripping: no verdict yet, no limit


def _peak_while(coro: Any) -> tuple[Any, int]:
    """Run coro; its result and the peak of Python allocations (the in-process server generates its
    bodies from one reused chunk, so the peak is the scraper's)."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = asyncio.run(asyncio.wait_for(coro, 60))  # unbounded reads would run on: fail, not hang
        return result, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(("mode", "reason"), [("endless", "too_large"), ("big", "too_large"), ("gzip", "compressed")])
def test_endless_huge_and_compressed_bodies_cost_bounded_memory(hostile: HostileServer, mode: str, reason: str) -> None:
    hostile._bomb()  # compressing the 32 MiB bomb is the server's work: not measured
    s = _settings([(hostile.url(mode), "sglang", mode), (hostile.url("ok"), "sglang", "good")],
                  deadline_s=120.0, max_body_bytes=2**20)  # fmt: skip
    scraper = Scraper(s)
    stats, peak = _peak_while(scraper.scrape_once())
    assert [x.cache_domain for x in stats] == ["good"]
    assert scraper.failures.labels(mode, reason)._value.get() == 1
    assert peak < 8 * 2**20, f"peak {peak:,} bytes for a 1 MiB cap"  # the unfixed scraper held all 32 MiB (x2)


def test_a_large_body_within_the_cap_keeps_only_the_lines_it_reads(hostile: HostileServer) -> None:
    scraper = Scraper(_settings([(hostile.url("big"), "sglang", "big")], deadline_s=120.0, max_body_bytes=64 * 2**20))
    stats, peak = _peak_while(scraper.scrape_once())
    assert [(x.cache_domain, x.capacity_tokens, x.used_tokens) for x in stats] == [("big", 681_280, 612_000)]
    assert peak < 8 * 2**20, f"peak {peak:,} bytes for a 32 MiB body"


def test_a_failed_targets_status_names_its_url_without_credentials() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the block ends
    url = f"http://scraper:hunter2@127.0.0.1:{port}/?token=s3cret"
    scraper = Scraper(_settings([(url, "sglang", "down")]))
    assert asyncio.run(scraper.scrape_once()) == []
    status = scraper.targets()["down"]
    assert status["status"] == "unreachable" and str(port) in status["detail"]  # served on /limits
    assert "hunter2" not in status["detail"] and "s3cret" not in status["detail"]


def test_limits_answer_while_a_large_reading_is_parsed(engines: Engines, monkeypatch: pytest.MonkeyPatch) -> None:
    """A /metrics body within the cap takes seconds to parse (16 MiB: 4.8 s); the parse must not hold the event loop
    that serves /limits. The reader here blocks until /limits has answered: parsed on the loop, it never would."""
    import threading

    from streams.inputs import scrape as scrape_mod

    url = engines.add("good", GOOD_SG, 32_768)
    parsing, answered, parsed = threading.Event(), threading.Event(), threading.Event()
    real = scrape_mod.READERS["sglang"]

    def slow_reader(text: str) -> Any:
        parsing.set()
        answered.wait(5)  # on the loop, this holds /limits for the whole wait: it answers only after `parsed`
        parsed.set()
        return real(text)

    monkeypatch.setitem(scrape_mod.READERS, "sglang", slow_reader)
    scraper = Scraper(_settings([(url, "sglang", "good")], interval_s=0.1))
    got: dict[str, Any] = {}

    async def scenario() -> None:
        stop = asyncio.Event()
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(serve(scraper, lambda ev, lim: None, stop=stop, on_port=ready.set_result))
        port = await ready
        await asyncio.wait_for(asyncio.to_thread(parsing.wait, 30), 35)
        got["limits"] = await asyncio.wait_for(_limits_json(port), 10)
        got["during_parse"] = not parsed.is_set()  # the loop was free while the parse ran
        answered.set()
        stop.set()
        await asyncio.wait_for(task, 30)

    try:
        asyncio.run(scenario())
    finally:
        answered.set()
    assert "domains" in got["limits"] and got["during_parse"]
