"""`crosstalk evaluate` figures per scenario and language group, and simulate -> replay -> evaluate per profile."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas.alert import Alert
from streams.cli.main import main
from streams.sim.evaluate import evaluate
from streams.sim.simulate import SimConfig, add_arguments, config_from_args


def _row(rid: str, **kw: Any) -> dict[str, Any]:
    row = {"request_id": rid, "tenant_id": "t-a", "ts": 100.0, "status_code": 200, "contaminated": False,
           "scenario": "clean", "decoys": [], "receiver_lang": "en", "source_lang": None, "leak_kind": None,
           "source_tenant_id": None, "source_tenant_ids": [], "canary_markers": []}  # fmt: skip
    return row | kw


def _leak(rid: str, scenario: str, receiver: str, source: str, ts: float) -> dict[str, Any]:
    return _row(rid, contaminated=True, scenario=scenario, receiver_lang=receiver, source_lang=source, ts=ts,
                leak_kind="cross_tenant", source_tenant_id="t-src", source_tenant_ids=["t-src", "t-other"])  # fmt: skip


def _alert(rid: str, severity: str, ts: float, source: str | None = "t-src", kind: str = "cross_tenant_contamination"):
    return Alert(alert_id=f"a-{rid}-{severity}", ts=ts, kind=kind, severity=severity, cache_domain="d",
                 source_tenant_id=source, request_ids=[rid], score=0.9, summary="s", group_key="g",
                 incident_id="i")  # fmt: skip


def test_figures_per_scenario_language_and_decoy() -> None:
    rows = [
        _leak("m1", "mechanism", "en", "zh", 10.0),
        _leak("m2", "mechanism", "zh", "de", 20.0),
        _leak("c1", "content_only", "ja", "zh", 30.0) | {"shortest_passage_tokens": 20},
        _leak("c2", "content_only", "de", "en", 40.0),
        _leak("c3", "content_only", "en", "ja", 50.0),
        _row("k1", decoys=["public_doc", "boilerplate"], scenario="decoy"),
        _row("k2", decoys=["translation"], scenario="decoy", receiver_lang="zh"),
        _row("k3"),
        _row("k4", status_code=400),
    ]
    alerts = [
        _alert("m1", "critical", 10.0),
        _alert("m2", "high", 25.0, source="t-other"),  # exposed; the lenient attribution only
        _alert("c1", "critical", 45.0),  # 15 s late
        _alert("c2", "warning", 40.0),  # not exposed, but attributed
        _alert("k1", "high", 60.0),  # a decoy false alarm
        _alert("k2", "warning", 60.0),
        _alert("k4", "critical", 60.0),  # not 2xx: no false alarm
    ]
    ev = evaluate({"meta": {}, "responses": rows}, alerts)
    assert (ev.contaminated, ev.flagged_contaminated, ev.attributed, ev.attributed_any_source) == (5, 3, 3, 4)
    assert ev.clean_2xx == 3 and ev.false_alarms == 1 and ev.warning_alarms == 2
    assert ev.false_alarm_rate == pytest.approx(1 / 3) and ev.warning_alarm_rate == pytest.approx(2 / 3)
    sc = ev.groups["scenario"]
    assert sc["mechanism"]["exposure"] == 1.0 and sc["mechanism"]["attribution_any_source"] == 1.0
    assert sc["mechanism"]["attribution"] == 0.5 and sc["mechanism"]["delay_s"] == 0.0
    assert sc["content_only"]["exposed"] == 1 and sc["content_only"]["attributed"] == 2
    assert sc["content_only"]["delay_s"] == pytest.approx(15.0)
    src = ev.groups["source_script"]
    assert src["cjk"]["contaminated"] == 3 and src["cjk"]["exposed"] == 2 and src["rest"]["contaminated"] == 2
    assert ev.groups["receiver_script"]["cjk"]["contaminated"] == 2
    assert set(ev.groups["source_lang"]) == {"zh", "de", "en", "ja"}
    assert ev.groups["scenario_x_source_script"]["content_only/cjk"]["contaminated"] == 2
    assert ev.groups["shortest_passage"] == {"16-24 tokens": ev.groups["shortest_passage"]["16-24 tokens"]}
    assert ev.groups["shortest_passage"]["16-24 tokens"]["exposed"] == 1
    dec = ev.groups["clean_by_decoy"]
    assert dec["public_doc"]["high"] == 1 and dec["translation"]["warning"] == 1 and dec["translation"]["high"] == 0
    assert dec["any_public_text"]["clean_2xx"] == 2 and dec["boilerplate"]["clean_2xx"] == 1
    assert ev.groups["clean_by_receiver_lang"]["zh"]["warning_rate"] == 1.0


def test_alerts_naming_a_tenant_whose_pages_are_not_in_the_response_are_counted() -> None:
    """One alert per victim has a price: an alert naming a tenant that is not a source. It is counted, not hidden."""
    rows = [_leak("m1", "mechanism", "en", "zh", 10.0), _leak("c1", "content_only", "en", "de", 20.0), _row("k1")]
    alerts = [
        _alert("m1", "critical", 10.0),
        _alert("m1", "high", 10.0, source="t-other"),  # the other victim: a source
        _alert("c1", "critical", 20.0, source="t-third"),  # no page of t-third in c1
        _alert("c1", "warning", 20.0, source="t-fourth"),  # below high: not a finding that names anyone
        _alert("k1", "high", 30.0, source="t-src"),  # a clean response: a false alarm, counted there
    ]
    ev = evaluate({"meta": {}, "responses": rows}, alerts)
    assert (ev.source_alerts, ev.misnamed_source_alerts) == (3, 1)
    assert ev.attributed == 1 and ev.false_alarms == 1


def test_old_labels_without_scenarios_still_evaluate() -> None:
    rows = [{"request_id": "r", "ts": 1.0, "status_code": 200, "contaminated": True, "leak_kind": "cross_tenant",
             "source_tenant_id": "x", "canary_markers": []}]  # fmt: skip
    ev = evaluate({"responses": rows}, [_alert("r", "high", 1.0, source="x")])
    assert ev.groups["scenario"]["mechanism"]["exposure"] == 1.0 and ev.attribution_accuracy == 1.0


def test_fault_defaults_to_half_the_duration() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = config_from_args(parser.parse_args(["--out", "x", "--duration", "300"]))
    assert cfg.fault_offset_s == 150.0
    assert (
        config_from_args(parser.parse_args(["--out", "x", "--duration", "300", "--fault-at", "20"])).fault_offset_s
        == 20
    )
    assert config_from_args(parser.parse_args(["--out", "x", "--no-fault"])).fault_offset_s is None
    assert SimConfig(duration_s=1200).fault_offset_s == 600.0


@pytest.mark.slow  # simulate, replay and evaluate through the CLI, per profile
@pytest.mark.parametrize("profile", ["stdlib-code", "multilingual"])
def test_simulate_replay_evaluate_end_to_end(profile: str, tmp_path: Path) -> None:
    out = tmp_path / "sim"
    # No --fault-at: `--duration 300` alone must make an incident (issue 11).
    assert main(["simulate", "--out", str(out), "--profile", profile, "--duration", "300", "--rate", "2", "--seed", "5",
                 "--public-corpus-out", str(tmp_path / "public.txt")]) == 0  # fmt: skip
    labels = orjson.loads((out / "labels.json").read_bytes())
    assert labels["meta"]["profile"] == profile
    assert labels["meta"]["fault_onset_ts"] == labels["meta"]["start_ts"] + 150.0
    assert (tmp_path / "public.txt").stat().st_size > 1000
    alerts = tmp_path / "alerts.jsonl"
    assert main(["replay", str(out / "events.jsonl"), "--alerts-out", str(alerts), "--quiet"]) == 0
    report = tmp_path / "eval.json"
    assert main(["evaluate", "--events", str(out / "events.jsonl"), "--labels", str(out / "labels.json"),
                 "--alerts", str(alerts), "--json", str(report)]) == 0  # fmt: skip
    fig = json.loads(report.read_text())
    scenarios = fig["groups"]["scenario"]
    assert set(scenarios) == ({"mechanism", "content_only"} if profile == "multilingual" else {"mechanism"})
    assert sum(s["contaminated"] for s in scenarios.values()) == fig["contaminated"] > 0
    # The placeholder fault announces itself: every mechanism leak is flagged, at once.
    assert scenarios["mechanism"]["exposure"] == 1.0 and scenarios["mechanism"]["delay_s"] == 0.0
    for group in ("receiver_lang", "source_lang", "receiver_script", "source_script"):
        assert sum(v["contaminated"] for v in fig["groups"][group].values()) == fig["contaminated"]
    assert sum(v["clean_2xx"] for v in fig["groups"]["clean_by_receiver_lang"].values()) == fig["clean_2xx"]
    if profile == "multilingual":
        assert {"cjk", "rest"} <= set(fig["groups"]["source_script"])
        assert "any_public_text" in fig["groups"]["clean_by_decoy"]
