"""`crosstalk probe` against hostile endpoints (issue 25), over real HTTP on loopback with the real SDK.

An advertised window of 10^15 is refused before any prompt is built; endless, slow and oversized answers
end at the per-answer deadline or byte cap and the cycle at its deadline; a marker's random part is
never shown, however the endpoint echoes it. The command runs as a subprocess with an address-space
limit, so that the unfixed prober fails these tests instead of eating the machine."""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from detectors.fingerprint import Fingerprinter
from streams.cli.main import main
from streams.probe.identities import MarkerBook
from streams.probe.run import Prober
from streams.settings import Settings
from tests.support.hostile import HostileServer

REPO = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 3 * 2**30


@pytest.fixture
def hostile() -> Iterator[HostileServer]:
    with HostileServer(drip_s=1.0, big_bytes=64 * 2**20) as srv:
        yield srv


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def probe_cli(base_url: str, tmp_path: Path, *extra: str, **env: str) -> tuple[int, str, dict[str, Any]]:
    """Run `crosstalk probe` in a subprocess: exit code, stderr, the JSON report ({} if none)."""
    report = tmp_path / "report.jsonl"
    cmd = [sys.executable, "-m", "streams.cli", "probe", "--base-url", base_url, "--rate", "200",
           "--json", str(report), *extra]  # fmt: skip
    proc = subprocess.run(
        cmd, cwd=REPO, capture_output=True, text=True, timeout=120, preexec_fn=_limit_memory,
        env={**os.environ, **{f"CROSSTALK_PROBE__{k.upper()}": v for k, v in env.items()}},
    )  # fmt: skip
    lines = report.read_bytes().splitlines() if report.exists() else []
    return proc.returncode, proc.stderr, orjson.loads(lines[-1]) if lines else {}


def test_a_window_of_ten_to_the_fifteen_is_refused_before_any_prompt_is_built(
    hostile: HostileServer, tmp_path: Path
) -> None:
    code, err, report = probe_cli(hostile.url("hugewindow") + "/v1", tmp_path, "--max-tokens", "1000000000")
    assert code == 2, err
    assert "beyond what the probe believes" in report["error"]
    assert "1,000,000,000,000,000" in report["error"] and "pass --window" in report["error"]
    assert hostile.prompts == []  # nothing was sent, nothing was built


def test_the_budget_is_paid_before_the_prompt_is_built(hostile: HostileServer) -> None:
    """Every rung above the budget is skipped without building its prompt: allocations stay small."""
    s = Settings(probe={"max_tokens": 50_000, "rate_per_s": 200.0})
    prober = Prober(s, hostile.url("ok") + "/v1", _identities(), window=2**24)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        report = asyncio.run(prober.run_cycle())
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        prober.close()
    assert report.skipped > 0 and report.exit_code == 2
    # 16.8 M-word prompts were never built: one would be ~100 MB of text, the unfixed prober built each rung's.
    assert peak < 32 * 2**20, f"peak {peak:,} bytes"


def _identities() -> list[Any]:
    from streams.probe.identities import parse_identity

    return [parse_identity("probe-a"), parse_identity("probe-b")]


@pytest.mark.parametrize(
    ("mode", "env", "expect"),
    [
        # a token every second: httpx's per-read timeout (3 s) never trips, the answer's deadline does
        ("slow-sse", {"timeout_s": "3"}, "no complete answer within 3 s"),
        ("endless-sse", {"timeout_s": "3"}, "no complete answer within 3 s"),
        ("endless-sse", {"timeout_s": "600", "max_response_bytes": "1048576"}, "over the 1,048,576-byte cap"),
        ("huge-length", {"timeout_s": "600"}, "10,000,000,000 bytes (Content-Length) over the 4,194,304-byte cap"),
        ("big-event", {"timeout_s": "600", "max_response_bytes": "1048576"}, "over the 1,048,576-byte cap"),
    ],
)
def test_endless_slow_and_oversized_answers_are_cut(
    hostile: HostileServer, tmp_path: Path, mode: str, env: dict[str, str], expect: str
) -> None:
    code, err, report = probe_cli(hostile.url(mode) + "/v1", tmp_path, "--max-requests", "2", **env)
    assert code == 2, err
    probes = [p for p in report["probes"] if not p["skipped"]]
    assert len(probes) == 2 and all(expect in p["error"] for p in probes), probes
    assert hostile.sent[mode] < 64 * 2**20  # the reads ended long before the 10 GB / endless body did


def test_the_cycle_ends_at_its_deadline(hostile: HostileServer, tmp_path: Path) -> None:
    code, err, report = probe_cli(hostile.url("slow-sse") + "/v1", tmp_path, "--deadline", "4s", timeout_s="600")
    assert code == 2, err
    assert "deadline (4 s, probe.deadline_s)" in report["error"]


def test_a_200_mb_sse_event_is_read_in_bounded_memory(hostile: HostileServer) -> None:
    s = Settings(probe={"max_requests": 1, "rate_per_s": 200.0, "max_response_bytes": 2**20})
    prober = Prober(s, hostile.url("big-event") + "/v1", _identities())
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        report = asyncio.run(asyncio.wait_for(prober.run_cycle(), 120))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        prober.close()
    assert peak < 16 * 2**20, f"peak {peak:,} bytes"  # the unfixed prober held the 64 MiB event several times
    assert [r.cut for r in report.results if r.skipped is None] == [
        "answer over the 1,048,576-byte cap: not read further"
    ]


def _random_parts(events: Path) -> list[str]:
    canaries = [orjson.loads(x) for x in events.read_bytes().splitlines()]
    markers = [e["marker"] for e in canaries if e["type"] == "canary"]
    assert len(markers) == 2
    return [m.rsplit("-", 1)[1] for m in markers]


@pytest.mark.parametrize("mode", ["echo-upper", "echo-bare"])
def test_markers_echoed_upper_cased_or_bare_are_never_shown(
    hostile: HostileServer, tmp_path: Path, mode: str, capfd: pytest.CaptureFixture[str]
) -> None:
    report, events = tmp_path / "report.jsonl", tmp_path / "events.jsonl"
    code = main(["probe", "--base-url", hostile.url(mode) + "/v1", "--rate", "200", "--max-requests", "4",
                 "--json", str(report), "--events", str(events)])  # fmt: skip
    assert code == 2
    shown = capfd.readouterr().err + report.read_text()
    assert "prompt rejected by policy" in shown  # the endpoint's message is shown, redacted
    for part in _random_parts(events):
        assert not _windows_left(part, shown), f"digits of a marker's random part shown ({mode})"
    assert "<marker:" in shown


def _windows_left(part: str, text: str) -> list[str]:
    """The 8-digit windows of a marker's random part still in text (any case)."""
    low = text.lower()
    return [part[i : i + 8] for i in range(len(part) - 7) if part[i : i + 8] in low]


def test_redaction_covers_case_prefix_and_truncation() -> None:
    book = MarkerBook(Fingerprinter("test-key", 8, 8))
    marker = book.plant("probe-a", "CTK-CANARY")
    part = marker.rsplit("-", 1)[1]
    for shown in (marker, marker.upper(), part, part.upper(), marker[:-10], f"x{part[5:17]}y", f"{part}{part[:9]}"):
        out = book.redact(f"error: {shown} end")
        assert not _windows_left(part, out) and "<marker:" in out, out
        assert out.startswith("error: ") and out.endswith(" end")
    assert book.redact("nonce probe-0123456789abcdef") == "nonce probe-0123456789abcdef"  # other hex stays


@pytest.mark.parametrize("value", ["+Inf", "1e308", "NaN", "0.5"])
def test_a_pool_read_as_no_token_count_falls_back_to_window_fractions(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from streams.sim.serving.core import EngineConfig
    from streams.sim.serving.server import EngineThread, LiveEngine
    from tests.support.engines import Engines, sglang_text

    metrics = Engines()
    url = metrics.add("sg", sglang_text(681_280, 0).replace("681280.0", value), None)
    try:
        with EngineThread(LiveEngine(EngineConfig(), "fixed")) as th:
            code = main(["probe", "--base-url", th.base_url, "--rate", "200", "--metrics-url", url + "/metrics"])
    finally:
        metrics.close()
    assert code == 0  # probed (the unfixed prober stopped on OverflowError / probed a pool of 0)
    assert "no pool size" in capsys.readouterr().err
