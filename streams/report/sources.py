"""Where the report's inputs come from: alert JSONL files, the alerts topic, event JSONL files, a replay's leads.

Bad lines never stop a report and are never dropped silently: each is counted by reason, the first
few are kept with source and line number, and the report shows them.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import orjson
from pydantic import BaseModel, ValidationError

from schemas.alert import RESOLVED_RECORD, Alert, IncidentResolved, Lead
from streams.io import open_binary
from streams.report.timeline import BadField, Timeline

Progress = Callable[[int], None]  # told the bytes read so far
M = TypeVar("M", bound=BaseModel)
_NOT_OBJECT = "not a JSON object"
_GENERIC = {_NOT_OBJECT: _NOT_OBJECT}  # our own messages; any other exception is named by its class only


@dataclass
class Problems:
    """Unreadable inputs: counted by reason, the first `keep` described."""

    keep: int = 20
    counts: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def add(self, reason: str, where: str, detail: str) -> None:
        """`detail` names a field and what is wrong with it, never its value: a bad line can be prompt
        text, and the report is read by more people than the logs (callers build it from our own words)."""
        self.counts[reason] += 1
        if len(self.examples) < self.keep:
            self.examples.append(f"{where}: {reason}: {detail[:200]}")

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _alert_of(raw: bytes | str, where: str, problems: Problems) -> Alert | None:
    # The alerts topic also carries the core's incident resolutions (keyed by incident_id): not alerts, not errors.
    if b'"incident_resolved"' in (raw.encode() if isinstance(raw, str) else raw):
        try:
            if IncidentResolved.model_validate_json(raw).record == RESOLVED_RECORD:
                return None
        except ValidationError:
            pass
    return _valid(Alert, raw, where, problems, "invalid_alert")


def _valid(model: type[M], raw: bytes | str, where: str, problems: Problems, invalid: str) -> M | None:
    """`raw` as a `model`; else None, the problem counted (`invalid`, or not_json) with the field it was found at."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        reason = "not_json" if any(e["type"] == "json_invalid" for e in errors) else invalid
        first = errors[0]
        problems.add(reason, where, f"field {_loc(first['loc'])}: {first['type']}" if first["loc"] else first["type"])
        return None


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")


def _loc(loc: tuple[int | str, ...]) -> str:
    # Model field names and list positions are ours; a dict key (under figures) is the sender's: hidden.
    return ".".join(str(p) if isinstance(p, int) or _NAME.fullmatch(p) else "<key>" for p in loc)


def _lines(paths: Iterable[str]) -> Iterator[tuple[bytes, str]]:
    """Each non-empty line of the files (.gz ok, - for stdin), with where it was."""
    for path in paths:
        src = "<stdin>" if path == "-" else path
        with open_binary(path) as fh:
            for lineno, line in enumerate(fh, start=1):
                line = line.strip()
                if line:
                    yield line, f"{src}:{lineno}"


def read_alert_files(paths: Iterable[str], problems: Problems) -> Iterator[Alert]:
    for line, where in _lines(paths):
        alert = _alert_of(line, where, problems)
        if alert is not None:
            yield alert


def read_lead_files(paths: Iterable[str], problems: Problems) -> Iterator[Lead]:
    """The core's leads (`crosstalk replay --leads-out`); a line that is no lead is a problem, as an alert's is."""
    for line, where in _lines(paths):
        lead = _valid(Lead, line, where, problems, "invalid_lead")
        if lead is not None:
            yield lead


def read_alerts_topic(
    bootstrap: str, topic: str, problems: Problems, *, timeout_s: float = 30.0, on_count: Progress | None = None
) -> list[Alert]:
    """Every alert on the topic from the beginning to the end offsets seen at start (no consumer group)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=max(int(timeout_s * 1000), 31_000),
    )
    try:
        parts = consumer.partitions_for_topic(topic)
        if not parts:
            raise SystemExit(f"crosstalk report: topic {topic!r} does not exist on {bootstrap}")
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        end = {tp: off for tp, off in consumer.end_offsets(tps).items() if off > 0}
        alerts: list[Alert] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < off for tp, off in end.items()):
            if time.monotonic() > deadline:
                left = {f"{tp.partition}": off - consumer.position(tp) for tp, off in end.items()}
                raise SystemExit(f"crosstalk report: timed out reading {topic!r}; messages left by partition: {left}")
            for tp, records in consumer.poll(timeout_ms=500, max_records=5000).items():
                for rec in records:
                    if rec.offset >= end.get(tp, 0):
                        continue  # written after we started: the next report's business
                    if rec.value is None:
                        problems.add("empty", f"{topic}[{tp.partition}]@{rec.offset}", "tombstone")
                        continue
                    alert = _alert_of(rec.value, f"{topic}[{tp.partition}]@{rec.offset}", problems)
                    if alert is not None:
                        alerts.append(alert)
            if on_count is not None:
                on_count(len(alerts))
        return alerts
    finally:
        consumer.close()


def read_events(paths: Iterable[str], timeline: Timeline, problems: Problems, progress: Progress | None = None) -> None:
    """Feed every event line to the timeline. Only numbers are kept; text fields are parsed and dropped."""
    done = 0
    for path in paths:
        src = "<stdin>" if path == "-" else path
        with open_binary(path) as fh:
            for lineno, raw in enumerate(fh, start=1):
                done += len(raw)
                line = raw.strip()
                if line:
                    try:
                        ev = orjson.loads(line)
                        if not isinstance(ev, dict):
                            raise TypeError(_NOT_OBJECT)
                        timeline.feed(ev)
                    except orjson.JSONDecodeError as exc:
                        problems.add("not_json", f"{src}:{lineno}", f"at character {exc.pos}")
                    except KeyError as exc:
                        problems.add("missing_field", f"{src}:{lineno}", f"no field {_loc((str(exc.args[0]),))}")
                    except BadField as exc:
                        problems.add("invalid_event", f"{src}:{lineno}", str(exc))
                    except (TypeError, ValueError) as exc:
                        problems.add("invalid_event", f"{src}:{lineno}", _GENERIC.get(str(exc), type(exc).__name__))
                if progress is not None and lineno % 2000 == 0:
                    progress(done)
    if progress is not None:
        progress(done)
    timeline.finish()
