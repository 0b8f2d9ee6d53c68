"""Every alert of the evaluation seeds, whole, to tell whether a change to the core left the alerts unchanged.

Runs the embedded core over the simulator's traffic exactly as scripts/evaluate_seeds.py does (same profiles, seeds,
duration, pinned key, the `+corpus` variant with the profile's public documents) and writes every alert (all fields,
the evidence's figures included) per run, with a digest per run. `--compare OLD.json` says which runs differ and how.
The simulated events are cached under bench/data/ (the simulation costs as much as the detection).

    .venv/bin/python scripts/alert_record.py --out /tmp/new.json [--compare /tmp/old.json] [--seeds 7 1 2]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from schemas.events import EventError, parse_event  # noqa: E402
from streams.embedded.runner import EmbeddedRunner  # noqa: E402
from streams.settings import load_settings  # noqa: E402
from streams.sim.simulate import SimConfig, iter_simulation  # noqa: E402

VARIANTS = ("multilingual", "multilingual+corpus", "stdlib-code")
SEEDS = (7, 1, 2, 3, 4, 5, 11)
KEY = "crosstalk-evaluation-seeds"  # scripts/evaluate_seeds.py's pinned test key (not a secret)


def events_of(config: SimConfig, cache: Path) -> list[bytes]:
    path = cache / f"{config.profile}-seed{config.seed}-{int(config.duration_s)}s.jsonl"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        events, _ = iter_simulation(config)
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as fh:
            for ev in events:
                fh.write(orjson.dumps(ev) + b"\n")
        tmp.rename(path)
    return path.read_bytes().splitlines()


def one(variant: str, seed: int, duration_s: float, cache: Path) -> dict[str, Any]:
    # Imported here: evaluate_seeds sets the key in the environment before reading settings.
    from scripts.evaluate_seeds import with_corpus

    profile = variant.removesuffix("+corpus")
    config = SimConfig(profile=profile, seed=seed, duration_s=duration_s, tenants=24, rate=4.0)
    settings = load_settings()
    lines = events_of(config, cache)
    with tempfile.TemporaryDirectory() as tmp:
        if variant.endswith("+corpus"):
            settings = with_corpus(settings, config, Path(tmp))
        runner = EmbeddedRunner(settings)
    t0 = time.process_time()
    for raw in lines:
        try:
            runner.feed(parse_event(raw), "sim", None, raw)
        except EventError as exc:
            runner.reject("sim", None, exc.reason, exc.detail, raw)
    result = runner.finish(time.perf_counter())
    cpu = time.process_time() - t0
    alerts = [a.model_dump(mode="json") for a in result.alerts]
    digest = hashlib.sha256(orjson.dumps(alerts, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
    return {"variant": variant, "seed": seed, "alerts": alerts, "digest": digest, "cpu_s": round(cpu, 2)}


def compare(old: dict[str, Any], new: dict[str, Any]) -> int:
    differ = 0
    for key, run in new.items():
        ref = old.get(key)
        if ref is None:
            print(f"{key}: not in the reference")
            continue
        if ref["digest"] == run["digest"]:
            print(f"{key}: identical ({len(run['alerts'])} alerts)")
            continue
        differ += 1
        a = {x["alert_id"]: x for x in ref["alerts"]}
        b = {x["alert_id"]: x for x in run["alerts"]}
        changed = [i for i in a.keys() & b.keys() if a[i] != b[i]]
        print(
            f"{key}: DIFFERENT: {len(a.keys() - b.keys())} gone, {len(b.keys() - a.keys())} new, {len(changed)} changed"
        )
        for i in changed[:3]:
            for f in a[i]:
                if a[i][f] != b[i].get(f):
                    print(f"  {i} {f}: {str(a[i][f])[:300]} -> {str(b[i].get(f))[:300]}")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compare", type=Path)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    ap.add_argument("--duration", type=float, default=1200.0)
    ap.add_argument("--cache", type=Path, default=ROOT / "bench" / "data" / "alert-record")
    args = ap.parse_args(argv)
    os.environ["CROSSTALK_DETECTION__FINGERPRINT_KEY"] = KEY
    runs: dict[str, Any] = {}
    for variant in args.variants:
        for seed in args.seeds:
            with contextlib.redirect_stderr(io.StringIO()):
                run = one(variant, seed, args.duration, args.cache)
            runs[f"{variant}/{seed}"] = run
            print(
                f"{variant}/{seed}: {len(run['alerts'])} alerts, digest {run['digest']}, {run['cpu_s']} s CPU",
                flush=True,
            )
    args.out.write_bytes(orjson.dumps(runs))
    if args.compare is not None:
        return compare(orjson.loads(args.compare.read_bytes()), runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
