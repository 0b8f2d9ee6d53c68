"""The simulator's incident as a Kafka test input: its events plus tick events, and the alert ids the
embedded runner gives on the very same file — what a run through Kafka (either topology) must reproduce."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson

from streams.embedded.runner import EmbeddedRunner
from streams.settings import Settings
from tests.support.rawevents import tick_events


def incident_with_ticks(directory: Path, duration_s: float = 240.0, fault_at_s: float = 80.0) -> dict[str, Any]:
    """{"path": events + ticks (.jsonl.gz), "alerts": {alert_id: kind} of the embedded runner, "events": n}.

    The ticks move every partition's event time past all pending joins and reorder buffers, as flush()
    does for the embedded core (which gets the same lines)."""
    from streams.sim.simulate import SimConfig, write_simulation

    summary = write_simulation(directory, SimConfig(duration_s=duration_s, fault_at_s=fault_at_s))
    lines = Path(summary["events_path"]).read_bytes().splitlines()
    last_ts = max(orjson.loads(line)["ts"] for line in lines if line.strip())
    path = directory / "events-with-ticks.jsonl.gz"
    ticks = [orjson.dumps(t) for t in tick_events(last_ts, Settings().kafka)]
    with gzip.open(path, "wb") as f:
        f.write(b"\n".join([*lines, *ticks]) + b"\n")
    result = EmbeddedRunner(Settings()).run_files([str(path)])
    alerts = {a.alert_id: a.kind for a in result.alerts}
    assert alerts, "the incident must raise alerts, else the comparison proves nothing"
    return {"path": str(path), "alerts": alerts, "events": sum(1 for line in lines if line.strip())}


def split_lines(path: str, share: float) -> tuple[str, str]:
    """The file's first `share` of lines and the rest, as two files beside it: a test that must stop a worker
    mid-stream produces the first, stops it, then the rest, so the next worker has input left to restore for
    (the whole file at once can be read to its end before a kill lands)."""
    with gzip.open(path) if path.endswith(".gz") else open(path, "rb") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    cut = int(len(lines) * share)
    stem = Path(path).with_suffix("").with_suffix("")
    out = []
    for name, part in (("head", lines[:cut]), ("tail", lines[cut:])):
        p = stem.parent / f"{stem.name}-{name}.jsonl"
        p.write_bytes(b"\n".join(part) + b"\n")
        out.append(str(p))
    return out[0], out[1]
