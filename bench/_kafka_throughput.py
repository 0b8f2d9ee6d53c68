"""The Kafka benchmark's throughput runs: pre-fill a topic, the raw-consumer baseline, the in-process
ceilings, and workers timed from their /counters and the alerts of the end markers.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _common as c
import orjson

from schemas.events import NDJSON_CONTENT_TYPE
from streams.settings import Settings
from tests.support.kafkanames import KafkaNames
from tests.support.workerproc import WorkerProcess

# Events, not messages: a batched message carries many.
INGEST_EVENT_KEYS = {"ingest.request", "ingest.response", "ingest.cache_stats", "ingest.canary"}


def start_worker(
    names: KafkaNames, workdir: Path, label: str, extra_env: dict[str, str] | None = None
) -> WorkerProcess:
    """A worker subprocess for one stage of the run (quiet logs: the benchmark reads /counters)."""
    env = {**names.env(), **(extra_env or {})}
    return WorkerProcess(env, workdir / f"{label}-data", workdir / f"{label}.log", loglevel="warning")


async def publish(bootstrap: str, topic: str, msgs: Sequence[tuple[Any, ...]]) -> float:
    """(key, value) messages, or (key, value, partition) for the direct topology's explicit partitions."""
    from aiokafka import AIOKafkaProducer

    prod = AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=20, max_batch_size=512 * 1024, max_request_size=8 << 20
    )
    await prod.start()
    t0 = time.perf_counter()
    try:
        futs = []
        ndjson = [("content-type", NDJSON_CONTENT_TYPE)]
        for msg in msgs:
            key, value = msg[0], msg[1]
            partition = msg[2] if len(msg) > 2 else None
            # Keyless messages are the batched ones (see batched()).
            headers = ndjson if key is None else None
            futs.append(await prod.send(topic, value=value, key=key, partition=partition, headers=headers))
            if len(futs) >= 5000:
                await asyncio.gather(*futs)
                futs.clear()
        await asyncio.gather(*futs)
        await prod.flush()
    finally:
        await prod.stop()
    return time.perf_counter() - t0


async def raw_consume(bootstrap: str, topic: str, total: int, timeout_s: float) -> dict[str, Any]:
    """The baseline: read every message from the beginning and decode it, nothing else."""
    from aiokafka import AIOKafkaConsumer

    loads = orjson.loads
    t_start = time.perf_counter()
    cons = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await cons.start()
    n = 0
    events = 0
    t_first = t_last = None
    try:
        deadline = time.monotonic() + timeout_s
        while n < total and time.monotonic() < deadline:
            batch = await cons.getmany(timeout_ms=500, max_records=10_000)
            if batch and t_first is None:
                t_first = time.perf_counter()
            for records in batch.values():
                for r in records:
                    if r.headers:  # a batched message: every line is an event
                        for line in r.value.split(b"\n"):
                            loads(line)
                            events += 1
                    else:
                        loads(r.value)
                        events += 1
                n += len(records)
            t_last = time.perf_counter()
    finally:
        await cons.stop()
    if t_first is None or t_last is None or n < total:
        raise RuntimeError(f"raw consumer read {n} of {total} messages")
    return {
        "messages": n,
        "events": events,
        "seconds_first_to_last": t_last - t_first,
        "events_per_s": events / (t_last - t_first),
        "seconds_with_connect": t_last - t_start,
    }


def core_ceiling(lines: list[bytes]) -> dict[str, float]:
    """What no worker can beat: the same events through validation alone, and through the whole
    detection core (parse_event + Monitor.observe + flush) in this process, without Kafka or Faust."""
    from detectors.monitor import Monitor
    from detectors.settings import DetectionSettings
    from schemas.events import parse_event

    t0 = time.perf_counter()
    for raw in lines:
        parse_event(raw)
    t_parse = time.perf_counter() - t0
    m = Monitor(DetectionSettings())
    t0 = time.perf_counter()
    for raw in lines:
        m.observe(parse_event(raw))
    m.flush()
    t_core = time.perf_counter() - t0
    # The workers' own stage classes (ingest -> join -> domain, frames and records included) wired in
    # memory: what the stages cost without Faust and Kafka (tests/support/stagepipe.py).
    from tests.support.stagepipe import StagePipeline, feed_lines

    pipe = StagePipeline(Settings())
    t0 = time.perf_counter()
    feed_lines(pipe, lines, batch=1000)
    t_stages = time.perf_counter() - t0
    return {
        "parse_events_per_s": len(lines) / t_parse,
        "core_events_per_s": len(lines) / t_core,
        "stages_events_per_s": len(lines) / t_stages,
    }


def _interp(samples: list[tuple[float, int]], level: float) -> float | None:
    """Wall time at which a monotone count first reached `level` (linear between samples)."""
    prev: tuple[float, int] | None = None
    for t, v in samples:
        if v >= level:
            if prev is None or v == prev[1]:
                return t
            t0, v0 = prev
            return t0 + (t - t0) * (level - v0) / (v - v0)
        prev = (t, v)
    return None


def _wait_all_ready(workers: list[WorkerProcess], timeout_s: float, settle_s: float = 2.0) -> None:
    """Every worker /ready (input partitions assigned and consumed), then a pause for the group to settle."""
    deadline = time.monotonic() + timeout_s
    while not all(w.ready() for w in workers):
        for w in workers:
            if not w.alive():
                raise RuntimeError(f"worker exited:\n{w.log_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"workers not ready after {timeout_s}s")
        time.sleep(0.2)
    time.sleep(settle_s)


def _cpu_now(workers: Sequence[Any]) -> tuple[float, float, float] | None:
    """(the workers' CPU seconds, the machine's busy CPU seconds, monotonic time) from /proc; None elsewhere."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
        busy = (user + nice + system + irq + softirq + steal) / tick
        own = 0.0
        for w in workers:
            stat = Path(f"/proc/{w.proc.pid}/stat").read_text()
            rest = stat[stat.rindex(")") + 2 :].split()  # after the command name, which may hold spaces
            own += (int(rest[11]) + int(rest[12])) / tick  # utime, stime
        return own, busy, time.monotonic()
    except (OSError, ValueError, IndexError):
        return None


def run_workers(
    args: Any,
    names: KafkaNames,
    msgs_total: int,
    marker_domains: list[str],
    n_workers: int,
    workdir: Path,
    publish_when_ready: Sequence[tuple[Any, ...]] | None = None,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Start n workers on the pre-filled topic; sample /counters and the alerts topic until done.

    `publish_when_ready`: the topic is empty instead; the input is published once every worker is
    ready (partitions assigned) and the group has settled. On a pre-filled topic the first worker to
    join takes every partition and reads most of a short input before a rebalance hands any to the
    second (issue 16: 30,017 of 30,017 messages ingested by one of two workers), so worker scaling is
    measured this way."""
    from kafka import KafkaConsumer

    alerts = KafkaConsumer(
        names.alerts_topic,
        bootstrap_servers=names.bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        group_id=None,
    )
    markers = {f"{d}-marker" for d in marker_domains}
    seen: dict[str, float] = {}
    samples_ingest: list[tuple[float, int]] = []
    samples_join: list[tuple[float, int]] = []
    alerts_total = 0
    workers: list[WorkerProcess] = []
    cpu_start = cpu_end = cpu_first = None
    timeout_s = c.pick(args, full=900.0, quick=300.0, tiny=180.0)
    progress = c.Progress(f"{n_workers} worker(s)", msgs_total, enabled=not args.no_progress)
    try:
        alerts.poll(timeout_ms=200)  # join the topic before anything is produced to it
        t_launch = time.perf_counter()
        workers = [start_worker(names, workdir, f"{names.app_id}-w{i}", extra_env) for i in range(n_workers)]
        if publish_when_ready is not None:
            _wait_all_ready(workers, timeout_s=120.0)
            t_launch = time.perf_counter()
            cpu_start = _cpu_now(workers)
            asyncio.run(publish(names.bootstrap, names.input_topic, list(publish_when_ready)))
        deadline = time.monotonic() + timeout_s
        last_counters = 0.0
        final: list[dict[str, Any] | None] = []
        while True:
            for records in alerts.poll(timeout_ms=50).values():
                now = time.perf_counter()
                for r in records:
                    alerts_total += 1
                    a = orjson.loads(r.value)
                    for rid in a.get("request_ids") or ():
                        if rid in markers and rid not in seen:
                            seen[rid] = now
            now = time.perf_counter()
            if now - last_counters >= 0.1:
                last_counters = now
                cs = [w.counters() for w in workers]
                t = time.perf_counter()
                ok = [x for x in cs if x is not None]
                if len(ok) == len(cs):
                    ing = sum(v for x in ok for k, v in x["counters"].items() if k in INGEST_EVENT_KEYS)
                    join = sum(v for x in ok for k, v in x["counters"].items() if k.startswith("events."))
                    samples_ingest.append((t, ing))
                    samples_join.append((t, join))
                    if ing and cpu_first is None:  # the workers' CPU from their first event on (no start-up)
                        cpu_first = _cpu_now(workers)
                    progress.update(ing)
                    final = ok
            done_ingest = bool(samples_ingest) and samples_ingest[-1][1] >= msgs_total
            done_join = bool(samples_join) and samples_join[-1][1] >= msgs_total
            if done_ingest and done_join and len(seen) == len(markers):
                cpu_end = _cpu_now(workers)
                break
            for w in workers:
                if not w.alive():
                    raise RuntimeError(f"worker exited:\n{w.log_tail()}")
            if time.monotonic() > deadline:
                got = samples_ingest[-1][1] if samples_ingest else 0
                raise TimeoutError(
                    f"{n_workers} worker(s): after {timeout_s}s ingest={got}/{msgs_total}, "
                    f"markers {len(seen)}/{len(markers)}\n" + "\n---\n".join(w.log_tail() for w in workers)
                )
        progress.done()
    finally:
        for w in workers:
            w.stop()
        alerts.close()

    # First processed message: the first sample with a count, moved back by what it had already done.
    first = next(i for i, (_, v) in enumerate(samples_ingest) if v > 0)
    t_first, c_first = samples_ingest[first]
    t_ing_done = _interp(samples_ingest, msgs_total)
    assert t_ing_done is not None
    if t_ing_done > t_first:
        t0 = t_first - c_first / ((msgs_total - c_first) / (t_ing_done - t_first))
    else:
        # Everything was read between two samples (a tiny run): no rate to extrapolate with, so the
        # start is bounded by the last sample that saw nothing (or the launch).
        t0 = samples_ingest[first - 1][0] if first > 0 else t_launch
    if first > 0:
        t0 = max(t0, samples_ingest[first - 1][0])
    if publish_when_ready is not None:
        t0 = t_launch  # from the start of publishing: the input arrives while it is read
    t_join_done = _interp(samples_join, msgs_total)
    assert t_join_done is not None
    t_e2e = max(seen.values())
    t10, t90 = _interp(samples_ingest, 0.1 * msgs_total), _interp(samples_ingest, 0.9 * msgs_total)
    j10, j90 = _interp(samples_join, 0.1 * msgs_total), _interp(samples_join, 0.9 * msgs_total)
    cpu: dict[str, float] = {}
    if publish_when_ready is not None and cpu_start is not None and cpu_end is not None:
        # Where the machine's CPU went while the input was published and read: the workers (their own
        # processes) and everything else (the broker, this harness publishing and polling).
        cpu = {
            "wall_s": cpu_end[2] - cpu_start[2],
            "workers_cpu_s": cpu_end[0] - cpu_start[0],
            "machine_busy_cpu_s": cpu_end[1] - cpu_start[1],
        }
    if cpu_first is not None and cpu_end is not None:
        # The workers' own CPU seconds while they processed the input (from their first event to the last alert).
        cpu["processing_wall_s"] = cpu_end[2] - cpu_first[2]
        cpu["processing_workers_cpu_s"] = cpu_end[0] - cpu_first[0]
    counters: dict[str, int] = {}
    for x in final:
        for k, v in (x or {}).get("counters", {}).items():
            if k.startswith(("deadletter.", "domain.", "snapshots.", "restores.", "fresh.", "exchanges")):
                counters[k] = counters.get(k, 0) + v
    return {
        "workers": n_workers,
        "messages": msgs_total,
        "startup_s": t0 - t_launch,
        "ingest_events_per_s": msgs_total / (t_ing_done - t0),
        "join_events_per_s": msgs_total / (t_join_done - t0),
        "end_to_end_events_per_s": msgs_total / (t_e2e - t0),
        "end_to_end_seconds": t_e2e - t0,
        "ingest_steady_10_90_events_per_s": 0.8 * msgs_total / (t90 - t10) if t10 and t90 and t90 > t10 else None,
        "join_steady_10_90_events_per_s": 0.8 * msgs_total / (j90 - j10) if j10 and j90 and j90 > j10 else None,
        "alerts_read": alerts_total,
        "counters": counters,
        "cpu": cpu,
        # Each worker's share of the events it read: 1 / the largest share bounds the scaling.
        "per_worker_ingest": [
            sum(v for k, v in (x or {}).get("counters", {}).items() if k in INGEST_EVENT_KEYS) for x in final
        ],
    }
