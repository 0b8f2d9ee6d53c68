"""The worst figure over fingerprint keys and deployment shapes, from `scripts/evaluate_seeds.py` result files.

Each input is `LABEL=PATH` (PATH a JSON written by evaluate_seeds.py with `--out`; LABEL names its shape and
key, e.g. `24t-4rps:key-a=docs/evaluation.json`). Rows group inputs by the part of LABEL before the colon
(the shape); every figure is given per key and as the worst over the keys, and a last row takes the worst over
every shape. Prints a markdown table for docs/evaluation.md.

    .venv/bin/python scripts/evaluation_worst.py --profile multilingual 24t:a=docs/evaluation.json \\
        24t:b=bench/results/eval-keys/crosstalk-key-b.json ...
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

# (column, figure from a profile summary, whether higher is worse)
FIGURES: list[tuple[str, str, bool]] = [
    ("false high+", "false_alarm_rate", True),
    ("false warning+", "warning_alarm_rate", True),
    ("exposure", "exposure_recall", False),
    ("content-only exposure", "content_only", False),
    ("attribution", "attribution_accuracy", False),
    ("CJK-source attribution", "cjk_attribution", False),
]


def figure(summary: dict[str, Any], name: str) -> float | None:
    groups = summary.get("groups", {})
    if name == "content_only":
        return groups.get("scenario", {}).get("content_only", {}).get("exposure")
    if name == "cjk_attribution":
        return groups.get("source_script", {}).get("cjk", {}).get("attribution")
    value = summary.get(name)
    return float(value) if value is not None else None


def counts(summary: dict[str, Any]) -> str:
    return f"{summary['false_alarms']}/{summary['clean_2xx']:,}"


def table(inputs: list[tuple[str, str, dict[str, Any]]], profile: str) -> str:
    shapes: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for shape, key, doc in inputs:
        summary = doc["summary"].get(profile)
        if summary is not None:
            shapes.setdefault(shape, []).append((key, summary))
    head = "| shape | keys | " + " | ".join(c for c, _, _ in FIGURES) + " |"
    lines = [head, "|" + "---|" * (len(FIGURES) + 2)]
    worst_all: dict[str, float] = {}
    for shape, rows in shapes.items():
        cells = []
        for col, name, higher_worse in FIGURES:
            values = [(figure(s, name), k) for k, s in rows]
            known = [(v, k) for v, k in values if v is not None]
            if not known:
                cells.append("–")
                continue
            worst = max(known) if higher_worse else min(known)
            pick = max if higher_worse else min
            worst_all[col] = pick(worst_all.get(col, worst[0]), worst[0])
            spread = ", ".join(f"{v:.2%}" for v, _ in known)
            extra = f" ({counts(dict(rows)[worst[1]])})" if name == "false_alarm_rate" else ""
            cells.append(f"**{worst[0]:.2%}**{extra} [{spread}]")
        lines.append(f"| {shape} | {len(rows)} | " + " | ".join(cells) + " |")
    lines.append(
        "| **worst of all** | | "
        + " | ".join(f"**{worst_all[c]:.2%}**" if c in worst_all else "–" for c, _, _ in FIGURES)
        + " |"
    )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="multilingual")
    ap.add_argument("inputs", nargs="+", help="SHAPE:KEY=PATH")
    args = ap.parse_args()
    inputs = []
    for item in args.inputs:
        label, _, path = item.partition("=")
        shape, _, key = label.partition(":")
        inputs.append((shape, key, json.loads(Path(path).read_text())))
    print(table(inputs, args.profile))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
