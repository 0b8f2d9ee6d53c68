"""Cluster faults (issue 42): workers on a 3-node KRaft cluster lose a broker, a worker and the whole cluster.

Start the cluster first: `scripts/kafka-cluster.sh up` (3 combined broker+controller nodes on 127.0.0.1:29092-29094,
min.insync.replicas 2). Topics are created with replication factor 3 (kafka.replication_factor), the input and
alerts topics with node 1 first in every replica list, so that node 1 leads all their partitions. crosstalk's own
producer (acks=all) publishes a simulator stream with a leak incident and steady "pulse" alerts
(bench/_cluster_input.py) at a fixed rate, and while it flows, for each topology (direct, the default, and staged):

a. kill -9 the node leading the input and alerts partitions; start it again `--down` seconds later;
b. start a second worker, and kill -9 the first while the group rebalances;
c. restart the whole cluster (every node SIGTERM, then up again).

Measured against the embedded runner's alert ids on the same file: ids lost, ids that arrived more than once (a
duplicate carries the same id: at-least-once), ids the embedded runner did not raise, and per fault the longest
time without a new pulse alert from one partition (a partition whose owner is gone stays silent while the others
go on; the longest time without any alert at all is kept too). Targets: 0 lost, 0 foreign, longest gap <= 60 s.
A worker that exits on its own is started again on its data dir (as a supervisor would) and reported.
`--worker-env CROSSTALK_KAFKA__SESSION_TIMEOUT_S=15 --name bench_cluster-session15`: the same with other settings.

Writes bench/results/bench_cluster.json, bench/results/bench_cluster.md and bench/results/bench_cluster.png.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c
import orjson
from _cluster_faults import LEADER, AlertReader, Producing, Workers
from _cluster_input import build

from tests.support.kafkacluster import Cluster, create_led_topics, leaders
from tests.support.kafkanames import KafkaNames

TOPOLOGIES = ("direct", "staged")


def gaps(arrivals: list[float], start: float, end: float) -> float:
    """Longest time without a new alert from `start` to `end` (the last arrival before start counts as the
    first edge; the window's end closes the last gap if nothing came)."""
    before = [t for t in arrivals if t <= start]
    inside = [t for t in arrivals if start < t <= end]
    edges = [before[-1] if before else start, *inside]
    if not inside:
        edges.append(end)
    return max((b - a for a, b in itertools.pairwise(edges)), default=0.0)


def kill_during_rebalance(workers: Workers, t0: float, timeout_s: float = 30.0) -> dict[str, Any]:
    """Start worker b; kill -9 worker a as soon as the rebalance reaches it (its assignment changes, or b gets
    partitions), within `timeout_s` of b's web server answering."""
    a = workers.live["a"]
    before = (a.counters() or {}).get("assigned")
    b = workers.start("b")
    deadline = time.monotonic() + 120
    while b.counters() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    t_up = time.monotonic()
    why = "timeout"
    while time.monotonic() - t_up < timeout_s:
        ca, cb = a.counters() or {}, b.counters() or {}
        if ca.get("assigned") != before:
            why = "a's assignment changed"
            break
        if cb.get("assigned"):
            why = "b was assigned partitions"
            break
        time.sleep(0.1)
    workers.kill("a")
    return {
        "killed": "a",
        "when": why,
        "b_web_up_s": round(t_up - t0, 1),
        "after_b_up_s": round(time.monotonic() - t_up, 1),
    }


def run(args: Any, topology: str, inp: dict[str, Any], workdir: Path) -> dict[str, Any]:
    cluster = Cluster()
    bootstrap = cluster.bootstrap
    names = KafkaNames.unique(bootstrap, f"cluster-{topology}", topology=topology, replication_factor=3)
    create_led_topics(names, LEADER)
    k = names.settings().kafka
    env = {"CROSSTALK_KAFKA__TOPOLOGY": topology, "CROSSTALK_KAFKA__REPLICATION_FACTOR": "3", **args.worker_env}
    workers = Workers(names, env, workdir / topology, args.loglevel)
    faults: list[dict[str, Any]] = []
    reader = AlertReader(bootstrap, k.alerts_topic)
    try:
        workers.start("a")
        if not workers.wait_ready("a", 180):
            raise RuntimeError(f"worker not ready:\n{workers.live['a'].log_tail()}")
        reader.start()
        producing = Producing(inp["path"], k, args.rate)
        t0 = time.monotonic()
        producing.start()
        stream_s = inp["events"] / args.rate
        at = {"a": 0.17 * stream_s, "b": 0.42 * stream_s, "c": 0.70 * stream_s}

        def until(t: float) -> None:
            while time.monotonic() - t0 < t:
                workers.supervise(t0)
                time.sleep(0.5)

        until(at["a"])
        led = leaders(bootstrap, [k.input_topic, k.alerts_topic])
        f: dict[str, Any] = {"fault": "a: kill -9 the leader of the input and alerts partitions", "node": LEADER,
                             "led_before": led, "start_s": time.monotonic() - t0}  # fmt: skip
        cluster.kill(LEADER)
        until(f["start_s"] + args.down)
        f["leaders_while_down"] = leaders(bootstrap, [k.input_topic, k.alerts_topic])
        cluster.start(LEADER)
        f["back_s"] = time.monotonic() - t0
        faults.append(f)
        until(at["b"])
        f = {"fault": "b: kill -9 one of two workers during a rebalance", "start_s": time.monotonic() - t0}
        f.update(kill_during_rebalance(workers, t0))
        faults.append(f)
        until(at["c"])
        f = {"fault": "c: restart the whole cluster", "start_s": time.monotonic() - t0}
        cluster.down()
        f["all_down_s"] = time.monotonic() - t0
        cluster.up()
        f["back_s"] = time.monotonic() - t0
        faults.append(f)
        producing.join(timeout=args.drain)
        t_produced = time.monotonic() - t0
        deadline = time.monotonic() + args.drain
        while time.monotonic() < deadline and not set(inp["alerts"]) <= set(reader.arrivals):
            workers.supervise(t0)
            time.sleep(0.5)
        time.sleep(5.0)  # duplicates still in flight show up now
        t_end = time.monotonic() - t0
        counters = {label: (w.counters() or {}).get("counters", {}) for label, w in workers.live.items()}
    finally:
        reader.stop.set()
        reader.join(timeout=10)
        workers.stop_all()
        names.delete()
    if producing.error is not None:
        raise producing.error
    arrivals = {i: [t - t0 for t in ts] for i, ts in reader.arrivals.items()}
    first = sorted(ts[0] for ts in arrivals.values())
    expected = set(inp["alerts"])
    seen = set(arrivals)
    # Per pulse domain (one per input partition and per domain partition): a partition whose owner is gone shows
    # here even while the other partitions' alerts go on.
    by_domain: dict[str, list[float]] = {}
    for aid, d in reader.pulse_domain.items():
        by_domain.setdefault(d, []).append(arrivals[aid][0])
    for ts in by_domain.values():
        ts.sort()
    for i, f in enumerate(faults):
        end = faults[i + 1]["start_s"] if i + 1 < len(faults) else t_end
        f["longest_gap_any_alert_s"] = round(gaps(first, f["start_s"], end), 1)
        per = {d: gaps(ts, f["start_s"], end) for d, ts in by_domain.items()}
        worst = max(per, key=per.__getitem__)
        f["longest_gap_s"] = round(per[worst], 1)
        f["longest_gap_domain"] = worst
        f["start_s"] = round(f["start_s"], 1)
    lost = sorted(expected - seen)
    return {
        "topology": topology,
        "expected": len(expected),
        "arrived": len(seen & expected),
        "lost": len(lost),
        "lost_ids": lost[:50],
        "lost_kinds": _kinds(lost, inp["alerts"]),
        "foreign": len(seen - expected),
        "foreign_alerts": [reader.shown[i] for i in sorted(seen - expected)][:20],
        "duplicated_ids": sum(1 for ts in arrivals.values() if len(ts) > 1),
        "duplicate_records": sum(len(ts) - 1 for ts in arrivals.values()),
        "records": reader.records,
        "baseline_longest_gap_s": round(
            max(gaps(ts, 10.0, faults[0]["start_s"]) for ts in by_domain.values()) if by_domain else 0.0, 1
        ),
        "faults": faults,
        "producer_failed_sends": dict(producing.failed_kinds),
        "producer_resent": producing.refused,
        "produced_s": round(t_produced, 1),
        "end_s": round(t_end, 1),
        "workers_exited_on_their_own": workers.exited,
        "counters": {
            w: {
                n: v
                for n, v in cs.items()
                if n.startswith(
                    ("rewinds", "stalls", "cleared", "restore", "deadletter", "direct.", "orphans", "domain.late")
                )
            }
            for w, cs in counters.items()
        },
        "first_arrivals_s": [round(t, 2) for t in first],
    }


def _kinds(ids: list[str], alerts: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in ids:
        out[alerts[i]] = out.get(alerts[i], 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    p = c.parser(__doc__.splitlines()[0])
    p.add_argument("--topology", choices=["both", *TOPOLOGIES], default="both")
    p.add_argument("--rate", type=float, default=55.0, help="events per second of the stream")
    p.add_argument("--down", type=float, default=20.0, help="seconds the killed leader stays down")
    p.add_argument("--drain", type=float, default=300.0, help="seconds to wait for the last alerts")
    p.add_argument("--name", default="bench_cluster", help="result files' name (e.g. a run with other settings)")
    p.add_argument("--keep", action="store_true", help="keep the work dir (worker logs, raw results)")
    p.add_argument("--loglevel", default="warning", help="the workers' log level")
    p.add_argument("--worker-env", action="append", default=[], help="KEY=VALUE for the workers")
    args = p.parse_args(argv)
    args.worker_env = dict(kv.split("=", 1) for kv in args.worker_env)
    os.environ.setdefault("CROSSTALK_DETECTION__FINGERPRINT_KEY", "crosstalk-cluster-bench-key")
    duration = c.pick(args, full=600.0, quick=300.0, tiny=120.0)
    workdir = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    inp = build(workdir, duration, 4.0, pulse_s=2.0, seed=args.seed)
    c.log(args, f"stream: {inp['events']:,} events, {len(inp['alerts']):,} embedded alerts ({inp['pulses']:,} pulses)")
    results = []
    try:
        for topology in TOPOLOGIES if args.topology == "both" else (args.topology,):
            r = run(args, topology, inp, workdir)
            c.log(args, f"{topology}: lost {r['lost']}, duplicated {r['duplicated_ids']}, gaps "
                        f"{[f['longest_gap_s'] for f in r['faults']]}")  # fmt: skip
            results.append(r)
            # Kept as measured, whatever the report below makes of it.
            (workdir / f"{topology}.json").write_bytes(orjson.dumps(r, option=orjson.OPT_NON_STR_KEYS))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    write(args, inp, results)
    return 0


def write(args: Any, inp: dict[str, Any], results: list[dict[str, Any]]) -> None:
    rows = [
        {"topology": r["topology"], "fault": f["fault"][:1], "lost": r["lost"] if i == 0 else None,
         "dup ids": r["duplicated_ids"] if i == 0 else None, "longest gap s": f["longest_gap_s"],
         "any alert gap s": f["longest_gap_any_alert_s"]}
        for r in results for i, f in enumerate(r["faults"])
    ]  # fmt: skip
    tables = {"faults": c.table(rows)}
    targets = {}
    for r in results:
        t = r["topology"]
        targets[f"{t}_lost"] = c.target(r["lost"], 0, at_least=False)
        targets[f"{t}_foreign"] = c.target(r["foreign"], 0, at_least=False)
        targets[f"{t}_longest_gap_s"] = c.target(max(f["longest_gap_s"] for f in r["faults"]), 60, at_least=False)
    params = {"events": inp["events"], "embedded_alerts": len(inp["alerts"]), "pulses": inp["pulses"],
              "rate_events_per_s": args.rate, "leader_down_s": args.down, "worker_env": args.worker_env,
              "load_average": os.getloadavg()}  # fmt: skip
    figures = {f"{r['topology']}_{k}": r[k] for r in results for k in ("lost", "duplicated_ids", "foreign")}
    figures.update({f"{r['topology']}_gap_{f['fault'][0]}_s": f["longest_gap_s"] for r in results for f in r["faults"]})
    base = {f"{r['topology']}_longest_gap_without_fault_s": r["baseline_longest_gap_s"] for r in results}
    path = c.write(args.name, args, params=params, figures=figures, baseline=base, ratio={},
                   targets=targets, tables=tables, extra={"runs": results})  # fmt: skip
    md = [f"# Cluster faults ({time.strftime('%Y-%m-%d', time.gmtime())}, bench/bench_cluster.py)", "",
          f"{inp['events']:,} events at {args.rate:g}/s, {len(inp['alerts']):,} alert ids from the embedded runner; "
          "3-node KRaft cluster, RF 3, min.insync.replicas 2, acks=all.",
          "", "```", tables["faults"], "```", ""]  # fmt: skip
    for r in results:
        md.append(f"- {r['topology']}: {r['arrived']}/{r['expected']} ids arrived, lost {r['lost']} "
                  f"{r['lost_kinds'] or ''}, {r['duplicated_ids']} ids twice or more, {r['foreign']} foreign; "
                  f"longest gap without a fault {r['baseline_longest_gap_s']} s; producer sends refused "
                  f"{r['producer_failed_sends'] or 0}; workers that exited on their own: "
                  f"{len(r['workers_exited_on_their_own'])}.")  # fmt: skip
    (args.out / f"{args.name}.md").write_text("\n".join(md) + "\n")
    plot(results, args.out / f"{args.name}.png")
    c.report("cluster faults", tables, targets, path)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(8, 2.6 * len(results)), squeeze=False)
    for ax, r in zip(axes[:, 0], results, strict=True):
        t = r["first_arrivals_s"]
        ax.plot(t, range(1, len(t) + 1), color="tab:blue", label="alert ids arrived")
        for f in r["faults"]:
            ax.axvline(f["start_s"], color="tab:red", linestyle="--")
            ax.text(f["start_s"], 0, f" {f['fault'][0]}", color="tab:red", va="bottom")
        ax.set_title(f"{r['topology']}: lost {r['lost']}, dup ids {r['duplicated_ids']}")
        ax.set_ylabel("alert ids")
    axes[-1, 0].set_xlabel("seconds since the stream started")
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    raise SystemExit(main())
