"""`crosstalk demo --live`: the whole incident, live, in one process and on real HTTP.

1. The test engine (OpenAI-compatible, prefill/decode KV pools) starts on loopback in `pd-abort-bug`
   mode, scaled down from GLM-5.3's 1,048,576-token window / 681,280-token prefill pool to 65,536 /
   40,960 so that it runs on a laptop; it reports its pools as cache_stats and its tenants' traffic as
   gateway events.
2. Background tenants send ordinary requests through the openai SDK.
3. The prober runs one cycle with two probe identities; the monitor (the embedded runner, in-process)
   is fed every event as it is produced and prints alerts as they fire.
4. The fix is deployed (`fixed` mode) and the prober runs again: it passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any

import openai
import orjson

from schemas.alert import Alert
from schemas.events import EventError, parse_event
from streams.cli.console import err, print_alert, print_summary
from streams.embedded.runner import EmbeddedRunner
from streams.outputs import FunctionOutput
from streams.probe.identities import Identity
from streams.probe.pool import pool_from_metrics
from streams.probe.run import CycleReport, Prober
from streams.probe.summary import print_report
from streams.settings import Settings
from streams.sim.serving.core import EngineConfig
from streams.sim.serving.server import LiveEngine
from streams.sinks import build_sinks
from streams.sinks.jsonl import AlertWriter

LIVE_CONFIG = EngineConfig(
    model="glm-sim",
    context_window=65_536,
    prefill_pool_tokens=40_960,
    decode_pool_tokens=262_144,
    prefill_tokens_per_s=200_000.0,
    decode_tokens_per_s=4_000.0,
    cache_domain="glm-sim-pd-1",
)
TENANTS = tuple(f"tenant-{i:02d}" for i in range(1, 7))
_SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "vo",
    "xi",
    "ze",
    "pa",
    "qu",
    "bo",
    "de",
    "fi",
    "gu",
    "ho",
    "ja",
    "ke",
    "li",
    "mu",
)


class _AlertConsole(AlertWriter):
    """Prints each high/critical alert, and the first of every other kind, as it fires."""

    def __init__(self) -> None:
        super().__init__(None)
        self.seen: set[str] = set()
        self.quiet = 0
        self.alerts: list[Alert] = []

    def on_alert(self, alert: Alert) -> None:
        self.alerts.append(alert)
        if alert.severity in ("high", "critical") or alert.kind not in self.seen:
            print_alert(alert)
        else:
            self.quiet += 1
        self.seen.add(alert.kind)


class _Monitor:
    """The embedded runner fed event by event through the real wire path (bytes -> validation -> core)."""

    def __init__(self, settings: Settings) -> None:
        self.console = _AlertConsole()
        self.runner = EmbeddedRunner(settings, [self.console, *build_sinks(settings)])
        self.max_bytes = settings.ingest.max_event_bytes

    def feed(self, event: dict[str, Any]) -> None:
        raw = orjson.dumps(event)
        try:
            self.runner.feed(parse_event(raw, max_bytes=self.max_bytes), "live", None, raw)
        except EventError as exc:
            self.runner.reject("live", None, exc.reason, exc.detail, raw)


def _tenant_text(rng: random.Random, vocab: list[str], words: int) -> str:
    return " ".join(rng.choices(vocab, k=words))


async def _background(base_url: str, tenant: str, stop: asyncio.Event, seed: int) -> int:
    """One ordinary tenant: prompts from its own (private) vocabulary, 300-3,000 words, every ~0.5-1.5 s."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choices(_SYLLABLES, k=rng.randint(2, 4))) for _ in range(400)]
    sent = 0
    async with openai.AsyncOpenAI(base_url=base_url, api_key=tenant, max_retries=0, timeout=60) as client:
        while not stop.is_set():
            prompt = f"Summarise the {tenant} notes: " + _tenant_text(rng, vocab, rng.randint(300, 3000))
            with contextlib.suppress(openai.OpenAIError):
                await client.chat.completions.create(
                    model=LIVE_CONFIG.model, messages=[{"role": "user", "content": prompt}], max_tokens=64
                )
                sent += 1
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=rng.uniform(0.5, 1.5))
    return sent


async def _live(settings: Settings, warmup_s: float, between_s: float) -> tuple[CycleReport, CycleReport, _Monitor]:
    monitor = _Monitor(settings)
    engine = LiveEngine(LIVE_CONFIG, "pd-abort-bug", on_event=monitor.feed, stats_interval_s=1.0)
    base_url = await engine.start()
    c = LIVE_CONFIG
    err.print(
        f"engine {base_url} in [bold red]pd-abort-bug[/] mode: window {c.context_window:,} tokens, prefill pool "
        f"{c.prefill_pool_tokens:,} (GLM-5.3 had 1,048,576 / 681,280); metrics at {base_url[:-3]}/metrics"
    )
    stop = asyncio.Event()
    background = [asyncio.create_task(_background(base_url, t, stop, i)) for i, t in enumerate(TENANTS)]
    # The prober reads the prefill pool from the engine's SGLang metrics, as an operator's would.
    pool = await asyncio.to_thread(pool_from_metrics, base_url.removesuffix("/v1") + "/metrics")
    prober = Prober(
        settings,
        base_url,
        [Identity("probe-a", "probe-a"), Identity("probe-b", "probe-b")],
        output=FunctionOutput(monitor.feed),
        pool=pool,
        cache_domain=c.cache_domain,
        in_process=True,
    )
    try:
        err.print(f"{len(TENANTS)} background tenants sending traffic; the monitor watches every event ...")
        await asyncio.sleep(warmup_s)
        err.rule("the prober, against the buggy deployment")
        before = await prober.run_cycle()
        print_report(before, err)
        await asyncio.sleep(between_s)
        err.rule("deploying the fix: engine -> fixed mode")
        engine.set_mode("fixed")
        await asyncio.sleep(between_s)
        err.rule("the prober, after the fix")
        after = await prober.run_cycle()
        print_report(after, err)
        await asyncio.sleep(between_s)
    finally:
        stop.set()
        sent = await asyncio.gather(*background)
        await engine.stop()
    err.print(f"background tenants sent {sum(sent):,} requests; engine leaks (ground truth): {len(engine.leaks)}")
    return before, after, monitor


def run_live_demo(settings: Settings, *, warmup_s: float = 6.0, between_s: float = 3.0) -> int:
    err.rule("crosstalk demo --live")
    start = time.perf_counter()
    before, after, monitor = asyncio.run(_live(settings, warmup_s, between_s))
    result = monitor.runner.finish(start)
    if monitor.console.quiet:
        err.print(f"(+{monitor.console.quiet} further lower-severity alerts not shown)", style="dim")
    print_summary(result)
    exposure = [a for a in result.alerts if a.severity in ("high", "critical")]
    ok = before.exit_code == 1 and after.exit_code == 0 and bool(exposure)
    err.print(
        f"prober: exit {before.exit_code} on the buggy engine, exit {after.exit_code} after the fix; "
        f"monitor: {len(exposure)} high/critical alerts; {time.perf_counter() - start:.0f} s wall time",
        style="bold green" if ok else "bold red",
    )
    return 0 if ok else 1
