"""The CLI end to end: simulate -> replay -> evaluate, rejects, schema export, demo."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.alert import Lead
from streams.cli.main import _DELEGATED, main
from streams.sim.evaluate import TARGETS, evaluate, load_alerts

SIM = ["--seed", "3", "--duration", "240", "--fault-at", "60"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sim")
    assert main(["simulate", "--out", str(out), *SIM]) == 0
    return out


def _alerts(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow  # replay and evaluate of the simulated incident as subprocesses
def test_replay_finds_the_incident_and_evaluate_scores_it(sim: Path, tmp_path: Path) -> None:
    alerts_path = tmp_path / "alerts.jsonl"
    assert main(["replay", str(sim / "events.jsonl"), "--alerts-out", str(alerts_path), "--quiet"]) == 0
    alerts = _alerts(alerts_path)
    kinds = {a["kind"] for a in alerts}
    assert {"capacity_gap", "cross_tenant_contamination"} <= kinds
    report = tmp_path / "eval.json"
    assert main(["evaluate", "--events", str(sim / "events.jsonl"), "--labels", str(sim / "labels.json"),
                 "--alerts", str(alerts_path), "--json", str(report)]) == 0  # fmt: skip
    figures = json.loads(report.read_text())
    assert figures["contaminated"] > 0
    assert figures["exposure_recall"] == 1.0
    assert figures["false_alarm_rate"] == 0.0
    assert figures["detection_delay_s"] is not None and figures["detection_delay_s"] <= 60
    ep = figures["episodes"]  # the target's figure: every episode flagged, a new domain's within its hold
    assert ep["episodes_warm"] + ep["episodes_cold"] > 0 and ep["episodes_cold_missed"] == 0
    assert (ep["ttd_cold_s"] or 0) <= 600 and (ep["ttd_warm_s"] or 0) <= 60


@pytest.mark.slow  # replays the simulated incident three times (plain, gzip, again)
def test_replay_is_deterministic_and_reads_gzip(sim: Path, tmp_path: Path) -> None:
    gz = tmp_path / "events.jsonl.gz"
    gz.write_bytes(gzip.compress((sim / "events.jsonl").read_bytes()))
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    main(["replay", str(sim / "events.jsonl"), "--alerts-out", str(a), "--quiet"])
    main(["replay", str(gz), "--alerts-out", str(b), "--quiet"])
    assert a.read_bytes() == b.read_bytes() and a.stat().st_size > 0


def test_bad_lines_go_to_rejects_with_reasons_and_never_stop_the_run(tmp_path: Path) -> None:
    good_req = {"type": "request", "event_id": "e1", "ts": 10, "request_id": "r1", "tenant_id": "t", "model": "m",
                "prompt_tokens": 900_000}  # fmt: skip
    good_resp = {"type": "response", "event_id": "e2", "ts": 11, "request_id": "r1", "tenant_id": "t", "model": "m",
                 "cache_domain": "d", "status_code": 200, "usage": {"input_tokens": 1}}  # fmt: skip
    stats = {"type": "cache_stats", "event_id": "e0", "ts": 1, "cache_domain": "d", "role": "prefill",
             "capacity_tokens": 681280, "used_tokens": 5}  # fmt: skip
    lines = [
        json.dumps(stats),
        "this is not json",
        json.dumps({"type": "request", "event_id": "x", "ts": 2}),
        json.dumps(good_req),
        json.dumps(good_req),  # duplicate event_id
        json.dumps(good_req | {"event_id": "big", "prompt_text": "word " * 400_000}),
        "",
        json.dumps(good_resp),
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    alerts_path, rejects = tmp_path / "alerts.jsonl", tmp_path / "rejects.jsonl"
    settings = tmp_path / "s.toml"
    settings.write_text("[ingest]\nmax_event_bytes = 1048576\n")
    rc = main(["--config", str(settings), "replay", str(src), "--alerts-out", str(alerts_path),
               "--rejects", str(rejects), "--quiet"])  # fmt: skip
    assert rc == 0
    # Parse errors are found when a line is read, duplicates when it is processed: order by line.
    rows = sorted((json.loads(x) for x in rejects.read_text().splitlines()), key=lambda r: r["line"])
    assert [(r["line"], r["reason"]) for r in rows] == [
        (2, "not_json"),
        (3, "invalid"),
        (5, "duplicate"),
        (6, "oversized"),
    ]
    assert "request.request_id" in rows[1]["detail"]
    assert rows[0]["raw"] == "this is not json"
    assert [a["kind"] for a in _alerts(alerts_path)] == ["overlong_accepted"]


def test_replay_reads_stdin(tmp_path: Path) -> None:
    line = json.dumps(
        {"type": "canary", "event_id": "c", "ts": 0, "tenant_id": "probe-p", "marker": "CTK-CANARY-" + "ab" * 16}
    )
    proc = subprocess.run(
        [sys.executable, "-m", "streams.cli", "replay", "-", "--rejects", str(tmp_path / "r.jsonl")],
        input=line + "\nnot json\n", capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert proc.stdout == ""  # no alerts from a canary registration
    assert "events: canary" in proc.stderr and "rejected: not_json" in proc.stderr


def test_schema_command_writes_every_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--out", str(tmp_path)]) == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == sorted(
        f"{n}.schema.json"
        for n in ("alert", "cache_stats", "canary", "event", "exchange", "lead", "request", "response")
    )


@pytest.mark.slow  # the whole demo: simulate, detect, evaluate
def test_demo_runs_in_process_and_reports(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "streams.cli", "demo", "--duration", "150", "--fault-at", "40", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    assert "exposure recall" in proc.stderr and "CRITICAL" in proc.stderr
    assert (tmp_path / "alerts.jsonl").stat().st_size > 0 and (tmp_path / "labels.json").exists()


@pytest.mark.slow  # three whole demos
@pytest.mark.parametrize("key", ["demo-key-a", "demo-key-b", "demo-key-c"])
def test_the_demo_meets_every_target_it_prints(tmp_path: Path, key: str) -> None:
    # Issue 39: the demo once printed attribution 92 % against its own 95 %. Without a configured key it runs on a
    # random one, so the figures are checked under several keys, from its own output files.
    env = {**os.environ, "CROSSTALK_DETECTION__FINGERPRINT_KEY": key}
    proc = subprocess.run(
        [sys.executable, "-m", "streams.cli", "demo", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=True, env=env,
    )  # fmt: skip
    printed = [line for line in proc.stderr.splitlines() if any(t.name in line for t in TARGETS)]
    assert [t.shown in line for t, line in zip(TARGETS, printed, strict=True)] == [True] * len(TARGETS)
    ev = evaluate(json.loads((tmp_path / "labels.json").read_bytes()), load_alerts(str(tmp_path / "alerts.jsonl")))
    assert ev.unmet() == [], (ev.unmet(), ev.missed_request_ids, ev.misattributed_request_ids)


@pytest.mark.parametrize("command", ["replay", "demo", "schema", "settings", *sorted(_DELEGATED)])
def test_every_command_prints_its_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    # argparse formats help text lazily: a stray "%" in a help string only crashes when --help is asked for.
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert f"usage: crosstalk {command}" in capsys.readouterr().out


def test_replay_rejects_go_under_the_data_dir_and_the_summary_says_where(tmp_path: Path) -> None:
    """Issue 26: rejects went to ./crosstalk-rejects.jsonl (7 MB in a repository root once), unannounced."""
    import os
    import subprocess
    import sys

    events = tmp_path / "in.jsonl"
    events.write_text('{"type": "request", "nonsense": true}\nnot json\n')
    work = tmp_path / "cwd"
    work.mkdir()
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CROSSTALK_")} | {"CROSSTALK_DATA_DIR": str(data)}
    root = Path(__file__).resolve().parents[2]
    env["PYTHONPATH"] = str(root)
    proc = subprocess.run(
        [sys.executable, "-m", "streams.cli", "replay", str(events), "--quiet", "--alerts-out", str(tmp_path / "a")],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(work.iterdir()) == []  # nothing in the working directory
    [written] = list((data / "rejects").iterdir())
    assert len(written.read_text().splitlines()) == 2
    assert f"2 rejected lines written to {written}" in " ".join(proc.stderr.split())
    ignored = subprocess.run(["git", "check-ignore", "-q", "crosstalk-rejects.jsonl"], cwd=root)
    assert ignored.returncode == 0


def test_replay_writes_its_leads_beside_the_same_alerts(tmp_path: Path) -> None:
    # A tenant's text in its other session: an info finding on content alone, no alert, and a lead.
    from factories import TEXTS, request, response

    events = [
        request("a1", "alice", 1, text=TEXTS[1], session_id="s-old"),
        response("a1", "alice", 2, text="ok", session_id="s-old"),
        request("a2", "alice", 5, session_id="s-new"),
        response("a2", "alice", 6, text=TEXTS[1], session_id="s-new"),
    ]
    src = tmp_path / "events.jsonl"
    src.write_text("".join(e.model_dump_json() + "\n" for e in events))
    env = {"CROSSTALK_DETECTION__OVERLAP_WARMUP_DOCS": "0", "CROSSTALK_DETECTION__OVERLAP_WARMUP_S": "0",
           "CROSSTALK_DETECTION__FINGERPRINT_KEY": "leads-cli"}  # fmt: skip
    common = ["replay", str(src), "--quiet", "--no-progress", "--rejects", str(tmp_path / "r.jsonl")]
    run = lambda *extra: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "streams.cli", *common, *extra], env=os.environ | env, capture_output=True, text=True
    )
    assert run("--alerts-out", str(tmp_path / "a.jsonl")).returncode == 0
    assert run("--alerts-out", str(tmp_path / "b.jsonl"), "--leads-out", str(tmp_path / "leads.jsonl")).returncode == 0
    assert (tmp_path / "a.jsonl").read_bytes() == (tmp_path / "b.jsonl").read_bytes()
    (lead,) = [Lead.model_validate_json(line) for line in (tmp_path / "leads.jsonl").read_text().splitlines()]
    assert lead.request_id == "a2" and lead.findings[0].name == "cross_session_contamination"
    assert TEXTS[1][:40] not in (tmp_path / "leads.jsonl").read_text()  # no text, as in alerts
    split = run("--alerts-out", str(tmp_path / "c.jsonl"), "--leads-out", str(tmp_path / "l2.jsonl"), "--jobs", "2")
    assert split.returncode == 0 and (tmp_path / "l2.jsonl").read_bytes() == (tmp_path / "leads.jsonl").read_bytes()
