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
            # The false-high target is 0.05 %: two decimals would hide which side of it a figure is.
            fmt = ".3%" if name == "false_alarm_rate" else ".2%"
            spread = ", ".join(f"{v:{fmt}}" for v, _ in known)
            extra = f" ({counts(dict(rows)[worst[1]])})" if name == "false_alarm_rate" else ""
            cells.append(f"**{worst[0]:{fmt}}**{extra} [{spread}]")
        lines.append(f"| {shape} | {len(rows)} | " + " | ".join(cells) + " |")
    lines.append(
        "| **worst of all** | | "
        + " | ".join(
            f"**{worst_all[c]:{'.3%' if n == 'false_alarm_rate' else '.2%'}}**" if c in worst_all else "–"
            for c, n, _ in FIGURES
        )
        + " |"
    )
    return "\n".join(lines)


# Issue 24's targets for the two alarm rates, drawn as lines.
TARGETS = {"false_alarm_rate": ("false high+", 0.0005), "warning_alarm_rate": ("false warning+", 0.003)}


def plot(inputs: list[tuple[str, str, dict[str, Any]]], profile: str, path: Path) -> None:
    """Per shape, each key's false high+ and false warning+ rate beside issue 24's target (a dashed line)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shapes: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for shape, key, doc in inputs:
        if (summary := doc["summary"].get(profile)) is not None:
            shapes.setdefault(shape, []).append((key, summary))
    fig, axes = plt.subplots(1, len(TARGETS), figsize=(5.5 * len(TARGETS), 3.6))
    for ax, (name, (title, target)) in zip(axes, TARGETS.items(), strict=True):
        labels, values = [], []
        for shape, rows in shapes.items():
            for key, summary in rows:
                labels.append(f"{shape}, key {key}")
                values.append(100 * float(summary[name]))
        ax.bar(range(len(values)), values, color=["#4c72b0" if v <= 100 * target else "#dd8452" for v in values])
        ax.axhline(100 * target, ls="--", color="grey")
        ax.set_xticks(range(len(values)), labels, fontsize=7, rotation=30, ha="right")
        ax.set_ylabel("% of clean 2xx responses")
        ax.set_title(f"{title} per key (target {100 * target:g} %)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="multilingual")
    ap.add_argument("inputs", nargs="+", help="SHAPE:KEY=PATH")
    ap.add_argument("--plot", type=Path, help="also draw each key's alarm rates beside the targets (a PNG)")
    args = ap.parse_args()
    inputs = []
    for item in args.inputs:
        label, _, path = item.partition("=")
        shape, _, key = label.partition(":")
        inputs.append((shape, key, json.loads(Path(path).read_text())))
    print(table(inputs, args.profile))
    if args.plot:
        plot(inputs, args.profile, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
