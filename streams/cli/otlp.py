"""`crosstalk otlp`: OTLP GenAI spans in, over OTLP/HTTP (/v1/traces, protobuf and JSON) or from the
OpenTelemetry Collector's Kafka exporter topic (`--from-kafka`; encodings otlp_proto and otlp_json).

Spans are mapped by streams.inputs.otlp (text fingerprinted at once) and go to one output, which this
command builds and hands to the receiver (streams.inputs.otlp_receiver) or the bridge:
  --to embedded  the detectors in this process; alerts as JSON Lines (no broker needed; the default)
  --to kafka     crosstalk's input topic (the workers detect); unmappable spans to the dead-letter topic
  --to jsonl     an events file, for `crosstalk replay` later
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
from typing import Any

from streams.cli.main import EXIT_CONFIG, CliError
from streams.inputs.otlp_auth import UnsafeBind, check_bind
from streams.inputs.otlp_http import bridge_kafka
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.io import LazyFile
from streams.outputs import JsonlOutput, KafkaOutput
from streams.settings import Settings, load_settings, require_fingerprint_key, with_run_key

log = logging.getLogger("crosstalk.otlp")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", choices=["embedded", "kafka", "jsonl"], default="embedded")
    parser.add_argument("--port", type=int, help="OTLP/HTTP port (default: otlp.port, 14318)")
    parser.add_argument("--bind", help="address (default: otlp.bind, 127.0.0.1)")
    parser.add_argument("--from-kafka", action="store_true", help="read the Collector's Kafka topic (otlp.kafka_topic)")
    parser.add_argument("--events-out", help="--to jsonl: events file (default: stdout)")
    parser.add_argument("--alerts-out", help="--to embedded: alerts as JSONL (default: stdout)")
    parser.add_argument("--rejects", default="crosstalk-otlp-rejects.jsonl", help="unmappable spans (not --to kafka)")
    parser.add_argument(
        "--selftest",
        nargs="?",
        const="",
        dest="selftest_url",
        metavar="URL",
        help="send one GenAI span to a running receiver (default: $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else "
        "this receiver's address) and say what arrived (streams/inputs/otlp_selftest.py)",
    )
    parser.add_argument("--counters-url", help="--selftest through a Collector: crosstalk's /counters URL")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "selftest_url", None) is not None:
        from streams.inputs.otlp_selftest import selftest_main

        return selftest_main(args, load_settings(getattr(args, "config", None)))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings = load_settings(getattr(args, "config", None))
    # Fingerprints that leave this process must be made with the key the workers use.
    keyed = with_run_key if args.to == "embedded" else require_fingerprint_key
    settings = keyed(settings, "otlp")
    if args.from_kafka:
        if args.to != "kafka":
            raise SystemExit("crosstalk otlp --from-kafka: use --to kafka (the workers detect)")
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())  # finish the batch in hand, commit, close
        return _bridge(settings, stop)
    bind = args.bind or settings.otlp.bind
    try:  # before any output is opened: a refused start leaves nothing behind
        check_bind(settings, bind, settings.otlp.port if args.port is None else args.port)
    except UnsafeBind as exc:
        raise CliError(EXIT_CONFIG, str(exc)) from None
    rejects = LazyFile(args.rejects)
    output: Any
    out_file: Any = None
    if args.to == "kafka":
        output = KafkaOutput(settings)
    elif args.to == "jsonl":
        out_file = sys.stdout.buffer if args.events_out in (None, "-") else open(args.events_out, "ab")  # noqa: SIM115
        output = JsonlOutput(out_file, rejects)
    else:
        from streams.embedded.output import EmbeddedOutput

        out_file = sys.stdout.buffer if args.alerts_out in (None, "-") else open(args.alerts_out, "ab")  # noqa: SIM115
        output = EmbeddedOutput(settings, out_file, rejects)
    receiver = OtlpReceiver(settings, output)

    async def main() -> None:
        port = await receiver.start_async(args.bind, args.port)
        log.info("OTLP/HTTP receiver on http://%s:%d/v1/traces and /v1/logs -> %s", bind, port, args.to)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await receiver.stop_async()

    try:
        asyncio.run(main())
    finally:
        output.close()
        rejects.close()
        if out_file is not None and out_file is not sys.stdout.buffer:
            out_file.close()
    log.info("stopped: %s", dict(receiver.counters))
    return 0


def _bridge(settings: Settings, stop: threading.Event) -> int:
    """The bridge, once its topics exist: brokers with auto-creation off never create the Collector's topic,
    and the consumer then logged "Topic not found" many times a second. Created here (the runners' room),
    not in the bridge (an input), so that inputs/ does not import kafka/."""
    from streams.kafka.topics import TopicsUnavailable, ensure_bridge_topics

    o = settings.otlp
    try:
        created = ensure_bridge_topics(settings)
    except TopicsUnavailable as exc:  # one clear error, not a log line per poll
        log.error("crosstalk otlp --from-kafka: %s", exc)
        return 1
    log.info("topics: %s", ", ".join(f"{name} {how}" for name, how in sorted(created.items())))
    log.info("bridging %s (%s) -> %s", o.kafka_topic, o.kafka_encoding, settings.kafka.input_topic)
    counts = bridge_kafka(settings, stop=stop)
    log.info("bridge stopped: %s", dict(counts))
    return 0
