"""Benchmark 3: embedded replay of a large simulated incident, end to end.

Figure: events/s and MB/s of `EmbeddedRunner(settings).run_files([path])` (read, decode, validate,
event-time merge, fingerprint, every detector, alerts), one core. Baseline: `orjson.loads` of the same
lines, read the same way, in the same run. Input: >= 1 GB of simulator events with text (a GLM-5.3-style
incident: the fault switches on half way), generated once into bench/data/ and reused; --quick ~50 MB.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c
import orjson

from streams.embedded.runner import EmbeddedRunner
from streams.settings import Settings
from streams.sim.simulate import SimConfig, write_simulation

NAME = "bench_replay"


def ensure_data(args, duration_s: float, rate: float, tenants: int) -> tuple[Path, dict]:
    out = args.data / f"replay-seed{args.seed}-{int(duration_s)}s-r{rate:g}-t{tenants}"
    events = out / "events.jsonl"
    meta = out / "summary.json"
    if events.exists() and meta.exists():
        return events, orjson.loads(meta.read_bytes())
    c.log(args, f"generating {duration_s:.0f}s at {rate:g} req/s, {tenants} tenants into {out} (once) ...")
    cfg = SimConfig(seed=args.seed, duration_s=duration_s, rate=rate, tenants=tenants, fault_at_s=duration_s / 2)
    summary = write_simulation(out, cfg, gzip_events=False, progress=not args.no_progress)
    meta.write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return events, summary


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    # ~36 KB of events per request at these settings: 1800 s x 18 req/s ~ 1.1 GB; 300 s x 4 req/s ~ 46 MB.
    duration, rate, tenants = c.pick(args, full=(1800.0, 18.0, 64), quick=(300.0, 4.0, 24), tiny=(60.0, 1.0, 8))
    path, summary = ensure_data(args, duration, rate, tenants)
    size = path.stat().st_size
    c.log(args, f"input {path} : {size / c.MB:,.0f} MB, {summary['events']:,} events")

    # Baseline: the same lines, read the same way (binary file iteration), decoded with orjson only.
    def baseline() -> int:
        n = 0
        loads = orjson.loads
        with path.open("rb") as fh:
            for line in fh:
                if line.strip():
                    loads(line)
                    n += 1
        return n

    baseline()  # page cache warm for both
    t_base, n_base = c.best_of(baseline, 1)

    prog = c.Progress("replay", size / c.MB, not args.no_progress, " MB")
    runner = EmbeddedRunner(Settings(), on_progress=lambda b: prog.update(b / c.MB))
    t0 = time.perf_counter()
    result = runner.run_files([str(path)])
    t_replay = time.perf_counter() - t0
    prog.done()
    n = result.events_total + sum(result.rejects.values())

    rate_ev, rate_mb = n / t_replay, size / t_replay / c.MB
    base_ev, base_mb = n_base / t_base, size / t_base / c.MB
    alerts_by_kind: dict[str, int] = {}
    for a in result.alerts:
        key = f"{a.kind}/{a.severity}"
        alerts_by_kind[key] = alerts_by_kind.get(key, 0) + 1
    rows = [
        {"what": "baseline: orjson.loads per line", "seconds": t_base, "events/s": base_ev, "MB/s": base_mb},
        {"what": "EmbeddedRunner.run_files", "seconds": t_replay, "events/s": rate_ev, "MB/s": rate_mb},
    ]
    tables = {
        "end to end, one core": c.table(rows) + f"\n\nreplay / orjson.loads = {rate_ev / base_ev:.2%}",
        "what the replay found": c.table(
            [{"alert": k, "count": v} for k, v in sorted(alerts_by_kind.items())]
            + [{"alert": "(simulator: contaminated responses)", "count": summary.get("contaminated")}]
        ),
    }
    file = c.write(
        NAME,
        args,
        params={
            "path": str(path.relative_to(c.ROOT)) if path.is_relative_to(c.ROOT) else str(path),
            "bytes": size,
            "events": n,
            "sim": {"seed": args.seed, "duration_s": duration, "rate": rate, "tenants": tenants},
            "sim_summary": summary,
        },
        figures={"replay_events_per_s": rate_ev, "replay_mb_s": rate_mb, "replay_seconds": t_replay},
        baseline={"orjson_events_per_s": base_ev, "orjson_mb_s": base_mb, "orjson_seconds": t_base},
        ratio={"replay_over_orjson": rate_ev / base_ev},
        tables=tables,
        extra={"alerts_by_kind": alerts_by_kind, "state_size": result.state_size, "rejects": dict(result.rejects)},
    )
    c.report("embedded replay", tables, None, file)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
