"""`crosstalk evaluate`: alerts judged against the simulator's ground-truth labels (streams.sim.evaluate)."""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson

from streams.cli.console import print_evaluation
from streams.sim.evaluate import evaluate, load_alerts, load_labels, print_groups


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--events", help="the events file the alerts were computed from (checked for presence)")
    parser.add_argument("--labels", required=True, help="labels.json written by `crosstalk simulate`")
    parser.add_argument("--alerts", required=True, help="alerts JSONL written by `crosstalk replay`")
    parser.add_argument("--json", dest="json_out", help="also write the figures as JSON to this path")


def run(args: argparse.Namespace) -> int:
    if args.events and not Path(args.events).exists():
        raise SystemExit(f"events file not found: {args.events}")
    ev = evaluate(load_labels(args.labels), load_alerts(args.alerts))
    print_evaluation(ev)
    print_groups(ev)
    if args.json_out:
        Path(args.json_out).write_bytes(orjson.dumps(ev.as_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    return 0
