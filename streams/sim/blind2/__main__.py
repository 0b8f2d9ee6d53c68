"""python -m streams.sim.blind2 --out DIR --shape NAME --seed N [--gzip]"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import orjson

from streams.sim.blind2 import SHAPES, write


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m streams.sim.blind2", description=__doc__)
    p.add_argument("--out", required=True, type=Path, help="directory for events.jsonl, labels.json, world.json")
    p.add_argument("--shape", required=True, choices=sorted(SHAPES), help="named deployment shape")
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--gzip", action="store_true", help="write events.jsonl.gz (deterministic gzip header)")
    args = p.parse_args(argv)
    t = time.perf_counter()
    paths = write(args.shape, args.seed, args.out, args.gzip)
    labels = orjson.loads(paths["labels"].read_bytes())
    rows = labels["responses"]
    kinds: dict[str, int] = {}
    for r in rows:
        if r["contaminated"]:
            kinds[r["leak_kind"]] = kinds.get(r["leak_kind"], 0) + 1
    print(f"{args.shape} seed {args.seed}: {len(rows)} responses, {sum(kinds.values())} contaminated {kinds}")
    print(f"wrote {', '.join(str(v) for v in paths.values())} in {time.perf_counter() - t:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
