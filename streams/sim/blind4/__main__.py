"""python -m streams.sim.blind4 --out DIR --shape NAME --seed N [--gzip]"""

from __future__ import annotations

import argparse
from pathlib import Path

from streams.sim.blind4 import SHAPES, write


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m streams.sim.blind4", description="blind-v4 profile generator")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="eurodesk")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gzip", action="store_true", help="write events.jsonl.gz")
    args = ap.parse_args(argv)
    paths = write(args.shape, args.seed, args.out, gzip_events=args.gzip)
    for name, path in paths.items():
        print(f"{name}: {path}")


if __name__ == "__main__":
    main()
