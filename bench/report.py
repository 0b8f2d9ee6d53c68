"""Markdown summary of bench/results/*.json: every figure beside its baseline, and the targets.

python bench/report.py            # prints the table pasted into docs/benchmarks.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _targets(d: dict) -> list[str]:
    out = []
    for name, t in (d.get("targets") or {}).items():
        mark = "met" if t.get("met") else "**missed**"
        out.append(f"{name}: {t.get('value')} ({mark})")
    return out


def main() -> int:
    rows = []
    for path in sorted(RESULTS.glob("bench_*.json")):
        d = json.loads(path.read_text())
        ratio = d.get("ratio") or {}
        ratio_txt = ", ".join(f"{k} = {v:.3g}" for k, v in ratio.items() if isinstance(v, (int, float)))
        rows.append((d.get("bench", path.stem), d.get("mode", "?"), ratio_txt, "; ".join(_targets(d)) or "–"))
    print("| benchmark | mode | ratios (same run) | targets |")
    print("|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
