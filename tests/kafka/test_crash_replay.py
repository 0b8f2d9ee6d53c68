"""Workers that die at random points and restart from their checkpoints and committed offsets give the embedded
runner's alerts, in both topologies (tests/support/crashworld.py: durable in-memory topics, the workers' own
stages and Checkpointer, seeded schedules). The broker tests kill real workers; these try many more cuts."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from streams.producer import response_domains
from streams.settings import Settings
from tests.support.crashworld import DirectWorld, Schedule, StagedWorld
from tests.support.incident import incident_with_ticks


@pytest.fixture(scope="module")
def incident(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    inc = incident_with_ticks(tmp_path_factory.mktemp("crash-incident"))
    with gzip.open(inc["path"]) as f:
        inc["lines"] = [line for line in f.read().splitlines() if line.strip()]
    return inc


def _check(got: set[str], incident: dict[str, Any]) -> None:
    want = incident["alerts"]
    assert got == set(want), {"missing": {a: want[a] for a in set(want) - got}, "extra": len(got - set(want))}


# 18 and 23 lost a canary leak before the join waited for the watermark to scan a response's words: the
# marker's plant was read on its input partition after the leaking response on another.
@pytest.mark.parametrize("seed", [18, 23, pytest.param(3, marks=pytest.mark.slow)])
def test_staged_workers_crashing_mid_stream_lose_no_alert(incident: dict[str, Any], seed: int) -> None:
    out = StagedWorld(Settings(), incident["lines"]).run(Schedule(seed, crashes=3, skew=0.5))
    assert out.crashes == 3
    _check(out.alerts, incident)
    assert out.counters["join.replayed_skipped"] + out.counters["domain.replayed_skipped"] > 0  # it did replay


def test_direct_workers_crashing_mid_stream_lose_no_alert(incident: dict[str, Any]) -> None:
    s = Settings(kafka={"topology": "direct"})
    world = DirectWorld(s, incident["lines"], response_domains(incident["path"], 10**9), foreign=0.0, seed=11)
    out = world.run(Schedule(11, crashes=3))
    assert out.crashes == 3
    _check(out.alerts, incident)


def test_direct_workers_crashing_while_rerouting_lose_no_half(incident: dict[str, Any]) -> None:
    # Input keyed by request id: every response and its request are sent on to their domain's partition. That
    # order is not the file's (docs/operations.md), so the alerts are not compared; no half may be lost.
    s = Settings(kafka={"topology": "direct"})
    world = DirectWorld(s, incident["lines"], response_domains(incident["path"], 10**9), foreign=1.0, seed=12)
    out = world.run(Schedule(12, crashes=3))
    assert out.crashes == 3 and out.counters["direct.rerouted.response"] > 0
    lost = {k: v for k, v in out.counters.items() if k.startswith("orphans.") or k == "direct.misrouted"}
    assert not any(lost.values()), lost


def test_the_world_without_crashes_is_the_embedded_runner(incident: dict[str, Any], tmp_path: Path) -> None:
    out = StagedWorld(Settings(), incident["lines"]).run(Schedule(1, crashes=0))
    assert out.crashes == 0
    _check(out.alerts, incident)


# Two workers trading partitions (eager rebalances: every state dropped, reading from the committed offsets). 6 and 7
# judged 25 and 91 items out of order before a join partition merely slow stopped counting as gone after
# watermark_idle_s (and a join partition with no watermark yet said it was alive).
@pytest.mark.parametrize("seed", [6, 7])
def test_staged_workers_trading_partitions_judge_every_item_in_order(incident: dict[str, Any], seed: int) -> None:
    out = StagedWorld(Settings(), incident["lines"]).run(Schedule(seed, crashes=0, rebalances=3, skew=0.3))
    _check(out.alerts, incident)
    assert out.counters["domain.late_items"] == 0, out.counters
