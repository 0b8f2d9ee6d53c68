"""Benchmark 5: resident state per domain and per tracked request, and that it stays flat over time.

One simulated run of 10N minutes (default settings) through `parse_event` + `Monitor.observe`, with
checkpoints at N/2, N, 2N, 5N and 10N simulated minutes. At each: `Monitor.state_size()`, the deep size
of the monitor's object graph (every object reachable from it, counted once: sys.getsizeof over
gc.get_referents), per domain and per stage, and the process RSS. Baseline: the same figures at N
minutes; ratio: 10N over N. Bounded windows show as a ratio near 1; anything that grows with the
length of the run shows up here.

Note the index window is 900 s (15 min): N must exceed it for "N" to be steady state (full: N = 20).
"""

from __future__ import annotations

import contextlib
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as c
import orjson

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.events import EventError, parse_event
from streams.sim.simulate import DEFAULT_START_TS

NAME = "bench_memory"
_SKIP = (type, type(sys), type(len), type(lambda: 0))


def deep_size(root: object) -> int:
    """Bytes of every object reachable from root (each once), modules/types/functions excluded."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    getsize = sys.getsizeof
    referents = gc.get_referents
    while stack:
        obj = stack.pop()
        i = id(obj)
        if i in seen or isinstance(obj, _SKIP):
            continue
        seen.add(i)
        total += getsize(obj)
        stack.extend(referents(obj))
    return total


def checkpoint(mon: Monitor, minute: float) -> dict:
    gc.collect()
    size = mon.state_size()
    domains = {name: deep_size(dm) for name, dm in sorted(mon.domains.items())}
    settings_bytes = deep_size(mon.settings)
    joiner = deep_size(mon.joiner) - deep_size(mon.canaries)  # the canary registry is counted on its own
    row = {
        "minute": minute,
        "monitor_bytes": deep_size(mon) - settings_bytes,
        "domains_bytes": sum(domains.values()),
        "domain_max_bytes": max(domains.values()) if domains else 0,
        "joiner_bytes": joiner,
        "dedup_bytes": deep_size(mon.dedup),
        "canaries_bytes": deep_size(mon.canaries),
        "fingerprinter_bytes": deep_size(mon.fingerprinter),
        "rss_bytes": c.rss_bytes(),
        **size,
    }
    docs = size.get("index_docs", 0)
    row["index_bytes_per_doc"] = row["domains_bytes"] / docs if docs else None
    row["join_bytes_per_pending"] = joiner / size["pending_joins"] if size.get("pending_joins") else None
    row["per_domain"] = domains
    return row


def main(argv: list[str] | None = None) -> int:
    args = c.parser(__doc__.splitlines()[0]).parse_args(argv)
    n_min, rate = c.pick(args, full=(20.0, 4.0), quick=(3.0, 4.0), tiny=(0.5, 1.0))
    marks = sorted({n_min / 2, n_min, 2 * n_min, 5 * n_min, 10 * n_min})
    total_s = 10 * n_min * 60
    # Quick/tiny runs are shorter than the default 15-min index window; a 60 s window makes N steady state.
    settings = c.pick(
        args,
        full=DetectionSettings(),
        quick=DetectionSettings(index_window_s=60.0),
        tiny=DetectionSettings(index_window_s=10.0),
    )
    mon = Monitor(settings)
    gc.collect()
    rss0 = c.rss_bytes()
    rows: list[dict] = []
    prog = c.Progress("simulate+observe", 10 * n_min, not args.no_progress, " sim-min")
    events = 0
    nbytes = 0
    pending = list(marks)
    for ev in c.sim_events(args.seed, total_s, rate):
        minute = (ev["ts"] - DEFAULT_START_TS) / 60.0
        while pending and minute >= pending[0]:
            prog.update(pending[0], force=True)
            rows.append(checkpoint(mon, pending.pop(0)))
        raw = orjson.dumps(ev)
        nbytes += len(raw)
        with contextlib.suppress(EventError):  # duplicates etc.: counted by the monitor, not our concern
            mon.observe(parse_event(raw))
        events += 1
        if events % 512 == 0:
            prog.update(minute)
    while pending:
        rows.append(checkpoint(mon, pending.pop(0)))
    prog.done()

    cols = [
        "minute",
        "index_docs",
        "index_fingerprints",
        "pending_joins",
        "dedup_ids",
        "incidents_open",
        "domains_bytes",
        "domain_max_bytes",
        "joiner_bytes",
        "dedup_bytes",
        "fingerprinter_bytes",
        "monitor_bytes",
        "rss_bytes",
    ]
    mb_rows = [{k: (r[k] / c.MB if k.endswith("_bytes") else r[k]) for k in cols} for r in rows]
    for r, src in zip(mb_rows, rows, strict=True):
        r["B/doc"] = src["index_bytes_per_doc"]
    at_n = next(r for r in rows if r["minute"] == n_min)
    at_10n = rows[-1]
    keys = [
        "monitor_bytes",
        "domains_bytes",
        "joiner_bytes",
        "dedup_bytes",
        "fingerprinter_bytes",
        "rss_bytes",
        "index_docs",
        "index_fingerprints",
        "pending_joins",
        "dedup_ids",
    ]
    ratio = {k: (at_10n[k] / at_n[k] if at_n.get(k) else None) for k in keys}
    tables = {
        "state over simulated time (bytes in MB)": c.table(mb_rows, [*cols, "B/doc"]),
        "10N / N": c.table([{"figure": k, "at N": at_n[k], "at 10N": at_10n[k], "10N/N": ratio[k]} for k in keys]),
    }
    targets = {
        "domain state flat (10N/N <= 1.25)": c.target(ratio["domains_bytes"] or 0.0, 1.25, at_least=False),
        "monitor state flat (10N/N <= 1.25)": c.target(ratio["monitor_bytes"] or 0.0, 1.25, at_least=False),
    }
    path = c.write(
        NAME,
        args,
        params={
            "n_minutes": n_min,
            "rate": rate,
            "events": events,
            "bytes": nbytes,
            "seed": args.seed,
            "settings": settings.model_dump(exclude={"fingerprint_key"}),
            "rss_at_start": rss0,
        },
        figures={"at_10n": at_10n},
        baseline={"at_n": at_n},
        ratio=ratio,
        targets=targets,
        tables=tables,
        extra={"checkpoints": rows},
    )
    c.report("state and memory, N vs 10N simulated minutes", tables, targets, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
