"""`crosstalk probe`: ask an OpenAI-compatible endpoint whether it leaks across tenants right now.

Exit codes (a post-deploy check): 0 clean, 1 leak or unsafe acceptance found, 2 could not probe.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson
from rich.progress import Progress, TextColumn

from streams.outputs import JsonlOutput, KafkaOutput, NullOutput, Output
from streams.probe.identities import parse_identity
from streams.probe.judge import ProbeResult
from streams.probe.ladder import MAX_WINDOW
from streams.probe.run import CycleReport, Prober, _one_line
from streams.probe.summary import print_report, report_json
from streams.settings import Settings, load_settings
from streams.terminal import err

log = logging.getLogger("crosstalk.probe")

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|)\s*$")


def parse_duration(text: str) -> float:
    m = _DURATION.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad duration {text!r}: use e.g. 30s, 10m, 1h")
    value = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]
    if value <= 0:
        raise argparse.ArgumentTypeError("a duration must be positive")
    return value


def parse_window(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad window {text!r}: a number of tokens") from None
    if not 0 < value <= MAX_WINDOW:
        raise argparse.ArgumentTypeError(f"a window must be 1..{MAX_WINDOW:,} tokens")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", required=True, help="the endpoint's OpenAI base URL, e.g. http://127.0.0.1:8000/v1")
    p.add_argument(
        "--identity",
        action="append",
        help="probe tenant NAME or NAME=ENV_VAR with its API key; repeat (default: probe.identities, probe-a probe-b)",
    )
    p.add_argument("--model", help="model id (default: the first one /v1/models lists)")
    p.add_argument("--window", type=parse_window, help="advertised context window (default: from /v1/models)")
    p.add_argument("--pool-tokens", type=int, help="suspected prefill KV pool size: the ladder brackets it")
    p.add_argument("--metrics-url", help="read the pool from SGLang's sglang:max_total_num_tokens at this URL")
    p.add_argument("--max-requests", type=int, help="budget: requests per run")
    p.add_argument("--max-tokens", type=int, help="budget: prompt + max output tokens per run")
    p.add_argument("--rate", type=float, help="budget: requests per second")
    p.add_argument("--max-output-tokens", type=int)
    p.add_argument("--deadline", type=parse_duration, help="a cycle ends after DURATION (default: probe.deadline_s)")
    p.add_argument("--events", metavar="FILE", help="write the probe's events as JSONL (- for stdout, into a pipeline)")
    p.add_argument("--kafka", action="store_true", help="publish the probe's events to the Kafka input topic")
    p.add_argument("--cache-domain", help="cache_domain of the events (default: the endpoint's host:port)")
    p.add_argument("--every", type=parse_duration, help="schedule: probe again every DURATION (30s, 10m, 1h)")
    p.add_argument("--cycles", type=int, default=None, help="with --every: stop after N cycles (default: forever)")
    p.add_argument("--json", metavar="FILE", help="also write each cycle's report as JSON lines (no markers, no text)")


def _settings_for(args: argparse.Namespace) -> Settings:
    settings = load_settings(getattr(args, "config", None))
    update = {
        k: v
        for k, v in {
            "max_requests": args.max_requests,
            "max_tokens": args.max_tokens,
            "rate_per_s": args.rate,
            "max_output_tokens": args.max_output_tokens,
            "deadline_s": args.deadline,
        }.items()
        if v is not None
    }
    probe = settings.probe.model_validate({**settings.probe.model_dump(), **update})
    return settings.model_copy(update={"probe": probe})


def _output(args: argparse.Namespace, settings: Settings) -> Output:
    if args.events and args.kafka:
        raise ValueError("--events and --kafka are exclusive")
    if args.events:
        return JsonlOutput(args.events)
    if args.kafka:
        return KafkaOutput(settings, send_text=True)  # the outputs' words feed the canary scan
    return NullOutput()


def worst(codes: list[int]) -> int:
    return 1 if 1 in codes else (2 if 2 in codes else 0)


async def run_schedule(
    prober: Prober,
    every_s: float | None,
    cycles: int | None,
    on_report: Callable[[CycleReport], None] | None = None,
) -> list[CycleReport]:
    reports: list[CycleReport] = []
    n = 0
    while True:
        started = time.monotonic()
        report = await prober.run_cycle()
        reports.append(report)
        if on_report is not None:
            on_report(report)
        n += 1
        if every_s is None or (cycles is not None and n >= cycles):
            return reports
        await asyncio.sleep(max(0.0, every_s - (time.monotonic() - started)))


def run(args: argparse.Namespace) -> int:
    try:
        settings = _settings_for(args)
        specs = args.identity or settings.probe.identities
        identities = [parse_identity(s) for s in specs]
        pool = args.pool_tokens
        if pool is None and args.metrics_url:
            from streams.probe.pool import pool_from_metrics

            pool = pool_from_metrics(args.metrics_url)
            if pool is None:
                print(
                    f"crosstalk probe: no pool size at {args.metrics_url}; probing by window fractions", file=sys.stderr
                )
        output = _output(args, settings)
        prober = Prober(
            settings,
            args.base_url,
            identities,
            model=args.model,
            window=args.window,
            pool=pool,
            output=output,
            cache_domain=args.cache_domain,
        )
    except Exception as exc:  # bad flags, settings or identities: one clear line, "could not probe"
        print(f"crosstalk probe: {exc}", file=sys.stderr)
        return 2
    if not prober.send_fingerprints and not isinstance(output, NullOutput):
        print(
            "crosstalk probe: no fingerprint key configured (detection.fingerprint_key); "
            "events carry no prompt fingerprints, and marker ids are this run's own",
            file=sys.stderr,
        )
    json_path = Path(args.json) if args.json else None
    columns = [*Progress.get_default_columns()[:-1], TextColumn("{task.fields[last]}")]
    progress = Progress(*columns, console=err, transient=True)
    task = progress.add_task("probing", total=None, last="")

    def show(report: CycleReport) -> None:
        if report.error is not None and not report.results:
            print(f"crosstalk probe: could not probe: {report.error}", file=sys.stderr)
        else:
            print_report(report, err)
        if json_path is not None:
            with json_path.open("ab") as fh:
                fh.write(orjson.dumps(report_json(report)) + b"\n")
        progress.reset(task, total=None, last="")  # the next cycle starts from zero

    cycles = args.cycles if args.every is not None else 1
    reports: list[CycleReport] = []
    if err.is_terminal:  # long prompts take a while: show each probe as it completes

        def tick(r: ProbeResult, planned: int) -> None:
            last = f"{r.tenant} {r.sent_tokens:,} tokens -> {r.status or r.skipped or r.error}"
            progress.update(task, advance=1, total=planned, last=last)

        prober.on_result = tick
        progress.start()
    try:
        reports = asyncio.run(run_schedule(prober, args.every, cycles, show))
    except KeyboardInterrupt:
        print("crosstalk probe: interrupted", file=sys.stderr)
    except Exception as exc:  # the prober's own failure is "could not probe" (2), never "leak found" (1)
        log.debug("crosstalk probe: internal error", exc_info=True)  # the traceback, for whoever asks for it
        print(f"crosstalk probe: could not probe: internal error ({_one_line(exc, prober.book)})", file=sys.stderr)
        return 2
    finally:
        progress.stop()
        prober.close()
    if not reports:
        return 2
    return worst([r.exit_code for r in reports])
