"""The cluster fault bench's input: a simulator run with a leak incident, pulse alerts and ticks, in one file,
and the alert ids the embedded runner gives on that very file (what the workers must reproduce).

Pulses: the simulator's own alerts come in bursts, so "the longest time without alerts" would measure the
traffic, not a recovery. Every `pulse_s` of event time, each pulse domain (one per input partition, and one per
domain partition for the staged topology) gets an over-long request (prompt_tokens 900,000 against a prefill pool
of 681,280, the engine counting 1 input token): an alert every time, steadily, from every partition.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from _kafka_input import one_per_input_partition, one_per_partition, overlong_pair, prefill_stats

from streams.settings import Settings
from tests.support.rawevents import tick_events


def pulse_domains(input_partitions: int, internal_partitions: int) -> list[str]:
    """Domains that cover every input partition (direct: keyed by domain) and every domain partition (staged)."""
    return sorted(
        {
            *one_per_input_partition("zz-pulse-in", input_partitions),
            *one_per_partition("zz-pulse-dom", internal_partitions),
        }
    )


def build(directory: Path, duration_s: float, rate: float, pulse_s: float, seed: int = 7) -> dict[str, Any]:
    """Write directory/stream.jsonl; return {"path", "events", "alerts": {alert_id: kind}, "pulses", "span_s"}."""
    from streams.embedded.runner import EmbeddedRunner
    from streams.sim.simulate import SimConfig
    from streams.sim.writer import write_simulation

    k = Settings().kafka
    summary = write_simulation(directory / "sim", SimConfig(seed=seed, duration_s=duration_s, rate=rate))
    sim = [orjson.loads(line) for line in Path(summary["events_path"]).read_bytes().splitlines() if line.strip()]
    t0, t1 = float(sim[0]["ts"]), max(float(e["ts"]) for e in sim)
    domains = pulse_domains(k.input_partitions, k.internal_partitions)
    extra: list[dict[str, Any]] = [prefill_stats(d, t0 - 1.0) for d in domains]
    n = 0
    t = t0 + pulse_s
    while t < t1:
        for d in domains:
            # Re-sent now and then: a domain's cache_stats that is too old no longer tells its pool size.
            extra.append({**prefill_stats(d, t - 0.01), "event_id": f"{d}-stats-{n}"})
            req, resp = overlong_pair(f"{d}-pulse-{n}", d, t)
            extra.extend((req, {**resp, "ts": t + 0.001}))
        n += 1
        t += pulse_s
    # Stable: simulator events keep their file order at equal times, pulses after them.
    events = sorted(sim + extra, key=lambda e: float(e["ts"]))
    events.extend(tick_events(t1 + 1.0, k))
    path = directory / "stream.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(e) for e in events) + b"\n")
    os.environ.setdefault("CROSSTALK_DETECTION__FINGERPRINT_KEY", "crosstalk-cluster-bench-key")
    result = EmbeddedRunner(Settings()).run_files([str(path)])
    alerts = {a.alert_id: str(a.kind) for a in result.alerts}
    return {
        "path": str(path),
        "events": len(events),
        "alerts": alerts,
        "pulses": n * len(domains),
        "pulse_domains": domains,
        "span_s": t1 - t0,
    }
