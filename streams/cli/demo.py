"""`crosstalk demo`: a short simulated incident through the embedded runner, alerts shown as they fire."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson

from schemas.events import EventError, parse_event
from streams.cli.console import err, print_alert, print_evaluation, print_summary
from streams.embedded.runner import EmbeddedRunner
from streams.settings import Settings
from streams.sim.evaluate import evaluate
from streams.sinks import build_sinks
from streams.sinks.jsonl import AlertWriter


class _Console(AlertWriter):
    """Prints each high/critical alert, and the first of every other kind, as it fires."""

    def __init__(self) -> None:
        super().__init__(None)
        self.seen_kinds: set[str] = set()
        self.quiet = 0

    def on_alert(self, alert: Any) -> None:
        if alert.severity in ("high", "critical") or alert.kind not in self.seen_kinds:
            print_alert(alert)
        else:
            self.quiet += 1
        self.seen_kinds.add(alert.kind)


def run_demo(settings: Settings, *, seed: int, duration_s: float, fault_at_s: float, out: str | None) -> int:
    from streams.sim.simulate import SimConfig, iter_simulation

    config = SimConfig(seed=seed, duration_s=duration_s, fault_at_s=fault_at_s)
    err.rule("crosstalk demo")
    err.print(
        f"Simulating {duration_s:.0f} s of multi-tenant traffic (seed {seed}); the placeholder fault starts at "
        f"{fault_at_s:.0f} s on the incident deployment (prefill pool 681,280 tokens, window 1,048,576).",
        highlight=False,
    )
    out_dir = Path(out) if out else None
    events_fh = alerts_fh = None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        events_fh = (out_dir / "events.jsonl").open("wb")
        alerts_fh = (out_dir / "alerts.jsonl").open("wb")
    console = _Console()
    runner = EmbeddedRunner(settings, [console, AlertWriter(alerts_fh), *build_sinks(settings)])
    events, labels = iter_simulation(config)
    start = time.perf_counter()
    try:
        for obj in events:
            raw = orjson.dumps(obj)
            if events_fh is not None:
                events_fh.write(raw + b"\n")
            try:
                # Through the real wire path: bytes -> validation -> core.
                runner.feed(parse_event(raw, max_bytes=settings.ingest.max_event_bytes), "demo", None, raw)
            except EventError as exc:
                runner.reject("demo", None, exc.reason, exc.detail, raw)
        result = runner.finish(start)
    finally:
        for fh in (events_fh, alerts_fh):
            if fh is not None:
                fh.close()
    if console.quiet:
        err.print(f"(+{console.quiet} further lower-severity alerts not shown)", style="dim")
    print_summary(result)
    label_data = labels if isinstance(labels, dict) else labels.to_dict()
    if out_dir is not None:
        (out_dir / "labels.json").write_bytes(orjson.dumps(label_data))
    print_evaluation(evaluate(label_data, result.alerts), err)
    err.print(f"demo took {result.seconds:.1f} s wall time", style="dim")
    return 0
