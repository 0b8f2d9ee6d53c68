"""Several soak runs (bench/soak_worker.py result files) on one figure: the worker's RSS over time, one line each.

python bench/plot_soaks.py OUT.png LABEL=bench/results/soak_worker-a.json LABEL=... [--title TEXT]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import orjson


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("runs", nargs="+", help="LABEL=path of a soak_worker result file")
    p.add_argument("--title", default="one direct worker at 60 text-rich events/s")
    args = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.6))
    for run in args.runs:
        label, _, path = run.partition("=")
        samples = orjson.loads(Path(path).read_bytes())["samples"]
        ax.plot([s["t_s"] / 60 for s in samples], [s["rss_bytes"] / 2**20 for s in samples], label=label)
    ax.set_xlabel("minutes")
    ax.set_ylabel("worker RSS (MB)")
    ax.set_ylim(bottom=0)
    ax.set_title(args.title)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
