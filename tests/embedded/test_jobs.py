"""`crosstalk replay --jobs N`: split by cache domain across processes, the alerts of one process."""

from __future__ import annotations

import io
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from factories import request, response

from detectors.back import DomainTable
from schemas.alert import Lead
from streams.embedded.jobs import Jobs, JobsError, job_of, moved_requests
from streams.embedded.runner import EmbeddedRunner, RunResult
from streams.settings import Settings
from streams.sim.simulate import SimConfig, write_simulation
from streams.sinks.base import Sink
from streams.sinks.jsonl import AlertWriter

ROOT = Path(__file__).resolve().parents[2]
KEY = "jobs-test-key"  # a test key, not a secret


def _settings() -> Settings:
    s = Settings()
    return s.model_copy(update={"detection": s.detection.model_copy(update={"fingerprint_key": KEY})})


@pytest.fixture(scope="module")
def traffic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Multilingual traffic with the fault on (content and mechanism leaks in four cache domains), plus lines that
    are rejected or move between jobs: a request whose response names another domain, one naming none, a
    duplicate event id, a line that is no JSON, an invalid event, and a text that is no string."""
    out = tmp_path_factory.mktemp("jobs")
    cfg = SimConfig(profile="multilingual", seed=3, duration_s=420.0, fault_at_s=120.0, tenants=10, rate=3.0)
    write_simulation(out, cfg, gzip_events=False, progress=False)
    lines = (out / "events.jsonl").read_bytes().splitlines()
    first = orjson.loads(next(x for x in lines if b'"type":"request"' in x))
    ts = first["ts"] + 30.0
    extra: list[dict[str, Any]] = [
        {**first, "event_id": "moved-rq", "request_id": "moved", "ts": ts, "cache_domain": "glm53-pc-1"},
        {"type": "response", "event_id": "moved-rs", "ts": ts + 2, "request_id": "moved", "tenant_id":
         first["tenant_id"], "model": "glm-5.3", "cache_domain": "glm53-pd-1", "status_code": 200,
         "output_text": first["prompt_text"][:3000]},
        {**first, "event_id": "nodomain-rq", "request_id": "nodomain", "ts": ts + 3, "cache_domain": None},
        {**first, "ts": ts + 4},  # a duplicate event id
        {**first, "event_id": "badtext", "ts": ts + 5, "prompt_text": 42},
        {"type": "response", "event_id": "invalid", "ts": ts + 6},
    ]  # fmt: skip
    at = next(i for i, x in enumerate(lines) if orjson.loads(x)["ts"] > ts + 6)
    lines[at:at] = [*map(orjson.dumps, extra), b"{not json"]
    path = out / "mixed.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _one(path: Path) -> tuple[RunResult, bytes, bytes]:
    alerts, rejects = io.BytesIO(), io.BytesIO()
    runner = EmbeddedRunner(_settings(), [AlertWriter(alerts)], rejects_out=rejects)
    return runner.run_files([str(path)]), alerts.getvalue(), rejects.getvalue()


def _split(path: Path, jobs: int, progress: list[int] | None = None) -> tuple[RunResult, bytes, bytes]:
    alerts, rejects = io.BytesIO(), io.BytesIO()
    split = Jobs(_settings(), [str(path)], jobs)
    split.start(exchanges=False)
    result = split.run([AlertWriter(alerts)], rejects, progress.append if progress is not None else None)
    return result, alerts.getvalue(), rejects.getvalue()


def _rejected(raw: bytes) -> list[tuple[Any, ...]]:
    rows = [orjson.loads(x) for x in raw.splitlines()]
    return sorted((r["line"], r["reason"], r["detail"], r["raw"]) for r in rows)


@pytest.fixture(scope="module")
def single(traffic: Path) -> tuple[RunResult, bytes, bytes]:
    return _one(traffic)


@pytest.mark.parametrize("jobs", [2, 3])
def test_jobs_give_the_alerts_rejects_and_counts_of_one_process(
    traffic: Path, single: tuple[RunResult, bytes, bytes], jobs: int
) -> None:
    one, one_alerts, one_rejects = single
    progress: list[int] = []
    many, many_alerts, many_rejects = _split(traffic, jobs, progress)
    alerts = [orjson.loads(x) for x in one_alerts.splitlines()]
    domains = {a["cache_domain"] for a in alerts}
    # Not vacuous: alerts of several domains, owned by different jobs; high and critical content findings among them.
    assert len({job_of(d, jobs) for d in domains}) > 1
    assert {"high", "critical"} <= {a["severity"] for a in alerts}
    # The same alerts, every field, in the same order, as the one process wrote them.
    assert many_alerts == one_alerts
    assert [a.alert_id for a in many.alerts] == [a.alert_id for a in one.alerts]
    # Each rejected line once, with the one process's reason.
    assert _rejected(many_rejects) == _rejected(one_rejects)
    assert {"duplicate", "not_json", "invalid"} <= set(one.rejects)
    assert many.rejects == one.rejects and many.events == one.events
    keys = ("exchanges", "orphans.no_request", "orphans.no_response", "exchanges.unroutable")
    assert {k: many.counters[k] for k in keys} == {k: one.counters[k] for k in keys}
    assert {k: v for k, v in many.counters.items() if k.startswith("alerts.")} == {
        k: v for k, v in one.counters.items() if k.startswith("alerts.")
    }
    assert [i.incident_id for i in many.incidents()] == [i.incident_id for i in one.incidents()]
    assert many.state_size["index_docs"] == one.state_size["index_docs"]
    # One progress figure across the jobs: never backwards, the whole input at the end.
    assert progress == sorted(progress) and progress[-1] == traffic.stat().st_size


def test_a_request_is_judged_where_its_response_was_decoded(traffic: Path) -> None:
    moved = moved_requests([str(traffic)])
    assert moved["moved"] == "glm53-pd-1"
    assert "nodomain" not in moved  # no response: judged nowhere (unroutable), in every job alike
    # The simulator's own requests whose response another domain decoded are in it too.
    assert len(moved) > 1


def test_a_failing_job_ends_the_run_with_its_error(traffic: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object, line: bytes) -> None:
        raise RuntimeError("parser bug")

    monkeypatch.setattr("streams.embedded.jobs.Partition.parse", broken)  # the forked jobs inherit it
    split = Jobs(_settings(), [str(traffic)], 2)
    split.start(exchanges=False)
    with pytest.raises(JobsError, match="parser bug"):
        split.run([])


def test_the_cli_splits_a_replay_and_refuses_stdin(traffic: Path, tmp_path: Path) -> None:
    env = {"CROSSTALK_DETECTION__FINGERPRINT_KEY": KEY, "PATH": "/usr/bin:/bin"}
    outs = []
    for jobs in ("1", "2"):
        out = tmp_path / f"alerts-{jobs}.jsonl"
        cmd = [sys.executable, "-m", "streams.cli", "replay", str(traffic), "--jobs", jobs, "--alerts-out", str(out)]
        proc = subprocess.run(
            [*cmd, "--rejects", str(tmp_path / f"rej-{jobs}.jsonl"), "--no-progress"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0]
    proc = subprocess.run(
        [sys.executable, "-m", "streams.cli", "replay", "-", "--jobs", "2"],
        cwd=ROOT, env=env, capture_output=True, text=True, input="", timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2 and "standard input can be read only once" in proc.stderr


def _fleet_world(path: Path) -> list[str]:
    """A phrase the model wrote for A in one domain and for C in another, then in R's answer in A's domain: the two
    domains are judged by different jobs of two. Returns the two domains."""
    names = [f"dom-{i}" for i in range(20)]
    d1 = names[0]
    d2 = next(d for d in names if job_of(d, 2) != job_of(d1, 2))
    rng = random.Random(5)
    pool = rng.sample([f"q{i:04d}" for i in range(5000)], 400)
    phrase, own, other = " ".join(pool[:24]), pool[24:84], pool[84:]
    events: list[Any] = []
    for i, (tenant, domain) in enumerate([("A", d1), ("C", d2)]):
        words = " ".join(other[i * 10 : i * 10 + 10])
        events += [
            request(f"s{i}", tenant, 1.0 + i, text=words, session_id=f"s{i}", cache_domain=domain),
            response(f"s{i}", tenant, 1.5 + i, text=f"{phrase} {words}", session_id=f"s{i}", domain=domain),
        ]
    for j in range(40):  # both domains warm up on unrelated traffic
        words = " ".join(other[100 + j * 5 : 105 + j * 5])
        dom = d1 if j % 2 else d2
        events += [
            request(f"w{j}", f"W{j}", 30.0 + j, text=words, session_id=f"w{j}", cache_domain=dom),
            response(f"w{j}", f"W{j}", 30.5 + j, text=f"ok {words}", session_id=f"w{j}", domain=dom),
        ]
    answer = " ".join(own[:20]) + f" {phrase} " + " ".join(own[20:40])
    events += [
        request("r1", "R", 700, text="tell me something", session_id="r", cache_domain=d1),
        response("r1", "R", 701, text=answer, session_id="r", domain=d1),
    ]
    path.write_bytes(b"".join(e.model_dump_json(exclude_none=True).encode() + b"\n" for e in events))
    return [d1, d2]


def _r_flagged(raw: bytes) -> bool:
    return any(
        a["tenant_id"] == "R" and a["severity"] in ("high", "critical") for a in map(orjson.loads, raw.splitlines())
    )


def test_each_job_hears_the_other_jobs_exchanges_for_the_fleet_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The model's habit is learned over both domains (detectors/fleet.py), though each job judges one of them: R's
    # answer is the model's phrase in every run, as in one process.
    path = tmp_path / "fleet.jsonl"
    _fleet_world(path)
    _, one, _ = _one(path)
    _, two, _ = _split(path, 2)
    assert one == two and not _r_flagged(one)
    # Control: a job that does not hear the other job's exchanges reads R's answer as a page of A.
    monkeypatch.setattr(DomainTable, "hear", lambda self, ex: None)
    _, deaf, _ = _split(path, 2)
    assert _r_flagged(deaf)


def test_jobs_give_the_leads_of_one_process(traffic: Path) -> None:
    # What the core judged below an alert, kept when asked (ADR 0035): the same leads, whichever job judged them.
    one = LeadList()
    runner = EmbeddedRunner(_settings(), [one])
    runner.record_leads()
    runner.run_files([str(traffic)])
    split, two = Jobs(_settings(), [str(traffic)], 2), LeadList()
    split.start(exchanges=False, leads=True)
    split.run([two])
    assert one.leads and sorted(one.leads) == sorted(two.leads)


class LeadList(Sink):
    def __init__(self) -> None:
        self.leads: list[str] = []

    def on_lead(self, lead: Lead) -> None:
        self.leads.append(lead.model_dump_json())
