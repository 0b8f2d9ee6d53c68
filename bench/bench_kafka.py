"""Benchmark 6: the Faust workers against the real Kafka broker (scripts/kafka.sh up).

In one run, on text-free simulator traffic:

1. N events are published to a fresh input topic (unique topic names and app id per run).
2. Baseline: a raw `AIOKafkaConsumer` that only decodes (`orjson.loads`) every message of that topic
   from the beginning: events/s, first message to last.
3. One worker (`python -m streams.kafka.worker`, a subprocess) on the same pre-filled topic from the
   beginning: ingest-stage and join-stage rates from its `/counters`, end-to-end (domain-stage) rate
   from the alerts of end markers (one over-long request per domain partition, then tick events that
   push event time past everything: the last domain item of every partition raised an alert).
   Target: end-to-end >= 50 % of the raw consumer.
4. Latency at half the measured end-to-end rate: live traffic whose event time is the wall clock,
   with injected over-long requests (prompt_tokens 900,000 on a domain whose prefill pool is
   681,280; the engine counted input_tokens 1). Latency = time the alert is read from the alerts
   topic - wall time its response was produced. Run with low-latency watermark settings (reorder
   lateness 0 s, watermark step 0.05 s) and with the defaults (0.05 s, 0.1 s since issue 16).
   Target (issue 16): p99 <= 250 ms at half rate with the default settings.
5. One and two workers (same app id), each joined and ready before the input is published (on a
   pre-filled topic the first worker to join reads most of it before the second gets a partition):
   combined rate and scaling vs one worker.
6. The direct topology (kafka.topology=direct, streams/kafka/direct.py): the same events keyed by
   cache domain (canaries to every partition), one event and 100 events per message.
7. Text-rich traffic (issue 28, bench/_kafka_textrich.py): the direct worker, 100 events per message, on
   the multilingual traffic of bench_textrich beside the text-rich core on the same events; and the direct
   topology's latency, text-free and text-rich, at a rate the whole setup sustains (producer included),
   found by trial windows from half the end-to-end rate down.
   `--only textrich` runs this part alone (and the text-free direct run it starts from) and writes
   bench/results/bench_kafka_textrich.json.

This file is the command line and the order of the runs; the parts: bench/_kafka_input.py (messages, end
markers), bench/_kafka_throughput.py (baseline, ceilings, worker runs), bench/_kafka_latency.py (live
latency), bench/_kafka_report.py (tables, targets, figure, result file). Topics, workers and ticks come
from tests/support/, shared with the Kafka tests.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c
import orjson
from _kafka_input import PER_MESSAGE, batched, build_input, direct_batched, direct_input, spread_domains
from _kafka_latency import LOW_LATENCY_ENV, latency_run
from _kafka_report import Measured, write
from _kafka_textrich import run_textrich, textrich_tables, textrich_targets
from _kafka_throughput import core_ceiling, publish, raw_consume, run_workers

from streams.settings import Settings
from tests.support.kafkanames import KafkaNames

DEFAULT_BOOTSTRAP = "127.0.0.1:19092"
DIRECT_ENV = {"CROSSTALK_KAFKA__TOPOLOGY": "direct"}
SPREAD_WAYS = 16  # the direct scaling run: 48 cache domains ...
SPREAD_PARTITIONS = 12  # ... over 12 input partitions


def names(bootstrap: str, tag: str, **kafka: Any) -> KafkaNames:
    """Unique app id and topics for one stage of the run (created with these Kafka settings)."""
    return KafkaNames.unique(bootstrap, f"bench-{tag}", **kafka)


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default=os.environ.get("CROSSTALK_KAFKA__BOOTSTRAP", DEFAULT_BOOTSTRAP))
    p.add_argument("--no-defaults-latency", action="store_true", help="skip the latency run with default settings")
    p.add_argument(
        "--only",
        choices=["all", "textrich", "direct"],
        default="all",
        help="textrich: the text-rich runs alone; direct: the direct worker against the core, text-free (part 6)",
    )
    args = p.parse_args(argv)
    if args.only == "textrich":
        return textrich_only(args)
    if args.only == "direct":
        return direct_only(args)
    # Produce retries right after topic creation (NotLeaderForPartition) are expected and retried.
    logging.getLogger("aiokafka").setLevel(logging.ERROR)

    defaults = Settings()
    partitions = defaults.kafka.internal_partitions
    n_events = c.pick(args, full=200_000, quick=30_000, tiny=2_000)
    per_copy = 21_192  # events of one 1200 s simulated run at 8 req/s (seed 7)
    duration = c.pick(args, full=1200.0, quick=1200.0, tiny=60.0)
    copies = max(1, -(-n_events // per_copy)) if duration == 1200.0 else 1
    lines = c.text_free_lines(args, copies, duration_s=duration)[:n_events]
    n_events = len(lines)
    msgs, marker_domains = build_input(lines, partitions)
    total = len(msgs)
    nbytes = sum(len(v) for _, v in msgs)
    c.log(args, f"{n_events:,} text-free events + {total - n_events} end markers/ticks, {nbytes / c.MB:.1f} MB")

    workdir = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    keep_logs = False
    try:
        # 1+2: pre-fill, raw consumer baseline, one worker.
        with names(args.bootstrap, "one") as one:
            t_pub = asyncio.run(publish(args.bootstrap, one.input_topic, msgs))
            c.log(args, f"published {total:,} messages in {t_pub:.1f}s ({total / t_pub:,.0f}/s)")
            base = asyncio.run(raw_consume(args.bootstrap, one.input_topic, total, timeout_s=300))
            c.log(args, f"raw consumer: {base['events_per_s']:,.0f} ev/s")
            ceiling = core_ceiling(lines)
            c.log(args, f"core alone (no Kafka): {ceiling['core_events_per_s']:,.0f} ev/s")
            r1 = run_workers(args, one, total, marker_domains, 1, workdir)
            c.log(args, f"1 worker: end-to-end {r1['end_to_end_events_per_s']:,.0f} ev/s")
        # 3b: the same events, PER_MESSAGE to a Kafka message (gateways that batch), same baseline kind.
        with names(args.bootstrap, "batched") as bat:
            bmsgs = batched(msgs, n_events, PER_MESSAGE)
            asyncio.run(publish(args.bootstrap, bat.input_topic, bmsgs))
            base_b = asyncio.run(raw_consume(args.bootstrap, bat.input_topic, len(bmsgs), timeout_s=300))
            c.log(args, f"raw consumer, batched: {base_b['events_per_s']:,.0f} ev/s")
            rb = run_workers(args, bat, total, marker_domains, 1, workdir)
            c.log(args, f"1 worker, batched input: end-to-end {rb['end_to_end_events_per_s']:,.0f} ev/s")
        # 5: one and two workers, each joined and ready before the input is published (on a pre-filled
        # topic the first worker to join reads most of the input before the second gets a partition).
        with names(args.bootstrap, "one-ready") as one_ready:
            r1r = run_workers(args, one_ready, total, marker_domains, 1, workdir, publish_when_ready=msgs)
            c.log(args, f"1 worker, ready first: end-to-end {r1r['end_to_end_events_per_s']:,.0f} ev/s")
        with names(args.bootstrap, "two") as two:
            r2 = run_workers(args, two, total, marker_domains, 2, workdir, publish_when_ready=msgs)
            c.log(args, f"2 workers, ready first: end-to-end {r2['end_to_end_events_per_s']:,.0f} ev/s")
        # 6: the direct topology on the same events, keyed by cache domain.
        d1, db = direct_runs(args, lines, defaults, workdir)
        # 6b: direct, one vs two workers, on the same traffic over SPREAD_WAYS x the cache domains and
        # SPREAD_PARTITIONS input partitions (a domain is read by one worker: the three domains of the
        # simulated service, of unequal traffic, cannot spread over two workers evenly; a deployment that
        # scales out has many engine instances and more partitions than workers).
        spread_env = {**DIRECT_ENV, "CROSSTALK_KAFKA__INPUT_PARTITIONS": str(SPREAD_PARTITIONS)}
        smsgs, sdomains, _ = direct_input(spread_domains(lines, SPREAD_WAYS), SPREAD_PARTITIONS)
        spread = f"{3 * SPREAD_WAYS} domains, {SPREAD_PARTITIONS} partitions"
        with names(args.bootstrap, "direct-spread-one", input_partitions=SPREAD_PARTITIONS) as s1n:
            d1s = run_workers(args, s1n, len(smsgs), sdomains, 1, workdir, smsgs, spread_env)
            c.log(args, f"1 worker, direct, {spread}: end-to-end {d1s['end_to_end_events_per_s']:,.0f} ev/s")
        with names(args.bootstrap, "direct-spread-two", input_partitions=SPREAD_PARTITIONS) as s2n:
            d2s = run_workers(args, s2n, len(smsgs), sdomains, 2, workdir, smsgs, spread_env)
            c.log(args, f"2 workers, direct, {spread}: end-to-end {d2s['end_to_end_events_per_s']:,.0f} ev/s")
        # 4: latency at half the sustained (end-to-end) rate of one worker.
        half = 0.5 * r1["end_to_end_events_per_s"]
        background = [orjson.loads(raw) for raw in lines]
        lat: dict[str, dict[str, Any]] = {}
        lat_duration = c.pick(args, full=60.0, quick=20.0, tiny=6.0)
        lat["low-latency"] = latency_run(
            args, args.bootstrap, background, half, LOW_LATENCY_ENV, "lat", lat_duration, 2.0, workdir
        )
        if not args.no_defaults_latency:
            # Defaults: watermark = slowest input partition's event time - kafka.watermark_lateness_s.
            d_duration = c.pick(args, full=30.0, quick=20.0, tiny=12.0)
            lat["defaults"] = latency_run(
                args, args.bootstrap, background, half, {}, "latdef", d_duration, 8.0, workdir
            )
        # 7: text-rich traffic; the direct topology's latency at rates the whole setup sustains.
        tr = run_textrich(args, workdir, DIRECT_ENV, background, d1["end_to_end_events_per_s"])
        lat.update(tr["latency"])
    except Exception:
        keep_logs = True
        print(f"worker logs kept in {workdir}", file=sys.stderr)
        raise
    finally:
        if not keep_logs:
            shutil.rmtree(workdir, ignore_errors=True)

    write(
        args,
        Measured(
            events=n_events, messages=total, nbytes=nbytes, publish_s=t_pub, base=base, base_b=base_b,
            ceiling=ceiling, r1=r1, rb=rb, r2=r2, lat=lat, half=half, r1_ready=r1r, d1=d1, db=db,
            d1s=d1s, d2s=d2s, textrich=tr,
        ),
        defaults,
    )  # fmt: skip
    return 0


def textrich_only(args: Any) -> int:
    """Part 7 alone: the text-free direct run it starts the latency search from, then the text-rich runs."""
    defaults = Settings()
    n_events = c.pick(args, full=60_000, quick=30_000, tiny=2_000)
    duration = c.pick(args, full=1200.0, quick=1200.0, tiny=60.0)
    lines = c.text_free_lines(args, 3 if n_events > 21_192 else 1, duration_s=duration)[:n_events]
    workdir = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    try:
        dmsgs, ddomains, _ = direct_input(lines, defaults.kafka.input_partitions)
        with names(args.bootstrap, "direct") as dn:
            asyncio.run(publish(args.bootstrap, dn.input_topic, dmsgs))
            d1 = run_workers(args, dn, len(dmsgs), ddomains, 1, workdir, extra_env=DIRECT_ENV)
        c.log(args, f"1 worker, direct topology: end-to-end {d1['end_to_end_events_per_s']:,.0f} ev/s")
        tr = run_textrich(
            args, workdir, DIRECT_ENV, [orjson.loads(raw) for raw in lines], d1["end_to_end_events_per_s"]
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    tables = textrich_tables(tr)
    targets = textrich_targets(tr)
    strip = {k: {kk: vv for kk, vv in v.items() if not kk.startswith("latencies")} for k, v in tr["latency"].items()}
    path = c.write(
        "bench_kafka_textrich",
        args,
        params={"path": tr["path"], "events": tr["core"]["events"], "text_mb": tr["core"]["text_mb"],
                "text_free_direct_events": len(dmsgs), "load_average": os.getloadavg()},
        figures={"worker_end_to_end_events_per_s": tr["worker"]["end_to_end_events_per_s"],
                 **{f"latency_{k}_p99_ms": v["p99_ms"] for k, v in tr["latency"].items()},
                 **{f"latency_{k}_rate": v["achieved_rate"] for k, v in tr["latency"].items()}},
        baseline={"core_events_per_s": tr["core"]["core_events_per_s"], "core": tr["core"],
                  "text_free_direct_end_to_end_events_per_s": d1["end_to_end_events_per_s"]},
        ratio={"worker_over_core": tr["worker"]["end_to_end_events_per_s"] / tr["core"]["core_events_per_s"]},
        targets=targets,
        tables=tables,
        extra={"worker": tr["worker"], "latency": strip, "text_free_direct": d1},
    )  # fmt: skip
    c.report("text-rich traffic through the direct topology", tables, targets, path)
    return 0


def direct_runs(args: Any, lines: list[bytes], defaults: Settings, workdir: Path) -> tuple[dict, dict]:
    """Part 6: one direct worker on the events keyed by cache domain, one event a message, then PER_MESSAGE."""
    dmsgs, ddomains, d_events = direct_input(lines, defaults.kafka.input_partitions)
    with names(args.bootstrap, "direct") as dn:
        asyncio.run(publish(args.bootstrap, dn.input_topic, dmsgs))
        d1 = run_workers(args, dn, len(dmsgs), ddomains, 1, workdir, extra_env=DIRECT_ENV)
    c.log(args, f"1 worker, direct topology: end-to-end {d1['end_to_end_events_per_s']:,.0f} ev/s")
    with names(args.bootstrap, "direct-batched") as dbn:
        asyncio.run(publish(args.bootstrap, dbn.input_topic, direct_batched(dmsgs, d_events, PER_MESSAGE)))
        db = run_workers(args, dbn, len(dmsgs), ddomains, 1, workdir, extra_env=DIRECT_ENV)
    c.log(args, f"1 worker, direct, batched: end-to-end {db['end_to_end_events_per_s']:,.0f} ev/s")
    return d1, db


def direct_only(args: Any) -> int:
    """Part 6 alone: the direct worker on text-free input, one event and PER_MESSAGE events a message, beside the core
    alone on the same events in the same run (issue 43 target 3: batched >= 50 % of the core)."""
    logging.getLogger("aiokafka").setLevel(logging.ERROR)
    defaults = Settings()
    n_events = c.pick(args, full=200_000, quick=30_000, tiny=2_000)
    duration = c.pick(args, full=1200.0, quick=1200.0, tiny=60.0)
    copies = max(1, -(-n_events // 21_192)) if duration == 1200.0 else 1
    lines = c.text_free_lines(args, copies, duration_s=duration)[:n_events]
    workdir = Path(tempfile.mkdtemp(prefix="bench-kafka-"))
    try:
        ceiling = core_ceiling(lines)
        c.log(args, f"core alone (no Kafka): {ceiling['core_events_per_s']:,.0f} ev/s")
        d1, db = direct_runs(args, lines, defaults, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    core = ceiling["core_events_per_s"]
    ratio = {"direct_over_core": d1["end_to_end_events_per_s"] / core,
             "direct_batched_over_core": db["end_to_end_events_per_s"] / core}  # fmt: skip
    rows = [
        {"what": "core alone (no Kafka)", "events/s": core, "of the core": "100 %"},
        {"what": "direct worker, 1 event a message", "events/s": d1["end_to_end_events_per_s"],
         "of the core": f"{ratio['direct_over_core']:.1%}"},
        {"what": f"direct worker, {PER_MESSAGE} events a message", "events/s": db["end_to_end_events_per_s"],
         "of the core": f"{ratio['direct_batched_over_core']:.1%}"},
    ]  # fmt: skip
    tables = {"direct topology against the core, text-free, same run": c.table(rows)}
    targets = {"direct worker, batched / core": c.target(ratio["direct_batched_over_core"], 0.5)}
    path = c.write(
        "bench_kafka_direct",
        args,
        params={"events": len(lines), "messages": d1["messages"], "per_message": PER_MESSAGE,
                "load_average": os.getloadavg()},
        figures={"direct_end_to_end_events_per_s": d1["end_to_end_events_per_s"],
                 "direct_batched_end_to_end_events_per_s": db["end_to_end_events_per_s"]},
        baseline={"core_events_per_s": core, "core": ceiling},
        ratio=ratio,
        targets=targets,
        tables=tables,
        extra={"direct": d1, "direct_batched": db},
    )  # fmt: skip
    c.report("the direct worker against the core", tables, targets, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
