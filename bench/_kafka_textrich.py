"""The Kafka benchmark's text-rich runs (issue 28): the direct topology's worker on traffic that carries text, beside
the text-rich core on the same events in the same run, and the latency of the direct topology at a rate the whole
setup sustains.

Input: the multilingual simulator traffic of bench/bench_textrich.py (chat answers, prompts, agent histories re-sent
up to ~180 KB), keyed by cache domain, PER_MESSAGE events to a message (at most MAX_MESSAGE_BYTES).

The rate of a latency run is found, not assumed: live traffic (event time = the wall clock) is produced by this
process at a trial rate, starting from half the worker's end-to-end rate on a pre-filled topic and going down by a
factor SLOWER per trial until a whole window (the length of the measurement) is sustained:
* the producer kept up: it sent >= 95 % of the events due in the window (this harness shares the machine);
* every injected over-long request raised its alert within the window's tail;
* no backlog grew: the median latency of the window's last third is at most 1.5 times that of its first third
  + 50 ms (a rate above what the setup sustains queues, and its latency grows for as long as it lasts);
* no backlog stood: the window's median latency is under STANDING_MS (at the worker's own limit a queue can stay
  level at seconds: sustained in name only, as any burst grows it).
The first sustained window is the measurement reported, with the trials that led to it. Between trials the worker
drains what a trial left queued. Then one more window at half the sustained rate, on the same worker: the tail of a
setup with headroom, beside the tail at its edge. Each window also records when the worker handed each alert to its
producer (the record's CreateTime) and when the broker acknowledged each injected response, so that a tail can be
placed: in the harness's producer, in the worker (its fetch or its processing), or in delivery.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import _common as c
import orjson
from _kafka_input import PER_MESSAGE, Direct, direct_input
from _kafka_latency import live_latency
from _kafka_throughput import publish, run_workers, start_worker

from streams.settings import Settings
from tests.support.kafkanames import KafkaNames
from tests.support.workerproc import wait_up

MAX_MESSAGE_BYTES = 4 << 20  # a batch of agent histories stays well under the producer's 8 MiB request
SLOWER = 0.7  # each trial of the sustained-rate search runs at this share of the previous one
MAX_TRIALS = 7
STANDING_MS = 500.0


def textrich_lines(args: Any) -> tuple[list[bytes], Path]:
    """The lines of bench_textrich's input (generated once into bench/data/), and its path."""
    import bench_textrich

    duration, rate, tenants = c.pick(args, full=(1200.0, 4.0, 24), quick=(300.0, 4.0, 24), tiny=(60.0, 1.0, 8))
    path, _ = bench_textrich.ensure_data(args, duration, rate, tenants)
    return [line for line in path.read_bytes().splitlines() if line.strip()], path


def textrich_core(lines: list[bytes], key: str) -> dict[str, float]:
    """The detection core alone on the same events (parse_event + Monitor.observe + flush), this process."""
    from detectors.monitor import Monitor
    from detectors.settings import DetectionSettings
    from schemas.events import parse_event

    text_mb = 0.0
    for raw in lines:
        ev = orjson.loads(raw)
        text_mb += sum(len(ev[f].encode()) for f in ("prompt_text", "output_text") if ev.get(f)) / c.MB
    m = Monitor(DetectionSettings(fingerprint_key=key))
    t0, p0 = time.perf_counter(), time.process_time()
    for raw in lines:
        m.observe(parse_event(raw))
    m.flush()
    wall, cpu = time.perf_counter() - t0, time.process_time() - p0
    return {
        "events": len(lines),
        "text_mb": text_mb,
        "core_wall_s": wall,
        "core_cpu_s": cpu,
        "core_events_per_s": len(lines) / wall,
        "core_events_per_cpu_s": len(lines) / cpu,
    }


def sized_batches(msgs: Direct, n_events: int, per_message: int, max_bytes: int) -> Direct:
    """As _kafka_input.direct_batched, a message also closed before it would pass `max_bytes`."""
    groups: dict[int, tuple[list[bytes], int]] = {}
    out: Direct = []
    for _, value, q in msgs[:n_events]:
        group, size = groups.get(q, ([], 0))
        if group and (len(group) >= per_message or size + len(value) + 1 > max_bytes):
            out.append((None, b"\n".join(group), q))
            group, size = [], 0
        group.append(value)
        groups[q] = (group, size + len(value) + 1)
    out.extend((None, b"\n".join(g), q) for q, (g, _) in groups.items() if g)
    out.extend(msgs[n_events:])
    return out


def textrich_worker(
    args: Any, bootstrap: str, lines: list[bytes], workdir: Path, env: dict[str, str]
) -> dict[str, Any]:
    """One direct-topology worker on the text-rich events, batched, from a pre-filled topic."""
    partitions = Settings().kafka.input_partitions
    dmsgs, ddomains, d_events = direct_input(lines, partitions)
    msgs = sized_batches(dmsgs, d_events, PER_MESSAGE, MAX_MESSAGE_BYTES)
    with KafkaNames.unique(bootstrap, "bench-textrich") as names:
        t_pub = asyncio.run(publish(bootstrap, names.input_topic, msgs))
        c.log(args, f"text-rich: published {len(msgs):,} messages ({d_events:,} events) in {t_pub:.1f}s")
        run = run_workers(args, names, len(dmsgs), ddomains, 1, workdir, extra_env=env)
    run["messages_published"] = len(msgs)
    run["publish_s"] = t_pub
    return run


def _sustained(res: dict[str, Any]) -> tuple[bool, str]:
    if res["achieved_rate"] < 0.95 * res["target_rate"]:
        return False, f"producer sent {res['achieved_rate']:,.0f} of {res['target_rate']:,.0f} ev/s"
    if res["missing"] or not res["alerts_timed"]:
        return False, f"{res['missing']} of {res['injected']} alerts not out in time"
    ms = res["latencies_in_order_ms"]
    third = max(1, len(ms) // 3)
    first, last = sorted(ms[:third]), sorted(ms[-third:])
    m1, m3 = first[len(first) // 2], last[len(last) // 2]
    if m3 > 1.5 * m1 + 50:
        return False, f"latency grew: median {m1:.0f} ms -> {m3:.0f} ms over the window"
    if res["p50_ms"] > STANDING_MS:
        return False, f"a queue stood: median {res['p50_ms']:.0f} ms"
    return True, f"median {m1:.0f} ms -> {m3:.0f} ms, producer {res['achieved_rate']:,.0f} ev/s"


def sustained_latency(
    args: Any, bootstrap: str, background: list[dict[str, Any]], start_rate: float, env: dict[str, str], label: str,
    workdir: Path,
) -> dict[str, Any]:  # fmt: skip
    """The latency at the first trial rate the whole setup sustains for a whole window (module docstring)."""
    window = c.pick(args, full=20.0, quick=12.0, tiny=6.0)
    names = KafkaNames.unique(bootstrap, f"bench-{label}")
    names.create()
    w = start_worker(names, workdir, names.app_id, env)
    steps: list[dict[str, Any]] = []
    direct = env.get("CROSSTALK_KAFKA__TOPOLOGY") == "direct"
    try:
        wait_up([w], 90)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (w.counters() is not None and w.ready()):
            time.sleep(0.2)
        rate = start_rate
        for trial in range(MAX_TRIALS):
            res = asyncio.run(
                live_latency(
                    args, names, background, rate, window, warmup_s=2.0, tail_s=3.0, inject_every_s=0.1,
                    direct=direct, run_tag=f"t{trial}-",
                )
            )  # fmt: skip
            ok, why = _sustained(res)
            steps.append({"rate": rate, "sustained": ok, "why": why, "p50_ms": res["p50_ms"], "p99_ms": res["p99_ms"]})
            c.log(args, f"latency ({label}): {rate:,.0f} ev/s: {'sustained' if ok else 'not sustained'} ({why})")
            if ok:
                break
            # What the trial left queued drains before the next one (its alerts took up to max_ms to come out).
            time.sleep(min(30.0, 3.0 + 2.0 * (res["max_ms"] or 0.0) / 1000.0))
            rate *= SLOWER
        if ok:
            # The same worker at half the sustained rate: the tail of a setup with headroom, beside the tail at the
            # edge (where one batch's processing is most of a window's latency).
            time.sleep(3.0)
            half = asyncio.run(
                live_latency(
                    args, names, background, rate * 0.5, window, warmup_s=2.0, tail_s=3.0, inject_every_s=0.1,
                    direct=direct, run_tag=f"h{trial}-",
                )
            )  # fmt: skip
            res["half_rate"] = {k: half[k] for k in ("achieved_rate", "alerts_timed", "missing", "p50_ms", "p90_ms",
                                                     "p99_ms", "max_ms", "handed_p99_ms")}  # fmt: skip
            c.log(args, f"latency ({label}) at half that rate: p99 {half['p99_ms']:,.0f} ms")
    finally:
        w.stop()
        names.delete()
    res["env"] = env
    res["duration_s"] = window
    res["sustained"] = steps[-1]["sustained"]
    res["rate_search"] = {"start_rate": start_rate, "window_s": window, "slower": SLOWER, "steps": steps}
    return res


def run_textrich(
    args: Any, workdir: Path, direct_env: dict[str, str], free_background: list[dict[str, Any]], free_rate: float
) -> dict[str, Any]:
    """The text-rich core and the direct worker on the same text-rich events; then the direct topology's latency at a
    sustained rate on text-free traffic (from half `free_rate`, its end-to-end rate) and on the text-rich traffic."""
    from tests.support.workerproc import kafka_env

    key = kafka_env(args.bootstrap, "x")["CROSSTALK_DETECTION__FINGERPRINT_KEY"]  # the workers' key
    lines, path = textrich_lines(args)
    core = textrich_core(lines, key)
    c.log(args, f"text-rich core: {core['core_events_per_s']:,.0f} ev/s ({core['core_cpu_s']:.1f}s CPU)")
    worker = textrich_worker(args, args.bootstrap, lines, workdir, direct_env)
    c.log(args, f"text-rich direct worker, batched: end to end {worker['end_to_end_events_per_s']:,.0f} ev/s")
    rich_background = [orjson.loads(raw) for raw in lines]
    lat = {
        "direct": sustained_latency(args, args.bootstrap, free_background, 0.5 * free_rate, direct_env, "latdir",
                                    workdir),
        "direct, text-rich": sustained_latency(args, args.bootstrap, rich_background,
                                               0.5 * worker["end_to_end_events_per_s"], direct_env, "latrich", workdir),
    }  # fmt: skip
    return {"path": str(path), "core": core, "worker": worker, "latency": lat, "free_rate": free_rate}


def textrich_tables(tr: dict[str, Any]) -> dict[str, str]:
    core, worker = tr["core"], tr["worker"]
    ratio = worker["end_to_end_events_per_s"] / core["core_events_per_s"]
    cpu = worker.get("cpu") or {}
    worker_cpu = cpu.get("processing_workers_cpu_s")
    rows = [
        {"run": "text-rich core alone, in process (baseline)", "events/s": core["core_events_per_s"],
         "MB/s of text": core["text_mb"] / core["core_wall_s"], "CPU s": core["core_cpu_s"], "vs core": 1.0},
        {"run": f"1 worker, direct topology, {PER_MESSAGE} events per message: end to end",
         "events/s": worker["end_to_end_events_per_s"],
         "MB/s of text": core["text_mb"] / worker["end_to_end_seconds"], "CPU s": worker_cpu, "vs core": ratio},
    ]  # fmt: skip
    lat_rows = []
    for label, res in tr["latency"].items():
        search = res["rate_search"]
        half = res.get("half_rate")
        if half:
            lat_rows.append(
                {"traffic": f"{label}, half that rate", "rate ev/s": half["achieved_rate"], "found from": "",
                 "alerts": half["alerts_timed"], "missing": half["missing"], "p50 ms": half["p50_ms"],
                 "p90 ms": half["p90_ms"], "p99 ms": half["p99_ms"], "max ms": half["max_ms"]}
            )  # fmt: skip
        lat_rows.append(
            {
                "traffic": label,
                "rate ev/s": res["achieved_rate"],
                "found from": f"{search['start_rate']:,.0f} ev/s, trial {len(search['steps'])}"
                + ("" if res.get("sustained", True) else " (none sustained)"),
                "alerts": res["alerts_timed"],
                "missing": res["missing"],
                "p50 ms": res["p50_ms"],
                "p90 ms": res["p90_ms"],
                "p99 ms": res["p99_ms"],
                "max ms": res["max_ms"],
            }
        )
    note = f"\n\nworker / core = {ratio:.1%} (wall clock, same events, same run)"
    if worker_cpu:
        by_cpu = core["core_cpu_s"] / worker_cpu
        note += f"; by CPU time: core {core['core_cpu_s']:.1f}s, worker {worker_cpu:.1f}s = {by_cpu:.1%}"
    return {
        "text-rich traffic (pre-filled topic; the core on the same events)": c.table(rows) + note,
        "latency event -> alert, direct topology, at a rate the whole setup sustains (producer included)": c.table(
            lat_rows
        )
        + "\n\nthe rate: from half the pre-filled end-to-end rate, x0.7 per trial window until the producer keeps up, "
        "every alert comes out and no backlog grows (bench/_kafka_textrich.py)",
    }


def textrich_targets(tr: dict[str, Any]) -> dict[str, Any]:
    ratio = tr["worker"]["end_to_end_events_per_s"] / tr["core"]["core_events_per_s"]
    out = {f"text-rich: direct worker, {PER_MESSAGE} per message, >= 50% of the text-rich core": c.target(ratio, 0.5)}
    for label, res in tr["latency"].items():
        p99 = res["p99_ms"]
        out[f"{label}: p99 event->alert <= 250 ms at a sustained rate"] = c.target(
            p99 if p99 is not None else float("inf"), 250.0, at_least=False, unit=" ms"
        )
        half = (res.get("half_rate") or {}).get("p99_ms")
        out[f"{label}: p99 event->alert <= 250 ms at half the sustained rate"] = c.target(
            half if half is not None else float("inf"), 250.0, at_least=False, unit=" ms"
        )
    return out
