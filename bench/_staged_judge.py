"""The staged topology's judge stage for one hot domain, in one process (bench_hotdomain, issue 43 target 2).

In the staged topology the ingest and join stages run on other workers and hand the domain's partition exchange
records (streams/kafka/records.py): fingerprints as the ingest made them, decoded without validation. What one domain
then sustains is its judge stage's rate: the records decoded, routed, judged, with its cache statistics and event time
as the join stage passes them on. `sequence` records that input once from a whole run; `judge` replays it on a fresh
judge stage (detectors/pipeline.py), so the time is the judge stage's alone. The Kafka hops are not in it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from detectors.pipeline import judge_apart, judge_state, whole
from detectors.settings import DetectionSettings
from schemas.events import EventError, parse_event
from streams.kafka import records

Item = tuple[str, Any]  # ("ex", exchange record) | ("stats", event record) | ("time", event time)


def sequence(settings: DetectionSettings, lines: list[bytes]) -> list[Item]:
    """What the join stage hands the domain's judge stage for these input lines, in order."""
    monitor, out, next_s = whole(settings), [], float("-inf")
    for line in lines:
        try:
            event = parse_event(line)
        except EventError:
            continue
        if event.ts >= next_s:  # the judge stage steps event time once per second of it, as the monitor does
            out.append(("time", event.ts))
            next_s = event.ts + 1.0
        observed = monitor.observe_evaluated(event)
        out += [("ex", records.exchange_record(ex)) for ex, _ in observed.evaluated]
        if event.type == "cache_stats":
            out.append(("stats", records.event_record(event)))
    out += [("ex", records.exchange_record(ex)) for ex, _ in monitor.flush_evaluated().evaluated]
    return out


def judge(settings: DetectionSettings, items: list[Item]) -> int:
    """The judge stage over `items`: the alerts it raised."""
    back, alerts = judge_apart(judge_state(settings, Counter())), 0
    for kind, value in items:
        if kind == "ex":
            alerts += len(back.route(records.exchange_from_record(value)))
        elif kind == "stats":
            alerts += len(back.stats(records.event_from_record(value)[0]))
        else:
            alerts += len(back.advance(value))
    return alerts + len(back.flush())


def record_mb(items: list[Item]) -> float:
    return sum(len(v) for k, v in items if k != "time") / (1 << 20)
