"""Soak (issue 42): one worker at a fixed input rate for a long time, its resident memory sampled.

The input is the simulator's traffic with its text (a leak incident included), repeated with shifted event
time and suffixed ids so that it never ends, published by crosstalk's own producer path
(`streams.producer.produce_file`, paced at `--rate` events/s). Every `--every` seconds the worker's RSS
(/proc/<pid>/status), its /counters (events, alerts, state size, consumer lag) are sampled. Target: memory
flat, i.e. the last third's median RSS within 10 % of the second third's (the first third is warm-up: the
content index and filters fill up to their bounds).

Writes bench/results/soak_worker.json and the figure docs/img/soak-rss.png.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c
import orjson

from streams.producer import produce_file
from tests.support.kafkanames import KafkaNames
from tests.support.workerproc import WorkerProcess

FIGURE = c.ROOT / "docs" / "img" / "soak-rss.png"


def rss_of(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cpu_of(pid: int) -> float | None:
    """CPU seconds (user + system) the process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def copies(base: list[dict[str, Any]], directory: Path, span: float) -> Any:
    """Files of the base traffic, the n-th shifted by n * span seconds, ids suffixed ~n: never-ending input."""
    n = 0
    while True:
        path = directory / f"copy-{n % 2}.jsonl"
        out = []
        for ev in base:
            if n:
                ev = dict(ev)
                ev["ts"] = ev["ts"] + n * span
                ev["event_id"] = f"{ev['event_id']}~{n}"
                for f in ("request_id", "session_id"):
                    if ev.get(f):
                        ev[f] = f"{ev[f]}~{n}"
            out.append(orjson.dumps(ev))
        path.write_bytes(b"\n".join(out) + b"\n")
        yield path
        n += 1


def produce_forever(
    names: KafkaNames, base: list[dict[str, Any]], span: float, rate: float, stop: threading.Event, tmp: Path
) -> None:
    k = names.settings(kafka={"topology": "direct"}).kafka
    for path in copies(base, tmp, span):
        if stop.is_set():
            return
        # One copy at a time at the fixed rate; the soak's length bounds how many.
        produce_file(str(path), k, rate=rate)


def plot(samples: list[dict[str, Any]], rate: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = [s["t_s"] / 60 for s in samples]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    ax.plot(t, [s["rss_bytes"] / c.MB for s in samples], label="worker RSS (MB)", color="tab:blue")
    ax.set_xlabel("minutes")
    ax.set_ylabel("RSS (MB)")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.plot(t, [s["events"] / 1000 for s in samples], color="tab:gray", linestyle="--", label="events read (k)")
    ax2.set_ylabel("events read (thousands)")
    ax.set_title(f"one direct worker at {rate:g} events/s (text-rich simulator traffic)")
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    ax.legend(lines, [str(x.get_label()) for x in lines], loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--bootstrap", default=os.environ.get("CROSSTALK_KAFKA__BOOTSTRAP", "127.0.0.1:19092"))
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--rate", type=float, default=60.0, help="events per second")
    p.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    p.add_argument("--figure", type=Path, default=FIGURE)
    p.add_argument("--store", default=None, help="kafka.store of the worker (default: the settings', rocksdb)")
    p.add_argument("--name", default="soak_worker", help="the result file's name")
    args = p.parse_args(argv)
    os.environ.setdefault("CROSSTALK_DETECTION__FINGERPRINT_KEY", "crosstalk-soak-key")
    from streams.sim.simulate import SimConfig, iter_simulation

    base = list(iter_simulation(SimConfig(seed=args.seed, duration_s=1200.0, rate=4.0))[0])
    span = float(base[-1]["ts"]) - float(base[0]["ts"]) + 60.0
    tmp = Path(tempfile.mkdtemp(prefix="soak-"))
    samples: list[dict[str, Any]] = []
    store = {"CROSSTALK_KAFKA__STORE": args.store} if args.store else {}
    stop = threading.Event()
    with KafkaNames.unique(args.bootstrap, "soak", topology="direct") as names:
        w = WorkerProcess(
            {**names.env(), "CROSSTALK_KAFKA__TOPOLOGY": "direct", **store},
            tmp / "data",
            tmp / "worker.log",
            "warning",
        )
        try:
            while not w.ready():
                if not w.alive():
                    raise RuntimeError(w.log_tail())
                time.sleep(0.5)
            prod = threading.Thread(target=produce_forever, args=(names, base, span, args.rate, stop, tmp), daemon=True)
            t0 = time.monotonic()
            prod.start()
            while time.monotonic() - t0 < args.minutes * 60:
                time.sleep(args.every)
                cs = w.counters() or {}
                counters = cs.get("counters", {})
                rss = rss_of(w.proc.pid)
                if rss is None or not w.alive():
                    raise RuntimeError(f"worker gone:\n{w.log_tail()}")
                s = {
                    "t_s": round(time.monotonic() - t0, 1),
                    "rss_bytes": rss,
                    "cpu_s": cpu_of(w.proc.pid),
                    "events": sum(v for k, v in counters.items() if k.startswith("events.")),
                    "alerts": counters.get("alerts", 0),
                    "state_size": cs.get("state_size"),
                    "lag": sum((cs.get("consumer_lag") or {}).values())
                    if isinstance(cs.get("consumer_lag"), dict)
                    else None,
                }
                samples.append(s)
                c.log(args, f"{s['t_s']:7.0f}s rss {rss / c.MB:7.1f} MB events {s['events']:,} lag {s['lag']}")
        finally:
            stop.set()
            w.stop()
    n = len(samples)
    thirds = [samples[i * n // 3 : (i + 1) * n // 3] for i in range(3)]
    med = [statistics.median(x["rss_bytes"] for x in part) if part else 0 for part in thirds]
    growth = (med[2] - med[1]) / med[1] if med[1] else 0.0
    plot(samples, args.rate, args.figure)
    duration = samples[-1]["t_s"] if samples else 0.0
    figure_name = str(args.figure.relative_to(c.ROOT) if args.figure.is_relative_to(c.ROOT) else args.figure)
    path = c.write(
        args.name,
        args,
        params={"rate_events_per_s": args.rate, "minutes_asked": args.minutes, "seconds_run": duration,
                "bootstrap": args.bootstrap, "sample_every_s": args.every, "store": args.store or "settings"},
        figures={"rss_median_thirds_mb": [round(m / c.MB, 1) for m in med],
                 "rss_max_mb": round(max(s["rss_bytes"] for s in samples) / c.MB, 1),
                 "rss_growth_last_vs_middle_third": round(growth, 4),
                 "events_read": samples[-1]["events"] if samples else 0,
                 "worker_cpu_ms_per_event": round(1000 * (samples[-1]["cpu_s"] or 0) / max(1, samples[-1]["events"]), 3)
                 if samples else None},
        baseline={"rss_first_sample_mb": round(samples[0]["rss_bytes"] / c.MB, 1) if samples else None},
        ratio={"last_third_over_middle_third": round(1 + growth, 4)},
        targets={"memory_flat": c.target(abs(growth), 0.10, at_least=False)},
        extra={"samples": samples, "figure": figure_name},
    )  # fmt: skip
    c.report(
        "soak: one worker's memory at a fixed rate",
        {},
        {"memory_flat": c.target(abs(growth), 0.10, at_least=False)},
        path,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
