"""`crosstalk probe` against the live test engine over real HTTP on loopback, with the real openai SDK."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from streams.cli.main import main
from streams.sim.serving.core import EngineConfig
from streams.sim.serving.server import EngineThread, LiveEngine

FAST = ["--rate", "200"]


@pytest.fixture
def engine_factory() -> Iterator[Any]:
    started: list[EngineThread] = []

    def start(mode: str, **config: Any) -> EngineThread:
        th = EngineThread(LiveEngine(EngineConfig(**config), mode))  # type: ignore[arg-type]
        started.append(th)
        return th

    yield start
    for th in started:
        th.close()


def _probe(th: EngineThread, tmp_path: Path, *extra: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    report, events = tmp_path / "report.jsonl", tmp_path / "events.jsonl"
    code = main(["probe", "--base-url", th.base_url, *FAST, "--json", str(report), "--events", str(events), *extra])
    reports = [orjson.loads(line) for line in report.read_bytes().splitlines()] if report.exists() else [{}]
    evs = [orjson.loads(line) for line in events.read_bytes().splitlines()] if events.exists() else []
    return code, reports[-1], evs


def test_pd_abort_bug_is_found_naming_both_identities_and_the_cause(engine_factory: Any, tmp_path: Path) -> None:
    th = engine_factory("pd-abort-bug")
    code, report, _ = _probe(th, tmp_path)
    assert code == 1
    kinds = {f["kind"] for f in report["findings"]}
    assert {"canary_leak", "token_accounting_mismatch"} <= kinds
    leaks = {(f["tenant"], f["source_tenant"]) for f in report["findings"] if f["kind"] == "canary_leak"}
    assert leaks & {("probe-a", "probe-b"), ("probe-b", "probe-a")}
    accounting = [f for f in report["findings"] if f["kind"] == "token_accounting_mismatch"]
    assert all("usage.prompt_tokens=1" in f["detail"] for f in accounting)
    # Bounded: the ladder (7 rungs x 2 identities) plus one confirmation pair per identity.
    assert sum(th.engine.requests_by_tenant.values()) <= 7 * 2 + 2 * 2
    # The engine's ground truth agrees: the identities really read each other's pages.
    assert any(receiver == "probe-a" and "probe-b" in src for receiver, src in th.engine.leaks)


def test_pd_abort_bug_with_known_pool_flags_overlong_acceptance(engine_factory: Any, tmp_path: Path) -> None:
    th = engine_factory("pd-abort-bug")
    code, report, _ = _probe(th, tmp_path, "--pool-tokens", "4096")
    assert code == 1
    overlong = [f for f in report["findings"] if f["kind"] == "overlong_accepted"]
    assert overlong and all(f["sent_tokens"] > 4096 for f in overlong)


def test_fixed_engine_passes_with_exit_0(engine_factory: Any, tmp_path: Path) -> None:
    th = engine_factory("fixed")
    code, report, events = _probe(th, tmp_path)
    assert code == 0, report
    assert report["findings"] == []
    statuses = {p["status"] for p in report["probes"]}
    assert statuses == {200, 400}  # within the pool answered, beyond it refused
    assert th.engine.leaks == []
    assert {e["type"] for e in events} == {"canary", "request", "response"}


def test_prefix_collision_is_found_by_canaries(engine_factory: Any, tmp_path: Path) -> None:
    th = engine_factory("prefix-collision")
    code, report, _ = _probe(th, tmp_path)
    assert code == 1
    kinds = {f["kind"] for f in report["findings"]}
    assert kinds == {"canary_leak"}  # content only: counts, statuses and timing look normal
    assert all(f["sent_tokens"] <= 4096 for f in report["findings"])


def test_down_endpoint_exits_2_with_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    code = main(["probe", "--base-url", f"http://127.0.0.1:{port}/v1", *FAST])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "could not probe" in err[0] and "unreachable" in err[0] and str(port) in err[0]


def test_refused_identity_exits_2(engine_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    th = engine_factory("fixed")
    code = main(["probe", "--base-url", th.base_url, *FAST, "--identity", "probe-a=NO_SUCH_ENV_VAR_CT"])
    assert code == 2
    assert "NO_SUCH_ENV_VAR_CT" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("max_requests", "max_tokens"),
    [(3, 10_000_000), (50, 9_000), (6, 20_000), (1, 1_000)],
)
def test_budget_is_never_exceeded(engine_factory: Any, tmp_path: Path, max_requests: int, max_tokens: int) -> None:
    th = engine_factory("pd-abort-bug")
    code, report, _ = _probe(th, tmp_path, "--max-requests", str(max_requests), "--max-tokens", str(max_tokens))
    received = sum(th.engine.requests_by_tenant.values())
    assert received <= max_requests
    # Tokens counted at the engine (prompt words) plus the output the prober allowed for each request.
    assert sum(th.engine.tokens_by_tenant.values()) + received * 96 <= max_tokens
    assert received == report["budget"]["requests"]
    skipped = [p for p in report["probes"] if p["skipped"]]
    assert skipped, "these budgets are all too small for the whole ladder"
    assert code in (1, 2)  # a finding, or an incomplete run, never "clean"


def test_markers_are_never_printed_or_exported_in_clear(
    engine_factory: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    th = engine_factory("pd-abort-bug")
    code, report, events = _probe(th, tmp_path)
    assert code == 1
    out = capfd.readouterr()
    markers = [e["marker"] for e in events if e["type"] == "canary"]
    assert len(markers) == 2 and all(m.startswith("CTK-CANARY-") and len(m) == len("CTK-CANARY-") + 32 for m in markers)
    shown = out.out + out.err + orjson.dumps(report).decode()
    for m in markers:
        assert m not in shown
        assert m.split("-")[-1] not in shown  # not even the random part
    # Keyed ids are shown instead, and the wire to the monitor does carry the markers (requests, canaries).
    assert "canary marker" in out.err
    assert any(m in orjson.dumps(e).decode() for e in events if e["type"] == "request" for m in markers)


def test_schedule_runs_cycles_with_fresh_markers(engine_factory: Any, tmp_path: Path) -> None:
    th = engine_factory("fixed")
    report, events = tmp_path / "r.jsonl", tmp_path / "e.jsonl"
    schedule = ["--every", "0.2s", "--cycles", "2"]
    code = main(["probe", "--base-url", th.base_url, *FAST, *schedule, "--json", str(report), "--events", str(events)])
    assert code == 0
    assert len(report.read_bytes().splitlines()) == 2
    canaries = [orjson.loads(x) for x in events.read_bytes().splitlines() if b'"canary"' in x]
    canaries = [c for c in canaries if c["type"] == "canary"]
    assert len(canaries) == 4 and len({c["marker"] for c in canaries}) == 4


def test_events_to_stdout_feed_a_pipeline(engine_factory: Any, capfd: pytest.CaptureFixture[str]) -> None:
    th = engine_factory("fixed")
    code = main(["probe", "--base-url", th.base_url, *FAST, "--events", "-"])
    assert code == 0
    out = capfd.readouterr()
    lines = [orjson.loads(x) for x in out.out.splitlines()]
    assert lines and {e["type"] for e in lines} == {"canary", "request", "response"}
    assert "clean" in out.err  # the summary goes to stderr, stdout stays events only


@pytest.mark.slow  # crosstalk engine as a subprocess, probed over HTTP
def test_engine_command_serves_and_emits_events_for_the_probe(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    events = tmp_path / "engine-events.jsonl"
    cmd = [sys.executable, "-c", "import sys; from streams.cli.main import main; sys.exit(main(sys.argv[1:]))"]
    args = ["engine", "--port", "0", "--mode", "pd-abort-bug", "--events", str(events), "--stats-interval", "0.2"]
    proc = subprocess.Popen([*cmd, *args], stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("crosstalk engine: http://127.0.0.1:"), line
        base_url = line.split()[2]
        code = main(["probe", "--base-url", base_url, *FAST, "--identity", "probe-a", "--identity", "probe-b"])
        assert code == 1
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    lines = [orjson.loads(x) for x in events.read_bytes().splitlines()]
    stats = [e for e in lines if e["type"] == "cache_stats" and e["role"] == "prefill"]
    assert stats and stats[0]["capacity_tokens"] == 4096 and stats[0]["context_window"] == 8192
    assert not [e for e in lines if e["type"] in ("request", "response")]  # probes are the prober's to report


def test_pool_read_from_sglang_metrics_brackets_the_ladder(engine_factory: Any, tmp_path: Path) -> None:
    th = engine_factory("pd-abort-bug")
    metrics = th.base_url.removesuffix("/v1") + "/metrics"
    code, report, _ = _probe(th, tmp_path, "--metrics-url", metrics)
    assert code == 1 and report["pool"] == 4096
    assert {p["rung"] for p in report["probes"]} >= {"0.9 pool", "1.1 pool"}
    assert any(f["kind"] == "overlong_accepted" and f["sent_tokens"] > 4096 for f in report["findings"])


def test_unreadable_metrics_fall_back_to_window_fractions(
    engine_factory: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    th = engine_factory("fixed")
    code, report, _ = _probe(th, tmp_path, "--metrics-url", th.base_url + "/no-such-page")
    assert code == 0 and report["pool"] is None
    assert "no pool size" in capsys.readouterr().err


def _garbage_server(models: web.Response, chat_status: int) -> EngineThread:
    """An 'OpenAI-compatible' endpoint that is not: odd /models, and every chat request failing."""

    class Garbage(LiveEngine):
        def app(self) -> web.Application:
            app = web.Application()

            async def models_(request: web.Request) -> web.Response:
                return models

            async def chat(request: web.Request) -> web.Response:
                return web.json_response({"error": {"message": "boom"}}, status=chat_status)

            app.router.add_get("/v1/models", models_)
            app.router.add_post("/v1/chat/completions", chat)
            return app

    return EngineThread(Garbage(EngineConfig()))


@pytest.mark.parametrize(
    ("models", "chat_status", "expect"),
    [
        (web.Response(text="not json at all"), 200, "models"),
        (web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]}), 200, "no context window"),
        (web.json_response({"object": "list", "data": []}), 200, "lists no model"),
        (web.json_response({"data": [{"id": "m", "max_model_len": 8192}]}), 500, "no probe was accepted"),
    ],
)
def test_endpoints_that_cannot_be_probed_exit_2(
    models: web.Response, chat_status: int, expect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with _garbage_server(models, chat_status) as th:
        code = main(["probe", "--base-url", th.base_url, *FAST])
    assert code == 2
    assert expect in capsys.readouterr().err


def test_probe_events_replayed_give_overlong_accepted(engine_factory: Any, tmp_path: Path) -> None:
    """Issue 26: the probe's events carried the window but not the pool it read from --metrics-url, so
    `crosstalk replay` of them could not tell that an over-long prompt was accepted."""
    th = engine_factory("pd-abort-bug")
    metrics = th.base_url.removesuffix("/v1") + "/metrics"
    code, _, events = _probe(th, tmp_path, "--metrics-url", metrics)
    assert code == 1
    [pool] = [e for e in events if e["type"] == "cache_stats"]
    assert (pool["capacity_tokens"], pool["role"]) == (4096, "prefill")
    alerts = tmp_path / "alerts.jsonl"
    args = ["replay", str(tmp_path / "events.jsonl"), "--alerts-out", str(alerts), "--quiet"]
    assert main([*args, "--rejects", str(tmp_path / "rejects.jsonl")]) == 0
    # The finding, not the alert's kind: an exchange that also leaked a canary is a canary_leak alert carrying the
    # overlong acceptance as evidence. Whether some over-long exchange leaked none depends on the engine's timing.
    raised = [orjson.loads(line) for line in alerts.read_bytes().splitlines()]
    found = {a["kind"] for a in raised} | {signal["name"] for a in raised for signal in a["evidence"]}
    assert "overlong_accepted" in found, found
