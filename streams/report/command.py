"""`crosstalk report`: the incident report as one self-contained HTML page, and per-tenant notifications.

crosstalk report --alerts alerts.jsonl --events events.jsonl --out report.html --per-tenant notices/
crosstalk report --from-kafka --events events.jsonl --out report.html
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import sys
from pathlib import Path

# Imported here so that a missing optional dependency makes the command "unavailable" with the reason.
import jinja2  # noqa: F401
import matplotlib  # noqa: F401

from streams.settings import Settings, load_settings


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--alerts", nargs="+", metavar="A.jsonl", help="alert JSON Lines files (.gz ok, - for stdin)")
    src.add_argument("--from-kafka", action="store_true", help="read the alerts topic from the beginning to its end")
    p.add_argument("--topic", help="with --from-kafka: the alerts topic (default: kafka.alerts_topic)")
    p.add_argument("--events", nargs="+", metavar="E.jsonl", default=[], help="event files: timeline, request details")
    p.add_argument(
        "--leads",
        nargs="+",
        metavar="L.jsonl",
        default=[],
        help="a replay's leads (--leads-out): those naming a tenant the alerts name join the leads table",
    )
    p.add_argument("--out", default="crosstalk-report.html", help="the HTML report (default: %(default)s)")
    p.add_argument("--per-tenant", metavar="DIR", help="also write one JSON and one CSV notification per tenant here")
    p.add_argument("--title", default="crosstalk incident report")
    p.add_argument("--no-progress", action="store_true")


def _pseudonym_key(settings: Settings) -> bytes | None:
    if settings.report.pseudonym_key is not None:
        return settings.report.pseudonym_key.get_secret_value().encode()
    key = settings.detection.fingerprint_key
    if getattr(key, "configured", False):
        # Derived, not reused: a pseudonym must not be a fingerprint of the tenant id under the same key.
        return hmac.new(key.get_secret_value().encode(), b"crosstalk-report-pseudonym-key", hashlib.sha256).digest()
    return None


def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from streams.inputs.files import input_size
    from streams.report.html import render, write_html
    from streams.report.model import build_report, dedupe
    from streams.report.sources import Problems, read_alert_files, read_alerts_topic, read_events, read_lead_files
    from streams.report.tenants import Counterparty, write_per_tenant
    from streams.report.timeline import Timeline
    from streams.terminal import err

    settings = load_settings(getattr(args, "config", None))
    missing = [p for p in [*(args.alerts or []), *args.events, *args.leads] if p != "-" and not Path(p).is_file()]
    if missing:
        raise SystemExit(f"crosstalk report: no such file: {', '.join(missing)}")
    problems = Problems()
    show = err.is_terminal and not args.no_progress
    if args.from_kafka:
        topic = args.topic or settings.kafka.alerts_topic
        inputs = [f"Kafka topic {topic}"]
        with err.status(f"reading {topic} to its end…", spinner="dots") if show else contextlib.nullcontext():
            raw_alerts = read_alerts_topic(
                settings.kafka.bootstrap, topic, problems, timeout_s=settings.report.kafka_timeout_s
            )
    else:
        inputs = list(args.alerts)
        raw_alerts = list(read_alert_files(args.alerts, problems))
    alerts, _ = dedupe(raw_alerts)
    timeline = None
    if args.events:
        inputs += args.events
        watch = {rid for a in alerts for rid in a.request_ids}
        timeline = Timeline(
            watch,
            max_buckets=settings.report.timeline_buckets,
            max_pending=settings.report.max_pending_requests,
        )
        total = input_size(args.events)
        bar = Progress(TextColumn("reading events"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), console=err)
        task = bar.add_task("events", total=total)
        if show:
            bar.start()
        try:
            read_events(args.events, timeline, problems, (lambda n: bar.update(task, completed=n)) if show else None)
        finally:
            if show:
                bar.stop()
        for a in alerts:
            timeline.add_alert(a.cache_domain, a.ts, a.severity)
    inputs += args.leads
    report = build_report(raw_alerts, timeline, read_lead_files(args.leads, problems))
    out = Path(args.out)
    with err.status("rendering the report…", spinner="dots") if show else contextlib.nullcontext():
        write_html(out, render(report, title=args.title, inputs=inputs, problems=problems))
    err.print(
        f"report: {out} — {len(report.affected)} affected responses, {report.alerts} alerts"
        + (f", {problems.total} unreadable lines (listed in the report)" if problems.total else ""),
        highlight=False,
    )
    if args.per_tenant:
        party = Counterparty(settings.report.disclose_counterparty, _pseudonym_key(settings))
        files = write_per_tenant(Path(args.per_tenant), report, alerts, party)
        err.print(f"per-tenant notifications: {len(files) // 2} tenants in {args.per_tenant}", highlight=False)
    return 0


if __name__ == "__main__":  # pragma: no cover
    p = argparse.ArgumentParser(prog="python -m streams.report.command")
    add_arguments(p)
    sys.exit(run(p.parse_args()))
