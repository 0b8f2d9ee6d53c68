"""python -m streams.sim.blind --out DIR [shape flags]: events.jsonl (wire contract) and labels.json.

Then: crosstalk replay DIR/events.jsonl --alerts-out DIR/alerts.jsonl
      crosstalk evaluate --labels DIR/labels.json --alerts DIR/alerts.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import sys
from pathlib import Path

import orjson

from streams.sim.blind.traffic import Simulator
from streams.sim.blind.world import Shape, describe


def add_arguments(p: argparse.ArgumentParser) -> None:
    d = Shape()
    p.add_argument("--out", required=True, help="directory for events.jsonl[.gz], labels.json, world.json")
    p.add_argument("--tenants", type=int, default=d.tenants, help="8..60")
    p.add_argument("--rate", type=float, default=d.rate, help="requests per second, all tenants (0.5..8)")
    p.add_argument("--duration", type=float, default=d.duration_s, help="simulated seconds")
    p.add_argument("--domains", type=int, default=d.domains, help="cache domains (KV pools)")
    p.add_argument("--ja-tenants", type=int, default=d.ja_tenants, help="tenants who write Japanese")
    p.add_argument("--zh-tenants", type=int, default=None, help="tenants who write Chinese (default tenants/8)")
    p.add_argument("--de-tenants", type=int, default=None, help="tenants who write German (default tenants/8)")
    p.add_argument("--leak-start", type=float, default=d.leak_start, help="share of the run before faults begin")
    p.add_argument("--no-cache-stats", action="store_true", help="no cache_stats events (no metrics scraper)")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--gzip", action="store_true", help="write events.jsonl.gz")


def shape_of(a: argparse.Namespace) -> Shape:
    if not 1 <= a.tenants <= 500 or a.rate <= 0 or a.duration <= 0 or a.domains < 1:
        raise SystemExit("tenants 1..500, rate > 0, duration > 0, domains >= 1")
    return Shape(
        tenants=a.tenants,
        rate=a.rate,
        duration_s=a.duration,
        domains=a.domains,
        ja_tenants=a.ja_tenants,
        zh_tenants=a.zh_tenants,
        de_tenants=a.de_tenants,
        leak_start=a.leak_start,
        cache_stats=not a.no_cache_stats,
        seed=a.seed,
    )


def write(shape: Shape, out: Path, compress: bool = False) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    sim = Simulator(shape)
    events, labels = sim.run()
    path = out / ("events.jsonl.gz" if compress else "events.jsonl")
    opener = gzip.open if compress else open
    with opener(path, "wb") as fh:
        for e in events:
            fh.write(orjson.dumps({k: v for k, v in e.items() if v is not None}) + b"\n")
    (out / "labels.json").write_bytes(orjson.dumps(labels))
    (out / "world.json").write_bytes(orjson.dumps(describe(sim.world), option=orjson.OPT_INDENT_2))
    return {"events": path, "labels": out / "labels.json"}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m streams.sim.blind", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(p)
    a = p.parse_args(argv)
    paths = write(shape_of(a), Path(a.out), a.gzip)
    rows = orjson.loads(paths["labels"].read_bytes())["responses"]
    bad = sum(r["contaminated"] for r in rows)
    print(f"{len(rows)} responses, {bad} contaminated -> {paths['events']}, {paths['labels']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
