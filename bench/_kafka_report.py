"""The Kafka benchmark's report: the tables, the targets, the figure and the result file.

Every ratio is between figures of the same run (bench/_common.py writes `bench/results/bench_kafka.json`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _common as c
from _kafka_input import PER_MESSAGE

from streams.settings import Settings

NAME = "bench_kafka"
TARGET_RATIO = 0.5
TARGET_P99_MS = 250.0


@dataclass
class Measured:
    """What one run measured, as the runs return it (bench/_kafka_throughput.py, bench/_kafka_latency.py)."""

    events: int
    messages: int
    nbytes: int
    publish_s: float
    base: dict[str, Any]  # raw consumer, one event per message
    base_b: dict[str, Any]  # raw consumer, PER_MESSAGE events per message
    ceiling: dict[str, float]  # in process: parse alone, core alone, the worker's stages without Faust
    r1: dict[str, Any]  # one worker
    rb: dict[str, Any]  # one worker, PER_MESSAGE events per message
    r2: dict[str, Any]  # two workers, ready before the input is published
    lat: dict[str, dict[str, Any]]  # settings label -> latency run
    half: float  # the latency runs' rate: half of one worker's end-to-end rate
    r1_ready: dict[str, Any] | None = None  # one worker timed as r2 is (the scaling's denominator)
    d1: dict[str, Any] | None = None  # one worker, direct topology, one event per message
    db: dict[str, Any] | None = None  # one worker, direct topology, PER_MESSAGE events per message
    d1s: dict[str, Any] | None = None  # direct, one worker, the traffic over 4x the cache domains
    d2s: dict[str, Any] | None = None  # direct, two workers, the same
    textrich: dict[str, Any] | None = None  # text-rich runs and sustained-rate latency (bench/_kafka_textrich.py)

    @property
    def direct_scaling(self) -> float | None:
        if not (self.d1s and self.d2s):
            return None
        return float(self.d2s["end_to_end_events_per_s"] / self.d1s["end_to_end_events_per_s"])

    @property
    def ratio(self) -> float:
        return float(self.r1["end_to_end_events_per_s"] / self.base["events_per_s"])

    @property
    def ratio_b(self) -> float:
        return float(self.rb["end_to_end_events_per_s"] / self.base_b["events_per_s"])

    @property
    def ratio_ingest(self) -> float:
        return float(self.r1["ingest_events_per_s"] / self.base["events_per_s"])

    @property
    def one(self) -> dict[str, Any]:
        """The one-worker run that two workers are compared with: the one timed the same way."""
        return self.r1_ready if self.r1_ready is not None else self.r1

    @property
    def scaling(self) -> float:
        return float(self.r2["end_to_end_events_per_s"] / self.one["end_to_end_events_per_s"])

    def of_core(self, r: dict[str, Any]) -> float:
        return float(r["end_to_end_events_per_s"] / self.ceiling["core_events_per_s"])


def throughput_rows(m: Measured) -> list[dict[str, Any]]:
    base, base_b, ceiling, r1, rb = m.base, m.base_b, m.ceiling, m.r1, m.rb
    ratio, ratio_b, ratio_ingest = m.ratio, m.ratio_b, m.ratio_ingest
    return [
        {"run": "baseline: raw AIOKafkaConsumer + orjson.loads", "events/s": base["events_per_s"], "vs baseline": 1.0},
        {"run": "ceiling: parse_event alone, in process", "events/s": ceiling["parse_events_per_s"],
         "vs baseline": ceiling["parse_events_per_s"] / base["events_per_s"]},
        {"run": "ceiling: detection core alone, in process", "events/s": ceiling["core_events_per_s"],
         "vs baseline": ceiling["core_events_per_s"] / base["events_per_s"]},
        {"run": "ceiling: worker stages in process, no Faust", "events/s": ceiling["stages_events_per_s"],
         "vs baseline": ceiling["stages_events_per_s"] / base["events_per_s"]},
        {"run": "1 worker: ingest stage", "events/s": r1["ingest_events_per_s"], "vs baseline": ratio_ingest},
        {"run": "1 worker: join stage", "events/s": r1["join_events_per_s"],
         "vs baseline": r1["join_events_per_s"] / base["events_per_s"]},
        {"run": "1 worker: end to end (domain stage)", "events/s": r1["end_to_end_events_per_s"], "vs baseline": ratio},
        {"run": f"baseline, {PER_MESSAGE} events per message: raw consumer + orjson.loads per line",
         "events/s": base_b["events_per_s"], "vs baseline": 1.0},
        {"run": f"1 worker, {PER_MESSAGE} events per message: ingest stage", "events/s": rb["ingest_events_per_s"],
         "vs baseline": rb["ingest_events_per_s"] / base_b["events_per_s"]},
        {"run": f"1 worker, {PER_MESSAGE} events per message: end to end", "events/s": rb["end_to_end_events_per_s"],
         "vs baseline": ratio_b},
        *([{"run": "1 worker, direct topology: end to end", "events/s": m.d1["end_to_end_events_per_s"],
            "vs baseline": m.d1["end_to_end_events_per_s"] / base["events_per_s"]}] if m.d1 else []),
        *([{"run": f"1 worker, direct topology, {PER_MESSAGE} events per message: end to end",
            "events/s": m.db["end_to_end_events_per_s"],
            "vs baseline": m.db["end_to_end_events_per_s"] / base_b["events_per_s"]}] if m.db else []),
    ]  # fmt: skip


def latency_rows(m: Measured, defaults: Settings) -> list[dict[str, Any]]:
    lat_rows = []
    for label, res in m.lat.items():
        if "rate_search" in res:  # a sustained-rate run: in the text-rich table (bench/_kafka_textrich.py)
            continue
        ing = defaults.kafka.watermark_lateness_s
        step = defaults.kafka.watermark_step_s
        lat_rows.append(
            {
                "settings": label,
                "watermark_lateness_s": float(res["env"].get("CROSSTALK_KAFKA__WATERMARK_LATENESS_S", ing)),
                "watermark_step_s": float(res["env"].get("CROSSTALK_KAFKA__WATERMARK_STEP_S", step)),
                "rate ev/s": res["achieved_rate"],
                "alerts": res["alerts_timed"],
                "missing": res["missing"],
                "p50 ms": res["p50_ms"],
                "p90 ms": res["p90_ms"],
                "p99 ms": res["p99_ms"],
                "max ms": res["max_ms"],
            }
        )
    return lat_rows


def scale_rows(m: Measured) -> list[dict[str, Any]]:
    r1, r2 = m.one, m.r2
    return [
        {
            "workers": r["workers"],
            "end-to-end ev/s": r["end_to_end_events_per_s"],
            "ingest ev/s": r["ingest_events_per_s"],
            "ingest 10-90% ev/s": r["ingest_steady_10_90_events_per_s"],
            "join 10-90% ev/s": r["join_steady_10_90_events_per_s"],
            "seconds": r["end_to_end_seconds"],
            "scaling": r["end_to_end_events_per_s"] / r1["end_to_end_events_per_s"],
        }
        for r in (r1, r2)
    ]


def cpu_rows(m: Measured) -> list[dict[str, Any]]:
    """Where the machine's CPU went during the scaling runs: the workers' own processes, and the rest (the
    broker, the harness publishing and polling). Two workers can be at most (their cores with two) / (with
    one) times as fast as one, whatever their code."""
    out = []
    for label, run in (
        ("staged, 1 worker", m.one),
        ("staged, 2 workers", m.r2),
        ("direct, 1 worker", m.d1s),
        ("direct, 2 workers", m.d2s),
    ):
        cpu = (run or {}).get("cpu") or {}
        if cpu.get("wall_s"):
            wall = cpu["wall_s"]
            out.append(
                {
                    "run": label,
                    "seconds": wall,
                    "workers' cores": cpu["workers_cpu_s"] / wall,
                    "broker + harness cores": (cpu["machine_busy_cpu_s"] - cpu["workers_cpu_s"]) / wall,
                    "idle cores": (os.cpu_count() or 1) - cpu["machine_busy_cpu_s"] / wall,
                }
            )
    return out


def busiest_share(run: dict[str, Any]) -> float:
    """The largest share of the events any one worker read (one domain is one partition)."""
    counts = run.get("per_worker_ingest") or [1]
    return max(counts) / max(1, sum(counts))


def tables_of(m: Measured, rows: list[dict[str, Any]], defaults: Settings) -> dict[str, str]:
    ratio, ratio_b, ceiling, of_core, scaling = m.ratio, m.ratio_b, m.ceiling, m.of_core, m.scaling
    r1, rb = m.r1, m.rb
    from _kafka_textrich import textrich_tables

    return {
        **(textrich_tables(m.textrich) if m.textrich else {}),
        "throughput (pre-filled topic, first to last message)": c.table(rows)
        + f"\n\nend to end / raw consumer = {ratio:.1%} (one event per message), {ratio_b:.1%} ({PER_MESSAGE} per "
        f"message); end to end / detection core alone = {of_core(r1):.1%}, {of_core(rb):.1%}; stages in one "
        f"process / core = {ceiling['stages_events_per_s'] / ceiling['core_events_per_s']:.1%}"
        + (
            f"; direct topology end to end / core = {of_core(m.d1):.1%} (one event per message), "
            f"{of_core(m.db):.1%} ({PER_MESSAGE} per message)"
            if m.d1 and m.db
            else ""
        ),
        "latency event -> alert at half the end-to-end rate (staged topology)": c.table(latency_rows(m, defaults)),
        "where the CPU went during the scaling runs (from /proc)": c.table(cpu_rows(m)),
        "one vs two workers (same app id; each joined and ready before the input is published)": c.table(scale_rows(m))
        + f"\n\nscaling 2 vs 1 = {scaling:.2f}x ({os.cpu_count()} cores shared with the broker and this"
        " process: below 2x is expected)"
        + (
            f"; direct topology, the traffic over 48 cache domains and 12 input partitions: 1 worker "
            f"{m.d1s['end_to_end_events_per_s']:,.0f} ev/s, 2 workers {m.d2s['end_to_end_events_per_s']:,.0f} ev/s "
            f"= {m.direct_scaling:.2f}x (the busier worker read {busiest_share(m.d2s):.0%} of the events: "
            f"at most {1 / busiest_share(m.d2s):.2f}x with these partitions' domains)"
            if m.d1s and m.d2s
            else ""
        ),
    }


def targets_of(m: Measured) -> dict[str, Any]:
    of_core, r1, rb, ratio, ratio_b = m.of_core, m.r1, m.rb, m.ratio, m.ratio_b
    low = m.lat["low-latency"]
    dflt = m.lat.get("defaults", {}).get("p99_ms")
    direct_p99 = m.lat.get("direct", {}).get("p99_ms")
    direct = (
        {
            f"direct topology: worker end to end >= 50% of the core alone, {PER_MESSAGE} events per message": c.target(
                of_core(m.db), 0.5
            ),
            "direct topology: worker end to end >= 25% of the core alone, one event per message": c.target(
                of_core(m.d1), 0.25
            ),
            "direct topology: p99 event->alert <= 250 ms at a sustained rate, default settings": c.target(
                direct_p99 if direct_p99 is not None else float("inf"), TARGET_P99_MS, at_least=False, unit=" ms"
            ),
            **(
                {
                    "direct topology: two workers >= 1.8x one (48 domains, 12 partitions)": c.target(
                        m.direct_scaling, 1.8
                    )
                }
                if m.direct_scaling is not None
                else {}
            ),
        }
        if m.d1 and m.db
        else {}
    )
    from _kafka_textrich import textrich_targets

    return {
        **(textrich_targets(m.textrich) if m.textrich else {}),
        **direct,
        # Issue 16: against the in-process core on the same events (same run).
        f"worker end to end >= 50% of the core alone, {PER_MESSAGE} events per message": c.target(of_core(rb), 0.5),
        "worker end to end >= 25% of the core alone, one event per message": c.target(of_core(r1), 0.25),
        "p99 event->alert <= 250 ms at half rate, default settings": c.target(
            dflt if dflt is not None else float("inf"), TARGET_P99_MS, at_least=False, unit=" ms"
        ),
        "worker end to end >= 50% of raw consumer": c.target(ratio, TARGET_RATIO),
        f"worker end to end >= 50% of raw consumer, {PER_MESSAGE} events per message": c.target(ratio_b, TARGET_RATIO),
        "p99 event->alert <= 250 ms at half rate (low-latency settings)": c.target(
            low["p99_ms"] if low["p99_ms"] is not None else float("inf"), TARGET_P99_MS, at_least=False, unit=" ms"
        ),
    }


def plot(path: Path, rows: list[dict[str, Any]], lat: dict[str, dict[str, Any]]) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.barh([r["run"] for r in rows][::-1], [r["events/s"] for r in rows][::-1], color="#4477aa")
    ax1.set_xlabel("events/s")
    ax1.set_title("throughput (pre-filled topic)")
    for label, res in lat.items():
        ms = res["latencies_ms"]
        if ms:
            ax2.plot(ms, [(i + 1) / len(ms) for i in range(len(ms))], label=f"{label} (p99 {res['p99_ms']:.0f} ms)")
    ax2.axvline(TARGET_P99_MS, color="grey", ls="--", lw=1)
    ax2.set_xscale("log")
    ax2.set_xlabel("event → alert latency (ms)")
    ax2.set_ylabel("CDF")
    ax2.set_title("event → alert latency")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(args: Any, m: Measured, defaults: Settings) -> None:
    """The result file, the figure beside it, and the report on stdout."""
    partitions = defaults.kafka.internal_partitions
    base, base_b, ceiling, r1, rb, r2, lat = m.base, m.base_b, m.ceiling, m.r1, m.rb, m.r2, m.lat
    ratio, ratio_b, ratio_ingest, scaling, of_core = m.ratio, m.ratio_b, m.ratio_ingest, m.scaling, m.of_core
    n_events, total, nbytes, half, t_pub = m.events, m.messages, m.nbytes, m.half, m.publish_s
    rows = throughput_rows(m)
    tables = tables_of(m, rows, defaults)
    targets = targets_of(m)
    figures_path = args.out / "bench_kafka.png"
    args.out.mkdir(parents=True, exist_ok=True)
    plotted = plot(figures_path, rows, lat)
    path = c.write(
        NAME,
        args,
        params={
            "events": n_events,
            "messages": total,
            "bytes": nbytes,
            "bootstrap": args.bootstrap,
            "input_partitions": defaults.kafka.input_partitions,
            "internal_partitions": partitions,
            "latency_rate_events_per_s": half,
            "latency_duration_s": {k: v["duration_s"] for k, v in lat.items()},
            "latency_settings": {k: v["env"] or "defaults" for k, v in lat.items()},
            "defaults": {
                "watermark_lateness_s": defaults.kafka.watermark_lateness_s,
                "watermark_step_s": defaults.kafka.watermark_step_s,
                "snapshot_every": defaults.kafka.snapshot_every,
                "snapshot_interval_s": defaults.kafka.snapshot_interval_s,
            },
            "publish_seconds": t_pub,
        },
        figures={
            "worker_ingest_events_per_s": r1["ingest_events_per_s"],
            "worker_join_events_per_s": r1["join_events_per_s"],
            "worker_end_to_end_events_per_s": r1["end_to_end_events_per_s"],
            "worker_batched_input_end_to_end_events_per_s": rb["end_to_end_events_per_s"],
            "two_workers_end_to_end_events_per_s": r2["end_to_end_events_per_s"],
            "direct_worker_end_to_end_events_per_s": m.d1["end_to_end_events_per_s"] if m.d1 else None,
            "direct_worker_batched_input_end_to_end_events_per_s": m.db["end_to_end_events_per_s"] if m.db else None,
            "scaling_two_over_one": scaling,
            **{f"latency_{k}_p50_ms": v["p50_ms"] for k, v in lat.items()},
            **{f"latency_{k}_p99_ms": v["p99_ms"] for k, v in lat.items()},
            "png": str(figures_path.name) if plotted else None,
        },
        baseline={
            "raw_consumer_events_per_s": base["events_per_s"],
            "raw_consumer": base,
            "raw_consumer_batched": base_b,
            "ceiling": ceiling,
        },
        ratio={
            "worker_end_to_end_over_raw_consumer": ratio,
            "worker_batched_input_end_to_end_over_raw_consumer_batched": ratio_b,
            "core_alone_over_raw_consumer": ceiling["core_events_per_s"] / base["events_per_s"],
            "worker_end_to_end_over_core_alone": r1["end_to_end_events_per_s"] / ceiling["core_events_per_s"],
            "worker_batched_input_end_to_end_over_core_alone": of_core(rb),
            "stages_in_process_over_core_alone": ceiling["stages_events_per_s"] / ceiling["core_events_per_s"],
            "worker_ingest_over_raw_consumer": ratio_ingest,
            "two_workers_over_one": scaling,
            "direct_two_workers_over_one_12_domains": m.direct_scaling,
            "direct_worker_end_to_end_over_core_alone": of_core(m.d1) if m.d1 else None,
            "direct_worker_batched_input_end_to_end_over_core_alone": of_core(m.db) if m.db else None,
        },
        targets=targets,
        tables=tables,
        extra={
            "runs": {
                "one_worker": r1,
                "one_worker_batched_input": rb,
                "one_worker_ready_first": m.one,
                "two_workers": r2,
                "direct_one_worker": m.d1,
                "direct_one_worker_batched_input": m.db,
                "direct_one_worker_12_domains": m.d1s,
                "direct_two_workers_12_domains": m.d2s,
            },
            "latency": {k: {kk: vv for kk, vv in v.items() if not kk.startswith("latencies")} for k, v in lat.items()},
            "textrich": {k: v for k, v in (m.textrich or {}).items() if k != "latency"},
        },
    )
    c.report("Faust workers on the real broker", tables, targets, path)
