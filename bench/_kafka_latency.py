"""The Kafka benchmark's latency run: live traffic at a set rate with over-long requests injected, timed
from the response's production to its alert on the alerts topic.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import _common as c
import orjson
from _kafka_input import domain_key_of, overlong_pair, prefill_stats
from _kafka_throughput import start_worker

from tests.support.kafkanames import KafkaNames
from tests.support.rawevents import key_of
from tests.support.workerproc import wait_up

# Low-latency settings of the latency run: watermarks follow the newest event at once, in 50 ms steps.
LOW_LATENCY_ENV = {"CROSSTALK_KAFKA__WATERMARK_LATENESS_S": "0", "CROSSTALK_KAFKA__WATERMARK_STEP_S": "0.05"}


async def live_latency(
    args: Any,
    names: KafkaNames,
    background: list[dict[str, Any]],
    rate: float,
    duration_s: float,
    warmup_s: float,
    tail_s: float,
    inject_every_s: float,
    direct: bool = False,
    run_tag: str = "",
) -> dict[str, Any]:
    """Produce live at `rate` with ts = now; inject over-long pairs; time alert arrival per response.

    `run_tag`: one of several runs against the same worker: every id this run sends is suffixed with it, so that
    none is a duplicate of an earlier run's (the worker would drop it unjudged)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    domain = "zz-bench-overlong"
    # Direct topology: keyed by cache domain (a request by its response's), canaries to every partition.
    rdom = {e["request_id"]: e["cache_domain"] for e in background if e["type"] == "response" and e.get("cache_domain")}
    partitions = names.settings().kafka.input_partitions

    def key_for(ev: dict[str, Any]) -> bytes | None:
        return domain_key_of(ev, rdom) if direct else key_of(ev)

    sent_at: dict[str, float] = {}
    got: dict[str, float] = {}
    # Until the worker handed the alert to its producer (the record's CreateTime, set at send): the rest of `got` is
    # delivery (the producer's queue, the broker, this consumer).
    handed: dict[str, float] = {}
    # When the broker acknowledged the injected response (this producer's share: a wait here is not the worker's).
    on_broker: dict[str, float] = {}
    stop = asyncio.Event()

    cons = AIOKafkaConsumer(
        names.alerts_topic,
        bootstrap_servers=names.bootstrap,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        fetch_max_wait_ms=20,
    )
    prod = AIOKafkaProducer(bootstrap_servers=names.bootstrap, acks="all", linger_ms=0)
    await cons.start()
    await prod.start()

    async def read_alerts() -> None:
        while not stop.is_set():
            batch = await cons.getmany(timeout_ms=50)
            now = time.time()
            for records in batch.values():
                for r in records:
                    a = orjson.loads(r.value)
                    for rid in a.get("request_ids") or ():
                        if rid in sent_at and rid not in got:
                            got[rid] = now - sent_at[rid]
                            handed[rid] = r.timestamp / 1000.0 - sent_at[rid]

    reader = asyncio.create_task(read_alerts())
    sent = 0
    injected = 0
    try:
        await cons.getmany(timeout_ms=100)
        st = prefill_stats(domain, time.time())
        await prod.send(names.input_topic, value=orjson.dumps(st), key=domain.encode())
        start = time.monotonic()
        next_inject = start + warmup_s
        stop_inject = start + duration_s - tail_s
        end = start + duration_s
        nbg = len(background)
        while True:
            now = time.monotonic()
            if now >= end:
                break
            due = int((now - start) * rate)
            while sent < due:
                ev = background[sent % nbg]
                key = key_for(ev)  # of the original: a re-sent request's suffixed id is not in `rdom`
                cycle = sent // nbg
                ev = dict(ev, ts=time.time())
                if cycle or run_tag:
                    ev["event_id"] = f"{ev['event_id']}~L{run_tag}{cycle}"
                    for f in ("request_id", "session_id"):
                        if ev.get(f):
                            ev[f] = f"{ev[f]}~L{run_tag}{cycle}"
                if key is None:  # a canary, direct topology
                    for part in range(partitions):
                        await prod.send(names.input_topic, value=orjson.dumps(ev), partition=part)
                else:
                    await prod.send(names.input_topic, value=orjson.dumps(ev), key=key)
                sent += 1
            if next_inject <= now < stop_inject:
                next_inject += inject_every_s
                rid = f"ovl-{run_tag}{injected}"
                injected += 1
                req, resp = overlong_pair(rid, domain, time.time())
                pair_key = domain.encode() if direct else rid.encode()
                await prod.send(names.input_topic, value=orjson.dumps(req), key=pair_key)
                t = time.time()
                resp["ts"] = t
                sent_at[rid] = t
                fut = await prod.send(names.input_topic, value=orjson.dumps(resp), key=pair_key)
                fut.add_done_callback(lambda _f, rid=rid: on_broker.__setitem__(rid, time.time()))
            await asyncio.sleep(0.002)
        produced_s = time.monotonic() - start
        # Background stops here: alerts not out yet would need event time to move on.
        deadline = time.monotonic() + 5.0
        while len(got) < len(sent_at) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.wait_for(reader, timeout=5)
        await prod.stop()
        await cons.stop()
    lat = sorted(got.values())
    ms = [1000.0 * x for x in lat]

    def q(p: float) -> float | None:
        if not ms:
            return None
        return ms[min(len(ms) - 1, round(p * (len(ms) - 1)))]

    return {
        "target_rate": rate,
        "achieved_rate": sent / produced_s,
        "background_events": sent,
        "injected": len(sent_at),
        "alerts_timed": len(got),
        "missing": len(sent_at) - len(got),
        "p50_ms": q(0.5),
        "p90_ms": q(0.9),
        "p99_ms": q(0.99),
        "max_ms": ms[-1] if ms else None,
        "latencies_ms": ms,
        "handed_p50_ms": _quantile(sorted(1000.0 * x for x in handed.values()), 0.5),
        "handed_p99_ms": _quantile(sorted(1000.0 * x for x in handed.values()), 0.99),
        # In order of injection: a backlog growing over the window shows as latencies growing in this list.
        "latencies_in_order_ms": [1000.0 * got[rid] for rid in sent_at if rid in got],
        "handed_in_order_ms": [1000.0 * handed[rid] for rid in sent_at if rid in handed],
        "on_broker_in_order_ms": [1000.0 * (on_broker[rid] - sent_at[rid]) for rid in sent_at if rid in on_broker],
    }


def _quantile(ms: list[float], p: float) -> float | None:
    return ms[min(len(ms) - 1, round(p * (len(ms) - 1)))] if ms else None


def latency_run(
    args: Any, bootstrap: str, background: list[dict[str, Any]], rate: float, env: dict[str, str], label: str,
    duration_s: float, tail_s: float, workdir: Path,
) -> dict[str, Any]:  # fmt: skip
    names = KafkaNames.unique(bootstrap, f"bench-{label}")
    names.create()
    w = start_worker(names, workdir, names.app_id, env)
    try:
        wait_up([w], 90)
        # Let the group settle (assignment, table recovery of empty changelogs) before timing.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            x = w.counters()
            if x is not None and w.ready():
                break
            time.sleep(0.2)
        c.log(args, f"latency ({label}): {rate:,.0f} ev/s for {duration_s:.0f}s, env {env or 'defaults'}")
        res = asyncio.run(
            live_latency(
                args, names, background, rate, duration_s, warmup_s=2.0, tail_s=tail_s,
                inject_every_s=c.pick(args, full=0.2, quick=0.2, tiny=0.5),
                direct=env.get("CROSSTALK_KAFKA__TOPOLOGY") == "direct",
            )
        )  # fmt: skip
        x = w.counters() or {}
        res["counters"] = {
            k: v for k, v in x.get("counters", {}).items() if k.startswith(("domain.", "snapshots.", "deadletter."))
        }
    finally:
        w.stop()
        names.delete()
    res["env"] = env
    res["duration_s"] = duration_s
    return res
