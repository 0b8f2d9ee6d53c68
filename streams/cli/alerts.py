"""`crosstalk alerts`: the worker's alerts as readable lines, from the Kafka alerts topic or a JSONL alerts file.

    crosstalk alerts --follow                            # new alerts on kafka.alerts_topic, as they come
    crosstalk alerts --from-beginning --min-severity high --domain 'glm53-*'
    crosstalk alerts --file alerts.jsonl --follow        # a file the embedded runner writes (tail -f)

A read-only viewer: on Kafka it joins no consumer group and commits nothing, so it never takes records from
`crosstalk deliver` or moves its offsets. Without --follow it prints what is there (the topic up to its end
when it started, or the whole file) and exits; with --follow it keeps printing until interrupted. A record
that is no alert (a tombstone, a foreign message, a line cut in two by a crash) is named on stderr with where
it is and why, counted in the closing line, and skipped: it never stops the viewer.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import get_args

import orjson
from pydantic import ValidationError

from schemas.alert import RESOLVED_RECORD, SEVERITY_RANK, Alert, AlertKind, IncidentResolved
from schemas.timefmt import format_ts
from streams.cli.console import alert_line

MAX_LINE = 64 * 2**20  # an alert line longer than this is no alert crosstalk writes: skipped, not buffered
Out = Callable[[str], None]


@dataclass
class Filter:
    """Which alerts to show: all the given conditions hold (each repeatable option: any of its values)."""

    min_severity: str = "info"
    domains: list[str] = field(default_factory=list)  # fnmatch patterns
    tenants: list[str] = field(default_factory=list)  # the receiving or the source tenant
    kinds: list[str] = field(default_factory=list)

    def alert(self, a: Alert) -> bool:
        return (
            SEVERITY_RANK[a.severity] >= SEVERITY_RANK[self.min_severity]
            and self.domain(a.cache_domain)
            and (not self.tenants or a.tenant_id in self.tenants or a.source_tenant_id in self.tenants)
            and (not self.kinds or a.kind in self.kinds)
        )

    def domain(self, cache_domain: str) -> bool:
        return not self.domains or any(fnmatch.fnmatchcase(cache_domain, p) for p in self.domains)

    def resolution(self, r: IncidentResolved) -> bool:
        # An incident's end says nothing of kind, tenant or severity: shown when only domains are asked for.
        return self.domain(r.cache_domain) and not (self.tenants or self.kinds or self.min_severity != "info")


@dataclass
class Viewer:
    """Turns records into lines: alerts and resolutions that pass the filter to `out`, problems to stderr."""

    flt: Filter
    out: Out
    shown: int = 0
    skipped: Counter[str] = field(default_factory=Counter)

    def record(self, value: bytes | None, where: str) -> None:
        if not value:
            return self.skip("empty", where, "no value (a tombstone or a blank line)")
        try:
            obj = orjson.loads(value)
            if isinstance(obj, dict) and obj.get("record") == RESOLVED_RECORD:
                r = IncidentResolved.model_validate(obj)
                if self.flt.resolution(r):
                    self._show(_resolved_line(r))
                return None
            alert = Alert.model_validate(obj)
        except orjson.JSONDecodeError:
            return self.skip("not_json", where, "not JSON")
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or "record"
            return self.skip("not_an_alert", where, f"{loc}: {first.get('msg', 'invalid')}"[:200])
        if self.flt.alert(alert):
            self._show(_alert_line(alert))
        return None

    def _show(self, line: str) -> None:
        self.shown += 1
        self.out(line)

    def skip(self, reason: str, where: str, detail: str) -> None:
        self.skipped[reason] += 1
        print(f"crosstalk alerts: skipped {where}: {detail}", file=sys.stderr, flush=True)

    def summary(self) -> str:
        skipped = ", ".join(f"{n} {r}" for r, n in sorted(self.skipped.items()))
        return f"crosstalk alerts: {self.shown} shown" + (f"; skipped {skipped}" if skipped else "")


def _alert_line(a: Alert) -> str:
    extra = f"  incident={a.incident_id[:12]}"
    if a.response_id:
        extra += f" response={a.response_id}"
    return alert_line(a) + extra


def _resolved_line(r: IncidentResolved) -> str:
    return (
        f"{format_ts(r.resolved_at)} {'RESOLVED':8} {'incident ' + r.incident_id[:12]:28} {r.cache_domain}  "
        f"{r.alerts} alert(s) from {format_ts(r.first_ts)} to {format_ts(r.last_ts)}"
    )


# --- sources ------------------------------------------------------------------------------------------


def read_kafka(
    bootstrap: str, topic: str, viewer: Viewer, *, follow: bool, from_beginning: bool, stop: threading.Event
) -> None:
    """The topic's records to `viewer`: without `follow`, from the start to the end offsets seen at start."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","), group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        parts = consumer.partitions_for_topic(topic)
        while not parts and follow and not stop.wait(1.0):  # a new deployment: the workers create it
            consumer.topics()  # refreshes the metadata
            parts = consumer.partitions_for_topic(topic)
        if not parts:
            if not stop.is_set():
                raise SystemExit(f"crosstalk alerts: topic {topic!r} does not exist on {bootstrap}")
            return
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        if from_beginning or not follow:
            consumer.seek_to_beginning(*tps)
        else:
            consumer.seek_to_end(*tps)
        end = None if follow else {tp: off for tp, off in consumer.end_offsets(tps).items() if off > 0}
        while not stop.is_set() and (end is None or any(consumer.position(tp) < off for tp, off in end.items())):
            for tp, records in consumer.poll(timeout_ms=500, max_records=1000).items():
                for rec in records:
                    if end is None or rec.offset < end.get(tp, 0):
                        viewer.record(rec.value, f"{topic}[{tp.partition}]@{rec.offset}")
    finally:
        consumer.close()


def read_file(
    path: Path,
    viewer: Viewer,
    *,
    follow: bool,
    from_beginning: bool,
    stop: threading.Event,
    ready: threading.Event | None = None,
) -> None:
    """The file's lines to `viewer`; with `follow`, as `tail -F`: it waits for the file, reads what is appended,
    starts again from the top of a file truncated or replaced (log rotation), and holds a line without its
    newline until the writer finishes it. `ready` is set once the file is open at its starting place."""
    fh = None
    ident: tuple[int, int] | None = None  # the open file's (device, inode)
    at_end = follow and not from_beginning  # the first open starts at the end: only new alerts
    pending, lineno, skipping = b"", 0, False
    try:
        while not stop.is_set():
            if fh is None:
                try:
                    fh = path.open("rb")
                except FileNotFoundError:
                    if not follow:
                        raise SystemExit(f"crosstalk alerts: no file {path}") from None
                    stop.wait(0.5)
                    continue
                st = os.fstat(fh.fileno())
                if at_end:
                    fh.seek(0, os.SEEK_END)
                ident, pending, lineno, skipping = (st.st_dev, st.st_ino), b"", 0, False
                mark = "+" if at_end else ""  # line numbers counted from where reading began
                at_end = False
                if ready is not None:
                    ready.set()
            chunk = fh.read(1 << 20)
            if chunk:
                lines = (pending + chunk).split(b"\n")
                pending = lines.pop()
                for line in lines:
                    lineno += 1
                    if skipping:
                        skipping = False  # the end of an oversized line
                    elif line.strip():
                        viewer.record(line, f"{path}:{mark}{lineno}")
                if len(pending) > MAX_LINE:
                    viewer.skip("oversized", f"{path}:{mark}{lineno + 1}", f"a line of over {MAX_LINE:,} bytes")
                    pending, skipping = b"", True
                continue
            if not follow:
                if pending.strip() and not skipping:
                    viewer.record(pending, f"{path}:{mark}{lineno + 1}")  # a last line without its newline
                return
            if _replaced(path, ident, fh.tell()):
                fh.close()
                fh = None
                continue
            stop.wait(0.25)
    finally:
        if fh is not None:
            fh.close()


def _replaced(path: Path, ident: tuple[int, int] | None, pos: int) -> bool:
    try:
        st = path.stat()
    except FileNotFoundError:
        return False  # moved away, not yet replaced: keep reading the open one
    return (st.st_dev, st.st_ino) != ident or st.st_size < pos


# --- command ------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--follow", "-f", action="store_true", help="keep printing new alerts until interrupted")
    parser.add_argument(
        "--from-beginning", action="store_true", help="with --follow: start at the oldest alert, not the newest"
    )
    parser.add_argument("--file", help="a JSONL alerts file (replay --alerts-out, otlp) instead of the Kafka topic")
    parser.add_argument("--topic", help="the alerts topic (default: kafka.alerts_topic)")
    parser.add_argument("--min-severity", choices=list(SEVERITY_RANK), default="info")
    parser.add_argument("--domain", action="append", default=[], help="cache domain (glob; repeatable)")
    parser.add_argument("--tenant", action="append", default=[], help="receiving or source tenant (repeatable)")
    parser.add_argument("--kind", action="append", default=[], choices=get_args(AlertKind), help="(repeatable)")


def run(args: argparse.Namespace) -> int:
    from streams.settings import load_settings

    flt = Filter(args.min_severity, args.domain, args.tenant, args.kind)
    viewer = Viewer(flt, lambda line: print(line, flush=True))
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if args.file:
            read_file(Path(args.file), viewer, follow=args.follow, from_beginning=args.from_beginning, stop=stop)
        else:
            k = load_settings(getattr(args, "config", None)).kafka
            topic = args.topic or k.alerts_topic
            read_kafka(k.bootstrap, topic, viewer, follow=args.follow, from_beginning=args.from_beginning, stop=stop)
    except BrokenPipeError:  # `| head`: the reader left
        return 0
    print(viewer.summary(), file=sys.stderr, flush=True)
    return 0
