"""End to end: the prober's events (and the engine's cache_stats) through the embedded monitor raise the
alerts an operator would see for real traffic, naming both probe tenants."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from schemas.events import parse_event
from streams.cli.live import run_live_demo
from streams.embedded.runner import EmbeddedRunner
from streams.outputs import FunctionOutput
from streams.probe.identities import Identity
from streams.probe.run import Prober
from streams.settings import Settings
from streams.sim.serving.core import EngineConfig
from streams.sim.serving.server import EngineThread, LiveEngine


def _settings() -> Settings:
    s = Settings()
    return s.model_copy(update={"probe": s.probe.model_copy(update={"rate_per_s": 200.0})})


def test_probe_events_through_the_embedded_runner_raise_canary_and_overlong_alerts() -> None:
    settings = _settings()
    events: list[dict[str, Any]] = []
    ticks: list[int] = []
    engine = LiveEngine(EngineConfig(cache_domain="sim-e2e"), "pd-abort-bug", on_event=events.append)
    with EngineThread(engine) as th:
        prober = Prober(
            settings,
            th.base_url,
            [Identity("probe-a", "probe-a"), Identity("probe-b", "probe-b")],
            output=FunctionOutput(events.append),
            cache_domain="sim-e2e",
            in_process=True,
            on_result=lambda r, planned: ticks.append(planned),
        )
        report = asyncio.run(prober.run_cycle())
    assert report.exit_code == 1
    assert len(ticks) == len(report.results) and ticks[-1] == len(report.results)  # progress saw every probe
    runner = EmbeddedRunner(settings)
    for e in sorted(events, key=lambda e: e["ts"]):
        runner.feed(parse_event(orjson.dumps(e)))
    result = runner.finish(0.0)
    assert not result.rejects, result.rejects
    by_kind: dict[str, list[Any]] = {}
    for a in result.alerts:
        by_kind.setdefault(a.kind, []).append(a)
    leaks = by_kind["canary_leak"]
    assert {(a.tenant_id, a.source_tenant_id) for a in leaks} & {("probe-a", "probe-b"), ("probe-b", "probe-a")}
    assert all(a.severity == "critical" for a in leaks)
    # The mechanism is in the evidence of every leak (the pool from the engine's cache_stats).
    for a in leaks:
        names = {s.name for s in a.evidence}
        assert {"overlong_accepted", "token_accounting_mismatch"} <= names
    # Every accepted probe above the pool is an alert of its own with the overlong acceptance in it: its kind is the
    # strongest conclusion (a canary leak, another probe's very same answer: ADR 0028, or the acceptance itself).
    over = {r.request_id for r in report.results if r.accepted and r.sent_tokens > 4096}
    alerted = {
        rid for a in result.alerts if any(s.name == "overlong_accepted" for s in a.evidence) for rid in a.request_ids
    }
    assert over and over <= alerted
    # The prober's own findings and the monitor agree on the marker ids (same keyed hash).
    prober_ids = {f.marker_id for f in report.findings if f.kind == "canary_leak"}
    monitor_ids = {s.figures["marker_id"] for a in leaks for s in a.evidence if s.name == "canary_leak"}
    assert prober_ids and prober_ids <= monitor_ids


@pytest.mark.slow  # the live demo: engine, prober and monitor, twice
def test_live_demo_finds_the_bug_then_passes_after_the_fix(capfd: Any) -> None:
    code = run_live_demo(_settings(), warmup_s=1.0, between_s=0.5)
    err = capfd.readouterr().err
    assert code == 0, err[-3000:]
    assert "canary_leak" in err and "exit 1 on the buggy engine, exit 0 after the fix" in err
    assert "CTK-CANARY-" not in err
