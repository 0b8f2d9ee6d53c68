"""`crosstalk produce FILE`: publish a JSONL file of events (.gz ok, - for stdin) into the Kafka input topic.

The publishing itself is `streams.producer.produce_file`, which gateways and tests call as a library.
"""

from __future__ import annotations

import argparse

from streams.cli.main import EXIT_INPUT, EXIT_OUTPUT, EXIT_PARTIAL, CliError
from streams.inputs.files import InputError, check_inputs, input_size
from streams.producer import BATCH_BYTES, produce_file
from streams.settings import load_settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="JSON Lines file of events (.gz ok), or - for stdin")
    parser.add_argument("--rate", type=float, help="events per second (default: as fast as possible)")
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: kafka.bootstrap)")
    parser.add_argument("--topic", help="input topic (default: kafka.input_topic)")
    parser.add_argument("--skip-bad", action="store_true", help="count bad lines but do not publish them")
    parser.add_argument(
        "--batch", type=int, default=1, help="events per Kafka message (newline-separated, application/x-ndjson)"
    )
    parser.add_argument(
        "--batch-bytes",
        type=int,
        default=BATCH_BYTES,
        help=f"with --batch: at most this many bytes per message (default {BATCH_BYTES:,}: under the 1 MB default "
        "message.max.bytes of Kafka clients such as kcat)",
    )
    parser.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    try:
        check_inputs([args.file])
    except InputError as exc:
        raise CliError(EXIT_INPUT, str(exc)) from None
    settings = load_settings(getattr(args, "config", None))
    k = settings.kafka
    upd = {name: v for name, v in (("bootstrap", args.bootstrap), ("input_topic", args.topic)) if v}
    if upd:
        k = k.model_copy(update=upd)
    err = Console(stderr=True)
    total = input_size([args.file])
    show = err.is_terminal and not args.no_progress and bool(total)
    kwargs = {
        "rate": args.rate,
        "max_bytes": settings.ingest.max_event_bytes,
        "send_bad": not args.skip_bad,
        "batch": max(1, args.batch),
        "batch_bytes": max(1024, args.batch_bytes),
    }
    if show:
        with Progress(TextColumn("produce"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), console=err) as prog:
            task = prog.add_task("produce", total=total)
            res = produce_file(args.file, k, progress=lambda b: prog.advance(task, b + 1), **kwargs)
    else:
        res = produce_file(args.file, k, **kwargs)
    sent = sum(res.sent.values())
    bad = sum(res.bad_lines.values())
    err.print(f"published {sent} events to {k.input_topic} in {res.seconds:.1f}s: {dict(res.sent)}")
    if bad:
        verb = "skipped" if args.skip_bad else "published for dead-lettering"
        err.print(f"{bad} bad lines {verb}: {dict(res.bad_lines)}", style="yellow")
    if res.failed:  # the cluster never took them (no leader until the delivery timeout, ...): not published
        n = sum(res.failed.values())
        err.print(f"crosstalk: error: {n} messages not published: {dict(res.failed)}", style="red", markup=False)
        return EXIT_OUTPUT
    if res.input_error:
        err.print(f"crosstalk: error: {res.input_error}", style="red", markup=False)
        return EXIT_PARTIAL
    return 0
