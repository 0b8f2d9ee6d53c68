"""`python -m streams.sim.blind3 --out DIR --shape NAME --seed N [--gzip]`."""

from __future__ import annotations

import argparse

from streams.sim.blind3 import SHAPES, write


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m streams.sim.blind3", description=__doc__)
    p.add_argument("--out", required=True, help="directory for events.jsonl, labels.json, world.json")
    p.add_argument("--shape", required=True, choices=sorted(SHAPES))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--gzip", action="store_true", help="write events.jsonl.gz")
    args = p.parse_args(argv)
    paths = write(args.shape, args.seed, args.out, gzip_events=args.gzip)
    for name, path in paths.items():
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
