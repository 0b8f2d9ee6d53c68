"""`crosstalk evaluate`: alerts judged against the simulator's ground-truth labels.

- exposure recall: contaminated responses flagged high or critical;
- attribution accuracy: contaminated responses flagged with the right conclusion and origin
  (cross_tenant_contamination or canary_leak naming the label's source tenant — the one with most
  leaked words; for leaks from the same tenant's other session, cross_session_contamination);
  also reported leniently: naming any tenant whose pages leaked into the response;
- false-alarm rate: clean 2xx responses flagged high or critical;
- detection delay: event time from the first contaminated response to the first alert flagging one.
"""

from __future__ import annotations

import argparse
import gzip
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import orjson

from schemas.alert import SEVERITY_RANK, Alert

_HIGH = SEVERITY_RANK["high"]


@dataclass
class Evaluation:
    responses: int
    contaminated: int
    clean_2xx: int
    flagged_contaminated: int
    attributed: int
    attributed_any_source: int
    false_alarms: int
    exposure_recall: float
    attribution_accuracy: float
    attribution_any_source: float
    false_alarm_rate: float
    detection_delay_s: float | None
    first_contaminated_ts: float | None
    first_flag_ts: float | None
    alerts: int
    missed_request_ids: list[str]
    misattributed_request_ids: list[str]
    false_alarm_request_ids: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _open(path: str) -> Any:
    return gzip.open(path, "rb") if path.endswith(".gz") else Path(path).open("rb")


def load_alerts(path: str) -> list[Alert]:
    with _open(path) as fh:
        return [Alert.model_validate_json(line) for line in fh if line.strip()]


def load_labels(path: str) -> dict[str, Any]:
    return orjson.loads(Path(path).read_bytes())


def evaluate(labels: dict[str, Any], alerts: Iterable[Alert]) -> Evaluation:
    by_request: dict[str, list[Alert]] = {}
    for a in alerts:
        for rid in a.request_ids:
            by_request.setdefault(rid, []).append(a)
    rows = labels["responses"]
    contaminated = [r for r in rows if r["contaminated"]]
    clean_ok = [r for r in rows if not r["contaminated"] and 200 <= r["status_code"] <= 299]
    flagged, attributed, attributed_any, missed, misattributed, false_alarms = 0, 0, 0, [], [], []
    first_flag: float | None = None
    for r in contaminated:
        found = by_request.get(r["request_id"], [])
        high = [a for a in found if SEVERITY_RANK[a.severity] >= _HIGH]
        if high:
            flagged += 1
            t = min(a.ts for a in high)
            first_flag = t if first_flag is None else min(first_flag, t)
        else:
            missed.append(r["request_id"])
        if any(_attributes(a, r) for a in found):
            attributed += 1
        else:
            misattributed.append(r["request_id"])
        if any(_attributes(a, r, lenient=True) for a in found):
            attributed_any += 1
    for r in clean_ok:
        if any(SEVERITY_RANK[a.severity] >= _HIGH for a in by_request.get(r["request_id"], [])):
            false_alarms.append(r["request_id"])
    first_cont = min((r["ts"] for r in contaminated), default=None)
    delay = None if first_cont is None or first_flag is None else max(0.0, first_flag - first_cont)
    return Evaluation(
        responses=len(rows),
        contaminated=len(contaminated),
        clean_2xx=len(clean_ok),
        flagged_contaminated=flagged,
        attributed=attributed,
        attributed_any_source=attributed_any,
        false_alarms=len(false_alarms),
        exposure_recall=flagged / len(contaminated) if contaminated else 1.0,
        attribution_accuracy=attributed / len(contaminated) if contaminated else 1.0,
        attribution_any_source=attributed_any / len(contaminated) if contaminated else 1.0,
        false_alarm_rate=len(false_alarms) / len(clean_ok) if clean_ok else 0.0,
        detection_delay_s=delay,
        first_contaminated_ts=first_cont,
        first_flag_ts=first_flag,
        alerts=sum(len(v) for v in by_request.values()),
        missed_request_ids=missed,
        misattributed_request_ids=misattributed,
        false_alarm_request_ids=false_alarms,
    )


def _attributes(alert: Alert, row: dict[str, Any], lenient: bool = False) -> bool:
    # A canary of another tenant in the output is a certain attribution of (part of) the leak, even
    # where another tenant's pages dominate the output.
    if alert.kind == "canary_leak" and row.get("canary_markers"):
        return True
    if row.get("leak_kind") == "cross_session":
        return alert.kind == "cross_session_contamination" or (
            alert.kind == "canary_leak" and alert.source_tenant_id == row["source_tenant_id"]
        )
    sources = set(row.get("source_tenant_ids") or []) if lenient else set()
    sources.add(row["source_tenant_id"])
    return alert.kind in ("cross_tenant_contamination", "canary_leak") and alert.source_tenant_id in sources


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", help="the events file the alerts were computed from (checked for presence)")
    parser.add_argument("--labels", required=True, help="labels.json written by `crosstalk simulate`")
    parser.add_argument("--alerts", required=True, help="alerts JSONL written by `crosstalk replay`")
    parser.add_argument("--json", dest="json_out", help="also write the figures as JSON to this path")


def run(args: argparse.Namespace) -> int:
    from streams.cli.console import print_evaluation

    if args.events and not Path(args.events).exists():
        raise SystemExit(f"events file not found: {args.events}")
    ev = evaluate(load_labels(args.labels), load_alerts(args.alerts))
    print_evaluation(ev)
    if args.json_out:
        Path(args.json_out).write_bytes(orjson.dumps(ev.as_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    return 0
