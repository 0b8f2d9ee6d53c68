"""Run every benchmark in turn (each in its own process, so one's memory cannot skew another's).

    python bench/run_all.py [--quick] [--only core,fingerprint,...]

bench_kafka needs the broker (scripts/kafka.sh up) and is skipped with a message when it is not there.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = ("textrich", "hotdomain", "core", "fingerprint", "replay", "memory", "scaling", "checkpoint", "kafka")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", help="comma-separated subset of: " + ",".join(ORDER))
    args, rest = p.parse_known_args(argv)
    names = args.only.split(",") if args.only else list(ORDER)
    failed = []
    for name in names:
        script = HERE / f"bench_{name}.py"
        if not script.exists():
            print(f"-- bench_{name}: not present, skipped", flush=True)
            continue
        cmd = [sys.executable, str(script), *(["--quick"] if args.quick else []), *rest]
        print(f"\n###### {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call(cmd)
        print(f"###### bench_{name}: exit {rc} after {time.perf_counter() - t0:.0f}s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
