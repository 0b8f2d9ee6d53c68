"""`crosstalk worker`: create the topics, then run the Faust app until SIGTERM/SIGINT.

Settings come from the one Settings object (file < env); the flags below override the Kafka section
for the common cases (several workers on one host need their own web port and data dir).
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from typing import Any

from streams import heap
from streams.settings import Settings, load_settings, require_fingerprint_key


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap", help="Kafka bootstrap servers (default: kafka.bootstrap)")
    parser.add_argument("--app-id", help="consumer group and prefix of internal topics (default: kafka.app_id)")
    parser.add_argument("--web-port", type=int, help="health/ready/counters HTTP port (default: kafka.web_port)")
    parser.add_argument("--data-dir", help="local state store directory (default: kafka.data_dir)")
    parser.add_argument("--loglevel", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--no-create-topics", action="store_true", help="expect the topics to exist already")


def settings_for(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for flag, name in (
        ("bootstrap", "bootstrap"),
        ("app_id", "app_id"),
        ("web_port", "web_port"),
        ("data_dir", "data_dir"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            overrides[name] = value
    settings = load_settings(getattr(args, "config", None))
    if overrides:
        # Flags beat env and file: rebuild the section with them on top.
        settings = settings.model_copy(update={"kafka": settings.kafka.model_copy(update=overrides)})
    return settings


def run(args: argparse.Namespace) -> int:
    import faust

    from streams.kafka.app import build_pipeline
    from streams.kafka.topics import ensure_topics

    settings = require_fingerprint_key(settings_for(args), "worker")
    logging.basicConfig(level=args.loglevel.upper(), format="[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s")
    if not args.no_create_topics:
        created = ensure_topics(settings.kafka)
        logging.getLogger("crosstalk.worker").info("topics: %s", created)
    if settings.kafka.heap_trim_s > 0:
        heap.tune()  # large blocks mapped apart and given back when freed (streams/heap.py)
    pipeline = build_pipeline(settings)
    # Python's cycle collector runs every 700 net allocations and its full passes walk every live
    # object: the stages allocate a few objects per event and keep large states. What exists after
    # start-up is frozen out of the collections, and the young generation is collected 14x less
    # often: the stages in process 8-10 % faster (issue 16; a 50k threshold gave ~15 % but lets a
    # pass walk far more objects, and each pause delays every alert).
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    worker = faust.Worker(pipeline.app, loglevel=args.loglevel, quiet=True)
    # Faust's terminal spinner sets the root logger to DEBUG so that it "spins for every log
    # message": every debug call in aiokafka then builds a LogRecord (~8 % of a worker's CPU).
    worker.spinner = None
    try:
        worker.execute_from_commandline()  # installs SIGTERM/SIGINT handlers: graceful stop
    except SystemExit as exc:
        return int(exc.code or 0)
    finally:
        pipeline.close_sinks()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streams.kafka.worker", description=__doc__)
    parser.add_argument("--config", help="TOML settings file (default: $CROSSTALK_CONFIG)")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
