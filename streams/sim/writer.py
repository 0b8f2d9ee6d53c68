"""Running a profile and writing its output: events.jsonl(.gz), labels.json, leaks.jsonl, and the public corpus."""

from __future__ import annotations

import gzip
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from streams.sim.engine import Engine
from streams.sim.world import PROFILES, Labels, SimConfig


def make_simulator(config: SimConfig) -> Engine:
    if config.profile == "stdlib-code":
        from streams.sim.code_profile import CodeSimulator

        return CodeSimulator(config)
    if config.profile == "multilingual":
        from streams.sim.multilingual import MultilingualSimulator

        return MultilingualSimulator(config)
    raise ValueError(f"unknown profile {config.profile!r}; choose one of {', '.join(PROFILES)}")


def iter_simulation(config: SimConfig) -> tuple[Iterator[dict[str, Any]], Labels]:
    """Events as plain dicts in event-time order, and the labels (complete once the iterator is exhausted)."""
    sim = make_simulator(config)
    return sim.events(), sim.labels


def public_corpus(config: SimConfig) -> list[str]:
    """The public documents the profile's decoys are drawn from (what an operator would load as a corpus)."""
    return make_simulator(config).public_documents()


def write_public_corpus(path: Path, config: SimConfig) -> int:
    """One document per paragraph block, separated by a blank line and a form feed; returns the count."""
    docs = public_corpus(config)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n\f\n".join(docs) + "\n", encoding="utf-8")
    return len(docs)


def write_simulation(
    out_dir: Path, config: SimConfig, *, gzip_events: bool = False, progress: bool = False
) -> dict[str, Any]:
    """Write out_dir/events.jsonl(.gz), labels.json and leaks.jsonl; return a summary."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    events, labels = iter_simulation(config)
    path = out_dir / ("events.jsonl.gz" if gzip_events else "events.jsonl")
    counts: dict[str, int] = {"request": 0, "response": 0, "cache_stats": 0, "canary": 0}
    raw = path.open("wb")
    # mtime=0: the gzip header would otherwise differ between runs of the same seed.
    sink: BinaryIO | gzip.GzipFile = (
        gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) if gzip_events else raw
    )
    bar = None
    if progress:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        bar = Progress(
            TextColumn("simulating"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn()
        )
        bar.start()
        task = bar.add_task("sim", total=config.duration_s)
    try:
        buf: list[bytes] = []
        for n, ev in enumerate(events, 1):
            counts[ev["type"]] += 1
            buf.append(orjson.dumps(ev))
            if len(buf) >= 512:
                sink.write(b"\n".join(buf) + b"\n")
                buf.clear()
            if bar is not None and n % 1000 == 0:
                bar.update(task, completed=min(config.duration_s, ev["ts"] - config.start_ts))
        if buf:
            sink.write(b"\n".join(buf) + b"\n")
    finally:
        if sink is not raw:
            sink.close()
        raw.close()
        if bar is not None:
            bar.update(task, completed=config.duration_s)
            bar.stop()
    (out_dir / "labels.json").write_bytes(orjson.dumps(labels.to_dict(), option=orjson.OPT_INDENT_2))
    (out_dir / "leaks.jsonl").write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in labels.leaks))
    rows = labels.responses
    contaminated = [r for r in rows if r["contaminated"]]
    scenarios: dict[str, int] = {}
    for r in contaminated:
        scenarios[r["scenario"]] = scenarios.get(r["scenario"], 0) + 1
    return {
        "profile": config.profile,
        "events_path": str(path),
        "labels_path": str(out_dir / "labels.json"),
        "events": sum(counts.values()),
        "bytes": path.stat().st_size,
        "requests": counts["request"],
        "responses": counts["response"],
        "cache_stats": counts["cache_stats"],
        "canaries": counts["canary"],
        "overlong": sum(r["overlong"] for r in rows),
        "overlong_rejected": sum(r["overlong"] and r["status_code"] >= 400 for r in rows),
        "rejected": sum(r["status_code"] >= 400 for r in rows),
        "contaminated": len(contaminated),
        "contaminated_by_scenario": scenarios,
        "decoy_responses": sum(bool(r.get("decoys")) for r in rows if not r["contaminated"]),
        "cross_session": sum(r["leak_kind"] == "cross_session" for r in contaminated),
        "canary_leaks": sum(bool(r["canary_markers"]) for r in rows),
        "fault_onset_ts": labels.meta["fault_onset_ts"],
        "seconds": round(time.monotonic() - started, 2),
    }
