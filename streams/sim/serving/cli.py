"""`crosstalk engine`: the live test engine (an OpenAI-compatible server with the GLM-5.3 bug on demand)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from streams.sim.serving.core import MODES, EngineConfig
from streams.sim.serving.server import LiveEngine


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = EngineConfig()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--mode", choices=MODES, default="fixed", help="fixed | pd-abort-bug | prefix-collision")
    p.add_argument("--model", default=d.model)
    p.add_argument("--window", type=int, default=d.context_window, help="advertised context window (max_model_len)")
    p.add_argument("--pool-tokens", type=int, default=d.prefill_pool_tokens, help="prefill KV pool size, tokens")
    p.add_argument("--decode-pool-tokens", type=int, help="decode KV pool size (default: 2x the window)")
    p.add_argument("--page-size", type=int, default=d.page_size)
    p.add_argument("--prefill-rate", type=float, default=d.prefill_tokens_per_s, help="simulated prefill tokens/s")
    p.add_argument("--cache-domain", help="cache_domain of emitted events (default: host:port)")
    p.add_argument("--events", metavar="FILE", help="emit gateway/engine events as JSONL (- for stdout)")
    p.add_argument("--kafka", action="store_true", help="emit events to the Kafka input topic (text as fingerprints)")
    p.add_argument("--stats-interval", type=float, default=1.0, help="seconds between cache_stats events")


def config_from(args: argparse.Namespace) -> EngineConfig:
    return EngineConfig(
        model=args.model,
        context_window=args.window,
        prefill_pool_tokens=args.pool_tokens,
        decode_pool_tokens=args.decode_pool_tokens or 2 * args.window,
        page_size=args.page_size,
        prefill_tokens_per_s=args.prefill_rate,
        cache_domain=args.cache_domain or f"{args.host}:{args.port}",
    )


async def _serve(engine: LiveEngine, host: str, port: int) -> None:
    url = await engine.start(host, port)
    c = engine.config
    print(
        f"crosstalk engine: {url}  mode={engine.core.mode}  window={c.context_window:,}  "
        f"prefill pool={engine.core.prefill.capacity_tokens:,}  metrics={url.removesuffix('/v1')}/metrics",
        file=sys.stderr,
    )
    try:
        await asyncio.Event().wait()
    finally:
        await engine.stop()


def run(args: argparse.Namespace) -> int:
    from streams.outputs import JsonlOutput, KafkaOutput, Output, ValidatedOutput
    from streams.settings import load_settings

    try:
        config = config_from(args)
        settings = load_settings(getattr(args, "config", None))
        output: Output | None = None
        if args.events:
            output = ValidatedOutput(JsonlOutput(args.events), settings, "crosstalk engine")
        elif args.kafka:
            # Text fingerprinted at the edge, as a gateway's producer does.
            output = ValidatedOutput(KafkaOutput(settings, send_text=False), settings, "crosstalk engine")
        on_event = None if output is None else (lambda ev, out=output: out.send([ev]))
        engine = LiveEngine(config, args.mode, on_event=on_event, stats_interval_s=args.stats_interval)
    except (ValueError, OSError) as exc:
        print(f"crosstalk engine: {exc}", file=sys.stderr)
        return 2
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(engine, args.host, args.port))
    except OSError as exc:
        print(f"crosstalk engine: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    finally:
        if output is not None:
            output.close()
    return 0
